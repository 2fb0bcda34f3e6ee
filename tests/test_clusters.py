"""Module clusters, collapse to a depth, folding of repeated blocks, edge shapes and tooltips.

Graphs are built by hand (tests/module_graphs.py) as a recorded forward pass would
give them: each node knows its module, the graph lists the model's modules.
"""

from __future__ import annotations

import re

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphviz_autograd import OptionError, make_dot, to_dot
from graphviz_autograd.cli.commands import main
from graphviz_autograd import collapse
from graphviz_autograd.graph.descriptions import base_op, count_text, describe_op, op_meaning
from graphviz_autograd.graph.autograd_graph import (
    ACCUMULATE_GRAD,
    CUT,
    DATA,
    MODULE,
    NO_GRAD,
    OP,
    OUTPUT,
    PARAMETER,
    SAVED,
    SAVED_BY,
    AutogradGraph,
    ModuleInfo,
    cut_location,
)

from .module_graphs import BLOCK_PARAMS, GraphBuilder, gpt2_like
from .test_escaping import hostile_text, shown_text

CLUSTER_OPEN = re.compile(r"^\t*subgraph (cluster_\w+) \{$")
CLUSTER_LABEL = re.compile(r'^\t*graph \[.*label="([^"]*)".*\]$')
NODE_LINE = re.compile(r"^(\t+)(n\d+) \[")


def clusters_of(source: str) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Each node's enclosing cluster labels, outermost first; and each cluster's label by id."""
    stack: list[str] = []
    labels: dict[str, str] = {}
    placed: dict[str, list[str]] = {}
    for line in source.splitlines():
        if match := CLUSTER_OPEN.match(line):
            stack.append(match.group(1))
        elif line.strip() == "}" and stack:
            stack.pop()
        elif stack and (match := CLUSTER_LABEL.match(line)) and stack[-1] not in labels:
            labels[stack[-1]] = match.group(1)
        elif match := NODE_LINE.match(line):
            assert len(match.group(1)) == len(stack) + 1  # indented one level inside its cluster
            placed[match.group(2)] = [labels[c] for c in stack]
    return placed, labels


def boxes(graph: AutogradGraph) -> list[tuple[str, str, str]]:
    return [(n.id, n.kind, n.label) for n in graph.nodes]


def edges(graph: AutogradGraph) -> list[tuple[str, str, str]]:
    return [(e.source, e.target, e.kind) for e in graph.edges]


# --- clusters --------------------------------------------------------------------


def test_each_node_sits_in_the_nested_clusters_of_its_module():
    graph = gpt2_like(blocks=2)
    placed, labels = clusters_of(to_dot(graph, fold_repeated=False))  # every block drawn
    type_of = {m.path: m.type_name for m in graph.modules}
    for node in graph.nodes:
        expected, path = [], node.module
        while path:
            expected.insert(0, f"{path} ({type_of[path]})")
            path = path.rpartition(".")[0]
        assert placed[node.id] == expected, node
    assert "transformer.h.1.mlp (GPT2MLP)" in labels.values()
    assert "transformer.drop (Dropout)" not in labels.values()  # a module that made no node has no cluster
    assert " (GPT2LMHeadModel)" not in "".join(labels.values())  # the model itself gets none


def test_clusters_come_in_module_order_then_all_edges():
    source = to_dot(gpt2_like(blocks=2))
    titles = [CLUSTER_LABEL.match(line).group(1) for line in source.splitlines() if CLUSTER_LABEL.match(line)]
    assert titles[:4] == [
        "transformer (GPT2Model)",
        "transformer.wte (Embedding)",
        "transformer.wpe (Embedding)",
        "transformer.h (ModuleList)",
    ]
    assert titles[-1] == "lm_head (Linear)"
    lines = source.splitlines()
    first_edge = next(i for i, line in enumerate(lines) if " -> " in line)
    assert all(" -> " in line for line in lines[first_edge:-1])
    assert all(line.startswith("\tn") for line in lines[first_edge:-1])  # edges at top level


def test_cluster_ids_come_from_the_module_index_whatever_the_name(graphviz_svg):
    weird = ['a "b"', "x}; n0 -> n1 {", "é\\N", "a b"]
    b = GraphBuilder()
    out = b.node(OUTPUT, "out", shape=(2,))
    for path in weird:
        op = b.node(OP, "MulBackward0", path)
        b.edge(op, out)
    modules = (ModuleInfo("", "Net"),) + tuple(ModuleInfo(path, "Odd") for path in weird)
    graph = b.graph(modules)
    source = to_dot(graph)
    assert re.findall(r"subgraph (\S+) \{", source) == ["cluster_m1", "cluster_m2", "cluster_m3", "cluster_m4"]
    assert sorted(graphviz_svg(source)) == sorted(n.id for n in graph.nodes)


def test_graph_without_module_info_is_drawn_as_before():
    with_modules = gpt2_like(blocks=2)
    without = with_modules.replace(modules=())
    assert to_dot(without) == to_dot(without, clusters=False) == to_dot(with_modules, clusters=False, fold_repeated=False)
    assert "subgraph" not in to_dot(without)


def test_cluster_output_is_byte_stable():
    assert to_dot(gpt2_like(blocks=3)) == to_dot(gpt2_like(blocks=3))
    assert make_dot(gpt2_like(blocks=3), fold_repeated=False).source == to_dot(gpt2_like(blocks=3), fold_repeated=False)
    assert make_dot(gpt2_like(blocks=3)).source == to_dot(gpt2_like(blocks=3))  # both fold the blocks


def test_clustered_graph_matches_golden(autograd_golden):
    autograd_golden.check(gpt2_like(blocks=2, detach_in=1), "modules_clustered")


def test_hidden_nodes_leave_no_empty_cluster():
    b = GraphBuilder()
    out = b.node(OUTPUT, "out", shape=(2,))
    op = b.node(OP, "MulBackward0", "a")
    b.edge(op, out)
    cut = b.node(NO_GRAD, "detach()", "b")
    b.edge(cut, op, kind=CUT)
    graph = b.graph((ModuleInfo("", "Net"), ModuleInfo("a", "A"), ModuleInfo("b", "B")))
    assert "b (B)" in to_dot(graph)
    assert "b (B)" not in to_dot(graph, show_no_grad=False)


# --- collapse to a depth ---------------------------------------------------------


def test_depth_0_is_one_box_per_top_level_module():
    graph = collapse(gpt2_like(), 0)
    assert boxes(graph) == [("n0", OUTPUT, "logits"), ("n1", MODULE, "lm_head"), ("n2", MODULE, "transformer")]
    assert edges(graph) == [("n1", "n0", DATA), ("n2", "n1", DATA)]
    transformer = dict(graph.nodes[2].attrs)
    assert transformer == {"type": "GPT2Model", "ops": str(12 * 4 + 4), "params": "124439808"}


def test_depth_1_boxes_grandchildren_and_keeps_shallower_ops():
    graph = collapse(gpt2_like(), 1)
    assert boxes(graph) == [
        ("n0", OUTPUT, "logits"),
        ("n1", MODULE, "lm_head"),  # a leaf module shallower than the depth is a box too
        ("n2", MODULE, "transformer.ln_f"),
        ("n3", MODULE, "transformer.h"),
        ("n4", OP, "AddBackward0"),  # made by transformer itself: stays
        ("n5", MODULE, "transformer.wte"),
        ("n6", MODULE, "transformer.wpe"),
    ]
    assert edges(graph) == [
        ("n1", "n0", DATA),
        ("n2", "n1", DATA),
        ("n3", "n2", DATA),
        ("n4", "n3", DATA),
        ("n5", "n4", DATA),
        ("n6", "n4", DATA),
    ]
    assert [n.module for n in graph.nodes] == ["", "", "transformer", "transformer", "transformer", "transformer", "transformer"]


def test_depth_2_folds_the_twelve_blocks_into_one_box():
    graph = collapse(gpt2_like(), 2)
    assert [label for _, _, label in boxes(graph)] == [
        "logits",
        "lm_head",
        "transformer.ln_f",
        "transformer.h.0 \u2026 h.11",
        "AddBackward0",
        "transformer.wte",
        "transformer.wpe",
    ]
    block = graph.nodes[3]
    assert dict(block.attrs) == {
        "type": "GPT2Block",
        "ops": "48",
        "params": str(12 * BLOCK_PARAMS),
        "repeats": "12",
        "first": "transformer.h.0",
        "last": "transformer.h.11",
    }
    assert block.module == "transformer.h"
    assert edges(graph) == [
        ("n1", "n0", DATA),
        ("n2", "n1", DATA),
        ("n3", "n2", DATA),
        ("n4", "n3", DATA),
        ("n5", "n4", DATA),
        ("n6", "n4", DATA),
    ]
    source = to_dot(graph)
    assert 'label="transformer.h.0 \u2026 h.11\\nGPT2Block \u00d712\\n48 ops, 85.1M params"' in source


def test_without_folding_each_block_is_a_box_in_a_chain():
    graph = collapse(gpt2_like(), 2, fold_repeated=False)
    blocks = [n for n in graph.nodes if n.kind == MODULE and dict(n.attrs)["type"] == "GPT2Block"]
    assert [n.label for n in blocks] == [f"transformer.h.{i}" for i in reversed(range(12))]  # walk order
    ids = {n.label: n.id for n in blocks}
    for i in range(11):
        assert (ids[f"transformer.h.{i}"], ids[f"transformer.h.{i + 1}"], DATA) in edges(graph)
    assert all(dict(n.attrs) == {"type": "GPT2Block", "ops": "4", "params": str(BLOCK_PARAMS)} for n in blocks)


def test_a_different_block_breaks_the_run_of_folded_ones():
    graph = collapse(gpt2_like(odd_block=5), 2)
    labels = [n.label for n in graph.nodes if n.kind == MODULE and n.module == "transformer.h"]
    assert labels == ["transformer.h.6 \u2026 h.11", "transformer.h.5", "transformer.h.0 \u2026 h.4"]
    ids = {n.label: n.id for n in graph.nodes}
    assert (ids["transformer.h.0 \u2026 h.4"], ids["transformer.h.5"], DATA) in edges(graph)
    assert (ids["transformer.h.5"], ids["transformer.h.6 \u2026 h.11"], DATA) in edges(graph)


def test_folding_needs_the_same_parameter_count():
    graph = gpt2_like(blocks=3)
    modules = tuple(m._replace(parameters=1) if m.path == "transformer.h.1" else m for m in graph.modules)
    folded = collapse(graph.replace(modules=modules), 2)
    assert [n.label for n in folded.nodes if n.module == "transformer.h"] == [
        "transformer.h.2",
        "transformer.h.1",
        "transformer.h.0",
    ]


def test_a_48_block_model_fits_a_page():
    graph = collapse(gpt2_like(blocks=48), 2)
    assert len(graph.nodes) == 7
    assert "GPT2Block \u00d748" in to_dot(graph)


def test_named_cut_survives_collapse_and_anonymous_ones_vanish():
    graph = collapse(gpt2_like(detach_in=3), 0)
    cuts = [n for n in graph.nodes if n.kind == NO_GRAD]
    assert [(n.label, n.module, cut_location(n)) for n in cuts] == [("detach()", "", "transformer.h.3.attn")]
    transformer = next(n.id for n in graph.nodes if n.label == "transformer")
    assert (cuts[0].id, transformer, CUT) in edges(graph)
    source = to_dot(graph)
    assert 'label="detach()\\nat transformer.h.3.attn"' in source
    assert "Cut by detach() in transformer.h.3.attn." in source


def test_cut_inside_a_folded_block_sits_beside_the_folded_box():
    graph = collapse(gpt2_like(detach_in=3), 2)
    cut = next(n for n in graph.nodes if n.kind == NO_GRAD)
    assert cut.module == "transformer.h"
    placed, _ = clusters_of(to_dot(graph))
    assert placed[cut.id] == ["transformer (GPT2Model)", "transformer.h (ModuleList)"]


def test_saved_tensors_go_into_the_box_of_their_op_and_outputs_stay():
    b = GraphBuilder()
    out = b.node(OUTPUT, "y", shape=(2,), module="inner")
    op = b.node(OP, "MulBackward0", "inner")
    b.edge(op, out)
    saved = b.node(SAVED, "self", shape=(2,))
    b.edge(op, saved, kind=SAVED_BY)
    const = b.node(NO_GRAD)
    b.edge(const, op, kind=CUT)
    graph = collapse(b.graph((ModuleInfo("", "Net"), ModuleInfo("inner", "Inner"))), 0)
    assert boxes(graph) == [("n0", OUTPUT, "y"), ("n1", MODULE, "inner")]
    assert edges(graph) == [("n1", "n0", DATA)]


def test_collapsed_edges_are_unique_without_self_loops_and_keep_agreeing_shapes():
    for depth in range(4):
        graph = collapse(gpt2_like(detach_in=2, odd_block=7), depth)
        keys = edges(graph)
        assert len(keys) == len(set(keys))
        assert all(source != target for source, target, _ in keys)
        ids = {n.id for n in graph.nodes}
        assert ids == {f"n{i}" for i in range(len(graph.nodes))}
        assert all(e.source in ids and e.target in ids for e in graph.edges)
    graph = collapse(gpt2_like(), 0)
    assert [e.shape for e in graph.edges] == [(1, 16, 50257), (1, 16, 768)]
    b = GraphBuilder()
    out = b.node(OUTPUT, "out")
    op = b.node(OP, "AddBackward0")
    b.edge(op, out)
    for shape in ((2,), (3,)):
        inner = b.node(OP, "MulBackward0", "m")
        b.edge(inner, op, shape=shape)
    merged = collapse(b.graph((ModuleInfo("", "Net"), ModuleInfo("m", "M"))), 0)
    assert [(e.source, e.target, e.shape) for e in merged.edges] == [("n1", "n0", None), ("n2", "n1", None)]


def test_collapse_is_deterministic_and_json_ready():
    first, second = collapse(gpt2_like(odd_block=3), 2), collapse(gpt2_like(odd_block=3), 2)
    assert first == second and first.to_json() == second.to_json()
    assert '"kind": "module"' in first.to_json()


def test_collapsed_graph_matches_golden(autograd_golden):
    autograd_golden.check(gpt2_like(detach_in=3, odd_block=9), "modules_depth2", depth=2, show_shapes=True, legend=True)


@pytest.mark.parametrize("depth", [0, 1, 2, 3, 9])
def test_every_collapsed_drawing_parses(graphviz_svg, depth):
    graph = collapse(gpt2_like(blocks=4, detach_in=1), depth)
    drawn = graphviz_svg(to_dot(graph, show_shapes=True, legend=True, fold_repeated=False))
    assert {k for k in drawn if not k.startswith("legend_")} == {n.id for n in graph.nodes}


# --- options ---------------------------------------------------------------------


def test_make_dot_depth_collapses_then_draws():
    graph = gpt2_like()
    assert make_dot(graph, depth=2).source == to_dot(collapse(graph, 2))
    assert make_dot(graph, depth=2, fold_repeated=False).source == to_dot(collapse(graph, 2, fold_repeated=False))


def test_depth_without_module_info_says_a_recorded_forward_pass_is_needed():
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(OptionError, match=r"recorded forward pass \(graphviz_autograd\.record\)"):
        make_dot((x * 2).sum(), depth=0)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"depth": -1}, "depth must be a whole number of 0 or more"),
        ({"depth": True}, "depth must be a whole number of 0 or more"),
        ({"depth": 1.0}, "depth must be a whole number of 0 or more"),
        ({"depth": "2"}, "depth must be a whole number of 0 or more"),
        ({"depth": 1, "fold_repeated": "no"}, "fold_repeated must be True or False"),
        ({"clusters": None}, "clusters must be True or False"),
        ({"show_shapes": 1}, "show_shapes must be True or False"),
    ],
)
def test_bad_options_are_one_clear_sentence(options, message):
    with pytest.raises(OptionError, match=message) as raised:
        make_dot(gpt2_like(blocks=1), **options)
    assert str(raised.value).count(". ") == 0 and str(raised.value).endswith(".")


# --- shapes on edges -------------------------------------------------------------


def test_shapes_label_data_edges_that_know_them():
    b = GraphBuilder()
    out = b.node(OUTPUT, "out", shape=(2, 3))
    op = b.node(OP, "MulBackward0")
    b.edge(op, out, shape=(2, 3))
    half = b.node(OP, "ToCopyBackward0")
    b.edge(half, op, shape=(2, 3), dtype="float16")
    unknown = b.node(OP, "ExpBackward0")
    b.edge(unknown, op)
    cut = b.node(NO_GRAD)
    b.edge(cut, op, kind=CUT)
    graph = b.graph(())
    source = to_dot(graph, show_shapes=True)
    assert '\tn1 -> n0 [fontcolor=gray30 fontsize=8 label="(2, 3)"]\n' in source
    assert '\tn2 -> n1 [fontcolor=gray30 fontsize=8 label="(2, 3) float16"]\n' in source
    assert "\tn3 -> n1\n" in source
    assert "\tn4 -> n1 [color=gray40 style=dashed]\n" in source
    plain = to_dot(graph)
    assert "\tn1 -> n0\n" in plain and "\tn2 -> n1\n" in plain and "fontcolor=gray30" not in plain


# --- tooltips --------------------------------------------------------------------


@pytest.mark.parametrize(
    "label, base, words",
    [
        ("MulBackward0", "mul", "element-wise multiplication"),
        ("AddmmBackward0", "addmm", "Linear layer"),
        ("ConvolutionBackward0", "convolution", "convolution"),
        ("CudnnConvolutionBackward0", "cudnn_convolution", "convolution"),
        ("MaxPool2DWithIndicesBackward0", "max_pool2d_with_indices", "max pooling"),
        ("NativeLayerNormBackward0", "native_layer_norm", "layer normalisation"),
        ("LogSoftmaxBackward0", "log_softmax", "log of softmax"),
        ("UnsafeViewBackward0", "unsafe_view", "reshape"),
        ("MeanBackward1", "mean", "mean"),
        ("NllLossBackward0", "nll_loss", "negative log-likelihood"),
        ("torch::autograd::CopySlices", "copy_slices", "in-place write"),
    ],
)
def test_op_meaning_in_plain_words(label, base, words):
    assert base_op(label) == base
    assert words in op_meaning(label)


def test_op_tooltip_says_the_trailing_digit_is_the_overload_index():
    lines = describe_op("MeanBackward1")
    assert lines[0] == "Gradient of mean: mean over elements."
    assert lines[1] == "The trailing 1 is PyTorch's overload index, not a layer number."
    custom = describe_op("MyScaleBackward")
    assert custom == [
        "Gradient of my_scale (a custom autograd.Function, or an op not described here)."
    ]


def test_count_text():
    assert [count_text(n) for n in (0, 999, 1000, 1536, 85_054_464, 1_500_000_000)] == [
        "0", "999", "1k", "1.5k", "85.1M", "1.5B"
    ]


def test_every_node_has_a_tooltip_in_svg(graphviz_svg):
    w = torch.ones(3, requires_grad=True)
    x = torch.ones(3)
    drawn = graphviz_svg(make_dot((w * x).sum(), params={"w": w}).source)
    tooltips = {node.lines[0]: node.tooltip for node in drawn.values()}
    assert tooltips["MulBackward0"] == (
        "Gradient of mul: element-wise multiplication.\n"
        "The trailing 0 is PyTorch's overload index, not a layer number."
    )
    assert tooltips["AccumulateGrad"] == "Stores the gradient of a leaf tensor in its .grad."
    assert tooltips["w"] == "parameter w\nshape (3), float32"
    assert tooltips["no grad"].startswith("No gradient flows back")
    assert all(node.tooltip for node in drawn.values())


def test_tooltip_shows_backslashes_and_quotes_exactly(graphviz_svg):
    name = 'a\\N \\\\ "q" & \\l <b>'
    w = torch.ones(2, requires_grad=True)
    drawn = graphviz_svg(make_dot((w * 2).sum(), params={name: w}).source)
    parameter = next(node for node in drawn.values() if node.tooltip and node.tooltip.startswith("parameter"))
    assert parameter.tooltip == f"parameter {name}\nshape (2), float32"


def test_tooltip_holds_module_shapes_saved_values_and_device_only_when_asked():
    b = GraphBuilder()
    out = b.node(OUTPUT, "out", shape=(4, 2))
    op = b.node(OP, "AddmmBackward0", "fc", attrs=(("alpha", "1"),))
    b.edge(op, out, shape=(4, 2))
    grad = b.node(ACCUMULATE_GRAD, "AccumulateGrad", "fc")
    b.edge(grad, op, shape=(2, 8))
    weight = b.node(PARAMETER, "fc.weight", "fc", shape=(2, 8), dtype="float32", device="cuda:0")
    b.edge(weight, grad)
    graph = b.graph((ModuleInfo("", "Net", 16), ModuleInfo("fc", "Linear", 16)))
    plain = to_dot(graph)
    assert (
        'tooltip="Gradient of addmm: matrix multiplication plus a bias '
        "(a Linear layer: bias + input @ weight.T).\\nThe trailing 0 is PyTorch's overload index, not a layer "
        'number.\\nmodule: fc\\ninputs: (2, 8)\\noutput: (4, 2)"' in plain
    )
    assert "alpha=1" not in plain and "cuda" not in plain
    assert "saved: alpha=1" in to_dot(graph, show_attrs=True)
    assert 'tooltip="parameter fc.weight\\nshape (2, 8), float32, on cuda:0\\nmodule: fc"' in to_dot(
        graph, show_device=True
    )
    assert 'tooltip="Stores the gradient of a leaf tensor in its .grad.\\nmodule: fc\\noutput: (2, 8)"' in plain


def test_tooltips_of_a_big_graph_are_written_once_per_content(monkeypatch):
    from graphviz_autograd import walk
    from graphviz_autograd.drawing.dot_writer import _Writer, forget_written_attrs

    forget_written_attrs()  # as in a new process
    calls = []
    node_attrs = _Writer.node_attrs
    monkeypatch.setattr(_Writer, "node_attrs", lambda self, node: calls.append(node.kind) or node_attrs(self, node))
    x = torch.ones(1, requires_grad=True)
    y = x
    for _ in range(2000):
        y = y * 1.0001
    source = to_dot(walk(y, {"x": x}))
    assert source.count("Gradient of mul: element-wise multiplication.") == 2000
    # The parameter's attributes are put together from parts (named_tensor_attrs); every
    # op with its 1.0001 is one content, written once.
    assert sorted(calls) == ["accumulate_grad", "op", "output"]
    assert source.count("\\nwith 1.0001\"") == source.count("with the constant 1.0001") == 2000  # label, tooltip
    assert '[fillcolor=lightblue label="x\\n(1)" tooltip="parameter x\\nshape (1), float32"]' in source
    # Drawn again, and with another option that changes no node's text: nothing is written anew.
    calls.clear()
    assert to_dot(walk(y, {"x": x})) == source
    assert to_dot(walk(y, {"x": x}), legend=True).startswith(source[: source.index("\tn1 -> n0")])
    assert calls == []
    # An option that changes node text does write again.
    to_dot(walk(y, {"x": x}), show_device=True)
    assert sorted(calls) == ["accumulate_grad", "op", "output"]


def test_module_box_tooltip_lists_class_ops_params_and_folded_members():
    source = to_dot(collapse(gpt2_like(), 2))
    assert (
        'tooltip="12 consecutive GPT2Block modules with the same ops and parameter count, drawn as one box:'
        "\\nfrom transformer.h.0 to transformer.h.11\\neach: 4 ops, 7.1M params; in all: 48 ops, 85.1M params"
        '\\ninside: transformer.h"' in source
    )
    assert 'tooltip="lm_head (Linear) drawn as one box: 1 op, 38.6M params"' in source


# --- command line ----------------------------------------------------------------


@pytest.fixture
def recorded_walk(monkeypatch):
    """Make the command's walk return a graph with module info, as a recorded forward pass gives."""
    import importlib

    # The module, not the package's function of the same name: the command imports walk from it.
    monkeypatch.setattr(importlib.import_module("graphviz_autograd.capture.walking"), "walk", lambda *args, **kwargs: gpt2_like(detach_in=3))


def run_cli(tmp_path, *options):
    from click.testing import CliRunner

    from .test_cli import REPO

    return CliRunner().invoke(main, ["render", str(REPO / "samples" / "affine.py"), "-o", "-", "-q", *options])


def test_cli_depth_fold_clusters_and_shapes(tmp_path, recorded_walk):
    result = run_cli(tmp_path, "--depth", "2")
    assert result.exit_code == 0, result.output
    assert "GPT2Block \u00d712" in result.stdout and "subgraph cluster_m" in result.stdout
    assert "label=\"(1, 16, 768)\"" not in result.stdout
    unfolded = run_cli(tmp_path, "--depth", "2", "--no-fold", "--no-clusters", "--shapes")
    assert unfolded.exit_code == 0, unfolded.output
    assert "\u00d7" not in unfolded.stdout and "subgraph" not in unfolded.stdout
    assert unfolded.stdout.count("\\nGPT2Block\\n") == 12
    assert 'label="(1, 16, 768)"' in unfolded.stdout
    assert unfolded.stdout == to_dot(collapse(gpt2_like(detach_in=3), 2, fold_repeated=False), clusters=False, show_shapes=True)


def test_cli_depth_without_a_recording_fails_with_one_line_and_no_file(tmp_path):
    from click.testing import CliRunner

    from .test_cli import REPO

    target = tmp_path / "g.dot"
    args = ["render", str(REPO / "samples" / "affine.py"), "-o", str(target), "-q", "--no-record", "--depth", "1"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert "recorded forward pass" in result.output and "Traceback" not in result.output
    assert not target.exists()


def test_cli_negative_depth_fails_before_the_model_runs(tmp_path):
    from click.testing import CliRunner

    model = tmp_path / "boom.py"
    model.write_text("raise SystemExit('the model file must not run')\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["render", str(model), "-o", "-", "--depth", "-2"])
    assert result.exit_code == 2  # a usage error: click's option type refuses it
    assert "'-2' is not a depth; give a whole number of 0 or more" in result.output


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(hostile_text.filter(lambda t: t.strip()), min_size=1, max_size=4, unique=True))
def test_hostile_names_in_tooltips_and_cluster_labels_are_shown_exactly(graphviz_svg, names):
    b = GraphBuilder()
    out = b.node(OUTPUT, "out", shape=(2,))
    for name in names:
        grad = b.node(ACCUMULATE_GRAD, "AccumulateGrad", name)
        b.edge(grad, out)
        weight = b.node(PARAMETER, name, name, shape=(2,), dtype="float32")
        b.edge(weight, grad)
    graph = b.graph((ModuleInfo("", "Net"),) + tuple(ModuleInfo(name, "Odd") for name in names))
    drawn = graphviz_svg(to_dot(graph, max_attr_chars=10**6))
    assert sorted(drawn) == sorted(n.id for n in graph.nodes)
    for node in graph.nodes:
        if node.kind == PARAMETER:
            expected = f"parameter {node.label}\nshape (2), float32\nmodule: {node.module}"
            assert drawn[node.id].tooltip == shown_text(expected)
