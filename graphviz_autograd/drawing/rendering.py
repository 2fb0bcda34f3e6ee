"""Run Graphviz and write files. The only module that starts a subprocess or writes
output, and it writes atomically: a failed render leaves no partial file and leaves
a file already at the target untouched.

>>> format_for_path("graph.svg")
'svg'
"""

from __future__ import annotations

import math
import os
import secrets
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Literal, Optional, Sequence, Union

from ..errors import GRAPHVIZ_INSTALL_HINT, GraphvizNotFoundError, LayoutTimeoutError, OptionError, OutputPathError, RenderError, check_choice

# Suffix -> Graphviz output format. DOT is written as text and needs no Graphviz.
SUFFIX_FORMATS = {".dot": "dot", ".gv": "dot", ".svg": "svg", ".pdf": "pdf", ".png": "png", ".html": "html"}
# "html" is the explorer page (explore.py), which runs Graphviz per level itself.
FORMATS = ("dot", "svg", "pdf", "png", "html")
# What format= takes (upper case and a leading dot are accepted too).
OutputFormat = Literal["dot", "gv", "svg", "pdf", "png", "html"]
DEFAULT_TIMEOUT = 600.0
# Graphviz programs we run, with their arguments. "neato" draws DOT whose nodes all
# carry a position in points (the fixed layout) and lays out nothing itself (-n2).
ENGINES = {"dot": (), "neato": ("-n2",)}
# Arguments for one engine and format. A PNG is a bitmap of 4 bytes a pixel, and
# Graphviz bounds only each side (32,767 pixels). A dot layout of a big model is a
# tall strip that this bound keeps to tens of megapixels, but the fixed layout
# folds a big graph into a block about as broad as it is long (layout._Bands), which
# would make a bitmap of up to a gigapixel: GPT-2 with 250 layers, 24,002 by 32,456
# pixels, took neato 27.7 s and 3.1 GB. Such a drawing is scaled down to fit 120
# inches a side (11,520 pixels at Graphviz's 96 dpi): 4.5 s and 0.48 GB. A drawing
# smaller than that is not scaled.
FORMAT_ARGUMENTS = {("neato", "png"): ("-Gsize=120,120",)}

PathLike = Union[str, "os.PathLike[str]"]


def format_for_path(path: PathLike, format: Optional[str] = None) -> str:
    """The output format: ``format`` when given, else the one the file suffix names."""
    if format is not None:
        fmt = format.lower().lstrip(".")
        if fmt == "gv":
            fmt = "dot"
        if fmt not in FORMATS:
            raise OptionError(f"Unknown output format {format!r}; use one of: {', '.join(FORMATS)}.")
        return fmt
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIX_FORMATS:
        shown = suffix or "no suffix"
        raise OptionError(
            f"Cannot tell the output format of {os.fspath(path)!r} ({shown}); "
            f"end the file name in one of {', '.join(SUFFIX_FORMATS)} or pass format=."
        )
    return SUFFIX_FORMATS[suffix]


def find_dot(engine: str = "dot") -> str:
    """The path of a Graphviz executable (``dot`` unless ``engine`` names another), or a
    GraphvizNotFoundError saying how to get it."""
    found = shutil.which(engine)
    if found is None:
        raise GraphvizNotFoundError(
            f"The Graphviz '{engine}' executable was not found on PATH, and SVG, PDF and PNG output need it. "
            f"{GRAPHVIZ_INSTALL_HINT}."
        )
    return found


def check_timeout(timeout: Optional[float]) -> Optional[float]:
    """``timeout`` if it is a positive number of seconds, None for no limit; OptionError otherwise."""
    if timeout is None or timeout == math.inf:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise OptionError(f"timeout must be a positive number of seconds or None; got {timeout!r}.")
    return timeout


# What to do when Graphviz runs past its timeout, or is killed (run_dot's ``advice``).
TIMEOUT_ADVICE = (
    "Pass a larger timeout= (--timeout on the command line), draw it with layout='fixed' "
    "(--layout fixed), collapse it with depth= (--depth), or write .dot and lay it out separately."
)
KILLED_ADVICE = "A very large graph can exhaust memory: write .dot instead, or draw a smaller part of the graph."


def run_dot(
    source: str,
    fmt: str,
    *,
    timeout: Optional[float] = DEFAULT_TIMEOUT,
    engine: str = "dot",
    advice: Optional[tuple[str, str]] = None,
) -> bytes:
    """Lay out and draw DOT ``source`` in ``fmt`` with Graphviz; return the bytes.

    ``engine="neato"`` runs ``neato -n2`` instead of ``dot``, for DOT that pins
    every node (:func:`graphviz_autograd.drawing.layout.fixed_layout_lines`). The program
    runs in a session of its own, so that on a timeout (or Ctrl-C) it is
    stopped together with anything it started: killing only a ``dot`` that is a
    wrapper script would leave its child running, holding our pipes open.
    ``advice`` replaces what the error of a timeout and of a killed Graphviz tell the
    user to do (``(TIMEOUT_ADVICE, KILLED_ADVICE)``), for a caller with other options.
    """
    timeout_advice, killed_advice = advice or (TIMEOUT_ADVICE, KILLED_ADVICE)
    timeout = check_timeout(timeout)
    check_choice("engine", engine, ENGINES)
    executable = find_dot(engine)
    try:
        process = subprocess.Popen(
            [executable, *ENGINES[engine], *FORMAT_ARGUMENTS.get((engine, fmt), ()), f"-T{fmt}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as error:
        raise RenderError(f"Graphviz '{engine}' could not be started ({executable}): {error}.") from None
    try:
        stdout, stderr = process.communicate(source.encode("utf-8"), timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(process)
        raise LayoutTimeoutError(
            f"Graphviz '{engine}' did not finish laying out the graph within {timeout:g} s. {timeout_advice}"
        ) from None
    except BaseException:
        _stop(process)
        raise
    if process.returncode < 0:
        raise RenderError(
            f"Graphviz '{engine}' was killed by {_signal_name(-process.returncode)} before it finished "
            f"drawing the graph as {fmt}. {killed_advice}"
        )
    if process.returncode != 0:
        message = stderr.decode("utf-8", "replace").strip() or f"exit status {process.returncode}"
        raise RenderError(f"Graphviz '{engine}' failed to draw the graph as {fmt}: {message}")
    if not stdout:
        raise RenderError(f"Graphviz '{engine}' exited without error but drew nothing as {fmt}.")
    check_drawing(stdout, fmt, engine)
    return stdout


# The first bytes of a file in each binary format Graphviz writes.
MAGIC_BYTES = {"pdf": b"%PDF-", "png": b"\x89PNG\r\n\x1a\n"}
# The last chunk of every PNG: length 0, type IEND, and its CRC.
PNG_END = b"\x00\x00\x00\x00IEND\xaeB`\x82"
# A PDF ends with its cross-reference offset and this trailer line (then maybe a newline).
PDF_END = b"%%EOF"
# How far from the end of a PDF ``startxref`` and ``%%EOF`` may lie.
PDF_TAIL = 1024


def check_drawing(data: bytes, fmt: str, engine: str = "dot") -> None:
    """Raise RenderError unless ``data`` is what a whole drawing in ``fmt`` must be.

    A PDF or PNG must start with its format's signature and an SVG must parse as
    XML whose root is ``<svg>``: a broken or wrapped Graphviz that exits 0 with
    something else on stdout must not have it saved under the drawing's name.
    And it must be complete: a PDF ends with ``startxref`` and ``%%EOF``, a PNG
    with its IEND chunk, an SVG closes its root, so that a Graphviz that stops
    part-way and still exits 0 (killed output pipe, full disk of its own, a crash
    its wrapper hides) does not replace a good file with half of one.

    >>> check_drawing(b"%PDF-1.7 ... startxref 9 %%EOF", "pdf")
    >>> check_drawing(b"digraph {}", "png")
    Traceback (most recent call last):
    ...
    graphviz_autograd.errors.RenderError: Graphviz 'dot' exited without error but its output is not a PNG file: it begins 'digraph {}'. Check that 'dot -V' runs the Graphviz you meant, or write .dot instead.
    >>> check_drawing(b"%PDF-1.7 ...", "pdf")
    Traceback (most recent call last):
    ...
    graphviz_autograd.errors.RenderError: Graphviz 'dot' exited without error but its PDF output was cut short (12 bytes, no %%EOF trailer at the end): nothing was written. Run it again; if it keeps happening, check that 'dot -V' runs the Graphviz you meant and that it has memory and disk space, or write .dot instead.
    """
    fmt = fmt.partition(":")[0]  # "png:cairo": the format, drawn by a renderer of choice
    magic = MAGIC_BYTES.get(fmt)
    if magic is not None:
        ok = data.startswith(magic)
    elif fmt == "svg":
        root = _svg_root(data)
        ok = root == "svg" or (root is None and b"<svg" in data)  # None: cut within the root's own tag
    else:
        return
    if not ok:
        shown = data[:40].decode("utf-8", "replace").strip()
        raise RenderError(
            f"Graphviz '{engine}' exited without error but its output is not a{'n' if fmt == 'svg' else ''} "
            f"{fmt.upper()} file: it begins {shown!r}. Check that '{engine} -V' runs the Graphviz you meant, "
            "or write .dot instead."
        )
    missing = _missing_end(data, fmt)
    if missing:
        raise RenderError(
            f"Graphviz '{engine}' exited without error but its {fmt.upper()} output was cut short "
            f"({len(data):,} bytes, {missing}): nothing was written. Run it again; if it keeps happening, "
            f"check that '{engine} -V' runs the Graphviz you meant and that it has memory and disk space, "
            "or write .dot instead."
        )


def _missing_end(data: bytes, fmt: str) -> str:
    """What the end of a drawing lacks ('' when it is whole)."""
    if fmt == "png":
        return "" if data.endswith(PNG_END) else "no IEND chunk at the end"
    if fmt == "pdf":
        tail = data[-PDF_TAIL:]
        if not tail.rstrip().endswith(PDF_END):
            return "no %%EOF trailer at the end"
        return "" if b"startxref" in tail else "no startxref before its %%EOF"
    if fmt == "svg":
        return "" if _is_svg(data) else "the XML ends before its <svg> element is closed"
    return ""


def _svg_root(data: bytes, whole: bool = False) -> Optional[str]:
    """The local name of the root element of XML ``data``, read as far as it goes: a
    cut-short SVG still has its ``<svg>`` root. '' when the XML is broken before a
    root, None when it is well formed so far but stops before the root's tag ends.
    With ``whole``, the XML must also end where it should: '' when it does not.

    Parsed with expat, which fetches no external entity and expands no DTD from
    elsewhere; Graphviz's SVG declares its DTD by reference only.
    """
    from xml.parsers import expat

    parser = expat.ParserCreate(namespace_separator=" ")
    roots: list[str] = []

    def start(name: str, attrs: dict) -> None:
        if not roots:
            roots.append(name.rpartition(" ")[2])

    parser.StartElementHandler = start
    try:
        parser.Parse(data, whole)
    except expat.ExpatError:
        return "" if whole else (roots[0] if roots else "")
    return roots[0] if roots else None


def _is_svg(data: bytes) -> bool:
    """Whether ``data`` parses whole as XML with an ``<svg>`` root (in any namespace)."""
    return _svg_root(data, whole=True) == "svg"


def _stop(process: subprocess.Popen) -> None:
    """Kill ``dot`` and everything in its session, then reap it."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except OSError:  # already gone
        pass
    for pipe in (process.stdin, process.stdout, process.stderr):
        try:
            if pipe is not None:
                pipe.close()
        except OSError:
            pass
    process.wait()


def _signal_name(number: int) -> str:
    try:
        return f"signal {signal.Signals(number).name}"
    except ValueError:
        return f"signal {number}"


def check_writable(path: PathLike, *, inputs: Sequence[PathLike] = (), folder: bool = False) -> Path:
    """Fail early, before any layout work, when ``path`` cannot be written.

    ``inputs`` are the files the same command reads (a model file, an archive): a path
    that is one of them, however it is spelled (``./sub/../net.py``, a link), is refused,
    since writing it would lose what it holds. With ``folder``, ``path`` is a folder to
    write files into (a log folder), made when missing: it must not be a file.

    >>> check_writable("net.py", inputs=["./net.py"])
    Traceback (most recent call last):
    ...
    graphviz_autograd.errors.OutputPathError: Cannot write 'net.py': it is the input './net.py' that this command reads, and writing it would lose what it holds; give another output path.
    """
    target = Path(path)
    for read in inputs:
        if _same_file(target, Path(read)):
            raise OutputPathError(
                f"Cannot write {os.fspath(path)!r}: it is the input {os.fspath(read)!r} that this command reads, "
                "and writing it would lose what it holds; give another output path."
            )
    if folder:
        if target.exists() and not target.is_dir():
            raise OutputPathError(f"Cannot write into {os.fspath(path)!r}: it is a file, not a folder. Give a folder's path.")
        existing = target
        while not existing.is_dir() and existing != existing.parent:  # the folder made for it lies in the first that exists
            if existing.exists():
                raise OutputPathError(
                    f"Cannot write into {os.fspath(path)!r}: {os.fspath(existing)!r} is a file, not a folder. Give a folder's path."
                )
            existing = existing.parent
        if not os.access(existing if str(existing) else Path("."), os.W_OK):
            raise OutputPathError(f"Cannot write into {os.fspath(path)!r}: the folder {os.fspath(existing)!r} is not writable.")
        return target
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise OutputPathError(f"Cannot write {os.fspath(path)!r}: the directory {os.fspath(directory)!r} does not exist. Create it first.")
    if target.is_dir():
        raise OutputPathError(f"Cannot write {os.fspath(path)!r}: it is a directory. Give a file name.")
    if not os.access(directory, os.W_OK):
        raise OutputPathError(f"Cannot write {os.fspath(path)!r}: the directory {os.fspath(directory)!r} is not writable.")
    return target


def _same_file(target: Path, read: Path) -> bool:
    """Whether writing ``target`` would write over ``read``: the same path once resolved
    (``..`` and links followed), or the same file by another name (a hard link)."""
    try:
        if target.resolve() == read.resolve():
            return True
        return target.exists() and read.exists() and os.path.samefile(target, read)
    except (OSError, RuntimeError):  # a loop of links: neither can be written or read through it
        return False


def write_atomic(path: PathLike, data: bytes, *, inputs: Sequence[PathLike] = ()) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same directory: every
    file the package writes goes through here, after :func:`check_writable` (with
    ``inputs``, the files the caller reads, which it refuses to write over). A failure
    is an :class:`OutputPathError` naming the path, and leaves no temporary file.

    A new file gets the mode ``open()`` would give it (0666 less the umask); a file
    that is replaced keeps its mode.
    """
    target = check_writable(path, inputs=inputs)
    try:
        fd, tmp = _create_beside(target)
    except OSError as error:
        raise _cannot_write(path, error) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        mode = _existing_mode(target)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as error:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(error, OSError):
            raise _cannot_write(path, error) from None
        raise
    return target


def render_source(
    source: str, path: PathLike, *, format: Optional[str] = None, timeout: Optional[float] = DEFAULT_TIMEOUT, engine: str = "dot"
) -> Path:
    """Write DOT ``source`` to ``path`` as DOT text or drawn by Graphviz ``engine`` (see :func:`run_dot`)."""
    fmt = format_for_path(path, format)
    check_timeout(timeout)
    check_choice("engine", engine, ENGINES)
    check_writable(path)
    data = source.encode("utf-8") if fmt == "dot" else run_dot(source, fmt, timeout=timeout, engine=engine)
    return write_atomic(path, data)


def _create_beside(target: Path) -> tuple[int, Path]:
    """Create and open an unused ``.<name>.<random>.tmp`` next to ``target``.

    Created with mode 0666 for the kernel to apply the umask in force now, as
    open() does (tempfile.mkstemp would make it 0600, and reading the umask means
    setting it, which races with other threads).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue


def _existing_mode(target: Path) -> Optional[int]:
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        return None


def _cannot_write(path: PathLike, error: OSError) -> OutputPathError:
    return OutputPathError(f"Cannot write {os.fspath(path)!r}: {error.strerror or error}.")
