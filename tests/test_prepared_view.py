"""Every picture starts from one prepared view, and overlays roll up onto what it draws."""

from __future__ import annotations

import math

import pytest

from graphviz_autograd import OptionError, make_dot, to_dot
from graphviz_autograd.drawing.dot_writer import dot_source
from graphviz_autograd.drawing.overlay_styles import overlay_styles
from graphviz_autograd.graph.autograd_graph import MODULE
from graphviz_autograd.views.overlays import Overlay, saved_bytes_overlay
from graphviz_autograd.views.prepared import prepare

from .module_graphs import gpt2_like


def test_make_dot_and_to_dot_write_the_view_prepare_returns():
    graph = gpt2_like(blocks=3)
    for options in (dict(), dict(depth=1), dict(depth="full", fold_repeated=False), dict(direction="LR")):
        view = prepare(graph, **options)
        assert dot_source(view) == to_dot(graph, **options) == make_dot(graph, **options).source
        assert make_dot(graph, **options).prepared.graph == view.graph


def test_a_value_on_a_node_inside_a_box_rolls_up_onto_the_box():
    graph = gpt2_like(blocks=3)
    ops = [n for n in graph.nodes if n.kind == "op" and n.module.startswith("transformer.h.1")]
    # A sum overlay adds what the box holds; a max overlay keeps the largest; NaN wins a max.
    summed = Overlay("time", "time", {ops[0].id: 2.0, ops[1].id: 3.0}, rollup="sum", unit="s")
    largest = Overlay("norm", "norm", {ops[0].id: 2.0, ops[1].id: math.nan}, rollup="max")
    view = prepare(graph, depth=2, fold_repeated=False, overlays=[summed, largest])
    (box,) = [n for n in view.graph.nodes if n.kind == MODULE and n.label == "transformer.h.1"]
    rolled_sum, rolled_max = view.overlays
    assert rolled_sum.values == {box.id: 5.0}
    assert math.isnan(rolled_max.values[box.id])
    styles, key = overlay_styles(view.overlays)
    assert styles[box.id]["fillcolor"] == "red"  # NaN is drawn as such, over the time's colour
    assert any("norm NaN/Inf" in lines for lines, _ in key)


def test_a_folded_block_stands_for_the_values_of_the_blocks_it_folds():
    graph = gpt2_like(blocks=4)
    per_block = {}
    for node in graph.nodes:
        if node.kind == "op" and node.label == "AddmmBackward0" and node.module.startswith("transformer.h."):
            per_block.setdefault(node.module.split(".")[2], node.id)
    overlay = Overlay("time", "time", {node_id: 1.0 for node_id in per_block.values()}, rollup="sum", unit="s")
    view = prepare(graph, depth="full", overlays=[overlay])  # four alike blocks drawn once
    assert sum(view.overlays[0].values.values()) == 4.0
    assert len(view.overlays[0].values) < len(per_block)


def test_findings_mark_the_box_that_holds_their_node_at_depth_n():
    import torch

    from graphviz_autograd import record

    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()))
    with record(model) as rec:
        out = model(torch.randn(2, 3))
    stray = torch.ones(2, requires_grad=True)  # an unregistered leaf: an error at its node
    loss = (out.sum(1) * stray).sum()
    whole = make_dot(loss, recorder=rec, diagnose=True, depth="full").source
    summary = make_dot(loss, recorder=rec, diagnose=True, depth=0).source
    assert "color=red" in whole and "color=red" in summary


def test_saved_bytes_is_an_overlay_the_static_drawing_can_colour_by():
    import torch

    from graphviz_autograd import walk

    w = torch.ones(64, 64, requires_grad=True)
    graph = walk((w.exp() * w).sum(), {"w": w}, collect_saved=True)
    overlay = saved_bytes_overlay(graph)
    assert overlay.values and all(value > 0 for value in overlay.values.values())
    source = make_dot(graph, overlays=[overlay]).source
    assert "saved for backward" in source and "KiB" in source


def test_overlays_need_names_of_their_own():
    graph = gpt2_like(blocks=1)
    first = Overlay("time", "time", {})
    with pytest.raises(OptionError, match="two overlays are named 'time'"):
        prepare(graph, overlays=[first, first])
    with pytest.raises(OptionError, match="rollup"):
        Overlay("time", "time", {}, rollup="mean")


def test_a_coloured_picture_writes_each_value_and_a_compact_key():
    import shutil
    import subprocess

    from graphviz_autograd import to_dot

    import torch

    from graphviz_autograd import walk

    x = torch.ones(2, requires_grad=True)
    graph = walk(x.exp().sin().sum())
    ops = [n for n in graph.nodes if n.kind == "op"]
    times = {ops[0].id: 3e-6, ops[1].id: 1e-6, ops[2].id: 0.004}
    source = to_dot(graph, overlays=[Overlay("backward_time", "backward time", times, rollup="sum", unit="s")])
    # Each coloured node says its value and its share of the whole, so the picture reads without the key.
    total = sum(times.values())
    for node_id, value in times.items():
        line = next(line for line in source.splitlines() if line.strip().startswith(f"{node_id} ["))
        assert f"{value / total:.0%}" in line and "xlabel=" in line
    assert "µs · 0%" in source and " us" not in source  # microseconds written as such
    # The key is one table: the title once, a swatch per colour used, not a box per step.
    notes = [line for line in source.splitlines() if line.strip().startswith("note")]
    assert len(notes) == 1 and notes[0].count("BGCOLOR=") >= 2 and notes[0].count("backward time") == 1
    if shutil.which("dot"):
        subprocess.run(["dot", "-Tsvg"], input=source.encode(), check=True, capture_output=True)


def test_a_value_beside_a_dark_box_is_written_in_black_not_in_the_boxs_white():
    # Graphviz draws an xlabel in its node's fontcolor: a dark fill's white text beside the box
    # was white on the page, and the largest values (the darkest boxes) could not be read.
    import re
    import shutil
    import subprocess

    import torch

    from graphviz_autograd import to_dot, walk

    x = torch.ones(2, requires_grad=True)
    graph = walk(x.exp().sin().sum())
    ops = [n for n in graph.nodes if n.kind == "op"]
    times = {ops[0].id: 1e-6, ops[1].id: 1e-4, ops[2].id: 0.01}  # the largest, darkest, in white text
    source = to_dot(graph, overlays=[Overlay("backward_time", "backward time", times, rollup="sum", unit="s")])
    dark = next(line for line in source.splitlines() if line.strip().startswith(f"{ops[2].id} ["))
    light = next(line for line in source.splitlines() if line.strip().startswith(f"{ops[0].id} ["))
    assert "fontcolor=white" in dark and 'xlabel=<<font color="black">10.0 ms · 99%</font>>' in dark
    assert "fontcolor" not in light and re.search(r'xlabel="1\.0 µs · 0%"', light)
    if shutil.which("dot"):
        svg = subprocess.run(["dot", "-Tsvg"], input=source.encode(), check=True, capture_output=True).stdout.decode()
        written = re.search(r'<text[^>]*>10\.0 ms · 99%</text>', svg)
        assert written is not None and "white" not in written.group(0)  # SVG's default fill: black
