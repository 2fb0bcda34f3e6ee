"""Time to the default picture of each model of the test zoo (``tests/zoo.py``), against torchviz.

Run by hand from the repository root::

    PYTHONPATH=. python -m benchmarks.zoo               # every model (about a minute)
    PYTHONPATH=. python -m benchmarks.zoo --only gpt2 bert --repeat 9
    PYTHONPATH=. python -m benchmarks.zoo --profile     # where our time goes, over the whole zoo
    PYTHONPATH=. python -m benchmarks.zoo --before DIR  # the Python part, against another checkout

Columns, per model (times in milliseconds, the best of ``--repeat`` runs, ours and
torchviz's taken in turn so that both see the same load):

- ``ours``: ``record`` around the forward pass, ``make_dot(loss, recorder=rec)`` (the
  default drawing: ``depth="fit"``) and Graphviz ``dot -Tsvg`` on its source.
- ``torchviz``: the forward pass, ``torchviz.make_dot(loss, params)`` and ``dot -Tsvg``
  on its source (its ``render`` to SVG runs the same command).
- ``ours/tv``: the ratio of the two, in the same run.
- ``dot``: of ``ours``, Graphviz's share.
- ``nodes``: of the walked graph; ``depth``: the depth the default drawing chose
  (``all``: every node, runs of blocks folded); ``drawn``: nodes drawn.
- ``picture pt``: the size of our SVG, width x height in points.
- ``explore``: the time :func:`graphviz_autograd.explorer.pages` takes to build the page
  (the forward pass not counted) and ``page KiB`` its size.
- ``findings``: of ``check(loss, model, recorder=rec, backward=True)``, errors,
  warnings and infos.

With ``--recorder`` it prints the recorder's cost instead, per model (Python only, no
Graphviz): ``forward`` (a plain forward pass), ``recorded`` (the same under ``record``)
and their ratio; ``ours`` (``record`` around the forward pass, the loss and ``make_dot``
of the default picture, its DOT source) against ``tv`` (a plain forward pass, the loss
and ``torchviz.make_dot(loss, params).source``), and their ratio; ``floor`` (a forward
pass under a ``TorchFunctionMode`` that only calls on, with a stand-in ``forward`` that only
calls on set on every module and taken off after, as ``record`` sets its own: what watching
each op and each module call costs before anything is noted) and its ratio to a plain
forward; each the best of
``--repeat`` runs by the process's CPU time (all of it is Python on one thread: CPU time
counts the work, not the waits for a core another process holds), or with ``--mean`` their
mean: the best leaves out the runs in which Python's garbage collector went over every object
of the process, which a user waits for on average. With ``--before DIR``
too, the ``recorded`` and ``ours`` columns of that checkout come first, timed in turn
in the same process.

With ``--before DIR`` (the root of another checkout, as for ``benchmarks.compare``)
it times the Python part of ``ours`` instead (``record``, the forward pass and
``make_dot``; Graphviz is the same program for both) of that checkout and of this
one, alternately in one process, and says whether both wrote the same DOT.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import gc
import io
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Optional

import torch
from torch.overrides import TorchFunctionMode

from graphviz_autograd import check, explore, make_dot, record, walk
from graphviz_autograd.views.page_fit import fit_to_page
from tests.zoo import ZOO, build, forward, loss_of

from .compare import import_checkout
from .stand_ins import stand_in_forwards


@dataclass
class Row:
    name: str
    ours: float = 0.0
    torchviz: Optional[float] = None
    dot: float = 0.0
    nodes: int = 0
    depth: str = ""
    drawn: int = 0
    picture: str = ""
    explore: float = 0.0
    page_bytes: int = 0
    findings: str = ""


def svg(source: str) -> bytes:
    """``dot -Tsvg`` of ``source``."""
    done = subprocess.run(["dot", "-Tsvg"], input=source.encode("utf-8"), capture_output=True, check=True)
    return done.stdout


def our_picture(model: torch.nn.Module, inputs: dict) -> tuple[Any, bytes]:
    """Record, forward, the default drawing, and Graphviz: what a user waits for."""
    with record(model) as rec:
        outputs = forward(model, inputs)
    with contextlib.redirect_stderr(io.StringIO()):  # the note of a summary drawing
        dot = make_dot(loss_of(outputs), recorder=rec)
    return dot, svg(dot.source)


def torchviz_picture(model: torch.nn.Module, inputs: dict) -> bytes:
    import torchviz

    loss = loss_of(forward(model, inputs))
    return svg(torchviz.make_dot(loss, params=dict(model.named_parameters())).source)


def timed(function: Callable[[], Any], clock: Callable[[], float] = time.perf_counter) -> float:
    gc.collect()
    start = clock()
    function()
    return clock() - start


def measure(name: str, repeat: int, with_torchviz: bool) -> Row:
    row = Row(name)
    model, inputs = build(name)
    our_picture(model, inputs)  # the first forward of a model pays for lazy set-up: not timed
    ours, theirs, dots = [], [], []
    for _ in range(repeat):
        ours.append(timed(lambda: our_picture(model, inputs)))
        if with_torchviz:
            theirs.append(timed(lambda: torchviz_picture(model, inputs)))
    row.ours = min(ours)
    row.torchviz = min(theirs) if theirs else None
    dot, picture = our_picture(model, inputs)
    for _ in range(repeat):
        dots.append(timed(lambda: svg(dot.source)))
    row.dot = min(dots)
    size = re.search(rb'<svg width="([\d.]+)pt" height="([\d.]+)pt"', picture)
    row.picture = f"{float(size.group(1)):.0f}x{float(size.group(2)):.0f}" if size else "?"
    row.drawn = len(dot.drawn.nodes)
    with record(model) as rec:
        loss = loss_of(forward(model, inputs))
    graph = walk(loss, model, recorder=rec)
    row.nodes = len(graph.nodes)
    depth = fit_to_page(graph).depth  # the one decision make_dot took
    row.depth = "all" if depth is None else str(depth)
    start = time.perf_counter()
    page = explore(loss, recorder=rec)
    html = page.html()
    row.explore = time.perf_counter() - start
    row.page_bytes = len(html.encode("utf-8"))
    findings = check(loss, model, recorder=rec, backward=True)
    row.findings = "/".join(str(sum(f.severity == s for f in findings)) for s in ("error", "warning", "info"))
    return row


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table, with a last row for the whole zoo."""
    header = ["model", "ours ms", "torchviz ms", "ours/tv", "dot ms", "nodes", "depth", "drawn", "picture pt",
              "explore ms", "page KiB", "findings E/W/I"]
    lines = ["| " + " | ".join(header) + " |", "|:--|" + "--:|" * (len(header) - 2) + ":--|"]
    for r in rows:
        ratio = f"{r.ours / r.torchviz:.2f}" if r.torchviz else "-"
        cells = [
            r.name, f"{r.ours * 1e3:.0f}", f"{r.torchviz * 1e3:.0f}" if r.torchviz else "-", ratio,
            f"{r.dot * 1e3:.0f}", str(r.nodes), r.depth, str(r.drawn), r.picture, f"{r.explore * 1e3:.0f}",
            f"{r.page_bytes / 1024:.0f}", r.findings,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if len(rows) > 1 and all(r.torchviz for r in rows):
        ours, theirs = sum(r.ours for r in rows), sum(r.torchviz or 0.0 for r in rows)
        cells = ["all", f"{ours * 1e3:.0f}", f"{theirs * 1e3:.0f}", f"{ours / theirs:.2f}",
                 f"{sum(r.dot for r in rows) * 1e3:.0f}", *[""] * 7]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def profile(names: list[str], repeat: int) -> None:
    """cProfile of ``our_picture`` over ``names``, ``repeat`` times each: the top functions by own time."""
    built = {name: build(name) for name in names}
    for model, inputs in built.values():
        our_picture(model, inputs)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeat):
        for model, inputs in built.values():
            our_picture(model, inputs)
    profiler.disable()
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(30)


def python_part(package: Any, model: torch.nn.Module, inputs: dict) -> str:
    """``ours`` without Graphviz, with ``package``'s record and make_dot: the DOT source."""
    with package.record(model) as rec:
        outputs = forward(model, inputs)
    with contextlib.redirect_stderr(io.StringIO()):
        return package.make_dot(loss_of(outputs), recorder=rec).source


class _CallOn(TorchFunctionMode):
    """A mode that only calls each function on: the least any recorder of ops costs."""

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: Optional[dict] = None) -> Any:
        return func(*args, **(kwargs or {}))


def floor(model: torch.nn.Module, inputs: dict) -> Any:
    """A forward pass watched as ``record`` watches it, with nothing noted: an empty mode, and
    on every module a stand-in ``forward`` that calls the module's own, set and taken off."""
    with stand_in_forwards(model.modules(), lambda forward: lambda *args, **kwargs: forward(*args, **kwargs)):
        with _CallOn():
            return loss_of(forward(model, inputs))


def checkout(root: Path) -> Any:
    """``record`` and ``make_dot`` of the checkout at ``root`` (see ``benchmarks.compare.import_checkout``)."""
    import_checkout(root)
    package = sys.modules["graphviz_autograd"]
    return SimpleNamespace(record=package.record, make_dot=package.make_dot)


def compare(before: Any, now: Any, names: list[str], repeat: int) -> str:
    lines = ["| model | before ms | now ms | before/now | same DOT |", "|:--|--:|--:|--:|:--|"]
    total_before = total_now = 0.0
    for name in names:
        model, inputs = build(name)
        python_part(before, model, inputs)
        python_part(now, model, inputs)
        run_before = functools.partial(python_part, before, model, inputs)
        run_now = functools.partial(python_part, now, model, inputs)
        old = new = float("inf")
        for _ in range(2):  # alternately, so that neither always runs on a warmer heap
            old = min(old, min(timed(run_before) for _ in range(repeat)))
            new = min(new, min(timed(run_now) for _ in range(repeat)))
        same = python_part(before, model, inputs) == python_part(now, model, inputs)
        total_before, total_now = total_before + old, total_now + new
        lines.append(f"| {name} | {old * 1e3:.1f} | {new * 1e3:.1f} | {old / new:.2f} | {same} |")
    lines.append(f"| all | {total_before * 1e3:.1f} | {total_now * 1e3:.1f} | {total_before / total_now:.2f} | |")
    return "\n".join(lines)


def recorder_costs(names: list[str], repeat: int, packages: list[tuple[str, Any]], mean: bool = False) -> str:
    """The ``--recorder`` table: per model, the forward pass plain and recorded, and the
    default picture's DOT against torchviz's, for each of ``packages`` (label, package); each
    the best of ``repeat`` runs, or with ``mean`` their mean."""
    import torchviz

    def plain(model: torch.nn.Module, inputs: dict) -> Any:
        return loss_of(forward(model, inputs))

    def recorded(package: Any, model: torch.nn.Module, inputs: dict) -> Any:
        with package.record(model) as rec:
            outputs = forward(model, inputs)
        return loss_of(outputs), rec

    def theirs(model: torch.nn.Module, inputs: dict) -> str:
        return torchviz.make_dot(plain(model, inputs), params=dict(model.named_parameters())).source

    header = ["model", "forward ms", "floor ms", "floor/fwd"]
    for label, _ in packages:
        header += [f"recorded ms {label}", f"rec/fwd {label}", f"ours ms {label}"]
    header += ["tv ms"] + [f"ours/tv {label}" for label, _ in packages]
    lines = ["| " + " | ".join(header) + " |", "|:--|" + "--:|" * (len(header) - 1)]
    for name in names:
        model, inputs = build(name)
        runs: dict[str, Callable[[], Any]] = {"forward": functools.partial(plain, model, inputs),
                                               "floor": functools.partial(floor, model, inputs),
                                               "tv": functools.partial(theirs, model, inputs)}
        for label, package in packages:
            runs[f"recorded {label}"] = functools.partial(recorded, package, model, inputs)
            runs[f"ours {label}"] = functools.partial(python_part, package, model, inputs)
        for run in runs.values():
            run()  # the first run of each pays for lazy set-up: not timed
        times: dict[str, list[float]] = {key: [] for key in runs}
        for _ in range(repeat):  # in turn, so that every column sees the same load
            for key, run in runs.items():
                times[key].append(timed(run, time.process_time))
        measured = {key: (statistics.mean(values) if mean else min(values)) for key, values in times.items()}
        cells = [name, f"{measured['forward'] * 1e3:.1f}", f"{measured['floor'] * 1e3:.1f}", f"{measured['floor'] / measured['forward']:.2f}"]
        for label, _ in packages:
            cells += [f"{measured[f'recorded {label}'] * 1e3:.1f}", f"{measured[f'recorded {label}'] / measured['forward']:.2f}",
                      f"{measured[f'ours {label}'] * 1e3:.1f}"]
        cells.append(f"{measured['tv'] * 1e3:.1f}")
        cells += [f"{measured[f'ours {label}'] / measured['tv']:.2f}" for label, _ in packages]
        lines.append("| " + " | ".join(cells) + " |")
        print(f"{name} done", file=sys.stderr)
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.zoo", description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="+", choices=sorted(ZOO), help="these models only")
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement; the best is kept (default 5)")
    parser.add_argument("--no-torchviz", action="store_true", help="leave torchviz out")
    parser.add_argument("--profile", action="store_true", help="profile our pipeline instead of timing it")
    parser.add_argument("--before", type=Path, metavar="DIR", help="time the Python part against this checkout")
    parser.add_argument("--recorder", action="store_true", help="the recorder's cost: forward plain and recorded, "
                        "our DOT against torchviz's")
    parser.add_argument("--mean", action="store_true", help="with --recorder: each run's mean, not its best (what one "
                        "waits on average, the garbage collector's passes included)")
    args = parser.parse_args(argv)
    if shutil.which("dot") is None:
        print("Graphviz 'dot' is needed: the time to the picture includes it.", file=sys.stderr)
        return 1
    names = args.only or list(ZOO)
    torch.set_num_threads(1)  # the models are tiny: more threads only wait for each other
    if args.profile:
        profile(names, args.repeat)
        return 0
    if args.recorder:
        packages = [("before", checkout(args.before))] if args.before is not None else []
        packages.append(("now", checkout(Path(__file__).resolve().parent.parent)))
        print(recorder_costs(names, args.repeat, packages, args.mean))
        return 0
    if args.before is not None:
        before, now = checkout(args.before), checkout(Path(__file__).resolve().parent.parent)
        print(compare(before, now, names, args.repeat))
        return 0
    with_torchviz = not args.no_torchviz
    if with_torchviz:
        try:
            import torchviz  # noqa: F401
        except ImportError:
            print("torchviz is not installed: its column is left out.", file=sys.stderr)
            with_torchviz = False
    rows = []
    for name in names:
        rows.append(measure(name, args.repeat, with_torchviz))
        print(f"{name} done", file=sys.stderr)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
