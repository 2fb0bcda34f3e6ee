"""A run of alike blocks inside the first block of another run (a decoder layer's self- and
cross-attention, of one class, in a stack of decoder layers): folded at both levels, every
edge still joins two drawn nodes. (EncoderDecoderModel, VisionEncoderDecoderModel and
Mask2Former raised KeyError in collapsing's _edges: a dropped node stood in for by a node
that was itself dropped.)"""

from __future__ import annotations

import re

import torch
from torch import nn

from graphviz_autograd import explore, make_dot, record, walk
from graphviz_autograd.views.collapsing import fold_with_stand_ins


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.query = nn.Linear(4, 4)
        self.key = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None) -> torch.Tensor:
        keys = self.key(x if memory is None else memory)
        return x + torch.tanh(self.query(x) * keys)


class DecoderLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attention = Attention()
        self.crossattention = Attention()

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        return self.crossattention(self.attention(x), memory)


class EncoderDecoder(nn.Module):
    def __init__(self, layers: int = 3) -> None:
        super().__init__()
        self.encoder = nn.Linear(4, 4)
        self.layer = nn.ModuleList(DecoderLayer() for _ in range(layers))

    def forward(self, source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        memory = self.encoder(source)
        for layer in self.layer:
            target = layer(target, memory)
        return target.sum()


def recorded():
    torch.manual_seed(0)
    model = EncoderDecoder()
    with record(model) as rec:
        loss = model(torch.randn(2, 4), torch.randn(2, 4))
    return model, loss, rec


def defined_and_joined(source: str) -> tuple[set, set]:
    defined = set(re.findall(r"^\s*(n\d+) \[", source, re.MULTILINE))
    joined = {end for pair in re.findall(r"^\s*(n\d+)(?::\w+)? -> (n\d+)", source, re.MULTILINE) for end in pair}
    return defined, joined


def test_a_stand_in_is_never_a_node_that_went():
    model, loss, rec = recorded()
    folded, stand_in = fold_with_stand_ins(walk(loss, model, recorder=rec))
    ids = {n.id for n in folded.nodes}
    assert set(stand_in.values()) <= ids
    assert all(e.source in ids and e.target in ids for e in folded.edges)


def test_nested_runs_draw_at_every_depth():
    model, loss, rec = recorded()
    for depth in ("fit", "full", 0, 1, 2, 3):
        source = make_dot(loss, recorder=rec, depth=depth).source
        defined, joined = defined_and_joined(source)
        assert joined <= defined, (depth, sorted(joined - defined))
    # the encoder still feeds the one decoder layer drawn
    full = make_dot(loss, recorder=rec, depth="full").source
    assert "×3" in full
    explore(loss, recorder=rec)
