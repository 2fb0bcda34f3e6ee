"""A long row of inputs stays within a page: many alike inputs without gradient of one op
drawn once with their count, and many different inputs on one rank laid as a row of rows
(SLANet's decoding loop read its own argmax 500 times: one row 60,000 points wide)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import torch
from torch import nn

from graphviz_autograd import make_dot, record
from graphviz_autograd.graph.autograd_graph import NO_GRAD, OP, OUTPUT, AutogradGraph, Edge, Node
from graphviz_autograd.views.page_fit import PAGE_LONG_SIDE, picture_size, row_of_rows

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot is not installed")


class Decoder(nn.Module):
    """Each step reads the argmax of the step before (an input without gradient)."""

    def __init__(self, steps: int = 60) -> None:
        super().__init__()
        self.embed = nn.Embedding(8, 4)
        self.cell = nn.Linear(4, 8)
        self.steps = steps

    def forward(self, start: torch.Tensor) -> torch.Tensor:
        token, outputs = start, []
        for _ in range(self.steps):
            logits = self.cell(self.embed(token))
            outputs.append(logits)
            token = logits.argmax(-1)
        return torch.stack(outputs).sum()


def svg_size(source: str) -> tuple[float, float]:
    svg = subprocess.run(["dot", "-Tsvg"], input=source.encode(), capture_output=True, check=True).stdout
    found = re.search(rb'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg)
    assert found
    return float(found.group(1)), float(found.group(2))


@needs_dot
def test_a_decoding_loop_is_drawn_within_a_page():
    model = Decoder()
    with record(model) as rec:
        loss = model(torch.tensor([1]))
    dot = make_dot(loss, recorder=rec)
    assert max(svg_size(dot.source)) <= PAGE_LONG_SIDE


def test_alike_inputs_of_one_op_are_drawn_once_with_their_count():
    inputs = [Node(f"n{i}", NO_GRAD, "int64 from argmax()") for i in range(2, 502)]
    graph = AutogradGraph((Node("n0", OUTPUT, "y"), Node("n1", OP, "StackBackward0"), *inputs),
                          (Edge("n1", "n0"), *(Edge(n.id, "n1") for n in inputs)))
    source = make_dot(graph).source
    assert "int64 from argmax() ×500" in source
    assert source.count(" -> ") == 2  # one input, one edge to the op


@needs_dot
def test_a_long_row_of_different_inputs_is_laid_as_a_row_of_rows():
    count = 120
    inputs = [Node(f"n{i}", NO_GRAD, f"mask {i}") for i in range(2, 2 + count)]
    graph = AutogradGraph((Node("n0", OUTPUT, "y"), Node("n1", OP, "StackBackward0"), *inputs),
                          (Edge("n1", "n0"), *(Edge(n.id, "n1") for n in inputs)))
    rows = row_of_rows(graph)
    assert rows  # each input past the first row stacked on one of the row below
    width, height = svg_size(make_dot(graph).source)
    assert width < count * 54  # no longer one row of 120 boxes
    estimate = picture_size(graph)
    assert 0.5 < width / estimate[0] < 2.0 and 0.5 < height / estimate[1] < 2.0
