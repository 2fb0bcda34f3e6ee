"""Run a command's work in a process of its own, so that nothing it runs can end
the command quietly.

A model file is the user's code, run in our process. ``sys.exit()`` raises, and
the loader turns it into an error, but ``os._exit(0)``, a C extension that calls
``exit()`` or crashes, or the kernel's out-of-memory killer end the process on
the spot: status 0, no message, no file, and a shell script or CI job goes on
as if the drawing were made. So on POSIX the command forks before it imports
torch: the child does all the work and says, through a pipe, that it got to the
end; the parent waits and turns any other end into one line and a non-zero
status. ``os._exit`` called in the child first writes the caller's file and line
into the pipe, so the message can name them.

The fork happens only where it is safe and cheap: when ``os.fork`` exists, no
torch is loaded yet (a forked process cannot use the thread pools its parent
started) and stdout and stderr are real files the child can write to (under a
test runner that captures them in memory, the work runs in this process).

Ctrl-C ends a command with status 130, as shells expect, and one line saying it
was interrupted; output is written atomically, so no file is left half-written.
SIGTERM and SIGHUP are passed on to the child. A command killed outright (SIGKILL,
the out-of-memory killer) passes nothing on, so the child watches for it: once its
parent is gone it stops its work as Ctrl-C does (Graphviz stopped, nothing written)
rather than running on by itself.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from typing import Callable, NoReturn, Optional, Sequence

import click

from ..views.shown import terminal_text

INTERRUPTED_STATUS = 130  # 128 + SIGINT: what a shell reports for a command stopped by Ctrl-C
INTERRUPTED_MESSAGE = "Error: interrupted; nothing was written."
# How long the parent waits, after Ctrl-C, for the child to stop by itself (its
# KeyboardInterrupt removes temporary files) before it is killed.
STOP_GRACE_SECONDS = 5.0
# How often the child looks whether the command's process is still there.
PARENT_POLL_SECONDS = 0.2
ORPHANED_MESSAGE = "Error: the command was killed; its work stopped and nothing was written."
_orphaned = threading.Event()  # set in the child once its parent is gone

_DONE = "done"
_EXIT = "exit"


def run_command(work: Callable[[], None], inputs: Sequence[str] = ()) -> None:
    """Call ``work`` (a command's whole body), in a child process where that is safe.

    Returns when it succeeded; otherwise raises ``click.exceptions.Exit`` with its
    status, after the reason was said on stderr. ``inputs`` are the paths of the
    files the command reads as the user gave them: a file that ended the process is
    named so, as every other message names it.
    """
    if not _can_fork():
        _run_here(work)
        return
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; measured through the command in tests
        os.close(read_end)
        _child(work, write_end)
    os.close(write_end)
    status, stopped_by = _wait(pid)
    report = _read_all(read_end)
    code = _outcome(status, report, stopped_by, inputs)
    if code:
        raise click.exceptions.Exit(code)


def _can_fork() -> bool:
    return hasattr(os, "fork") and "torch" not in sys.modules and _has_fd(sys.stdout) and _has_fd(sys.stderr)


def _has_fd(stream: object) -> bool:
    try:
        return stream is not None and stream.fileno() >= 0  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return False


def _run_here(work: Callable[[], None]) -> None:
    try:
        work()
    except KeyboardInterrupt:
        click.echo(INTERRUPTED_MESSAGE, err=True)
        raise click.exceptions.Exit(INTERRUPTED_STATUS) from None


def _child(work: Callable[[], None], pipe: int) -> NoReturn:  # pragma: no cover - runs in the child
    real_exit = os._exit

    def reporting_exit(status: int) -> NoReturn:
        caller = sys._getframe(1)
        _flush()
        _send(pipe, f"{_EXIT} {status} {caller.f_code.co_filename}:{caller.f_lineno}")
        real_exit(status)

    os._exit = reporting_exit  # this process is ours alone, and ends with the command
    _watch_parent(os.getppid(), real_exit)
    code = 1
    try:
        code = _status_of(work)
        _flush()
        _send(pipe, f"{_DONE} {code}")
    finally:
        _flush()
        real_exit(code)


def _watch_parent(parent: int, exit_now: Callable[[int], object]) -> None:  # pragma: no cover - runs in the child
    """Stop this child's work once ``parent`` (the command's process) is gone without
    having passed a signal on: a SIGINT to itself stops it as Ctrl-C does (Graphviz
    killed, temporary files removed, nothing written); ended outright when that has
    not worked within ``STOP_GRACE_SECONDS`` (work stuck in C code)."""

    # A command started with SIGINT ignored (a script's background job: `cmd &`) would not stop
    # on a SIGINT to itself, and ended silently after the grace: a signal of its own stands in
    # for it there, whose handler (set here, in the main thread) interrupts the work as Ctrl-C does.
    stop = signal.SIGINT
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN and hasattr(signal, "SIGUSR1"):
        stop = signal.SIGUSR1
        signal.signal(stop, _interrupt)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        _orphaned.set()
        os.kill(os.getpid(), stop)
        time.sleep(STOP_GRACE_SECONDS)
        exit_now(INTERRUPTED_STATUS)

    threading.Thread(target=watch, name="parent watch", daemon=True).start()


def _interrupt(*_: object) -> NoReturn:  # pragma: no cover - runs in the child
    raise KeyboardInterrupt


def _status_of(work: Callable[[], None]) -> int:  # pragma: no cover - runs in the child
    """Run ``work`` and say what click would have said of it; return the exit status."""
    try:
        work()
        return 0
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.ClickException as error:
        error.show()
        return error.exit_code
    except click.Abort:
        click.echo("Aborted!", err=True)
        return 1
    except KeyboardInterrupt:
        click.echo(ORPHANED_MESSAGE if _orphaned.is_set() else INTERRUPTED_MESSAGE, err=True)
        return INTERRUPTED_STATUS
    except SystemExit as done:
        if done.code is None or isinstance(done.code, int):
            return done.code or 0
        click.echo(terminal_text(str(done.code)), err=True)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def _send(pipe: int, line: str) -> None:
    try:
        os.write(pipe, (line + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def _wait(pid: int) -> tuple[int, Optional[int]]:
    """The child's wait status, and the signal that stopped the command while waiting
    (SIGINT for Ctrl-C), if one did.

    On Ctrl-C the child (in the same process group) gets SIGINT too and stops by
    itself, cleaning up; when it has not within a second (the SIGINT was sent to
    this process alone) it is sent one, and it is killed when it has not stopped
    ``STOP_GRACE_SECONDS`` later, or at a second Ctrl-C. SIGTERM and SIGHUP sent
    to this process are passed on to the child, so that ``timeout`` or a closed
    terminal does not leave it running on its own.
    """
    forwarded: list[int] = []

    def forward(signum: int, frame: object) -> None:
        forwarded.append(signum)
        _signal(pid, signum)

    previous = {}
    for number in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[number] = signal.signal(number, forward)
        except (ValueError, OSError):  # not the main thread: nothing to pass on from here
            pass
    try:
        try:
            status = os.waitpid(pid, 0)[1]
            return status, forwarded[0] if forwarded else None
        except KeyboardInterrupt:
            pass
        try:
            status_or_none = _wait_at_most(pid, 1.0)
            if status_or_none is None:
                _signal(pid, signal.SIGINT)
                status_or_none = _wait_at_most(pid, STOP_GRACE_SECONDS)
            if status_or_none is not None:
                return status_or_none, signal.SIGINT
        except KeyboardInterrupt:
            pass
        _signal(pid, signal.SIGKILL)
        return os.waitpid(pid, 0)[1], signal.SIGINT
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _wait_at_most(pid: int, seconds: float) -> Optional[int]:
    """The child's wait status once it ends, or None when it runs ``seconds`` longer."""
    deadline = time.monotonic() + seconds
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except OSError:  # already gone
        pass


def _read_all(pipe: int) -> list[str]:
    chunks = []
    with os.fdopen(pipe, "rb") as reader:
        chunks.append(reader.read())
    return b"".join(chunks).decode("utf-8", "replace").splitlines()


def _outcome(status: int, report: list[str], stopped_by: Optional[int], inputs: Sequence[str] = ()) -> int:
    """The command's exit status, after saying on stderr why it did not finish when it did not."""
    for line in report:
        kind, _, rest = line.partition(" ")
        if kind == _DONE:
            return int(rest)
    if stopped_by == signal.SIGINT:
        click.echo(INTERRUPTED_MESSAGE, err=True)
        return INTERRUPTED_STATUS
    if stopped_by is not None:
        click.echo(f"Error: stopped by {_signal_name(stopped_by)}; nothing was written.", err=True)
        return 128 + stopped_by
    exits = [line.split(" ", 2) for line in report if line.startswith(_EXIT + " ")]
    if exits:
        _, code, where = exits[-1]
        where = _as_given(where, inputs)
        reason = (
            f"{where}: os._exit({code}) was called, which ends the process at once: "
            "graphviz-autograd did not finish and wrote nothing. A model file must not exit; keep script code "
            'under `if __name__ == "__main__":`.'
        )
    elif os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number == signal.SIGINT:
            click.echo(INTERRUPTED_MESSAGE, err=True)
            return INTERRUPTED_STATUS
        reason = (
            f"the process was killed by {_signal_name(number)} before it finished"
            f"{' (the system may have run out of memory)' if number == signal.SIGKILL else ''}; nothing was written. "
            "The model's code or a library it calls crashed it: run the model on its own to see where, "
            "or try a smaller input (--input-shape)."
        )
    else:
        ended = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
        reason = (
            f"the process ended with status {ended} before it finished: the model's code, or a library it calls, "
            "ended it (exit() from C code, say); nothing was written."
        )
    click.echo(f"Error: {terminal_text(reason, one_line=True)}", err=True)
    return 1


def _as_given(where: str, inputs: Sequence[str]) -> str:
    """'file:line' with the file named as the user gave it, when it is one of ``inputs``
    (Python names a loaded file by its absolute path)."""
    filename, colon, line = where.rpartition(":")
    for given in inputs:
        try:
            if os.path.abspath(filename) == os.path.abspath(given):
                return f"{given}{colon}{line}"
        except (TypeError, ValueError):  # a NUL in a name given on the command line
            continue
    return where


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
