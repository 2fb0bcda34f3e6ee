"""The drawing layers need no torch: a graph walked elsewhere (or built by hand) is
drawn, laid out and pinned as structure with click and graphviz alone.

This file imports no torch, so .ci/run also runs it on every other supported Python
the machine has (without torch installed there; ``--noconftest``), which checks that
the package's code is valid there and that its drawing half works.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from graphviz_autograd.drawing.dot_writer import to_dot
from graphviz_autograd.drawing.layout import lay_out
from graphviz_autograd.drawing.rendering import render_source
from graphviz_autograd.testing.structure import structure_text
from graphviz_autograd.views.prepared import prepare

from .module_graphs import gpt2_like
from .test_architecture import MODULES

# The modules that read tensors; every other module imports without torch.
TORCH_MODULES = {"capture.attribute_names", "capture.naming", "capture.nonfinite_values", "capture.recording", "capture.walking", "checks.diagnosis", "checks.nonfinite_origin", "checks.profiling", "training.measures", "training.watching", "integrations.tensorboard", "integrations.lightning", "integrations.transformers", "api", "cli.model_file"}
DRAWING_MODULES = [name for name in MODULES if name not in TORCH_MODULES and name != "__init__"]


def test_the_drawing_layers_import_no_torch():
    imports = "; ".join(f"import graphviz_autograd.{name}" for name in DRAWING_MODULES)
    check = f"import sys; {imports}; print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_graph_built_by_hand_is_drawn_and_pinned():
    graph = gpt2_like(blocks=3, detach_in=1)
    source = to_dot(graph, fold_repeated=False, show_shapes=True)
    assert source.startswith("digraph {") and source.count("subgraph cluster_") >= 3
    assert "AddmmBackward0" in source and "(1, 16, 768)" in source
    # A folded drawing is smaller than the full one, with the same three blocks in it.
    assert len(to_dot(graph)) < len(source)
    text = structure_text(graph)
    assert "AddmmBackward0" in text and "transformer.h.2" in text
    fixed = lay_out(prepare(graph, layout="fixed", depth="full", fold_repeated=False))
    assert fixed.engine == "neato" and any('pos="' in line for line in fixed.lines)


@pytest.mark.skipif(shutil.which("dot") is None, reason="needs the Graphviz dot executable")
def test_a_graph_built_by_hand_renders_to_svg(tmp_path):
    written = render_source(to_dot(gpt2_like(blocks=2)), tmp_path / "g.svg")
    assert b"<svg" in written.read_bytes()[:2000]


def test_the_command_line_answers_help_and_version():
    for args in (["--version"], ["render", "--help"], ["check", "--help"], ["profile", "--help"]):
        result = subprocess.run(
            [sys.executable, "-m", "graphviz_autograd", *args], capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stderr
        assert "graphviz-autograd" in result.stdout or "Usage" in result.stdout
