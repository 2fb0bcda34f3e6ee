"""Golden-file tests of autograd graphs, as a pytest plugin.

Installed with the package (entry point ``pytest11``). In a test::

    def test_mlp_graph(autograd_golden):
        model = MLP()
        autograd_golden.check(model(torch.randn(2, 4)).sum(), "mlp", params=model)

compares the graph's DOT with ``tests/golden/mlp.dot``. A missing file fails with
the command that creates it; a mismatch fails with a diff and a summary of the
labels added and removed, and leaves ``mlp.obtained.dot`` beside the golden file.
``pytest --update-golden`` writes the files instead. The folder is set by the ini
option ``autograd_golden_dir`` (relative to the rootdir) or per call with ``directory=``.

What the DOT holds: op names, parameter and output names, shapes, dtypes other
than float32 and the walk's structure. What it does not: devices (unless
``show_device=True``), memory addresses, versions, paths or times.
"""

from __future__ import annotations

import difflib
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any, Optional

import pytest

DEFAULT_DIR = "tests/golden"
_LABEL = re.compile(r'^\t(?:n\d+) \[.*?label=("(?:[^"\\]|\\.)*"|\S+?)[ \]]', re.MULTILINE)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("graphviz-autograd")
    group.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="write golden DOT files for autograd_golden checks instead of comparing them",
    )
    parser.addini("autograd_golden_dir", help="folder of golden DOT files, relative to the rootdir", default=DEFAULT_DIR)


class GoldenChecker:
    """Compares DOT with golden files; one per test (the ``autograd_golden`` fixture)."""

    def __init__(self, directory: Path, update: bool, validate: bool = True):
        self.directory = directory
        self.update = update
        self.validate = validate
        self.written: list[Path] = []

    def check(
        self,
        outputs: Any,
        name: str,
        *,
        params: Any = None,
        model: Any = None,
        directory: Optional[Path] = None,
        **make_dot_options: Any,
    ) -> str:
        """Walk ``outputs`` (or take an AutogradGraph), draw DOT and compare it with ``<name>.dot``.

        ``model`` is a synonym of ``params`` that reads better for modules.
        Returns the DOT.
        """
        from .api import make_dot

        source = make_dot(outputs, params if params is not None else model, **make_dot_options).source
        self.check_dot(source, name, directory=directory)
        return source

    def check_dot(self, source: str, name: str, *, directory: Optional[Path] = None) -> None:
        """Compare DOT text with the golden file ``<name>.dot``."""
        folder = Path(directory) if directory is not None else self.directory
        golden = folder / f"{name}.dot"
        obtained = folder / f"{name}.obtained.dot"
        if self.validate:
            _check_graphviz_parses(source, name)
        if self.update:
            folder.mkdir(parents=True, exist_ok=True)
            if not golden.exists() or golden.read_text(encoding="utf-8") != source:
                golden.write_text(source, encoding="utf-8")
                self.written.append(golden)
            obtained.unlink(missing_ok=True)
            return
        if not golden.exists():
            pytest.fail(
                f"Golden file {golden} does not exist. Create it with: pytest --update-golden "
                f"(then review it and commit it).",
                pytrace=False,
            )
        expected = golden.read_text(encoding="utf-8")
        if expected == source:
            obtained.unlink(missing_ok=True)
            return
        obtained.write_text(source, encoding="utf-8")
        pytest.fail(_mismatch_report(golden, obtained, expected, source), pytrace=False)


def _mismatch_report(golden: Path, obtained: Path, expected: str, source: str) -> str:
    diff = difflib.unified_diff(
        expected.splitlines(keepends=True),
        source.splitlines(keepends=True),
        fromfile=str(golden),
        tofile=str(obtained),
        n=2,
    )
    lines = list(diff)
    shown = lines[:200]
    if len(lines) > len(shown):
        shown.append(f"... {len(lines) - len(shown)} more diff lines; compare the files for the rest\n")
    return (
        f"The autograd graph differs from {golden}.\n"
        f"{label_summary(expected, source)}\n"
        f"The new DOT is in {obtained}; if the change is intended, run pytest --update-golden.\n\n"
        + "".join(shown)
    )


def label_summary(expected: str, obtained: str) -> str:
    """'added: 2 x MulBackward0; removed: 1 x fc.bias' from the node labels of two DOT texts."""
    before, after = Counter(_labels(expected)), Counter(_labels(obtained))
    added, removed = after - before, before - after
    parts = []
    if added:
        parts.append("added: " + ", ".join(f"{n} x {label}" for label, n in sorted(added.items())))
    if removed:
        parts.append("removed: " + ", ".join(f"{n} x {label}" for label, n in sorted(removed.items())))
    if not parts:
        return "Same nodes by label; the edges, order or attributes differ."
    return "Nodes " + "; ".join(parts) + "."


def _labels(source: str) -> list[str]:
    labels = []
    for match in _LABEL.finditer(source):
        text = match.group(1)
        if text.startswith('"'):
            text = text[1:-1]
        labels.append(text.split("\\n")[0].split("\\l")[0])
    return labels


def _check_graphviz_parses(source: str, name: str) -> None:
    """Fail when Graphviz's parser rejects the DOT (skipped where Graphviz is absent)."""
    dot = shutil.which("dot")
    if dot is None:
        return
    done = subprocess.run([dot, "-Tcanon"], input=source.encode("utf-8"), capture_output=True, timeout=300)
    if done.returncode != 0 or done.stderr.strip():
        message = done.stderr.decode("utf-8", "replace").strip()
        pytest.fail(f"Graphviz rejects the DOT of {name!r}: {message}", pytrace=False)


@pytest.fixture
def autograd_golden(request: pytest.FixtureRequest) -> GoldenChecker:
    """Compare autograd graphs with golden DOT files; see the module docstring."""
    config = request.config
    directory = Path(config.rootpath) / config.getini("autograd_golden_dir")
    return GoldenChecker(directory, update=config.getoption("--update-golden"))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if config.getoption("--update-golden", default=False):
        terminalreporter.write_line("graphviz-autograd: --update-golden wrote changed golden files; review them with git diff.")
