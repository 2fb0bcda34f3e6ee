"""Time the walk and the DOT generation on real autograd graphs; print a table.

Run by hand from the repository root, so that this checkout's package is the one
imported::

    PYTHONPATH=. python -m benchmarks --layout   # every graph (about 4 minutes)
    PYTHONPATH=. python -m benchmarks --only gpt2-small --layout
    PYTHONPATH=. python -m benchmarks --layouts     # the layout timings below (about 2 minutes more)
    PYTHONPATH=. python -m benchmarks.compare --before DIR   # against another checkout (benchmarks/compare.py)

Columns, per graph (times in milliseconds, the best of ``--repeat`` runs):

- ``nodes``, ``edges``: of the walked :class:`AutogradGraph`.
- ``bare``: a minimal loop over ``grad_fn.next_functions`` with a seen-set and the
  garbage collector paused, as the walk pauses it. It builds nothing, so it is the
  floor for any walk in Python.
- ``bare+leaves``: the bare walk, also reading the tensor behind each
  ``AccumulateGrad`` and its shape, dtype and device, as any drawing that shows its
  parameters must (torchviz too): the floor for such a walk in Python.
- ``floor``: one loop that walks the graph and writes a short DOT line per node
  and per edge as it goes (op names, parameter names over shape, dtype and
  device; no graph in between, no tooltips, no options): the floor for any walk
  that draws in Python (see :func:`walk_and_write_floor`).
- ``walk``: :func:`graphviz_autograd.capture.walking`.
- ``walk+dot``: ``walk`` then :func:`graphviz_autograd.to_dot` ("ours" below).
  From the second run on, the DOT writer finds each node's text kept from the
  run before (as when a model is drawn again in the same process).
- ``first``: ``walk+dot`` with that kept text dropped before each run, as for
  a model drawn for the first time in a process.
- ``plain``: ``walk+dot`` drawing the graph as it was walked, as the floor draws
  it: no shared weight drawn once per use (``split_shared=False``), no output
  read far below drawn as a trunk (``junctions=False``). On a graph that has
  neither (GPT-2, the chains) it draws the same DOT as ``walk+dot``; on the
  others ``walk+dot`` less ``plain`` is what those two cost.
- ``torchviz``: ``torchviz.make_dot(...).source`` when torchviz is installed;
  ``RecursionError`` where its recursive walk gives up (about 1,000 ops deep).
- ``ours/bare``, ``ours/bare+leaves``, ``floor/bare``, ``ours/floor``, ``plain/floor``,
  ``torchviz/ours``, ``torchviz/first``: ratios of times taken in the same run.
- ``peak MiB``: peak Python memory of one walk+dot, measured with tracemalloc.
- ``dot -Tsvg``: with ``--layout``, Graphviz's time to lay out our DOT (graphs
  under 5,000 nodes only; ``>S s`` past ``--layout-timeout`` S seconds).

With ``--layouts``, a second table times tensor -> SVG through
:func:`graphviz_autograd.drawing.rendering` (walk, DOT, Graphviz, file): the LSTM with its
shared weights split and whole (ratio in the same run), GPT-2 with 48 layers
and DenseNet-121 each under ``layout="auto"`` and ``"dot"`` (ratios too), and a
10,003-node chain with the fixed layout, as SVG and as PDF. Each is run once; a
run past ``--layout-timeout`` is stopped.

Graphs, all with random weights and nothing downloaded:

- GPT-2 small and BERT base, built from their ``transformers`` configs.
- ResNet-50 on one 224x224 image: torchvision's ``resnet50(weights=None)`` when
  torchvision imports and works, else ``transformers.ResNetModel`` from the default
  ``ResNetConfig`` (the same network without its classifier), walked from its
  ``pooler_output``.
- DenseNet-121 on one 224x224 image: torchvision's ``densenet121(weights=None)``
  when torchvision works, else :class:`benchmarks.models.DenseNet121`, the same
  architecture and parameter count, with a ``torch.cat`` of all earlier feature
  maps in every dense layer.
- An LSTM cell unrolled over 30 steps (one set of weights, reused each step).
- Chains of 10k, 100k and 1M ``y = y * 1.0001`` ops. The number each multiplication
  takes is part of its op (read from what the op saved), not an input of its own, so
  a chain of n ops walks into n + 3 nodes (2n + 3 when it drew them as inputs).

The table names where each vision model came from, e.g.
``resnet50 (transformers ResNetModel)``; see :mod:`benchmarks.models`.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shutil
import subprocess
import sys
import time
import tracemalloc
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import torch

from graphviz_autograd import to_dot, walk
from graphviz_autograd.drawing.dot_writer import forget_written_attrs
from graphviz_autograd.views.prepared import prepare

from . import models

# A measurement is repeated up to --repeat times, but stops repeating once it has
# spent this long: best-of-5 matters for a 20 ms graph, not for a 10 s one. It
# still runs twice, as the first big run in a process also pays for growing the heap.
REPEAT_BUDGET_S = 3.0
MIN_RUNS = 2
LAYOUT_MAX_NODES = 5_000
RECURSION_ERROR = "RecursionError"


@dataclass
class Case:
    """A graph to measure: ``build()`` returns (outputs, params) and keeps them alive."""

    name: str
    build: Callable[[], tuple[Any, Optional[dict]]]
    needs: tuple[str, ...] = ()  # modules the case can be built from; it needs one of them
    source: Optional[Callable[[], str]] = None  # where the model comes from, shown after the name


@dataclass
class Result:
    name: str
    nodes: int = 0
    edges: int = 0
    bare: float = 0.0
    bare_leaves: float = 0.0
    floor: float = 0.0
    walk: float = 0.0
    walk_dot: float = 0.0
    first: float = 0.0
    plain: float = 0.0
    torchviz: Optional[float] = None
    torchviz_failure: str = ""
    peak_bytes: int = 0
    layout: str = ""
    skipped: str = ""


# --- the graphs --------------------------------------------------------------------


def gpt2_small() -> tuple[Any, dict]:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config())
    input_ids = torch.randint(0, model.config.vocab_size, (1, 16))
    return model(input_ids).logits, dict(model.named_parameters())


def gpt2_layers(layers: int) -> Callable[[], tuple[Any, dict]]:
    def build() -> tuple[Any, dict]:
        from transformers import GPT2Config, GPT2LMHeadModel

        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(n_layer=layers))
        input_ids = torch.randint(0, model.config.vocab_size, (1, 16))
        return model(input_ids).logits, dict(model.named_parameters())

    return build


def bert_base() -> tuple[Any, dict]:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    model = BertModel(BertConfig())
    input_ids = torch.randint(0, model.config.vocab_size, (1, 16))
    out = model(input_ids)
    return (out.last_hidden_state, out.pooler_output), dict(model.named_parameters())


def lstm_unrolled(steps: int = 30) -> tuple[Any, dict]:
    """One LSTMCell applied step after step: every step reuses the same weights."""
    torch.manual_seed(0)
    cell = torch.nn.LSTMCell(32, 64)
    inputs = torch.randn(steps, 1, 32)
    h = c = torch.zeros(1, 64)
    for x in inputs:
        h, c = cell(x, (h, c))
    return h, dict(cell.named_parameters())


def chain(length: int) -> Callable[[], tuple[Any, None]]:
    def build() -> tuple[Any, None]:
        y = torch.ones(1, requires_grad=True)
        for _ in range(length):
            y = y * 1.0001
        return y, None

    return build


CASES = [
    Case("gpt2-small", gpt2_small, needs=("transformers",)),
    Case("bert-base", bert_base, needs=("transformers",)),
    Case("resnet50", models.resnet50, needs=("torchvision", "transformers"), source=models.resnet50_source),
    Case("densenet121", models.densenet121, source=models.densenet121_source),
    Case("lstm-30-steps", lstm_unrolled),
    Case("chain-10k", chain(10_000)),
    Case("chain-100k", chain(100_000)),
    Case("chain-1m", chain(1_000_000)),
]


# --- what is timed -----------------------------------------------------------------


def bare_walk(outputs: Any) -> set:
    """The floor: visit every grad_fn once, build nothing. Returns the grad_fns seen."""
    roots = [t.grad_fn for t in _tensors(outputs) if t.grad_fn is not None]
    seen = set(roots)
    stack = list(roots)
    gc.disable()  # the walk pauses the collector too; compare like with like
    try:
        while stack:
            for child, _ in stack.pop().next_functions:
                if child is not None and child not in seen:
                    seen.add(child)
                    stack.append(child)
    finally:
        gc.enable()
    return seen


def _accumulate_grad_type() -> type:
    leaf = torch.zeros((), requires_grad=True)
    return type((leaf * 1).grad_fn.next_functions[0][0])


ACCUMULATE_GRAD_TYPE = _accumulate_grad_type()


def bare_walk_reading_leaves(outputs: Any) -> tuple[set, list]:
    """The bare walk, plus reading what a drawing of the graph must show of its leaves:
    the tensor behind each ``AccumulateGrad`` and its shape, dtype and device (torchviz
    reads the same). Nothing is built from them, so it is the floor for any walk in
    Python that draws parameters with their shapes. Returns the grad_fns seen and what
    was read."""
    roots = [t.grad_fn for t in _tensors(outputs) if t.grad_fn is not None]
    seen = set(roots)
    stack = list(roots)
    leaves = []
    accumulate_grad = ACCUMULATE_GRAD_TYPE
    gc.disable()
    try:
        while stack:
            fn = stack.pop()
            if type(fn) is accumulate_grad:
                leaf = fn.variable
                leaves.append((leaf.shape, leaf.dtype, leaf.device))
            for child, _ in fn.next_functions:
                if child is not None and child not in seen:
                    seen.add(child)
                    stack.append(child)
    finally:
        gc.enable()
    return seen, leaves


def walk_and_write_floor(outputs: Any, params: Optional[dict]) -> str:
    """The floor for any walk that draws in Python: one loop that walks the graph and
    writes a DOT line per node and per edge as it goes, with no graph in between.

    Each op is labelled with its name (written once per type), each parameter with
    its name over its shape, dtype and device (the text after the name written
    once per shape, dtype and device), and each input without gradient as one; no
    tooltips, no escaping, no views, no options. What a real drawing adds to this
    is the price of its features, so ``ours/floor`` says how much they cost, and
    ``floor/bare`` how far from the bare walk Python itself stays.
    """
    names = {id(tensor): name for name, tensor in (params or {}).items()}
    texts: dict = {}  # type(grad_fn) or (shape, dtype, device) -> the text of its line after the id
    lines: list[str] = []
    add = lines.append
    index: dict = {}
    count = 0
    stack = []
    for tensor in _tensors(outputs):
        fn = tensor.grad_fn
        if fn is not None and fn not in index:
            index[fn] = count
            count += 1
            stack.append(fn)
    accumulate_grad = ACCUMULATE_GRAD_TYPE
    gc.disable()
    try:
        while stack:
            fn = stack.pop()
            at = index[fn]
            kind = type(fn)
            text = texts.get(kind)
            if text is None:
                text = texts[kind] = f' [label="{fn.name()}"]\n'
            add(f"\tn{at}{text}")
            if kind is accumulate_grad:
                leaf = fn.variable
                key = (leaf.shape, leaf.dtype, leaf.device)
                text = texts.get(key)
                if text is None:
                    text = texts[key] = f"\\n{tuple(leaf.shape)}\\n{leaf.dtype} {leaf.device}\"]\n"
                add(f'\tn{count} [label="{names.get(id(leaf), "")}{text}')
                add(f"\tn{count} -> n{at}\n")
                count += 1
                continue
            new_children = 0
            for child, _ in fn.next_functions:
                if child is None:
                    add(f"\tn{count} [label=none]\n\tn{count} -> n{at}\n")
                    count += 1
                    continue
                child_at = index.get(child)
                if child_at is None:
                    child_at = index[child] = count
                    count += 1
                    stack.append(child)
                    new_children += 1
                add(f"\tn{child_at} -> n{at}\n")
            if new_children > 1:
                stack[-new_children:] = stack[-new_children:][::-1]
    finally:
        gc.enable()
    return "".join(lines)


def ours(outputs: Any, params: Optional[dict]) -> tuple:
    graph = walk(outputs, params)
    return graph, to_dot(graph)  # both freed after the clock stops, as for ``walk``


def ours_plain(outputs: Any, params: Optional[dict]) -> tuple:
    """``ours`` drawing the graph as walked: nothing split, no junctions."""
    graph = walk(outputs, params)
    return graph, to_dot(graph, split_shared=False, junctions=False)


def torchviz_source(outputs: Any, params: Optional[dict]) -> str:
    import torchviz

    return torchviz.make_dot(outputs, params).source


def _tensors(outputs: Any) -> list[torch.Tensor]:
    return list(outputs) if isinstance(outputs, tuple) else [outputs]


def best_time(function: Callable[[], Any], repeat: int, before: Callable[[], Any] = lambda: None) -> float:
    """The best of up to ``repeat`` runs, each after ``before()`` and a full collection.

    The clock stops before the result is dropped: freeing a million-node graph
    is the caller's cost, not the walk's.
    """
    best = float("inf")
    spent = 0.0
    for run in range(1, max(repeat, 1) + 1):
        before()
        gc.collect()
        start = time.perf_counter()
        result = function()
        elapsed = time.perf_counter() - start
        del result
        best = min(best, elapsed)
        spent += elapsed
        if spent > REPEAT_BUDGET_S and run >= MIN_RUNS:
            break
    gc.collect()
    return best


def peak_memory(function: Callable[[], Any]) -> int:
    """Peak bytes Python allocated while ``function`` ran (its result included)."""
    gc.collect()
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        gc.collect()


def layout_time(source: str, timeout: float) -> str:
    """Seconds ``dot -Tsvg`` takes on ``source``, as text for the table."""
    executable = shutil.which("dot")
    if executable is None:
        return "no dot"
    start = time.perf_counter()
    try:
        subprocess.run(
            [executable, "-Tsvg"],
            input=source.encode(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout,
            check=True,
        )
    except subprocess.TimeoutExpired:
        return f">{timeout:g} s"
    except subprocess.CalledProcessError as error:
        return f"failed ({error.returncode})"
    return f"{time.perf_counter() - start:.2f} s"


def measure(case: Case, repeat: int, layout: bool, layout_timeout: float, with_torchviz: bool) -> Result:
    built = list(case.build())
    try:
        return measure_graph(case.name, *built, repeat, layout, layout_timeout, with_torchviz)
    finally:
        free_root_first(built)


def free_root_first(built: list) -> None:
    """Free the graph of ``built[0]`` (the outputs) without overflowing the C stack.

    Once Python has seen a grad_fn (as every walk does), torch 2.13 frees it through
    its Python wrapper, one nested C++ call per node down a chain. Our walk hands
    deep graphs to ``graphviz_autograd.capture.deep_graphs``, which frees them node by node
    after a garbage collection; the collection also breaks torchviz's reference
    cycles, which hold the outputs.
    """
    built.clear()
    gc.collect()


def measure_graph(
    name: str, outputs: Any, params: Optional[dict], repeat: int, layout: bool, layout_timeout: float, with_torchviz: bool
) -> Result:
    result = Result(name)
    graph = walk(outputs, params)
    result.nodes, result.edges = len(graph.nodes), len(graph.edges)
    source = to_dot(graph) if layout and result.nodes < LAYOUT_MAX_NODES else None
    del graph

    result.bare = best_time(lambda: bare_walk(outputs), repeat)
    result.bare_leaves = best_time(lambda: bare_walk_reading_leaves(outputs), repeat)
    result.floor = best_time(lambda: walk_and_write_floor(outputs, params), repeat)
    result.walk = best_time(lambda: walk(outputs, params), repeat)
    result.walk_dot = best_time(lambda: ours(outputs, params), repeat)
    result.first = best_time(lambda: ours(outputs, params), repeat, before=forget_written_attrs)
    result.plain = best_time(lambda: ours_plain(outputs, params), repeat)
    result.peak_bytes = peak_memory(lambda: ours(outputs, params))
    if with_torchviz:
        try:
            result.torchviz = best_time(lambda: torchviz_source(outputs, params), repeat)
        except RecursionError:
            result.torchviz_failure = RECURSION_ERROR
    if source is not None:
        result.layout = layout_time(source, layout_timeout)
    elif layout:
        result.layout = f"skipped (>= {LAYOUT_MAX_NODES:,} nodes)"
    return result


# --- tensor -> SVG with each layout ----------------------------------------------------


@dataclass
class LayoutCase:
    """A render to time: the graph, and the render options."""

    name: str
    build: Callable[[], tuple[Any, Optional[dict]]]
    options: dict
    needs: tuple[str, ...] = ()
    suffix: str = ".svg"  # the file rendered, and so its format


LAYOUT_CASES = [
    LayoutCase("lstm-30-steps split", lstm_unrolled, dict(layout="dot")),
    LayoutCase("lstm-30-steps whole", lstm_unrolled, dict(layout="dot", split_shared=False)),
    LayoutCase("gpt2-48-layers auto", gpt2_layers(48), dict(layout="auto"), needs=("transformers",)),
    LayoutCase("gpt2-48-layers dot", gpt2_layers(48), dict(layout="dot"), needs=("transformers",)),
    LayoutCase("densenet121 auto", models.densenet121, dict(layout="auto")),
    LayoutCase("densenet121 dot", models.densenet121, dict(layout="dot")),
    LayoutCase("chain-10k fixed", chain(10_000), dict(layout="fixed")),
    LayoutCase("chain-10k fixed, PDF", chain(10_000), dict(layout="fixed"), suffix=".pdf"),
]


def layout_timings(timeout: float) -> list[tuple[str, str, str, Optional[float]]]:
    """(case, nodes drawn, engine, seconds or None past the timeout) for each layout case."""
    import tempfile

    from graphviz_autograd import render
    from graphviz_autograd.api import lay_out
    from graphviz_autograd.errors import RenderError
    from graphviz_autograd.views.shown import split_shared_leaves

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for case in LAYOUT_CASES:
            if case.needs and not any(map(_importable, case.needs)):
                rows.append((case.name, f"skipped: {' or '.join(case.needs)} not installed", "", None))
                continue
            print(f"rendering {case.name} ...", file=sys.stderr, flush=True)
            built = list(case.build())
            outputs, params = built
            budget_options = {k: v for k, v in case.options.items() if k != "layout"}
            graph = walk(outputs, params)
            laid_out = lay_out(prepare(graph, layout=case.options["layout"], depth="full", fold_repeated=False, **budget_options))
            shown = split_shared_leaves(graph) if case.options.get("split_shared", True) else graph
            drawn, engine = len(shown.nodes), laid_out.engine
            del graph, shown, laid_out
            start = time.perf_counter()
            try:
                render(outputs, os.path.join(folder, "graph" + case.suffix), params, timeout=timeout, **case.options)
                seconds: Optional[float] = time.perf_counter() - start
            except RenderError:
                seconds = None
            rows.append((case.name, f"{drawn:,}", engine, seconds))
            del outputs, params
            free_root_first(built)
    return rows


def layout_table(rows: Sequence[tuple[str, str, str, Optional[float]]], timeout: float) -> str:
    seconds = {name: s for name, _, _, s in rows}
    lines = ["| render (to SVG unless named) | nodes drawn | drawn by | seconds |", "|:--|--:|:--|--:|"]
    for name, nodes, engine, s in rows:
        shown = "neato -n2 (fixed)" if engine == "neato" else engine
        lines.append(f"| {name} | {nodes} | {shown} | {'>' + format(timeout, 'g') if s is None else format(s, '.2f')} |")
    ratios = [
        ("lstm-30-steps whole", "lstm-30-steps split"),
        ("gpt2-48-layers dot", "gpt2-48-layers auto"),
        ("densenet121 dot", "densenet121 auto"),
    ]
    for slow, fast in ratios:
        if seconds.get(fast) and seconds.get(slow):
            lines.append(f"{slow} / {fast}: {seconds[slow] / seconds[fast]:.1f}x")
        elif seconds.get(fast) and slow in seconds:
            lines.append(f"{slow} / {fast}: more than {timeout / seconds[fast]:.0f}x")
    return "\n".join(lines)


# --- the table ---------------------------------------------------------------------

COLUMNS = [
    "graph", "nodes", "edges", "bare ms", "bare+leaves ms", "floor ms", "walk ms", "walk+dot ms", "first ms", "plain ms",
    "torchviz ms", "ours/bare", "ours/bare+leaves", "floor/bare", "ours/floor", "plain/floor", "torchviz/ours", "torchviz/first", "peak MiB",
]
LAYOUT_COLUMN = "dot -Tsvg"


def table(results: Sequence[Result], layout: bool) -> str:
    columns = COLUMNS + ([LAYOUT_COLUMN] if layout else [])
    rows = [_row(r, layout) for r in results]
    widths = [max(len(column), *(len(row[i]) for row in rows)) if rows else len(column) for i, column in enumerate(columns)]

    def line(cells: Sequence[str]) -> str:
        padded = [cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(cells, widths))]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join("-" * (w + 1) + ":" if i else ":" + "-" * (w + 1) for i, w in enumerate(widths)) + "|"
    return "\n".join([line(columns), rule, *(line(row) for row in rows)])


def _row(r: Result, layout: bool) -> list[str]:
    if r.skipped:
        row = [""] * len(COLUMNS)
        row[0], row[1] = r.name, r.skipped
        return row + ([""] if layout else [])
    if r.torchviz is not None:
        torchviz, torchviz_ratio, first_ratio = _ms(r.torchviz), f"{r.torchviz / r.walk_dot:.1f}", f"{r.torchviz / r.first:.1f}"
    else:
        torchviz, torchviz_ratio, first_ratio = r.torchviz_failure or "not installed", "-", "-"
    row = [
        r.name,
        f"{r.nodes:,}",
        f"{r.edges:,}",
        _ms(r.bare),
        _ms(r.bare_leaves),
        _ms(r.floor),
        _ms(r.walk),
        _ms(r.walk_dot),
        _ms(r.first),
        _ms(r.plain),
        torchviz,
        f"{r.walk_dot / r.bare:.1f}",
        f"{r.walk_dot / r.bare_leaves:.1f}",
        f"{r.floor / r.bare:.1f}",
        f"{r.walk_dot / r.floor:.1f}",
        f"{r.plain / r.floor:.1f}",
        torchviz_ratio,
        first_ratio,
        f"{r.peak_bytes / 2**20:,.1f}",
    ]
    return row + ([r.layout] if layout else [])


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f}"


def machine() -> str:
    import graphviz

    import graphviz_autograd

    return (
        f"Python {platform.python_version()}, torch {torch.__version__}, "
        f"graphviz (Python) {graphviz.__version__}, {os.cpu_count()} cores, {platform.machine()}\n"
        f"graphviz_autograd imported from {os.path.dirname(graphviz_autograd.__file__)}"
    )


# --- command line ------------------------------------------------------------------


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", metavar="NAME", choices=[c.name for c in CASES],
                        help="measure this graph only (repeatable); one of: %(choices)s")
    parser.add_argument("--repeat", type=int, default=5, metavar="N", help="best of N runs per measurement (default 5)")
    parser.add_argument("--layout", action="store_true", help=f"also time `dot -Tsvg` on graphs under {LAYOUT_MAX_NODES:,} nodes")
    parser.add_argument("--layout-timeout", type=float, default=60.0, metavar="S", help="seconds before `dot` is stopped (default 60)")
    parser.add_argument("--layouts", action="store_true", help="time tensor -> SVG with each layout (a second table)")
    parser.add_argument("--no-torchviz", action="store_true", help="do not time torchviz even when it is installed")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    with_torchviz = not args.no_torchviz and _importable("torchviz")
    cases = [c for c in CASES if not args.only or c.name in args.only]
    print(machine())
    results = []
    started = time.perf_counter()
    for case in cases:
        if case.needs and not any(map(_importable, case.needs)):
            results.append(Result(case.name, skipped=f"skipped: {' or '.join(case.needs)} not installed"))
            continue
        print(f"measuring {case.name} ...", file=sys.stderr, flush=True)
        result = measure(case, args.repeat, args.layout, args.layout_timeout, with_torchviz)
        if case.source is not None:
            result.name = f"{case.name} ({case.source()})"
        results.append(result)
        gc.collect()
    print(table(results, args.layout))
    print(
        f"ours = walk+dot. Times: best of {args.repeat} runs (of {MIN_RUNS} once a measurement has "
        f"taken {REPEAT_BUDGET_S:g} s). Total {time.perf_counter() - started:.0f} s."
    )
    if args.layouts:
        print()
        print(layout_table(layout_timings(args.layout_timeout), args.layout_timeout))
    return 0


def _importable(module: str) -> bool:
    try:
        __import__(module)
    except Exception:  # a broken install (a wheel built for another torch) raises RuntimeError
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
