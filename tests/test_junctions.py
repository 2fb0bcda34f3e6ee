"""Junctions: an output read by many ops far below is drawn as one trunk with branches,
and every read is still there, with its arrowhead at the op that reads."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphviz_autograd import OptionError, make_dot, to_dot
from graphviz_autograd.graph.autograd_graph import CUT, DATA, OP, OUTPUT, AutogradGraph, Edge, ModuleInfo, Node
from graphviz_autograd.views.junctions import link_routes, plan_junctions
from graphviz_autograd.drawing.layout import lay_out
from graphviz_autograd.views.page_fit import estimate_layout_seconds
from graphviz_autograd.options import DrawOptions
from graphviz_autograd.drawing.rendering import run_dot
from graphviz_autograd.views.prepared import prepare

ROOT = Path(__file__).resolve().parent.parent
EDGE_LINE = re.compile(r"^\t+(\S+) -> (\S+)(?: \[(.*)\])?$", re.M)
NODE_LINE = re.compile(r"^\t+(\S+) \[(.*)\]$", re.M)


def dense_block(
    layers: int = 6, shapes: bool = False, first_shapes_differ: bool = False, stem: str = "stem"
) -> AutogradGraph:
    """A DenseNet block drawn by hand: each layer concatenates every earlier feature map
    (``CatBackward0``), then ``ReluBackward0`` and ``ConvolutionBackward0`` make its own;
    a last ``torch.cat`` reads them all. Each layer is a module inside ``block``, the
    first feature map comes from module ``stem``."""
    nodes = [Node("n0", OUTPUT, "y")]
    edges: list[Edge] = []

    def op(label: str, module: str) -> str:
        node_id = f"n{len(nodes)}"
        nodes.append(Node(node_id, OP, label, module=module))
        return node_id

    def shape(feature: int, read: int) -> Optional[tuple[int, ...]]:
        if not shapes:
            return None
        if first_shapes_differ and feature == 0:
            return (1, 8 + read, 4, 4)  # as if each reader took a slice of its own
        return (1, 8 * (feature + 1), 4, 4)

    features = [op("ConvolutionBackward0", stem)]
    for layer in range(1, layers + 1):
        module = f"block.layer{layer}"
        cat = op("CatBackward0", module)
        edges += [Edge(feature, cat, DATA, shape(k, layer)) for k, feature in enumerate(features)]
        relu = op("ReluBackward0", module)
        conv = op("ConvolutionBackward0", module)
        edges += [Edge(cat, relu), Edge(relu, conv)]
        features.append(conv)
    final = op("CatBackward0", "block")
    edges += [Edge(feature, final, DATA, shape(k, layers + 1)) for k, feature in enumerate(features)]
    edges.append(Edge(final, "n0"))
    modules = (
        ModuleInfo("", "Net"),
        ModuleInfo("block", "Block"),
        ModuleInfo(stem, "Conv2d"),
        # Each layer sees more channels, so has more parameters: no two are alike, none is folded.
        *(ModuleInfo(f"block.layer{layer}", "Layer", layer) for layer in range(1, layers + 1)),
    )
    return AutogradGraph(tuple(nodes), tuple(edges), modules=modules)


def drawn_edges(source: str) -> list[tuple[str, str, str]]:
    """(source, target, attributes) of each visible edge of DOT ``source``."""
    return [(s, t, attrs or "") for s, t, attrs in EDGE_LINE.findall(source) if "invis" not in (attrs or "")]


def junction_ids(source: str) -> set[str]:
    return {node_id for node_id, attrs in NODE_LINE.findall(source) if "shape=point" in attrs}


def reads_drawn(source: str) -> Counter:
    """(node, node) -> how many paths the drawing shows from one to the other through junctions alone."""
    junctions = junction_ids(source)
    following = defaultdict(list)
    for s, t, _ in drawn_edges(source):
        following[s].append(t)
    reads: Counter = Counter()
    for start in [s for s in following if s not in junctions]:
        stack = list(following[start])
        while stack:
            at = stack.pop()
            if at in junctions:
                stack.extend(following[at])
            else:
                reads[(start, at)] += 1
    return reads


def reads_of(graph: AutogradGraph) -> Counter:
    return Counter((e.source, e.target) for e in graph.edges)


@pytest.mark.parametrize("clusters", [True, False])
def test_every_read_is_drawn_through_the_junctions_and_no_other(clusters):
    graph = dense_block()
    source = to_dot(graph, clusters=clusters)
    assert junction_ids(source), "a DenseNet block gets a trunk"
    assert reads_drawn(source) == reads_of(graph)
    # The long reads no longer go straight from a feature map to a far concatenation.
    assert len(drawn_edges(source)) < len(graph.edges)


def test_arrowheads_are_only_at_the_ops_that_read():
    source = to_dot(dense_block())
    junctions = junction_ids(source)
    for s, t, attrs in drawn_edges(source):
        assert ("arrowhead=none" in attrs) == (t in junctions), (s, t, attrs)


def test_the_feature_maps_of_a_block_share_one_bus():
    """Outputs read by the same ops from some point on join one trunk there: a DenseNet
    block has one junction above each concatenation, not one per feature map."""
    graph = dense_block(layers=6)
    junctions = junction_ids(to_dot(graph))
    # one above each concatenation a feature map reaches by a long read: layers 2..6 and the last
    assert len(junctions) == 6


def test_an_output_read_three_times_far_below_is_drawn_as_before():
    graph = dense_block(layers=3)  # the stem's output is read by three concatenations and the last
    assert not junction_ids(to_dot(graph))
    assert to_dot(graph) == to_dot(graph, junctions=False)


def test_junctions_false_draws_each_read_as_its_own_edge():
    graph = dense_block()
    source = to_dot(graph, junctions=False)
    assert not junction_ids(source)
    assert Counter((s, t) for s, t, _ in drawn_edges(source)) == reads_of(graph)
    assert make_dot(graph, junctions=False).source == source
    assert junction_ids(make_dot(graph).source)


def test_the_junctions_option_is_checked():
    with pytest.raises(OptionError, match="junctions must be True or False; got 'no'"):
        DrawOptions(junctions="no")  # type: ignore[arg-type]


def test_the_same_graph_gives_the_same_bytes_in_another_process():
    source = to_dot(dense_block(), clusters=True)
    assert to_dot(dense_block(), clusters=True) == source
    script = (
        "import sys; sys.path.insert(0, 'tests'); from test_junctions import dense_block; "
        "from graphviz_autograd import to_dot; sys.stdout.write(to_dot(dense_block(), clusters=True))"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == source


def test_a_shape_shared_by_all_reads_is_written_once_on_the_joining_edge():
    graph = dense_block(shapes=True)
    source = to_dot(graph, show_shapes=True)
    junctions = junction_ids(source)
    labels = Counter()
    for s, _, attrs in drawn_edges(source):
        label = re.search(r'label="([^"]*)"', attrs)
        if s in junctions:
            assert label is None, "a branch of a trunk of one shape carries none"
        elif label is not None:
            labels[label.group(1)] += 1
    # Feature map k (shape (1, 8(k+1), 4, 4)) is labelled on its direct read and its joining edge.
    assert labels["(1, 8, 4, 4)"] == 2
    assert reads_drawn(source) == reads_of(graph)


def test_reads_of_different_shapes_keep_their_shapes_on_their_branches():
    graph = dense_block(shapes=True, first_shapes_differ=True)
    source = to_dot(graph, show_shapes=True)
    stem = "n1"
    stem_trunk = {t for s, t, _ in drawn_edges(source) if s == stem} & junction_ids(source)
    assert len(stem_trunk) == 1
    following = defaultdict(list)
    for s, t, attrs in drawn_edges(source):
        following[s].append((t, attrs))
    # Down the stem's trunk, each branch says the shape its reader gets.
    branch_labels = {}
    at: Optional[str] = stem_trunk.pop()
    while at is not None:
        after = None
        for target, attrs in following[at]:
            if target in junction_ids(source):
                after = target
            else:
                branch_labels[target] = re.search(r'label="([^"]*)"', attrs).group(1)
        at = after
    shapes = {e.target: f"({', '.join(map(str, e.shape))})" for e in graph.edges if e.source == stem and e.shape}
    assert branch_labels == {t: shapes[t] for t in branch_labels}
    assert len(branch_labels) >= 4


def test_a_junction_sits_in_the_innermost_box_around_its_outputs_and_readers(graphviz_svg):
    # The stem inside the block: the bus runs inside the block's box, beside its layers.
    source = to_dot(dense_block(stem="block.stem"), clusters=True)
    nodes = graphviz_svg(source)  # Graphviz draws it without a warning
    junctions = junction_ids(source)
    assert junctions and junctions <= set(nodes)
    block = re.search(r"subgraph cluster_m1 \{\n(.*?)\n\t\}", source, re.S)
    assert block is not None and "block (Block)" in block.group(1).splitlines()[0]
    layers = "".join(re.findall(r"subgraph cluster_m[2-9] \{.*?\n\t\t\}", source, re.S))
    for junction in junctions:
        assert f"\n\t\t{junction} [" in block.group(1)
        assert f"{junction} [" not in layers
    assert "junction: the outputs of" in nodes[sorted(junctions)[-1]].tooltip
    # The stem outside it: the bus runs outside the block, in no box.
    source = to_dot(dense_block(stem="stem"), clusters=True)
    top_level = {node_id for node_id in re.findall(r"^\t(\S+) \[", source, re.M)}
    assert junction_ids(source) <= top_level


def test_junction_ids_stay_clear_of_the_graph_s_own_ids():
    graph = dense_block()
    nodes = list(graph.nodes) + [Node("n1_j0", OP, "Taken")]
    source = to_dot(AutogradGraph(tuple(nodes), graph.edges, modules=graph.modules))
    assert "n1_jj0 [" in source and "\tn1_j0 [" in source
    assert source.count("\tn1_j0 [") == 1


def test_the_fixed_layout_draws_each_read_without_junctions():
    graph = dense_block()
    laid = lay_out(prepare(graph, layout="fixed", depth="full", fold_repeated=False))
    source = "digraph {\n" + "".join(laid.lines) + "}\n"
    assert laid.engine == "neato" and not junction_ids(source)
    assert reads_drawn(source) == reads_of(graph)
    svg = run_dot(source, "svg", engine="neato").decode()
    assert svg.count('class="node"') == len(graph.nodes)


def test_layout_auto_keeps_the_junctions_when_dot_is_chosen():
    laid = lay_out(prepare(dense_block(), layout="auto", depth="full", fold_repeated=False))
    assert laid.engine == "dot"
    assert junction_ids("".join(laid.lines))


def test_the_estimate_counts_the_junctions_dot_is_given():
    graph = dense_block(layers=24)
    assert estimate_layout_seconds(graph) < estimate_layout_seconds(graph, junctions=False) / 3


DENSE_MODEL = '''
import torch
from torch import nn


class Dense(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Conv2d(2 * (i + 1), 2, 1) for i in range(6))

    def forward(self, x):
        features = [x]
        for layer in self.layers:
            features.append(torch.relu(layer(torch.cat(features, 1))))
        return torch.cat(features, 1).sum()


model = Dense()
example_inputs = (torch.randn(1, 2, 4, 4),)
'''


def test_the_command_line_draws_junctions_unless_told_not_to(tmp_path):
    from click.testing import CliRunner

    from graphviz_autograd.cli.commands import main

    model = tmp_path / "dense.py"
    model.write_text(DENSE_MODEL)
    sources = {}
    for flags in ((), ("--no-junctions",)):
        out = tmp_path / f"dense{len(flags)}.dot"
        done = CliRunner().invoke(main, ["render", str(model), "-o", str(out), "-q", *flags])
        assert done.exit_code == 0, done.output
        sources[flags] = out.read_text()
    with_junctions, without = sources[()], sources[("--no-junctions",)]
    assert junction_ids(with_junctions) and not junction_ids(without)
    assert reads_drawn(with_junctions) == Counter((s, t) for s, t, _ in drawn_edges(without))


def test_a_graph_too_big_for_dot_however_drawn_is_not_searched_for_junctions(monkeypatch):
    from graphviz_autograd.views import junctions

    graph = dense_block()
    monkeypatch.setattr(junctions, "MAX_NODES", len(graph.nodes) - 1)
    assert not junction_ids(to_dot(graph))


@st.composite
def fan_in_links(draw):
    """Edges of a random DAG by node index (a lower index is upstream), with outputs read
    many times far below, some reads repeated and of both kinds."""
    count = draw(st.integers(min_value=6, max_value=30))
    links = [(i, i + 1, (DATA, None, None)) for i in range(count - 1)]  # a spine, so reads are long
    for _ in range(draw(st.integers(min_value=0, max_value=60))):
        source = draw(st.integers(min_value=0, max_value=count - 2))
        target = draw(st.integers(min_value=source + 1, max_value=count - 1))
        links.append((source, target, (draw(st.sampled_from([DATA, DATA, CUT])), None, None)))
    return count, draw(st.permutations(links))


@settings(max_examples=200, deadline=None)
@given(fan_in_links())
def test_each_route_runs_from_its_source_to_its_reader_through_junctions_only(case):
    count, links = case
    rerouted = plan_junctions(count, links)
    if rerouted is None:
        return
    routes = link_routes(rerouted, links)
    assert len(routes) == len(links)
    drawn = rerouted.links
    for (source, target, rest), route in zip(links, routes):
        ends = [drawn[p][:2] for p in route]
        assert ends[0][0] == source and ends[-1][1] == target
        assert all(a[1] == b[0] for a, b in zip(ends, ends[1:]))  # one chain of edges
        assert all(a[1] >= count for a in ends[:-1])  # every stop on the way is a junction
        assert drawn[route[-1]][2][0] == rest[0]  # the last edge, with its arrowhead, has the read's kind
    # Every edge drawn serves some read, and an edge between two ops is one read's own.
    used = Counter(p for route in routes for p in route)
    assert set(used) == set(range(len(drawn)))
    assert all(used[p] == 1 for p, (s, t, _) in enumerate(drawn) if s < count and t < count)



def test_a_drawing_plans_its_junctions_once(monkeypatch):
    """layout="auto" (the default of render and the CLI) estimates dot's time with the
    junctions drawn, then the DOT writer draws them: one plan, kept on the drawn graph."""
    import graphviz_autograd.views.junctions as junctions
    from graphviz_autograd.drawing.dot_writer import dot_source

    plans = []

    def counted(*args, **kwargs):
        plans.append(args[0])
        return plan_junctions(*args, **kwargs)

    monkeypatch.setattr(junctions, "plan_junctions", counted)
    graph = dense_block(6)
    view = prepare(graph, DrawOptions(layout="auto"))
    source = dot_source(view)
    assert plans == [len(graph.nodes)]
    assert source == to_dot(dense_block(6), layout="auto")  # the kept plan draws what a new one draws
    assert junction_ids(source)
