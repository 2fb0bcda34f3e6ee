"""Golden files of structure: what survives a new release, what a changed op shows,
and the housekeeping of --update-golden (unused files, one folder per test module)."""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import pytest
import torch
from torch import nn

from graphviz_autograd import walk
from graphviz_autograd.graph.autograd_graph import AutogradGraph, Edge, ModuleInfo, Node
from graphviz_autograd.testing.pytest_plugin import structure_summary
from graphviz_autograd.testing.structure import HEADER, node_lines, structure_text

from .test_plugin import QUIET, run

# A model whose drawing and structure a test can change from outside, by
# environment variables: MLP_ACT swaps one activation, THEME passes a theme.
MLP_TEST = '''
import os
import torch
from torch import nn

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}


def mlp():
    torch.manual_seed(0)
    first = ACTIVATIONS[os.environ.get("MLP_ACT", "relu")]
    return nn.Sequential(nn.Linear(4, 8), first(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))


def test_mlp(autograd_golden):
    model = mlp()
    theme = {"op": "white", "parameter": {"fillcolor": "gold", "shape": "ellipse"}} if os.environ.get("THEME") else None
    autograd_golden.check(model(torch.ones(2, 4)).sum(), "mlp", model=model, theme=theme, legend=bool(theme))
'''

# Stands for a release that draws every graph differently: each colour and each
# tooltip reworded, the graph itself the same.
RESTYLE_CONFTEST = '''
import os
import re

import pytest


@pytest.fixture(autouse=True)
def restyled(monkeypatch):
    if not os.environ.get("RESTYLE"):
        return
    import graphviz_autograd.api as api

    make_dot = api.make_dot

    def restyled_make_dot(*args, **kwargs):
        dot = make_dot(*args, **kwargs)
        dot.body = [
            re.sub(r'tooltip="(?:[^"\\\\]|\\\\.)*"', 'tooltip="said otherwise"', re.sub(r"fillcolor=\\S+?(?=[ \\]])", "fillcolor=pink", line))
            for line in dot.body
        ]
        return dot

    monkeypatch.setattr(api, "make_dot", restyled_make_dot)
'''


@pytest.fixture
def mlp_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for name in ("MLP_ACT", "THEME", "RESTYLE", "DROP", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_mlp=MLP_TEST)
    pytester.makeconftest(RESTYLE_CONFTEST)
    return pytester


MLP_GOLDEN = "tests/golden/test_mlp/mlp.graph.txt"


def test_a_new_theme_and_reworded_tooltips_keep_structure_goldens_valid(mlp_project, monkeypatch):
    run(mlp_project, "--update-golden").assert_outcomes(passed=1)
    monkeypatch.setenv("THEME", "1")
    monkeypatch.setenv("RESTYLE", "1")
    run(mlp_project).assert_outcomes(passed=1)
    # The same change breaks a golden file of the drawing: the test above tests something.
    mlp_project.makeini("[pytest]\nautograd_golden_kind = drawing\n")
    monkeypatch.delenv("THEME")
    monkeypatch.delenv("RESTYLE")
    run(mlp_project, "--update-golden").assert_outcomes(passed=1)
    monkeypatch.setenv("RESTYLE", "1")
    restyled = run(mlp_project)
    restyled.assert_outcomes(failed=1)
    restyled.stdout.fnmatch_lines(["*+*fillcolor=pink*said otherwise*"])


def test_one_op_changed_is_one_line_of_the_diff(mlp_project, monkeypatch):
    run(mlp_project, "--update-golden").assert_outcomes(passed=1)
    monkeypatch.setenv("MLP_ACT", "tanh")
    result = run(mlp_project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Ops: +1 TanhBackward0, -1 ReluBackward0.", "*tests/golden/test_mlp/mlp.graph.txt*"])
    golden = mlp_project.path / MLP_GOLDEN
    obtained = golden.with_name("mlp.obtained.graph.txt")
    changed = [
        line
        for line in difflib.unified_diff(golden.read_text().splitlines(), obtained.read_text().splitlines(), n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert len(changed) == 2 and "ReluBackward0" in changed[0] and "TanhBackward0" in changed[1]
    assert changed[0].replace("ReluBackward0", "TanhBackward0")[1:] == changed[1][1:]


def test_structure_of_a_recorded_model_holds_modules_cuts_and_reasons():
    from graphviz_autograd import record

    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1))
    model[2].requires_grad_(False)
    with record(model) as recorder:
        out = model(torch.ones(2, 3, dtype=torch.float64).float().detach())
    text = structure_text(walk(out.sum(), model, recorder=recorder))
    lines = text.splitlines()
    assert lines[0] == HEADER
    assert any(line.strip().startswith("op AddmmBackward0") and "module=0" in line for line in lines)
    frozen = [line for line in lines if "no_grad" in line and "reason=frozen" in line]
    assert frozen and all("module=2" in line for line in frozen)
    assert "parameter 0.weight dtype=float32 module=0 shape=(3,3)" in text
    assert lines[lines.index("modules:") + 1 :] == [
        '  "" Sequential parameters=16',
        "  0 Linear parameters=12",
        "  1 ReLU parameters=0",
        "  2 Linear parameters=4",
    ]


def test_structure_writes_shared_nodes_once_and_quotes_odd_names():
    odd = 'a "b"\nc\u2028d'
    graph = AutogradGraph(
        nodes=(
            Node("n0", "output", "y", shape=(2,), dtype="float16"),
            Node("n1", "op", "AddBackward0"),
            Node("n2", "op", "ExpBackward0"),
            Node("n3", "accumulate_grad", "AccumulateGrad"),
            Node("n4", "parameter", odd, shape=(2,), dtype="float16"),
        ),
        edges=(Edge("n1", "n0"), Edge("n2", "n1"), Edge("n3", "n1"), Edge("n3", "n2"), Edge("n4", "n3")),
        modules=(ModuleInfo("", "M", 2),),
    )
    text = structure_text(graph)
    assert len(text.splitlines()) == len(text.split("\n")) - 1  # no name breaks a line
    lines = node_lines(text)
    assert [(line.kind, line.label, line.repeat) for line in lines] == [
        ("output", "y", False),
        ("op", "AddBackward0", False),
        ("op", "ExpBackward0", False),
        ("accumulate_grad", "AccumulateGrad", False),
        ("parameter", odd, False),
        ("accumulate_grad", "AccumulateGrad", True),
    ]
    assert "AccumulateGrad &1" in text and "AccumulateGrad *1" in text


def test_structure_summary_counts_nodes_and_edges():
    lin = nn.Linear(2, 2)
    before = structure_text(walk(lin(torch.ones(1, 2)).sum(), lin))
    relu = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    after = structure_text(walk(relu(torch.ones(1, 2)).sum(), relu))
    assert structure_summary(before, after) == (
        "Ops: +1 ReluBackward0.\n"
        "Parameters: +0.bias (3); +0.weight (3, 2); -bias (2); -weight (2, 2).\n"
        "Edges: 8 -> 9."
    )


def test_a_golden_file_of_another_format_version_says_so(mlp_project):
    run(mlp_project, "--update-golden").assert_outcomes(passed=1)
    golden = mlp_project.path / MLP_GOLDEN
    golden.write_text(golden.read_text().replace(HEADER, HEADER[:-1] + "0"))
    result = run(mlp_project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*The golden file is in another version of the format (0); this one writes 1."])


# --- housekeeping ------------------------------------------------------------------

TWO_TESTS = '''
import os
import torch


def graph(scale):
    w = torch.ones(2, requires_grad=True)
    return (w * scale).sum(), {"w": w}


def test_a(autograd_golden):
    out, params = graph(2)
    autograd_golden.check(out, "a", params=params)


if not os.environ.get("DROP"):
    def test_b(autograd_golden):
        out, params = graph(3)
        autograd_golden.check(out, "b", params=params)


def test_plain():
    pass
'''


@pytest.fixture
def two_tests(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("DROP", raising=False)
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_two=TWO_TESTS)
    run(pytester, "--update-golden").assert_outcomes(passed=3)
    return pytester


def golden_files(project: pytest.Pytester) -> list[str]:
    root = project.path / "tests" / "golden"
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_update_golden_lists_unused_files_and_removes_them_on_request(two_tests, monkeypatch):
    old = two_tests.path / "tests" / "golden" / "old.dot"  # a flat file of an earlier layout
    old.write_text("digraph {}\n")
    monkeypatch.setenv("DROP", "1")
    listed = run(two_tests, "--update-golden")
    listed.assert_outcomes(passed=2)
    listed.stdout.fnmatch_lines(
        [
            "2 golden file(s) no test used; delete them with --update-golden --remove-unused-golden:",
            "  unused tests/golden/old.dot",
            "  unused tests/golden/test_two/b.graph.txt",
        ]
    )
    assert golden_files(two_tests) == ["old.dot", "test_two/a.graph.txt", "test_two/b.graph.txt"]
    removed = run(two_tests, "--update-golden", "--remove-unused-golden")
    removed.stdout.fnmatch_lines(
        [
            "--remove-unused-golden removed 2 golden file(s) no test used:",
            "  removed tests/golden/old.dot",
            "  removed tests/golden/test_two/b.graph.txt",
        ]
    )
    assert golden_files(two_tests) == ["test_two/a.graph.txt"]


@pytest.mark.parametrize(
    "selection",
    [("test_two.py::test_a",), ("-k", "test_a"), ("--deselect", "test_two.py::test_b")],
    ids=["node id", "keyword", "deselect"],
)
def test_a_partial_run_calls_no_golden_file_unused(two_tests, selection):
    (two_tests.path / "tests" / "golden" / "old.dot").write_text("digraph {}\n")
    result = run(two_tests, "--update-golden", "--remove-unused-golden", *selection)
    assert result.ret == 0 and result.parseoutcomes()["passed"] in (1, 2)
    assert "unused" not in result.stdout.str().split("golden files")[-1].replace("Unused golden files:", "")
    result.stdout.fnmatch_lines(["Unused golden files: * only the folders of test modules that ran whole were looked at."])
    assert golden_files(two_tests) == ["old.dot", "test_two/a.graph.txt", "test_two/b.graph.txt"]


def test_a_skipped_golden_test_keeps_its_module_s_files(two_tests):
    two_tests.makeconftest(
        "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
        "    for item in items:\n        if item.name == 'test_b':\n"
        "            item.add_marker(pytest.mark.skip(reason='no GPU'))\n"
    )
    result = run(two_tests, "--update-golden", "--remove-unused-golden")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["Unused golden files: 1 golden test(s) did not run or were skipped*"])
    assert golden_files(two_tests) == ["test_two/a.graph.txt", "test_two/b.graph.txt"]


def test_a_failing_run_looks_for_no_unused_file(two_tests):
    two_tests.makepyfile(test_fails="def test_fails():\n    assert False\n")
    (two_tests.path / "tests" / "golden" / "old.dot").write_text("digraph {}\n")
    result = run(two_tests, "--update-golden", "--remove-unused-golden")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["Unused golden files: the run did not pass."])
    assert "old.dot" in golden_files(two_tests)


def test_remove_unused_golden_alone_is_a_usage_error(two_tests):
    result = run(two_tests, "--remove-unused-golden")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--remove-unused-golden goes with --update-golden*"])


def test_an_unknown_golden_kind_is_a_usage_error(two_tests):
    two_tests.makeini("[pytest]\nautograd_golden_kind = picture\n")
    result = run(two_tests)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*autograd_golden_kind must be structure or drawing; got 'picture'*"])


def test_same_name_in_two_test_modules_does_not_collide(pytester):
    pytester.makeini("[pytest]\n")
    body = "import torch\n\n\ndef test_g(autograd_golden):\n    w = torch.ones({n}, requires_grad=True)\n    autograd_golden.check(w.sum(), 'g')\n"
    pytester.makepyfile(test_one=body.format(n=1))
    pytester.mkpydir("deeper")
    (pytester.path / "deeper" / "test_one.py").write_text(body.format(n=2))
    run(pytester, "--update-golden").assert_outcomes(passed=2)
    assert golden_files(pytester) == ["deeper/test_one/g.graph.txt", "test_one/g.graph.txt"]
    run(pytester).assert_outcomes(passed=2)


def test_one_golden_file_checked_by_two_tests_fails(pytester):
    pytester.makeini("[pytest]\nautograd_golden_per_module = false\n")
    body = "import torch\n\n\ndef test_{n}(autograd_golden):\n    w = torch.ones(2, requires_grad=True)\n    autograd_golden.check(w.sum(), 'same')\n"
    pytester.makepyfile(test_one=body.format(n="one"), test_two=body.format(n="two"))
    result = run(pytester, "--update-golden")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*Golden file tests/golden/same.graph.txt is checked by two tests, test_one.py::test_one and test_two.py::test_two*"]
    )


def test_one_golden_file_checked_by_tests_on_two_xdist_workers_fails(pytester, monkeypatch):
    pytest.importorskip("xdist")
    pytester.makeini("[pytest]\nautograd_golden_per_module = false\n")
    body = "import torch\n\n\ndef test_{n}(autograd_golden):\n    w = torch.ones(2, requires_grad=True)\n    autograd_golden.check(w.sum(), 'same')\n"
    pytester.makepyfile(test_one=body.format(n="one"), test_two=body.format(n="two"))
    root = str(Path(__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    result = pytester.runpytest_subprocess(*QUIET, "-n", "2", "--dist", "loadfile", "--update-golden")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # Both tests pass where they ran; the controller sees the clash, or one worker ran both.
    assert re.search(r"checked by (several|two) tests", result.stdout.str())


def test_an_upgrade_says_where_the_earlier_golden_file_is_and_migrates_in_one_command(pytester):
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        test_up="import torch\n\n\ndef test_up(autograd_golden):\n"
        "    w = torch.ones(2, requires_grad=True)\n    autograd_golden.check(w.sum(), 'up', params={'w': w})\n"
    )
    flat = pytester.path / "tests" / "golden" / "up.dot"  # where earlier versions kept it
    flat.parent.mkdir(parents=True)
    flat.write_text("digraph {}\n")
    missing = run(pytester)
    missing.assert_outcomes(failed=1)
    missing.stdout.fnmatch_lines(
        [
            "*tests/golden/test_up/up.graph.txt does not exist. tests/golden/up.dot is there, from an earlier layout"
            "*pytest --update-golden --remove-unused-golden replaces all of them at once*"
        ]
    )
    run(pytester, "--update-golden", "--remove-unused-golden").assert_outcomes(passed=1)
    assert golden_files(pytester) == ["test_up/up.graph.txt"]
    run(pytester).assert_outcomes(passed=1)
