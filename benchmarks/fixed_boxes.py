"""The fixed layout with and without module boxes, timed in the same run.

The fixed layered layout draws graphs too big for ``dot``; with a recorded graph
and ``clusters=True`` it also draws each module as a box around its nodes. This
times, for each graph, the fixed layout of every node (``fold_repeated=False``)
without boxes (``clusters=False``, the baseline: what the layout did before it
drew boxes) and with them, best of ``--repeat`` runs each, alternately::

    PYTHONPATH=. python -m benchmarks.fixed_boxes
    PYTHONPATH=. python -m benchmarks.fixed_boxes --blocks 20000 --repeat 3 --render

Graphs: GPT-2 with 48 layers (``GPT2Config(n_layer=48, n_embd=64, n_head=2)``,
recorded), and a made-up recorded chain of ``--blocks`` blocks of five nodes
(a block with a linear layer and an activation in it), 100,000 nodes at 20,000
blocks. ``positions`` is :func:`~graphviz_autograd.drawing.layout.fixed_layout_lines`
alone (ranks, order, places, boxes); ``lay_out`` is all the DOT text, the
nodes' lines and the modules' nested clusters included. ``--render`` also times
``neato -n2 -Tsvg`` on each DOT once.
"""

from __future__ import annotations

import argparse
import subprocess
import time
from typing import List, Optional, Sequence

from graphviz_autograd.drawing.dot_writer import digraph
from graphviz_autograd.graph.autograd_graph import ACCUMULATE_GRAD, OP, OUTPUT, PARAMETER, AutogradGraph, Edge, ModuleInfo, Node
from graphviz_autograd.drawing.layout import fixed_layout_lines, lay_out
from graphviz_autograd.views.shown import shown_graph, split_shared_leaves
from graphviz_autograd.views.prepared import prepare

from .run import best_time


def gpt2_recorded(layers: int = 48) -> AutogradGraph:
    """GPT-2 with ``layers`` small layers, its forward pass recorded, walked."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from graphviz_autograd import record
    from graphviz_autograd.capture.walking import walk

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=layers, n_embd=64, n_head=2))
    input_ids = torch.randint(0, model.config.vocab_size, (1, 16))
    with record(model) as recorder:
        logits = model(input_ids).logits
    return walk(logits, dict(model.named_parameters()), recorder=recorder)


def block_chain(blocks: int) -> AutogradGraph:
    """A recorded-like chain of ``blocks`` blocks: in each, a weight, its AccumulateGrad and an
    op in ``blocks.k.fc``, an activation in ``blocks.k.act``, and an add in ``blocks.k``."""
    nodes: List[Node] = [Node("n0", OUTPUT, "y", shape=(4,))]
    edges: List[Edge] = []
    modules = [ModuleInfo("", "Chain"), ModuleInfo("blocks", "ModuleList")]
    below = "n0"
    for k in range(blocks - 1, -1, -1):
        path = f"blocks.{k}"
        modules += [ModuleInfo(path, "Block"), ModuleInfo(f"{path}.fc", "Linear"), ModuleInfo(f"{path}.act", "ReLU")]
        first = len(nodes)
        add, act, mm, grad, weight = (f"n{first + j}" for j in range(5))
        nodes += [
            Node(add, OP, "AddBackward0", module=path),
            Node(act, OP, "ReluBackward0", module=f"{path}.act"),
            Node(mm, OP, "MmBackward0", module=f"{path}.fc"),
            Node(grad, ACCUMULATE_GRAD, "AccumulateGrad", module=f"{path}.fc"),
            Node(weight, PARAMETER, f"{path}.fc.weight", shape=(4, 4), module=f"{path}.fc"),
        ]
        edges += [Edge(add, below), Edge(act, add), Edge(mm, act), Edge(grad, mm), Edge(weight, grad)]
        below = add
    modules.sort(key=lambda m: [int(p) if p.isdigit() else p for p in m.path.split(".")] if m.path else [])
    return AutogradGraph(tuple(nodes), tuple(edges), True, tuple(modules))


def neato_seconds(source: str) -> float:
    start = time.perf_counter()
    subprocess.run(["neato", "-n2", "-Tsvg"], input=source.encode(), stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def measure(name: str, graph: AutogradGraph, repeat: int, render: bool) -> List[str]:
    drawn = shown_graph(split_shared_leaves(graph))
    timings = {}
    for clusters in (False, True):
        timings[("positions", clusters)] = best_time(lambda c=clusters: fixed_layout_lines(drawn, clusters=c), repeat)
        timings[("lay_out", clusters)] = best_time(
            lambda c=clusters: lay_out(prepare(graph, layout="fixed", depth="full", fold_repeated=False, clusters=c)), repeat
        )
    boxes = sum(line.startswith("\tsubgraph cluster_m") for line in fixed_layout_lines(drawn, clusters=True))
    rows = []
    for step in ("positions", "lay_out"):
        before, after = timings[(step, False)], timings[(step, True)]
        rows.append(f"| {name} | {len(drawn.nodes):,} | {boxes:,} | {step} | {before * 1e3:,.0f} | {after * 1e3:,.0f} | {after / before:.2f} |")
    if render:
        seconds = []
        for clusters in (False, True):
            source = digraph(lay_out(prepare(graph, layout="fixed", depth="full", fold_repeated=False, clusters=clusters)).lines)
            seconds.append(neato_seconds(source))
        rows.append(f"| {name} | {len(drawn.nodes):,} | {boxes:,} | neato -n2 -Tsvg | {seconds[0] * 1e3:,.0f} | {seconds[1] * 1e3:,.0f} | {seconds[1] / seconds[0]:.2f} |")
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=48, help="GPT-2 layers (0: leave GPT-2 out)")
    parser.add_argument("--blocks", type=int, default=20_000, help="blocks of the made-up chain (0: leave it out)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--render", action="store_true", help="also time neato -n2 -Tsvg once per DOT")
    args = parser.parse_args(argv)
    print("| graph | nodes | boxes | step | ms without boxes (baseline) | ms with boxes | with/without |")
    print("|:--|--:|--:|:--|--:|--:|--:|")
    if args.layers:
        for row in measure(f"GPT-2, {args.layers} layers", gpt2_recorded(args.layers), args.repeat, args.render):
            print(row, flush=True)
    if args.blocks:
        for row in measure(f"chain of {args.blocks:,} blocks", block_chain(args.blocks), args.repeat, args.render):
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
