"""Golden-file tests of autograd graphs, as a pytest plugin.

Installed with the package (entry point ``pytest11``). In a test module
``tests/test_models.py``::

    def test_mlp_graph(autograd_golden):
        model = MLP()
        autograd_golden.check(model(torch.randn(2, 4)).sum(), "mlp", model=model)

compares the graph with ``tests/golden/test_models/mlp.graph.txt``.

What a golden file holds (the ini option ``autograd_golden_kind``):

- ``structure`` (the default): what the graph is, in the canonical text of
  :mod:`graphviz_autograd.testing.structure`: ops and how they connect, parameter,
  input and output names, shapes and dtypes, where gradient is cut and why,
  which module made each node. Nothing of the drawing (colours, themes,
  tooltips), so a release that changes how graphs look keeps these files valid.
  Only the options of ``check`` that change what is shown (``show_attrs``,
  ``show_saved``, ``show_no_grad``, ``show_device``, ``show_shapes``, ``depth``,
  ``fold_repeated``) change it. File ``<name>.graph.txt``.
- ``drawing``: the whole DOT that ``make_dot`` writes, to pin the picture
  itself. File ``<name>.dot``. ``check(..., kind="drawing")`` chooses per call.

Where golden files live: under the folder of the ini option
``autograd_golden_dir`` (default ``tests/golden``, taken from the rootdir), one
folder per test module, named after the module's path from the folder that
holds the golden folder (or from the rootdir): ``tests/unit/test_a.py`` checks
``tests/golden/unit/test_a/<name>.graph.txt``. With the ini option
``autograd_golden_per_module = false`` all files share the golden folder, as
``directory=`` in a call does for its folder. One golden file checked by two
tests is an error.

- A missing golden file fails with its path and the command that creates it.
- A mismatch fails with a summary (ops added and removed by kind, parameters
  added and removed, other nodes, the edge count) over a unified diff, and
  leaves the new text in ``mlp.obtained.graph.txt`` beside the golden file.
- ``pytest --update-golden`` writes the golden files instead of comparing, and
  the terminal summary lists the files it created or changed (under pytest-xdist
  too: each test's writes travel in its report), then the golden files no test
  used. ``--remove-unused-golden`` deletes those. Files are looked at only where
  the run could have used them: the folders of test modules that ran whole,
  and all of the golden folder when the whole suite ran (no paths, ``-k`` or
  ``-m`` selection, no golden test skipped) and passed.

The option and file names are namespaced so as not to clash with snapshot
plugins. The diff is plain text, never coloured, so it reads the same in a log,
in JUnit XML and under ``NO_COLOR``.

Both kinds hold no device (unless ``show_device=True``: the same test passes
with CPU and CUDA tensors), no memory address, version, path or time, so they
are the same in every process and Python version. A PyTorch release that
renames a backward op (``AddmmBackward0``) changes them, as it should.
"""

from __future__ import annotations

import difflib
import hashlib
import inspect
import json
import os
import re
import secrets
import shlex
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, Optional, Union

import pytest

if TYPE_CHECKING:
    from ..graph.autograd_graph import AutogradGraph
    from ..graph.style import Theme
    from ..views.diffing import GraphDiff

GoldenKind = Literal["structure", "drawing"]
GOLDEN_KINDS: tuple[GoldenKind, ...] = ("structure", "drawing")
SUFFIXES: dict[str, str] = {"structure": ".graph.txt", "drawing": ".dot"}
DEFAULT_DIR = "tests/golden"
UPDATE_FLAG = "--update-golden"
REMOVE_FLAG = "--remove-unused-golden"
MAX_DIFF_LINES = 200
MAX_DIFF_SENTENCES = 10  # of the diff's sentences, the ones that lead a mismatch's message

# A check's outcome travels to the controller (under xdist) as a user property,
# and so does the golden folder of each test that uses the fixture.
_PROPERTY = "autograd_golden"
_FOLDER_PROPERTY = "autograd_golden_folder"
_WORKER_OUTPUT = "autograd_golden_deselected"
_REPORT_PLUGIN = "graphviz-autograd-golden-report"
_FIXTURE = "autograd_golden"

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
        help="write golden files for autograd_golden checks instead of comparing them, and list the ones no test used",
    )
    group.addoption(
        REMOVE_FLAG,
        action="store_true",
        default=False,
        help=f"with {UPDATE_FLAG}: delete the golden files no test used",
    )
    parser.addini("autograd_golden_dir", help="folder of golden files, relative to the rootdir", default=DEFAULT_DIR)
    parser.addini(
        "autograd_golden_kind",
        help="what a golden file holds: structure (the graph, default) or drawing (the whole DOT)",
        default="structure",
    )
    parser.addini(
        "autograd_golden_per_module",
        type="bool",
        help="one folder of golden files per test module (default true)",
        default=True,
    )


def pytest_configure(config: pytest.Config) -> None:
    kind = config.getini("autograd_golden_kind")
    if kind not in GOLDEN_KINDS:
        raise pytest.UsageError(f"autograd_golden_kind must be structure or drawing; got {kind!r}.")
    if config.getoption(REMOVE_FLAG) and not config.getoption(UPDATE_FLAG):
        raise pytest.UsageError(f"{REMOVE_FLAG} goes with {UPDATE_FLAG}: run pytest {UPDATE_FLAG} {REMOVE_FLAG}.")
    config.pluginmanager.register(GoldenReport(config), _REPORT_PLUGIN)


def golden_root(config: pytest.Config) -> Path:
    return config.rootpath / config.getini("autograd_golden_dir")


def module_folder(root: Path, rootpath: Path, module: Path) -> Path:
    """The golden folder of a test module: its path without ``.py``, from the folder
    that holds ``root`` when it lies there, else from ``rootpath``.

    >>> module_folder(Path("/p/tests/golden"), Path("/p"), Path("/p/tests/unit/test_a.py")).as_posix()
    '/p/tests/golden/unit/test_a'
    >>> module_folder(Path("/p/tests/golden"), Path("/p"), Path("/p/other/test_b.py")).as_posix()
    '/p/tests/golden/other/test_b'
    """
    for base in (root.parent, rootpath):
        try:
            relative = module.relative_to(base)
        except ValueError:
            continue
        return root / relative.with_suffix("")
    return root / module.stem


def _test_folder(config: pytest.Config, module: Path) -> Path:
    root = golden_root(config)
    if not config.getini("autograd_golden_per_module"):
        return root
    return module_folder(root, config.rootpath, module)


class GoldenChecker:
    """Compares graphs with golden files; one per test (the ``autograd_golden`` fixture).

    ``directory`` is this test's golden folder. ``record(status, path)`` is told the
    outcome of each check: created, updated, unchanged, missing or differs.
    ``claim(path)`` returns the test that checked ``path`` before, if another did.
    """

    def __init__(
        self,
        directory: Union[os.PathLike[str], str],
        update: bool,
        validate: bool = True,
        *,
        rootpath: Optional[Path] = None,
        nodeid: Optional[str] = None,
        record: Optional[Callable[[str, Path], None]] = None,
        kind: GoldenKind = "structure",
        claim: Optional[Callable[[Path], Optional[str]]] = None,
        golden_root: Optional[Path] = None,
    ):
        self.directory = Path(directory)
        self.update = update
        self.validate = validate
        self.rootpath = Path(rootpath) if rootpath is not None else None
        self.nodeid = nodeid
        self.record = record or (lambda status, path: None)
        self.kind = _check_kind(kind)
        self.claim = claim or (lambda path: None)
        self.golden_root = golden_root
        self.written: list[Path] = []

    def check(
        self,
        outputs: Any,
        name: str,
        *,
        params: Any = None,
        model: Any = None,
        directory: Optional[Union[os.PathLike[str], str]] = None,
        kind: Optional[GoldenKind] = None,
        **make_dot_options: Any,
    ) -> str:
        """Walk ``outputs`` (or take an AutogradGraph) and compare it with the golden file ``name``.

        ``model`` is a synonym of ``params`` that reads better for modules.
        ``make_dot_options`` (``show_attrs``, ``depth``, ``theme``, ...) are
        ``make_dot``'s. ``kind`` (``"structure"`` or ``"drawing"``) overrides the
        ini option for this call. Returns the text compared.
        """
        from ..api import make_dot
        from ..errors import InputTypeError

        if params is not None and model is not None:
            raise InputTypeError("autograd_golden.check() takes params= or model=, not both.")
        if params is None:
            params = model
        kind = self.kind if kind is None else _check_kind(kind)
        if kind == "drawing":
            source = make_dot(outputs, params, **make_dot_options).source
            self.check_dot(source, name, directory=directory, theme=make_dot_options.get("theme"))
            return source
        inspect.signature(make_dot).bind(outputs, params, **make_dot_options)  # a misspelt option is a TypeError
        text = _structure(outputs, params, make_dot_options)
        self._compare(text, name, SUFFIXES["structure"], directory, structure_summary)
        return text

    def check_dot(
        self,
        source: str,
        name: str,
        *,
        directory: Optional[Union[os.PathLike[str], str]] = None,
        theme: Optional[Theme] = None,
    ) -> None:
        """Compare DOT text with the golden file ``<name>.dot``.

        ``theme``, when the DOT was drawn with one, lets a mismatch tell node kinds apart.
        """
        if self.validate:
            _check_graphviz_parses(source, name)
        self._compare(
            source, name, SUFFIXES["drawing"], directory, lambda expected, obtained: graph_summary(expected, obtained, theme)
        )

    def _compare(
        self,
        text: str,
        name: str,
        suffix: str,
        directory: Optional[Union[os.PathLike[str], str]],
        summary: Callable[[str, str], str],
    ) -> None:
        from ..errors import RenderError
        from ..drawing.rendering import write_atomic

        folder = self.folder(directory)
        golden = folder / f"{name}{suffix}"
        obtained = folder / f"{name}.obtained{suffix}"
        other = self.claim(golden)
        if other is not None:
            pytest.fail(
                f"Golden file {self.shown(golden)} is checked by two tests, {other} and {self.nodeid}: "
                "give one of the checks another name.",
                pytrace=False,
            )
        in_the_way = _folder_in_the_way(golden)
        if in_the_way is not None:
            pytest.fail(
                f"Golden file {self.shown(golden)} cannot be {'written' if self.update else 'read'}: "
                f"{self.shown(in_the_way)} is a {'folder' if in_the_way.is_dir() else 'file'}, not "
                f"{'a file' if in_the_way == golden else 'a folder'}. Move it out of the way"
                f"{', then create the golden file with ' + self.update_command() if not self.update else ' and run again'}.",
                pytrace=False,
            )
        if self.update:
            existed = golden.is_file()
            if existed and self.read_golden(golden) == text:
                self.record("unchanged", golden)
            else:
                try:
                    golden.parent.mkdir(parents=True, exist_ok=True)
                    write_atomic(golden, text.encode("utf-8"))
                except (OSError, RenderError) as error:
                    pytest.fail(f"Cannot write golden file {self.shown(golden)}: {_reason(error)}", pytrace=False)
                self.written.append(golden)
                self.record("updated" if existed else "created", golden)
            obtained.unlink(missing_ok=True)
            for stale in _diff_pictures(obtained):
                stale.unlink(missing_ok=True)
            return
        if not golden.is_file():
            self.record("missing", golden)
            pytest.fail(
                f"Golden file {self.shown(golden)} does not exist.{self.earlier_file(name, golden)} Create it by running"
                f"{self.from_rootdir()}:\n    {self.update_command()}\nthen review it and commit it.",
                pytrace=False,
            )
        expected = self.read_golden(golden)
        if expected is None:
            self.record("differs", golden)
            pytest.fail(
                f"Golden file {self.shown(golden)} is not UTF-8 text: it is damaged, or not a golden file of "
                f"graphviz-autograd. Regenerate it by running{self.from_rootdir()}:\n    {self.update_command()}\n"
                "then review it and commit it.",
                pytrace=False,
            )
        picture_beside = _diff_pictures(obtained)
        if expected == text:
            obtained.unlink(missing_ok=True)
            for stale in picture_beside:
                stale.unlink(missing_ok=True)
            return
        try:
            write_atomic(obtained, text.encode("utf-8"))
            not_written = ""
        except (OSError, RenderError) as error:
            not_written = _reason(error)
        self.record("differs", golden)
        found = graph_diff(expected, text, suffix == SUFFIXES["drawing"])
        lead = ""
        if found is not None:
            lead = "What changed:\n" + "".join(f"  {line}\n" for line in found.text(MAX_DIFF_SENTENCES).splitlines())
            written = _write_diff_picture(found, picture_beside)
            if written is not None:
                lead += f"The diff is drawn in {self.shown(written)}.\n"
        report = self.mismatch_report(name, golden, obtained, expected, text, summary, not_written)
        pytest.fail(lead + report, pytrace=False)

    def read_golden(self, golden: Path) -> Optional[str]:
        """The golden file's text (None when it is not UTF-8); a failed test when it cannot be read."""
        try:
            return _read_text(golden)
        except OSError as error:
            pytest.fail(
                f"Golden file {self.shown(golden)} cannot be read: {_reason(error)}. Check its permissions.",
                pytrace=False,
            )

    def earlier_file(self, name: str, golden: Path) -> str:
        """A note when a golden file of an earlier layout or kind stands where this one is looked for."""
        places = [golden.parent]
        if self.golden_root is not None and self.golden_root != golden.parent:
            places.append(self.golden_root)
        for place in places:
            for suffix in SUFFIXES.values():
                earlier = place / f"{name}{suffix}"
                if earlier != golden and earlier.is_file():
                    return (
                        f" {self.shown(earlier)} is there, from an earlier layout or kind of golden files:"
                        f" pytest {UPDATE_FLAG} {REMOVE_FLAG} replaces all of them at once (see the README)."
                    )
        return ""

    def folder(self, directory: Optional[Union[os.PathLike[str], str]]) -> Path:
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
        self,
        name: str,
        golden: Path,
        obtained: Path,
        expected: str,
        source: str,
        summary: Callable[[str, str], str],
        not_written: str = "",
    ) -> str:
        """The summary and diff of a mismatch; ``not_written`` says why the obtained file
        could not be written ('' when it was)."""
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
            f"{_format_note(expected, source)}{summary(expected, source)}\n"
            + (
                f"The obtained file {self.shown(obtained)} could not be written ({not_written}); the diff below "
                "holds the new text. If the change is intended, run"
                if not_written
                else f"The new text is in {self.shown(obtained)}. If the change is intended, run"
            )
            + f"{self.from_rootdir()}:\n    {self.update_command()}\n\n"
            + "".join(shown)
        )


def _diff_pictures(obtained: Path) -> tuple[Path, Path]:
    """Where the picture of a mismatch goes: SVG beside the obtained file, or its DOT
    (``.gv``, no golden file's suffix) where Graphviz is missing."""
    stem = obtained.name[: -len("".join(obtained.suffixes[-2:]))] if obtained.name.endswith(".graph.txt") else obtained.stem
    return obtained.with_name(f"{stem}.diff.svg"), obtained.with_name(f"{stem}.diff.gv")


def graph_diff(expected: str, obtained: str, drawing: bool = False) -> Optional[GraphDiff]:
    """What changed from the golden text to the obtained one, both read back as graphs
    (structure text, or DOT this package drew when ``drawing``); None when either cannot be read."""
    from ..views.diffing import diff
    from .structure import structure_graph

    try:
        if drawing:
            return diff(dot_graph(expected), dot_graph(obtained))
        return diff(structure_graph(expected), structure_graph(obtained))
    except (ValueError, KeyError, IndexError):  # a golden file edited by hand: the text diff below still says it
        return None


def _write_diff_picture(found: GraphDiff, places: tuple[Path, Path]) -> Optional[Path]:
    """Draw ``found`` as SVG in ``places[0]``, or as DOT in ``places[1]`` without Graphviz;
    the path written (None when neither could be)."""
    from ..drawing.dot_writer import dot_source
    from ..drawing.rendering import run_dot, write_atomic
    from ..errors import GraphvizNotFoundError, RenderError

    svg, dot = places
    source = dot_source(found.view(layout="dot"))
    try:
        try:
            data, target, other = run_dot(source, "svg", timeout=60), svg, dot
        except GraphvizNotFoundError:
            data, target, other = source.encode("utf-8"), dot, svg
        written = write_atomic(target, data)
        other.unlink(missing_ok=True)
        return written
    except (OSError, RenderError):
        return None


def dot_graph(source: str) -> AutogradGraph:
    r"""A DOT text this package drew, read back as a graph: each node's kind (from its
    style), name (its label's first line; a parameter's shape from the second), the module
    box around it, and the edges between nodes.

    >>> g = dot_graph('digraph {\n\tsubgraph cluster_m1 {\n\t\tgraph [label="fc (Linear)"]\n'
    ...               '\t\tn0 [fillcolor=lightgrey label=MulBackward0]\n\t}\n\tn1 [fillcolor=lightgrey label=ExpBackward0]\n'
    ...               '\tn0 -> n1\n}\n')
    >>> [(n.kind, n.label, n.module) for n in g.nodes], [m.path for m in g.modules], len(g.edges)
    ([('op', 'MulBackward0', 'fc'), ('op', 'ExpBackward0', '')], ['', 'fc'], 1)
    """
    from ..drawing.dot_writer import attr_value, read_label
    from ..graph.autograd_graph import ACCUMULATE_GRAD, DATA, NODE_KINDS, OP, PARAMETER, AutogradGraph, Edge, ModuleInfo, Node
    from ..graph.style import resolve_theme

    styles = resolve_theme(None)
    written = [(kind, {attr_value(k): attr_value(v) for k, v in styles[kind].items()}) for kind in NODE_KINDS]
    nodes: list[Node] = []
    edges: list[Edge] = []
    modules = [ModuleInfo("", "model")]
    boxes: list[str] = []  # the module paths of the clusters open at a line
    index: dict[str, str] = {}
    for line in source.splitlines():
        body = line.strip()
        cluster = _CLUSTER_TITLE.search(body)
        if body.startswith("subgraph cluster"):
            boxes.append("")
        elif cluster is not None and boxes and not boxes[-1]:
            path, _, type_name = read_label(cluster.group(1))[0].rpartition(" (")
            boxes[-1] = path
            modules.append(ModuleInfo(path, type_name.rstrip(")")))
        elif body == "}" and boxes:
            boxes.pop()
        elif _DOT_EDGE.match(body):
            source_id, target_id = _DOT_EDGE.match(body).groups()  # type: ignore[union-attr]
            if source_id in index and target_id in index:
                edges.append(Edge(index[source_id], index[target_id], DATA))
        else:
            found = _NODE_LINE.match("\t" + body)
            if found is None:
                continue
            attrs = dict(_ATTRIBUTE.findall(found.group(2)))
            lines = read_label(attrs.pop("label", '""'))
            attrs.pop("tooltip", None)
            kind = next((k for k, style in written if style == attrs), OP)
            shape = None
            if kind == PARAMETER and len(lines) > 1 and _SHAPE_TEXT.fullmatch(lines[1]):
                shape = tuple(int(size) for size in lines[1].strip("()").split(",") if size.strip())
            node_id = index[found.group(1)] = f"n{len(nodes)}"
            label = "AccumulateGrad" if kind == ACCUMULATE_GRAD else (lines[0] if lines else "")
            nodes.append(Node(node_id, kind, label, shape=shape, module=boxes[-1] if boxes else ""))
    return AutogradGraph(tuple(nodes), tuple(edges), modules=tuple(modules))


_CLUSTER_TITLE = re.compile(r'graph \[.*\blabel=("(?:[^"\\]|\\.)*"|[^\s\]]+)')
_DOT_EDGE = re.compile(r"^(n[\d_]+) -> (n[\d_]+)")
_SHAPE_TEXT = re.compile(r"\([\d, ]*\)")


def _read_text(path: Path) -> Optional[str]:
    """The UTF-8 text of a golden file, with any line ending read as ``\\n`` (a checkout
    with Windows line endings still matches); None when its bytes are not UTF-8 (junk, a binary)."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _folder_in_the_way(golden: Path) -> Optional[Path]:
    """The golden path itself when it is a folder, or the nearest of its folders that
    is a file; None when neither stands in the way."""
    if golden.is_dir():
        return golden
    for parent in golden.parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def _reason(error: BaseException) -> str:
    """Why a file could not be written, as one phrase."""
    if isinstance(error, OSError):
        return f"{error.strerror or error}"
    return re.sub(r"^Cannot write .*?: ", "", str(error)).rstrip(".")


def _check_kind(kind: str) -> GoldenKind:
    if kind == "structure":
        return "structure"
    if kind == "drawing":
        return "drawing"
    raise pytest.UsageError(f"a golden file's kind is structure or drawing; got {kind!r}.")


def _structure(outputs: Any, params: Any, options: Mapping[str, Any]) -> str:
    """The structure text of the graph ``make_dot(outputs, params, **options)`` would draw."""
    from ..views.collapsing import collapse
    from ..graph.autograd_graph import AutogradGraph
    from .structure import structure_text
    from ..capture.walking import walk

    show_attrs = bool(options.get("show_attrs", False))
    show_saved = bool(options.get("show_saved", False))
    show_shapes = options.get("show_shapes", False) is True
    recorder = options.get("recorder")
    if params is None and recorder is not None:
        params = recorder.model
    if isinstance(outputs, AutogradGraph):
        graph = outputs
    else:
        graph = walk(
            outputs, params, collect_saved=show_attrs or show_saved, collect_shapes=show_shapes, recorder=recorder
        )
    depth = options.get("depth")
    if depth not in (None, "fit", "full"):  # a structure golden pins every node unless depth=N is asked for
        graph = collapse(graph, depth, options.get("fold_repeated", True))
    return structure_text(
        graph,
        show_attrs=show_attrs,
        show_saved=show_saved,
        show_no_grad=options.get("show_no_grad", True),
        show_device=options.get("show_device", False),
        show_shapes=show_shapes,
    )


def _format_note(expected: str, obtained: str) -> str:
    """A line when the golden file was written in another version of the structure format."""
    from .structure import HEADER

    prefix = HEADER.rsplit(" ", 1)[0]
    first = expected.split("\n", 1)[0].rstrip("\r")
    if first.startswith(prefix) and first != HEADER and obtained.startswith(HEADER):
        return f"The golden file is in another version of the format ({first[len(prefix):].strip()}); this one writes {HEADER[len(prefix):].strip()}.\n"
    return ""


# --- the summary of a mismatch -----------------------------------------------------


def graph_summary(expected: str, obtained: str, theme: Optional[Theme] = None) -> str:
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
    return _summary(before, after, len(_EDGE_LINE.findall(expected)), len(_EDGE_LINE.findall(obtained)))


def structure_summary(expected: str, obtained: str) -> str:
    """What changed between two structure texts, by node kind.

    >>> old = "- output loss shape=()\\n  op MulBackward0\\n"
    >>> new = "- output loss shape=()\\n  op AddBackward0\\n  - parameter fc.bias dtype=float32 shape=(2,2)\\n"
    >>> print(structure_summary(old, new))
    Ops: +1 AddBackward0, -1 MulBackward0.
    Parameters: +fc.bias (2, 2).
    Edges: 1 -> 2.
    """
    from .structure import node_lines

    counts = []
    for text in (expected, obtained):
        lines = node_lines(text)
        groups: dict[str, Counter[str]] = {"op": Counter(), "parameter": Counter(), "other": Counter()}
        for line in lines:
            if line.repeat:
                continue
            shape = line.fields.get("shape", "").replace(",", ", ")
            dtype = line.fields.get("dtype", "float32")
            tensor = " ".join(part for part in (line.label, shape, "" if dtype == "float32" else dtype) if part)
            if line.kind in ("op", "accumulate_grad", "module"):
                groups["op"][line.label] += 1
            elif line.kind == "parameter":
                groups["parameter"][tensor] += 1
            elif line.kind == "no_grad":
                groups["other"][" ".join(["no-grad input", line.label]).strip()] += 1
            else:
                groups["other"][" ".join([line.kind, tensor]).strip()] += 1
        counts.append((groups, sum(1 for line in lines if not line.root)))
    (before, edges_before), (after, edges_after) = counts
    return _summary(before, after, edges_before, edges_after)


def _summary(
    before: dict[str, Counter[str]], after: dict[str, Counter[str]], edges_before: int, edges_after: int
) -> str:
    lines = []
    for group, title, counted in (("op", "Ops", True), ("parameter", "Parameters", False), ("other", "Other nodes", True)):
        added = after[group] - before[group]
        removed = before[group] - after[group]
        changes = [_change("+", text, n, counted) for text, n in sorted(added.items())]
        changes += [_change("-", text, n, counted) for text, n in sorted(removed.items())]
        if changes:
            lines.append(f"{title}: " + (", " if counted else "; ").join(changes) + ".")
    if edges_before != edges_after:
        lines.append(f"Edges: {edges_before} -> {edges_after}.")
    if not lines:
        return "Same nodes and edge count; edges, node order or attributes differ."
    return "\n".join(lines)


def _change(sign: str, text: str, count: int, counted: bool) -> str:
    if counted:
        return f"{sign}{count} {text}"
    return "; ".join([f"{sign}{text}"] * count)


def _drawn_nodes(source: str, theme: Optional[Theme]) -> dict[str, Counter[str]]:
    """Node texts in three groups (ops by name, named parameters, everything else).

    A node's kind is read from its style attributes, which style.py sets per kind.
    """
    from ..drawing.dot_writer import attr_value, read_label
    from ..graph.descriptions import UNNAMED
    from ..graph.autograd_graph import ACCUMULATE_GRAD, LEAF, NO_GRAD, NODE_KINDS, OP, OUTPUT, PARAMETER, SAVED
    from ..graph.style import resolve_theme

    try:
        styles = resolve_theme(theme)
    except ValueError:
        styles = resolve_theme(None)
    written = [(kind, {attr_value(k): attr_value(v) for k, v in styles[kind].items()}) for kind in NODE_KINDS]
    groups: dict[str, Counter[str]] = {"op": Counter(), "parameter": Counter(), "other": Counter()}
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
            what = {OUTPUT: "output", SAVED: "saved", PARAMETER: "leaf", LEAF: "leaf"}.get(kind or "", "node")
            groups["other"][" ".join([what, *lines])] += 1
    return groups


def _check_graphviz_parses(source: str, name: str) -> None:
    """Fail when Graphviz's parser rejects the DOT (skipped where Graphviz is absent)."""
    from ..errors import GraphvizNotFoundError, RenderError
    from ..drawing.rendering import run_dot

    try:
        run_dot(source, "canon", timeout=300)
    except GraphvizNotFoundError:
        return
    except RenderError as error:
        pytest.fail(f"Graphviz rejects the DOT of {name!r}: {error}", pytrace=False)


# --- fixture and reporting -------------------------------------------------------


@pytest.fixture
def autograd_golden(request: pytest.FixtureRequest) -> GoldenChecker:
    """Compare autograd graphs with golden files; see the module docstring."""
    config = request.config
    node = request.node
    claimed = config.stash.setdefault(_CLAIMED, {})

    def record(status: str, path: Path) -> None:
        node.user_properties.append((_PROPERTY, f"{status} {path}"))

    claims = getattr(config, "workerinput", {}).get(_CLAIMS_INPUT)

    def claim(path: Path) -> Optional[str]:
        if claims is not None:  # a pytest-xdist worker: the claim must be seen by the others
            other: Optional[str] = claim_file(Path(claims), path, node.nodeid)
        else:
            other = claimed.setdefault(path, node.nodeid)
        return None if other == node.nodeid else other

    return GoldenChecker(
        _test_folder(config, node.path),
        update=config.getoption(UPDATE_FLAG),
        rootpath=config.rootpath,
        nodeid=node.nodeid,
        record=record,
        kind=_check_kind(config.getini("autograd_golden_kind")),
        claim=claim,
        golden_root=golden_root(config),
    )


_CLAIMED = pytest.StashKey[dict[Path, str]]()
# The folder of claim files of one pytest-xdist run, which the controller makes and
# hands to each worker in its workerinput.
_CLAIMS_INPUT = "autograd_golden_claims"


def claim_file(folder: Path, golden: Path, nodeid: str) -> str:
    """Claim ``golden`` for test ``nodeid`` with a file in ``folder``; return the test
    that holds the claim (``nodeid`` itself, or the test that claimed it first).

    Each golden path has one claim file, named by a hash of the path and holding
    the test's id. It is written under a name of its own and then linked into
    place, which fails when the claim exists: so two workers never both win, and
    no worker reads a claim half-written.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> claim_file(folder, Path("/g/a.dot"), "test_x.py::one"), claim_file(folder, Path("/g/a.dot"), "test_y.py::two")
    ('test_x.py::one', 'test_x.py::one')
    """
    name = hashlib.sha256(os.path.normcase(os.path.abspath(golden)).encode("utf-8")).hexdigest()
    final = folder / name
    draft = folder / f".{name}.{os.getpid()}.{secrets.token_hex(4)}"
    draft.write_text(nodeid, encoding="utf-8")
    try:
        os.link(draft, final)
        return nodeid
    except FileExistsError:
        return final.read_text(encoding="utf-8")
    finally:
        draft.unlink(missing_ok=True)


def pytest_itemcollected(item: pytest.Item) -> None:
    # Every report of a test that uses the fixture, a skip included, names its
    # golden folder: the controller learns from them which folders a run covered.
    if _FIXTURE in getattr(item, "fixturenames", ()) and item.config.getini("autograd_golden_per_module"):
        item.user_properties.append((_FOLDER_PROPERTY, str(_test_folder(item.config, item.path))))


class GoldenReport:
    """Gathers each check's outcome from the test reports, which xdist brings back from
    workers, and after a run with --update-golden looks for golden files no test used."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.outcomes: dict[str, str] = {}  # path -> status; later checks of a file win
        self.checked_by: dict[str, set[str]] = {}  # path -> the tests that checked it
        self.folders: set[str] = set()  # golden folders of the tests that ran
        self.incomplete: set[str] = set()  # ... of which a golden test did not pass or was deselected
        self.not_run: set[str] = set()  # golden tests that did not pass (skips too) or were deselected
        self.unused: list[Path] = []
        self.removed = False
        self.not_looked: str = ""
        self.claims: Optional[str] = None  # the claim folder of a pytest-xdist run (controller)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key == _FOLDER_PROPERTY:
                self.folders.add(str(value))
                if report.outcome != "passed":
                    self.incomplete.add(str(value))
                    self.not_run.add(report.nodeid)
        if report.when != "teardown":
            return
        for key, value in report.user_properties:
            if key == _PROPERTY:
                status, path = str(value).split(" ", 1)
                self.outcomes[path] = status
                self.checked_by.setdefault(path, set()).add(report.nodeid)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        for item in items:
            if _FIXTURE in getattr(item, "fixturenames", ()):
                self.not_run.add(item.nodeid)
                self.incomplete.update(str(value) for key, value in item.user_properties if key == _FOLDER_PROPERTY)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        # pytest-xdist: one folder of golden claims for the run, shared by its workers,
        # so that two tests on two workers checking one golden file clash as in a serial run.
        if self.claims is None:
            self.claims = tempfile.mkdtemp(prefix="graphviz-autograd-golden-claims-")
        node.workerinput[_CLAIMS_INPUT] = self.claims

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.claims is not None:
            shutil.rmtree(self.claims, ignore_errors=True)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        # pytest-xdist: a worker's deselected golden tests, which made no report.
        incomplete, not_run = json.loads(getattr(node, "workeroutput", {}).get(_WORKER_OUTPUT, "[[], []]"))
        self.incomplete.update(incomplete)
        self.not_run.update(not_run)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        config = self.config
        workeroutput = getattr(config, "workeroutput", None)
        if workeroutput is not None:  # a pytest-xdist worker: the controller reports
            workeroutput[_WORKER_OUTPUT] = json.dumps([sorted(self.incomplete), sorted(self.not_run)])
            return
        if self.collisions():
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if not config.getoption(UPDATE_FLAG, default=False) or config.getoption("collectonly", default=False):
            return
        self.unused, self.not_looked = self.find_unused(int(exitstatus) == 0)
        if self.unused and config.getoption(REMOVE_FLAG, default=False):
            for path in self.unused:
                path.unlink(missing_ok=True)
            self.removed = True

    def collisions(self) -> list[tuple[str, list[str]]]:
        return sorted((path, sorted(tests)) for path, tests in self.checked_by.items() if len(tests) > 1)

    def find_unused(self, passed: bool) -> tuple[list[Path], str]:
        """Golden files no test of this run used, where this run could have used them,
        and why some were not looked at ('' if all were)."""
        if not passed:
            return [], "the run did not pass"
        root = golden_root(self.config)
        used = {Path(path).resolve() for path in self.outcomes}
        here = self.config.invocation_params.dir
        partial = {
            str(_test_folder(self.config, (here / str(arg).split("::")[0]).resolve()))
            for arg in self.config.args
            if "::" in str(arg)
        }
        candidates: set[Path] = set()
        for folder in self.folders - self.incomplete - partial:
            candidates.update(_golden_files(Path(folder), recursive=False))
        config = self.config
        narrowed = any(
            config.getoption(option, default=None) for option in ("ignore", "ignore_glob", "deselect", "lf", "stepwise")
        )
        note = ""
        if narrowed or not _whole_suite(config):
            note = "paths or options chose the tests, so only the folders of test modules that ran whole were looked at"
        elif self.not_run:
            note = (
                f"{len(self.not_run)} golden test(s) did not run or were skipped, so only the folders "
                "of test modules that ran whole were looked at"
            )
        else:
            candidates.update(_golden_files(root, recursive=True))
        return sorted(path for path in candidates if path.resolve() not in used), note

    def lines(self, rootpath: Path, update: bool) -> list[str]:
        """The terminal summary: files written with --update-golden, else files that failed."""
        listed = sorted((_relative(path, rootpath), status) for path, status in self.outcomes.items())
        lines = [
            f"golden file {_relative(path, rootpath)} is checked by several tests ({', '.join(tests)}): "
            "give each check its own name."
            for path, tests in self.collisions()
        ]
        if update:
            written = [(path, status) for path, status in listed if status in ("created", "updated")]
            unchanged = sum(1 for _, status in listed if status == "unchanged")
            if written:
                lines += [
                    f"{UPDATE_FLAG} wrote {len(written)} golden file(s), {unchanged} unchanged; review them with git diff:",
                    *(f"  {status} {path}" for path, status in written),
                ]
            elif unchanged:
                lines.append(f"{UPDATE_FLAG}: all {unchanged} golden file(s) were up to date.")
            if self.unused:
                shown = [_relative(str(path), rootpath) for path in self.unused]
                if self.removed:
                    lines.append(f"{REMOVE_FLAG} removed {len(shown)} golden file(s) no test used:")
                    lines += [f"  removed {path}" for path in shown]
                else:
                    lines.append(f"{len(shown)} golden file(s) no test used; delete them with {UPDATE_FLAG} {REMOVE_FLAG}:")
                    lines += [f"  unused {path}" for path in shown]
            if self.not_looked:
                lines.append(f"Unused golden files: {self.not_looked}.")
            return lines
        failed = [(path, status) for path, status in listed if status in ("missing", "differs")]
        if failed:
            lines += [
                f"{len(failed)} golden file(s) missing or different; after review, write them with pytest {UPDATE_FLAG}:",
                *(f"  {status} {path}" for path, status in failed),
            ]
        return lines


def _whole_suite(config: pytest.Config) -> bool:
    """Whether pytest was given no paths, so that it collected the whole suite."""
    sources = getattr(pytest.Config, "ArgsSource", None)
    source = getattr(config, "args_source", None)
    return sources is not None and source is not None and source != sources.ARGS


def _golden_files(folder: Path, recursive: bool) -> list[Path]:
    """The golden files in ``folder`` (not the ``.obtained`` ones a mismatch leaves)."""
    if not folder.is_dir():
        return []
    found = []
    for suffix in SUFFIXES.values():
        pattern = f"*{suffix}"
        for path in folder.rglob(pattern) if recursive else folder.glob(pattern):
            if path.is_file() and not path.name.endswith(f".obtained{suffix}"):
                found.append(path)
    return found


def _relative(path: str, rootpath: Path) -> str:
    try:
        return str(Path(path).relative_to(rootpath))
    except ValueError:
        return path


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    report = config.pluginmanager.get_plugin(_REPORT_PLUGIN)
    if report is None or hasattr(config, "workeroutput"):
        return
    lines = report.lines(config.rootpath, config.getoption(UPDATE_FLAG, default=False))
    if lines:
        terminalreporter.section("graphviz-autograd golden files")
        for line in lines:
            terminalreporter.write_line(line)


# --- asserting that a model learns (its own module) --------------------------------

from .pytest_checks import autograd_check  # noqa: E402,F401  (a fixture: pytest finds it here)
