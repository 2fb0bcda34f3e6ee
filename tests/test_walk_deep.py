"""A deep graph walks and draws without recursion (torchviz dies near 1,000 ops deep)."""

import torch

from graphviz_autograd import to_dot, walk
from graphviz_autograd.graph import NO_GRAD, OP

DEPTH = 200_000


def test_a_200k_op_chain_walks_and_draws():
    y = torch.ones(1, requires_grad=True)
    grad_fns = []
    for _ in range(DEPTH):
        y = y * 1.0001
        grad_fns.append(y.grad_fn)

    graph = walk(y)
    dot = to_dot(graph)

    # Each multiplication also has an input without gradient (the constant):
    # output, the ops and their constants, AccumulateGrad and the leaf.
    assert len(graph.nodes) == 2 * DEPTH + 3
    assert sum(1 for n in graph.nodes if n.kind == OP) == DEPTH
    assert sum(1 for n in graph.nodes if n.kind == NO_GRAD) == DEPTH
    assert len(graph.edges) == 2 * DEPTH + 2
    assert dot.count("\n") == 2 + len(graph.nodes) + len(graph.edges) + 2  # braces and defaults

    # Under torch 2.13, a grad_fn Python has seen is freed through its Python
    # wrapper, one nested call per node, and dropping a chain this deep at once
    # overflows the C stack. Let go of the output, then of each op from the output down.
    del y
    while grad_fns:
        grad_fns.pop()
