"""How fast the explorer page is built and used, on two big models; run by hand:

    python -m benchmarks.explorer [--dot-timeout 120] [--no-browser]

For an 80-layer Llama built on the meta device (nothing allocated), a 240-layer
tiny GPT-2 and DenseNet-121 (whose blocks are fan-in: every layer reads every
earlier feature map), it prints the time from output tensor to ``model.html`` and the file's
size, against two baselines measured in the same run: the static depth summary
(``render(..., depth=1)`` to SVG, what a static picture of the model can show) and
Graphviz ``dot`` on the whole graph (given up after ``--dot-timeout`` seconds). Then,
in headless Chromium, how long the page takes to draw its top level after load, to
open a layer, to expand the top level (every module opened), and to answer a search.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from graphviz_autograd import explore, record, render, to_dot, walk

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def llama_80() -> tuple[Any, Any, str]:
    """An 80-layer Llama (the 70B shape) on the meta device: (logits, recorder, layer pattern)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(num_hidden_layers=80, hidden_size=8192, intermediate_size=28672,
                         num_attention_heads=64, num_key_value_heads=8, vocab_size=32000)
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
        with record(model) as recorder:
            logits = model(torch.zeros(1, 16, dtype=torch.long)).logits
    return logits, recorder, "model.layers.41"


def gpt2_240() -> tuple[Any, Any, str]:
    """A 240-layer GPT-2 of width 32: (logits, recorder, layer pattern)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging

    logging.set_verbosity_error()
    model = GPT2LMHeadModel(GPT2Config(n_layer=240, n_embd=32, n_head=2, vocab_size=1000, n_positions=64))
    with record(model) as recorder:
        logits = model(torch.arange(16).unsqueeze(0)).logits
    return logits, recorder, "transformer.h.120"


def densenet_121() -> tuple[Any, Any, str]:
    """DenseNet-121 (benchmarks/models.py, random weights) on one 224x224 image: (logits,
    recorder, block). Every layer of a block reads every earlier feature map: fan-in."""
    from .models import DenseNet121

    torch.manual_seed(0)
    model = DenseNet121()
    with record(model) as recorder:
        logits = model(torch.randn(1, 3, 224, 224))
    return logits, recorder, "features.denseblock3"


def timed(function: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = function()
    return time.perf_counter() - started, result


def dot_whole_graph(outputs: Any, recorder: Any, timeout: float) -> Optional[float]:
    """Seconds ``dot -Tsvg`` takes on the whole graph, every block drawn (clusters as make_dot
    draws them); None past the timeout."""
    source = to_dot(walk(outputs, recorder=recorder), show_shapes=False, fold_repeated=False, depth="full")
    started = time.perf_counter()
    try:
        subprocess.run(["dot", "-Tsvg", "-o", os.devnull], input=source.encode(), timeout=timeout, check=True,
                       capture_output=True)
    except subprocess.TimeoutExpired:
        return None
    return time.perf_counter() - started


def browser_timings(path: Path, layer: str, query: str) -> dict[str, float]:
    """Milliseconds, in headless Chromium: load to top level drawn, opening ``layer``, a search."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                                             args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(path.as_uri())
        page.wait_for_selector("body[data-ready]")
        loaded = page.evaluate("performance.now()")  # from navigation start to the top level drawn
        open_ms = page.evaluate(
            """(layer) => { const t = performance.now(); window.explorer.open(window.explorer.levelByPath.get(layer));
                return performance.now() - t; }""", layer)
        expand_ms = page.evaluate(
            """() => { window.explorer.open(0); const t = performance.now(); window.explorer.toggleExpanded();
                return performance.now() - t; }""")
        search_ms = page.evaluate(
            """(q) => { const t = performance.now(); window.explorer.search(q); return performance.now() - t; }""", query)
        hits = page.locator("#hits-title").text_content()
        browser.close()
    return {"top level drawn after load": loaded, "open a layer": open_ms, "expand the top level": expand_ms, f"search {query!r} ({hits})": search_ms}


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dot-timeout", type=float, default=120.0, help="give up on dot for the whole graph after this")
    parser.add_argument("--no-browser", action="store_true", help="skip the in-browser timings")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="explorer-bench-"))
    cases = (("Llama, 80 layers (meta)", llama_80, "q_proj", 3.0), ("GPT-2, 240 layers (width 32)", gpt2_240, "c_attn", 5.0),
             ("DenseNet-121", densenet_121, "conv2", 10.0))
    for name, build, query, target in cases:
        outputs, recorder, layer = build()
        nodes = len(walk(outputs, recorder=recorder).nodes)
        path = folder / "model.html"
        seconds, page = timed(lambda: explore(outputs, recorder=recorder).save(path))
        size = path.stat().st_size
        summary_seconds, _ = timed(lambda: render(outputs, folder / "summary.svg", recorder=recorder, depth=1))
        whole = dot_whole_graph(outputs, recorder, args.dot_timeout)
        print(f"\n{name}: {nodes:,} nodes")
        print(f"  tensor -> model.html      {seconds:7.2f} s  (target < {target:g} s), {size / 1e6:.2f} MB (target < 5 MB)")
        print(f"  static depth=1 summary    {summary_seconds:7.2f} s  to SVG: html takes x{seconds / summary_seconds:.2f} of it")
        if whole is None:
            print(f"  dot on the whole graph    > {args.dot_timeout:g} s (gave up): html is over x{args.dot_timeout / seconds:.0f} faster")
        else:
            print(f"  dot on the whole graph    {whole:7.2f} s  to SVG: html is x{whole / seconds:.1f} faster")
        if not args.no_browser:
            for what, ms in browser_timings(path, layer, query).items():
                print(f"  in Chromium: {what:<40} {ms:8.1f} ms")


if __name__ == "__main__":
    main()
