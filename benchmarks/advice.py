"""How long the checkpoint advice takes on deep models, beside measuring the memory it replays.

Run by hand from the repository root::

    PYTHONPATH=. python -m benchmarks.advice                 # GPT-2 stacks of 12, 24 and 48 layers
    PYTHONPATH=. python -m benchmarks.advice --layers 96

Each GPT-2 (small widths, random weights, nothing downloaded) is profiled once with
``profile_step(..., steps=1)``. A stack of L layers has some L^2/2 candidates (every run of
consecutive layers, and each module), holding some L^3/6 saved tensors among them, all
replayed over a timeline of up to 1,000 points. Printed per depth: the candidates and their
saved tensors, and the entries holding them (one per tensor and call, shared by the candidates
that drop it); what measuring the memory took (``StepMemory.measure_time``, the baseline), and
of it the building of the candidates; the first ``advice()`` (which builds the replay), a
second at another target, ``table()`` with ``to_dict()`` (what ``profile`` prints and writes)
and reading that JSON back (``StepMemory.from_dict``), each also over the baseline.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, Optional

import torch

from graphviz_autograd import profile_step
from graphviz_autograd.checks import memory as checks_memory


def run(layers: int) -> None:
    import transformers

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=layers, n_embd=32, n_head=2, vocab_size=100, n_positions=64, use_cache=False)
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, 100, (2, 32))
    building: list[float] = []
    candidates = checks_memory._candidates

    def timed(*args: Any) -> Any:
        started = time.perf_counter()
        found = candidates(*args)
        building.append(time.perf_counter() - started)
        return found

    checks_memory._candidates = timed
    try:
        memory = profile_step(model, {"input_ids": ids, "labels": ids}, loss=lambda out: out.loss, steps=1).memory
    finally:
        checks_memory._candidates = candidates
    assert memory is not None
    base = memory.measure_time
    timings = []
    written: list[str] = []
    for what, call in (("advice(0.75), first", lambda: memory.advice(0.75)), ("advice(0.5)", lambda: memory.advice(0.5)),
                       ("table() and to_dict()", lambda: (memory.table(), written.append(json.dumps(memory.to_dict())))),
                       ("from_dict() of that JSON", lambda: checks_memory.StepMemory.from_dict(json.loads(written[0])))):
        started = time.perf_counter()
        call()
        timings.append((what, time.perf_counter() - started))
    saved = sum(len(m.saved) for m in memory.modules)
    entries = len({id(e) for m in memory.modules for e in m.saved})
    print(f"GPT-2, {layers} layers: {len(memory.modules)} candidates holding {saved} saved tensors in {entries} entries "
          f"(JSON {len(written[0]) / 1e6:.1f} MB); measuring memory {base:.2f} s, of it building the candidates "
          f"{sum(building):.3f} s ({sum(building) / base:.2f})")
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
