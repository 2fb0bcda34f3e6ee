"""Hostile and unlucky inputs to the static drawing and the command line: each one
works, or fails with one sentence naming the input, a non-zero status from the
command, nothing half-written and an existing file kept.

A fake ``dot`` first on PATH (the ``fake_dot`` fixture of test_render_faults)
stands in for a Graphviz that hangs, crashes or stops part-way.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from graphviz_autograd import OptionError, OutputPathError, RenderError, make_dot
from graphviz_autograd.cli.commands import main
from graphviz_autograd.cli.command_process import INTERRUPTED_STATUS

from . import test_render_faults as faults
from .test_cli import REPO, run_module, subprocess_env
from .test_render_faults import OLD, SOURCE, assert_untouched, posix_only, render_module

# The fixtures of test_render_faults: a fake dot first on PATH, an output folder.
fake_dot = faults.fake_dot
out_dir = faults.out_dir

needs_graphviz = pytest.mark.skipif(
    shutil.which("dot") is None or shutil.which("neato") is None, reason="Graphviz 'dot' and 'neato' are not installed"
)
REAL_DOT = shutil.which("dot")


def small_digraph(**options):
    w = torch.ones(2, requires_grad=True)
    return make_dot((w * 2).sum(), {"w": w}, **options)


def parse_svg(path: Path) -> ET.Element:
    root = ET.fromstring(path.read_bytes())
    assert root.tag.endswith("svg")
    return root


# --- 9. make_dot(...).render() and .view() ---------------------------------------


@posix_only
@needs_graphviz
def test_digraph_render_keeps_the_layout_budget(tmp_path, fake_dot, monkeypatch, capsys):
    # A dot that never finishes: graphviz's own render() would wait for it forever.
    fake_dot("exec sleep 60\n")
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    started = time.monotonic()
    rendered = small_digraph(layout_budget=0.5).render("md", format="svg")
    assert time.monotonic() - started < 30
    assert rendered == "md.svg"
    parse_svg(Path(rendered))
    assert sorted(os.listdir(".")) == ["md.svg"]  # no 'md' DOT source beside it
    assert "did not finish within the layout budget of 0.5 s" in capsys.readouterr().err


@posix_only
def test_digraph_render_names_a_crashed_graphviz_and_keeps_the_old_file(out_dir, fake_dot):
    fake_dot("cat > /dev/null\nkill -SEGV $$\n")
    target = out_dir / "md.svg"
    target.write_bytes(OLD)
    target.chmod(0o640)
    with pytest.raises(RenderError, match="killed by signal SIGSEGV"):
        small_digraph().render("md", directory=out_dir, format="svg")
    assert_untouched(target)


@posix_only
def test_digraph_render_checks_what_graphviz_wrote(out_dir, fake_dot):
    fake_dot("cat > /dev/null\nprintf '%%PDF-1.5\\n1 0 obj'\n")
    target = out_dir / "md.pdf"
    target.write_bytes(OLD)
    target.chmod(0o640)
    with pytest.raises(RenderError, match="PDF output was cut short"):
        small_digraph().render(outfile=target)
    assert_untouched(target)


@needs_graphviz
def test_digraph_render_keeps_graphviz_signature(tmp_path):
    graph = small_digraph()
    # filename + directory + format: graphviz's '<filename>.<format>', returned as a str path
    rendered = graph.render("g", directory=tmp_path / "new", format="png")
    assert rendered == os.fspath(tmp_path / "new" / "g.png")
    assert (tmp_path / "new" / "g.png").read_bytes().startswith(b"\x89PNG")
    assert sorted(os.listdir(tmp_path / "new")) == ["g.png"]
    # cleanup=False asks for the DOT source too, as graphviz keeps it
    rendered = graph.render("kept", directory=tmp_path, format="svg", cleanup=False)
    assert (tmp_path / "kept").read_text(encoding="utf-8") == graph.source
    parse_svg(Path(rendered))
    # outfile picks the format from its suffix
    assert graph.render(outfile=tmp_path / "out.svg") == os.fspath(tmp_path / "out.svg")
    parse_svg(tmp_path / "out.svg")
    assert not (tmp_path / "out.gv").exists()
    with pytest.raises(FileExistsError):
        graph.render(outfile=tmp_path / "out.svg", raise_if_result_exists=True)


@needs_graphviz
def test_digraph_view_renders_then_opens_the_drawing(tmp_path, monkeypatch):
    graph = small_digraph()
    opened = []
    monkeypatch.setattr(type(graph), "_view", lambda self, path, format, quiet: opened.append((os.fspath(path), format)))
    rendered = graph.view("v", directory=tmp_path)
    assert opened == [(rendered, "pdf")]
    assert os.listdir(tmp_path) == ["v.pdf"]
    assert (tmp_path / "v.pdf").read_bytes().startswith(b"%PDF-")


def test_digraph_render_refuses_options_it_cannot_honour(tmp_path):
    with pytest.raises(OptionError, match="renderer="):
        small_digraph().render("g", directory=tmp_path, format="png", renderer="cairo")
    assert os.listdir(tmp_path) == []


# --- 10. Graphviz output cut short -----------------------------------------------


@posix_only
@pytest.mark.skipif(REAL_DOT is None, reason="Graphviz 'dot' is not installed")
@pytest.mark.parametrize("name", ["graph.svg", "graph.pdf", "graph.png"])
def test_graphviz_output_cut_short_keeps_the_old_file(out_dir, tmp_path, fake_dot, name):
    # The real dot draws it, and the wrapper passes on all but the last 20 bytes, exit 0.
    full = tmp_path / "full"
    fake_dot(f'"{REAL_DOT}" "$@" > "{full}"\nhead -c $(( $(wc -c < "{full}") - 20 )) "{full}"\n')
    target = out_dir / name
    target.write_bytes(OLD)
    target.chmod(0o640)
    fmt = name.rpartition(".")[2].upper()
    with pytest.raises(RenderError, match=rf"Graphviz 'dot' exited without error but its {fmt} output was cut short"):
        render_module.render_source(SOURCE, target)
    assert_untouched(target)


@pytest.mark.parametrize(
    "fmt, whole",
    [
        ("pdf", b"%PDF-1.7\n1 0 obj\n<<>>\nendobj\nstartxref\n9\n%%EOF\n"),
        ("png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 8 + b"\x00\x00\x00\x00IEND\xaeB`\x82"),
        ("svg", b'<svg xmlns="http://www.w3.org/2000/svg"><g/></svg>\n'),
    ],
)
def test_each_format_is_whole_only_with_its_end(fmt, whole):
    render_module.check_drawing(whole, fmt)
    for cut in (len(whole) - 3, len(whole) // 2):
        with pytest.raises(RenderError, match=f"{fmt.upper()} output was cut short"):
            render_module.check_drawing(whole[:cut], fmt)


def test_a_pdf_needs_startxref_before_its_trailer():
    with pytest.raises(RenderError, match="no startxref"):
        render_module.check_drawing(b"%PDF-1.7\n1 0 obj\n<<>>\nendobj\n%%EOF\n", "pdf")


# --- 11. a model that ends the process -------------------------------------------

EXIT_AT_IMPORT = """
import os
import torch
from torch import nn

model = nn.Linear(2, 1)
example_inputs = (torch.ones(1, 2),)
os._exit(0)
"""

EXIT_IN_FORWARD = """
import os
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 1)

    def forward(self, x):
        os._exit(0)

model = Net()
example_inputs = (torch.ones(1, 2),)
"""

CRASH_IN_FORWARD = EXIT_IN_FORWARD.replace("os._exit(0)", "os.kill(os.getpid(), 11)")


def model_args(command: str, path: Path, out: Path) -> list[str]:
    return [command, str(path), "-q"] + (["-o", str(out)] if command == "render" else [])


@posix_only
@pytest.mark.parametrize(
    "command, source, line", [("render", EXIT_AT_IMPORT, 8), ("check", EXIT_IN_FORWARD, 12)]
)
def test_os_exit_in_the_model_is_an_error_naming_file_and_line(tmp_path, command, source, line):
    path = tmp_path / "net.py"
    path.write_text(textwrap.dedent(source))
    out = tmp_path / "net.svg"
    done = run_module(*model_args(command, path, out), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"Error: {path}:{line}: os._exit(0) was called"), done.stderr
    assert "wrote nothing" in done.stderr
    assert done.stdout == ""
    assert sorted(os.listdir(tmp_path)) == ["net.py"]


@posix_only
def test_a_crash_in_the_model_is_an_error_not_a_traceback(tmp_path):
    path = tmp_path / "net.py"
    path.write_text(textwrap.dedent(CRASH_IN_FORWARD))
    done = run_module(*model_args("render", path, tmp_path / "net.svg"), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("Error: the process was killed by SIGSEGV before it finished"), done.stderr
    assert done.stderr.count("\n") == 1
    assert sorted(os.listdir(tmp_path)) == ["net.py"]


SYS_EXIT_IN_BACKWARD = """
import sys
import torch
from torch import nn

class Quit(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        sys.exit(0)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 1)

    def forward(self, x):
        return Quit.apply(self.fc(x))

model = Net()
example_inputs = (torch.ones(1, 2),)

def loss(output):
    return output.sum()
"""


def test_sys_exit_outside_loading_and_forward_is_an_error(tmp_path):
    # check runs backward: the exit comes from the model's autograd Function, past the loader.
    path = tmp_path / "net.py"
    path.write_text(textwrap.dedent(SYS_EXIT_IN_BACKWARD))
    result = CliRunner().invoke(main, ["check", str(path), "-q"])
    assert result.exit_code == 1, result.output
    assert result.output.count("\n") == 1
    assert result.output.startswith(f"Error: {path}:13: the model's code called sys.exit(0)"), result.output


@posix_only
def test_commands_run_apart_still_write_stdout_and_exit_0(tmp_path):
    # The ordinary path through the child process: output on stdout, status 0.
    done = run_module("render", str(REPO / "samples" / "affine.py"), "-q", "-o", "-", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("digraph {")
    done = run_module("check", str(REPO / "samples" / "affine.py"), "-q", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"summary"' in done.stdout


# --- 12. inputs too large, and Ctrl-C --------------------------------------------


def test_input_shape_too_large_to_allocate(tmp_path):
    out = tmp_path / "affine.dot"
    result = CliRunner().invoke(
        main, ["render", str(REPO / "samples" / "affine.py"), "-q", "--input-shape", "100000,100000,100000", "-o", str(out)]
    )
    assert result.exit_code == 1, result.output
    assert result.output.count("\n") == 1
    assert result.output.startswith(
        "Error: Input shape 100000,100000,100000 is too large to allocate: 1,000,000,000,000,000 elements, "
        "4,000,000.0 GB of float32"
    ), result.output
    assert "give a smaller shape" in result.output and "internal error" not in result.output
    assert not out.exists()


def test_input_shape_the_allocator_refuses(monkeypatch):
    from graphviz_autograd.cli import model_file

    monkeypatch.setattr(model_file, "_physical_memory", lambda: None)  # a system that does not say
    with pytest.raises(OptionError, match=r"Input shape 100000,100000,100000 is too large to allocate: .*allocation failed"):
        model_file.random_inputs([(100000, 100000, 100000)])


@pytest.mark.parametrize("where", ["loading", "writing"])
def test_ctrl_c_exits_130_and_leaves_no_file(tmp_path, monkeypatch, where):
    from graphviz_autograd.cli import model_file

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    if where == "loading":
        monkeypatch.setattr(model_file, "load_model", interrupt)
    else:
        monkeypatch.setattr(os, "replace", interrupt)
    out = tmp_path / "affine.dot"
    result = CliRunner().invoke(main, ["render", str(REPO / "samples" / "affine.py"), "-q", "-o", str(out)])
    assert result.exit_code == INTERRUPTED_STATUS == 130
    assert result.output == "Error: interrupted; nothing was written.\n"
    assert os.listdir(tmp_path) == []


SLOW_FORWARD = """
import os
import time
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 1)

    def forward(self, x):
        with open({started!r} + ".tmp", "w") as handle:
            handle.write(str(os.getpid()))
        os.replace({started!r} + ".tmp", {started!r})
        time.sleep(60)
        return self.fc(x)

model = Net()
example_inputs = (torch.ones(1, 2),)
"""


def _running(pid: int) -> bool:
    return faults._running(pid)


# A command typed at a terminal starts with SIGINT at its default, which Python makes
# KeyboardInterrupt. Started from a shell's background job (`cmd &`, as some CI runners and
# nohup'd scripts run the suite) it would inherit SIGINT ignored, and Ctrl-C could not reach
# it: so it is started through a one-line Python that puts SIGINT back and execs the command
# in its own process (a preexec_fn would run Python between fork and exec in a threaded process).
AS_FROM_A_TERMINAL = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
# As a script's background job (`cmd &`) starts: with SIGINT ignored.
AS_A_BACKGROUND_JOB = AS_FROM_A_TERMINAL.replace("SIG_DFL", "SIG_IGN")


def stop_a_slow_command(tmp_path: Path, number: int, *, whole_group: bool,
                        start: str = AS_FROM_A_TERMINAL) -> tuple[int, str, int]:
    """Start a command whose forward pass sleeps (through ``start``, which sets how it gets
    SIGINT), send ``number`` once it runs (to its process group, as a terminal does, or to
    the command alone, as ``timeout`` and ``kill`` do); return its status, its stderr and
    the pid that ran the forward."""
    started = tmp_path / "started"
    path = tmp_path / "net.py"
    path.write_text(textwrap.dedent(SLOW_FORWARD.format(started=str(started))))
    process = subprocess.Popen(
        [sys.executable, "-c", start,
         sys.executable, "-m", "graphviz_autograd", "render", str(path), "-q", "-o", str(tmp_path / "net.svg")],
        cwd=tmp_path,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), process.communicate(timeout=10)
        if whole_group:
            os.killpg(process.pid, number)
        else:
            os.kill(process.pid, number)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        try:  # the whole group: the command, and what it started should it outlive it
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    assert stdout == ""
    assert sorted(os.listdir(tmp_path)) == ["net.py", "started"]  # no drawing, no temporary file
    return process.returncode, stderr, int(started.read_text())


@posix_only
@pytest.mark.parametrize("whole_group", [True, False], ids=["terminal", "kill"])
def test_ctrl_c_exits_130(tmp_path, whole_group):
    status, stderr, _ = stop_a_slow_command(tmp_path, signal.SIGINT, whole_group=whole_group)
    assert status == 130, stderr
    assert stderr == "Error: interrupted; nothing was written.\n"


@posix_only
def test_sigterm_stops_the_work_too(tmp_path):
    # As `timeout` sends it: to the command's own process, which passes it on.
    status, stderr, worker = stop_a_slow_command(tmp_path, signal.SIGTERM, whole_group=False)
    assert status == 128 + signal.SIGTERM, stderr
    assert stderr == "Error: stopped by SIGTERM; nothing was written.\n"
    deadline = time.monotonic() + 5
    while _running(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(worker)


@posix_only
@pytest.mark.parametrize("start", [AS_FROM_A_TERMINAL, AS_A_BACKGROUND_JOB], ids=["terminal", "background"])
def test_a_killed_command_stops_its_work(tmp_path, start):
    # SIGKILL (or the out-of-memory killer) lets the command pass nothing on: the process
    # doing the work sees its parent gone and stops as Ctrl-C stops it, instead of running
    # on alone (here it would sleep for a minute, holding the pipes open past the timeout).
    # Started with SIGINT ignored, it stops the same way and says so, not silently at the end
    # of its grace.
    status, stderr, worker = stop_a_slow_command(tmp_path, signal.SIGKILL, whole_group=False, start=start)
    assert status == -signal.SIGKILL
    assert stderr == "Error: the command was killed; its work stopped and nothing was written.\n"
    deadline = time.monotonic() + 5
    while _running(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(worker)


def test_digraph_render_into_a_folder_that_is_a_file(tmp_path):
    (tmp_path / "taken").write_text("a file, not a folder\n")
    with pytest.raises(OutputPathError, match=r"Cannot write .*taken/g\.svg': its folder cannot be made \(.*taken' is a file, not a folder\)"):
        small_digraph().render("g", directory=tmp_path / "taken", format="svg")
    assert (tmp_path / "taken").read_text() == "a file, not a folder\n"


# --- 13. the command never writes over what it reads -------------------------------


REFUSED = "it is the input {read!r} that this command reads, and writing it would lose what it holds; give another output path."


@pytest.mark.parametrize(
    "model, output, fmt",
    [
        ("net.py", "net.py", "dot"),
        ("net.py", "net.py", "json"),
        ("net.py", "./sub/../net.py", "svg"),
        ("net.py:build", "net.py", "dot"),
        ("net.py", "net.py", "html"),
    ],
)
def test_render_refuses_to_write_over_its_model_file(tmp_path, monkeypatch, model, output, fmt):
    monkeypatch.chdir(tmp_path)
    source = (REPO / "samples" / "affine.py").read_text() + "\ndef build():\n    return model, example_inputs\n"
    Path("net.py").write_text(source)
    result = CliRunner().invoke(main, ["render", model, "-o", output, "--format", fmt])
    assert result.exit_code == 1, result.output
    shown = os.fspath(Path(output))
    assert result.output == f"Error: Cannot write {shown!r}: {REFUSED.format(read='net.py')}\n"
    assert Path("net.py").read_text() == source
    assert sorted(os.listdir(".")) == ["net.py"]


def test_render_refuses_to_write_over_its_export_archive(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    torch.export.save(torch.export.export(torch.nn.Linear(2, 1), (torch.ones(1, 2),)), "net.pt2")
    before = Path("net.pt2").read_bytes()
    result = CliRunner().invoke(main, ["render", "net.pt2", "-q", "-o", "net.pt2", "--format", "dot"])
    assert result.exit_code == 1, result.output
    assert result.output == f"Error: Cannot write 'net.pt2': {REFUSED.format(read='net.pt2')}\n"
    assert Path("net.pt2").read_bytes() == before


@posix_only
def test_write_atomic_refuses_an_input_by_another_name(tmp_path):
    from graphviz_autograd.drawing.rendering import write_atomic

    model = tmp_path / "net.py"
    model.write_text("kept")
    os.link(model, tmp_path / "hard.py")
    os.symlink(model, tmp_path / "soft.py")
    for name in ("hard.py", "soft.py"):
        with pytest.raises(OutputPathError, match="it is the input .* that this command reads"):
            write_atomic(tmp_path / name, b"lost", inputs=[model])
    assert model.read_text() == "kept"
    assert sorted(os.listdir(tmp_path)) == ["hard.py", "net.py", "soft.py"]


# --- 14. what the command writes to a terminal -------------------------------------

HOSTILE_NAMES_MODEL = """
import torch
from torch import nn

NAMES = ["u\\x1b]0;pwned\\x07", "n\\x00ul", "b\\x08x", "s\\udcff", "a\\ud800b", "one\\x01", "four\\\\x01"]

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        for name in NAMES:
            self.add_module(name, nn.Linear(2, 2))
        self.add_module("idle\\x1b[2J", nn.Linear(2, 2))

    def forward(self, x):
        for name in NAMES:
            x = getattr(self, name)(x)
        return x

model = Net()
example_inputs = (torch.ones(1, 2),)
"""
# How each name above is written to a terminal: one escape, a backslash doubled.
SHOWN_NAMES = ["u\\x1b]0;pwned\\x07", "n\\x00ul", "b\\x08x", "s\\udcff", "a\\ud800b", "one\\x01", "four\\\\x01"]


def assert_terminal_safe(data: bytes) -> str:
    text = data.decode("utf-8")  # no 0xff, no encoded surrogate
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text), text
    return text


@posix_only
@pytest.mark.parametrize("command", [["check", "--top-memory", "10"], ["profile", "--steps", "1", "--warmup", "1"]])
def test_names_reach_the_terminal_escaped(tmp_path, command):
    (tmp_path / "net.py").write_text(HOSTILE_NAMES_MODEL)
    done = subprocess.run(
        [sys.executable, "-m", "graphviz_autograd", command[0], "net.py", *command[1:]],
        cwd=tmp_path, env=subprocess_env(), capture_output=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    stdout = assert_terminal_safe(done.stdout)
    assert_terminal_safe(done.stderr)
    for shown in SHOWN_NAMES[1:] if command[0] == "check" else SHOWN_NAMES:
        assert f"\n{shown} " in stdout or f" {shown} " in stdout, (shown, stdout)
    if command[0] == "check":
        assert "idle\\x1b[2J.weight" in stdout  # the unused layer's finding


@posix_only
def test_error_messages_reach_the_terminal_escaped(tmp_path):
    (tmp_path / "net.py").write_text("raise ValueError('bad \\x1b]0;pwned\\x07 \\udcff name')\n")
    done = subprocess.run(
        [sys.executable, "-m", "graphviz_autograd", "check", "net.py", "-q"],
        cwd=tmp_path, env=subprocess_env(), capture_output=True, timeout=120,
    )
    assert done.returncode == 1
    stderr = assert_terminal_safe(done.stderr)
    assert stderr == "Error: net.py:1: importing the model file raised ValueError: bad \\x1b]0;pwned\\x07 \\udcff name\n"


@posix_only
def test_os_exit_names_the_model_file_as_given(tmp_path):
    (tmp_path / "net.py").write_text(textwrap.dedent(EXIT_IN_FORWARD))
    done = run_module("check", "net.py", "-q", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("Error: net.py:12: os._exit(0) was called"), done.stderr


# --- 15. what libraries print while a model loads ----------------------------------


@posix_only
def test_a_corrupt_archive_is_one_line_without_torchs_traceback(tmp_path):
    # The stored example inputs spoilt: torch logs a traceback, then raises an error that
    # points at "the warnings above".
    torch.export.save(torch.export.export(torch.nn.Linear(2, 1), (torch.ones(1, 2),)), tmp_path / "good.pt2")
    data = (tmp_path / "good.pt2").read_bytes()
    with zipfile.ZipFile(tmp_path / "good.pt2") as archive:
        inputs = next(i for i in archive.infolist() if "sample_inputs" in i.filename)
    # Past its first bytes (torch.save's own zip), so that torch reads it as one and fails.
    header = inputs.header_offset
    name_length, extra_length = struct.unpack("<HH", data[header + 26:header + 30])  # the local header's own
    start = header + 30 + name_length + extra_length + 64
    spoilt = inputs.compress_size - 64
    (tmp_path / "bad.pt2").write_bytes(data[:start] + bytes(spoilt) + data[start + spoilt:])
    done = run_module("render", "bad.pt2", "-q", "-o", "bad.dot", cwd=tmp_path)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    # The reason torch logged, not the error that points at it.
    assert done.stderr.startswith("Error: bad.pt2: torch.export.load() cannot read it (RuntimeError: PytorchStreamReader failed"), done.stderr
    assert "warnings above" not in done.stderr
    debugged = run_module("render", "bad.pt2", "-q", "-o", "bad.dot", "--debug", cwd=tmp_path)
    assert debugged.returncode == 1 and "Ran into the following error when deserializing" in debugged.stderr
    assert sorted(os.listdir(tmp_path)) == ["bad.pt2", "good.pt2"]


def test_a_library_warning_while_loading_is_a_note(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("net.py").write_text(
        (REPO / "samples" / "affine.py").read_text()
        + "\nimport logging, warnings\nlogging.getLogger('torch.export').warning('ran into\\n  a second line')\n"
        + "warnings.warn('old\\x1b[2J api', UserWarning)\n"
    )
    result = CliRunner().invoke(main, ["render", "net.py", "-q", "-o", "net.dot"])
    assert result.exit_code == 0, result.output
    assert result.output == (
        "note: net.py: while it was loaded, torch.export logged: ran into (--debug shows it whole)\n"
        "note: net.py: while it was loaded, UserWarning: old\\x1b[2J api (--debug shows it whole)\n"
    )


# --- 16. a model with nothing that requires grad -----------------------------------


def test_profiling_a_model_with_nothing_requiring_grad_says_what_to_change(tmp_path, monkeypatch):
    from graphviz_autograd import NoGraphError, profile_step

    frozen = torch.nn.Linear(2, 1).requires_grad_(False)
    with pytest.raises(NoGraphError) as raised:
        profile_step(frozen, (torch.ones(1, 2),), steps=1, warmup=1)
    assert str(raised.value) == (
        "Nothing to profile: the output of the forward pass has no autograd graph, so a training step has no backward "
        "pass to time; every one of the 2 parameters of Linear is frozen (requires_grad=False). Make a parameter "
        "trainable (requires_grad_(True)) and run the forward pass with gradients enabled."
    )
    monkeypatch.chdir(tmp_path)
    Path("frozen.py").write_text(
        "import torch\nmodel = torch.nn.Linear(2, 1).requires_grad_(False)\nexample_inputs = (torch.ones(1, 2),)\n"
    )
    result = CliRunner().invoke(main, ["profile", "frozen.py", "-q"])
    assert result.exit_code == 1
    assert result.output == f"Error: frozen.py: {raised.value}\n"
