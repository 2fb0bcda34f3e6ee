"""How long Graphviz ``dot`` takes on graphs where one output is read by many ops, with
and without junctions (``junctions=False``); run by hand from the repository root:

    PYTHONPATH=. python -m benchmarks.fan_in [--timeout 60] [--only densenet-121]

Each graph is recorded (so it has modules) and drawn whole (``fold_repeated=False``),
with module boxes and without (``clusters=False``); for each, the DOT of both drawings
goes through ``dot -Tsvg`` in the same run, and the table prints both times, their
ratio, the number of junctions drawn and what
:func:`graphviz_autograd.drawing.layout.estimate_layout_seconds` guessed for each.

Graphs, random weights, nothing downloaded:

- DenseNet-121 (:class:`benchmarks.models.DenseNet121`): each layer concatenates
  every earlier feature map of its block, so each is read up to 24 times.
- One dense block of 58 layers: the same, longer.
- GPT-2 (12 layers) and BERT base from their ``transformers`` configs: a residual
  stream is read two to four times, most reads near by, so no junction applies and
  both drawings are the same bytes.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import time
from typing import Any, Callable, Optional, Sequence

import torch

from graphviz_autograd import record, to_dot, walk
from graphviz_autograd.views.junctions import plan_junctions
from graphviz_autograd.views.page_fit import estimate_layout_seconds
from graphviz_autograd.views.shown import shown_graph, split_shared_leaves

from .models import DenseNet121

IMAGE = (1, 3, 224, 224)


def densenet121() -> tuple[Any, Any]:
    torch.manual_seed(0)
    model = DenseNet121()
    with record(model) as recorder:
        out = model(torch.randn(IMAGE))
    return out, recorder


def dense_block_58() -> tuple[Any, Any]:
    torch.manual_seed(0)
    model = DenseNet121(blocks=(58,))
    with record(model) as recorder:
        out = model(torch.randn(IMAGE))
    return out, recorder


def gpt2() -> tuple[Any, Any]:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config())
    with record(model) as recorder:
        out = model(torch.randint(0, model.config.vocab_size, (1, 16))).logits
    return out, recorder


def bert_base() -> tuple[Any, Any]:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    model = BertModel(BertConfig())
    with record(model) as recorder:
        out = model(torch.randint(0, model.config.vocab_size, (1, 16)))
    return (out.last_hidden_state, out.pooler_output), recorder


CASES: dict[str, Callable[[], tuple[Any, Any]]] = {
    "densenet-121": densenet121,
    "dense-block-58": dense_block_58,
    "gpt2-12-layers": gpt2,
    "bert-base": bert_base,
}


def dot_seconds(source: str, timeout: float) -> Optional[float]:
    """Seconds ``dot -Tsvg`` takes on ``source``; None past ``timeout``."""
    start = time.perf_counter()
    try:
        subprocess.run(["dot", "-Tsvg"], input=source.encode(), stdout=subprocess.DEVNULL, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return None
    return time.perf_counter() - start


def _seconds(value: Optional[float], timeout: float) -> str:
    return f">{timeout:g}" if value is None else f"{value:.2f}"


def rows(names: Sequence[str], timeout: float) -> list[list[str]]:
    found = []
    for name in names:
        out, recorder = CASES[name]()
        graph = walk(out, recorder=recorder)
        del out
        drawn = shown_graph(split_shared_leaves(graph), True, False)
        columns = drawn.columns()
        rerouted = plan_junctions(len(columns.ids or ()), columns.links)
        junctions = 0 if rerouted is None else len(rerouted.junctions)
        estimates = [estimate_layout_seconds(drawn, junctions=flag) for flag in (False, True)]
        for clusters in (True, False):
            without, with_ = (
                dot_seconds(to_dot(graph, clusters=clusters, junctions=flag, fold_repeated=False), timeout)
                for flag in (False, True)
            )
            ratio = "-" if without is None or with_ is None else f"{without / with_:.1f}"
            found.append(
                [
                    name,
                    f"{len(graph.nodes):,}",
                    "boxes" if clusters else "clusters=False",
                    _seconds(without, timeout),
                    _seconds(with_, timeout),
                    ratio,
                    str(junctions),
                    f"{estimates[0]:.2f} / {estimates[1]:.2f}",
                ]
            )
    return found


HEADER = ["graph", "nodes", "drawn", "dot s without", "dot s with", "without/with", "junctions", "estimate s without / with"]


def table(found: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in [HEADER, *found]) for i in range(len(HEADER))]
    lines = ["| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths)) + " |" for row in [HEADER, *found]]
    lines.insert(1, "|" + "|".join("-" * (width + 2) for width in widths) + "|")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before dot is given up on")
    parser.add_argument("--only", action="append", choices=sorted(CASES), help="a graph to measure (repeatable)")
    args = parser.parse_args(argv)
    if shutil.which("dot") is None:
        print("Graphviz dot is not installed")
        return 1
    print(table(rows(args.only or list(CASES), args.timeout)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
