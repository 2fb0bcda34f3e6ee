"""What seeing inside torch.compile costs: the first training step (compile included) and the
steps after it, with and without the capture of compiled regions, as ratios measured in one run.

Run from the repository root, so that this checkout's package is the one imported::

    PYTHONPATH=. python -m benchmarks.compiled                      # aot_eager, both models
    PYTHONPATH=. python -m benchmarks.compiled --backend inductor   # minutes per model on a small CPU
    PYTHONPATH=. python -m benchmarks.compiled --models resnet --steps 20

Per model (a 2-layer GPT-2 from a config and a small hand-written ResNet, see
``tests/compiled_models.py``), each way starts from ``torch._dynamo.reset()`` with
AOTAutograd's and Inductor's caches off, so every first step compiles from nothing:

- ``plain``: the compiled model's first step (forward, loss, backward), not recorded;
- ``record``: the first step's forward inside ``record(model)`` with the capture of compiled
  regions switched off (as record() was before it), walked with the recorder;
- ``capture``: the same with the capture on: the regions' graphs read, the walk opening them.

Each model is compiled once untimed first (what a process does once), then the ways run
interleaved ``--repeat`` times and the fastest first step counts. Then ``--steps`` more steps
of each, outside record() (the first of them is left out: a model compiled under record()'s
hooks compiles once more without them); the fastest step counts. Times are the CPU time of
the calling thread (``time.thread_time``, with one intra-op thread), not the wall clock.
Ratios over ``plain``: above 1 is slower. The default backend is aot_eager: Inductor
compiles C++ and takes minutes per model on a small CPU (about 110 s for the ResNet's first
step on two shared cores); ``--backend inductor`` measures it anyway.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from typing import Any, Callable, Iterator

import torch

from graphviz_autograd import record, walk
from graphviz_autograd.capture import compiled_regions
from tests.compiled_models import gpt2, loss_of, resnet

# CPU time of the calling thread, not the wall clock: on a shared machine a step's wall time
# is mostly the wait for a core (the same step took 3 ms and 1 s here, with no recompile), and
# the process's CPU time takes in what torch's own background threads do for seconds after a
# compile. With one intra-op thread (set in main) all of a step's work is the caller's.
clock = time.thread_time

MODELS: dict[str, Callable[[], tuple[torch.nn.Module, torch.Tensor]]] = {"gpt2": gpt2, "resnet": resnet}
WAYS = ("plain", "record", "capture")


@contextlib.contextmanager
def capture_switched_off() -> Iterator[None]:
    """record() as it was before it looked inside compiled regions."""
    saved = compiled_regions._missing_capability
    compiled_regions._missing_capability = lambda: "switched off for the benchmark"
    try:
        yield
    finally:
        compiled_regions._missing_capability = saved


def cold_caches() -> None:
    torch._dynamo.reset()
    torch._functorch.config.enable_autograd_cache = False
    try:
        torch._inductor.config.fx_graph_cache = False
    except AttributeError:  # no inductor in this torch
        pass


def first_step(way: str, model: torch.nn.Module, x: torch.Tensor, backend: str) -> tuple[float, Any]:
    """Seconds of the first step, compile included, and what it compiled into."""
    cold_caches()
    compiled = torch.compile(model, backend=backend)
    start = clock()
    if way == "plain":
        loss_of(compiled(x)).backward()
    else:
        switch = capture_switched_off() if way == "record" else contextlib.nullcontext()
        with switch:
            with record(model) as rec:
                loss = loss_of(compiled(x))
        walk(loss, model, recorder=rec)
        loss.backward()
    return clock() - start, compiled


def step_time(compiled: Any, x: torch.Tensor, steps: int) -> float:
    """The fastest step: on a shared machine a mean or even a median takes in whatever else ran."""
    loss_of(compiled(x)).backward()  # a model compiled under record()'s hooks compiles once more here
    times = []
    for _ in range(steps):
        start = clock()
        loss_of(compiled(x)).backward()
        times.append(clock() - start)
    return min(times)


def main(argv: Any = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="aot_eager", help="torch.compile backend (aot_eager, inductor)")
    parser.add_argument("--models", action="append", choices=sorted(MODELS), help="models to run (default: all)")
    parser.add_argument("--steps", type=int, default=10, help="steps timed after the first")
    parser.add_argument("--repeat", type=int, default=2, help="first steps per way; the fastest counts")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, backend {args.backend}, {torch.get_num_threads()} threads; "
          f"first step: fastest of {args.repeat}; steps after it: fastest of {args.steps}")
    header = ["model", *(f"{way} first s" for way in WAYS), "record/plain", "capture/plain", "capture/record",
              *(f"{way} step ms" for way in WAYS), "step capture/plain"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    import warnings

    warnings.filterwarnings("ignore", message="graphviz-autograd")  # the note the switched-off capture gives
    for name in args.models or sorted(MODELS):
        model, x = MODELS[name]()
        first_step("capture", model, x, args.backend)  # untimed: what a process compiles once (imports, caches of torch)
        firsts, steps = {way: float("inf") for way in WAYS}, {}
        for _ in range(args.repeat):
            for way in WAYS:  # interleaved, so that a busy moment of the machine falls on every way alike
                model, x = MODELS[name]()
                seconds, compiled = first_step(way, model, x, args.backend)
                firsts[way] = min(firsts[way], seconds)
                steps[way] = step_time(compiled, x, args.steps)
        row = [name, *(f"{firsts[w]:.2f}" for w in WAYS), f"{firsts['record'] / firsts['plain']:.2f}",
               f"{firsts['capture'] / firsts['plain']:.2f}", f"{firsts['capture'] / firsts['record']:.2f}",
               *(f"{steps[w] * 1000:.1f}" for w in WAYS), f"{steps['capture'] / steps['plain']:.2f}"]
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
