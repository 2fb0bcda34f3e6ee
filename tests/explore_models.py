"""Small models and hand-built graphs the explorer tests draw."""

from __future__ import annotations

import torch

from graphviz_autograd import record
from graphviz_autograd.graph.autograd_graph import ACCUMULATE_GRAD, DATA, OP, OUTPUT, PARAMETER, AutogradGraph, Edge, ModuleInfo, Node

# The name a hostile model could give a module: it must show as text and run nothing.
HOSTILE = '<img src=x onerror="window.__pwned=1">'


def tiny_gpt2(layers: int = 4):
    """A recorded forward pass of a small GPT-2 built from a config: (logits, recorder)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging

    logging.set_verbosity_error()  # the tiny vocabulary makes it warn about token ids
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=layers, n_embd=32, n_head=2, vocab_size=100, n_positions=16))
    with record(model) as recorder:
        logits = model(torch.arange(8).unsqueeze(0)).logits
    return logits, recorder


class _DenseLayer(torch.nn.Module):
    def __init__(self, width: int, growth: int):
        super().__init__()
        self.fc = torch.nn.Linear(width, growth)

    def forward(self, features: list) -> torch.Tensor:
        return torch.relu(self.fc(torch.cat(features, 1)))  # every earlier output, read again


class _DenseBlock(torch.nn.Module):
    """A DenseNet block in miniature: each layer reads the block's input and every layer's output before it."""

    def __init__(self, layers: int, width: int = 4, growth: int = 2):
        super().__init__()
        self.layers = torch.nn.ModuleList(_DenseLayer(width + i * growth, growth) for i in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return torch.cat(features, 1)


def tiny_dense_block(layers: int = 7):
    """A recorded forward pass of a DenseNet-style block: (output, recorder). The block's
    level is a row of layers, each read by every later one: fan-in for junctions."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), _DenseBlock(layers))
    with record(model) as recorder:
        out = model(torch.ones(2, 3))
    return out, recorder


def hostile_graph() -> AutogradGraph:
    """A graph whose module, parameter and op names are HTML and script."""
    return AutogradGraph(
        nodes=(
            Node("n0", OUTPUT, "</script><script>window.__pwned=2</script>", shape=(2,)),
            Node("n1", OP, "<b>MulBackward0</b>", module=HOSTILE),
            Node("n2", ACCUMULATE_GRAD, "AccumulateGrad", module=HOSTILE),
            Node("n3", PARAMETER, HOSTILE + ".weight", shape=(2,), dtype="float32", module=HOSTILE),
        ),
        edges=(Edge("n1", "n0", DATA, (2,), "float32"), Edge("n2", "n1"), Edge("n3", "n2")),
        params_given=True,
        modules=(ModuleInfo("", "Net&<i>", 2), ModuleInfo(HOSTILE, "<svg onload=window.__pwned=3>", 2)),
    )
