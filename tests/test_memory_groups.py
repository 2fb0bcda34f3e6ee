"""The memory report groups repeated modules (layers.*.mlp ×N) in check() and in the drawing's note."""

from __future__ import annotations

import torch
from torch import nn

from graphviz_autograd import check, make_dot, record


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.Linear(8, 8)
        self.mlp = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 8))

    def forward(self, x):
        return x + self.mlp(torch.tanh(self.attn(x)))


class Stack(nn.Module):
    def __init__(self, depth: int):
        super().__init__()
        self.layers = nn.ModuleList(Block() for _ in range(depth))
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x).sum()


def memory(findings):
    return [(f.subject, f.message) for f in findings if f.code == "saved_memory"]


def test_repeated_blocks_are_one_row_each_with_their_count_and_share():
    model = Stack(5)
    with record(model) as rec:
        loss = model(torch.randn(4, 8))
    rows = memory(check(loss, model, recorder=rec, top_memory=3))
    subjects = [subject for subject, _ in rows]
    assert subjects[0] == "layers.*.mlp.1"  # GELU saves its 32-wide input (ties with mlp.2, sorted by name)
    assert all(subject.startswith("layers.*") for subject in subjects), subjects
    assert not any(".0." in subject or subject.endswith(".0") for subject in subjects)
    assert all("×5 saves" in message for _, message in rows)
    total = sum(float(message.split("(")[1].split("%")[0]) for _, message in rows)
    assert total <= 100


def test_the_drawing_note_groups_them_too():
    model = Stack(3)
    with record(model) as rec:
        loss = model(torch.randn(4, 8))
    source = make_dot(loss, recorder=rec, show_attrs=True, diagnose=True).source
    note = next(line for line in source.splitlines() if "memory saved for backward:" in line)
    assert "layers.*.mlp" in note and "×3 saves" in note and "layers.0" not in note


def test_a_module_met_once_keeps_its_path():
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    with record(model) as rec:
        loss = model(torch.randn(3, 4)).sum()
    subjects = {subject for subject, _ in memory(check(loss, model, recorder=rec))}
    assert subjects <= {"0", "1", "2", ""} and "*" not in "".join(subjects)
