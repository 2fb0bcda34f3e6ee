"""The autograd_golden fixture and --update-golden, run as a user runs them (pytester)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
import torch

from graphviz_autograd import make_dot, walk
from graphviz_autograd.testing.pytest_plugin import MAX_DIFF_LINES, graph_summary
from graphviz_autograd.testing.structure import HEADER, structure_text

needs_graphviz = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")

# The graph under test changes with GOLDEN_VARIANT, so that a test file never has
# to be rewritten between runs.
TEST_FILE = '''
import os
import torch

def graph():
    w = torch.ones(3, requires_grad=True)
    params = {"w": w}
    y = w * 2
    if os.environ.get("GOLDEN_VARIANT") == "bias":
        b = torch.ones(3, requires_grad=True)
        params["b"] = b
        y = y + b
    return y.sum(), params

def test_scale(autograd_golden):
    loss, params = graph()
    autograd_golden.check(loss, "scale", params=params)
'''


def scale_graph(variant: str = "") -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    w = torch.ones(3, requires_grad=True)
    params = {"w": w}
    y = w * 2
    if variant == "bias":
        b = torch.ones(3, requires_grad=True)
        params["b"] = b
        y = y + b
    return y.sum(), params


def expected_dot(variant: str = "") -> str:
    return make_dot(*scale_graph(variant)).source


def expected_text(variant: str = "") -> str:
    return structure_text(walk(*scale_graph(variant)))


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("GOLDEN_VARIANT", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("PY_COLORS", raising=False)
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_graph=TEST_FILE)
    return pytester


# Hypothesis's plugin re-imports hypothesis in every in-process run (pytester
# restores sys.modules afterwards): a second a run. These runs need none of it.
QUIET = ("-p", "no:hypothesispytest", "-p", "no:benchmark")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*QUIET, *args)


# Where the test file's golden files go: a folder per test module.
FOLDER = "tests/golden/test_graph"
DRAWING_INI = "[pytest]\nautograd_golden_kind = drawing\n"


def golden(project: pytest.Pytester, name: str = "scale", folder: str = FOLDER, suffix: str = ".graph.txt") -> Path:
    return project.path / folder / f"{name}{suffix}"


# --- missing, update, pass --------------------------------------------------------


def test_missing_golden_file_fails_with_its_path_and_the_command_that_creates_it(project):
    result = run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*Golden file tests/golden/test_graph/scale.graph.txt does not exist. Create it by running in *:",
            "*    pytest --update-golden test_graph.py::test_scale",
            "*then review it and commit it.",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*1 golden file(s) missing or different*", "*  missing tests/golden/test_graph/scale.graph.txt"])
    assert not (project.path / "tests").exists()


def test_update_golden_writes_the_file_and_reports_it(project):
    result = run(project, "--update-golden")
    result.assert_outcomes(passed=1)
    assert golden(project).read_text(encoding="utf-8") == expected_text()
    assert expected_text().startswith(HEADER + "\n- output")
    result.stdout.fnmatch_lines(
        [
            "*graphviz-autograd golden files*",
            "--update-golden wrote 1 golden file(s), 0 unchanged; review them with git diff:",
            "  created tests/golden/test_graph/scale.graph.txt",
        ]
    )


def test_update_golden_reports_unchanged_and_updated_files(project, monkeypatch):
    run(project, "--update-golden").assert_outcomes(passed=1)

    again = run(project, "--update-golden")
    again.stdout.fnmatch_lines(["--update-golden: all 1 golden file(s) were up to date."])
    section = again.stdout.str().split("graphviz-autograd golden files")[1]
    assert "created" not in section and "updated" not in section

    monkeypatch.setenv("GOLDEN_VARIANT", "bias")
    changed = run(project, "--update-golden")
    changed.assert_outcomes(passed=1)
    changed.stdout.fnmatch_lines(
        ["--update-golden wrote 1 golden file(s), 0 unchanged*", "  updated tests/golden/test_graph/scale.graph.txt"]
    )
    assert golden(project).read_text(encoding="utf-8") == expected_text("bias")


def test_matching_graph_passes_and_clears_a_stale_obtained_file(project):
    golden(project).parent.mkdir(parents=True)
    golden(project).write_text(expected_text(), encoding="utf-8")
    stale = golden(project).with_name("scale.obtained.graph.txt")
    stale.write_text("from an earlier failure", encoding="utf-8")
    result = run(project)
    result.assert_outcomes(passed=1)
    assert not stale.exists()
    assert "golden" not in result.stdout.str().split("passed")[-1]  # no summary section for a clean run


def test_golden_file_with_windows_line_endings_still_matches(project):
    golden(project).parent.mkdir(parents=True)
    golden(project).write_bytes(expected_text().replace("\n", "\r\n").encode("utf-8"))
    run(project).assert_outcomes(passed=1)


# --- mismatch ----------------------------------------------------------------------


def test_mismatch_fails_with_a_summary_a_diff_and_the_obtained_file(project, monkeypatch):
    golden(project).parent.mkdir(parents=True)
    golden(project).write_text(expected_text(), encoding="utf-8")
    monkeypatch.setenv("GOLDEN_VARIANT", "bias")
    result = run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*The autograd graph 'scale' differs from tests/golden/test_graph/scale.graph.txt.",
            "*Ops: +1 AccumulateGrad, +1 AddBackward0.",
            "*Parameters: +b (3).",
            "*Edges: 4 -> 7.",
            "*The new text is in tests/golden/test_graph/scale.obtained.graph.txt. If the change is intended, run in *:",
            "*    pytest --update-golden test_graph.py::test_scale",
            "*--- tests/golden/test_graph/scale.graph.txt",
            "*+++ tests/golden/test_graph/scale.obtained.graph.txt",
            "*@@ *",
        ]
    )
    assert re.search(r"^E?\s*\+\s*op AddBackward0$", result.stdout.str(), re.MULTILINE)
    assert "Traceback" not in result.stdout.str()
    assert golden(project).read_text(encoding="utf-8") == expected_text()
    assert golden(project).with_name("scale.obtained.graph.txt").read_text(encoding="utf-8") == expected_text("bias")
    result.stdout.fnmatch_lines(
        ["*1 golden file(s) missing or different*", "*  differs tests/golden/test_graph/scale.graph.txt"]
    )


def test_drawing_golden_mismatch_shows_the_dot(project, monkeypatch):
    project.makeini(DRAWING_INI)
    dot_golden = golden(project, suffix=".dot")
    dot_golden.parent.mkdir(parents=True)
    dot_golden.write_text(expected_dot(), encoding="utf-8")
    run(project).assert_outcomes(passed=1)
    monkeypatch.setenv("GOLDEN_VARIANT", "bias")
    result = run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*The autograd graph 'scale' differs from tests/golden/test_graph/scale.dot.",
            "*Ops: +1 AccumulateGrad, +1 AddBackward0.",
            "*Parameters: +b (3).",
            "*Edges: 4 -> 7.",
            "*The new text is in tests/golden/test_graph/scale.obtained.dot. If the change is intended, run in *:",
        ]
    )
    assert re.search(
        r'^E?\s*\+\s*n\d+ \[fillcolor=lightgrey label=AddBackward0 tooltip="Gradient of add[^"]*"\]$',
        result.stdout.str(),
        re.MULTILINE,
    )
    assert dot_golden.with_name("scale.obtained.dot").read_text(encoding="utf-8") == expected_dot("bias")


def test_a_long_diff_is_cut_with_a_note(pytester, monkeypatch):
    pytester.makeini(DRAWING_INI)  # in a drawing, one op more renumbers every node after it
    pytester.makepyfile(
        test_chain='''
        import os, torch

        def test_chain(autograd_golden):
            w = torch.ones(2, requires_grad=True)
            y = w
            for _ in range(150):  # two kinds of op in turn, so that a shift of ids changes every line
                y = (y * 1.0).sin()
            if os.environ.get("EXTRA"):
                y = y.exp()  # walked second: every later node id shifts by one
            autograd_golden.check(y.sum(), "chain", params={"w": w})
        '''
    )
    run(pytester, "--update-golden").assert_outcomes(passed=1)
    monkeypatch.setenv("EXTRA", "1")
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Ops: +1 ExpBackward0.", "*... * more diff lines; compare the two files for the rest"])
    # Count the failure report only: with CI set, pytest repeats whole messages in
    # its short summary.
    lines = result.stdout.lines
    report = lines[: next((i for i, line in enumerate(lines) if "short test summary info" in line), len(lines))]
    diff_lines = [line for line in report if re.match(r"^E?\s*[-+ @]", line)]
    assert len(diff_lines) < MAX_DIFF_LINES + 60


def test_diff_is_plain_text_under_no_color(project, monkeypatch):
    golden(project).parent.mkdir(parents=True)
    golden(project).write_text(expected_text(), encoding="utf-8")
    monkeypatch.setenv("GOLDEN_VARIANT", "bias")
    monkeypatch.setenv("FORCE_COLOR", "1")
    coloured = run(project)
    assert "\x1b[" in coloured.stdout.str()  # the environment would colour otherwise
    monkeypatch.setenv("NO_COLOR", "1")
    plain = run(project)
    plain.assert_outcomes(failed=1)
    assert "\x1b[" not in plain.stdout.str()
    plain.stdout.fnmatch_lines(["*Parameters: +b (3).*"])


# --- where golden files live -------------------------------------------------------


def test_ini_option_sets_the_folder(project):
    project.makeini("[pytest]\nautograd_golden_dir = graphs/expected\n")
    result = run(project, "--update-golden")
    result.stdout.fnmatch_lines(["  created graphs/expected/test_graph/scale.graph.txt"])
    assert golden(project, folder="graphs/expected/test_graph").read_text(encoding="utf-8") == expected_text()
    assert not golden(project).exists()
    run(project).assert_outcomes(passed=1)


def test_directory_per_call_relative_to_the_rootdir_or_absolute(pytester, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("absolute-golden")
    pytester.makeini("[pytest]\n")
    sub = pytester.mkpydir("sub")
    (sub / "test_dirs.py").write_text(
        f'''
import torch

def test_relative(autograd_golden):
    w = torch.ones(3, requires_grad=True)
    autograd_golden.check((w * 2).sum(), "rel", params={{"w": w}}, directory="per_call")

def test_absolute(autograd_golden):
    w = torch.ones(3, requires_grad=True)
    autograd_golden.check((w * 3).sum(), "abs", params={{"w": w}}, directory={str(elsewhere)!r})
'''
    )
    result = run(pytester, "--update-golden", "sub")
    result.assert_outcomes(passed=2)
    assert (pytester.path / "per_call" / "rel.graph.txt").is_file()  # the rootdir's, not sub's
    assert (elsewhere / "abs.graph.txt").is_file()
    result.stdout.fnmatch_lines(["  created per_call/rel.graph.txt"])
    result.stdout.fnmatch_lines([f"  created {elsewhere / 'abs.graph.txt'}"])
    run(pytester, "sub").assert_outcomes(passed=2)


def test_params_and_model_together_is_an_error(pytester):
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        test_both='''
        import torch
        from graphviz_autograd import InputTypeError

        def test_both(autograd_golden):
            lin = torch.nn.Linear(2, 1)
            try:
                autograd_golden.check(lin(torch.ones(1, 2)).sum(), "both", params=lin, model=lin)
            except InputTypeError as error:
                assert "params= or model=, not both" in str(error)
            else:
                raise AssertionError("no error")
        '''
    )
    run(pytester).assert_outcomes(passed=1)


@needs_graphviz
def test_dot_that_graphviz_rejects_fails_the_check(pytester):
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        test_bad='''
        def test_bad(autograd_golden):
            autograd_golden.check_dot("digraph { n0 -> }", "bad")
        '''
    )
    result = run(pytester, "--update-golden")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Graphviz rejects the DOT of 'bad': *syntax error*"])
    assert not (pytester.path / "tests").exists()


# --- under pytest-xdist ------------------------------------------------------------


def test_update_golden_under_xdist_reports_every_worker_s_files(pytester, monkeypatch):
    pytest.importorskip("xdist")
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        test_many='''
        import pytest, torch

        @pytest.mark.parametrize("k", range(4))
        def test_graph(autograd_golden, k):
            w = torch.ones(k + 1, requires_grad=True)
            autograd_golden.check((w * 2).sum(), f"graph{k}", params={"w": w})
        '''
    )
    root = str(Path(__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    result = pytester.runpytest_subprocess(*QUIET, "-n", "2", "--update-golden")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        ["--update-golden wrote 4 golden file(s), 0 unchanged*"]
        + [f"  created tests/golden/test_many/graph{k}.graph.txt" for k in range(4)]
    )
    run(pytester).assert_outcomes(passed=4)


# --- the summary -------------------------------------------------------------------


def test_summary_splits_ops_by_kind_and_parameters():
    lin = torch.nn.Linear(2, 2)
    before = make_dot(lin(torch.ones(1, 2)).sum(), lin).source
    relu = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU())
    after = make_dot(relu(torch.ones(1, 2)).sum(), relu).source
    assert graph_summary(before, after) == (
        "Ops: +1 ReluBackward0.\n"
        "Parameters: +0.bias (3); +0.weight (3, 2); -bias (2); -weight (2, 2).\n"
        "Edges: 8 -> 9."
    )


def test_summary_counts_repeated_ops_and_other_nodes():
    w = torch.ones(2, requires_grad=True)
    before = make_dot((w * 2).sum(), {"w": w}).source
    after = make_dot({"a": (w * 2 * 3).sum(), "b": w.exp()}, {"w": w}).source
    assert graph_summary(before, after) == (
        "Ops: +1 ExpBackward0, +1 MulBackward0.\n"
        "Other nodes: +1 output a (), +1 output b (2), -1 output ().\n"
        "Edges: 4 -> 7."
    )


def test_summary_reads_kinds_through_a_theme():
    w = torch.ones(2, requires_grad=True)
    theme = {"parameter": "gold", "op": {"fillcolor": "white", "shape": "ellipse"}}
    before = make_dot((w * 2).sum(), {"w": w}, theme=theme).source
    v = torch.ones(2, requires_grad=True)
    after = make_dot((w * 2 + v).sum(), {"w": w, "v": v}, theme=theme).source
    assert graph_summary(before, after, theme) == (
        "Ops: +1 AccumulateGrad, +1 AddBackward0.\nParameters: +v (2).\nEdges: 4 -> 7."
    )


def test_summary_when_only_edges_or_attributes_differ():
    w = torch.ones(2, requires_grad=True)
    source = make_dot((w * 2).sum(), {"w": w}).source
    assert graph_summary(source, source.replace("rankdir=TB", "rankdir=LR")) == (
        "Same nodes and edge count; edges, node order or attributes differ."
    )


def test_summary_of_unknown_styles_and_hand_written_dot_does_not_fail():
    before = 'digraph {\n\tn0 [label="a \\"quoted\\" name\\n(1)" color=red]\n}\n'
    after = "digraph {\n}\n"
    assert graph_summary(before, after) == 'Other nodes: -1 node a "quoted" name (1).'


def test_loading_the_plugin_imports_no_torch(pytester):
    # pytest loads the plugin in every session of an environment that has the
    # package installed; a session that draws no graph should not import torch.
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_plain="import sys\n\n\ndef test_no_torch():\n    assert 'torch' not in sys.modules\n")
    # --update-golden is the plugin's own option: the run fails on it unless the plugin is loaded.
    result = pytester.runpytest_subprocess(*QUIET, "-p", "no:cacheprovider", "--update-golden")
    result.assert_outcomes(passed=1)
