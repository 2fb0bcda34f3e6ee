"""Graphs that are hard to get right, each built fresh by a function.

Every case returns a ``Case``: what to walk, the params to name, and make_dot
options. The golden tests draw each one; other tests reuse them.
"""

from __future__ import annotations

import functools
from collections import namedtuple
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import nn

from graphviz_autograd import record
from graphviz_autograd.cli.model_file import load_model_file

SAMPLES = Path(__file__).parent.parent / "samples"


@dataclass
class Case:
    outputs: Any
    params: Any = None
    options: dict = field(default_factory=dict)


CASES: dict[str, Callable[[], Case]] = {}


def case(fn: Callable[[], Case]) -> Callable[[], Case]:
    CASES[fn.__name__] = fn
    return fn


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


@case
def diamond() -> Case:
    """y feeds two branches that meet again: y's op must be one node, not two."""
    x = torch.randn(3, requires_grad=True)
    y = x * 2
    return Case(y.sin() + y.cos(), {"x": x})


@case
def multiple_outputs() -> Case:
    """A dict of outputs sharing one subgraph, plus a namedtuple and a plain int."""
    model = _mlp()
    hidden = model[1](model[0](torch.randn(2, 4)))
    logits = model[2](hidden)
    Pair = namedtuple("Pair", ["first", "second"])
    outputs = {"logits": logits, "extra": Pair(hidden.sum(), 3), "steps": 7}
    return Case(outputs, model)


@case
def split_outputs() -> Case:
    """Two outputs of one multi-output op: both hang off the same SplitBackward0."""
    x = torch.randn(4, requires_grad=True)
    a, b = (x * 3).split(2)
    return Case((a, b), {"x": x})


@case
def leaf_output() -> Case:
    """An output that is itself a leaf, next to one computed from it."""
    w = torch.randn(2, requires_grad=True)
    return Case([w, w.exp()], {"w": w})


@case
def inplace_and_views() -> Case:
    """An in-place op on a slice: CopySlices wraps the op, with an as_strided view."""
    x = torch.randn(4, requires_grad=True)
    y = x.clone()
    y[1:3] *= 2
    z = y.view(2, 2).t()
    z.add_(1)
    return Case(z.sum(), {"x": x})


class ScaledSquare(torch.autograd.Function):
    """A custom Function that saves its input and a scale."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.scale = scale
        return scale * x * x

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple:
        (x,) = ctx.saved_tensors
        return grad * 2 * ctx.scale * x, None


@case
def custom_function() -> Case:
    x = torch.randn(3, requires_grad=True)
    return Case(ScaledSquare.apply(x, 0.5).sum(), {"x": x})


@case
def custom_function_saved() -> Case:
    """The same custom Function with its saved tensor and ctx attributes shown."""
    x = torch.randn(3, requires_grad=True)
    return Case(ScaledSquare.apply(x, 0.5).sum(), {"x": x}, {"show_attrs": True, "show_saved": True})


@case
def double_backward() -> Case:
    """The graph of a gradient taken with create_graph=True."""
    x = torch.randn(3, requires_grad=True)
    y = (x**3).sum()
    (grad,) = torch.autograd.grad(y, x, create_graph=True)
    return Case(grad, {"x": x})


@case
def checkpointed() -> Case:
    """Non-reentrant and reentrant activation checkpointing side by side."""
    model = _mlp()
    x = torch.randn(2, 4, requires_grad=True)
    a = torch.utils.checkpoint.checkpoint(model, x, use_reentrant=False)
    b = torch.utils.checkpoint.checkpoint(model, x, use_reentrant=True)
    return Case({"non_reentrant": a.sum(), "reentrant": b.sum()}, model, {"show_attrs": True})


@case
def after_backward() -> Case:
    """Saved values asked for after backward() freed them: shown as freed, never raised."""
    model = _mlp()
    loss = model(torch.randn(2, 4)).pow(2).mean()
    loss.backward()
    return Case(loss, model, {"show_attrs": True, "show_saved": True})


@case
def saved_attrs() -> Case:
    """show_attrs and show_saved on a small MLP with a reduction."""
    model = _mlp()
    return Case(model(torch.randn(2, 4)).sum(dim=1).mean(), model, {"show_attrs": True, "show_saved": True})


@case
def meta_tensors() -> Case:
    """A model on the meta device: shapes only, no data anywhere."""
    with torch.device("meta"):
        model = _mlp()
        x = torch.randn(2, 4)
    return Case(model(x).sum(), model)


@case
def dtypes() -> Case:
    """Non-default dtypes are shown; float32 is not."""
    w = torch.randn(2, 2, dtype=torch.float64, requires_grad=True)
    c = torch.randn(2, dtype=torch.complex64, requires_grad=True)
    return Case({"real": (w @ w).sum(), "complex": c.abs().sum()}, {"w": w, "c": c})


@case
def frozen_and_buffers() -> Case:
    """A frozen layer and a BatchNorm's buffers: no-grad inputs, not parameters."""
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
    for p in model[0].parameters():
        p.requires_grad_(False)
    return Case(model(torch.randn(3, 4)).sum(), model)


@case
def unnamed_leaf() -> Case:
    """A leaf that requires grad but is missing from params is flagged (unnamed)."""
    model = _mlp()
    stray = torch.ones(2, requires_grad=True)
    return Case((model(torch.randn(1, 4)) * stray).sum(), model)


@case
def no_grad_inside_forward() -> Case:
    """A forward that computes a mask under torch.no_grad() and detaches a target."""
    model = _mlp()
    x = torch.randn(2, 4)
    out = model(x)
    with torch.no_grad():
        mask = (out > 0).float() * model[0].weight.sum()
    target = out.detach().roll(1, dims=0)
    return Case(F.mse_loss(out * mask, target), model)


@case
def styled() -> Case:
    """Every option that changes the look: direction, hidden no-grad inputs, theme, legend."""
    model = _mlp()
    options = {
        "direction": "LR",
        "show_no_grad": False,
        "theme": {"output": "palegreen", "op": {"fillcolor": "white", "penwidth": "2"}},
        "legend": True,
    }
    return Case((model(torch.randn(1, 4)) * 2).sum(), model, options)


@case
def long_names() -> Case:
    """Names longer than max_attr_chars keep their end and carry the full name as tooltip."""
    w = torch.randn(2, requires_grad=True)
    name = "encoder.layers.11.self_attention.query_key_value.weight"
    return Case((w * 2).sum(), {name: w}, {"max_attr_chars": 20})


@case
def hostile_names() -> Case:
    """Quotes, backslashes, entities, newlines and unicode in names and keys."""
    a = torch.randn(1, requires_grad=True)
    b = torch.randn(1, requires_grad=True)
    params = {'say "hi" \\ <b>&amp;</b>': a, "line\nbreak\\": b}
    return Case({"loss é ✓ \\N": (a * b).sum()}, params)


# --- recorded forward passes: module clusters and named cuts ---------------------


def _recorded(model: nn.Module, *inputs: Any, options: Optional[dict] = None) -> Case:
    with record(model) as recorder:
        out = model(*inputs)
    return Case(out, model, {"recorder": recorder, **(options or {})})


@case
def recorded_requires_grad_false_vs_detach() -> Case:
    """The tutorials' example: x never required grad, z was cut off with detach(); the picture names both."""
    loaded = load_model_file(SAMPLES / "detach_vs_no_grad.py")
    return _recorded(loaded.model, *loaded.example_inputs)


class _FrozenBackbone(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.backbone = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU())
        self.head = nn.Linear(4, 2)
        self.register_buffer("scale", torch.full((2,), 0.5))
        self.backbone.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x)) * self.scale


@case
def recorded_frozen_submodule_and_buffer() -> Case:
    """A frozen backbone feeds a trained head, scaled by a buffer."""
    return _recorded(_FrozenBackbone().eval(), torch.randn(3, 4))


class _Gate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        with torch.no_grad():
            gate = torch.sigmoid(h).round()  # a hard gate: no gradient through it
        return h * gate


class _NoGradBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.encoder = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
        self.gate = _Gate()
        self.head = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.encoder(x)
        target = h.detach().mean()
        return (self.head(self.gate(h)) - target).pow(2).mean()


@case
def recorded_no_grad_block() -> Case:
    """A no_grad block inside a submodule's forward and a detached target."""
    return _recorded(_NoGradBlock(), torch.randn(2, 4))


@case
def recorded_mnist_cnn() -> Case:
    """The MNIST network with every module as a cluster."""
    loaded = load_model_file(SAMPLES / "mnist_cnn.py")
    return _recorded(loaded.model, *loaded.example_inputs)


@case
def shared_weights_rnn() -> Case:
    """One RNN cell over 10 steps: its weights have 10 uses each, so each use gets a copy."""
    torch.manual_seed(0)
    cell = nn.RNNCell(3, 4)
    h = torch.zeros(1, 4)
    for x in torch.randn(10, 1, 3):
        h = cell(x, h)
    return Case(h.sum(), cell)


@functools.lru_cache(maxsize=1)
def _gpt2_small() -> tuple[Any, Any, Any]:
    """GPT-2 small (12 layers) from its config, no weights, recorded once for both depths."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).eval()
    with record(model) as recorder:
        logits = model(torch.arange(8).unsqueeze(0)).logits
    return logits, model, recorder


@case
def gpt2_small_depth1() -> Case:
    """GPT-2 small with each module one level below the model as a box: the 12 blocks are one."""
    logits, model, recorder = _gpt2_small()
    return Case(logits, model, {"recorder": recorder, "depth": 1})


@case
def gpt2_small_depth2() -> Case:
    """GPT-2 small two levels down: the 12 identical blocks fold into one box marked ×12."""
    logits, model, recorder = _gpt2_small()
    return Case(logits, model, {"recorder": recorder, "depth": 2})
