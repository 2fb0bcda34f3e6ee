"""make_dot and render as users call them: torchviz's signature, files on disk, stable bytes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import graphviz
import pytest
import torch
from torch import nn

import graphviz_autograd
from graphviz_autograd import (
    GraphvizNotFoundError,
    OptionError,
    OutputPathError,
    make_dot,
    render,
    to_dot,
    walk,
)
from graphviz_autograd.cli.model_file import load_model_file

from .graph_cases import CASES

ROOT = Path(__file__).parent.parent
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="needs the Graphviz dot executable")


def small_loss():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))
    return model(torch.randn(2, 4)).sum(), model


def test_make_dot_takes_torchviz_arguments_positionally():
    loss, model = small_loss()
    dot = make_dot(loss, dict(model.named_parameters()), True, False, 20)
    assert isinstance(dot, graphviz.Digraph)
    assert "0.weight" in dot.source and "self_sym_sizes" in dot.source  # show_attrs took effect


def test_make_dot_source_is_to_dot_of_the_walk():
    loss, model = small_loss()
    assert make_dot(loss, model).source == to_dot(walk(loss, model))


def test_make_dot_accepts_a_walked_graph():
    loss, model = small_loss()
    graph = walk(loss, model)
    assert make_dot(graph, direction="LR").source == to_dot(graph, direction="LR")


def test_op_nodes_match_torchviz():
    torchviz = pytest.importorskip("torchviz")
    loaded = load_model_file(ROOT / "samples" / "mnist_cnn.py")
    output = loaded.run()
    theirs = torchviz.make_dot(output, dict(loaded.model.named_parameters())).source
    their_ops = Counter(re.findall(r"label=(\w+Backward\d*|AccumulateGrad)\b", theirs))
    graph = walk(output, loaded.model)
    ours = Counter(n.label for n in graph.nodes if n.kind in ("op", "accumulate_grad"))
    assert ours == their_ops


@pytest.mark.parametrize(
    "options, message",
    [
        ({"direction": "up"}, "direction must be one of"),
        ({"theme": {"weights": "red"}}, "unknown node kind 'weights'"),
        ({"theme": {"op": 3}}, "must be a colour name"),
        ({"max_attr_chars": 0}, "max_attr_chars must be a positive integer"),
    ],
)
def test_bad_options_are_named(options, message):
    loss, _ = small_loss()
    with pytest.raises(OptionError, match=message):
        make_dot(loss, **options)


def test_render_writes_dot_without_graphviz(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    loss, model = small_loss()
    for name in ("graph.dot", "graph.gv"):
        out = render(loss, tmp_path / name, model)
        assert out.read_text(encoding="utf-8") == make_dot(loss, model).source
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.dot", "graph.gv"]


def test_render_without_graphviz_names_the_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    loss, _ = small_loss()
    with pytest.raises(GraphvizNotFoundError, match="apt-get install graphviz") as info:
        render(loss, tmp_path / "graph.svg")
    assert ".dot file instead" in str(info.value)
    assert list(tmp_path.iterdir()) == []


@needs_dot
def test_render_svg_pdf_png_pick_format_from_suffix(tmp_path):
    loss, model = small_loss()
    svg = render(loss, tmp_path / "g.svg", model)
    root = ET.parse(svg).getroot()
    texts = {t.text for t in root.iter("{http://www.w3.org/2000/svg}text")}
    assert {"AddmmBackward0", "0.weight"} <= texts
    pdf = render(loss, tmp_path / "g.pdf", model).read_bytes()
    assert pdf.startswith(b"%PDF") and len(re.findall(rb"/Type\s*/Page\b", pdf)) == 1
    png = render(loss, tmp_path / "g.png", model).read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    # The explicit format wins over the suffix, and nothing but the targets is written.
    render(loss, tmp_path / "g.txt", model, format="svg")
    assert (tmp_path / "g.txt").read_bytes().lstrip().startswith(b"<?xml")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.pdf", "g.png", "g.svg", "g.txt"]


def test_render_refuses_unknown_suffix_and_missing_directory(tmp_path):
    loss, _ = small_loss()
    with pytest.raises(OptionError, match=r"\(\.jpeg\).*\.dot, \.gv, \.svg, \.pdf, \.png"):
        render(loss, tmp_path / "g.jpeg")
    with pytest.raises(OutputPathError, match="does not exist. Create it first"):
        render(loss, tmp_path / "missing" / "g.dot")
    assert list(tmp_path.iterdir()) == []


def test_render_new_file_has_normal_permissions(tmp_path):
    loss, _ = small_loss()
    out = render(loss, tmp_path / "g.dot")
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask


@needs_dot
def test_every_sample_renders_to_svg(tmp_path):
    for sample in sorted((ROOT / "samples").glob("*.py")):
        loaded = load_model_file(sample)
        svg = render(loaded.run(), tmp_path / f"{sample.stem}.svg", loaded.model, legend=True)
        assert ET.parse(svg).getroot().tag.endswith("svg")


def test_dot_is_byte_identical_across_processes(tmp_path):
    """Same graph, same bytes: different hash seeds, different memory layouts."""
    script = textwrap.dedent(
        """
        import sys, torch
        sys.path.insert(0, sys.argv[1])
        from tests.graph_cases import CASES
        from graphviz_autograd import make_dot
        junk = [torch.randn(i + 1) for i in range(int(sys.argv[2]))]  # shift addresses
        for name in sorted(CASES):
            case = CASES[name]()
            sys.stdout.write(make_dot(case.outputs, case.params, **case.options).source)
        """
    )
    runs = []
    for seed, junk in (("1", "3"), ("2", "50")):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        done = subprocess.run(
            [sys.executable, "-c", script, str(ROOT), junk], capture_output=True, env=env, check=True, timeout=300
        )
        runs.append(done.stdout)
    assert runs[0] == runs[1] and runs[0].count(b"digraph {") == len(CASES)


@needs_dot
def test_gpt2_renders_to_svg_and_pdf(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    # GPT-2 small as published (12 layers, 124M parameters), randomly initialised.
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config())
    ids = torch.randint(0, 1000, (1, 8))
    output = model(ids, labels=ids)
    graph = walk(output, model)
    assert [n.label for n in graph.nodes_of_kind("output")] == ["loss", "logits"]
    names = {n.label for n in graph.nodes_of_kind("parameter")}
    assert {"transformer.wte.weight", "transformer.h.11.attn.c_attn.weight", "transformer.ln_f.bias"} <= names
    assert len(names) == len(list(model.parameters()))  # every parameter reached and named
    svg = render(graph, tmp_path / "gpt2.svg")
    assert ET.parse(svg).getroot().tag.endswith("svg")
    assert render(graph, tmp_path / "gpt2.pdf").read_bytes().startswith(b"%PDF")


def test_public_api_is_exported():
    for name in graphviz_autograd.__all__:
        assert hasattr(graphviz_autograd, name), name
    assert CASES  # the cases module imports cleanly


@pytest.mark.parametrize(
    "first", ["capture.walking", "drawing.rendering", "capture.recording", "views.collapsing", "api", "cli.commands"]
)
def test_api_functions_stay_functions_whichever_module_is_imported_first(first):
    # The package's names are read lazily, so in a fresh interpreter each order of
    # imports must still give the functions, never a module.
    code = (
        f"import graphviz_autograd.{first}, inspect\n"
        "import graphviz_autograd as g\n"
        "from graphviz_autograd import walk, render, record, collapse, make_dot\n"
        "assert all(inspect.isfunction(f) for f in (walk, render, record, collapse, make_dot)), (walk, render)\n"
        "assert g.walk is walk and g.render is render and g.record is record and g.collapse is collapse\n"
        "assert g.walk.__module__ == 'graphviz_autograd.capture.walking' and g.render.__module__ == 'graphviz_autograd.api'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_api_functions_can_be_patched_and_restored(monkeypatch):
    from unittest import mock

    original = graphviz_autograd.walk
    with mock.patch("graphviz_autograd.walk") as patched:
        assert graphviz_autograd.walk is patched
    assert graphviz_autograd.walk is original
    monkeypatch.setattr(graphviz_autograd, "render", len)
    assert graphviz_autograd.render is len
    monkeypatch.undo()
    assert graphviz_autograd.render.__module__ == "graphviz_autograd.api"
