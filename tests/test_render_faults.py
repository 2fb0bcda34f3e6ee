"""Rendering under faults: each one a named error, and nothing lost at the target.

After any failure the target path holds what it held before (nothing, or the old
file with its old mode) and no temporary file is left beside it. A fake ``dot``
first on PATH stands in for a Graphviz that hangs, dies or cannot start.
"""

from __future__ import annotations

import errno
import importlib
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

import graphviz_autograd
from graphviz_autograd import GraphvizNotFoundError, OptionError, OutputPathError, RenderError

# graphviz_autograd.render is the function; the module is reached by its full name.
render_module = importlib.import_module("graphviz_autograd.drawing.rendering")

posix_only = pytest.mark.skipif(os.name != "posix", reason="the fake dot is a /bin/sh script")
needs_graphviz = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")

SOURCE = 'digraph {\n\tn0 [label="x"]\n}\n'
OLD = b"an older drawing, which a failed render must leave alone\n"


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


@pytest.fixture
def old_target(out_dir: Path) -> Path:
    """An existing file at the target, with a mode of its own."""
    target = out_dir / "graph.svg"
    target.write_bytes(OLD)
    target.chmod(0o640)
    return target


def assert_untouched(target: Path) -> None:
    assert target.read_bytes() == OLD
    assert target.stat().st_mode & 0o7777 == 0o640
    assert_no_leftovers(target.parent, {target.name})


def assert_no_leftovers(folder: Path, expected: set = frozenset()) -> None:
    assert {p.name for p in folder.iterdir()} == set(expected)


@pytest.fixture
def fake_dot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Put a ``dot`` running the given shell script first on PATH; it logs each run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "dot-runs.log"

    def install(script: str) -> Path:
        dot = bin_dir / "dot"
        dot.write_text(f'#!/bin/sh\necho run >> "{log}"\n' + textwrap.dedent(script))
        dot.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
        assert render_module.find_dot() == str(dot)
        return dot

    install.runs = lambda: len(log.read_text().splitlines()) if log.exists() else 0
    return install


def render_small_graph(path, **options):
    w = torch.ones(2, requires_grad=True)
    return graphviz_autograd.render((w * 2).sum(), path, {"w": w}, **options)


# --- the output path -------------------------------------------------------------


@posix_only
def test_missing_directory_is_named_before_graphviz_runs(tmp_path, fake_dot):
    fake_dot("cat\n")
    target = tmp_path / "no" / "such" / "dir" / "graph.svg"
    with pytest.raises(OutputPathError, match=r"the directory .*dir' does not exist\. Create it first"):
        render_small_graph(target)
    assert fake_dot.runs() == 0
    assert not (tmp_path / "no").exists()


def test_target_that_is_a_directory(out_dir):
    (out_dir / "graph.svg").mkdir()
    with pytest.raises(OutputPathError, match="it is a directory"):
        render_module.render_source(SOURCE, out_dir / "graph.svg")


def test_read_only_directory(old_target, monkeypatch):
    folder = old_target.parent
    if os.geteuid() == 0:
        # root writes into a 0555 directory anyway; report it read-only as the OS would
        real_access = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == folder else real_access(p, mode, **kw))
    folder.chmod(0o555)
    try:
        with pytest.raises(OutputPathError, match=r"is not writable"):
            render_module.render_source(SOURCE, old_target, format="dot")
    finally:
        folder.chmod(0o755)
    assert_untouched(old_target)


def test_directory_that_refuses_new_files_despite_access(old_target, monkeypatch):
    # os.access() can say yes and creating a file still fail: root-squashed NFS, ACLs,
    # SELinux, a directory made read-only between the check and the write.
    real_open = os.open

    def refuse(path, flags, *args, **kwargs):
        if Path(path).parent == old_target.parent and flags & os.O_CREAT:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(OutputPathError, match="Permission denied"):
        render_module.render_source(SOURCE, old_target, format="dot")
    monkeypatch.undo()
    assert_untouched(old_target)


# --- a full disk -----------------------------------------------------------------


class _FullDisk:
    """A file handle whose writes fail as on a full disk, after a partial write."""

    def __init__(self, handle):
        self.handle = handle

    def write(self, data):
        self.handle.write(data[: len(data) // 2])
        self.handle.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.close()


def test_full_disk_while_writing(old_target, monkeypatch):
    real_fdopen = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **kw: _FullDisk(real_fdopen(fd, *a, **kw)))
    with pytest.raises(OutputPathError, match="No space left on device"):
        render_module.render_source(SOURCE, old_target, format="dot")
    monkeypatch.undo()
    assert_untouched(old_target)


def test_full_disk_on_the_final_rename(old_target, monkeypatch):
    def fail(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OutputPathError, match="No space left on device"):
        render_module.render_source(SOURCE, old_target, format="dot")
    monkeypatch.undo()
    assert_untouched(old_target)


def test_interrupt_while_writing_leaves_no_temporary_file(old_target, monkeypatch):
    class Interrupted(_FullDisk):
        def write(self, data):
            raise KeyboardInterrupt

    real_fdopen = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **kw: Interrupted(real_fdopen(fd, *a, **kw)))
    with pytest.raises(KeyboardInterrupt):
        render_module.render_source(SOURCE, old_target, format="dot")
    monkeypatch.undo()
    assert_untouched(old_target)


@pytest.mark.skipif(os.name != "posix", reason="needs RLIMIT_FSIZE and SIGXFSZ")
def test_file_size_limit_hit_by_the_kernel(old_target):
    # A real failing write rather than a stand-in: the kernel refuses bytes past
    # RLIMIT_FSIZE (EFBIG) part-way through the file. In a child, as the limit is per process.
    script = textwrap.dedent(
        f"""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        from graphviz_autograd.errors import OutputPathError
        from graphviz_autograd.drawing.rendering import render_source
        try:
            render_source("digraph {{" + "a -> b; " * 20000 + "}}", {str(old_target)!r}, format="dot")
        except OutputPathError as error:
            print(error)
            sys.exit(3)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent), PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 3, done.stderr
    assert "File too large" in done.stdout
    assert_untouched(old_target)


# --- Graphviz failing ------------------------------------------------------------


@posix_only
def test_dot_killed_by_a_signal(old_target, fake_dot):
    fake_dot(
        """
        printf '<svg xmlns="http://www.w3.org/2000/svg"><g>'
        kill -9 $$
        """
    )
    with pytest.raises(RenderError, match="killed by signal SIGKILL"):
        render_module.render_source(SOURCE, old_target)
    assert_untouched(old_target)


@posix_only
def test_dot_failing_reports_what_it_said(old_target, fake_dot):
    fake_dot(
        """
        echo 'Error: <stdin>: syntax error in line 1 near "{"' >&2
        exit 1
        """
    )
    with pytest.raises(RenderError, match=r"failed to draw the graph as svg: Error: <stdin>: syntax error"):
        render_module.render_source(SOURCE, old_target)
    assert_untouched(old_target)


@posix_only
def test_dot_drawing_nothing_is_an_error_not_an_empty_file(old_target, fake_dot):
    fake_dot("cat > /dev/null\n")
    with pytest.raises(RenderError, match="drew nothing"):
        render_module.render_source(SOURCE, old_target)
    assert_untouched(old_target)


@posix_only
@pytest.mark.parametrize("name", ["graph.svg", "graph.pdf", "graph.png"])
@pytest.mark.parametrize(
    "garbage",
    ["printf 'Segmentation fault, but exit 0\\n'\n", "printf '<html><body>not a drawing</body></html>'\n", "printf '<svg>cut off'\n"],
)
def test_dot_printing_garbage_with_exit_0_writes_no_file(old_target, fake_dot, name, garbage):
    fake_dot("cat > /dev/null\n" + garbage)
    target = old_target.with_name(name)
    if target != old_target:
        target.write_bytes(OLD)
        target.chmod(0o640)
        old_target.unlink()
    fmt = name.rpartition(".")[2].upper()
    # An SVG that begins right and stops is a drawing cut short, not a wrong program.
    expected = "SVG output was cut short" if fmt == "SVG" and "<svg>" in garbage else rf"output is not an? {fmt} file: it begins '"
    with pytest.raises(RenderError, match=expected):
        render_module.render_source(SOURCE, target)
    assert_untouched(target)


@posix_only
def test_svg_root_must_be_svg_even_when_the_xml_is_well_formed(out_dir, fake_dot):
    fake_dot("cat > /dev/null\nprintf '<?xml version=\"1.0\"?><html/>'\n")
    with pytest.raises(RenderError, match="not an SVG file"):
        render_module.render_source(SOURCE, out_dir / "graph.svg")
    assert_no_leftovers(out_dir)


@needs_graphviz
@pytest.mark.parametrize("fmt", ["svg", "pdf", "png"])
def test_real_graphviz_output_passes_the_check(fmt):
    render_module.check_drawing(render_module.run_dot(SOURCE, fmt), fmt)


@posix_only
def test_dot_that_cannot_start(old_target, tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    dot = bin_dir / "dot"
    dot.write_text("#!/no/such/interpreter\n")
    dot.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(RenderError, match=r"could not be started \(.*dot\)"):
        render_module.render_source(SOURCE, old_target)
    assert_untouched(old_target)


def _running(pid: int) -> bool:
    """Whether ``pid`` is alive and not a zombie awaiting its reaper."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@posix_only
def test_timeout_stops_dot_and_what_it_started(old_target, fake_dot, tmp_path):
    child_pid = tmp_path / "child.pid"
    # A wrapper script whose child keeps the output pipe open: killing the script
    # alone would leave the wait hanging until the child ends.
    fake_dot(
        f"""
        sleep 60 &
        echo $! > "{child_pid}"
        wait
        """
    )
    started = time.monotonic()
    with pytest.raises(RenderError, match=r"did not finish laying out the graph within 0\.5 s\. Pass a larger timeout= \(--timeout on the command line\)"):
        render_module.render_source(SOURCE, old_target, timeout=0.5)
    assert time.monotonic() - started < 15
    assert_untouched(old_target)
    if Path("/proc").is_dir():
        pid = int(child_pid.read_text())
        deadline = time.monotonic() + 5
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(pid)


@posix_only
def test_timeout_through_the_public_render(out_dir, fake_dot):
    fake_dot("exec sleep 60\n")
    with pytest.raises(RenderError, match="within 0.2 s"):
        render_small_graph(out_dir / "graph.png", timeout=0.2)
    assert_no_leftovers(out_dir)


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), "10", True])
def test_timeout_must_be_a_positive_number(out_dir, timeout):
    with pytest.raises(OptionError, match="timeout must be a positive number of seconds or None"):
        render_module.render_source(SOURCE, out_dir / "graph.dot", timeout=timeout)
    assert_no_leftovers(out_dir)


def test_default_timeout_is_generous():
    assert render_module.DEFAULT_TIMEOUT >= 60


# --- Graphviz missing ------------------------------------------------------------


def test_dot_missing_from_path(old_target, tmp_path, monkeypatch):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(GraphvizNotFoundError, match=r"'dot' executable was not found on PATH.*Install Graphviz"):
        render_small_graph(old_target)
    assert_untouched(old_target)


def test_dot_output_needs_no_graphviz(out_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    w = torch.ones(2, requires_grad=True)
    path = graphviz_autograd.render((w * 2).sum(), out_dir / "graph.gv", {"w": w})
    assert path.read_text(encoding="utf-8") == graphviz_autograd.make_dot((w * 2).sum(), {"w": w}).source


def test_unknown_suffix_is_an_option_error_and_writes_nothing(out_dir):
    with pytest.raises(OptionError, match=r"Cannot tell the output format of .*graph\.jpeg"):
        render_small_graph(out_dir / "graph.jpeg")
    assert_no_leftovers(out_dir)


# --- modes -----------------------------------------------------------------------


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield
    os.umask(old)


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
@pytest.mark.parametrize("name", ["graph.dot", pytest.param("graph.svg", marks=needs_graphviz)])
def test_new_file_gets_the_mode_open_would_give_it(out_dir, umask_027, name):
    # The umask is set after the package was imported: it must be read at write time.
    path = render_module.render_source(SOURCE, out_dir / name)
    assert path.stat().st_mode & 0o7777 == 0o640
    reference = out_dir / "reference"
    reference.write_bytes(b"")
    assert path.stat().st_mode & 0o7777 == reference.stat().st_mode & 0o7777


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
@pytest.mark.parametrize("name", ["graph.dot", pytest.param("graph.svg", marks=needs_graphviz)])
def test_overwritten_file_keeps_its_mode(out_dir, name):
    target = out_dir / name
    target.write_bytes(OLD)
    target.chmod(0o604)
    render_module.render_source(SOURCE, target)
    assert target.read_bytes() != OLD
    assert target.stat().st_mode & 0o7777 == 0o604
    assert_no_leftovers(out_dir, {name})
