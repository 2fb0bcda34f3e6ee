"""What the search of where NaN/Inf is born costs a step, and what anomaly mode finds on the same broken models.

Run by hand from the repository root, so that this checkout's package is the one imported::

    PYTHONPATH=. python -m benchmarks.nonfinite            # about a minute on two cores
    PYTHONPATH=. python -m benchmarks.nonfinite --rounds 7

Two tables. The first times one training step (forward pass, loss, backward pass) three
ways, in turn, round after round, on a 4-layer GPT-2 (the model of ``benchmarks.watching``)
and a small conv net with BatchNorm:

- ``plain``: the step alone;
- ``anomaly``: the step under ``torch.autograd.detect_anomaly()``, the baseline everyone has;
- ``find_nonfinite``: :func:`graphviz_autograd.checks.nonfinite_origin.find_nonfinite`, which
  records the forward pass, reads every call's output for NaN/Inf, walks the graph, hooks every
  node of the backward pass and puts the model back after.

Each cell is the median over the rounds of the process's CPU time per step, with its ratio to
``plain`` and to ``anomaly``. The second table runs each broken model of
``tests/nonfinite_models.py`` under anomaly mode and under ``find_nonfinite`` and says what
each names: anomaly mode names the first backward node whose output holds NaN (it looks at
neither the forward values, nor Inf, nor the optimizer).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from graphviz_autograd.checks.nonfinite_origin import find_nonfinite

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.nonfinite_models import CASES  # noqa: E402


def gpt2() -> tuple[nn.Module, Any, Callable[[Any], Any]]:
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=4, n_embd=128, n_head=4, vocab_size=1000, n_positions=128)
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, 1000, (8, 64), generator=torch.Generator().manual_seed(0))
    return model, {"input_ids": ids, "labels": ids}, lambda out: out.loss


def conv_net() -> tuple[nn.Module, Any, Callable[[Any], Any]]:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    channels = 3
    for width in (16, 32, 32, 64):
        layers += [nn.Conv2d(channels, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
        channels = width
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, 10))
    x = torch.randn(16, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    return model, x, lambda out: out.logsumexp(-1).mean()


def plain_step(model: nn.Module, inputs: Any, loss: Callable[[Any], Any]) -> None:
    out = model(**inputs) if isinstance(inputs, dict) else model(inputs)
    loss(out).backward()
    model.zero_grad(set_to_none=True)


def anomaly_step(model: nn.Module, inputs: Any, loss: Callable[[Any], Any]) -> None:
    with torch.autograd.detect_anomaly(check_nan=True):
        plain_step(model, inputs, loss)


def search_step(model: nn.Module, inputs: Any, loss: Callable[[Any], Any]) -> None:
    find_nonfinite(model, inputs, loss=loss)


def cpu_time(step: Callable[[], None], repeat: int) -> float:
    started = time.process_time()
    for _ in range(repeat):
        step()
    return (time.process_time() - started) / repeat


def cost_table(rounds: int, repeat: int) -> list[str]:
    rows = ["| model | plain ms | anomaly ms | find_nonfinite ms | anomaly/plain | find/plain | find/anomaly |",
            "|:--|--:|--:|--:|--:|--:|--:|"]
    for name, build in (("gpt2 4-layer", gpt2), ("conv net + BatchNorm", conv_net)):
        model, inputs, loss = build()
        ways = {"plain": plain_step, "anomaly": anomaly_step, "find": search_step}
        for step in ways.values():  # warm up each
            step(model, inputs, loss)
        times: dict[str, list[float]] = {way: [] for way in ways}
        for _ in range(rounds):
            for way, step in ways.items():
                times[way].append(cpu_time(lambda: step(model, inputs, loss), repeat))  # noqa: B023
        plain, anomaly, search = (statistics.median(times[w]) * 1e3 for w in ("plain", "anomaly", "find"))
        rows.append(f"| {name} | {plain:.1f} | {anomaly:.1f} | {search:.1f} | {anomaly / plain:.2f} | "
                    f"{search / plain:.2f} | {search / anomaly:.2f} |")
    return rows


_ANOMALY = re.compile(r"Function '(\w+)' returned nan")


def anomaly_names(model: nn.Module, inputs: Any, loss: Callable[[Any], Any], optimizer: Any) -> str:
    """What anomaly mode says of one step (and the optimizer's step after it, with one)."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autograd.detect_anomaly(check_nan=True):
                out = model(**inputs) if isinstance(inputs, dict) else model(inputs)
                loss(out).backward()
    except RuntimeError as error:
        found = _ANOMALY.search(str(error))
        return found.group(1) if found else str(error).splitlines()[0][:60]
    return "nothing"


def cases_table() -> list[str]:
    rows = ["| broken model | find_nonfinite names | where | anomaly mode names | anomaly right? |",
            "|:--|:--|:--|:--|:--|"]
    right = 0
    for case in CASES:
        model, inputs, loss, optimizer = case.build(True)
        found = find_nonfinite(model, inputs, loss=loss, optimizer=optimizer)
        first = found[0]
        node = found.graph.node(first.nodes[0]) if first.nodes and found.graph is not None else None
        where = f"{node.label} in {node.module or 'the top level'}" if node is not None else "-"
        model, inputs, loss, optimizer = case.build(True)
        said = anomaly_names(model, inputs, loss, optimizer)
        # Anomaly mode is right when it names the backward node of the op that made the values.
        correct = node is not None and said == node.label
        right += correct
        rows.append(f"| {case.name} | {first.code}: {first.subject} | {where} | {said} | {'yes' if correct else 'no'} |")
    rows.append(f"\nanomaly mode names the producer in {right} of {len(CASES)} broken models; find_nonfinite in "
                f"{len(CASES)} of {len(CASES)} (tests/test_nonfinite.py holds it to that).")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3, help="steps per way per round")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.rounds} rounds of {args.repeat} steps; CPU ms per step")
    print("\n".join(cost_table(args.rounds, args.repeat)))
    print()
    print("\n".join(cases_table()))


if __name__ == "__main__":
    main()
