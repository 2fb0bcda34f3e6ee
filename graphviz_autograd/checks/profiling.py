"""Measure a training step on the graph: the forward time, backward time and backward memory of every node.

``torch.profiler`` tags the forward op that created an autograd node and the
backward range of that node (``autograd::engine::evaluate_function: XBackward0``)
with the node's sequence number, and a walk with ``collect_sequence_numbers``
knows the number of each node it drew. :func:`profile_step` runs a recorded
warm-up step, walks its graph, then runs the steps it measures under the profiler
and matches their events to the walked nodes by sequence number, counted from
the start of each step (every step of a model makes its nodes in the same order).

What it measures, per node of the walked graph:

- ``forward_time``: the forward op that created the node (the innermost op the
  profiler tagged with its number: ``aten::addmm``, not the ``aten::linear`` around it);
- ``backward_time``: the node's ``evaluate_function`` range, which runs its backward
  and hands the gradients to the next nodes; an ``AccumulateGrad`` node's range has no
  number, and is matched through the node that fed it (autograd runs it right after);
- ``backward_memory``: the bytes allocated inside that range (frees not subtracted).

Times are the CPU time of each range (wall time on the CPU, as the profiler's
``cpu_time``), or, on CUDA, the time of the kernels launched inside it. Each is
the median over the measured steps. What the profiler saw but could not match to
a node, and nodes with no event, are counted in :class:`Unmatched`, and the
profiler's own cost is measured by timing the same steps without it.

>>> import torch
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
>>> profile = profile_step(model, torch.randn(2, 4), steps=2)
>>> sorted({op.module for op in profile.ops})
['0', '1', '2']
>>> times = profile.node_values("backward_time")
>>> all(profile.op(node_id).label.endswith(("Backward0", "AccumulateGrad")) for node_id in times)
True

A measured step changes nothing the caller can see: the parameters, buffers,
``.grad`` of each parameter, the optimizer's state and the random number
generators are as they were before (see :func:`profile_step`).
"""

from __future__ import annotations

import bisect
import contextlib
import copy
import functools
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Optional, Sequence

import torch

from .diagnosis import repeated_module_patterns
from .memory import StepMemory, measure_memory
from ..graph.descriptions import format_bytes, format_seconds
from ..errors import (
    DeviceUnavailableError,
    GraphvizAutogradError,
    MetaDeviceError,
    NoGraphError,
    NoModulesError,
    OptionError,
    StepFailedError,
    check_choice,
    first_line,
)
from ..views.diffing import diff
from ..views.overlays import Overlay
from ..graph.autograd_graph import ACCUMULATE_GRAD, OP, AutogradGraph, ModuleInfo, module_of_call
from ..capture.naming import named_tensors

FORWARD_TIME = "forward_time"
BACKWARD_TIME = "backward_time"
BACKWARD_MEMORY = "backward_memory"
METRICS = (FORWARD_TIME, BACKWARD_TIME, BACKWARD_MEMORY)
# What a table says of each metric.
METRIC_NAMES = {FORWARD_TIME: "forward time", BACKWARD_TIME: "backward time", BACKWARD_MEMORY: "backward memory"}

CPU_CLOCK = "cpu"  # times are the wall time of each range on the CPU
CUDA_CLOCK = "cuda"  # times are the time of the CUDA kernels launched inside each range
DEFAULT_STEPS = 3
DEFAULT_WARMUP = 1
DEFAULT_TOP = 10

# The ranges a measured step marks, so that its forward, backward and optimizer can be told apart.
_FORWARD = "graphviz_autograd: forward"
_BACKWARD = "graphviz_autograd: backward"
_OPTIMIZER = "graphviz_autograd: optimizer"
_PHASES = (_FORWARD, _BACKWARD, _OPTIMIZER)
_EVALUATE = "autograd::engine::evaluate_function: "
_MEMORY = "[memory]"


class OpProfile(NamedTuple):
    """What was measured of one node of the walked graph (an op or an ``AccumulateGrad``).

    Times in seconds and memory in bytes, each the median over the steps in which the
    node had an event; ``None`` where it had none (an ``AccumulateGrad`` has no forward op).
    """

    id: str
    kind: str
    label: str
    module: str
    forward_time: Optional[float] = None
    backward_time: Optional[float] = None
    backward_memory: Optional[float] = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self._asdict())


class Unmatched(NamedTuple):
    """What the profiler saw that no node of the graph stands for, and nodes it saw nothing of.

    Medians over the measured steps, on the profile's clock:

    - ``forward_ops``, ``forward_time``: top-level forward ops that created no node of
      the graph (ops on tensors that need no gradient, nodes the outputs do not reach);
    - ``forward_outside``: forward time in no node's op: Python between the ops, and the
      part of an op such as ``aten::linear`` spent outside the ``aten::addmm`` that made the node;
    - ``backward_ranges``, ``backward_time``, ``backward_memory``: backward ranges of
      nodes that are not in the graph, or ``AccumulateGrad`` ranges that could not be told apart;
    - ``backward_outside``: backward time outside every node's range (the engine
      between nodes, making the first gradient);
    - ``ops_without_forward``: op nodes whose forward op was not seen (a custom
      Function's node is made after the ops of its forward);
    - ``nodes_without_backward``: op and ``AccumulateGrad`` nodes with no backward range;
    - ``shared_accumulate``: ``AccumulateGrad`` nodes fed by one op (a convolution's
      weight and bias) whose ranges could not be told apart: each got an equal share.
    """

    forward_ops: float = 0
    forward_time: float = 0.0
    forward_outside: float = 0.0
    backward_ranges: float = 0
    backward_time: float = 0.0
    backward_memory: float = 0.0
    backward_outside: float = 0.0
    ops_without_forward: int = 0
    nodes_without_backward: int = 0
    shared_accumulate: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self._asdict())


class ModuleTotal(NamedTuple):
    """A module's total of one metric, its submodules' included.

    ``path`` is a pattern such as ``transformer.h.*`` for a run of alike blocks;
    then ``blocks`` says how many it sums and ``low`` and ``high`` the least and
    the most of one block (both equal ``value`` for a single module).
    """

    path: str
    type_name: str
    value: float
    blocks: int = 1
    low: float = 0.0
    high: float = 0.0


@dataclass(frozen=True)
class StepProfile:
    """The result of :func:`profile_step`: plain data, no tensors; :meth:`to_dict` for JSON.

    ``ops`` holds every op and ``AccumulateGrad`` node of the walked graph in walk order,
    with ids ``n0, n1, ...`` of ``graph`` (a walk with the options ``make_dot`` uses by
    default: no saved tensors, so a drawing of the same recorded step has the same ids).
    ``step_time`` is the median step under the profiler, as the profiler's clock
    counts it (CPU: wall time of forward, backward and optimizer; CUDA: the time of
    every kernel the step ran); ``unprofiled_step_time`` the median wall time of the
    same steps without the profiler, and ``profiled_wall_time`` with it.
    ``totals`` holds the forward, backward and optimizer parts of ``step_time`` and
    ``backward_memory``, the bytes allocated during the backward pass.
    """

    ops: tuple[OpProfile, ...]
    modules: tuple[ModuleInfo, ...]
    device: str
    clock: str
    steps: int
    warmup: int
    step_time: float
    unprofiled_step_time: float
    profiled_wall_time: float
    totals: Mapping[str, float]
    unmatched: Unmatched
    notes: tuple[str, ...] = ()
    model: str = ""
    graph: Optional[AutogradGraph] = field(default=None, compare=False, repr=False)
    memory: Optional[StepMemory] = None

    # --- per node ---

    def node_values(self, metric: str) -> dict[str, float]:
        """``{node id: value}`` of ``metric`` (``forward_time``, ``backward_time`` or
        ``backward_memory``) for the nodes that have one; ids are those of :attr:`graph`."""
        _check_metric(metric)
        return {op.id: value for op in self.ops if (value := getattr(op, metric)) is not None}

    def overlay(self, metric: str = BACKWARD_TIME) -> Overlay:
        """``metric`` as an :class:`~graphviz_autograd.views.overlays.Overlay` to draw over
        :attr:`graph`: ``make_dot(profile.graph, overlays=[profile.overlay()])``, or in an
        explorer page. Times and bytes sum over a module; the key says where and how they
        were measured."""
        _check_metric(metric)
        unit = "B" if metric == BACKWARD_MEMORY else "s"
        measured = f"{self.device}, median of {self.steps} step{'s' if self.steps != 1 else ''} after {self.warmup} warm-up"
        return Overlay(
            metric, METRIC_NAMES[metric], self.node_values(metric), rollup="sum", scale="log", unit=unit,
            key=(([f"{METRIC_NAMES[metric]}: {measured}"], {"shape": "note", "style": "filled", "fillcolor": "white"}),),
        )

    def overlays(self) -> list[Overlay]:
        """Every metric as an overlay (forward time, backward time, backward memory), and the
        bytes saved for backward alive at the memory peak when memory was measured."""
        extra = [self.memory.overlay()] if self.memory is not None else []
        return [*(self.overlay(metric) for metric in METRICS), *extra]

    def ratio_overlay(self, before: "StepProfile", metric: str = BACKWARD_TIME) -> Overlay:
        """``metric`` of this step over that of the step ``before`` (a profile of the model
        before a change), node by node, as an overlay on :attr:`graph`: 1.3 where an op
        takes 1.3 times as long. Nodes are matched as :func:`~graphviz_autograd.views.diffing.diff`
        matches them (by id when a profile holds no graph); a module box shows the largest
        ratio inside it."""
        _check_metric(metric)
        now, was = self.node_values(metric), before.node_values(metric)
        if self.graph is not None and before.graph is not None:
            pairs = {c.new: c.old for c in diff(before.graph, self.graph).nodes if c.old and c.new}
        else:
            pairs = {node_id: node_id for node_id in now}
        values: dict[str, float] = {}
        tooltips: dict[str, str] = {}
        for node_id, value in now.items():
            old = was.get(pairs.get(node_id, ""))
            if old and value > 0:
                values[node_id] = value / old
                tooltips[node_id] = f"{METRIC_NAMES[metric]} {value / old:.2f}x ({_metric_text(metric, value)}, was {_metric_text(metric, old)})"
        return Overlay(f"{metric}_ratio", f"{METRIC_NAMES[metric]}, now / before", values, rollup="max", scale="log",
                       tooltips=tooltips)

    def changes_since(self, before: "StepProfile", metric: str = BACKWARD_TIME, least: float = 1.1) -> list[str]:
        """What changed from the step ``before`` by module, as sentences, most changed first:
        ``transformer.h.* backward time 1.30x slower (2.1 ms, was 1.6 ms)``, for modules (runs
        of alike blocks as one) whose total grew or shrank by ``least`` times or more."""
        was = {row.path: row.value for row in before.by_module(metric)}
        found = []
        for row in self.by_module(metric):
            old = was.get(row.path)
            if not old or not row.value:
                continue
            ratio = row.value / old
            if max(ratio, 1 / ratio) >= least:
                how = ("slower" if ratio > 1 else "faster") if metric != BACKWARD_MEMORY else ("more" if ratio > 1 else "less")
                found.append((-max(ratio, 1 / ratio), row.path, f"{row.path} {METRIC_NAMES[metric]} "
                              f"{max(ratio, 1 / ratio):.2f}x {how} ({_metric_text(metric, row.value)}, was {_metric_text(metric, old)})"))
        return [text for _, _, text in sorted(found)]

    def op(self, node_id: str) -> OpProfile:
        """The measurements of one node; KeyError if the graph has no op of that id."""
        for op in self.ops:
            if op.id == node_id:
                return op
        raise KeyError(node_id)

    def top_ops(self, metric: str, count: int = DEFAULT_TOP) -> list[OpProfile]:
        """The ``count`` nodes with the most of ``metric``, most first (ties in walk order)."""
        values = self.node_values(metric)
        ranked = sorted(self.ops, key=lambda op: -values.get(op.id, 0.0))
        return [op for op in ranked if values.get(op.id)][:count]

    # --- per module ---

    def by_module(self, metric: str) -> list[ModuleTotal]:
        """Each module's total of ``metric`` (its submodules' included), most first.

        Calls of one module are summed into it (``relu#2`` into ``relu``); modules that
        differ only by their index in a list of alike blocks (``h.0`` ... ``h.11``) are
        one row, ``h.*``, with the spread over its blocks. The model itself (the whole
        step) is left out.
        """
        _check_metric(metric)
        if not self.modules:
            raise NoModulesError(
                "This profile's graph knows no modules, so nothing can be summed by module: it was "
                "walked without a recorder of the model; pass the model to profile_step(model, ...)."
            )
        totals: dict[str, float] = {}
        for op in self.ops:
            value = getattr(op, metric)
            if value is None:
                continue
            path = module_of_call(op.module)
            while path:
                totals[path] = totals.get(path, 0.0) + value
                path = path.rpartition(".")[0]
        types = {info.path: info.type_name for info in self.modules if module_of_call(info.path) == info.path}
        rows = []
        for pattern, paths in repeated_module_patterns(totals, types).items():
            values = [totals[p] for p in paths]
            rows.append(ModuleTotal(pattern, types.get(paths[0], ""), sum(values), len(paths), min(values), max(values)))
        rows.sort(key=lambda row: (-row.value, row.path))
        return [row for row in rows if row.value]

    # --- text ---

    def table(self, top: int = DEFAULT_TOP, memory_target: Optional[float] = None) -> str:
        """The profile as text: a header that says what was measured and how, then the
        ``top`` modules and ops by backward time, forward time and backward memory,
        and what could not be matched."""
        return profile_table(self, top=top, memory_target=memory_target)

    def __str__(self) -> str:
        return self.table()

    def to_dict(self, memory_target: Optional[float] = None) -> dict[str, Any]:
        """The profile as JSON-ready plain data (without the graph); :meth:`from_dict` reads it back.
        With memory measured, its checkpoint advice is for ``memory_target`` (see :meth:`StepMemory.advice`)."""
        return {
            "model": self.model,
            "device": self.device,
            "clock": self.clock,
            "steps": self.steps,
            "warmup": self.warmup,
            "step_time": self.step_time,
            "unprofiled_step_time": self.unprofiled_step_time,
            "profiled_wall_time": self.profiled_wall_time,
            "totals": dict(self.totals),
            "unmatched": self.unmatched.to_dict(),
            "notes": list(self.notes),
            "modules": [{"path": m.path, "type_name": m.type_name} for m in self.modules],
            "ops": [op.to_dict() for op in self.ops],
            **({"memory": self.memory.to_dict(memory_target)} if self.memory is not None else {}),
        }

    def to_json(self, memory_target: Optional[float] = None) -> str:
        """:meth:`to_dict` as JSON text, keys sorted."""
        return json.dumps(self.to_dict(memory_target), sort_keys=True, indent=2) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "StepProfile":
        """A profile from :meth:`to_dict`'s data (one measured on another machine, say).

        >>> p = StepProfile((OpProfile("n1", "op", "ExpBackward0", "", 1e-6, 2e-6, 64.0),), (), "cpu", "cpu",
        ...                 3, 1, 1e-5, 1e-5, 1e-5, {}, Unmatched())
        >>> StepProfile.from_dict(p.to_dict()) == p
        True
        """
        try:
            return cls(
                ops=tuple(OpProfile(**op) for op in data["ops"]),
                modules=tuple(ModuleInfo(m["path"], m["type_name"]) for m in data["modules"]),
                device=data["device"],
                clock=data["clock"],
                steps=data["steps"],
                warmup=data["warmup"],
                step_time=data["step_time"],
                unprofiled_step_time=data["unprofiled_step_time"],
                profiled_wall_time=data["profiled_wall_time"],
                totals=dict(data["totals"]),
                unmatched=Unmatched(**data["unmatched"]),
                notes=tuple(data["notes"]),
                model=data.get("model", ""),
                memory=StepMemory.from_dict(data["memory"]) if data.get("memory") else None,
            )
        except (KeyError, TypeError) as error:
            raise OptionError(
                f"StepProfile.from_dict() needs the data StepProfile.to_dict() writes; this has no field {error}."
            ) from error


def _metric_text(metric: str, value: float) -> str:
    return format_bytes(int(value)) if metric == BACKWARD_MEMORY else format_seconds(value)


def _check_metric(metric: str) -> None:
    check_choice("metric", metric, METRICS)


# --- running the steps --------------------------------------------------------------


def _nothing_to_profile(model: Optional[torch.nn.Module]) -> str:
    """Why a step whose output requires no gradient cannot be profiled, and what to do."""
    parameters = list(model.parameters()) if model is not None else []
    if parameters and not any(p.requires_grad for p in parameters):
        why = f"every one of the {len(parameters)} parameters of {type(model).__name__} is frozen (requires_grad=False)"
    else:
        why = "nothing it was computed from requires grad (or it was computed under torch.no_grad())"
    return (
        f"Nothing to profile: the output of the forward pass has no autograd graph, so a training step has no "
        f"backward pass to time; {why}. Make a parameter trainable (requires_grad_(True)) and run the forward "
        "pass with gradients enabled."
    )


def profile_step(
    model: Optional[torch.nn.Module] = None,
    inputs: Any = None,
    *,
    loss: Optional[Callable[[Any], Any]] = None,
    step: Optional[Callable[[], Any]] = None,
    optimizer: Optional[torch.optim.Optimizer] = None,
    steps: int = DEFAULT_STEPS,
    warmup: int = DEFAULT_WARMUP,
    memory: bool = True,
) -> StepProfile:
    """Measure training steps of ``model`` and give each node of its graph its share.

    A step is a forward pass, ``backward()`` and, with ``optimizer``, ``optimizer.step()``.
    The forward pass is ``loss(model(*inputs))`` (``inputs``: a tuple of positional
    arguments, a dict of keyword arguments or a single value; without ``loss``, the
    backward pass starts from every output tensor with a gradient of ones), or
    ``step()``, a function of no arguments that runs the forward pass and returns the loss.
    Each step starts with every ``.grad`` it will set (the model's and the optimizer's
    parameters', inputs' that require grad) set to None, as ``optimizer.zero_grad()`` leaves them.

    The first of ``warmup`` steps is recorded (:func:`~graphviz_autograd.capture.recording.record`)
    and its graph walked; then ``steps`` steps are timed without the profiler and
    ``steps`` with it, one of each in turn. The result holds the median of each.
    With ``memory`` (the default), three more steps measure the step's memory: its
    :attr:`StepProfile.memory` (:mod:`graphviz_autograd.checks.memory`) holds the bytes
    alive over time, the peak, what is alive at it and what to checkpoint.

    Everything a step changes is put back, also when a step raises: parameters and
    buffers (copied before the first step), the ``.grad`` of each parameter of the model
    or the optimizer and of each input that requires grad (the same tensor object), the
    optimizer's state (``state_dict()``), and the CPU and CUDA random number generators.
    Not put back: anything the forward pass changes outside the model (a global counter,
    a cache), and tensors a ``step()`` function holds that are none of the model's.

    >>> import torch
    >>> net = torch.nn.Linear(3, 1)
    >>> before = net.weight.detach().clone()
    >>> p = profile_step(net, torch.ones(2, 3), optimizer=torch.optim.SGD(net.parameters(), lr=1.0), steps=1)
    >>> torch.equal(net.weight, before), net.weight.grad is None, p.steps
    (True, True, 1)
    """
    _check_count("steps", steps, 1)
    _check_count("warmup", warmup, 0)
    if model is not None and not isinstance(model, torch.nn.Module):
        raise OptionError(f"profile_step() takes an nn.Module as model; got {type(model).__name__}.")
    forward = step_forward("profile_step", model, inputs, loss, step)
    runner = StepRunner(model, forward, optimizer, inputs)
    with runner.state_kept():
        return runner.profile(steps, warmup, memory=memory)


def _check_count(name: str, value: object, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise OptionError(f"{name} must be a whole number of {least} or more; got {value!r}.")


def step_forward(
    what: str, model: Optional[torch.nn.Module], inputs: Any, loss: Optional[Callable[[Any], Any]],
    step: Optional[Callable[[], Any]],
) -> Callable[[], Any]:
    """A step's forward pass as ``what`` (``profile_step``, ``find_nonfinite``) takes it: ``step()``,
    or ``loss(model(*inputs))``; the arguments checked, with one sentence naming ``what`` when
    they do not fit, and a model on the meta device refused."""
    if step is not None:
        if not callable(step):
            raise OptionError(f"step must be a function of no arguments that returns the loss; got {type(step).__name__}.")
        if inputs is not None or loss is not None:
            raise OptionError("Give either step() or inputs (and loss), not both: step() runs the forward pass itself.")
        forward = step
    elif model is None:
        raise OptionError(f"{what}() needs a model and its inputs, or step=, a function that returns the loss.")
    else:
        forward = model_forward(model, inputs, loss)
    if model is not None:
        check_not_meta(model)
    return forward


def model_forward(model: torch.nn.Module, inputs: Any, loss: Optional[Callable[[Any], Any]]) -> Callable[[], Any]:
    """A step's forward pass as a function of nothing: ``loss(model(*inputs))``, with ``inputs``
    a tuple of positional arguments, a dict of keyword arguments or one value (no ``loss``: the output)."""
    def forward() -> Any:
        if isinstance(inputs, dict):
            output = model(**inputs)
        elif isinstance(inputs, tuple):
            output = model(*inputs)
        else:
            output = model(inputs)
        return output if loss is None else loss(output)

    return forward


def check_not_meta(model: torch.nn.Module) -> None:
    """A MetaDeviceError when ``model`` holds a parameter or buffer on the meta device: nothing to run."""
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        if tensor.is_meta:
            raise MetaDeviceError(
                f"{type(model).__name__} has {name} on the meta device, which holds shapes but no data, so "
                f"there is nothing to run and time; give it real weights first (model.to_empty(device='cpu') "
                f"and load_state_dict())."
            )


def check_device(device: str) -> torch.device:
    """``device`` as a :class:`torch.device`, when this machine has it; a named error otherwise.

    >>> check_device("cpu")
    device(type='cpu')
    """
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise OptionError(f"{device!r} is not a device; give cpu, cuda or cuda:N.") from error
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            why = "this build of torch has no CUDA" if torch.version.cuda is None else "no CUDA device is visible"
            raise DeviceUnavailableError(
                f"Device {device!r} was asked for, but {why} (torch {torch.__version__}); profile on cpu instead."
            )
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise DeviceUnavailableError(
                f"Device {device!r} was asked for, but this machine has {torch.cuda.device_count()} CUDA device(s); "
                f"give cuda:0 to cuda:{torch.cuda.device_count() - 1}."
            )
    elif parsed.type != "cpu":
        raise OptionError(f"profiling runs on cpu or cuda; got {device!r}.")
    return parsed


class _Marks(NamedTuple):
    """What a step's driver knows of one measured step: the first sequence number its
    forward pass could give a node, and how many nodes it made."""

    base: int
    nodes: int


class StepRunner:
    """Runs the steps of one :func:`profile_step` (or ``find_nonfinite``) call and puts the model back after."""

    def __init__(
        self,
        model: Optional[torch.nn.Module],
        forward: Callable[[], Any],
        optimizer: Optional[Any],
        inputs: Any = None,
    ):
        self.model = model
        self.forward = forward
        self.optimizer = optimizer
        self.inputs = inputs
        self.device = torch.device("cpu")
        # The gradients there were before, while :meth:`state_kept` holds them to give back.
        self.held: list[tuple[torch.Tensor, Optional[torch.Tensor]]] = []
        # Every tensor whose .grad a step sets: the model's parameters, the optimizer's,
        # and inputs that require grad; each once.
        leaves: dict[int, torch.Tensor] = {}
        if model is not None:
            leaves.update((id(p), p) for p in model.parameters())
        if optimizer is not None:
            leaves.update((id(p), p) for group in optimizer.param_groups for p in group["params"])
        leaves.update((id(t), t) for _, t in named_tensors(inputs) if t.requires_grad and t.grad_fn is None)
        self.leaves = list(leaves.values())

    # --- state ---

    @contextlib.contextmanager
    def state_kept(self) -> Iterator[None]:
        kept = {id(t): t for t in self.leaves}
        if self.model is not None:
            kept.update((id(b), b) for b in self.model.buffers())
        # The copies are kept in the host's memory: on a GPU they would take as much again as the
        # parameters and the optimizer's state, and count in the peak the memory step measures.
        tensors = [(tensor, _host_copy(tensor)) for tensor in kept.values()]
        grads = [(leaf, leaf.grad) for leaf in self.leaves]
        # The gradients there were stay where they are (the leaves get them back as they were),
        # and are alive through the steps: the memory step leaves them out of its bytes.
        self.held = grads
        optimizer_state = _host_copy(self.optimizer.state_dict()) if self.optimizer is not None else None
        cuda_devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
        try:
            with torch.random.fork_rng(devices=cuda_devices):
                yield
        finally:
            with torch.no_grad():
                for tensor, saved in tensors:
                    tensor.copy_(saved)
            for leaf, grad in grads:
                leaf.grad = grad
            self.held = []
            if self.optimizer is not None:
                self.optimizer.load_state_dict(optimizer_state)

    def held_bytes(self, device: torch.device) -> float:
        """The bytes on ``device`` of the gradients :meth:`state_kept` holds to give back."""
        storages = {}
        for _, grad in self.held:
            if grad is not None and grad.device == device:
                storage = grad.untyped_storage()
                storages[storage.data_ptr()] = storage.nbytes()
        return float(sum(storages.values()))

    def clear_grads(self) -> None:
        """Every ``.grad`` a step sets to None, as ``optimizer.zero_grad()`` leaves them: the
        tensors that were there before are never written to."""
        for leaf in self.leaves:
            leaf.grad = None

    # --- one step ---

    def run(self, name: str, phase: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except GraphvizAutogradError:
            raise
        except Exception as error:
            raise StepFailedError(
                f"The {phase} of {name} raised {type(error).__name__}: {first_line(error, '(no message)')}; the model, its "
                f"gradients and its optimizer were put back as they were. Run one step without profiling to see "
                f"the traceback."
            ) from error

    def step(self, name: str, *, marked: bool = False, wait: bool = True) -> tuple[_Marks, float, Any]:
        """One step; returns its marks, its wall time and its loss (or outputs). The CPU waits for
        the device after each phase, unless ``wait`` is false: then it runs on as in a training
        loop, launching backward while the GPU still runs the forward, and its wall time leaves
        out what the device has still to do."""
        self.clear_grads()
        sync = self.synchronize if wait else (lambda: None)
        started = time.perf_counter()
        base = _next_sequence_nr()
        with _range(_FORWARD, marked):
            output = self.run(name, "forward pass", self.forward)
            sync()
        count = _next_sequence_nr() - base
        with _range(_BACKWARD, marked):
            self.run(name, "backward pass", functools.partial(run_backward, output))
            sync()
        if self.optimizer is not None:
            with _range(_OPTIMIZER, marked):
                self.run(name, "optimizer step", self.optimizer.step)
                sync()
        # Both kinds of step carry the two marks (a view each, microseconds) in their wall time.
        return _Marks(base + 1, count - 1), time.perf_counter() - started, output

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    # --- the whole measurement ---

    def profile(self, steps: int, warmup: int, memory: bool = False) -> StepProfile:
        from ..capture.recording import record
        from ..capture.walking import walk

        recorder = record(self.model)
        self.clear_grads()
        base = _next_sequence_nr()
        with recorder:
            output = self.run("the recorded warm-up step", "forward pass", self.forward)
        count = _next_sequence_nr() - base
        try:
            graph = walk(output, self.model, recorder=recorder, collect_sequence_numbers=True)
        except NoGraphError as error:  # its words are a drawing's
            raise NoGraphError(_nothing_to_profile(self.model)) from error
        self.device = _device_of(output)
        if warmup:
            self.run("the recorded warm-up step", "backward pass", functools.partial(run_backward, output))
            if self.optimizer is not None:
                self.run("the recorded warm-up step", "optimizer step", self.optimizer.step)
        del output  # the graph goes before the measured steps
        reference = _Marks(base + 1, count - 1)
        for number in range(1, warmup):
            self.step(f"warm-up step {number + 1}")
        matcher = _Matcher(graph, reference, self.device)
        plain_times: list[float] = []
        profiled_times: list[float] = []
        traces: list[_StepValues] = []
        notes: list[str] = []
        for number in range(steps):
            plain_times.append(self.step(f"step {number + 1}")[1])
            with _started(_profiler(self.device)) as profiler:
                # Its output is not kept: on CUDA it would be alive through the memory step.
                marks, wall = self.step(f"measured step {number + 1}", marked=True)[:2]
            profiled_times.append(wall)
            if marks.nodes != reference.nodes:
                notes.append(
                    f"measured step {number + 1} made {marks.nodes} autograd nodes where the recorded step made "
                    f"{reference.nodes}: its forward pass took another path, so its matches may be off"
                )
            traces.append(matcher.read(profiler.kineto_results.events(), marks))
        measured = self.measure_memory(graph, matcher, reference) if memory else None
        return matcher.combine(
            traces,
            steps=steps,
            warmup=warmup,
            unprofiled=statistics.median(plain_times),
            profiled=statistics.median(profiled_times),
            notes=notes,
            model=type(self.model).__name__ if self.model is not None else "",
            step_memory=measured,
        )

    def measure_memory(self, graph: AutogradGraph, matcher: "_Matcher", reference: _Marks) -> StepMemory:

        def node_of(relative: int) -> Optional[str]:
            return matcher.node_of.get(relative) if 0 <= relative < reference.nodes else None

        def profiled_step() -> tuple[Iterable[Any], int]:
            with _started(_profiler(self.device)) as profiler:
                marks = self.step("the step measuring memory", marked=True)[0]
            return profiler.kineto_results.events(), marks.base

        phases = {"forward": _FORWARD, "backward": _BACKWARD, "optimizer": _OPTIMIZER}
        return measure_memory(self, graph, node_of, profiled_step, phases, _MEMORY)


# One leaf that requires grad, whose view makes a node: its sequence number tells
# where a step's numbers start (autograd counts per thread, and only makes a node number go up).
_MARKER: Optional[torch.Tensor] = None


def _host_copy(value: Any) -> Any:
    """A deep copy of ``value`` with every tensor in it copied to the host's memory (a CPU
    tensor cloned): ``tensor.copy_(copy)`` and ``optimizer.load_state_dict(copy)`` put it back
    on its device."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {key: _host_copy(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_host_copy(item) for item in value)
    return copy.deepcopy(value)


def _next_sequence_nr() -> int:
    """The sequence number of a node made now; the next node made gets the one after."""
    global _MARKER
    if _MARKER is None:
        _MARKER = torch.zeros((), requires_grad=True)
    with torch.enable_grad():
        return int(_MARKER.view(()).grad_fn._sequence_nr())  # type: ignore[union-attr]


def run_backward(output: Any) -> None:
    """``backward()`` from the loss, or from every output tensor with a gradient of ones."""
    if isinstance(output, torch.Tensor) and output.numel() == 1 and output.grad_fn is not None:
        output.backward()
        return
    tensors = [t for _, t in named_tensors(output) if t.grad_fn is not None]
    if not tensors:
        raise StepFailedError(
            "The forward pass returned no tensor with an autograd graph, so there is no backward pass to "
            "measure; return the loss, computed with gradients enabled."
        )
    torch.autograd.backward(tensors, grad_tensors=[torch.ones_like(t) for t in tensors])


def _device_of(output: Any) -> torch.device:
    for _, tensor in named_tensors(output):
        return tensor.device
    return torch.device("cpu")


def _range(name: str, marked: bool) -> Any:
    return torch.profiler.record_function(name) if marked else contextlib.nullcontext()


def _profiler(device: torch.device) -> Any:
    """The profiler of one measured step. ``torch.autograd.profiler.profile`` rather than
    ``torch.profiler.profile``, which on its first start imports ``torch._inductor``
    (seconds, to read one setting we do not use)."""
    return torch.autograd.profiler.profile(
        use_cpu=True,
        use_device="cuda" if device.type == "cuda" else None,
        profile_memory=True,
        record_shapes=False,
        with_stack=False,
        use_kineto=True,
    )


# What libkineto writes to the process's stderr each time a profiler starts or stops,
# e.g. "USDT:2026-11-26 14:50:35 14607:14607 SyncActivityProfilerHandler.cpp:52] profiler_start":
# two lines a measured step, which say nothing to the person who asked for the profile.
_PROFILER_CHATTER = re.compile(rb"USDT:[^\n]*\] profiler_(?:start|stop)[ \t]*\r?\n?")


@contextlib.contextmanager
def _started(profiler: Any) -> Iterator[Any]:
    """``with profiler``, started and stopped without the lines libkineto writes to
    stderr as it does so; what else is written then is passed on. The step itself
    runs with stderr as it was, so nothing the model writes is touched."""
    with _without_profiler_chatter():
        profiler.__enter__()
    try:
        yield profiler
    except BaseException:
        with _without_profiler_chatter():
            profiler.__exit__(*sys.exc_info())
        raise
    with _without_profiler_chatter():
        profiler.__exit__(None, None, None)


@contextlib.contextmanager
def _without_profiler_chatter() -> Iterator[None]:
    """File descriptor 2 caught while the block runs (C++ code writes there, not to
    ``sys.stderr``), then written back without :data:`_PROFILER_CHATTER`."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no descriptor 2 to catch (a closed or replaced stderr)
        yield
        return
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            try:
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            kept = _PROFILER_CHATTER.sub(b"", caught.read())
            if kept:
                os.write(2, kept)


def _device_text(device: torch.device) -> str:
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return "cpu"


# --- matching events to nodes -------------------------------------------------------


class _StepValues(NamedTuple):
    """One measured step, matched: node id -> value, and what was left over."""

    forward: dict[str, float]
    backward: dict[str, float]
    memory: dict[str, float]
    unmatched: Unmatched
    totals: dict[str, float]


class _Leftover:
    """What a step's backward ranges left unmatched (seconds and bytes), as they are counted."""

    def __init__(self) -> None:
        self.ranges = 0
        self.time = 0.0
        self.memory = 0.0
        self.all_time = 0.0  # every node's range, matched or not
        self.shared = 0  # AccumulateGrad nodes that share their ranges' total

    def add(self, value: float, allocated: float) -> None:
        self.ranges += 1
        self.time += value
        self.memory += allocated


class _Events:
    """One step's profiler events, sorted out: CPU ranges per thread, and the device
    time and allocated bytes at each point in time per thread, to be summed over a range."""

    def __init__(self, events: Iterable[Any], device: torch.device):
        cuda = device.type == "cuda"
        cpu_type = torch.autograd.DeviceType.CPU
        measured = torch.autograd.DeviceType.CUDA if cuda else cpu_type
        self.ranges: list[tuple[int, int, int, int, str]] = []  # (start, end, thread, sequence nr, name)
        self.phases: dict[str, tuple[int, int, int]] = {}  # phase name -> (start, end, thread)
        launched_by: dict[int, tuple[int, int]] = {}  # correlation id of a CPU op -> (thread, start)
        kernels: list[tuple[int, int]] = []  # (linked correlation id, duration)
        allocations: dict[int, list[tuple[int, int]]] = {}  # thread -> [(time, bytes)]
        for event in events:
            name = event.name()
            device_type = event.device_type()
            if name == _MEMORY:
                size = event.nbytes()
                if size > 0 and device_type == measured:
                    allocations.setdefault(event.start_thread_id(), []).append((event.start_ns(), size))
                continue
            if device_type != cpu_type:
                # Kernels, copies and sets; a record_function range's span on the GPU is none of them.
                if cuda and not event.is_user_annotation():
                    kernels.append((event.linked_correlation_id(), event.duration_ns()))
                continue
            start = event.start_ns()
            thread = event.start_thread_id()
            if name in _PHASES:
                self.phases[name] = (start, start + event.duration_ns(), thread)
                continue
            if event.linked_correlation_id():
                continue  # a CUDA runtime call (cudaLaunchKernel): its kernel names the op that made the call
            self.ranges.append((start, start + event.duration_ns(), thread, event.sequence_nr(), name))
            if cuda:
                launched_by[event.correlation_id()] = (thread, start)
        self.ranges.sort(key=lambda r: (r[0], -r[1]))
        self.device_points: dict[int, tuple[list[int], list[int]]] = {}
        if cuda:
            points: dict[int, list[tuple[int, int]]] = {}
            for correlation, duration in kernels:
                launch = launched_by.get(correlation)
                if launch is not None:
                    points.setdefault(launch[0], []).append((launch[1], duration))
            self.device_points = _prefix_sums(points)
        self.memory_points = _prefix_sums(allocations)
        self.cuda = cuda

    def device_time(self, thread: Optional[int], start: int, end: int) -> float:
        """Kernel time launched in [start, end] on ``thread`` (on every thread when None), in ns."""
        return _sum_in(self.device_points, thread, start, end)

    def allocated(self, thread: Optional[int], start: int, end: int) -> float:
        return _sum_in(self.memory_points, thread, start, end)

    def time(self, thread: int, start: int, end: int) -> float:
        """A range's time on the clock, in ns."""
        return self.device_time(thread, start, end) if self.cuda else float(end - start)


def _prefix_sums(points: Mapping[int, list[tuple[int, int]]]) -> dict[int, tuple[list[int], list[int]]]:
    sums = {}
    for thread, values in points.items():
        values.sort()
        sums[thread] = ([t for t, _ in values], [0, *accumulate(v for _, v in values)])
    return sums


def _sum_in(points: Mapping[int, tuple[list[int], list[int]]], thread: Optional[int], start: int, end: int) -> float:
    threads = points.values() if thread is None else [points[thread]] if thread in points else []
    total = 0
    for times, sums in threads:
        total += sums[bisect.bisect_right(times, end)] - sums[bisect.bisect_left(times, start)]
    return float(total)


class _Matcher:
    """Matches each measured step's events to the walked graph by sequence number."""

    def __init__(self, graph: AutogradGraph, reference: _Marks, device: torch.device):
        self.graph = graph
        self.device = device
        # sequence number counted from the step's first -> node id
        self.node_of = {number - reference.base: node_id for node_id, number in graph.sequence_numbers}
        accumulating = {n.id for n in graph.nodes if n.kind == ACCUMULATE_GRAD}
        # op node id -> the AccumulateGrad nodes it feeds (edges run from input to consumer)
        self.fed: dict[str, list[str]] = {}
        for edge in graph.edges:
            if edge[0] in accumulating:
                self.fed.setdefault(edge[1], []).append(edge[0])

    def read(self, raw_events: Iterable[Any], marks: _Marks) -> _StepValues:
        events = _Events(raw_events, self.device)
        forward, (forward_ops, forward_time) = self.forward(events, marks)
        backward, memory, left = self.backward(events, marks)
        totals = self.totals(events)
        unmatched = Unmatched(
            forward_ops=forward_ops,
            forward_time=forward_time / 1e9,
            forward_outside=max(0.0, totals.get("forward", 0.0) - sum(forward.values()) - forward_time / 1e9),
            backward_ranges=left.ranges,
            backward_time=left.time,
            backward_memory=left.memory,
            backward_outside=max(0.0, totals.get("backward", 0.0) - left.all_time),
            shared_accumulate=left.shared,
        )
        return _StepValues(forward, backward, memory, unmatched, totals)

    def forward(self, events: _Events, marks: _Marks) -> tuple[dict[str, float], tuple[int, float]]:
        """Node id -> the time of the forward op that made it; (count, time) of top-level ops that made none."""
        phase = events.phases.get(_FORWARD)
        if phase is None:
            return {}, (0, 0.0)
        start, end, thread = phase
        inside = [r for r in events.ranges if r[2] == thread and start <= r[0] and r[1] <= end]
        # Nest the ranges; an op is the creator of its number when no op inside it has the
        # same number (aten::linear holds the aten::t and aten::addmm that made nodes),
        # and the last such op with a number made the node (ops before it made none).
        creator: dict[int, int] = {}  # sequence number -> index in inside
        outer_of: list[int] = []  # index -> the index of the top-level range it is in
        stack: list[int] = []
        for i, (_, finish, _, number, _) in enumerate(inside):
            while stack and inside[stack[-1]][1] < finish:
                stack.pop()
            if number >= 0:
                for j in stack:
                    if inside[j][3] == number and creator.get(number) == j:
                        del creator[number]  # an op inside it has its number: not the innermost
                creator[number] = i
            outer_of.append(stack[0] if stack else i)
            stack.append(i)
        matched: dict[str, float] = {}
        used_outer: set[int] = set()
        for number, i in creator.items():
            node_id = self.node_of.get(number - marks.base)
            if node_id is None or not 0 <= number - marks.base < marks.nodes:
                continue
            begin, finish, thread_id, _, _ = inside[i]
            matched[node_id] = events.time(thread_id, begin, finish) / 1e9
            used_outer.add(outer_of[i])
        left_count, left_time = 0, 0.0
        for i, outer in enumerate(outer_of):
            if outer == i and i not in used_outer:
                left_count += 1
                left_time += events.time(inside[i][2], inside[i][0], inside[i][1])
        return matched, (left_count, left_time)

    def backward(self, events: _Events, marks: _Marks) -> tuple[dict[str, float], dict[str, float], _Leftover]:
        """Node id -> backward time and allocated bytes, and what was left over."""
        times: dict[str, float] = {}
        memory: dict[str, float] = {}
        left = _Leftover()
        phase = events.phases.get(_BACKWARD)
        if phase is None:
            return times, memory, left
        start, end, _ = phase
        per_thread: dict[int, list[tuple[int, int, int, str]]] = {}
        for begin, finish, thread, number, name in events.ranges:
            if start <= begin <= end and name.startswith(_EVALUATE):
                per_thread.setdefault(thread, []).append((begin, finish, number, name))
        taken: set[str] = set()  # AccumulateGrad nodes matched in this step
        for thread, ranges in per_thread.items():
            ranges.sort()
            # Autograd runs an AccumulateGrad as soon as the node that feeds it is done
            # (it sorts first in the ready queue): the ranges after a node's are its own.
            producer: Optional[str] = None
            run: list[tuple[float, float]] = []  # (time, bytes) of the AccumulateGrad ranges after producer
            for begin, finish, number, name in ranges:
                value = events.time(thread, begin, finish) / 1e9
                allocated = events.allocated(thread, begin, finish)
                left.all_time += value
                if name.endswith("AccumulateGrad"):
                    run.append((value, allocated))
                    continue
                self.settle(producer, run, taken, times, memory, left)
                run = []
                relative = number - marks.base
                producer = self.node_of.get(relative) if 0 <= relative < marks.nodes else None
                if producer is None:
                    left.add(value, allocated)
                    continue
                times[producer] = value
                memory[producer] = allocated
            self.settle(producer, run, taken, times, memory, left)
        return times, memory, left

    def settle(
        self,
        producer: Optional[str],
        run: list[tuple[float, float]],
        taken: set[str],
        times: dict[str, float],
        memory: dict[str, float],
        left: "_Leftover",
    ) -> None:
        """Give the AccumulateGrad ranges that ran after ``producer``'s to the AccumulateGrad
        nodes it feeds; several of them (a weight and its bias) share the ranges' total equally."""
        if not run:
            return
        candidates = [a for a in self.fed.get(producer, []) if a not in taken] if producer else []
        if len(candidates) != len(run):
            for value, allocated in run:
                left.add(value, allocated)
            return
        time_each = sum(t for t, _ in run) / len(run)
        memory_each = sum(m for _, m in run) / len(run)
        for (value, allocated), node_id in zip(run, candidates):
            taken.add(node_id)
            times[node_id] = value if len(run) == 1 else time_each
            memory[node_id] = allocated if len(run) == 1 else memory_each
        if len(run) > 1:
            left.shared += len(run)

    def totals(self, events: _Events) -> dict[str, float]:
        """Forward, backward and optimizer time on the clock, in seconds, and the bytes the backward allocated."""
        totals: dict[str, float] = {}
        for key, name in (("forward", _FORWARD), ("backward", _BACKWARD), ("optimizer", _OPTIMIZER)):
            phase = events.phases.get(name)
            if phase is None:
                continue
            start, end, thread = phase
            value = events.device_time(None, start, end) if events.cuda else float(end - start)
            totals[key] = value / 1e9
            if key == "backward":
                totals["backward_memory"] = events.allocated(None, start, end)
        return totals

    def combine(
        self,
        steps_values: Sequence[_StepValues],
        *,
        steps: int,
        warmup: int,
        unprofiled: float,
        profiled: float,
        notes: list[str],
        model: str,
        step_memory: Optional[StepMemory] = None,
    ) -> StepProfile:
        graph = self.graph

        def median_of(values: Iterable[dict[str, float]], node_id: str) -> Optional[float]:
            found = [step[node_id] for step in values if node_id in step]
            return statistics.median(found) if found else None

        forward = [v.forward for v in steps_values]
        backward = [v.backward for v in steps_values]
        memory = [v.memory for v in steps_values]
        ops = []
        for node in graph.nodes:
            if node.kind not in (OP, ACCUMULATE_GRAD):
                continue
            ops.append(OpProfile(
                node.id, node.kind, node.label, node.module,
                median_of(forward, node.id) if node.kind == OP else None,
                median_of(backward, node.id),
                median_of(memory, node.id),
            ))
        left = [v.unmatched for v in steps_values]
        counted: dict[str, Any] = {f: statistics.median(getattr(u, f) for u in left) for f in Unmatched._fields}
        counted["ops_without_forward"] = sum(1 for op in ops if op.kind == OP and op.forward_time is None)
        counted["nodes_without_backward"] = sum(1 for op in ops if op.backward_time is None)
        counted["shared_accumulate"] = int(counted["shared_accumulate"])
        unmatched = Unmatched(**counted)
        keys = sorted({k for v in steps_values for k in v.totals})
        totals = {k: statistics.median(v.totals.get(k, 0.0) for v in steps_values) for k in keys}
        step_time = statistics.median(
            sum(v.totals.get(k, 0.0) for k in ("forward", "backward", "optimizer")) for v in steps_values
        )
        if not graph.modules:
            notes.append("no model was given, so the graph knows no modules and nothing is summed by module")
        return StepProfile(
            ops=tuple(ops),
            modules=tuple(ModuleInfo(m.path, m.type_name) for m in graph.modules),
            device=_device_text(self.device),
            clock=CUDA_CLOCK if self.device.type == "cuda" else CPU_CLOCK,
            steps=steps,
            warmup=warmup,
            step_time=step_time,
            unprofiled_step_time=unprofiled,
            profiled_wall_time=profiled,
            totals=totals,
            unmatched=unmatched,
            notes=tuple(notes),
            model=model,
            graph=graph,
            memory=step_memory,
        )


# --- tables -------------------------------------------------------------------------


def _format(metric: str, value: float) -> str:
    return format_bytes(int(round(value))) if metric == BACKWARD_MEMORY else format_seconds(value)


def _share(value: float, whole: float) -> str:
    return f"{100 * value / whole:.0f}%" if whole > 0 else "-"


def _rows_text(rows: list[tuple[str, ...]], right: Sequence[int] = ()) -> list[str]:
    """Aligned columns, two spaces apart, as ``check`` prints its findings; the last column is not padded."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [row[i].rjust(widths[i]) if i in right else row[i].ljust(widths[i]) for i in range(len(widths))]
        lines.append("  ".join([*cells, row[-1]]).rstrip() + "\n")
    return lines


def profile_table(profile: StepProfile, top: int = DEFAULT_TOP, memory_target: Optional[float] = None) -> str:
    """The text :meth:`StepProfile.table` gives (and ``graphviz-autograd profile`` prints)."""
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise OptionError(f"top must be a whole number of 1 or more; got {top!r}.")
    clock = "CPU time of each range" if profile.clock == CPU_CLOCK else "time of the CUDA kernels launched in each range"
    totals = profile.totals
    header = [
        f"profile of {profile.model or 'a step'} on {profile.device}: median of {profile.steps} "
        f"step{'s' if profile.steps != 1 else ''} after {profile.warmup} warm-up step{'s' if profile.warmup != 1 else ''}; "
        f"times are the {clock}\n",
        f"step {format_seconds(profile.step_time)}: forward {format_seconds(totals.get('forward', 0.0))}, "
        f"backward {format_seconds(totals.get('backward', 0.0))}"
        + (f", optimizer {format_seconds(totals['optimizer'])}" if "optimizer" in totals else "")
        + f"; the backward allocated {format_bytes(int(totals.get('backward_memory', 0.0)))}\n",
        f"profiler overhead: a step took {format_seconds(profile.profiled_wall_time)} with the profiler and "
        f"{format_seconds(profile.unprofiled_step_time)} without it "
        f"({_overhead(profile.profiled_wall_time, profile.unprofiled_step_time)})\n",
    ]
    sections = []
    for metric in (BACKWARD_TIME, FORWARD_TIME, BACKWARD_MEMORY):
        whole = totals.get("backward_memory", 0.0) if metric == BACKWARD_MEMORY else profile.step_time
        of = "of the backward's allocations" if metric == BACKWARD_MEMORY else "of the step"
        name = METRIC_NAMES[metric]
        if profile.modules:
            rows: list[tuple[str, ...]] = [("module", "type", name, f"share {of}", "blocks")]
            for row in _without_containers(profile.by_module(metric))[:top]:
                blocks = "" if row.blocks == 1 else f"x{row.blocks}, {_format(metric, row.low)} to {_format(metric, row.high)} each"
                rows.append((row.path, row.type_name, _format(metric, row.value), _share(row.value, whole), blocks))
            if len(rows) > 1:
                sections.append([f"\ntop modules by {name}\n", *_rows_text(rows, right=(2, 3))])
        values = profile.node_values(metric)
        rows = [("op", "node", "module", name, f"share {of}")]
        for op in profile.top_ops(metric, top):
            rows.append((op.label, op.id, op.module or "-", _format(metric, values[op.id]), _share(values[op.id], whole)))
        if len(rows) > 1:
            sections.append([f"\ntop ops by {name}\n", *_rows_text(rows, right=(3, 4))])
    footer = ["\n", *_unmatched_lines(profile)]
    if profile.memory is not None:
        types = {info.path: info.type_name for info in profile.modules}
        footer.append(profile.memory.table(memory_target, top=top, types=types))
    footer += [f"note: {note}\n" for note in profile.notes]
    return "".join(header + [line for section in sections for line in section] + footer)


def _without_containers(rows: list[ModuleTotal]) -> list[ModuleTotal]:
    """``rows`` less each list of blocks whose whole total is its blocks' (``h`` beside ``h.*``)."""
    values = {row.path: row.value for row in rows}
    return [row for row in rows if not math.isclose(values.get(row.path + ".*", -1.0), row.value, rel_tol=1e-9)]


def _overhead(with_profiler: float, without: float) -> str:
    if without <= 0:
        return "no time without it to compare"
    change = with_profiler / without - 1
    return f"the profiler added {100 * change:.0f}%" if change >= 0 else f"{100 * -change:.0f}% less: the steps vary more than the profiler costs"


def _unmatched_lines(profile: StepProfile) -> list[str]:
    u = profile.unmatched
    ops = [op for op in profile.ops if op.kind == OP]
    accumulate = len(profile.ops) - len(ops)
    totals = profile.totals
    forward, backward = totals.get("forward", 0.0), totals.get("backward", 0.0)
    lines = [
        f"matched: {len(ops) - u.ops_without_forward} of {len(ops)} op nodes to their forward op, "
        f"{len(profile.ops) - u.nodes_without_backward} of {len(profile.ops)} op and AccumulateGrad nodes "
        f"to their backward range\n",
        f"forward in no node: {u.forward_ops:g} top-level ops that made no node of the graph "
        f"({format_seconds(u.forward_time)}, {_share(u.forward_time, forward)}); "
        f"{format_seconds(u.forward_outside)} outside the nodes' ops "
        f"({_share(u.forward_outside, forward)}: Python between ops, wrappers such as aten::linear)\n",
        f"backward in no node: {u.backward_ranges:g} ranges of no node of the graph "
        f"({format_seconds(u.backward_time)}, {format_bytes(int(u.backward_memory))}); "
        f"{format_seconds(u.backward_outside)} outside every node's range "
        f"({_share(u.backward_outside, backward)}: the engine between nodes)\n",
    ]
    if u.shared_accumulate:
        lines.append(
            f"shared: {u.shared_accumulate} of {accumulate} AccumulateGrad nodes are fed by one op with others "
            f"(a weight and its bias), and autograd runs them in no set order: each got an equal share of theirs\n"
        )
    return lines
