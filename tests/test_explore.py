"""The explorer page's data and file, without a browser (tests/test_explore_browser.py drives one)."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import torch
from click.testing import CliRunner

from graphviz_autograd import OptionError, OutputPathError, explore, record, render, walk
from graphviz_autograd.cli.commands import main
from graphviz_autograd.checks.diagnosis import Finding
from graphviz_autograd.explorer.pages import embedded_json

from .explore_models import HOSTILE, hostile_graph, tiny_dense_block, tiny_gpt2

pytestmark = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")


def embedded_data(html: str) -> dict:
    match = re.search(r'<script type="application/json" id="graph-data">(.*?)</script>', html, re.S)
    assert match is not None
    return json.loads(match.group(1))


def level(data: dict, path: str) -> dict:
    return next(lv for lv in data["levels"] if lv["path"] == path)


@pytest.fixture(scope="module")
def gpt2_page():
    logits, recorder = tiny_gpt2(4)
    return explore(logits, recorder=recorder)


def test_alike_blocks_fold_into_one_box_that_stands_for_all(gpt2_page):
    data = gpt2_page.data
    transformer = level(data, "transformer")
    items = data["templates"][transformer["template"]]["items"]
    boxes = [(item, ref) for item, ref in zip(items, transformer["refs"]) if item["kind"] == "box"]
    blocks = [(item, ref) for item, ref in boxes if item["type"] == "GPT2Block"]
    assert len(blocks) == 1
    item, ref = blocks[0]
    assert item["count"] == 4 and item["label"] == "h.0 \u2026 h.3"
    assert [data["levels"][i]["path"] for i in ref] == [f"transformer.h.{i}" for i in range(4)]
    # Every layer is a level of its own (search can open any), all with one layout.
    assert len({level(data, f"transformer.h.{i}")["template"] for i in range(4)}) == 1


def test_calls_of_one_module_in_a_block_stay_apart_where_one_box_would_be_a_loop():
    from graphviz_autograd import record

    from .test_fold import TwoReluBlock, has_cycle

    torch.manual_seed(0)
    model = torch.nn.Sequential(TwoReluBlock(shared=True))
    with record(model) as recorder:
        out = model(torch.ones(1, 3)).sum()
    data = explore(out, recorder=recorder).data
    block = level(data, "0")
    template = data["templates"][block["template"]]
    boxes = [item for item in template["items"] if item["kind"] == "box"]
    assert sorted((item["label"], item["count"]) for item in boxes if item["type"] == "ReLU") == [("relu1", 1), ("relu1#2", 1)]
    # The block's drawing is a DAG: no box its path runs through twice.
    assert not has_cycle([(str(e[0]), str(e[1])) for e in template["edges"]])


def test_layout_work_grows_with_module_kinds_not_layers(gpt2_page):
    logits, recorder = tiny_gpt2(8)
    deeper = explore(logits, recorder=recorder)
    assert len(deeper.data["levels"]) > len(gpt2_page.data["levels"])
    assert len(deeper.data["templates"]) == len(gpt2_page.data["templates"])


def test_top_level_is_the_top_modules_and_the_output(gpt2_page):
    data = gpt2_page.data
    root = data["levels"][0]
    items = data["templates"][root["template"]]["items"]
    assert root["path"] == "" and root["parent"] == -1
    assert sorted(item["label"] for item in items if item["kind"] == "box") == ["lm_head", "transformer"]
    assert [item["kind"] for item in items].count("output") == 1


def test_every_node_but_saved_tensors_is_in_exactly_one_level(gpt2_page):
    data = gpt2_page.data
    kinds = {node["kind"] for node in data["nodes"]}
    assert "saved" not in kinds and {"op", "parameter", "accumulate_grad"} <= kinds
    placed = []
    for lv in data["levels"]:
        items = data["templates"][lv["template"]]["items"]
        placed += [ref for item, ref in zip(items, lv["refs"]) if item["kind"] not in ("box", "in", "out")]
    assert sorted(placed) == list(range(len(data["nodes"])))


def test_saved_bytes_are_per_op(gpt2_page):
    data = gpt2_page.data
    saved = data["metrics"]["saved_bytes"]
    assert saved and all(data["nodes"][int(k)]["kind"] == "op" and v > 0 for k, v in saved.items())


def test_a_graph_without_modules_is_one_level():
    x = torch.ones(3, requires_grad=True)
    data = explore((x.exp() * 2).sum()).data
    assert len(data["levels"]) == 1
    kinds = [item["kind"] for item in data["templates"][0]["items"]]
    assert kinds.count("op") == 3 and kinds.count("leaf") == 1 and "box" not in kinds


def test_findings_and_gradient_norms_reach_the_page():
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    with torch.no_grad():
        model[1].weight.zero_()
    loss = model(torch.ones(1, 3)).sum()
    loss.backward()
    graph = walk(loss, model)
    node = next(n for n in graph.nodes if n.label == "0.weight")
    finding = Finding("warning", "grad_zero", "0.weight: gradient is zero", (node.id,), "0.weight")
    data = explore(graph, diagnose=[finding], grad_colors=model).data
    weight = data["nodes"].index(next(n for n in data["nodes"] if n["label"] == "0.weight"))
    assert data["findings"] == [{"severity": "warning", "code": "grad_zero", "message": "0.weight: gradient is zero",
                                 "nodes": [weight], "subject": "0.weight"}]
    norms = data["metrics"]["grad_norm"]
    assert norms and {data["nodes"][int(k)]["kind"] for k in norms} == {"parameter", "accumulate_grad"}


def test_names_cannot_leave_the_data_element():
    html = explore(hostile_graph()).html()
    body = embedded_data(html)
    assert HOSTILE not in html and "</script><script>" not in html
    assert body["levels"][1]["path"] == HOSTILE  # intact once parsed
    assert "<title>Net&amp;&lt;i&gt; · backward graph</title>" in html
    assert embedded_json("a<b>&\u2028") == '"a\\u003cb\\u003e\\u0026\\u2028"'


def test_save_is_atomic(tmp_path):
    x = torch.ones(2, requires_grad=True)
    page = explore((x * x).sum())
    with pytest.raises(OutputPathError, match="does not exist"):
        page.save(tmp_path / "missing" / "page.html")
    written = page.save(tmp_path / "page.html")
    assert written.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_notebook_shows_the_page_in_a_sandboxed_frame():
    x = torch.ones(2, requires_grad=True)
    shown = explore((x * x).sum())._repr_html_()
    assert shown.startswith("<iframe") and 'sandbox="allow-scripts"' in shown and "<script" not in shown


def test_render_picks_html_from_the_suffix(tmp_path):
    x = torch.ones(2, requires_grad=True)
    out = render((x * x).sum(), tmp_path / "g.html", show_shapes=True)
    assert embedded_data(out.read_text(encoding="utf-8"))["nodes"][0]["kind"] == "output"
    with pytest.raises(OptionError, match="depth"):
        render((x * x).sum(), tmp_path / "h.html", depth=1)
    assert not (tmp_path / "h.html").exists()
    with pytest.raises(OptionError, match="expand_limit must be a whole number"):  # handed on to the page
        render((x * x).sum(), tmp_path / "h.html", expand_limit=-1)
    assert not (tmp_path / "h.html").exists()


def test_bad_options_name_themselves():
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(OptionError, match="show_shapes must be True or False"):
        explore((x * x).sum(), show_shapes="yes")


def test_cli_writes_an_html_explorer(tmp_path):
    out = tmp_path / "mnist.html"
    result = CliRunner().invoke(main, ["render", "samples/mnist_cnn.py", "-o", str(out), "-q", "--diagnose"])
    assert result.exit_code == 0, result.output
    data = embedded_data(out.read_text(encoding="utf-8"))
    assert data["title"] == "Net"
    assert len(data["levels"]) > 1


def test_cli_expand_limit_reaches_the_page_and_only_the_page(tmp_path):
    out = tmp_path / "mnist.html"
    result = CliRunner().invoke(main, ["render", "samples/mnist_cnn.py", "-o", str(out), "-q", "--expand-limit", "0"])
    assert result.exit_code == 0, result.output
    expandable = [t for t in embedded_data(out.read_text(encoding="utf-8"))["templates"] if "expanded" in t]
    assert expandable and all(set(t["expanded"]) == {"skipped"} for t in expandable)
    # Without the option the same model's page offers its expanded views.
    result = CliRunner().invoke(main, ["render", "samples/mnist_cnn.py", "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    assert any("layout" in t.get("expanded", {}) for t in embedded_data(out.read_text(encoding="utf-8"))["templates"])
    # A static drawing has no expanded views: a usage error, and no file.
    pdf = tmp_path / "mnist.pdf"
    result = CliRunner().invoke(main, ["render", "samples/mnist_cnn.py", "-o", str(pdf), "--expand-limit", "10"])
    assert result.exit_code == 2
    assert "--expand-limit shapes the .html explorer page only, and this writes PDF" in result.output
    assert not pdf.exists()
    result = CliRunner().invoke(main, ["render", "samples/mnist_cnn.py", "-o", str(out), "--expand-limit", "-1"])
    assert result.exit_code == 2 and "-1 is not in the range x>=0" in result.output


def _near_box(point, box, slack=3.0) -> bool:
    x, y, width, height = box
    return abs(point[0] - x) <= width / 2 + slack and abs(point[1] - y) <= height / 2 + slack


def test_fan_in_runs_down_junctions_and_each_edge_is_one_path_between_its_ends():
    out, recorder = tiny_dense_block(7)
    data = explore(out, recorder=recorder).data
    block = level(data, "1")
    template = data["templates"][block["template"]]
    layout = template["layout"]
    # Every layer's output is read by each later layer: through junctions, not one edge per read.
    assert "edges" not in layout and len(layout["routes"]) == len(template["edges"])
    routes = layout["routes"]
    assert len(layout["segments"]) < sum(map(len, routes))  # trunks shared: a bus, not an edge per read
    assert any(len(route) > 2 for route in routes)  # a read down a trunk: join, trunk, branch
    for (source, target, _kind, _shape), route in zip(template["edges"], routes):
        first, last = layout["segments"][route[0]], layout["segments"][route[-1]]
        assert _near_box(first[0][:2], layout["nodes"][source])  # leaves its source...
        assert last[1] is not None and _near_box(last[1], layout["nodes"][target])  # ...and points at its reader
        assert all(layout["segments"][p][1] is None for p in route[:-1])  # one arrowhead, at the reader
    # The expanded view of the block goes through junctions too, its layers' boxes stacked in
    # one column in the order the data flows, not a staircase.
    expanded = template["expanded"]
    assert "routes" in expanded["layout"]
    tops = [expanded["layout"]["clusters"][n] for n, (path, parent) in enumerate(expanded["clusters"]) if parent == -1]
    assert len(tops) == 7
    assert all(lower[1] >= upper[1] + upper[3] for upper, lower in zip(tops, tops[1:]))  # each below the one before
    lefts = [box[0] for box in tops]
    assert max(lefts) - min(lefts) < tops[0][2]  # and overlapping across: one column, not a diagonal
    # A layer's own level has no fan-in.
    layer = data["templates"][level(data, "1.layers.0")["template"]]
    assert "routes" not in layer["layout"] and len(layer["layout"]["edges"]) == len(layer["edges"])


def test_the_same_model_gives_the_same_page(gpt2_page):
    # Small views share a dot process; laid out after other graphs, module boxes would move.
    logits, recorder = tiny_gpt2(4)
    again = explore(logits, recorder=recorder).data
    assert json.dumps(again, sort_keys=True) == json.dumps(gpt2_page.data, sort_keys=True)


def test_expanded_view_opens_every_module_once_per_folded_run(gpt2_page):
    data = gpt2_page.data
    templates = data["templates"]
    top = templates[level(data, "")["template"]]
    expanded = top["expanded"]

    def item_at(path):
        template = top
        for box in path[:-1]:
            template = templates[template["items"][box]["template"]]
        return template["items"][path[-1]]

    labels = [item_at(path)["label"] for path, _parent in expanded["clusters"]]
    assert labels.count("h.0 \u2026 h.3") == 1 and "lm_head" in labels  # the run of 4 blocks is one cluster
    kinds = [item_at(path)["kind"] for path in expanded["items"]]
    assert "box" not in kinds and kinds.count("output") == 1
    assert 0 < len(expanded["items"]) < len(data["nodes"])  # the other 3 blocks are not drawn
    assert [item_at(path)["label"] for path in expanded["items"]].count("AddmmBackward0") == 4  # one block's Conv1Ds
    assert len(expanded["layout"]["nodes"]) == len(expanded["items"])
    assert len(expanded["layout"]["clusters"]) == len(expanded["clusters"])
    # Parents come before their clusters; edges join drawn items, none from a block to itself.
    assert all(parent < n for n, (_path, parent) in enumerate(expanded["clusters"]))
    assert all(0 <= s < len(expanded["items"]) and 0 <= t < len(expanded["items"]) and s != t
               for s, t, _kind in expanded["edges"])
    # A level with no module inside has nothing to expand.
    assert "expanded" not in templates[level(data, "lm_head")["template"]]


def test_expanded_views_are_shared_and_limited(gpt2_page):
    logits, recorder = tiny_gpt2(8)
    deeper = explore(logits, recorder=recorder).data
    shared = [t for t in deeper["templates"] if "expanded" in t]
    assert len(shared) == len([t for t in gpt2_page.data["templates"] if "expanded" in t])
    assert all("layout" in t["expanded"] for t in shared)
    limited = explore(logits, recorder=recorder, expand_limit=0).data
    assert all(set(t["expanded"]) == {"skipped"} for t in limited["templates"] if "expanded" in t)
    with pytest.raises(OptionError, match="expand_limit must be a whole number"):
        explore(logits, recorder=recorder, expand_limit=-1)


def test_a_tied_weight_shows_both_names_on_the_page(gpt2_page):
    data = gpt2_page.data
    (tied,) = [node for node in data["nodes"] if node.get("also")]
    assert (tied["label"], tied["also"]) == ("transformer.wte.weight", ["lm_head.weight"])
    drawn = [lines for template in data["templates"] for item, lines in zip(template["items"], template["labels"])
             if item["kind"] == "parameter" and item["note"]]
    assert drawn and all(lines[1] == "= lm_head.weight" for lines in drawn)


def test_the_page_starts_past_a_top_level_one_module_fills(gpt2_page):
    from graphviz_autograd.explorer.pages import OPEN_PAST_SHARE

    data = gpt2_page.data
    assert data["levels"][data["start"]]["path"] == "transformer"
    # transformer holds at least the share of the ops, and no box in it does.
    ops = {lv["path"]: sum(1 for node in data["nodes"] if node["kind"] == "op" and node["level"] == n)
           for n, lv in enumerate(data["levels"])}
    below = {path: sum(count for p, count in ops.items() if p == path or p.startswith(path + ".") or not path)
             for path in ops}
    assert below["transformer"] >= OPEN_PAST_SHARE * below[""]
    assert all(below[path] < OPEN_PAST_SHARE * below["transformer"] for path in ops if path.count(".") == 1
               and path.startswith("transformer."))


def test_the_page_starts_at_the_top_when_no_module_fills_it():
    args, options = _two_halves()
    data = explore(*args, **options).data
    assert data["start"] == 0


def _two_halves():
    from graphviz_autograd import record

    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 3))
    with record(model) as recorder:
        out = model(torch.ones(1, 3)).sum()
    return (out,), {"recorder": recorder}


class _Rotary(torch.nn.Module):
    """A layer that takes what enters by argument and keyword, as a Llama decoder layer
    takes its hidden states and the rotary (cos, sin), which carry no gradient."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, hidden_states, position_embeddings=None):
        cos, sin = position_embeddings
        return self.fc(hidden_states) * cos.unsqueeze(0) + hidden_states * sin.unsqueeze(0)


class _Angles(torch.nn.Module):
    """Llama's rotary embedding in miniature: (cos, sin) from a buffer, made once for every layer."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("inv_freq", torch.arange(4.0))

    def forward(self):
        return self.inv_freq.cos(), self.inv_freq.sin()


class _TwoLayers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rotary = _Angles()
        self.layers = torch.nn.ModuleList([_Rotary(), _Rotary()])

    def forward(self, x):
        cos, sin = self.rotary()
        x = x.tanh()  # as an embedding's lookup: what enters the first layer is made by an op too
        for layer in self.layers:
            x = layer(x, position_embeddings=(cos, sin))
        return x.sum()


def ports_of(data: dict, path: str) -> list[tuple[str, str]]:
    items = data["templates"][level(data, path)["template"]]["items"]
    return [(item["kind"], item["label"]) for item in items if item["kind"] in ("in", "out")]


def test_ports_are_named_by_the_argument_or_output_that_crosses():
    from graphviz_autograd import record

    torch.manual_seed(0)
    model = _TwoLayers()
    with record(model) as recorder:
        out = model(torch.ones(1, 4, requires_grad=True))
    data = explore(out, recorder=recorder).data
    ports = ports_of(data, "layers.1")
    assert ("in", "hidden_states") in ports and ("out", "output") in ports
    # cos and sin carry no gradient; reshaped inside, they are still the keyword's tuple.
    assert {"position_embeddings[0]", "position_embeddings[1]"} <= {label for kind, label in ports if kind == "in"}
    assert not [label for _, label in ports if label.startswith(("in ", "out "))]
    # Named by argument, alike layers still share one template.
    assert level(data, "layers.0")["template"] == level(data, "layers.1")["template"]


def test_gpt2_ports_name_hidden_states_and_the_tied_weight(gpt2_page):
    data = gpt2_page.data
    assert ("in", "hidden_states") in ports_of(data, "transformer.h.1")
    assert ("in", "transformer.wte.weight") in ports_of(data, "lm_head")
    # Leaving transformer, the tied weight says where it goes: the top level's reader sees lm_head there.
    assert ("out", "wte.weight = lm_head.weight") in ports_of(data, "transformer")


def tiny_llama():
    """A recorded forward pass of a 2-layer Llama with eager attention and a padded mask (a float
    mask added to the scores, as the sdpa path leaves out when no token is padded): (logits, recorder)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=256)
    config._attn_implementation = "eager"
    model = LlamaForCausalLM(config)
    mask = torch.ones(1, 8, dtype=torch.long)
    mask[0, :2] = 0
    with record(model) as recorder:
        logits = model(torch.arange(8).unsqueeze(0), attention_mask=mask).logits
    return logits, recorder


def test_a_llama_layer_names_the_rotary_angles_and_the_mask_that_enter_it():
    logits, recorder = tiny_llama()
    data = explore(logits, recorder=recorder).data
    for path in ("model.layers.0", "model.layers.1"):
        ports = ports_of(data, path)
        assert {("in", "hidden_states"), ("in", "position_embeddings[0]"), ("in", "position_embeddings[1]"),
                ("in", "attention_mask"), ("out", "output")} == set(ports)
        assert len(ports) == len(set(ports))  # cos read by q and by k is one port
    # The float mask the model makes from attention_mask is drawn in the model, where it was made (so that
    # it enters each layer by a port), and not said to be the bool tensor it was made from.
    masks = [node for node in data["nodes"] if node["kind"] == "no_grad" and node.get("module") == "model"]
    assert masks and all(node["label"] == "requires_grad=False" for node in masks)
    # The rotary embedding gives out (cos, sin): two ports, not one per reader.
    assert sorted(ports_of(data, "model.rotary_emb")) == [("out", "output[0]"), ("out", "output[1]")]
    everywhere = [label for lv in data["levels"] for _, label in ports_of(data, lv["path"])]
    assert everywhere and not [label for label in everywhere if re.fullmatch(r"(in|out) \d+", label)]
    assert level(data, "model.layers.0")["template"] == level(data, "model.layers.1")["template"]


class _Branch(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, features, gate, scale=None):
        return self.fc(features) * gate * scale


class _Branches(torch.nn.Module):
    """Two branches that take the model's input, a parameter of the model and a tensor made
    in forward as arguments: leaves of the graph, drawn outside the branches."""

    def __init__(self) -> None:
        super().__init__()
        self.left, self.right = _Branch(), _Branch()
        self.scale = torch.nn.Parameter(torch.ones(4))

    def forward(self, x):
        made = torch.full((4,), 2.0, requires_grad=True)
        return (self.left(x, made, scale=self.scale) + self.right(x, x, scale=self.scale)).sum()


def test_a_leaf_that_enters_a_module_call_is_named_by_the_argument_it_is():
    torch.manual_seed(0)
    model = _Branches()
    with record(model) as recorder:
        out = model(torch.ones(2, 4, requires_grad=True))
    data = explore(out, recorder=recorder).data
    # The input, a tensor made in forward and a parameter of the model, each by its argument's name.
    assert sorted(ports_of(data, "left")) == [("in", "features"), ("in", "gate"), ("in", "scale"), ("out", "output")]
    # The input given as two arguments is one port, named by both.
    assert sorted(ports_of(data, "right")) == [("in", "features = gate"), ("in", "scale"), ("out", "output")]
    assert ("in", "input") in ports_of(data, "left.fc")  # x, two levels down, by the Linear's argument
