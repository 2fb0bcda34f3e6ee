"""The explorer page of a watched training run: its size, how fast it opens, how fast the
step slider recolours it.

Run by hand from the repository root::

    PYTHONPATH=. python -m benchmarks.watch_page            # GPT-2 small, 200 steps, logged every 10
    PYTHONPATH=. python -m benchmarks.watch_page --layers 2 --steps 40

A GPT-2 (``GPT2Config(n_layer=...)``, random weights) trains ``--steps`` steps of AdamW on
random tokens inside ``watch(every=--every)``; then ``Watcher.save()`` writes the page,
and headless Chromium (Debian's ``chromium``) opens it: the time from navigation to the
top level drawn, and the median time of moving the step slider (the page recoloured).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from graphviz_autograd import watch

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=args.layers))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    started = time.perf_counter()
    with watch(model, optimizer=optimizer, every=args.every) as watcher:
        for _ in range(args.steps):
            tokens = torch.randint(0, 50257, (2, args.tokens))
            model(input_ids=tokens, labels=tokens).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    trained = time.perf_counter() - started
    folder = Path(tempfile.mkdtemp())
    started = time.perf_counter()
    path = watcher.save(folder / "run.html")
    written = time.perf_counter() - started
    assert path is not None
    size = path.stat().st_size

    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=args.chromium)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        started = time.perf_counter()
        page.goto(path.as_uri())
        page.wait_for_selector("body[data-ready]")
        opened = time.perf_counter() - started
        moves = []
        count = len(watcher.steps)
        for index in range(count - 1, -1, -max(1, count // 10)):
            moves.append(page.evaluate(
                """(index) => { const input = document.getElementById('step'); const start = performance.now();
                input.value = String(index); input.dispatchEvent(new Event('input'));
                return performance.now() - start; }""", index))
        browser.close()
    print(f"GPT-2 with {args.layers} layers, {args.steps} steps trained in {trained:.0f} s, "
          f"{count} logged (every {args.every})")
    print(f"page written in {written:.2f} s: {size / 1e6:.2f} MB")
    print(f"opened, top level drawn, in {opened:.2f} s")
    print(f"slider moved {len(moves)} times: median {statistics.median(moves):.1f} ms, most {max(moves):.1f} ms")


if __name__ == "__main__":
    main()
