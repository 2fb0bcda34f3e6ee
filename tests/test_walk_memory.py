"""A walk lets go of what it walked, and what it keeps between walks stays bounded."""

from __future__ import annotations

import gc
import importlib
import tracemalloc
import weakref

import torch

from graphviz_autograd import to_dot
from graphviz_autograd.capture.walking import walk

# The module, not the package's function of the same name.
walk_module = importlib.import_module("graphviz_autograd.capture.walking")


def _model_output():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    return model, model(torch.randn(3, 4)).sum()


def test_a_walk_keeps_no_tensor_or_grad_fn_alive():
    model, loss = _model_output()
    graph = walk(loss, dict(model.named_parameters()))
    to_dot(graph)
    weight = weakref.ref(model[0].weight)
    output = weakref.ref(loss)
    del model, loss
    gc.collect()
    assert weight() is None and output() is None
    assert len(graph.nodes) > 5  # the graph itself lives on, as plain data


def test_walking_again_and_again_does_not_grow_memory():
    model, loss = _model_output()
    params = dict(model.named_parameters())
    for _ in range(20):  # the first drawings fill the kept attributes
        to_dot(walk(loss, params))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(300):
            to_dot(walk(loss, params))
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # A leaked int or tuple per node would be some 300 * 20 * 28 bytes.
    assert grown < 20_000, grown


def test_node_types_are_kept_between_walks_but_not_for_good(monkeypatch):
    monkeypatch.setattr(walk_module, "_PLAIN_OPS", {})
    monkeypatch.setattr(walk_module, "_PLAIN_OPS_KEPT", 3)
    first_type = None
    for i in range(8):  # a custom Function made anew each time round, as in a loop
        function = type(
            f"Step{i}",
            (torch.autograd.Function,),
            {"forward": staticmethod(lambda ctx, x: x * 2), "backward": staticmethod(lambda ctx, grad: grad * 2)},
        )
        y = function.apply(torch.ones(2, requires_grad=True)).sum()
        graph = walk(y)
        assert f"Step{i}Backward" in {n.label for n in graph.nodes}
        assert len(walk_module._PLAIN_OPS) <= 3
        if first_type is None:
            first_type = weakref.ref(type(y.grad_fn.next_functions[0][0]))
            assert first_type() in walk_module._PLAIN_OPS
        del function, y, graph
    gc.collect()
    assert first_type() is None  # dropped from the kept types, and freed


def test_walks_that_note_more_than_the_type_keep_nothing_between_walks(monkeypatch):
    monkeypatch.setattr(walk_module, "_PLAIN_OPS", {})
    x = torch.ones(2, requires_grad=True)
    graph = walk((x * 2).exp().sum(), collect_saved=True)
    assert walk_module._PLAIN_OPS == {}
    assert any(n.attrs for n in graph.nodes)
    walk((x * 2).exp().sum())
    assert len(walk_module._PLAIN_OPS) == 4  # Sum, Exp, Mul, AccumulateGrad


def test_a_deep_graph_counted_then_walked_twice_is_still_freed():
    # Counting a graph before its walk (as explore() does) and walking it again each hold
    # the wrappers of its nodes; held by two at once, neither would ever let them go.
    from graphviz_autograd.capture import deep_graphs
    from graphviz_autograd.capture.walking import count_functions

    x = torch.ones(1, requires_grad=True)
    marker = torch.randn(1)
    marker_ref = weakref.ref(marker)
    y = x * marker  # MulBackward0 saves marker: it lives exactly as long as the graph
    del marker
    for _ in range(deep_graphs.DEEP_GRAPH_NODES + 10):
        y = y * 1.0
    before = deep_graphs.held_count()
    assert count_functions(y, 10**6) > deep_graphs.DEEP_GRAPH_NODES
    walk(y)
    walk(y)
    del y
    gc.collect()
    assert marker_ref() is None and deep_graphs.held_count() == before
