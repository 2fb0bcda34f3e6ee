"""The layout budget holds however wrong the estimate: a ``dot`` that runs past it is
stopped and the fixed layout drawn instead, in render(), the CLI and a notebook's display.

A fake ``dot`` first on PATH that never finishes stands in for a graph whose layout
the estimate got wrong; the real ``neato`` draws the fallback.
"""

from __future__ import annotations

import os
import shutil
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from torch import nn

import graphviz_autograd
from graphviz_autograd import make_dot, record
from graphviz_autograd.drawing import notebook
from graphviz_autograd.cli.commands import main
from graphviz_autograd.errors import RenderError

pytestmark = [
    pytest.mark.skipif(os.name != "posix", reason="the fake dot is a /bin/sh script"),
    pytest.mark.skipif(shutil.which("neato") is None, reason="Graphviz is not installed"),
]


@pytest.fixture
def hanging_dot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``dot`` that reads its input, notes that it ran, then never finishes."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "dot-ran"
    dot = bin_dir / "dot"
    dot.write_text(f'#!/bin/sh\ncat > /dev/null\necho ran >> "{log}"\nexec sleep 600\n')
    dot.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return log


def small_loss():
    w = torch.ones(3, requires_grad=True)
    return (w * 2).sum(), w


def assert_svg(data: bytes) -> ET.Element:
    root = ET.fromstring(data)
    assert root.tag.endswith("svg")
    return root


def test_render_stops_dot_at_the_budget_and_draws_the_fixed_layout(tmp_path, hanging_dot, capsys):
    loss, w = small_loss()
    target = graphviz_autograd.render(loss, tmp_path / "g.svg", {"w": w}, layout_budget=0.5)
    assert hanging_dot.read_text() == "ran\n"  # dot was asked first
    root = assert_svg(target.read_bytes())
    assert "MulBackward0" in "".join(root.itertext())
    err = capsys.readouterr().err
    assert "did not finish within the layout budget of 0.5 s" in err
    assert err.count("\n") == 1


def test_a_timeout_shorter_than_the_budget_is_still_an_error(tmp_path, hanging_dot):
    loss, w = small_loss()
    with pytest.raises(RenderError, match="did not finish"):
        graphviz_autograd.render(loss, tmp_path / "g.svg", {"w": w}, layout_budget=30, timeout=0.5)
    assert list(tmp_path.glob("g.svg*")) == []


def test_layout_dot_waits_for_dot(tmp_path, hanging_dot):
    loss, w = small_loss()
    with pytest.raises(RenderError, match="did not finish"):
        graphviz_autograd.render(loss, tmp_path / "g.svg", {"w": w}, layout="dot", timeout=0.5)


def test_cli_falls_back_with_a_note(tmp_path, hanging_dot):
    model = tmp_path / "m.py"
    model.write_text(
        textwrap.dedent(
            """
            import torch
            model = torch.nn.Linear(3, 2)
            example_inputs = (torch.randn(1, 3),)
            """
        )
    )
    result = CliRunner().invoke(
        main, ["render", str(model), "-o", str(tmp_path / "m.svg"), "-q", "--layout-budget", "0.5"]
    )
    assert result.exit_code == 0, result.output
    assert "note: Graphviz dot did not finish within the layout budget" in result.output
    assert_svg((tmp_path / "m.svg").read_bytes())


def test_notebook_display_never_waits_past_the_budget(hanging_dot):
    loss, w = small_loss()
    dot = make_dot(loss, {"w": w}, layout_budget=0.5)  # the default layout="dot"
    bundle = dot._repr_mimebundle_()
    assert_svg(bundle["image/svg+xml"].encode())
    assert dot._repr_svg_() == bundle["image/svg+xml"]
    assert hanging_dot.read_text() == "ran\n"  # drawn once, then remembered


def test_notebook_shows_a_summary_of_a_graph_too_big_to_show(monkeypatch):
    from graphviz_autograd.views.page_fit import fit_to_page

    monkeypatch.setattr(notebook, "INLINE_SVG_LIMIT", 3_000)
    # 60 blocks, every one drawn (fold_repeated=False, depth="full"): more than a page holds
    model = nn.Sequential(*[nn.Sequential(nn.Linear(4, 4), nn.Tanh()) for _ in range(60)])
    with record(model) as rec:
        out = model(torch.randn(2, 4)).sum()
    dot = make_dot(out, recorder=rec, depth="full", fold_repeated=False)
    bundle = dot._repr_mimebundle_()
    message = bundle["text/plain"]
    assert "too big to show inline" in message and "depth=N" in message
    text = "".join(assert_svg(bundle["image/svg+xml"].encode()).itertext())
    assert "too big to show inline" in text  # the note is in the picture
    assert "AddmmBackward0" not in text  # modules drawn as boxes
    # the summary the default drawing would choose: one decision for both
    assert f"at depth {fit_to_page(dot.drawn, dot.options.replace(depth='fit')).depth} as one box" in message


def test_notebook_says_how_to_draw_a_big_graph_without_modules(monkeypatch):
    monkeypatch.setattr(notebook, "INLINE_SVG_LIMIT", 1_000)
    x = torch.ones(2, requires_grad=True)
    y = x
    for _ in range(30):
        y = y * 1.5
    bundle = make_dot(y.sum())._repr_mimebundle_()
    assert "image/svg+xml" not in bundle
    assert "render(" in bundle["text/plain"]
