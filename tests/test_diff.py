"""diff(): pairs of models that differ in one known way, and what the diff says, draws and writes.

Each pair's diff must name exactly its change and nothing else; two builds of one model
must be equal; ids must play no part; the picture must fit a page; the text, DOT and
JSON must be the same bytes in another process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from graphviz_autograd import AutogradGraph, diff, walk
from graphviz_autograd.drawing.dot_writer import dot_source
from graphviz_autograd.graph.module_tree import ModuleTree
from graphviz_autograd.testing.structure import structure_graph, structure_text
from graphviz_autograd.views.diffing import ADDED, CHANGED, REMOVED, STATE_BITS, UNCHANGED, state_of
from graphviz_autograd.views.overlays import roll_up

from . import diff_models as models

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def gpt2() -> AutogradGraph:
    return models.graph_of(models.gpt2())


@pytest.fixture(scope="module")
def resnet() -> AutogradGraph:
    return models.resnet_graph(models.resnet())


def _inside(graph: AutogradGraph, path: str) -> int:
    tree = ModuleTree(graph.modules)
    return sum(1 for node in graph.nodes if path in tree.chain(node.module))


# --- GPT-2 ----------------------------------------------------------------------------------

GPT2_PAIRS = {
    "another activation": (models.gpt2_relu, [
        "transformer.h.{0,1}.mlp.act: a ReLU where a NewGELUActivation was; ReluBackward0 where 8 ops "
        "(4 MulBackward0, 2 AddBackward0, PowBackward0 and 1 more) were",
    ]),
    "a wider MLP": (models.gpt2_wider_mlp, [
        "transformer.h.{0,1}.mlp.c_fc.bias: shape (256) where (128) was",
        "transformer.h.{0,1}.mlp.c_fc.weight: shape (32, 256) where (32, 128) was",
        "transformer.h.{0,1}.mlp.c_proj.weight: shape (256, 32) where (128, 32) was",
    ]),
    "a detached attention": (models.gpt2_detached_attention, [
        "transformer.h.1.attn: gradient cut by .detach(); 13 ops (4 TransposeBackward0, 4 ViewBackward0, "
        "2 CatBackward0 and 3 more) removed",
        "transformer.h.1.attn.c_attn: no longer in the backward graph (3 ops, 2 parameters)",
        "transformer.h.1.attn.c_proj: no longer in the backward graph (3 ops, 2 parameters)",
        "transformer.h.1.ln_1: no longer in the backward graph (1 op, 2 parameters)",
    ]),
    "a renamed module": (models.gpt2_renamed_mlp, ["transformer.h.1.ffn: renamed from transformer.h.1.mlp"]),
    "float64": (models.gpt2_float64, ["the model: 28 parameters and 1 output float64 where float32 was"]),
    "an extra LayerNorm": (models.gpt2_extra_norm, ["transformer.h.1.ln_3: a LayerNorm added (1 op, 64 parameters)"]),
    "three layers": (lambda: models.gpt2(3), ["transformer.h.2: a GPT2Block added (37 ops, 12.7k parameters)"]),
}


@pytest.mark.parametrize("change", sorted(GPT2_PAIRS))
def test_each_change_to_gpt2_is_named_and_nothing_else(gpt2, change):
    build, said = GPT2_PAIRS[change]
    found = diff(gpt2, models.graph_of(build()))
    assert list(found.sentences) == said
    assert not found.equal
    # The merged graph holds every node of both: the new graph's, and the old one's that went.
    counts = found.counts()
    assert counts[UNCHANGED] + counts[ADDED] + counts[CHANGED] == len(found.new.nodes)
    assert counts[UNCHANGED] + counts[REMOVED] + counts[CHANGED] == len(found.old.nodes)
    assert len(found.merged.nodes) == len(found.nodes)


def test_a_frozen_parameter_is_frozen_and_its_gradient_ops_gone():
    found = diff(models.graph_of(models.gpt2_untied()), models.graph_of(models.gpt2_frozen_head()))
    assert found.sentences == ("lm_head.weight: frozen, was learning", "lm_head: TBackward0 removed")
    (weight,) = [c for c in found.nodes if c.state == CHANGED]
    assert weight.changes == (("gradient", "learning", "frozen"),)


def test_a_block_added_to_a_run_is_one_block_added_not_every_block_changed(gpt2):
    three = models.graph_of(models.gpt2(3))
    found = diff(gpt2, three)
    assert found.counts() == {UNCHANGED: len(gpt2.nodes), ADDED: _inside(three, "transformer.h.2"), REMOVED: 0, CHANGED: 0}
    added = {c.module for c in found.nodes if c.state == ADDED}
    assert added and all(path.startswith("transformer.h.2") for path in added)
    states = {m.path: m.state for m in found.modules}
    assert states["transformer.h.2"] == ADDED and states["transformer.h.1"] == UNCHANGED
    # ...and the other way round, one block removed.
    assert diff(three, gpt2).sentences == ("transformer.h.2: a GPT2Block removed (37 ops, 12.7k parameters)",)


def test_two_builds_of_one_model_are_equal(gpt2):
    found = diff(gpt2, models.graph_of(models.gpt2()))
    assert found.equal and found.text() == "no change\n" and found.sentences == ()
    assert found.counts() == {UNCHANGED: len(gpt2.nodes), ADDED: 0, REMOVED: 0, CHANGED: 0}


def test_renumbered_ids_never_show_as_changes(gpt2):
    # The same graph with other ids (and the structure text read back, in another order).
    ids = {node.id: f"x{len(gpt2.nodes) - i}" for i, node in enumerate(gpt2.nodes)}
    renumbered = gpt2.replace(
        nodes=tuple(n._replace(id=ids[n.id]) for n in gpt2.nodes),
        edges=tuple(e._replace(source=ids[e.source], target=ids[e.target]) for e in gpt2.edges),
    )
    assert diff(gpt2, renumbered).equal
    assert diff(structure_graph(structure_text(gpt2)), structure_graph(structure_text(renumbered))).equal


# --- a ResNet written by hand -------------------------------------------------------------


def _frozen_head() -> nn.Module:
    model = models.resnet()
    model.fc.weight.requires_grad_(False)
    return model


RESNET_PAIRS = {
    "another activation": (lambda: models.resnet(act=nn.GELU), [
        "layers.{0,1}.act: a GELU where a ReLU was; GeluBackward0 where ReluBackward0 was",
    ]),
    "a wider net": (lambda: models.resnet(width=16), [
        "the model: 9 parameters shape (16) where (8) was",
        "layers.{0,1}.conv1.weight: shape (16, 16, 3, 3) where (8, 8, 3, 3) was",
        "layers.{0,1}.conv2.weight: shape (16, 16, 3, 3) where (8, 8, 3, 3) was",
        "stem.weight: shape (16, 3, 3, 3) where (8, 3, 3, 3) was",
        "fc.weight: shape (10, 16) where (10, 8) was",
    ]),
    "a frozen parameter": (_frozen_head, ["fc.weight: frozen, was learning", "fc: TBackward0 removed"]),
    "a detach": (lambda: models.resnet(detach_stem=True), [
        "stem: no longer in the backward graph (1 op, 2 parameters)", "the model: gradient cut by .detach()",
    ]),
    "a renamed module": (lambda: models.resnet(head="classifier"), ["classifier: renamed from fc"]),
    "an extra norm": (lambda: models.resnet(extra_norm_in=1), ["layers.1.norm: a GroupNorm added (1 op, 16 parameters)"]),
    "three blocks": (lambda: models.resnet(blocks=3), ["layers.2: a Block added (7 ops, 1.2k parameters)"]),
}


@pytest.mark.parametrize("change", sorted(RESNET_PAIRS))
def test_each_change_to_a_resnet_is_named_and_nothing_else(resnet, change):
    build, said = RESNET_PAIRS[change]
    assert list(diff(resnet, models.resnet_graph(build())).sentences) == said


def test_a_resnet_in_float64(resnet):
    doubled = models.graph_of(models.resnet().double(), lambda: models.pixels().double())
    found = diff(resnet, doubled)
    assert found.sentences == ("the model: 16 parameters and 1 output float64 where float32 was",)
    assert {what for c in found.nodes for what, _, _ in c.changes} == {"dtype"}


def test_bert_with_one_more_layer():
    two, three = models.graph_of(models.bert(2)), models.graph_of(models.bert(3))
    found = diff(two, three)
    assert found.sentences == ("encoder.layer.2: a BertLayer added (39 ops, 8.5k parameters)",)
    assert found.counts()[ADDED] == _inside(three, "encoder.layer.2")
    assert diff(two, models.graph_of(models.bert(2))).equal


# --- the picture ------------------------------------------------------------------------------


def test_the_picture_is_one_view_with_removed_dashed_and_unchanged_modules_closed(gpt2):
    found = diff(gpt2, models.graph_of(models.gpt2_relu()))
    view = found.view()
    assert view.note == ""  # it fits a page as it is
    kinds = {node.kind for node in view.graph.nodes}
    assert "module" in kinds  # the unchanged modules are boxes
    boxes = {node.label for node in view.graph.nodes if node.kind == "module"}
    assert not any(".mlp.act" in box for box in boxes)  # the changed one is open
    (overlay,) = view.overlays
    states = {state_of(v) for v in overlay.values.values()}
    assert states == {UNCHANGED, ADDED, REMOVED}
    source = dot_source(view)
    assert source.count("filled,dashed") >= 8  # the GELU's ops, removed
    assert "forestgreen" in source and "removed (in the old graph only)" in source


def test_a_change_in_a_twelve_layer_gpt2_fits_a_page():
    old = models.graph_of(models.gpt2(12))
    model = models.gpt2(12)
    model.transformer.h[5].mlp.act = nn.ReLU()
    found = diff(old, models.graph_of(model))
    assert found.sentences[0].startswith("transformer.h.5.mlp.act: a ReLU where a NewGELUActivation was")
    view = found.view()
    assert view.note == "" and view.depth is None
    assert len(view.graph.nodes) < 80  # eleven unchanged blocks closed (and folded), one open


def test_a_changed_node_says_old_and_new_in_its_tooltip():
    found = diff(models.resnet_graph(models.resnet()), models.resnet_graph(models.resnet(act=nn.GELU)))
    tooltips = found.overlay().tooltips
    assert "changed: op ReluBackward0 -> GeluBackward0" in tooltips.values()


def test_a_box_rolled_up_from_its_nodes_takes_the_state_of_all_of_them():
    def rolled(*states: str) -> str:
        total = float(STATE_BITS[states[0]])
        for state in states[1:]:
            total = roll_up("union", total, float(STATE_BITS[state]))
        return state_of(total)

    assert rolled(ADDED, ADDED) == ADDED and rolled(REMOVED) == REMOVED and rolled(UNCHANGED, UNCHANGED) == UNCHANGED
    assert rolled(UNCHANGED, ADDED) == CHANGED and rolled(ADDED, REMOVED) == CHANGED


# --- plain data, the same bytes every run --------------------------------------------------

_BYTES = """
import hashlib, sys
sys.path.insert(0, {root!r})
from torch import nn
from tests import diff_models as models
from graphviz_autograd import diff
from graphviz_autograd.drawing.dot_writer import dot_source
found = diff(models.resnet_graph(models.resnet()), models.resnet_graph(models.resnet(act=nn.GELU, extra_norm_in=0)))
for text in (found.text(), found.to_json(), dot_source(found.view())):
    print(hashlib.sha256(text.encode()).hexdigest())
"""


def test_the_text_json_and_dot_are_the_same_bytes_in_another_process():
    here = diff(models.resnet_graph(models.resnet()), models.resnet_graph(models.resnet(act=nn.GELU, extra_norm_in=0)))
    import hashlib

    expected = [hashlib.sha256(text.encode()).hexdigest() for text in (here.text(), here.to_json(), dot_source(here.view()))]
    run = subprocess.run([sys.executable, "-c", _BYTES.format(root=str(ROOT))], capture_output=True, text=True, check=True)
    assert run.stdout.split() == expected
    data = json.loads(here.to_json())
    assert data["sentences"] == list(here.sentences) and data["equal"] is False
    assert {n["state"] for n in data["nodes"]} == {ADDED, CHANGED}


def test_diff_walks_what_walk_takes():
    w = torch.ones(3, requires_grad=True)
    found = diff((w * 2).sum(), (w * 2).exp().sum(), {"w": w})
    assert found.sentences == ("the model: ExpBackward0 added",)
    with pytest.raises(TypeError, match="GraphDiff"):
        diff(found, found)


def test_one_op_swapped_in_a_long_chain_without_modules_is_one_change():
    x = torch.ones(3, requires_grad=True)

    def chain(odd: int = -1) -> AutogradGraph:
        y = x
        for i in range(2000):
            y = (y.exp() if i != odd else y.sin()) * 0.5
        return walk(y.sum(), {"x": x})

    found = diff(chain(), chain(odd=1000))
    assert found.sentences == ("the model: SinBackward0 where ExpBackward0 was",)
    assert found.counts()[CHANGED] == 1 and found.counts()[ADDED] == found.counts()[REMOVED] == 0
