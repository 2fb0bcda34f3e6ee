"""One fold of repeated blocks: a run of alike sibling modules is one box in the explorer
exactly when it is one box in a static summary, on real architectures."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from graphviz_autograd import collapse, explore, record, walk
from graphviz_autograd.graph.autograd_graph import MODULE


def _recorded(model: nn.Module, *inputs, **keywords):
    torch.manual_seed(0)
    with record(model) as rec:
        out = model(*inputs, **keywords)
    out = out.logits if hasattr(out, "logits") else out.last_hidden_state if hasattr(out, "last_hidden_state") else out
    return walk(out.sum(), model, recorder=rec, collect_saved=True, collect_shapes=True)


def _bert():
    from transformers import BertConfig, BertModel

    config = BertConfig(num_hidden_layers=4, hidden_size=32, num_attention_heads=2, intermediate_size=64, vocab_size=100)
    return _recorded(BertModel(config), torch.arange(8).unsqueeze(0))


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    return _recorded(GPT2LMHeadModel(GPT2Config(n_layer=4, n_embd=32, n_head=2, vocab_size=100, n_positions=16)),
                     torch.arange(8).unsqueeze(0))


def _t5():
    from transformers import T5Config, T5Model

    config = T5Config(num_layers=3, num_decoder_layers=3, d_model=32, d_kv=8, num_heads=2, d_ff=64, vocab_size=100)
    ids = torch.arange(6).unsqueeze(0)
    return _recorded(T5Model(config), input_ids=ids, decoder_input_ids=ids)


def _albert():
    from transformers import AlbertConfig, AlbertModel

    config = AlbertConfig(num_hidden_layers=4, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                          embedding_size=16, vocab_size=100)
    return _recorded(AlbertModel(config), torch.arange(8).unsqueeze(0))


class _Bottleneck(nn.Module):
    """A ResNet bottleneck as torchvision writes it: one ReLU applied three times."""

    def __init__(self, width: int):
        super().__init__()
        self.conv1 = nn.Conv2d(width, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, width, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU()

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + x)


def _resnet():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.Sequential(*[_Bottleneck(8) for _ in range(3)]),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
    return _recorded(model, torch.randn(1, 3, 8, 8))


class _Unrolled(nn.Module):
    """An RNN cell run at every step."""

    def __init__(self):
        super().__init__()
        self.cell = nn.RNNCell(3, 4)
        self.out = nn.Linear(4, 1)

    def forward(self, xs):
        h = torch.zeros(1, 4)
        for x in xs:
            h = self.cell(x, h)
        return self.out(h)


def _rnn():
    return _recorded(_Unrolled(), torch.randn(5, 1, 3))


MODELS = {"bert": _bert, "gpt2": _gpt2, "t5": _t5, "albert": _albert, "resnet": _resnet, "rnn_cell": _rnn}


def static_runs(graph) -> set[tuple[str, str, int]]:
    """(first, last, count) of every folded box of a summary at any depth."""
    deepest = max(m.path.count(".") for m in graph.modules if m.path)
    found = set()
    for depth in range(deepest + 1):
        for node in collapse(graph, depth).nodes:
            attrs = dict(node.attrs)
            if node.kind == MODULE and "repeats" in attrs:
                found.add((attrs["first"], attrs["last"], int(attrs["repeats"])))
    return found


def explorer_runs(graph) -> set[tuple[str, str, int]]:
    """(first, last, count) of every folded box of every level of the explorer's page."""
    data = explore(graph, layout="fixed").data  # the layout does not decide what folds
    levels = data["levels"]
    found = set()
    for level in levels:
        items = data["templates"][level["template"]]["items"]
        for item, ref in zip(items, level["refs"]):
            if item["kind"] == "box" and item["count"] > 1:
                found.add((levels[ref[0]]["path"], levels[ref[-1]]["path"], item["count"]))
    return found


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_run_folds_in_the_explorer_exactly_when_it_folds_in_a_summary(name):
    graph = MODELS[name]()
    folded = static_runs(graph)
    assert folded, "each of these models repeats a block"
    assert explorer_runs(graph) == folded
