"""What :func:`graphviz_autograd.training.watching.watch` costs a CPU training step.

Run by hand from the repository root, so that this checkout's package is the one imported::

    PYTHONPATH=. python -m benchmarks.watching            # about a minute on two cores
    PYTHONPATH=. python -m benchmarks.watching --steps 300 --rounds 5

The model is a 4-layer GPT-2 (``transformers.GPT2Config(n_layer=4, n_embd=128,
n_head=4, vocab_size=1000, n_positions=128)``, random weights, nothing downloaded) on
a batch of 8 sequences of 64 tokens; a step is its forward pass with the language-model
loss, the backward pass and an AdamW step. Four ways to run the same steps are timed
in turn, round after round, so that a machine's drift falls on all of them alike:

- ``plain``: no watching;
- ``every 100``: ``watch(model, optimizer=opt, every=100)`` (target: at most 1.02x plain);
- ``every 1``: ``watch(model, optimizer=opt, every=1)`` (target: at most 1.3x plain);
- ``every 1 -h``: the same with ``histograms=False``.

Each is timed over ``--steps`` steps per round; the table shows, per way, the median
over the rounds of the time per step and its ratio to ``plain``, by the process's CPU
time (``time.process_time``) and by the wall clock. The CPU time is the one to read on
a shared machine: on one thread (``--threads 1``, the default) it counts the work done,
not the time spent waiting for a core another process holds. The graph a watcher records at
its first logged step (``graph=True``, the default) is a one-time cost, timed on its own
in the last line and left out of the rounds (``graph=False`` there).
"""

from __future__ import annotations

import argparse
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
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    model = gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 1000, (8, 64), generator=torch.Generator().manual_seed(1))
    step = make_step(model, opt, ids)
    for _ in range(5):  # warm-up: allocator, AdamW's state
        step()

    ways: dict[str, Callable[[], tuple[float, float]]] = {
        "plain": lambda: timed(step, args.steps),
    }
    for every in (100, 1):
        def run(every: int = every) -> tuple[float, float]:
            with watch(model, optimizer=opt, every=every, graph=False):
                return timed(step, args.steps)

        ways[f"every {every}"] = run

    def run_without_histograms() -> tuple[float, float]:
        with watch(model, optimizer=opt, every=1, graph=False, histograms=False):
            return timed(step, args.steps)

    ways["every 1 -h"] = run_without_histograms
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, way in ways.items():
            times[name].append(way())

    with watch(model, optimizer=opt, every=1) as w:
        start = time.perf_counter()
        step()
        first = time.perf_counter() - start
    assert w.graph() is not None

    plain_cpu = statistics.median(cpu for cpu, _ in times["plain"])
    plain_wall = statistics.median(wall for _, wall in times["plain"])
    print(f"torch {torch.__version__}, {platform.machine()}, {torch.get_num_threads()} thread(s); "
          f"{args.rounds} rounds of {args.steps} steps each")
    print(f"{'way':<10} {'cpu ms/step':>11} {'ratio':>6} {'wall ms/step':>12} {'ratio':>6}  cpu ms per round")
    for name, values in times.items():
        cpu = statistics.median(c for c, _ in values)
        wall = statistics.median(w for _, w in values)
        rounds = " ".join(f"{c * 1e3:.1f}" for c, _ in values)
        print(f"{name:<10} {cpu * 1e3:11.2f} {cpu / plain_cpu:6.3f} {wall * 1e3:12.2f} {wall / plain_wall:6.3f}  {rounds}")
    print(f"first logged step with its graph recorded: {first * 1e3:.1f} ms wall once ({first / plain_wall:.1f} plain steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
