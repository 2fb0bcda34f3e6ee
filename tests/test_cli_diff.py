"""graphviz-autograd diff A B: sentences or JSON on stdout, a picture or a page with -o,
and the status diff(1) gives: 0 equal, 1 different, 2 trouble."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphviz_autograd.cli.commands import main

MODEL = """
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.{act}(), nn.Linear(8, 2))
{extra}
example_inputs = (torch.ones(3, 4),)
"""


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(MODEL.format(act="ReLU", extra=""))
    (tmp_path / "a_again.py").write_text(MODEL.format(act="ReLU", extra=""))
    (tmp_path / "b.py").write_text(MODEL.format(act="GELU", extra="model[2].weight.requires_grad_(False)"))
    return tmp_path


def invoke(*args):
    return CliRunner().invoke(main, ["diff", "-q", *map(str, args)])


def test_equal_models_say_no_change_and_exit_0(workdir):
    result = invoke("a.py", "a_again.py")
    assert result.exit_code == 0, result.output
    assert result.stdout == "no change\n"


def test_different_models_say_what_changed_and_exit_1(workdir):
    result = invoke("a.py", "b.py")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "1: a GELU where a ReLU was; GeluBackward0 where ReluBackward0 was",
        "2.weight: frozen, was learning",
        "2: TBackward0 removed",
    ]


def test_json_on_stdout(workdir):
    result = invoke("a.py", "b.py", "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["equal"] is False and data["counts"]["changed"] == 2
    assert data["sentences"][0].startswith("1: a GELU")


@pytest.mark.parametrize("suffix", [".svg", ".dot", ".html", ".json"])
def test_o_writes_the_diff_in_the_format_of_its_suffix(workdir, suffix):
    if suffix in (".svg", ".html") and shutil.which("dot") is None:
        pytest.skip("Graphviz 'dot' is not installed")
    target = workdir / f"change{suffix}"
    result = invoke("a.py", "b.py", "-o", target)
    assert result.exit_code == 1, result.output
    data = target.read_bytes()
    if suffix == ".svg":
        root = ET.fromstring(data)
        assert root.tag.endswith("svg") and b"GeluBackward0" in data and b"stroke-dasharray" in data
    elif suffix == ".dot":
        assert b"filled,dashed" in data and b"changed: op ReluBackward0 -> GeluBackward0" in data
    elif suffix == ".html":
        assert b'"scale": "diff"' in data or b'"scale":"diff"' in data
    else:
        assert json.loads(data)["equal"] is False


@pytest.mark.parametrize(
    "args, says",
    [
        (("a.py", "missing.py"), "missing.py"),
        (("a.py", "b.py", "-o", "change.txt"), "cannot tell what to write"),
        (("a.py", "b.py", "-o", "a.py"), "cannot tell what to write"),
        (("a.py", "b.py", "-o", "no/such/folder/change.svg"), "does not exist"),
        (("a.py",), "second model B"),
    ],
)
def test_trouble_is_one_sentence_and_status_2_and_no_file(workdir, args, says):
    before = sorted(p.name for p in Path(workdir).rglob("*"))
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output
    assert sorted(p.name for p in Path(workdir).rglob("*") if p.name != "__pycache__") == [n for n in before if n != "__pycache__"]


def test_a_model_that_fails_is_status_2(workdir):
    (workdir / "broken.py").write_text("raise RuntimeError('no model here')\n")
    result = invoke("a.py", "broken.py")
    assert result.exit_code == 2
    assert "no model here" in result.output


def test_one_model_run_two_ways(workdir):
    (workdir / "shaped.py").write_text(
        "import torch\nfrom torch import nn\n\nmodel = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))\n"
        "example_inputs = (torch.ones(3, 4),)\n"
    )
    result = invoke("shaped.py", "--eval", "--b-train")
    assert result.exit_code == 1
    assert result.stdout.startswith("1: ")  # dropout runs in train mode only
    assert invoke("shaped.py", "--eval", "--b-eval").stdout == "no change\n"
    lone = invoke("shaped.py")
    assert lone.exit_code == 2 and "second model B" in lone.output


def test_a_hostile_module_name_reaches_the_terminal_escaped(workdir):
    hostile = (
        "import torch\nfrom torch import nn\n\ntorch.manual_seed(0)\nmodel = nn.Sequential()\n"
        "model.add_module('evil\\x1b[2J', nn.Linear(4, 2))\nexample_inputs = (torch.ones(3, 4),)\n"
    )
    plain = hostile.replace("evil\\x1b[2J", "plain")
    (workdir / "hostile.py").write_text(hostile)
    (workdir / "plain.py").write_text(plain)
    result = invoke("plain.py", "hostile.py")
    assert result.exit_code == 1
    assert "\x1b" not in result.stdout and "evil\\x1b[2J: renamed from plain" in result.stdout
