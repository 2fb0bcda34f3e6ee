"""How long the checkpoint advice takes on deep models, beside measuring the memory it replays.

Run by hand from the repository root::

    PYTHONPATH=. python -m benchmarks.advice                 # GPT-2 stacks of 12, 24 and 48 layers
    PYTHONPATH=. python -m benchmarks.advice --layers 96

Each GPT-2 (small widths, random weights, nothing downloaded) is profiled once with
``profile_step(..., steps=1)``. A stack of L layers has some L^2/2 candidates (every run of
consecutive layers, and each module), holding some L^3/6 saved tensors among them, all
replayed over a timeline of up to 1,000 points. Printed per depth: the candidates and their
saved tensors; what measuring the memory took (``StepMemory.measure_time``, the baseline);
the first ``advice()`` (which builds the replay), a second at another target, and
``table()`` with ``to_dict()`` (what ``profile`` prints and writes), each also over the baseline.
"""

from __future__ import annotations

import argparse
import time
from typing import Optional

import torch

from graphviz_autograd import profile_step


def run(layers: int) -> None:
    import transformers

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=layers, n_embd=32, n_head=2, vocab_size=100, n_positions=64, use_cache=False)
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, 100, (2, 32))
    memory = profile_step(model, {"input_ids": ids, "labels": ids}, loss=lambda out: out.loss, steps=1).memory
    assert memory is not None
    base = memory.measure_time
    timings = []
    for what, call in (("advice(0.75), first", lambda: memory.advice(0.75)), ("advice(0.5)", lambda: memory.advice(0.5)),
                       ("table() and to_dict()", lambda: (memory.table(), memory.to_dict()))):
        started = time.perf_counter()
        call()
        timings.append((what, time.perf_counter() - started))
    saved = sum(len(m.saved) for m in memory.modules)
    print(f"GPT-2, {layers} layers: {len(memory.modules)} candidates holding {saved} saved tensors; "
          f"measuring memory {base:.2f} s")
    for what, seconds in timings:
        print(f"  {what}: {seconds:.3f} s, {seconds / base:.2f} of measuring memory")


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[12, 24, 48])
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread")
    for layers in args.layers:
        run(layers)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
