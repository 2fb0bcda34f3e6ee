"""What enters and leaves a module, named on the edges of a static picture (views/ports.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest
import torch

from graphviz_autograd import make_dot, record
from graphviz_autograd.graph.autograd_graph import (
    DATA, MODULE, OP, PORT_ATTR, AutogradGraph, Edge, ModuleInfo, Node,
)
from graphviz_autograd.views.ports import edge_names

from .explore_models import tiny_gpt2

_SVG = "{http://www.w3.org/2000/svg}"
_XLINK_TITLE = "{http://www.w3.org/1999/xlink}title"


@pytest.fixture(scope="module")
def gpt2():
    return tiny_gpt2(4)


def box_id(source: str, first_line: str) -> str:
    """The id of the node whose label starts with ``first_line``."""
    (found,) = re.findall(rf'^\s*(n\d+) \[.*label="{re.escape(first_line)}\\n', source, re.M)
    return found


def edge_attrs(source: str, target: str) -> list[str]:
    """The attribute lists of the edges into ``target``."""
    return re.findall(rf"^\s*n\d+ -> {target}(?: \[(.*)\])?$", source, re.M)


@pytest.mark.parametrize("depth", [1, 2])
def test_edges_into_a_summarys_block_box_carry_the_argument_name(gpt2, depth):
    logits, recorder = gpt2
    source = make_dot(logits, recorder=recorder, depth=depth).source
    # depth 1 draws transformer.h (the ModuleList), depth 2 its blocks, folded: both are entered as hidden_states.
    block = box_id(source, "transformer.h" if depth == 1 else "transformer.h.0 \u2026 h.3")
    (attrs,) = edge_attrs(source, block)
    assert 'xlabel="hidden_states"' in attrs
    assert "enters transformer.h.0 as hidden_states" in attrs  # the tooltip names each border crossed
    # Out of the box into ln_f: neither the plain output nor the LayerNorm's plain input is said on
    # the edge; its tooltip says both.
    (into_ln_f,) = edge_attrs(source, box_id(source, "transformer.ln_f"))
    assert "xlabel" not in into_ln_f
    assert "leaves transformer.h.3 as output" in into_ln_f and "enters transformer.ln_f as input" in into_ln_f


def test_an_edge_out_of_a_box_says_a_named_output_and_where_a_tied_weight_goes(gpt2):
    logits, recorder = gpt2
    source = make_dot(logits, recorder=recorder, depth=0).source
    transformer = box_id(source, "transformer")
    lines = [line for line in source.splitlines() if line.strip().startswith(f"{transformer} -> ")]
    labels = sorted(re.search(r'xlabel="([^"]*)"', line).group(1) for line in lines)
    assert labels == ["last_hidden_state", "wte.weight = lm_head.weight"]


def test_a_full_picture_names_border_crossings_in_tooltips_only(gpt2, tmp_path):
    if shutil.which("dot") is None:
        pytest.skip("Graphviz 'dot' is not installed")
    logits, recorder = gpt2
    source = make_dot(logits, recorder=recorder, depth="full").source
    assert not re.search(r"-> n\d+ \[[^\]]*\bx?label=", source)  # no box: nothing written on the edges
    done = subprocess.run(["dot", "-Tsvg"], input=source.encode(), capture_output=True, timeout=120)
    assert done.returncode == 0 and not done.stderr
    tooltips = [link.get(_XLINK_TITLE) for group in ET.fromstring(done.stdout).iter(_SVG + "g")
                if group.get("class") == "edge" for link in group.iter(_SVG + "a")]
    assert any("enters transformer.h.0 as hidden_states" in (tip or "") for tip in tooltips)
    assert any("leaves transformer as last_hidden_state" in (tip or "") for tip in tooltips)
    # A run of blocks drawn as its first: its inner edges name that block, not the ones it stands for.
    assert not any("transformer.h.2.attn" in (tip or "") for tip in tooltips)


def test_the_names_are_the_same_bytes_every_run():
    first, second = tiny_gpt2(2), tiny_gpt2(2)
    assert (make_dot(first[0], recorder=first[1], depth=1).source
            == make_dot(second[0], recorder=second[1], depth=1).source)


def test_no_names_without_a_recorder_and_none_for_edges_inside_a_box():
    modules = (ModuleInfo("", "Net"), ModuleInfo("block", "Block"))
    walked = AutogradGraph(
        (Node("n0", OP, "MulBackward0", module="block"), Node("n1", OP, "ExpBackward0", module="block"),
         Node("n2", OP, "AddBackward0", attrs=((PORT_ATTR, "in\nblock\nfeatures"),))),
        (Edge("n1", "n0"), Edge("n2", "n1")), modules=modules,
    )
    drawn = AutogradGraph((Node("b", MODULE, "block"), Node("n2", OP, "AddBackward0")), (Edge("n2", "b"),))
    names = edge_names(walked, {"n0": "b", "n1": "b", "n2": "n2"}, drawn)
    assert list(names) == [("n2", "b", DATA)] and names[("n2", "b", DATA)].head == "features"
    assert edge_names(walked.replace(modules=()), None, drawn) == {}  # not recorded: no module knows a name


def test_an_argument_name_reaches_the_edge_of_a_hand_written_model():
    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(3, 3)

        def forward(self, features, gate):
            return self.fc(features) * gate

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scaled = Scaled()

        def forward(self, x):
            return self.scaled(x.tanh(), x.sigmoid()).sum()

    model = Net()
    with record(model) as recorder:
        out = model(torch.ones(2, 3, requires_grad=True))
    source = make_dot(out, recorder=recorder, depth=0).source
    labels = sorted(re.findall(rf'-> {box_id(source, "scaled")} \[.*xlabel="(\w+)"', source))
    assert labels == ["features", "gate"]


def test_one_tensor_given_as_two_arguments_enters_by_both_names():
    class Attention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mix = torch.nn.Linear(3, 3)

        def forward(self, query, key, value):
            return self.mix(query * key + value)

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = Attention()

        def forward(self, x):
            hidden = x.tanh()
            return self.attn(hidden, hidden, hidden).sum()

    model = Net()
    with record(model) as recorder:
        out = model(torch.ones(2, 3, requires_grad=True))
    source = make_dot(out, recorder=recorder, depth=0).source
    labels = re.findall(rf'-> {box_id(source, "attn")} \[.*xlabel="([^"]+)"', source)
    assert labels == ["query = key = value"]


def test_a_name_on_several_edges_leaving_one_box_is_said_once_and_every_edge_keeps_its_tooltip():
    class Rotary(torch.nn.Module):  # as a rotary embedding: two outputs, each used by two products
        def forward(self, x):
            return x.cos(), x.sin()

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rotary = Rotary()
            self.proj = torch.nn.Linear(3, 3)

        def forward(self, x):
            cos, sin = self.rotary(x)
            q, k = self.proj(x), self.proj(x * 2)
            return (q * cos + q * sin + k * cos + k * sin).sum()

    model = Net()
    with record(model) as recorder:
        out = model(torch.ones(2, 3, requires_grad=True))
    source = make_dot(out, recorder=recorder, depth=0).source
    rotary = box_id(source, "rotary")
    leaving = [line for line in source.splitlines() if line.strip().startswith(f"{rotary} -> ")]
    assert len(leaving) == 4
    assert sorted(re.findall(r'xlabel="([^"]*)"', "\n".join(leaving))) == ["output[0]", "output[1]"]
    tips = sorted(re.search(r'tooltip="([^"]*)"', line).group(1) for line in leaving)
    assert tips == ["leaves rotary as output[0]"] * 2 + ["leaves rotary as output[1]"] * 2
