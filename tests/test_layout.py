"""Layouts that stay fast: shared parameters drawn once per use, the fixed layered layout,
and the choice between it and Graphviz dot."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter

import pytest
import torch
from torch import nn

from graphviz_autograd import make_dot, render, to_dot, walk
from graphviz_autograd.api import lay_out
from graphviz_autograd.errors import OptionError
from graphviz_autograd.graph.autograd_graph import ACCUMULATE_GRAD, CUT, NO_GRAD, OP, OUTPUT, PARAMETER, AutogradGraph, Edge, Node
from graphviz_autograd.drawing.layout import FOLD_LONGER_THAN, fixed_layout_lines, layered_positions
from graphviz_autograd.views.page_fit import choose_layout
from graphviz_autograd.views.page_fit import estimate_layout_seconds, rank_widths
from graphviz_autograd.views.shown import DEFAULT_MAX_USES, split_shared_leaves
from graphviz_autograd.views.prepared import prepare

from .test_cli import invoke, needs_dot

SVG = "{http://www.w3.org/2000/svg}"
needs_neato = pytest.mark.skipif(shutil.which("neato") is None, reason="Graphviz 'neato' is not installed")


def shared_parameter_graph(uses: int) -> AutogradGraph:
    """w feeds ``uses`` multiplications that are summed: AccumulateGrad n2 has ``uses`` consumers."""
    nodes = [Node("n0", OUTPUT, "y", shape=()), Node("n1", OP, "SumBackward0"), Node("n2", ACCUMULATE_GRAD, "AccumulateGrad"),
             Node("n3", PARAMETER, "w", shape=(2,))]
    edges = [Edge("n3", "n2")]
    for u in range(uses):
        op = f"n{4 + u}"
        nodes.append(Node(op, OP, "MulBackward0"))
        edges += [Edge("n2", op), Edge(op, "n1")]
    edges.append(Edge("n1", "n0"))
    return AutogradGraph(tuple(nodes), tuple(edges), params_given=True)


def unrolled_lstm(steps: int):
    torch.manual_seed(0)
    cell = nn.LSTMCell(3, 4)
    h = c = torch.zeros(1, 4)
    for x in torch.randn(steps, 1, 3):
        h, c = cell(x, (h, c))
    return h, dict(cell.named_parameters())


def chain_graph(length: int) -> AutogradGraph:
    """A hand-built chain as the walk makes it: each op has an input without gradient."""
    nodes = [Node("n0", OUTPUT, "y", shape=(1,))]
    edges = []
    for k in range(1, length + 1):
        op, cut = f"n{2 * k - 1}", f"n{2 * k}"
        nodes += [Node(op, OP, "MulBackward0"), Node(cut, NO_GRAD)]
        edges += [Edge(op, f"n{max(2 * k - 3, 0)}"), Edge(cut, op, CUT)]
    return AutogradGraph(tuple(nodes), tuple(edges))


def dense_block_graph(layers: int) -> AutogradGraph:
    """A DenseNet block as the walk makes it: each layer's output feeds the concatenation of every later layer.

    The block input n1 and the output of each layer (a convolution) go into the
    ``CatBackward0`` that starts each later layer and into the block's last one,
    which feeds the output n0. A layer is a concatenation and three ops, 4 ranks, so
    the edges into later concatenations reach down across 4 more ranks per layer.
    """
    nodes = [Node("n0", OUTPUT, "y", shape=(1, 8)), Node("n1", OP, "ConvolutionBackward0")]
    edges = []
    features = ["n1"]
    for _ in range(layers):
        cat, norm, relu, conv = (f"n{len(nodes) + i}" for i in range(4))
        nodes += [Node(cat, OP, "CatBackward0"), Node(norm, OP, "NativeBatchNormBackward0"),
                  Node(relu, OP, "ReluBackward0"), Node(conv, OP, "ConvolutionBackward0")]
        edges += [Edge(f, cat) for f in features] + [Edge(cat, norm), Edge(norm, relu), Edge(relu, conv)]
        features.append(conv)
    last = f"n{len(nodes)}"
    nodes.append(Node(last, OP, "CatBackward0"))
    edges += [Edge(f, last) for f in features] + [Edge(last, "n0")]
    return AutogradGraph(tuple(nodes), tuple(edges))


# --- split_shared_leaves ---------------------------------------------------------------


def test_split_gives_each_use_its_own_copy_with_stable_ids():
    split = split_shared_leaves(shared_parameter_graph(3), max_uses=2)
    ids = [n.id for n in split.nodes]
    assert ids == ["n0", "n1", "n2", "n2_2", "n2_3", "n3", "n3_2", "n3_3", "n4", "n5", "n6"]
    accumulators = [n for n in split.nodes if n.kind == ACCUMULATE_GRAD]
    assert [n.label for n in accumulators] == [f"AccumulateGrad\n(use {u} of 3)" for u in (1, 2, 3)]
    assert {n.label for n in split.nodes if n.kind == PARAMETER} == {"w"}
    pairs = [(e.source, e.target) for e in split.edges]
    assert pairs == [
        ("n3", "n2"), ("n3_2", "n2_2"), ("n3_3", "n2_3"),
        ("n2", "n4"), ("n4", "n1"), ("n2_2", "n5"), ("n5", "n1"), ("n2_3", "n6"), ("n6", "n1"),
        ("n1", "n0"),
    ]
    # Every copy feeds exactly one op, and nothing else changed.
    assert max(Counter(e.source for e in split.edges).values()) == 1
    assert split.params_given


def test_split_respects_the_threshold():
    graph = shared_parameter_graph(DEFAULT_MAX_USES)
    assert split_shared_leaves(graph) is graph
    assert split_shared_leaves(graph, max_uses=None) is graph
    more = shared_parameter_graph(DEFAULT_MAX_USES + 1)
    assert len(split_shared_leaves(more).nodes) == len(more.nodes) + 2 * DEFAULT_MAX_USES


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_split_rejects_a_bad_threshold(bad):
    with pytest.raises(OptionError, match="max_uses"):
        split_shared_leaves(shared_parameter_graph(2), max_uses=bad)


def test_split_of_a_real_lstm_copies_each_weight_once_per_step():
    steps = DEFAULT_MAX_USES + 2
    outputs, params = unrolled_lstm(steps)
    graph = walk(outputs, params)
    split = split_shared_leaves(graph)
    parameters = Counter(n.label for n in split.nodes if n.kind == PARAMETER)
    assert parameters == {name: steps for name in params}
    assert len(split.nodes) == len(graph.nodes) + 2 * 4 * (steps - 1)
    assert len(split.edges) == len(graph.edges) + 4 * (steps - 1)
    # Copies are what they copy, but for the id and the use in the label.
    for node in split.nodes:
        if "_" in node.id:
            original = graph.node(node.id.split("_")[0])
            assert node._replace(id=original.id, label=original.label) == original
    # Ids depend on the walk alone: a second run of the same model gives the same bytes.
    again = walk(*unrolled_lstm(steps))
    assert to_dot(again) == to_dot(graph)
    assert sum(1 for n in split.nodes if n.id.endswith(f"_{steps}")) == 2 * 4


def test_a_model_split_again_has_the_same_copies():
    """Drawn again (a notebook cell run twice, a page written every few steps), a model's
    shared weights are split into the very same copies, whose text the DOT writer then
    finds by identity instead of hashing a new label per use."""
    outputs, params = unrolled_lstm(DEFAULT_MAX_USES + 2)
    first, again = (split_shared_leaves(walk(outputs, params)).columns().contents for _ in range(2))
    copies = [i for i, content in enumerate(first) if content[0] == ACCUMULATE_GRAD]
    assert len(copies) == 4 * (DEFAULT_MAX_USES + 2)
    assert all(first[i] is again[i] for i in copies)
    # A hand-built node that cannot be kept (its shape is a list) is split all the same.
    unkept = Node("n1", ACCUMULATE_GRAD, "AccumulateGrad", shape=[2])  # type: ignore[arg-type]
    graph = AutogradGraph((Node("n0", OP, "AddBackward0"), unkept), (Edge("n1", "n0"), Edge("n1", "n0")))
    assert [n.label for n in split_shared_leaves(graph, max_uses=1).nodes][1:] == [
        "AccumulateGrad\n(use 1 of 2)", "AccumulateGrad\n(use 2 of 2)",
    ]


class StepModel(nn.Module):
    """A recorded loop: one cell and one output layer called at every step."""

    def __init__(self):
        super().__init__()
        self.cell, self.out = nn.RNNCell(3, 4), nn.Linear(4, 2)

    def forward(self, xs):
        h = torch.zeros(1, 4)
        outs = []
        for x in xs:
            h = self.cell(x, h)
            outs.append(self.out(h))
        return torch.stack(outs).sum()


def recorded_steps(steps: int):
    from graphviz_autograd import record

    torch.manual_seed(0)
    model = StepModel()
    with record(model) as rec:
        out = model(torch.randn(steps, 1, 3))
    return walk(out, model, recorder=rec)


def test_split_puts_each_copy_in_the_call_that_reads_it():
    steps = DEFAULT_MAX_USES + 2
    split = split_shared_leaves(recorded_steps(steps))
    for name, module in (("out.weight", "out"), ("cell.weight_ih", "cell")):
        copies = [n for n in split.nodes if n.kind == PARAMETER and n.label == name]
        calls = [module] + [f"{module}#{k}" for k in range(2, steps + 1)]
        assert sorted(n.module for n in copies) == sorted(calls)
        # Each copy's AccumulateGrad sits in the same call as the copy and the op it feeds.
        for copy in copies:
            accumulate = split.node(next(e.target for e in split.edges if e.source == copy.id))
            reader = split.node(next(e.target for e in split.edges if e.source == accumulate.id))
            assert accumulate.module == copy.module == reader.module


class Reader(nn.Module):
    def forward(self, x, weight):
        return x @ weight


class ReadElsewhere(nn.Module):
    """One module's weight read by ten other modules."""

    def __init__(self):
        super().__init__()
        self.owner = nn.Linear(3, 3)
        self.readers = nn.ModuleList(Reader() for _ in range(DEFAULT_MAX_USES + 2))

    def forward(self, x):
        for reader in self.readers:
            x = reader(x, self.owner.weight)
        return x.sum()


def test_split_leaves_copies_read_by_other_modules_with_the_owner():
    from graphviz_autograd import record

    model = ReadElsewhere()
    with record(model) as rec:
        out = model(torch.ones(1, 3))
    split = split_shared_leaves(walk(out, model, recorder=rec))
    copies = [n for n in split.nodes if n.kind == PARAMETER and n.label == "owner.weight"]
    assert len(copies) == DEFAULT_MAX_USES + 2
    assert {n.module for n in copies} == {"owner"}


def test_dot_splits_by_default_and_can_be_told_not_to():
    graph = shared_parameter_graph(DEFAULT_MAX_USES + 1)
    split_source = to_dot(graph)
    assert f"n2_{DEFAULT_MAX_USES + 1} " in split_source and "(use 1 of 9)" in split_source
    whole = make_dot(graph, split_shared=False).source
    assert "n2_2" not in whole and whole.count("\tn2 -> ") == DEFAULT_MAX_USES + 1


@needs_dot
def test_split_copies_are_drawn(graphviz_svg):
    drawn = graphviz_svg(to_dot(shared_parameter_graph(10)))
    assert drawn["n2_10"].lines == ["AccumulateGrad", "(use 10 of 10)"]
    assert drawn["n3_10"].lines == ["w", "(2)"]


# --- the fixed layout ----------------------------------------------------------------


@needs_neato
def test_fixed_layout_draws_every_node_where_it_was_put(tmp_path):
    outputs, params = unrolled_lstm(3)
    path = render(outputs, tmp_path / "lstm.svg", params, layout="fixed")
    root = ET.parse(path).getroot()
    titles = {g.find(SVG + "title").text for g in root.iter(SVG + "g") if g.get("class") == "node"}
    graph = walk(outputs, params)
    assert titles == {n.id for n in split_shared_leaves(graph).nodes}
    edges = [g for g in root.iter(SVG + "g") if g.get("class") == "edge"]
    assert len(edges) == len(graph.edges)


@needs_neato
def test_fixed_layout_of_a_20k_node_chain_renders(tmp_path):
    graph = chain_graph(10_000)
    laid_out = lay_out(prepare(graph, layout="fixed", depth="full", fold_repeated=False))
    assert laid_out.engine == "neato"
    source = "digraph {\n" + "".join(laid_out.lines) + "}\n"
    done = subprocess.run(["neato", "-n2", "-Tsvg"], input=source.encode(), capture_output=True, timeout=120)
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert done.stdout.count(b'class="node"') == len(graph.nodes)


def test_fixed_layout_is_the_same_bytes_every_time():
    outputs, params = unrolled_lstm(2)
    first = make_dot(outputs, params, layout="fixed").source
    again = make_dot(walk(outputs, params), params, layout="fixed").source
    assert first == again
    assert re.search(r'\tn0 \[pos="-?[0-9.]+,-?[0-9.]+!"\]\n', first)


def test_positions_put_inputs_above_and_keep_boxes_apart():
    graph = split_shared_leaves(walk(*unrolled_lstm(3)))
    positions = layered_positions(graph)
    for edge in graph.edges:
        assert positions[edge.source][1] > positions[edge.target][1]
    by_rank = {}
    for node_id, (x, y) in positions.items():
        by_rank.setdefault(y, []).append(x)
    for xs in by_rank.values():
        xs.sort()
        assert all(b - a >= 54 for a, b in zip(xs, xs[1:]))  # the narrowest box is 54 pt wide


@pytest.mark.parametrize("direction", ["LR", "BT", "RL"])
def test_positions_follow_the_direction(direction):
    graph = chain_graph(3)
    positions = layered_positions(graph, direction)
    (x_in, y_in), (x_out, y_out) = positions["n5"], positions["n0"]
    assert {"LR": x_in < x_out, "RL": x_in > x_out, "BT": y_in < y_out}[direction]


def test_layout_of_a_50k_op_chain_needs_no_recursion():
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # anything recursive over the graph fails at once
    try:
        lines = fixed_layout_lines(chain_graph(50_000))
    finally:
        sys.setrecursionlimit(limit)
    assert len(lines) == 1 + 100_001


def _extent(positions: dict) -> tuple[float, float]:
    xs = [x for x, _ in positions.values()]
    ys = [y for _, y in positions.values()]
    return max(xs) - min(xs), max(ys) - min(ys)


def test_a_drawing_too_long_for_a_page_is_folded_into_bands_side_by_side():
    graph = chain_graph(2_000)  # unfolded: a strip some 150,000 points long
    positions = layered_positions(graph)
    width, height = _extent(positions)
    assert width <= FOLD_LONGER_THAN and height <= FOLD_LONGER_THAN  # within a PDF page
    assert 1.0 <= height / width <= 2.0  # about a portrait page
    # Every edge goes down within a band, or up from the foot of one band to the head of the next, on its right.
    crossing = [e for e in graph.edges if positions[e.source][1] <= positions[e.target][1]]
    assert all(positions[e.source][0] < positions[e.target][0] for e in crossing)
    bands = len({round(positions[e.target][0]) for e in crossing}) + 1
    assert bands > 2 and len(crossing) == 2 * (bands - 1)  # each fold cuts the op's edge and its constant's
    # Read as text in columns: the input at the top of the first band, the output at the foot of the last.
    top, output = positions["n4000"], positions["n0"]
    assert top[1] == max(y for _, y in positions.values()) and top[0] < min(positions[e.target][0] for e in crossing)
    last_band = [(x, y) for x, y in positions.values() if x > max(positions[e.source][0] for e in crossing)]
    assert output in last_band and output[1] == min(y for _, y in last_band)
    # No two boxes on a row overlap, whichever band they are in.
    rows = {}
    for x, y in positions.values():
        rows.setdefault(y, []).append(x)
    for xs in rows.values():
        xs.sort()
        assert all(b - a >= 54 for a, b in zip(xs, xs[1:]))


def test_a_drawing_that_fits_a_page_is_not_folded():
    positions = layered_positions(chain_graph(60))
    width, height = _extent(positions)
    assert height < FOLD_LONGER_THAN and width < 100  # one column: each op beside its constant
    ops = [positions[f"n{2 * k - 1}"] for k in range(1, 61)]
    assert [y for _, y in ops] == sorted(y for _, y in ops)  # the output at the foot


def test_every_rank_is_centred_on_one_axis_so_a_deep_graph_does_not_drift_sideways():
    # Each rank follows the ones placed before it; uncentred, an unrolled LSTM's
    # steps drifted more than 500 points to one side over 30 steps.
    positions = layered_positions(split_shared_leaves(walk(*unrolled_lstm(30))))
    rows = {}
    for x, y in positions.values():
        rows.setdefault(y, []).append(x)
    widest_box = 200  # a row's middle is off the axis by at most half the difference of its end boxes' widths
    assert all(abs(min(xs) + max(xs)) / 2 < widest_box / 2 for xs in rows.values())


@pytest.mark.parametrize("direction", ["LR", "RL", "BT"])
def test_a_folded_drawing_follows_the_direction(direction):
    positions = layered_positions(chain_graph(2_000), direction)
    width, height = _extent(positions)
    across = direction in ("LR", "RL")
    assert max(width, height) <= FOLD_LONGER_THAN
    assert 1.0 <= (width / height if across else height / width) <= 2.0
    (x_in, y_in), (x_out, y_out) = positions["n3999"], positions["n0"]
    assert {"LR": x_in < x_out, "RL": x_in > x_out, "BT": y_in < y_out}[direction]


@needs_neato
def test_a_folded_drawing_makes_a_pdf_page_within_the_limit(tmp_path):
    graph = chain_graph(2_000)
    path = render(graph, tmp_path / "chain.pdf", layout="fixed")
    box = re.search(rb"/MediaBox \[ *0 0 ([\d.]+) ([\d.]+) *\]", path.read_bytes())
    assert box is not None
    assert max(float(box.group(1)), float(box.group(2))) <= FOLD_LONGER_THAN + 72  # a margin around the drawing


@needs_neato
def test_a_fixed_layout_png_is_scaled_down_to_a_bitmap_memory_can_hold(tmp_path):
    # One op with 600 inputs: a rank some 560 inches broad, a bitmap of 54,000 pixels
    # by 70 at Graphviz's 96 dpi. It is scaled to 120 inches (11,520 pixels) a side.
    # (Each input told apart: 600 alike ones would be drawn as one, with their count.)
    nodes = [Node("n0", OUTPUT, "y", shape=(1,)), Node("n1", OP, "CatBackward0")]
    nodes += [Node(f"n{k}", NO_GRAD, f"mask {k}") for k in range(2, 602)]
    edges = [Edge("n1", "n0")] + [Edge(f"n{k}", "n1", CUT) for k in range(2, 602)]
    path = render(AutogradGraph(tuple(nodes), tuple(edges)), tmp_path / "wide.png", layout="fixed")
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")
    assert 11_000 < width <= 11_520 + 16 and height < width  # scaled to the limit, not past it


def test_legend_nodes_are_placed_too():
    source = make_dot(shared_parameter_graph(2), layout="fixed", legend=True).source
    for kind in ("output", "op", "accumulate_grad", "parameter"):
        assert re.search(rf"\tlegend_{kind} \[pos=", source)


def test_hidden_nodes_get_no_position():
    source = make_dot(chain_graph(3), layout="fixed", show_no_grad=False).source
    assert "n2 [" not in source and "n1 [pos=" in source


# --- the choice -----------------------------------------------------------------------


def test_estimate_grows_with_size_and_with_fan_out():
    small, big = chain_graph(100), chain_graph(10_000)
    assert estimate_layout_seconds(small) < 1 < estimate_layout_seconds(big)
    # An LSTM over 30 steps: its weights reach down to every step, and dot takes
    # 11 times longer on it whole (1.4 s) than split (0.12 s), each read its own edge.
    lstm = walk(*unrolled_lstm(30))
    split = estimate_layout_seconds(split_shared_leaves(lstm), junctions=False)
    assert estimate_layout_seconds(lstm, junctions=False) > 10 * split
    # Through junctions, each weight runs down one trunk: far less than each read apart.
    assert estimate_layout_seconds(lstm) < estimate_layout_seconds(lstm, junctions=False) / 5


def test_rank_widths_count_the_virtual_nodes_of_long_edges():
    ids, _, links = chain_graph(3).columns()
    # From the bottom: the output, the last op, then each op beside the input
    # without gradient of the op below it, and the first op's input on top.
    assert rank_widths(len(ids), links) == [1, 1, 2, 2, 1]
    # A block of 3 layers has one node per rank; each later concatenation is 4
    # ranks further down, and an edge to it has a virtual node on every rank between.
    ids, _, links = dense_block_graph(3).columns()
    assert rank_widths(len(ids), links) == [1, 1, 4, 4, 4, 4, 5, 5, 5, 5, 4, 4, 4, 4, 1]
    assert rank_widths(0, []) == []


def test_estimate_counts_long_edges_not_just_nodes_and_edges():
    dense = dense_block_graph(24)
    chain = chain_graph(len(dense.edges) // 2 + 50)  # more nodes and more edges
    assert len(chain.nodes) > len(dense.nodes) and len(chain.edges) > len(dense.edges)
    # dot takes 1.5 s on the block drawn without junctions, 0.07 s on the chain
    assert estimate_layout_seconds(dense, junctions=False) > 10 * estimate_layout_seconds(chain)
    # With them, the block is one bus and a few short edges per layer.
    assert estimate_layout_seconds(dense) < 2 * estimate_layout_seconds(chain)


def test_estimate_follows_the_cap_on_dots_network_simplex(monkeypatch):
    from graphviz_autograd.graph import style

    dense = dense_block_graph(24)
    capped = estimate_layout_seconds(dense, junctions=False)
    monkeypatch.delitem(style.GRAPH_ATTRS, "nslimit")
    assert estimate_layout_seconds(dense, junctions=False) > 5 * capped  # dot takes 1.5 s capped, 9.4 s not
    # Without long edges the cap is never reached, and makes no difference.
    chain = chain_graph(2_000)
    uncapped = estimate_layout_seconds(chain)
    monkeypatch.undo()
    assert estimate_layout_seconds(chain) == uncapped


def test_densenet_is_laid_out_by_dot_within_the_budget():
    from benchmarks.models import DenseNet121

    torch.manual_seed(0)
    model = DenseNet121()
    graph = walk(model(torch.randn(1, 3, 64, 64)), dict(model.named_parameters()))
    drawn = split_shared_leaves(graph)
    # Before the cap, dot took 300 s on it and the estimate said 67 s; with it, 8 to 10 s.
    assert 2 < estimate_layout_seconds(drawn, junctions=False) < 10
    assert choose_layout(drawn, junctions=False) == ("dot", "")
    # Through junctions, dot takes under a second.
    assert estimate_layout_seconds(drawn) < 1


# --- the cap on dot's network simplex ------------------------------------------------


@pytest.mark.parametrize("direction", ["TB", "LR"])
def test_every_dot_caps_the_network_simplex(direction):
    for graph in (dense_block_graph(6), chain_graph(3)):
        assert f"\tgraph [nslimit=3 rankdir={direction}]\n" in to_dot(graph, direction=direction)
    fixed = make_dot(dense_block_graph(6), layout="fixed").source
    assert "\tgraph [nslimit=3 rankdir=TB]\n" in fixed  # harmless there: neato -n2 lays nothing out


def _position_simplex(source: str) -> tuple:
    """(iteration limit, iterations) of the network simplex dot -v reports last: the one placing nodes across."""
    log = subprocess.run(["dot", "-v", "-Tplain"], input=source, capture_output=True, text=True, check=True).stderr
    limits = re.findall(r"network simplex: +\d+ nodes \d+ edges maxiter=(\d+)", log)
    iterations = re.findall(r"network simplex: +\d+ nodes \d+ edges (\d+) iter", log)
    if not limits or not iterations:
        pytest.skip("this Graphviz does not report its network simplex iterations")
    return int(limits[-1]), int(iterations[-1])


@needs_dot
def test_dot_stops_placing_a_dense_block_at_three_iterations_per_node():
    graph = dense_block_graph(6)
    source = to_dot(graph, junctions=False)
    limit, iterations = _position_simplex(source)
    assert limit == 3 * len(graph.nodes) == iterations  # the cap is reached...
    _, free = _position_simplex(source.replace("nslimit=3 ", ""))
    assert free > 2 * limit  # ...where dot would otherwise go on


@needs_dot
def test_a_graph_without_long_edges_is_laid_out_as_without_the_cap():
    source = make_dot(*unrolled_lstm(12)).source  # weights split: no long edges
    limit, iterations = _position_simplex(source)
    assert iterations < limit
    plain = subprocess.run(["dot", "-Tplain"], input=source, capture_output=True, text=True, check=True).stdout
    free = subprocess.run(["dot", "-Tplain"], input=source.replace("nslimit=3 ", ""), capture_output=True, text=True, check=True)
    assert plain == free.stdout


def test_choose_layout_takes_an_explicit_choice_as_given():
    big = chain_graph(10_000)
    assert choose_layout(big, "dot", budget=0.01) == ("dot", "")
    assert choose_layout(chain_graph(1), "fixed") == ("fixed", "")
    with pytest.raises(OptionError, match="layout must be one of"):
        choose_layout(big, "spring")
    with pytest.raises(OptionError, match="budget"):
        choose_layout(big, "auto", budget=0)


@needs_neato
def test_auto_falls_back_above_the_budget_and_says_so(tmp_path, capsys):
    outputs, params = unrolled_lstm(2)
    path = render(outputs, tmp_path / "lstm.svg", params, layout_budget=0.001)
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "would take about" in err and "budget 0.001 s" in err and "fixed layered layout" in err
    assert ET.parse(path).getroot().tag == SVG + "svg"
    render(outputs, tmp_path / "again.svg", params)  # within the default budget: dot, silently
    assert capsys.readouterr().err == ""


def test_auto_never_changes_a_dot_file(tmp_path, capsys):
    outputs, params = unrolled_lstm(2)
    path = render(outputs, tmp_path / "lstm.dot", params, layout_budget=0.001)
    assert "pos=" not in path.read_text() and capsys.readouterr().err == ""
    fixed = render(outputs, tmp_path / "fixed.dot", params, layout="fixed")
    assert "pos=" in fixed.read_text()


# --- command line ---------------------------------------------------------------------


@needs_neato
def test_cli_layout_fixed(tmp_path):
    from .test_cli import REPO

    out = tmp_path / "affine.svg"
    result = invoke("render", REPO / "samples" / "affine.py", "-o", out, "--layout", "fixed")
    assert result.exit_code == 0, result.output
    assert "neato -n2" in result.output
    assert ET.parse(out).getroot().tag == SVG + "svg"
    dot = invoke("render", REPO / "samples" / "affine.py", "-o", "-", "-q", "--layout", "fixed")
    assert 'pos="' in dot.stdout


def test_cli_rejects_an_unknown_layout(tmp_path):
    from .test_cli import REPO

    result = invoke("render", REPO / "samples" / "affine.py", "-o", tmp_path / "a.svg", "--layout", "spring")
    assert result.exit_code == 2 and "'spring' is not one of" in result.output
    assert not (tmp_path / "a.svg").exists()


def test_split_of_a_built_graph_keeps_edges_to_ids_without_a_node_and_shares_copied_contents():
    graph = shared_parameter_graph(3)
    ghost = AutogradGraph(graph.nodes, graph.edges + (Edge("ghost", graph.nodes[0].id),), graph.params_given)
    split = split_shared_leaves(ghost, max_uses=2)
    assert ("ghost", graph.nodes[0].id) in [(e.source, e.target) for e in split.edges]
    assert "ghost" not in {n.id for n in split.nodes}
    contents = split.columns().contents
    parameter_copies = [c for c in contents if c[0] == PARAMETER]
    assert len(parameter_copies) == 3 and len({id(c) for c in parameter_copies}) == 1
