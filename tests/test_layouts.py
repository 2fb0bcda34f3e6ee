"""Sparse, nested and quantized tensors: labels and tooltips say the layout, and recorded inputs are named."""

from __future__ import annotations

import warnings

import torch
from torch import nn

from graphviz_autograd import make_dot, record, walk


class SparseGraphLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(6, 3))

    def forward(self, adjacency):
        return torch.sparse.mm(adjacency, self.weight).sum()


def test_a_sparse_input_of_a_recorded_forward_is_named_with_its_layout():
    model = SparseGraphLayer()
    with record(model) as rec:
        out = model(torch.randn(4, 6).to_sparse())
    graph = walk(out, model, recorder=rec)
    cuts = [n.label for n in graph.nodes if n.kind == "no_grad"]
    # SparseAddmmBackward0's slots: the zeros sparse.mm adds itself, then the sparse matrix
    assert cuts == ["zeros added by sparse.mm", "adjacency (sparse_coo, requires_grad=False)"]
    source = make_dot(out, recorder=rec).source
    assert "sparse matrix times a dense one" in source  # the op's tooltip


def test_a_sparse_leaf_says_sparse_in_its_label_and_tooltip():
    leaf = torch.randn(4, 6).to_sparse().requires_grad_()
    graph = walk(torch.sparse.sum(leaf * 2), {"adjacency": leaf})
    (node,) = [n for n in graph.nodes if n.kind == "parameter"]
    assert (node.shape, node.dtype) == ((4, 6), "float32 sparse_coo")
    line = next(line for line in make_dot(graph).source.splitlines() if line.startswith(f"\t{node.id} "))
    assert line.count("sparse_coo") == 2  # label and tooltip


def test_a_nested_leaf_says_nested():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors are a prototype
        nested = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)], requires_grad=True)
        graph = walk(nested * 2)
    (node,) = [n for n in graph.nodes if n.kind == "leaf"]
    assert node.dtype == "float32 nested"


def test_a_plain_tensor_is_unchanged():
    w = torch.ones(2, requires_grad=True)
    (node,) = [n for n in walk((w * 2).sum(), {"w": w}).nodes if n.kind == "parameter"]
    assert node.dtype == "float32"
