"""A user's code that imports the public names passes ``mypy --strict``, and the
closed option sets are checked by it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import graphviz_autograd

pytest.importorskip("mypy", reason="mypy is not installed")

PACKAGE_ROOT = Path(graphviz_autograd.__file__).resolve().parent.parent

USER_CODE = '''
from __future__ import annotations

from typing import Any

import graphviz_autograd as ga
from graphviz_autograd import (
    AutogradGraph,
    Edge,
    Finding,
    GraphvizAutogradError,
    GraphvizNotFoundError,
    InputTypeError,
    ModuleInfo,
    Node,
    NoGraphError,
    OptionError,
    OutputPathError,
    Recorder,
    RenderError,
    check,
    collapse,
    make_dot,
    record,
    render,
    to_dot,
    walk,
)


def draw(loss: Any, model: Any) -> str:
    with record(model) as recorder:
        pass
    assert isinstance(recorder, Recorder)
    graph: AutogradGraph = walk(loss, model, recorder=recorder)
    nodes: tuple[Node, ...] = graph.nodes
    edges: tuple[Edge, ...] = graph.edges
    modules: tuple[ModuleInfo, ...] = graph.modules
    findings: list[Finding] = check(loss, model)
    smaller: AutogradGraph = collapse(graph, 1)
    make_dot(loss, model, direction="LR", layout="fixed", theme={"op": "white", "parameter": {"shape": "ellipse"}})
    render(loss, "graph.svg", format="svg", layout="auto")
    errors: tuple[type[GraphvizAutogradError], ...] = (
        GraphvizNotFoundError, InputTypeError, NoGraphError, OptionError, OutputPathError, RenderError,
    )
    print(nodes, edges, modules, findings, smaller, errors, ga.__all__)
    return to_dot(graph)
'''

WRONG_OPTIONS = '''
from typing import Any

from graphviz_autograd import make_dot, render


def draw(loss: Any) -> None:
    make_dot(loss, direction="sideways")
    make_dot(loss, layout="circo")
    make_dot(loss, theme={"operation": "white"})
    render(loss, "graph.svg", format="jpeg")
'''

# torch is left out (follow_imports = skip) to keep the run short: the public
# signatures take tensors as Any-like values anyway.
CONFIG = """
[mypy]
strict = True
follow_imports = silent
[mypy-torch.*]
follow_imports = skip
[mypy-graphviz.*]
ignore_missing_imports = True
"""


def mypy(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "user_code.py").write_text(code)
    (tmp_path / "mypy.ini").write_text(CONFIG)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", str(tmp_path / ".cache"), "user_code.py"],
        cwd=tmp_path,
        env={"MYPYPATH": str(PACKAGE_ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_user_code_importing_the_public_names_passes_mypy_strict(tmp_path):
    done = mypy(tmp_path, USER_CODE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_rejects_options_outside_their_closed_sets(tmp_path):
    done = mypy(tmp_path, WRONG_OPTIONS)
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in errors] == ["8", "9", "10", "11"], done.stdout
    assert all("Literal[" in line for line in errors), done.stdout


def test_all_lists_every_public_name():
    assert sorted(graphviz_autograd.__all__) == sorted(graphviz_autograd._HOMES)
    assert all(getattr(graphviz_autograd, name) is not None for name in graphviz_autograd.__all__)
