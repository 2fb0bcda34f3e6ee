"""Golden-file tests of autograd graphs, as a pytest plugin.

Installed with the package (entry point ``pytest11``). In a test::

    def test_mlp_graph(autograd_golden):
        model = MLP()
        autograd_golden.check(model(torch.randn(2, 4)).sum(), "mlp", model=model)

compares the graph's DOT with ``tests/golden/mlp.dot``.

- A missing golden file fails with its path and the command that creates it.
- A mismatch fails with a summary (ops added and removed by kind, parameters
  added and removed, other nodes, the edge count) over a unified diff of the
  DOT, and leaves the new DOT in ``mlp.obtained.dot`` beside the golden file.
- ``pytest --update-golden`` writes the golden files instead of comparing, and
  the terminal summary lists the files it created or changed (under pytest-xdist
  too: each test's writes travel in its report).

The folder is the ini option ``autograd_golden_dir`` (default ``tests/golden``),
or ``directory=`` in a call; a relative folder is taken from the rootdir. The
option and file names are namespaced so as not to clash with snapshot plugins.
The diff is plain text, never coloured, so it reads the same in a log, in
JUnit XML and under ``NO_COLOR``; pytest's own colours follow ``--color`` and
``NO_COLOR`` as usual.

The DOT compared is canonical. It holds op names, parameter and output names,
shapes, dtypes other than float32, the walk's structure (node ids ``n0, n1, ...``
in walk order) and the options passed to ``check``. It holds no device (unless
``show_device=True``: the same test passes with CPU and CUDA tensors), no memory
address, version, path or time, so it is the same in every process and Python
version. A PyTorch release that renames a backward op (``AddmmBackward0``)
changes it, as it should.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

import pytest

DEFAULT_DIR = "tests/golden"
UPDATE_FLAG = "--update-golden"
MAX_DIFF_LINES = 200

# A check's outcome travels to the controller (under xdist) as a user property.
_PROPERTY = "autograd_golden"
_REPORT_PLUGIN = "graphviz-autograd-golden-report"

_NODE_LINE = re.compile(r"^\t+(n\d+(?:_\d+)?) \[(.*)\]$", re.MULTILINE)  # n8_2: a shared parameter's copy; nodes in clusters are indented more
_EDGE_LINE = re.compile(r"^\tn[\d_]+ -> n[\d_]+", re.MULTILINE)
_DOT_ID = r'"(?:[^"\\]|\\.)*"|[^\s="\]]+'
_ATTRIBUTE = re.compile(rf"({_DOT_ID})=({_DOT_ID})")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("graphviz-autograd")
    group.addoption(
        UPDATE_FLAG,
        action="store_true",
        default=False,
        help="write golden DOT files for autograd_golden checks instead of comparing them",
    )
    parser.addini("autograd_golden_dir", help="folder of golden DOT files, relative to the rootdir", default=DEFAULT_DIR)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(GoldenReport(), _REPORT_PLUGIN)


class GoldenChecker:
    """Compares DOT with golden files; one per test (the ``autograd_golden`` fixture).

    ``record(status, path)`` is told the outcome of each check: created,
    updated, unchanged, missing or differs.
    """

    def __init__(
        self,
        directory: Path,
        update: bool,
        validate: bool = True,
        *,
        rootpath: Optional[Path] = None,
        nodeid: Optional[str] = None,
        record: Optional[Callable[[str, Path], None]] = None,
    ):
        self.directory = Path(directory)
        self.update = update
        self.validate = validate
        self.rootpath = Path(rootpath) if rootpath is not None else None
        self.nodeid = nodeid
        self.record = record or (lambda status, path: None)
        self.written: list[Path] = []

    def check(
        self,
        outputs: Any,
        name: str,
        *,
        params: Any = None,
        model: Any = None,
        directory: Optional[os.PathLike | str] = None,
        **make_dot_options: Any,
    ) -> str:
        """Walk ``outputs`` (or take an AutogradGraph), draw DOT and compare it with ``<name>.dot``.

        ``model`` is a synonym of ``params`` that reads better for modules.
        ``make_dot_options`` (``show_attrs``, ``theme``, ...) go to ``make_dot``.
        Returns the DOT.
        """
        from .api import make_dot
        from .errors import InputTypeError

        if params is not None and model is not None:
            raise InputTypeError("autograd_golden.check() takes params= or model=, not both.")
        source = make_dot(outputs, params if params is not None else model, **make_dot_options).source
        self.check_dot(source, name, directory=directory, theme=make_dot_options.get("theme"))
        return source

    def check_dot(
        self,
        source: str,
        name: str,
        *,
        directory: Optional[os.PathLike | str] = None,
        theme: Optional[Mapping] = None,
    ) -> None:
        """Compare DOT text with the golden file ``<name>.dot``.

        ``theme``, when the DOT was drawn with one, lets a mismatch tell node kinds apart.
        """
        from .render import write_atomic

        folder = self.folder(directory)
        golden = folder / f"{name}.dot"
        obtained = folder / f"{name}.obtained.dot"
        if self.validate:
            _check_graphviz_parses(source, name)
        if self.update:
            existed = golden.is_file()
            if existed and golden.read_text(encoding="utf-8") == source:
                self.record("unchanged", golden)
            else:
                golden.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(golden, source.encode("utf-8"))
                self.written.append(golden)
                self.record("updated" if existed else "created", golden)
            obtained.unlink(missing_ok=True)
            return
        if not golden.is_file():
            self.record("missing", golden)
            pytest.fail(
                f"Golden file {self.shown(golden)} does not exist. Create it by running"
                f"{self.from_rootdir()}:\n    {self.update_command()}\nthen review it and commit it.",
                pytrace=False,
            )
        expected = golden.read_text(encoding="utf-8")
        if expected == source:
            obtained.unlink(missing_ok=True)
            return
        write_atomic(obtained, source.encode("utf-8"))
        self.record("differs", golden)
        pytest.fail(self.mismatch_report(name, golden, obtained, expected, source, theme), pytrace=False)

    def folder(self, directory: Optional[os.PathLike | str]) -> Path:
        if directory is None:
            return self.directory
        folder = Path(directory)
        if self.rootpath is not None and not folder.is_absolute():
            folder = self.rootpath / folder
        return folder

    def shown(self, path: Path) -> str:
        """``path`` relative to the rootdir when it lies inside it."""
        if self.rootpath is not None:
            try:
                return str(path.relative_to(self.rootpath))
            except ValueError:
                pass
        return str(path)

    def from_rootdir(self) -> str:
        return f" in {self.rootpath}" if self.rootpath is not None else ""

    def update_command(self) -> str:
        command = f"pytest {UPDATE_FLAG}"
        return f"{command} {shlex.quote(self.nodeid)}" if self.nodeid else command

    def mismatch_report(
        self, name: str, golden: Path, obtained: Path, expected: str, source: str, theme: Optional[Mapping]
    ) -> str:
        diff = list(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                source.splitlines(keepends=True),
                fromfile=self.shown(golden),
                tofile=self.shown(obtained),
                n=2,
            )
        )
        shown = diff[:MAX_DIFF_LINES]
        if len(diff) > len(shown):
            shown.append(f"... {len(diff) - len(shown)} more diff lines; compare the two files for the rest\n")
        return (
            f"The autograd graph {name!r} differs from {self.shown(golden)}.\n"
            f"{graph_summary(expected, source, theme)}\n"
            f"The new DOT is in {self.shown(obtained)}. If the change is intended, run"
            f"{self.from_rootdir()}:\n    {self.update_command()}\n\n" + "".join(shown)
        )


# --- the summary of a mismatch -----------------------------------------------------


def graph_summary(expected: str, obtained: str, theme: Optional[Mapping] = None) -> str:
    """What changed between two DOT texts this package drew, by node kind.

    >>> old = 'digraph {\\n\\tn0 [fillcolor=lightgrey label=MulBackward0]\\n}\\n'
    >>> new = 'digraph {\\n\\tn0 [fillcolor=lightgrey label=AddBackward0]\\n' \\
    ...       '\\tn1 [fillcolor=lightblue label="fc.bias\\\\n(2)"]\\n\\tn1 -> n0\\n}\\n'
    >>> print(graph_summary(old, new))
    Ops: +1 AddBackward0, -1 MulBackward0.
    Parameters: +fc.bias (2).
    Edges: 0 -> 1.
    """
    before, after = _drawn_nodes(expected, theme), _drawn_nodes(obtained, theme)
    lines = []
    for group, title, counted in (("op", "Ops", True), ("parameter", "Parameters", False), ("other", "Other nodes", True)):
        added = after[group] - before[group]
        removed = before[group] - after[group]
        changes = [_change("+", text, n, counted) for text, n in sorted(added.items())]
        changes += [_change("-", text, n, counted) for text, n in sorted(removed.items())]
        if changes:
            lines.append(f"{title}: " + (", " if counted else "; ").join(changes) + ".")
    edges_before, edges_after = len(_EDGE_LINE.findall(expected)), len(_EDGE_LINE.findall(obtained))
    if edges_before != edges_after:
        lines.append(f"Edges: {edges_before} -> {edges_after}.")
    if not lines:
        return "Same nodes and edge count; edges, node order or attributes differ."
    return "\n".join(lines)


def _change(sign: str, text: str, count: int, counted: bool) -> str:
    if counted:
        return f"{sign}{count} {text}"
    return "; ".join([f"{sign}{text}"] * count)


def _drawn_nodes(source: str, theme: Optional[Mapping]) -> dict[str, Counter]:
    """Node texts in three groups (ops by name, named parameters, everything else).

    A node's kind is read from its style attributes, which style.py sets per kind.
    """
    from .dot import UNNAMED, attr_value, read_label
    from .graph import ACCUMULATE_GRAD, LEAF, NO_GRAD, NODE_KINDS, OP, OUTPUT, PARAMETER, SAVED
    from .style import resolve_theme

    try:
        styles = resolve_theme(theme)
    except ValueError:
        styles = resolve_theme(None)
    written = [(kind, {attr_value(k): attr_value(v) for k, v in styles[kind].items()}) for kind in NODE_KINDS]
    groups: dict[str, Counter] = {"op": Counter(), "parameter": Counter(), "other": Counter()}
    for match in _NODE_LINE.finditer(source):
        attrs = dict(_ATTRIBUTE.findall(match.group(2)))
        lines = read_label(attrs.pop("label", '""'))
        attrs.pop("tooltip", None)
        kind = next((k for k, style in written if style == attrs), None)
        if kind in (OP, ACCUMULATE_GRAD) and lines:
            groups["op"][lines[0]] += 1
        elif kind in (PARAMETER, LEAF) and len(lines) == 2 and lines[0] != UNNAMED:
            groups["parameter"][" ".join(lines)] += 1
        elif kind == NO_GRAD:
            groups["other"]["no-grad input"] += 1
        else:
            what = {OUTPUT: "output", SAVED: "saved", PARAMETER: "leaf", LEAF: "leaf"}.get(kind, "node")
            groups["other"][" ".join([what, *lines])] += 1
    return groups


def _check_graphviz_parses(source: str, name: str) -> None:
    """Fail when Graphviz's parser rejects the DOT (skipped where Graphviz is absent)."""
    from .errors import GraphvizNotFoundError, RenderError
    from .render import run_dot

    try:
        run_dot(source, "canon", timeout=300)
    except GraphvizNotFoundError:
        return
    except RenderError as error:
        pytest.fail(f"Graphviz rejects the DOT of {name!r}: {error}", pytrace=False)


# --- fixture and reporting -------------------------------------------------------


@pytest.fixture
def autograd_golden(request: pytest.FixtureRequest) -> GoldenChecker:
    """Compare autograd graphs with golden DOT files; see the module docstring."""
    config = request.config
    node = request.node

    def record(status: str, path: Path) -> None:
        node.user_properties.append((_PROPERTY, f"{status} {path}"))

    return GoldenChecker(
        config.rootpath / config.getini("autograd_golden_dir"),
        update=config.getoption(UPDATE_FLAG),
        rootpath=config.rootpath,
        nodeid=node.nodeid,
        record=record,
    )


class GoldenReport:
    """Gathers each check's outcome from the test reports, which xdist brings back from workers."""

    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}  # path -> status; later checks of a file win

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        for key, value in report.user_properties:
            if key == _PROPERTY:
                status, path = value.split(" ", 1)
                self.outcomes[path] = status

    def lines(self, rootpath: Path, update: bool) -> list[str]:
        """The terminal summary: files written with --update-golden, else files that failed."""
        listed = sorted((_relative(path, rootpath), status) for path, status in self.outcomes.items())
        if update:
            written = [(path, status) for path, status in listed if status in ("created", "updated")]
            unchanged = sum(1 for _, status in listed if status == "unchanged")
            if not written:
                return [f"{UPDATE_FLAG}: all {unchanged} golden file(s) were up to date."] if unchanged else []
            return [
                f"{UPDATE_FLAG} wrote {len(written)} golden file(s), {unchanged} unchanged; review them with git diff:",
                *(f"  {status} {path}" for path, status in written),
            ]
        failed = [(path, status) for path, status in listed if status in ("missing", "differs")]
        if not failed:
            return []
        return [
            f"{len(failed)} golden file(s) missing or different; after review, write them with pytest {UPDATE_FLAG}:",
            *(f"  {status} {path}" for path, status in failed),
        ]


def _relative(path: str, rootpath: Path) -> str:
    try:
        return str(Path(path).relative_to(rootpath))
    except ValueError:
        return path


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    report = config.pluginmanager.get_plugin(_REPORT_PLUGIN)
    if report is None:
        return
    lines = report.lines(config.rootpath, config.getoption(UPDATE_FLAG, default=False))
    if lines:
        terminalreporter.section("graphviz-autograd golden files")
        for line in lines:
            terminalreporter.write_line(line)


# --- asserting that a model learns (its own module) --------------------------------

from .pytest_checks import autograd_check  # noqa: E402,F401  (a fixture: pytest finds it here)
