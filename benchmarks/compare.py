"""Time walk+DOT of this checkout against another one, in the same process; print a table.

For a before/after of a change: check the old commit out somewhere
(``git worktree add /tmp/before <commit>``) and run, from this repository's root::

    PYTHONPATH=. python -m benchmarks.compare --before /tmp/before
    PYTHONPATH=. python -m benchmarks.compare --before /tmp/before --only gpt2-small --repeat 9

Both packages are imported side by side (the other one under its own name, from
its own directory), each graph is built once, and ``to_dot(walk(outputs,
params))`` of each package is timed alternately, the best of ``--repeat`` runs
twice over, with a ``gc.collect()`` before each run as in ``python -m
benchmarks``. The last column says whether both wrote the same DOT text.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Optional

from . import models
from .run import CASES, RECURSION_ERROR, bare_walk, best_time, torchviz_source

THIS_CHECKOUT = Path(__file__).resolve().parent.parent
# The graphs worth comparing: the million-op chain takes minutes per package.
DEFAULT_CASES = ("gpt2-small", "bert-base", "resnet50", "densenet121", "lstm-30-steps", "chain-10k", "chain-100k")


def import_checkout(root: Path) -> SimpleNamespace:
    """``walk`` and ``to_dot`` of the checkout at ``root``, freshly imported.

    Modules already imported from another checkout are dropped first, so that the
    package's own imports (``from .walk import ...``) resolve inside ``root``.
    """
    for name in [n for n in sys.modules if n == "graphviz_autograd" or n.startswith("graphviz_autograd.")]:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    try:
        package = importlib.import_module("graphviz_autograd")
    finally:
        sys.path.remove(str(root))
    if not Path(package.__file__).resolve().is_relative_to(root.resolve()):
        raise SystemExit(f"graphviz_autograd was imported from {package.__file__}, not from {root}.")
    # The package imports its public names when they are first read: read them now, while
    # this checkout's modules are the ones in sys.modules. (Read later, after the other
    # checkout was imported, both would be the other checkout's functions.)
    return SimpleNamespace(walk=package.walk, to_dot=package.to_dot, __file__=package.__file__)


def walk_and_draw(package: SimpleNamespace, outputs: Any, params: Optional[dict]) -> Callable[[], str]:
    return lambda: package.to_dot(package.walk(outputs, params))


def compare(before: SimpleNamespace, now: SimpleNamespace, names: list[str], repeat: int) -> list[str]:
    rows = [
        "| graph | nodes | bare ms | walk+dot ms before | now | before/now | ours/bare before | now "
        "| torchviz ms | torchviz/ours before | now | same DOT |",
        "|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|:--|",
    ]
    for case in CASES:
        if case.name not in names:
            continue
        print(f"measuring {case.name} ...", file=sys.stderr)
        outputs, params = case.build()
        bare = best_time(lambda: bare_walk(outputs), repeat)
        old, new = walk_and_draw(before, outputs, params), walk_and_draw(now, outputs, params)
        # Taken twice, alternately, so that neither package always runs on a warmer heap.
        time_before = time_now = float("inf")
        for _ in range(2):
            time_before = min(time_before, best_time(old, repeat))
            time_now = min(time_now, best_time(new, repeat))
        try:
            torchviz: Optional[float] = best_time(lambda: torchviz_source(outputs, params), repeat)
        except ImportError:
            torchviz = None
        except RecursionError:
            torchviz = float("nan")
        same = old() == new()
        nodes = len(now.walk(outputs, params).nodes)
        rows.append(
            f"| {case.name} | {nodes:,} | {_ms(bare)} | {_ms(time_before)} | {_ms(time_now)} "
            f"| {time_before / time_now:.2f} | {time_before / bare:.1f} | {time_now / bare:.1f} "
            f"| {_torchviz_cell(torchviz)} | {_ratio(torchviz, time_before)} | {_ratio(torchviz, time_now)} | {same} |"
        )
        outputs = params = old = new = None  # the graph goes before the next one is built
        gc.collect()
    return rows


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f}"


def _torchviz_cell(seconds: Optional[float]) -> str:
    if seconds is None:
        return "not installed"
    return RECURSION_ERROR if seconds != seconds else _ms(seconds)


def _ratio(torchviz: Optional[float], ours: float) -> str:
    return "-" if torchviz is None or torchviz != torchviz else f"{torchviz / ours:.1f}"


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare", description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, type=Path, metavar="DIR", help="root of the other checkout")
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        choices=[c.name for c in CASES],
        help="compare this graph only (repeatable); default: " + ", ".join(DEFAULT_CASES),
    )
    parser.add_argument("--repeat", type=int, default=7, metavar="N", help="best of N runs, taken twice (default 7)")
    args = parser.parse_args(argv)
    if not (args.before / "graphviz_autograd" / "__init__.py").is_file():
        parser.error(f"--before {args.before}: no graphviz_autograd package there; give the root of a checkout.")
    before = import_checkout(args.before)
    now = import_checkout(THIS_CHECKOUT)
    models.working_torchvision()  # imported once here, not inside the first timing
    print("\n".join(compare(before, now, args.only or list(DEFAULT_CASES), args.repeat)))


if __name__ == "__main__":
    main()
