"""The walk builds its records with tuple.__new__ for speed; they must equal the named constructors'."""

import torch

from graphviz_autograd import Edge, Node, walk
from graphviz_autograd.graph.autograd_graph import ACCUMULATE_GRAD, CUT, NO_GRAD, OP, OUTPUT, PARAMETER


def test_walk_records_match_nodes_and_edges_built_by_name():
    w = torch.ones(2, requires_grad=True)
    graph = walk((w * torch.ones(2)).sum(), params={"w": w})
    assert graph.nodes == (
        Node("n0", OUTPUT, "", shape=(), dtype="float32", device="cpu"),
        Node("n1", OP, "SumBackward0"),
        Node("n2", OP, "MulBackward0"),
        Node("n3", ACCUMULATE_GRAD, "AccumulateGrad"),
        Node("n4", NO_GRAD),
        Node("n5", PARAMETER, "w", shape=(2,), dtype="float32", device="cpu"),
    )
    assert graph.edges == (
        Edge("n2", "n1"),
        Edge("n3", "n2"),
        Edge("n4", "n2", CUT),
        Edge("n5", "n3"),
        Edge("n1", "n0"),
    )
    assert all(type(n) is Node for n in graph.nodes)
    assert all(type(e) is Edge for e in graph.edges)


def test_inputs_are_numbered_in_input_order_depth_first():
    a = torch.ones(1, requires_grad=True)
    b = torch.ones(1, requires_grad=True)
    c = torch.ones(1, requires_grad=True)
    graph = walk(a.exp() * b.sin() + c.cos(), params={"a": a, "b": b, "c": c})
    ops = [n.label for n in graph.nodes if n.kind == OP]
    # ids go to a node's inputs first, in input order; then the first input is walked.
    assert ops == ["AddBackward0", "MulBackward0", "CosBackward0", "ExpBackward0", "SinBackward0"]
    names = [n.label for n in graph.nodes if n.kind == PARAMETER]
    assert names == ["a", "b", "c"]
