"""The graphviz-autograd command: every sample renders, every bad input gets one clear line.

Most tests run the command in-process with click's CliRunner; a few run it as a
real subprocess (``python -m graphviz_autograd`` and the installed console
script) with PYTHONPATH set to this checkout, so that this checkout's code runs.
"""

from __future__ import annotations

import errno
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from graphviz_autograd import __version__, record, walk
from graphviz_autograd.cli.commands import main
from graphviz_autograd.cli.model_file import load_model_file

REPO = Path(__file__).resolve().parent.parent
SAMPLES = sorted((REPO / "samples").glob("*.py"))
GOLDEN_DIR = Path(__file__).resolve().parent / "golden" / "cli"
SVG_NS = "{http://www.w3.org/2000/svg}"
HAS_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAS_DOT, reason="Graphviz 'dot' is not installed")


# --- helpers -----------------------------------------------------------------------


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """An empty current folder, where default outputs land."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def write(path: Path, source: str) -> Path:
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def files_in(directory: Path) -> list[str]:
    """Every file and folder under ``directory``, hidden temporary files included."""
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


def node_count(dot_source: str) -> int:
    return len(re.findall(r"^\t+n[\d_]+ \[", dot_source, flags=re.MULTILINE))  # in clusters: indented more


def assert_pdf(data: bytes) -> None:
    assert data.startswith(b"%PDF-")
    assert data.rstrip().endswith(b"%%EOF")
    assert len(re.findall(rb"/Type\s*/Page(?![a-z])", data)) == 1


def parse_svg(data: bytes) -> ET.Element:
    root = ET.fromstring(data)
    assert root.tag == f"{SVG_NS}svg"
    return root


def svg_node_count(root: ET.Element) -> int:
    return sum(1 for g in root.iter(f"{SVG_NS}g") if g.get("class") == "node")


def assert_graphviz_parses(source: str) -> None:
    if HAS_DOT:
        done = subprocess.run(["dot", "-Tcanon"], input=source.encode(), capture_output=True, timeout=60)
        assert done.returncode == 0 and not done.stderr, done.stderr


def subprocess_env(**changes: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO), **changes)


def run_module(*args: str, cwd: Path, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "graphviz_autograd", *args],
        cwd=cwd,
        env=env or subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


# Model files with something wrong, written into the test's folder.
BAD_FILES = {
    "raises.py": """
        import torch
        config = {}
        raise ValueError("bad config")
    """,
    "nomodel.py": """
        import torch
        net = torch.nn.Linear(2, 2)
        def helper():
            pass
    """,
    "noinputs.py": """
        import torch
        model = torch.nn.Linear(4, 3)
    """,
    "shape.py": """
        import torch
        model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(5, 2))
        example_inputs = (torch.randn(2, 4),)
    """,
    "frozen.py": """
        import torch
        model = torch.nn.Linear(4, 3).requires_grad_(False)
        example_inputs = (torch.randn(2, 4),)
    """,
    "nograd.py": """
        import torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(4, 3)

            def forward(self, x):
                with torch.no_grad():
                    return self.fc(x)

        model = Net()
        example_inputs = (torch.randn(2, 4),)
    """,
    "good.py": """
        import torch
        model = torch.nn.Linear(4, 3)
        example_inputs = (torch.randn(2, 4),)
    """,
}


def write_bad_files(directory: Path) -> None:
    for name, source in BAD_FILES.items():
        write(directory / name, source)
    torch.save(torch.nn.Linear(2, 2), directory / "pickled.pt")


# --- every sample renders ----------------------------------------------------------


@needs_dot
@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.stem)
def test_every_sample_renders_to_pdf_and_svg(sample, workdir):
    dot = invoke("render", sample, "-o", "-", "-q")
    assert dot.exit_code == 0, dot.output
    expected_nodes = node_count(dot.stdout)

    pdf = invoke("render", sample, "-o", "graph.pdf")
    assert pdf.exit_code == 0, pdf.output
    assert_pdf((workdir / "graph.pdf").read_bytes())

    svg = invoke("render", sample, "-o", "graph.svg")
    assert svg.exit_code == 0, svg.output
    assert svg_node_count(parse_svg((workdir / "graph.svg").read_bytes())) == expected_nodes
    assert files_in(workdir) == ["graph.pdf", "graph.svg"]


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.stem)
def test_sample_dot_matches_golden(sample, workdir, autograd_golden):
    result = invoke("render", sample, "-o", "-", "-q")
    assert result.exit_code == 0, result.output
    autograd_golden.check_dot(result.stdout, sample.stem, directory=GOLDEN_DIR)


def test_every_sample_has_a_cli_golden_file():
    missing = [s.stem for s in SAMPLES if not (GOLDEN_DIR / f"{s.stem}.dot").exists()]
    assert SAMPLES and not missing


# --- outputs -----------------------------------------------------------------------


@needs_dot
def test_default_output_is_model_stem_pdf_in_current_folder(workdir):
    result = invoke("render", REPO / "samples" / "affine.py")
    assert result.exit_code == 0, result.output
    assert files_in(workdir) == ["affine.pdf"]
    assert_pdf((workdir / "affine.pdf").read_bytes())


def test_default_output_takes_the_format_option_as_suffix(workdir):
    result = invoke("render", REPO / "samples" / "affine.py", "--format", "json")
    assert result.exit_code == 0, result.output
    assert files_in(workdir) == ["affine.json"]
    json.loads((workdir / "affine.json").read_text())


@pytest.mark.parametrize("name, fmt", [("graph.gv", "dot"), ("GRAPH.DOT", "dot"), ("graph.json", "json")])
def test_format_option_that_agrees_with_the_suffix_is_fine(workdir, name, fmt):
    result = invoke("render", REPO / "samples" / "affine.py", "-o", name, "--format", fmt, "-q")
    assert result.exit_code == 0, result.output
    assert files_in(workdir) == [name]


def test_format_option_names_the_format_of_a_suffix_that_names_none(workdir):
    result = invoke("render", REPO / "samples" / "affine.py", "-o", "graph.txt", "--format", "dot")
    assert result.exit_code == 0, result.output
    assert (workdir / "graph.txt").read_text().startswith("digraph {")


@pytest.mark.parametrize("name", ["graph.dot", "graph.gv", "GRAPH.DOT"])
def test_dot_suffixes(workdir, name):
    result = invoke("render", REPO / "samples" / "affine.py", "-o", name, "-q")
    assert result.exit_code == 0, result.output
    assert (workdir / name).read_text().startswith("digraph {")
    assert result.stdout == "" and result.stderr == ""


@needs_dot
def test_png_output(workdir):
    result = invoke("render", REPO / "samples" / "affine.py", "-o", "graph.png", "-q")
    assert result.exit_code == 0, result.output
    assert (workdir / "graph.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


@needs_dot
def test_svg_to_stdout(workdir):
    result = invoke("render", REPO / "samples" / "lenet.py", "-o", "-", "--format", "svg")
    assert result.exit_code == 0, result.output
    parse_svg(result.stdout_bytes)
    assert "laying out with dot" in result.stderr
    assert files_in(workdir) == []


def test_stdout_holds_only_the_graph_even_when_the_model_prints(workdir):
    write(
        workdir / "chatty.py",
        """
        import torch
        print("hello from import")

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(2, 2)

            def forward(self, x):
                print("hello from forward")
                return self.fc(x)

        model = Net()
        example_inputs = (torch.randn(1, 2),)
        """,
    )
    result = invoke("render", "chatty.py", "-o", "-")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("digraph {") and "hello" not in result.stdout
    assert "hello from import" in result.stderr and "hello from forward" in result.stderr


def test_json_output_is_the_walked_graph_as_the_api_gives_it(workdir):
    sample = REPO / "samples" / "affine.py"
    to_stdout = invoke("render", sample, "--format", "json", "-o", "-", "-q")
    to_file = invoke("render", sample, "-o", "graph.json", "-q")
    assert to_stdout.exit_code == 0 and to_file.exit_code == 0, to_stdout.output + to_file.output

    loaded = load_model_file(sample)
    with record(loaded.model) as recorder:
        outputs = loaded.run()
    from_api = walk(outputs, loaded.tensor_names(), recorder=recorder).to_json()
    assert to_stdout.stdout == from_api == (workdir / "graph.json").read_text()

    data = json.loads(to_stdout.stdout)
    assert set(data) == {"nodes", "edges", "params_given", "modules"}
    kinds = {node["label"]: node["kind"] for node in data["nodes"] if node["kind"] == "parameter"}
    assert kinds == {"w": "parameter", "b": "parameter", "x": "parameter"}
    assert {edge["kind"] for edge in data["edges"]} == {"data"}
    assert all(node["shape"] == [1] for node in data["nodes"] if node["kind"] == "parameter")


def test_json_with_show_attrs_holds_saved_values(workdir):
    result = invoke("render", REPO / "samples" / "matmul_sum.py", "--format", "json", "-o", "-", "--show-attrs", "-q")
    assert result.exit_code == 0, result.output
    ops = {node["label"]: node["attrs"] for node in json.loads(result.stdout)["nodes"] if node["kind"] == "op"}
    assert ops["SumBackward0"] == {"self_sym_sizes": "(2, 2)"}


def test_output_is_the_same_bytes_on_every_run(workdir):
    sample = REPO / "samples" / "mnist_cnn.py"
    first = invoke("render", sample, "-o", "-", "--format", "json", "-q").stdout
    second = invoke("render", sample, "-o", "-", "--format", "json", "-q").stdout
    assert first and first == second


# --- names and options -------------------------------------------------------------


def test_inputs_are_named_after_the_forward_arguments(workdir):
    result = invoke("render", REPO / "samples" / "affine.py", "-o", "-", "-q")
    assert 'label="x\\n(1)"' in result.stdout
    assert "(unnamed)" not in result.stdout


def test_no_params_names_nothing(workdir):
    result = invoke("render", REPO / "samples" / "affine.py", "-o", "-", "--format", "json", "--no-params", "-q")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["params_given"] is False
    assert {n["kind"] for n in data["nodes"]} == {"output", "op", "accumulate_grad", "leaf"}
    assert {n["label"] for n in data["nodes"] if n["kind"] == "leaf"} == {""}


@pytest.mark.parametrize(
    "options, present, absent",
    [
        (["--direction", "LR"], ["rankdir=LR"], ["rankdir=TB"]),
        ([], ["rankdir=TB", "(requires_grad=False)"], ["cluster_legend", "fillcolor=orange", "self_sym_sizes"]),
        (["--hide-no-grad"], [], ["(requires_grad=False)"]),
        (["--legend"], ["subgraph cluster_legend"], []),
        (["--show-saved"], ["fillcolor=orange"], []),
        (["--show-attrs"], ["self_sym_sizes"], ["fillcolor=orange"]),
    ],
    ids=["direction", "default", "hide-no-grad", "legend", "show-saved", "show-attrs"],
)
def test_drawing_options(workdir, options, present, absent):
    result = invoke("render", REPO / "samples" / "cubic_fit.py", "-o", "-", "-q", *options)
    assert result.exit_code == 0, result.output
    assert all(text in result.stdout for text in present)
    assert not any(text in result.stdout for text in absent)
    assert_graphviz_parses(result.stdout)


def test_direction_must_be_a_known_one(workdir):
    result = invoke("render", REPO / "samples" / "affine.py", "-o", "-", "--direction", "SIDEWAYS")
    assert result.exit_code == 2
    assert "'SIDEWAYS' is not one of" in result.stderr


def test_train_and_eval_switch_dropout(workdir):
    sample = REPO / "samples" / "mnist_cnn.py"  # left in train mode: both dropouts are in the graph
    as_left = invoke("render", sample, "-o", "-", "-q").stdout
    evaluated = invoke("render", sample, "-o", "-", "-q", "--eval").stdout
    trained = invoke("render", sample, "-o", "-", "-q", "--train").stdout
    assert as_left.count("label=MulBackward0") == 2
    assert trained == as_left
    assert evaluated.count("label=MulBackward0") == 0
    assert "ConvolutionBackward0" in evaluated


def test_input_shape_runs_a_file_without_example_inputs(workdir):
    write_bad_files(workdir)
    result = invoke("render", "noinputs.py", "--input-shape", "5,4", "-o", "-", "-q")
    assert result.exit_code == 0, result.output
    assert 'label="(5, 3)"' in result.stdout


def test_input_shape_replaces_the_files_example_inputs_and_may_repeat(workdir):
    write(
        workdir / "two_inputs.py",
        """
        import torch

        class Pair(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.ones(()))

            def forward(self, left, right):
                return self.w * left @ right

        model = Pair()
        example_inputs = (torch.ones(2, 3), torch.ones(3, 4))
        """,
    )
    result = invoke("render", "two_inputs.py", "--input-shape", "1,3", "--input-shape", "3x7", "-o", "-", "-q")
    assert result.exit_code == 0, result.output
    assert 'label="(1, 7)"' in result.stdout


# --- other model forms -------------------------------------------------------------


FACTORY = """
    import torch

    def build():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.ReLU()), (torch.randn(3, 4),)
"""


def test_file_factory(workdir):
    write(workdir / "factories.py", FACTORY)
    result = invoke("render", "factories.py:build", "--format", "dot")
    assert result.exit_code == 0, result.output
    assert files_in(workdir) == ["factories.dot", "factories.py"]
    source = (workdir / "factories.dot").read_text()
    assert "ReluBackward0" in source and 'label="0.weight\\n(2, 4)"' in source


def test_module_factory(workdir, monkeypatch):
    (workdir / "zoo").mkdir()
    write(workdir / "zoo" / "__init__.py", "")
    write(workdir / "zoo" / "small.py", FACTORY)
    monkeypatch.delitem(sys.modules, "zoo", raising=False)
    monkeypatch.delitem(sys.modules, "zoo.small", raising=False)
    result = invoke("render", "zoo.small:build", "--format", "dot", "-q")
    assert result.exit_code == 0, result.output
    assert "ReluBackward0" in (workdir / "small.dot").read_text()


@pytest.fixture(scope="module")
def small_program():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh())
    return torch.export.export(net, (torch.randn(4, 3),))


@needs_dot
def test_export_archive(workdir, small_program):
    torch.export.save(small_program, workdir / "small.pt2")
    dot = invoke("render", "small.pt2", "-o", "-", "-q")
    assert dot.exit_code == 0, dot.output
    assert "TanhBackward0" in dot.stdout and 'label="0.weight\\n(2, 3)"' in dot.stdout
    assert 'label="(4, 2)"' in dot.stdout  # ran on the stored example input
    pdf = invoke("render", "small.pt2", "-q")
    assert pdf.exit_code == 0, pdf.output
    assert_pdf((workdir / "small.pdf").read_bytes())


def test_export_archive_with_input_shape_it_was_not_exported_for(workdir, small_program):
    torch.export.save(small_program, workdir / "small.pt2")
    before = files_in(workdir)
    result = invoke("render", "small.pt2", "--input-shape", "1,3", "-o", "out.dot")
    assert result.exit_code == 1
    assert "forward pass of" in result.stderr and "shaped like those it was exported with" in result.stderr
    assert files_in(workdir) == before


def test_frozen_export_archive_draws_with_a_note_even_when_quiet(workdir):
    net = torch.nn.Linear(3, 2).requires_grad_(False)
    torch.export.save(torch.export.export(net, (torch.randn(1, 3),)), workdir / "frozen.pt2")
    result = invoke("render", "frozen.pt2", "-o", "-", "-q")
    assert result.exit_code == 0, result.output
    assert "AddmmBackward0" in result.stdout
    assert result.stderr.startswith("note: every parameter in frozen.pt2 is frozen")


# --- bad input: one line, exit status, nothing written -----------------------------


BAD_INPUTS = [
    # (id, arguments, exit status, fragments of the message)
    ("missing-file", ["missing.py"], 1, ["'missing.py' does not exist", "check the path"]),
    ("import-raises", ["raises.py"], 1, ["raises.py:4: importing the model file raised ValueError: bad config"]),
    ("no-model", ["nomodel.py"], 1, ["defines no model and example_inputs", "It defines: helper, net, torch"]),
    ("no-inputs", ["noinputs.py"], 1, ["defines no example_inputs", "It defines: model, torch"]),
    ("forward-fails", ["shape.py"], 1, ["shape.py: the forward pass of Sequential on input of shape (2, 4) failed",
                                        "mat1 and mat2 shapes cannot be multiplied (2x3 and 5x2)"]),
    ("frozen", ["frozen.py"], 1, ["frozen.py: Nothing to draw", "every parameter frozen"]),
    ("built-under-no-grad", ["nograd.py"], 1, ["nograd.py: Nothing to draw", "torch.no_grad()"]),
    ("unknown-format", ["good.py", "--format", "bmp"], 2, ["'bmp' is not one of 'dot', 'svg', 'pdf', 'png', 'html', 'json'"]),
    ("unknown-suffix", ["good.py", "-o", "out.xyz"], 2, ["'out.xyz'", "(.xyz)", ".pdf", "--format"]),
    ("output-folder-missing", ["good.py", "-o", "nowhere/out.pdf"], 1, ["the directory 'nowhere' does not exist"]),
    ("binary-to-stdout", ["good.py", "-o", "-", "--format", "pdf"], 2, ["PDF is binary"]),
    ("format-contradicts-suffix", ["good.py", "-o", "x.svg", "--format", "pdf"], 2,
     ["--format pdf contradicts the suffix of -o 'x.svg'", ".svg is svg"]),
    ("bad-input-shape", ["good.py", "--input-shape", "2,a"], 2, ["'2,a' is not a shape", "1,3,224,224"]),
    ("pickled-module", ["pickled.pt"], 1, ["pickled torch.save() file", "weights_only=True", "model.py",
                                           "file.py:factory", "package.module:factory", ".pt2"]),
    ("missing-factory", ["good.py:build"], 1, ["good.py:build: defines no 'build'"]),
    ("missing-module", ["no_such_zoo:build"], 1, ["no module named 'no_such_zoo'"]),
]


@pytest.mark.parametrize("args, status, fragments", [case[1:] for case in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_gets_one_line_and_writes_nothing(workdir, args, status, fragments):
    write_bad_files(workdir)
    before = files_in(workdir)
    if "-o" not in args:
        args = [*args, "-o", "out.pdf"]
    result = invoke("render", *args)

    assert result.exit_code == status, result.output
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(error_lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in error_lines[0]
    assert "Traceback" not in result.output
    assert result.stdout == ""
    # No output, no temporary file; a forward pass that raised after some of it ran draws
    # what ran beside the file asked for, and says so.
    drawn = ["out.failed.pdf"] if "is drawn in out.failed.pdf" in error_lines[0] else []
    assert drawn == (["out.failed.pdf"] if "forward pass" in fragments[0] and "failed" in fragments[0] else [])
    assert files_in(workdir) == sorted(before + drawn)
    if status == 1:
        assert isinstance(result.exception, SystemExit)


def test_a_failed_render_leaves_an_existing_output_untouched(workdir):
    write_bad_files(workdir)
    (workdir / "out.pdf").write_bytes(b"the previous drawing")
    result = invoke("render", "shape.py", "-o", "out.pdf")
    assert result.exit_code == 1
    assert (workdir / "out.pdf").read_bytes() == b"the previous drawing"


def test_unreadable_model_file(workdir):
    model = workdir / "locked.py"
    if os.geteuid() != 0:
        write(model, BAD_FILES["good.py"])
        model.chmod(0)
    else:  # root reads any file; this one fails to read for everyone
        model.symlink_to("/proc/self/mem")
    try:
        model.open("rb").read(1)
        pytest.skip("cannot make an unreadable file here")
    except OSError:
        pass
    before = files_in(workdir)
    result = invoke("render", "locked.py", "-o", "out.pdf")
    assert result.exit_code == 1
    assert "Error: Model file 'locked.py' cannot be read:" in result.stderr
    assert files_in(workdir) == before


def test_output_folder_not_writable(workdir, monkeypatch):
    write_bad_files(workdir)
    locked = workdir / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    if os.access(locked, os.W_OK):  # running as root: see what another user would see
        real_access = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p).resolve() == locked else real_access(p, mode, **kw))
    before = files_in(workdir)
    result = invoke("render", "good.py", "-o", "locked/out.dot")
    assert result.exit_code == 1
    assert "Error: Cannot write 'locked/out.dot': the directory 'locked' is not writable." in result.stderr
    assert files_in(workdir) == before


def test_output_folder_that_refuses_the_file_despite_permissions(workdir, monkeypatch):
    write_bad_files(workdir)

    real_open = os.open

    def read_only_file_system(path, *args, **kwargs):
        if str(path).endswith(".tmp"):  # the temporary file beside the output
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only_file_system)
    before = files_in(workdir)
    result = invoke("render", "good.py", "-o", "out.dot")
    assert result.exit_code == 1
    assert f"Error: Cannot write 'out.dot': {os.strerror(errno.EROFS)}." in result.stderr
    assert files_in(workdir) == before


@pytest.mark.parametrize("suffix", ["svg", "pdf", "png"])
def test_missing_dot_names_the_install_and_dot_still_works(workdir, monkeypatch, suffix):
    render_module = importlib.import_module("graphviz_autograd.drawing.rendering")  # the package exports a function of that name
    write_bad_files(workdir)
    monkeypatch.setattr(render_module.shutil, "which", lambda name, *a, **k: None)
    before = files_in(workdir)
    result = invoke("render", "good.py", "-o", f"out.{suffix}")
    assert result.exit_code == 1
    message = result.stderr
    assert "Graphviz 'dot' executable was not found" in message and "apt-get install graphviz" in message
    assert "graphviz-autograd render good.py -o good.dot" in message
    assert "loading" not in message  # failed before running any model code
    assert files_in(workdir) == before

    dot = invoke("render", "good.py", "-o", "out.dot", "-q")
    assert dot.exit_code == 0, dot.output
    assert (workdir / "out.dot").read_text().startswith("digraph {")


def test_an_html_page_with_the_fixed_layout_needs_no_graphviz(workdir, monkeypatch):
    render_module = importlib.import_module("graphviz_autograd.drawing.rendering")
    write_bad_files(workdir)
    monkeypatch.setattr(render_module.shutil, "which", lambda name, *a, **k: None)
    refused = invoke("render", "good.py", "-o", "page.html")
    assert refused.exit_code == 1 and not (workdir / "page.html").exists()
    assert "graphviz-autograd render good.py -o good.html --layout fixed" in refused.stderr
    result = invoke("render", "good.py", "-o", "page.html", "--layout", "fixed", "-q")
    assert result.exit_code == 0, result.output
    assert "fixed layered layout" in (workdir / "page.html").read_text(encoding="utf-8")


def test_debug_shows_the_traceback(workdir):
    write_bad_files(workdir)
    result = invoke("render", "raises.py", "--debug")
    assert result.exit_code == 1
    assert type(result.exception).__name__ == "ModelFileError"
    assert isinstance(result.exception.__cause__, ValueError)


@pytest.mark.parametrize("command", ["render", "check"])
def test_an_internal_error_is_one_line_that_says_it_is_a_bug_unless_debug(workdir, monkeypatch, command):
    import graphviz_autograd.cli.commands as cli

    def broken(*args, **kwargs):
        raise ValueError("max() arg is an empty sequence")

    monkeypatch.setattr(cli, "_draw" if command == "render" else "_findings_of", broken)
    sample = REPO / "samples" / "affine.py"
    result = invoke(command, sample, "-q", *(["-o", "out.dot"] if command == "render" else []))
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    (line,) = result.stderr.splitlines()
    assert line == (
        "Error: internal error: ValueError: max() arg is an empty sequence. This is a bug in graphviz-autograd: "
        "run the command again with --debug for the traceback, and report it."
    )
    assert files_in(workdir) == []  # nothing half written
    debug = invoke(command, sample, "-q", "--debug", *(["-o", "out.dot"] if command == "render" else []))
    assert debug.exit_code == 1 and isinstance(debug.exception, ValueError)


# --- progress, help, version -------------------------------------------------------


@needs_dot
def test_progress_on_stderr_and_quiet_silences_it(workdir):
    sample = REPO / "samples" / "mnist_cnn.py"
    loud = invoke("render", sample, "-o", "graph.svg")
    assert loud.exit_code == 0, loud.output
    lines = loud.stderr.splitlines()
    assert lines[0] == f"loading {sample}..."
    assert "walking the autograd graph..." in lines
    assert any(re.fullmatch(r"walked 35 nodes, 34 edges in \d+\.\d s", line) for line in lines), lines
    assert "laying out with dot (35 nodes)..." in lines
    assert re.fullmatch(r"wrote graph\.svg \(\d+\.\d kB\)", lines[-1])
    assert loud.stdout == ""

    quiet = invoke("render", sample, "-o", "graph.svg", "--quiet")
    assert quiet.exit_code == 0
    assert quiet.stderr == "" and quiet.stdout == ""


def test_version():
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout == f"graphviz-autograd {__version__}\n"


@pytest.mark.parametrize("command", [[], *[[name] for name in sorted(main.commands)]], ids=lambda c: " ".join(c) or "main")
def test_help_of_every_command_has_an_example(command):
    result = invoke(*command, "--help")
    assert result.exit_code == 0
    examples = {"check": "check samples/mnist_cnn.py", "profile": "profile samples/mnist_cnn.py",
                "diff": "diff samples/lenet.py samples/mnist_cnn.py"}
    example = examples.get(command[0] if command else "", "render samples/mnist_cnn.py -o mnist.pdf")
    assert f"\n    graphviz-autograd {example}\n" in result.stdout


def test_render_help_documents_the_model_forms_and_convention():
    text = invoke("render", "--help").stdout
    for form in ("path/to/model.py", "path/to/file.py:factory", "package.module:factory", "model.pt2"):
        assert form in text
    for name in ("model ", "example_inputs ", "loss(output) "):
        assert f"\n    {name}" in text  # the \b paragraph keeps its table layout


def test_missing_model_argument_is_a_usage_error():
    result = invoke("render")
    assert result.exit_code == 2
    assert "Missing argument 'MODEL'" in result.stderr


# --- real processes ----------------------------------------------------------------


@needs_dot
def test_python_dash_m_renders_svg(tmp_path):
    done = run_module("render", str(REPO / "samples" / "concat.py"), "-o", "concat.svg", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert svg_node_count(parse_svg((tmp_path / "concat.svg").read_bytes())) > 0
    assert done.stdout == ""
    assert "walked" in done.stderr


def test_python_dash_m_error_is_one_line_without_traceback_unless_debug(tmp_path):
    done = run_module("render", "missing.py", cwd=tmp_path)
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if not line.endswith("...")]  # progress lines end so
    assert len(errors) == 1 and errors[0].startswith("Error: Model file 'missing.py' does not exist")
    assert files_in(tmp_path) == []

    debug = run_module("render", "missing.py", "--debug", cwd=tmp_path)
    assert debug.returncode == 1
    assert "Traceback (most recent call last)" in debug.stderr and "ModelFileError" in debug.stderr


def test_subprocess_without_dot_on_path(tmp_path):
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    write(tmp_path / "good.py", BAD_FILES["good.py"])
    env = subprocess_env(PATH=str(empty_bin))
    done = run_module("render", "good.py", "-o", "good.pdf", cwd=tmp_path, env=env)
    assert done.returncode == 1
    assert "Graphviz 'dot' executable was not found" in done.stderr and "Install Graphviz" in done.stderr
    assert "DOT output works without it" in done.stderr
    assert files_in(tmp_path) == ["bin", "good.py"]


# The console script pip installed beside this interpreter (a virtual environment's
# bin/ need not be on PATH), else the one on PATH.
_beside_python = Path(sys.executable).with_name("graphviz-autograd")
CONSOLE_SCRIPT = str(_beside_python) if _beside_python.is_file() else shutil.which("graphviz-autograd")


@needs_dot
@pytest.mark.skipif(CONSOLE_SCRIPT is None, reason="the console script is not installed")
def test_installed_console_script(tmp_path):
    done = subprocess.run(
        [CONSOLE_SCRIPT, "render", str(REPO / "samples" / "mnist_cnn.py"), "-o", "mnist.pdf"],
        cwd=tmp_path,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert_pdf((tmp_path / "mnist.pdf").read_bytes())
    assert "wrote mnist.pdf" in done.stderr


@pytest.mark.parametrize("arguments", [["--help"], ["--version"], ["render", "--help"], ["check", "--help"]])
def test_help_and_version_import_neither_torch_nor_graphviz(arguments):
    """Typing --help should not wait a second for torch to load."""
    program = (
        "import sys\n"
        "from graphviz_autograd.cli.commands import main\n"
        "try:\n"
        f"    main({arguments!r}, prog_name='graphviz-autograd')\n"
        "except SystemExit as done:\n"
        "    assert done.code in (0, None), done.code\n"
        "heavy = sorted(name for name in ('torch', 'graphviz') if name in sys.modules)\n"
        "print('imported:', heavy, file=sys.stderr)\n"
        "sys.exit(1 if heavy else 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=Path(__file__).parent.parent)
    assert done.returncode == 0, done.stderr
    assert "graphviz-autograd" in done.stdout


@pytest.mark.parametrize(
    "words, expected",
    [
        ("graphviz-autograd render model.py --for", {"plain,--format"}),
        ("graphviz-autograd render model.py --format ", {f"plain,{f}" for f in ("dot", "svg", "pdf", "png", "html", "json")}),
        ("graphviz-autograd ch", {"plain,check"}),
    ],
)
def test_shell_completion_as_docs_cli_md_sets_it_up(words, expected):
    result = CliRunner().invoke(
        main,
        [],
        prog_name="graphviz-autograd",
        env={
            "_GRAPHVIZ_AUTOGRAD_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(words.split(" ")) - 1),
        },
    )
    assert result.exit_code == 0, result.output
    assert set(result.stdout.split()) == expected
    assert "_GRAPHVIZ_AUTOGRAD_COMPLETE=bash_source graphviz-autograd" in (REPO / "docs" / "cli.md").read_text()
