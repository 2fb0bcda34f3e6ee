"""The explorer page under hostile and huge input: each case builds a page or fails
with one named error that says what to do, and leaves nothing half-written.

Graphviz that misbehaves is a fake ``dot`` first on PATH (as in test_render_faults).
The browser side of these cases is in test_hostile_explorer_browser.py.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import shutil
import textwrap
from pathlib import Path

import pytest
import torch

import graphviz_autograd
from graphviz_autograd import OptionError, RenderError, explore, record, walk
from graphviz_autograd.errors import GraphTooBigError, LayoutTimeoutError
from graphviz_autograd.views.shown import shown_names

explore_module = importlib.import_module("graphviz_autograd.explorer.pages")

needs_graphviz = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")
posix_only = pytest.mark.skipif(os.name != "posix", reason="the fake dot is a /bin/sh script")

# Names that Graphviz or UTF-8 cannot take as they are: a NUL ends a DOT string, a
# control character makes Graphviz's JSON invalid, a lone surrogate cannot be encoded.
BAD_NAMES = {"nul": "a\x00b", "surrogate": "a\ud800b", "control": "a\x01b", "escape": "a\x1b[31mred"}
SHOWN = {"nul": "a\\x00b", "surrogate": "a\\ud800b", "control": "a\\x01b", "escape": "a\\x1b[31mred"}


class _Named(torch.nn.Module):
    """A model whose ModuleDict key (so module path) is ``name``."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name
        self.blocks = torch.nn.ModuleDict({name: torch.nn.Linear(2, 2)})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks[self.name](x).sum()


def recorded(name: str):
    model = _Named(name)
    with record(model) as recorder:
        out = model(torch.ones(1, 2))
    return out, recorder


def chain(ops: int) -> torch.Tensor:
    """``ops`` multiplications of a one-element tensor, one after the other."""
    y = x = torch.ones(1, requires_grad=True)
    for _ in range(ops):
        y = y * 1.0001
    assert x.requires_grad
    return y


def named_options(message: str) -> set[str]:
    """Every ``name=`` a message tells the user to pass."""
    return set(re.findall(r"\b([a-z_]+)=", message))


EXPLORE_OPTIONS = set(inspect.signature(explore).parameters)


# --- names ---------------------------------------------------------------------------


@needs_graphviz
@pytest.mark.parametrize("case", sorted(BAD_NAMES))
def test_a_module_named_with_what_graphviz_or_utf8_cannot_take_is_drawn_escaped(case, tmp_path):
    out, recorder = recorded(BAD_NAMES[case])
    path = explore(out, recorder=recorder).save(tmp_path / "page.html")
    data = _page_data(path)
    paths = [level["path"] for level in data["levels"]]
    assert f"blocks.{SHOWN[case]}" in paths
    parameters = [node["label"] for node in data["nodes"] if node["kind"] == "parameter"]
    assert f"blocks.{SHOWN[case]}.weight" in parameters
    # The level's box is laid out under its shown name.
    top = data["templates"][data["levels"][0]["template"]]
    assert any(item["label"] == "blocks." + SHOWN[case] for item in top["items"] if item["kind"] == "box")


@needs_graphviz
@pytest.mark.parametrize("case", sorted(BAD_NAMES))
def test_a_parameter_and_a_title_named_so_are_drawn_escaped(case, tmp_path):
    w = torch.ones(2, requires_grad=True)
    page = explore((w * 2).sum(), {BAD_NAMES[case]: w}, title=BAD_NAMES[case])
    path = page.save(tmp_path / "page.html")
    text = path.read_text(encoding="utf-8")
    assert f"<title>{SHOWN[case].replace('&', '&amp;')} · backward graph</title>" in text
    assert [n["label"] for n in _page_data(path)["nodes"] if n["kind"] == "parameter"] == [SHOWN[case]]


def test_names_without_anything_to_escape_keep_the_graph_as_it_is():
    w = torch.ones(2, requires_grad=True)
    graph = walk((w * 2).sum(), {"w\tx": w}, collect_saved=True)  # a tab: escaped in a name
    assert shown_names(graph) is not graph
    plain = walk((w * 2).sum(), {"w": w}, collect_saved=True)
    assert shown_names(plain) is plain


# --- Graphviz that writes something else ------------------------------------------------


@pytest.fixture
def fake_dot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Put a ``dot`` running the given shell script first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real = shutil.which("dot")

    def install(script: str) -> None:
        dot = bin_dir / "dot"
        dot.write_text("#!/bin/sh\n" + textwrap.dedent(script).replace("REAL_DOT", str(real)))
        dot.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")

    return install


def small_output():
    w = torch.ones(2, requires_grad=True)
    return (w * 2).sum(), {"w": w}


@posix_only
@pytest.mark.parametrize("script", [
    "cat > /dev/null\nprintf 'Segmentation fault, but exit 0\\n'\n",
    "cat > /dev/null\nprintf '{\"bb\": \"0,0,10,'\n",  # cut off
    "cat > /dev/null\nprintf '[1, 2]'\n",
], ids=["garbage", "truncated", "not-a-graph"])
def test_graphviz_output_that_is_not_its_json_is_a_render_error_and_no_page(script, fake_dot, tmp_path):
    fake_dot(script)
    target = tmp_path / "out" / "page.html"
    target.parent.mkdir()
    output, params = small_output()
    with pytest.raises(RenderError, match=r"its output could not be read as the layout of .* no page was written"):
        graphviz_autograd.render(output, target, params)
    assert list(target.parent.iterdir()) == []


@needs_graphviz
@posix_only
def test_a_truncated_layout_from_real_graphviz_is_a_render_error(fake_dot, tmp_path):
    fake_dot('REAL_DOT "$@" | head -c 300\n')
    output, params = small_output()
    with pytest.raises(RenderError, match="could not be read"):
        explore(output, params)


# --- big graphs ---------------------------------------------------------------------


def test_a_graph_past_the_limit_is_refused_before_the_walk(monkeypatch):
    monkeypatch.setattr(explore_module, "MAX_OPS", 50)
    walked = []
    monkeypatch.setattr(explore_module, "explorer_data", lambda *a, **k: walked.append(1))
    with pytest.raises(GraphTooBigError, match=r"explore\(\) takes graphs of up to 50 ops") as raised:
        explore(chain(60))
    assert isinstance(raised.value, ValueError) and not walked
    assert named_options(str(raised.value)) <= EXPLORE_OPTIONS
    with pytest.raises(GraphTooBigError, match="this one has 61"):  # 60 ops and an AccumulateGrad
        explore(walk(chain(60)))
    explore_module.check_graph_size(chain(49))  # under the limit: nothing to say


def test_a_big_level_is_shown_as_parts_that_fold(monkeypatch):
    monkeypatch.setattr(explore_module, "SPLIT_LEVELS_ABOVE", 100)
    monkeypatch.setattr(explore_module, "PART_OPS", 25)
    page = explore(chain(300))  # 300 ops, each with an input without gradient, and the leaf
    total = -(-300 // 25)
    assert total > 10
    levels = page.data["levels"]
    parts = [level for level in levels[1:] if level["type"] == "Part"]
    assert [level["path"] for level in parts][:2] == [f"(part 1 of {total})", f"(part 2 of {total})"]
    assert len(parts) == len(levels) - 1 == total
    assert all(level["parent"] == 0 for level in parts)
    # Every node is in one level or another, none left in the top level but the output.
    assert [n["kind"] for n in page.data["nodes"] if n["level"] == 0] == ["output"]
    # The middle parts are alike: one template, one box at the top level for their run.
    top = page.data["templates"][levels[0]["template"]]
    boxes = [item for item in top["items"] if item["kind"] == "box"]
    assert len(boxes) < total and max(item["count"] for item in boxes) >= total - 3
    assert all(sum(item["kind"] == "op" for item in t["items"]) <= 25 for t in page.data["templates"] if t is not top)
    # A part starts at an op, so the parts between the first and the last are alike.
    for level in parts:
        assert page.data["templates"][level["template"]]["items"][0]["kind"] == "op"
    assert len({level["template"] for level in parts[1:-1]}) == 1


def test_a_level_of_many_nodes_but_few_ops_is_split_by_nodes(monkeypatch):
    monkeypatch.setattr(explore_module, "SPLIT_LEVELS_ABOVE", 30)
    monkeypatch.setattr(explore_module, "PART_NODES", 20)
    leaves = [torch.ones(1, requires_grad=True) for _ in range(50)]
    page = explore(torch.stack(leaves).sum(), {f"w{i}": w for i, w in enumerate(leaves)})
    sizes = [sum(1 for node in page.data["nodes"] if node["level"] == n) for n in range(1, len(page.data["levels"]))]
    assert len(sizes) > 1 and max(sizes) <= 20 and sum(sizes) == len(page.data["nodes"]) - 1


@needs_graphviz
def test_a_20000_op_chain_becomes_parts_laid_out_by_dot_once():
    page = explore(chain(20_000))
    levels = page.data["levels"]
    assert len(levels) == 1 + -(-20_000 // explore_module.PART_OPS) > 20  # in parts of 600 ops
    assert len(page.data["templates"]) <= 4  # the top level, the first part, the middle ones, the last
    assert all("note" not in t["layout"] for t in page.data["templates"])  # small enough for dot


# --- the layout budget -----------------------------------------------------------------


@needs_graphviz
def test_layout_fixed_lays_out_every_level_without_dot_and_leaves_out_expanded_views():
    out, recorder = recorded("fc")
    page = explore(out, recorder=recorder, layout="fixed")
    for template in page.data["templates"]:
        layout = template["layout"]
        assert layout["note"].startswith("Laid out by the fixed layered layout")
        assert len(layout["nodes"]) == len(template["items"]) and len(layout["edges"]) == len(template["edges"])
        _assert_no_overlap(layout["nodes"])
        assert all(0 <= x <= layout["width"] and 0 <= y <= layout["height"] for x, y, _w, _h in layout["nodes"])
        if "expanded" in template:
            assert "skipped" in template["expanded"]


@needs_graphviz
def test_a_level_dot_would_take_too_long_on_is_laid_out_by_the_fixed_layout():
    out, recorder = recorded("fc")
    page = explore(out, recorder=recorder, layout_budget=1e-9)
    notes = [t["layout"].get("note", "") for t in page.data["templates"]]
    assert notes and all("Graphviz dot would take about" in note for note in notes)
    assert all(named_options(note) <= EXPLORE_OPTIONS for note in notes)
    assert explore(out, recorder=recorder).data["templates"][0]["layout"].get("note") is None


@posix_only
def test_dot_past_the_budget_is_stopped_and_the_level_laid_out_without_it(fake_dot):
    fake_dot("sleep 30\n")
    output, params = small_output()
    page = explore(output, params, layout_budget=0.5)
    assert "did not finish within the layout budget of 0.5 s" in page.data["templates"][0]["layout"]["note"]
    with pytest.raises(LayoutTimeoutError) as raised:
        explore(output, params, layout="dot", timeout=0.5)
    assert named_options(str(raised.value)) <= EXPLORE_OPTIONS and "write .dot" not in str(raised.value)


@posix_only
def test_a_graphviz_killed_by_a_signal_names_what_explore_takes(fake_dot, tmp_path):
    fake_dot("cat > /dev/null\nkill -SEGV $$\n")
    output, params = small_output()
    with pytest.raises(RenderError, match="killed by signal SIGSEGV") as raised:
        graphviz_autograd.render(output, tmp_path / "page.html", params)
    message = str(raised.value)
    assert "layout='fixed'" in message and "write .dot" not in message
    assert named_options(message) <= EXPLORE_OPTIONS
    assert list(tmp_path.glob("*.html")) == []


def test_without_graphviz_the_page_says_to_install_it_or_lay_out_without_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot there
    output, params = small_output()
    with pytest.raises(graphviz_autograd.GraphvizNotFoundError) as raised:
        explore(output, params)
    message = str(raised.value)
    assert "Install Graphviz" in message and ".dot" not in message and named_options(message) <= EXPLORE_OPTIONS
    page = explore(output, params, layout="fixed")  # needs no Graphviz
    assert len(page.data["templates"][0]["layout"]["nodes"]) == len(page.data["templates"][0]["items"])


def test_layout_options_are_checked():
    output, params = small_output()
    with pytest.raises(OptionError, match="layout must be one of"):
        explore(output, params, layout="neato")
    with pytest.raises(OptionError, match="layout_budget must be a positive number"):
        explore(output, params, layout_budget=0)


@needs_graphviz
def test_render_to_html_passes_the_layout_on(tmp_path):
    output, params = small_output()
    path = graphviz_autograd.render(output, tmp_path / "page.html", params, layout="fixed")
    assert "fixed layered layout" in _page_data(path)["templates"][0]["layout"]["note"]


# --- helpers ---------------------------------------------------------------------------------


def _page_data(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    start = text.index('<script type="application/json" id="graph-data">') + len('<script type="application/json" id="graph-data">')
    return json.loads(text[start : text.index("</script>", start)])


def _assert_no_overlap(boxes: list) -> None:
    for i, (x, y, w, h) in enumerate(boxes):
        for x2, y2, w2, h2 in boxes[i + 1 :]:
            assert abs(x - x2) >= (w + w2) / 2 - 0.5 or abs(y - y2) >= (h + h2) / 2 - 0.5


def test_a_refused_long_chain_is_freed_without_crashing_the_process():
    # Counting reads next_functions, which gives each function a Python wrapper; freed
    # carelessly, a chain of 30,000 wrapped functions overflows the C stack.
    import subprocess
    import sys

    code = textwrap.dedent("""
        import gc, importlib, torch
        from graphviz_autograd.errors import GraphTooBigError
        explore = importlib.import_module("graphviz_autograd.explorer.pages")
        explore.MAX_OPS = 35_000
        y = torch.ones(1, requires_grad=True)
        for _ in range(40_000):
            y = y * 1.0001
        try:
            explore.explore(y)
        except GraphTooBigError:
            pass
        del y
        gc.collect()
        print("freed")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    assert done.returncode == 0 and done.stdout.strip() == "freed", done.stderr[-2000:]


# --- the command line ---------------------------------------------------------------


CHAIN_MODEL = """
import torch
from torch import nn


class Chain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(1))

    def forward(self, x):
        y = x * self.w
        for _ in range(OPS):
            y = y * 1.0001
        return y


model = Chain()
example_inputs = (torch.ones(1),)
"""


def _cli(*args):
    from click.testing import CliRunner

    from graphviz_autograd.cli.commands import main

    return CliRunner().invoke(main, [str(a) for a in args])


@needs_graphviz
def test_the_command_line_passes_the_layout_to_the_page(tmp_path):
    model = tmp_path / "chain.py"
    model.write_text(CHAIN_MODEL.replace("OPS", "3"))
    result = _cli("render", model, "-o", tmp_path / "chain.html", "--layout", "fixed", "--quiet")
    assert result.exit_code == 0, result.output
    assert "fixed layered layout" in _page_data(tmp_path / "chain.html")["templates"][0]["layout"]["note"]


def test_the_command_line_refuses_a_graph_too_big_before_the_walk(tmp_path, monkeypatch):
    monkeypatch.setattr(explore_module, "MAX_OPS", 50)
    model = tmp_path / "chain.py"
    model.write_text(CHAIN_MODEL.replace("OPS", "60"))
    walked = []
    monkeypatch.setattr(importlib.import_module("graphviz_autograd.capture.walking"), "walk", lambda *a, **k: walked.append(1))
    result = _cli("render", model, "-o", tmp_path / "chain.html", "--quiet")
    assert result.exit_code == 1 and not walked
    assert "takes graphs of up to 50 ops" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "chain.html").exists()
