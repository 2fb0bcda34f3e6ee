"""Golden files damaged or in the way, and one golden name used twice under
pytest-xdist: each a failed test with one sentence saying what to do, never a
plugin traceback (run as a user runs them, with pytester)."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest

from . import test_plugin
from .test_plugin import FOLDER, QUIET, golden, run

project = test_plugin.project  # a fixture: a pytester project whose test checks the golden file 'scale'


def assert_no_traceback(result: pytest.RunResult) -> None:
    text = result.stdout.str()
    assert "Traceback" not in text and "UnicodeDecodeError" not in text and "OutputPathError" not in text, text


# --- 13. a golden file of binary junk --------------------------------------------


def test_golden_file_of_binary_junk_says_to_regenerate_it(project):
    path = golden(project)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00junk")
    result = run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*Golden file {FOLDER}/scale.graph.txt is not UTF-8 text: it is damaged, or not a golden file of graphviz-autograd."
            " Regenerate it by running in *:",
            "*    pytest --update-golden test_graph.py::test_scale",
        ]
    )
    assert_no_traceback(result)
    run(project, "--update-golden").assert_outcomes(passed=1)  # which rewrites it
    run(project).assert_outcomes(passed=1)


# --- 14. a golden path that is a folder ------------------------------------------


@pytest.mark.parametrize("update", [False, True])
def test_golden_path_that_is_a_folder(project, update):
    golden(project).mkdir(parents=True)
    result = run(project, *(["--update-golden"] if update else []))
    result.assert_outcomes(failed=1)
    verb, then = ("written", "and run again") if update else ("read", "then create the golden file with pytest --update-golden")
    result.stdout.fnmatch_lines(
        [
            f"*Golden file {FOLDER}/scale.graph.txt cannot be {verb}: {FOLDER}/scale.graph.txt is a folder, not a file."
            f" Move it out of the way*{then}*"
        ]
    )
    assert "does not exist" not in result.stdout.str()
    assert_no_traceback(result)


def test_golden_folder_that_is_a_file(project):
    folder = project.path / FOLDER
    folder.parent.mkdir(parents=True)
    folder.write_text("not a folder\n")
    result = run(project, "--update-golden")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*cannot be written: {FOLDER} is a file, not a folder. Move it out of the way*"])
    assert_no_traceback(result)


# --- 15. one golden name in two tests under pytest-xdist -------------------------

CLASHING_TESTS = '''
import torch


def test_{name}_{n}(autograd_golden):
    w = torch.ones({size}, requires_grad=True)
    autograd_golden.check(w.sum(), "{name}")
'''


@pytest.mark.parametrize("workers", [None, "2"])
def test_one_golden_name_in_two_tests_clashes_on_xdist_workers_as_in_a_serial_run(pytester, monkeypatch, workers):
    pytester.makeini("[pytest]\nautograd_golden_per_module = false\n")
    # 'same': two tests drawing the same graph; 'other': two tests drawing different graphs.
    pytester.makepyfile(
        test_one=CLASHING_TESTS.format(name="same", n=1, size=2) + CLASHING_TESTS.format(name="other", n=1, size=2),
        test_two=CLASHING_TESTS.format(name="same", n=2, size=2) + CLASHING_TESTS.format(name="other", n=2, size=3),
    )
    run(pytester, "--update-golden", "test_one.py").assert_outcomes(passed=2)  # the golden files, from one test each
    if workers is None:
        result = run(pytester)
    else:
        pytest.importorskip("xdist")
        root = str(Path(__file__).resolve().parent.parent)
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        result = pytester.runpytest_subprocess(*QUIET, "-n", workers, "--dist", "loadfile")
    outcomes = result.parseoutcomes()
    # Whichever test of a pair checks second fails on the clash. (Under xdist test_other_2,
    # whose graph differs from the golden file, may run first: it fails on its diff then.)
    assert outcomes.get("failed") in ((2,) if workers is None else (2, 3)), result.stdout.str()
    assert outcomes.get("passed", 0) + outcomes["failed"] == 4
    text = result.stdout.str()
    for name in ("same", "other"):
        assert re.search(
            rf"Golden file tests/golden/{name}\.graph\.txt is checked by two tests, "
            rf"test_(one|two)\.py::test_{name}_\d and test_(one|two)\.py::test_{name}_\d: give one of the checks another name",
            text,
        ), text


# --- 16. a read-only golden folder -----------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_read_only_golden_folder_still_shows_the_diff(project, monkeypatch):
    run(project, "--update-golden").assert_outcomes(passed=1)
    folder = project.path / FOLDER
    if os.geteuid() == 0:
        # root writes into a 0555 folder anyway; report it read-only as the OS would to a user
        real_access = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == folder else real_access(p, mode, **kw))
    folder.chmod(0o555)
    try:
        monkeypatch.setenv("GOLDEN_VARIANT", "bias")
        result = run(project)
    finally:
        folder.chmod(0o755)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*The autograd graph 'scale' differs from {FOLDER}/scale.graph.txt.",
            "*Parameters: +b (3).",
            f"*The obtained file {FOLDER}/scale.obtained.graph.txt could not be written (the directory * is not writable);"
            " the diff below holds the new text. If the change is intended, run in *:",
            "*+*parameter b*",
        ]
    )
    assert not (folder / "scale.obtained.graph.txt").exists()
    assert_no_traceback(result)


def test_unreadable_golden_file(project, monkeypatch):
    path = golden(project)
    path.parent.mkdir(parents=True)
    path.write_text("anything\n")
    real_read_bytes = Path.read_bytes

    def refuse(self):  # as for a file of mode 000 (root reads those anyway)
        if self == path:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
        return real_read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", refuse)
    result = run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*Golden file {FOLDER}/scale.graph.txt cannot be read: Permission denied. Check its permissions."])
    assert_no_traceback(result)
