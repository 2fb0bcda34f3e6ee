"""A walked graph is kept as columns; drawn from them it gives the same bytes as from nodes and edges.

The walk returns :class:`AutogradGraph.from_columns`: node contents shared among
nodes alike, edges by node index, ``nodes`` and ``edges`` built only when read.
The DOT writer reads the columns of any graph (a hand-built one's are made from its
nodes), so the two paths must agree on every graph and option.
"""

from __future__ import annotations


import pytest
import torch

from graphviz_autograd import make_dot, to_dot, walk
from graphviz_autograd.graph.autograd_graph import AutogradGraph, Columns, Edge, Node, numbered_ids
from graphviz_autograd.options import DrawOptions
from graphviz_autograd.views.prepared import prepare

from .graph_cases import CASES


def _walk_as_make_dot_would(case) -> AutogradGraph:
    options = case.options
    params = case.params if case.params is not None or "recorder" not in options else options["recorder"].model
    return walk(
        case.outputs,
        params,
        collect_saved=bool(options.get("show_attrs") or options.get("show_saved")),
        collect_shapes=options.get("show_shapes") is True,
        recorder=options.get("recorder"),
    )


def _rebuilt(graph: AutogradGraph) -> AutogradGraph:
    """The same graph built from its nodes and edges, as a hand-built graph is."""
    return AutogradGraph(tuple(graph.nodes), tuple(graph.edges), graph.params_given, graph.modules)


@pytest.mark.parametrize("name", sorted(CASES))
def test_drawing_from_columns_equals_drawing_from_nodes(name):
    case = CASES[name]()
    walked = _walk_as_make_dot_would(case)
    from_columns = make_dot(walked, case.params, **case.options).source
    from_nodes = make_dot(_rebuilt(walked), case.params, **case.options).source
    assert from_columns == from_nodes


def test_to_dot_reads_the_columns_without_building_nodes():
    x = torch.ones(3, requires_grad=True)
    graph = walk((x * 2).sin().sum(), {"x": x})
    source = to_dot(graph)
    assert graph._nodes is None and graph._edges is None  # never built
    assert source == to_dot(_rebuilt(graph))
    assert graph._nodes is not None  # read once by _rebuilt, then kept


def test_ops_alike_share_one_content():
    x = torch.ones(1, requires_grad=True)
    y = x
    for _ in range(50):
        y = (y * 1.5).exp()
    contents = walk(y, {"x": x}).columns().contents
    assert len(contents) == 1 + 100 + 2  # output, ops (each 1.5 part of its op), AccumulateGrad and x
    # One per op type (the MulBackward0 with its 1.5), one each for the output, the
    # AccumulateGrad and x.
    assert len({id(c) for c in contents}) == 5


def test_a_walked_graph_compares_replaces_and_prints_like_a_built_one():
    x = torch.ones(2, requires_grad=True)
    walked = walk((x * 3).sum(), {"x": x})
    built = _rebuilt(walk((x * 3).sum(), {"x": x}))
    assert walked == built
    assert repr(walked) == repr(built)
    replaced = walk((x * 3).sum(), {"x": x}).replace(params_given=False)
    assert replaced.nodes == built.nodes and not replaced.params_given
    with pytest.raises(AttributeError, match="no attribute 'nodez'"):
        walked.nodez


def test_columns_of_a_built_graph_give_edges_to_unknown_ids_an_index_of_their_own():
    graph = AutogradGraph((Node("a", "op", "A"), Node("a", "op", "B")), (Edge("a", "ghost"), Edge("ghost", "a")))
    ids, contents, links = graph.columns()
    assert ids == ["a", "a", "ghost"] and len(contents) == 2
    assert [(s, t) for s, t, _ in links] == [(0, 2), (2, 0)]  # a repeated id: its first node
    assert "\ta -> ghost\n" in to_dot(graph)


def test_numbered_ids_past_the_kept_ones():
    assert numbered_ids(70_000)[-1] == "n69999"
    assert numbered_ids(2) == ["n0", "n1"]
    columns = Columns(None, [("op", "A", None, None, None, (), "", "")] * 3, [(0, 1, ("data", None, None))])
    assert [n.id for n in AutogradGraph.from_columns(columns).nodes] == ["n0", "n1", "n2"]


@pytest.mark.parametrize("shapes", [False, True])
def test_to_dot_joined_in_runs_equals_the_lines_of_body_lines(shapes):
    from graphviz_autograd.drawing.dot_writer import _JOIN_EVERY, body_lines, digraph

    x = torch.ones(2, requires_grad=True)
    y = x
    for _ in range(_JOIN_EVERY + 10):  # more nodes and edges than one run holds (each 1.0001 is part of its op)
        y = y * 1.0001
    graph = walk(y, {"x": x}, collect_shapes=shapes)
    assert len(graph.columns().links) > _JOIN_EVERY
    lines = body_lines(prepare(graph, DrawOptions(show_shapes=shapes)))
    assert all(line.count("\n") == 1 for line in lines)  # one line each, as documented
    assert to_dot(graph, show_shapes=shapes) == digraph(lines)


@pytest.mark.parametrize("order", ["parameters_last", "parameters_first"])
def test_a_long_run_of_nodes_is_written_as_its_lines_whatever_its_contents(order):
    """to_dot writes a long run of nodes in C-level passes when its first nodes repeat a few
    contents, and with the loop of node_lines otherwise: the same text either way, here
    with 1,500 named parameters (a content each) walked after or before a 4,000-op chain."""
    from graphviz_autograd.drawing.dot_writer import body_lines, digraph

    x = torch.ones(2, requires_grad=True)
    params = {f"p{i}": torch.ones(2, requires_grad=True) for i in range(1_500)}
    y = x
    # Each parameter is its op's first input, so the walk reaches it right after the op.
    if order == "parameters_last":  # walked from the output: the chain's nodes come first
        for p in params.values():
            y = p + y
        for _ in range(4_000):
            y = y * 1.0001
    else:
        for _ in range(4_000):
            y = y * 1.0001
        for p in params.values():
            y = p + y
    graph = walk(y, {"x": x, **params})
    assert len(graph.columns().contents) > 8_192  # long enough for the C-level passes to be tried
    lines = body_lines(prepare(graph, DrawOptions()))
    assert to_dot(graph) == digraph(lines)
    assert sum('label="p' in line for line in lines) == 1_500
