"""What :func:`graphviz_autograd.training.watching.watch` costs a CPU training step.

Run by hand from the repository root, so that this checkout's package is the one imported::

    PYTHONPATH=. python -m benchmarks.watching            # about a minute on two cores
    PYTHONPATH=. python -m benchmarks.watching --steps 300 --rounds 5

Two models (``--model gpt2``, ``cnn`` or ``both``, the default, one after the other in
one run). ``gpt2`` is a 4-layer GPT-2 (``transformers.GPT2Config(n_layer=4, n_embd=128,
n_head=4, vocab_size=1000, n_positions=128)``, random weights, nothing downloaded) on
a batch of 8 sequences of 64 tokens; a step is its forward pass with the language-model
loss, the backward pass and an AdamW step. ``cnn`` is a conv net with BatchNorm (four
3x3 convolutions of 32 to 128 channels, each with BatchNorm and ReLU, two poolings, a
linear head) on a batch of 32 images of 3x32x32; a step is its forward pass with the
cross-entropy loss, the backward pass and an SGD step with momentum. Five ways to run
the same steps are timed in turn, round after round, so that a machine's drift falls on all of them alike:

- ``plain``: no watching;
- ``every 100``: ``watch(model, optimizer=opt, every=100)`` (target: at most 1.02x plain);
- ``every 1``: ``watch(model, optimizer=opt, every=1)`` (target: at most 1.3x plain; its
  histograms are taken every tenth step, ``histogram_every=10``);
- ``every 1 -h``: the same with ``histograms=False``;
- ``every 1 +h``: the same with ``histogram_every=1``: histograms at every step.

Each is timed over ``--steps`` steps per round, with one watcher per way entered again
each round (its steps count on, so that ``every=100`` logs one step in a hundred however
short the rounds); the table shows, per way, the median over the rounds of the time per
step, and the median over the rounds of its ratio to ``plain`` in the same round, by the process's CPU
time (``time.process_time``) and by the wall clock. The CPU time is the one to read on
a shared machine: on one thread (``--threads 1``, the default) it counts the work done,
not the time spent waiting for a core another process holds. The graph a watcher records at
its first logged step (``graph=True``, the default) is a one-time cost, timed on its own
in the last line and left out of the rounds (``graph=False`` there).
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import statistics
import sys
import time
from typing import Any, Callable

import torch

from graphviz_autograd import watch


def gpt2(seed: int = 0) -> Any:
    import transformers

    torch.manual_seed(seed)
    config = transformers.GPT2Config(n_layer=4, n_embd=128, n_head=4, vocab_size=1000, n_positions=128)
    return transformers.GPT2LMHeadModel(config)


def make_step(model: Any, opt: torch.optim.Optimizer, ids: torch.Tensor) -> Callable[[], None]:
    def step() -> None:
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def cnn(seed: int = 0) -> torch.nn.Module:
    from torch import nn

    torch.manual_seed(seed)

    def block(inputs: int, outputs: int) -> list[nn.Module]:
        return [nn.Conv2d(inputs, outputs, 3, padding=1, bias=False), nn.BatchNorm2d(outputs), nn.ReLU()]

    return nn.Sequential(
        *block(3, 32), *block(32, 32), nn.MaxPool2d(2),
        *block(32, 64), *block(64, 128), nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10),
    )


def make_cnn_step(model: Any, opt: torch.optim.Optimizer, images: torch.Tensor, labels: torch.Tensor) -> Callable[[], None]:
    def step() -> None:
        torch.nn.functional.cross_entropy(model(images), labels).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def setup(name: str) -> tuple[Any, torch.optim.Optimizer, Callable[[], None]]:
    """The model, its optimizer and one training step of it."""
    if name == "gpt2":
        model = gpt2()
        opt: torch.optim.Optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        ids = torch.randint(0, 1000, (8, 64), generator=torch.Generator().manual_seed(1))
        return model, opt, make_step(model, opt, ids)
    model = cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    generator = torch.Generator().manual_seed(1)
    images = torch.randn(32, 3, 32, 32, generator=generator)
    labels = torch.randint(0, 10, (32,), generator=generator)
    return model, opt, make_cnn_step(model, opt, images, labels)


def timed(step: Callable[[], None], steps: int) -> tuple[float, float]:
    """(CPU seconds, wall seconds) per step."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(steps):
        step()
    return (time.process_time() - cpu) / steps, (time.perf_counter() - wall) / steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="steps per way per round (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--threads", type=int, default=1, help="torch's CPU threads (default 1)")
    parser.add_argument("--model", choices=("gpt2", "cnn", "both"), default="both", help="what to train (default both)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {platform.machine()}, {torch.get_num_threads()} thread(s); "
          f"{args.rounds} rounds of {args.steps} steps each")
    for name in ("gpt2", "cnn") if args.model == "both" else (args.model,):
        measure(name, args.steps, args.rounds)
    return 0


def measure(name: str, steps: int, rounds: int) -> None:
    model, opt, step = setup(name)
    for _ in range(5):  # warm-up: allocator, the optimizer's state
        step()

    # One watcher per way, entered again each round: its steps count on across rounds, so that
    # every=100 logs one step in a hundred (and histograms come every tenth) however short a round.
    ways: dict[str, Any] = {
        "plain": contextlib.nullcontext(),
        "every 100": watch(model, optimizer=opt, every=100, graph=False),
        "every 1": watch(model, optimizer=opt, every=1, graph=False),
        "every 1 -h": watch(model, optimizer=opt, every=1, graph=False, histograms=False),
        "every 1 +h": watch(model, optimizer=opt, every=1, graph=False, histogram_every=1),
    }
    times: dict[str, list[tuple[float, float]]] = {way: [] for way in ways}
    for _ in range(rounds):
        for way, watching in ways.items():
            with watching:
                times[way].append(timed(step, steps))

    with watch(model, optimizer=opt, every=1) as w:
        start = time.perf_counter()
        step()
        first = time.perf_counter() - start
    assert w.graph() is not None

    plain = times["plain"]
    plain_wall = statistics.median(wall for _, wall in plain)
    print(f"\n{name}")
    print(f"{'way':<10} {'cpu ms/step':>11} {'ratio':>6} {'wall ms/step':>12} {'ratio':>6}  cpu ratio per round")
    for way, values in times.items():
        cpu = statistics.median(c for c, _ in values)
        wall = statistics.median(w for _, w in values)
        # Each round's ratio to the plain steps of the same round, then their median: a drift
        # of the machine's speed from round to round falls on both sides of each ratio.
        cpu_ratios = [c / p for (c, _), (p, _) in zip(values, plain)]
        wall_ratio = statistics.median(w / p for (_, w), (_, p) in zip(values, plain))
        per_round = " ".join(f"{r:.2f}" for r in cpu_ratios)
        print(f"{way:<10} {cpu * 1e3:11.2f} {statistics.median(cpu_ratios):6.3f} {wall * 1e3:12.2f} {wall_ratio:6.3f}  {per_round}")
    print(f"first logged step with its graph recorded: {first * 1e3:.1f} ms wall once ({first / plain_wall:.1f} plain steps)")


if __name__ == "__main__":
    sys.exit(main())
