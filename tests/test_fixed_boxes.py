"""Module boxes in the fixed layout: one per module and band, around its nodes, beneath them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from graphviz_autograd.drawing.dot_writer import cluster_title, digraph
from graphviz_autograd.graph.autograd_graph import OP, OUTPUT, AutogradGraph, ModuleInfo
from graphviz_autograd.drawing.layout import fixed_layout_lines, lay_out, layered_positions, module_boxes
from graphviz_autograd.drawing.rendering import run_dot
from graphviz_autograd.views.prepared import prepare

from .module_graphs import GraphBuilder, gpt2_like
from .test_cli import needs_dot

# The fixed layout of gpt2_like(3) as written before it drew boxes: kept, not regenerated.
BEFORE_BOXES = Path(__file__).parent / "expected" / "fixed_layout_without_boxes.dot"
BOX_LINE = re.compile(r'^\tsubgraph cluster_m(\d+)_(\d+) \{graph \[bb="([^"]+)" .*label="([^"]*)" .*lp="([^"]+)"')
POS_LINE = re.compile(r'^\t(\w+) \[pos="([-\d.]+),([-\d.]+)!"\]$')

Rect = Tuple[float, float, float, float]


def side_by_side() -> AutogradGraph:
    """Two sibling linear layers side by side in a block, a norm after it, and ops of the model itself."""
    b = GraphBuilder()
    out = b.node(OUTPUT, "y", shape=(1, 768))
    head = b.node(OP, "SumBackward0")  # the model's own
    b.edge(head, out)
    norm = b.node(OP, "NativeLayerNormBackward0", "norm")
    b.edge(norm, head)
    add = b.node(OP, "AddBackward0", "block")
    b.edge(add, norm)
    left = b.linear(add, "block.left", "weight", (1, 768))
    right = b.linear(add, "block.right", "weight", (1, 768))
    source = b.node(OP, "MulBackward0")  # feeds both layers, outside any box
    b.edge(source, left)
    b.edge(source, right)
    modules = (
        ModuleInfo("", "Net"),
        ModuleInfo("block", "Block"),
        ModuleInfo("block.left", "Linear"),
        ModuleInfo("block.right", "Linear"),
        ModuleInfo("norm", "LayerNorm"),
        ModuleInfo("unused", "Dropout"),  # runs no op: no box
    )
    return b.graph(modules)


def parsed(lines: List[str]) -> Tuple[Dict[Tuple[int, int], Rect], Dict[str, Tuple[float, float]], List[str]]:
    """(module index, band) -> box rectangle; node id -> position; box titles."""
    boxes, positions, titles = {}, {}, []
    for line in lines:
        box = BOX_LINE.match(line)
        if box:
            left, bottom, right, top = map(float, box.group(3).split(","))
            boxes[(int(box.group(1)), int(box.group(2)))] = (left, bottom, right, top)
            titles.append(box.group(4))
        pos = POS_LINE.match(line)
        if pos:
            positions[pos.group(1)] = (float(pos.group(2)), float(pos.group(3)))
    return boxes, positions, titles


def boxes_around(graph: AutogradGraph, module: str) -> List[int]:
    """Indices in ``graph.modules`` of the boxes around a node of ``module``, innermost first."""
    index = {m.path: k for k, m in enumerate(graph.modules)}
    found = []
    while module:
        if module in index:
            found.append(index[module])
        module = module.rpartition(".")[0]
    return found


def inside(point: Tuple[float, float], rect: Rect) -> bool:
    return rect[0] < point[0] < rect[2] and rect[1] < point[1] < rect[3]


def holds(outer: Rect, inner: Rect) -> bool:
    return outer[0] < inner[0] and inner[2] < outer[2] and outer[1] < inner[1] and inner[3] < outer[3]


def test_one_box_per_module_that_ran_titled_as_dot_titles_clusters():
    graph = side_by_side()
    boxes, _, titles = parsed(fixed_layout_lines(graph, clusters=True))
    assert sorted(boxes) == [(1, 0), (2, 0), (3, 0), (4, 0)]  # the model and the unused module have none
    assert sorted(titles) == sorted(cluster_title(graph.modules[k]) for k in (1, 2, 3, 4))


@pytest.mark.parametrize("direction", ["TB", "LR", "BT", "RL"])
@pytest.mark.parametrize("graph", [side_by_side(), gpt2_like(3)], ids=["side_by_side", "gpt2_like"])
def test_each_box_holds_its_nodes_and_inner_boxes_and_no_other_node(graph, direction):
    boxes, positions, _ = parsed(fixed_layout_lines(graph, direction, clusters=True))
    for node in graph.nodes:
        around = boxes_around(graph, node.module)
        for k in around:
            assert inside(positions[node.id], boxes[(k, 0)]), (node, graph.modules[k].path)
        for (k, _), rect in boxes.items():
            if k not in around:
                assert not inside(positions[node.id], rect), (node, graph.modules[k].path)
    for (k, band), rect in boxes.items():
        parent = boxes_around(graph, graph.modules[k].path.rpartition(".")[0])
        if parent:
            assert holds(boxes[(parent[0], band)], rect)


def test_sibling_boxes_do_not_overlap():
    graph = side_by_side()
    boxes, _, _ = parsed(fixed_layout_lines(graph, clusters=True))
    left, right = boxes[(2, 0)], boxes[(3, 0)]
    assert left[2] < right[0] or right[2] < left[0]


def test_module_boxes_match_the_dot_lines():
    graph = gpt2_like(2)
    boxes, _, _ = parsed(fixed_layout_lines(graph, clusters=True))
    drawn = {(b.module, b.band): (b.left, b.bottom, b.right, b.top) for b in module_boxes(graph)}
    assert drawn.keys() == boxes.keys()
    for key, rect in drawn.items():
        assert rect == pytest.approx(boxes[key], abs=0.01)


def test_boxes_come_before_the_nodes_are_placed():
    lines = fixed_layout_lines(gpt2_like(2), clusters=True)
    kinds = ["box" if BOX_LINE.match(line) else "pos" for line in lines if BOX_LINE.match(line) or POS_LINE.match(line)]
    assert kinds == sorted(kinds)  # every box line, then every pos line


def test_a_box_across_bands_is_one_box_per_band():
    graph = gpt2_like(80)  # longer than a page: folded
    boxes, positions, _ = parsed(fixed_layout_lines(graph, clusters=True))
    transformer = next(k for k, m in enumerate(graph.modules) if m.path == "transformer")
    bands = sorted(band for k, band in boxes if k == transformer)
    assert len(bands) > 1 and bands == list(range(len(bands)))
    pieces = [boxes[(transformer, band)] for band in bands]
    for a, b in zip(pieces, pieces[1:]):
        assert a[2] < b[0]  # side by side, apart
    for node in graph.nodes:
        for k in boxes_around(graph, node.module):
            assert sum(inside(positions[node.id], rect) for (m, _), rect in boxes.items() if m == k) == 1, node
    blocks = [k for k, m in enumerate(graph.modules) if m.type_name == "GPT2Block"]
    split = [k for k in blocks if sum(m == k for m, _ in boxes) > 1]
    assert not split  # bands begin between blocks


def test_without_module_info_or_with_clusters_false_nothing_changes():
    graph = gpt2_like(3)
    bare = AutogradGraph(graph.nodes, graph.edges, graph.params_given)
    lines = fixed_layout_lines(graph)
    assert lines == fixed_layout_lines(graph, clusters=False) == fixed_layout_lines(bare, clusters=True)
    assert layered_positions(graph) == layered_positions(bare, clusters=True)
    assert "".join(lines) == BEFORE_BOXES.read_text()  # as drawn before boxes were


def test_lay_out_draws_boxes_only_when_asked():
    graph = gpt2_like(2)
    with_boxes = "".join(lay_out(prepare(graph, layout="fixed", depth="full", fold_repeated=False)).lines)
    without = "".join(lay_out(prepare(graph, layout="fixed", depth="full", fold_repeated=False, clusters=False)).lines)
    assert "subgraph cluster_m1_0 {graph [bb=" in with_boxes
    assert "bb=" not in without and "subgraph cluster" not in without


def test_boxes_are_the_same_bytes_every_time():
    first = "".join(fixed_layout_lines(gpt2_like(4), "LR", clusters=True))
    assert first == "".join(fixed_layout_lines(gpt2_like(4), "LR", clusters=True))


@needs_dot
def test_neato_draws_each_box_beneath_the_nodes():
    graph = side_by_side()
    laid = lay_out(prepare(graph, layout="fixed", depth="full", fold_repeated=False))
    svg = run_dot(digraph(laid.lines), "svg", engine=laid.engine).decode()
    groups = re.findall(r'<g id="\w+" class="(cluster|node)">\s*<title>([^<]*)</title>', svg)
    clusters = [title for kind, title in groups if kind == "cluster" and re.fullmatch(r"cluster_m\d+_\d+", title)]
    assert sorted(clusters) == ["cluster_m1_0", "cluster_m2_0", "cluster_m3_0", "cluster_m4_0"]
    kinds = [kind for kind, _ in groups]
    assert kinds == sorted(kinds)  # clusters first: drawn beneath
    for title in ("block (Block)", "block.left (Linear)", "norm (LayerNorm)"):
        assert f">{title}</text>" in svg
