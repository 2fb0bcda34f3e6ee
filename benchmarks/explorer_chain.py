"""The explorer page of a very long chain, and the refusal of one past the limit; run by hand:

    python -m benchmarks.explorer_chain [--ops 200000] [--no-browser]

A chain of ``--ops`` multiplications of a one-element tensor (``y = y * 1.0001``) is
one level of as many ops: the page shows it as parts, laid out by ``dot`` once for the
alike ones (``explore.SPLIT_LEVELS_ABOVE``). Each build runs in a fresh process, so
that its peak memory (Python, and Graphviz apart) is its own. Printed: the time from
tensor to ``page.html``, the file's size and peak memory of Python, against a baseline measured
in the same run, the walk alone (``walk()``, which every drawing starts with); then, in
headless Chromium, the time from navigation to the top level drawn, and to a part
opened; then how long explore() takes to refuse a chain of ``MAX_OPS`` x 3.4 ops.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def chain(ops: int):
    import torch

    y = x = torch.ones(1, requires_grad=True)
    for _ in range(ops):
        y = y * 1.0001
    return y, x


def build(ops: int, path: str, what: str) -> None:
    """In this process: build the chain, then the page (or only walk it); print JSON."""
    from graphviz_autograd import explore, walk
    from graphviz_autograd.errors import GraphTooBigError

    y, x = chain(ops)
    started = time.perf_counter()
    result: dict = {}
    if what == "page":
        explore(y, {"x": x}).save(path)
        result["size"] = Path(path).stat().st_size
    elif what == "walk":
        walk(y, {"x": x}, collect_saved=True, collect_shapes=True)
    else:
        try:
            explore(y, {"x": x})
        except GraphTooBigError as error:
            result["message"] = str(error)
    result["seconds"] = time.perf_counter() - started
    # Graphviz is left out: a child's peak as getrusage counts it includes the pages it
    # shared with this process when forked, and dot only ever lays out parts of 600 ops.
    result["python_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def in_child(ops: int, path: Path, what: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "benchmarks.explorer_chain", "--child", what, "--ops", str(ops), str(path)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def browser_timings(path: Path) -> dict[str, float]:
    """Milliseconds in headless Chromium: navigation to the top level drawn, and opening the first part."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                                             args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(path.as_uri())
        page.wait_for_selector("body[data-ready]", timeout=120_000)
        loaded = page.evaluate("performance.now()")
        open_ms = page.evaluate(
            """() => { const t = performance.now(); window.explorer.open(1); return performance.now() - t; }""")
        browser.close()
    return {"navigation to top level drawn": loaded, "open a part": open_ms}


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=200_000)
    parser.add_argument("--no-browser", action="store_true", help="skip the in-browser timings")
    parser.add_argument("--child", choices=("page", "walk", "refuse"), help=argparse.SUPPRESS)
    parser.add_argument("path", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        build(args.ops, args.path, args.child)
        return
    from graphviz_autograd.explorer.pages import MAX_OPS

    folder = Path(tempfile.mkdtemp(prefix="explorer-chain-"))
    path = folder / "page.html"
    walked = in_child(args.ops, path, "walk")
    page = in_child(args.ops, path, "page")
    print(f"\nA chain of {args.ops:,} ops")
    print(f"  walk alone (baseline)     {walked['seconds']:7.2f} s, peak {walked['python_mb']:,.0f} MB")
    print(f"  tensor -> page.html       {page['seconds']:7.2f} s (x{page['seconds'] / walked['seconds']:.1f} the walk; "
          f"target < 60 s), {page['size'] / 1e6:.1f} MB, peak {page['python_mb']:,.0f} MB")
    if not args.no_browser:
        for what, ms in browser_timings(path).items():
            print(f"  in Chromium: {what:<32} {ms:8.1f} ms")
    refused_ops = int(MAX_OPS * 3.4)
    refused = in_child(refused_ops, path, "refuse")
    print(f"A chain of {refused_ops:,} ops: refused in {refused['seconds']:.2f} s (target < 2 s): {refused.get('message', 'NOT REFUSED')}")


if __name__ == "__main__":
    main()
