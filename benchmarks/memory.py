"""How well the memory of a training step is measured, and whether its checkpoint advice holds.

Run by hand from the repository root, so that this checkout's package is the one imported::

    PYTHONPATH=. python -m benchmarks.memory                    # every case (half an hour on one CPU core)
    PYTHONPATH=. python -m benchmarks.memory --only resnet18 --device cuda

For each model (random weights, nothing downloaded), a training step (SGD without momentum
unless ``--adamw``, so that the optimizer's state does not hide the activations) is measured by
``profile_step(..., steps=1)``; then for each of two targets (fractions of the peak: 0.85 and
0.7 for GPT-2, 0.97 and 0.95 for ResNet-18, see ``TARGETS``; ``--targets`` for others) the
advice is applied to the model, the step measured again, and the advice undone. Printed per
model:

- the peak and its split (parameters, gradients, optimizer state, activations, temporaries);
- ``MemTracker``'s peak and split (``torch.distributed._tools.mem_tracker``, where the
  installed torch has it) of the same step;
- the cost of measuring memory: the memory steps' wall time over a plain step's;
- per target: the modules and runs of blocks advised, the predicted peak and the one measured
  after applying them (within 10%?), the predicted extra step time (the forward time of what is
  checkpointed, measured) and the measured one: the fastest of ``--rounds`` steps with the
  advice applied less the fastest of as many without, taken in turn (within 20%?).

Cases:

- ``gpt2``: GPT-2 small (``--layers`` layers, 12 unless given; 768 wide, eager attention, no
  cache) on ``--batch`` (2) sequences of ``--seq-len`` (512) tokens, with the language-model loss.
  At 2x128 tokens its peak is the end of the backward (the embedding's gradient, the tied
  head's), when every saved tensor has been read: no checkpoint lowers it;
- ``resnet18``: the hand-written ResNet-18 of ``benchmarks.profiling`` on 8 images of 128x128.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn

from graphviz_autograd import profile_step
from graphviz_autograd.graph.descriptions import format_bytes

from .profiling import ResNet18

# Two targets per model, as fractions of its peak. ResNet-18's peak falls in the backward of its
# first stage, while the stem's ReLU and max-pool outputs (functions called in the model's forward,
# in no module a checkpoint could wrap) wait for theirs: checkpointing lowers it by some 5% at most.
TARGETS = {"gpt2": (0.85, 0.7), "resnet18": (0.97, 0.95)}


def gpt2_case(device: str, layers: int, batch: int, seq_len: int) -> tuple[nn.Module, Any, Callable[[Any], Any]]:
    import transformers

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=layers, attn_implementation="eager", use_cache=False)
    model = transformers.GPT2LMHeadModel(config).to(device)
    ids = torch.randint(0, config.vocab_size, (batch, seq_len), device=device)
    return model, {"input_ids": ids, "labels": ids}, lambda out: out.loss


def resnet18_case(device: str) -> tuple[nn.Module, Any, Callable[[Any], Any]]:
    torch.manual_seed(0)
    labels = torch.randint(0, 1000, (8,), device=device)
    return ResNet18().to(device), torch.randn(8, 3, 128, 128, device=device), lambda out: F.cross_entropy(out, labels)


def call(model: nn.Module, inputs: Any) -> Any:
    return model(**inputs) if isinstance(inputs, dict) else model(inputs)


def plain_step_time(model: nn.Module, inputs: Any, loss: Callable[[Any], Any], optimizer: Any, device: str,
                    repeats: int = 3) -> float:
    return statistics.median(step_times(model, inputs, loss, optimizer, device, repeats)[0])


def step_times(model: nn.Module, inputs: Any, loss: Callable[[Any], Any], optimizer: Any, device: str,
               repeats: int) -> tuple[list[float], list[float]]:
    """The wall time of each of ``repeats`` steps, and the process's CPU time in each: with torch
    on one thread, what other work on the machine does not add to."""
    wall, cpu = [], []
    for _ in range(repeats):
        optimizer.zero_grad(set_to_none=True)
        started, cpu_started = time.perf_counter(), time.process_time()
        loss(call(model, inputs)).backward()
        optimizer.step()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
    optimizer.zero_grad(set_to_none=True)
    return wall, cpu


def memtracker_split(model: nn.Module, inputs: Any, loss: Callable[[Any], Any], optimizer: Any) -> Optional[str]:
    try:
        from torch.distributed._tools.mem_tracker import MemTracker
    except ImportError:
        return None
    tracker = MemTracker()
    tracker.track_external(model, optimizer)
    optimizer.zero_grad(set_to_none=True)
    with tracker:
        loss(call(model, inputs)).backward()
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    snapshot = tracker.get_tracker_snapshot("peak")
    parts = []
    for device, kinds in snapshot.items():
        total = kinds.get("Total", sum(v for k, v in kinds.items() if k != "Total"))
        split = ", ".join(f"{str(k).split('.')[-1]} {format_bytes(int(v))}" for k, v in kinds.items() if str(k) != "Total")
        parts.append(f"{device}: peak {format_bytes(int(total))} ({split})")
    return "; ".join(parts)


def paired_step_times(model: nn.Module, inputs: Any, loss: Callable[[Any], Any], optimizer: Any, device: str,
                      paths: tuple[str, ...], rounds: int) -> tuple[float, float, float, float]:
    """The fastest step without and with ``paths`` checkpointed, in wall time and in the process's
    CPU time, their steps taken in turn (plain, checkpointed, plain, ...) so that a machine busy
    with other work slows both alike; the fastest of each, since other work only ever adds to a
    step's time."""
    from graphviz_autograd.checks.memory import apply_checkpointing

    plain: tuple[list[float], list[float]] = ([], [])
    checkpointed: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for into, applied in ((plain, ()), (checkpointed, paths)):
            with apply_checkpointing(model, applied):
                wall, cpu = step_times(model, inputs, loss, optimizer, device, 1)
            into[0].extend(wall)
            into[1].extend(cpu)
    return min(plain[0]), min(checkpointed[0]), min(plain[1]), min(checkpointed[1])


def run_case(name: str, model: nn.Module, inputs: Any, loss: Callable[[Any], Any], device: str, adamw: bool,
             rounds: int, targets: tuple[float, ...]) -> None:
    optimizer = torch.optim.AdamW(model.parameters()) if adamw else torch.optim.SGD(model.parameters(), lr=1e-3)
    # One plain step first, so that the optimizer's state exists as in the measured steps.
    plain_step_time(model, inputs, loss, optimizer, device)
    profile = profile_step(model, inputs, loss=loss, optimizer=optimizer, steps=1)
    memory = profile.memory
    assert memory is not None
    print(f"\n== {name} on {device}: peak {format_bytes(int(memory.peak))} in the {memory.peak_phase}")
    print("ours:       " + ", ".join(f"{k} {format_bytes(int(v))}" for k, v in memory.at_peak.items()))
    tracked = memtracker_split(model, inputs, loss, optimizer)
    print("MemTracker: " + (tracked if tracked is not None else "not in this torch"))
    print(f"measuring memory: {memory.measure_time / memory.plain_step_time:.2f} times a plain step "
          f"({memory.measure_time:.2f} s over {memory.plain_step_time:.3f} s)")
    for target in targets:
        plan = memory.advice(target)
        with plan.apply(model):
            after = profile_step(model, inputs, loss=loss, optimizer=optimizer, steps=1, memory=True).memory
        assert after is not None
        plain, checkpointed, plain_cpu, checkpointed_cpu = paired_step_times(
            model, inputs, loss, optimizer, device, plan.paths, rounds)
        extra = checkpointed - plain
        extra_cpu = checkpointed_cpu - plain_cpu
        cpu_ratio = extra_cpu / plan.extra_time if plan.extra_time > 0 else float("nan")
        peak_ratio = plan.predicted_peak / after.peak
        time_ratio = extra / plan.extra_time if plan.extra_time > 0 else float("nan")
        print(f"target {target:.2f} ({format_bytes(int(plan.target))}): {len(plan.modules)} checkpoints "
              f"{', '.join(plan.paths) or '-'}{'' if plan.reached else ' (out of reach)'}")
        print(f"  peak predicted {format_bytes(int(plan.predicted_peak))}, measured {format_bytes(int(after.peak))}: "
              f"predicted/measured {peak_ratio:.3f} ({'within' if abs(peak_ratio - 1) <= 0.10 else 'MISSES'} 10%)")
        print(f"  extra step time predicted {plan.extra_time:.3f} s, measured {extra:.3f} s "
              f"(fastest of {rounds} steps each way: {plain:.3f} s -> {checkpointed:.3f} s): measured/predicted "
              f"{time_ratio:.3f} ({'within' if abs(time_ratio - 1) <= 0.20 else 'MISSES'} 20%)")
        if not device.startswith("cuda"):
            print(f"  in the process's CPU time (what other work does not add to): measured {extra_cpu:.3f} s "
                  f"({plain_cpu:.3f} s -> {checkpointed_cpu:.3f} s): measured/predicted {cpu_ratio:.3f} "
                  f"({'within' if abs(cpu_ratio - 1) <= 0.20 else 'MISSES'} 20%)")


def return_freed_memory() -> None:
    """Have glibc's malloc hand large freed blocks back to the system at once: a checkpointed
    step frees and makes again tensors of many sizes, and a heap that keeps them grew this
    process to tens of GiB over a few steps of GPT-2 (the tensors alive were 0.3 GiB). The price:
    each such block is mapped afresh, and its pages faulted in, which made a step of GPT-2
    (4 layers, 2x512 tokens) take half as much CPU time again (7.0 s against 4.6 s)."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc
        return
    libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD: blocks of 1 MiB and more are mapped, and unmapped when freed


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", action="append", choices=("gpt2", "resnet18"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3, help="steps timed each way (plain, checkpointed) per target")
    parser.add_argument("--targets", type=float, nargs="+", help="targets, fractions of the peak (each model's own unless given)")
    parser.add_argument("--adamw", action="store_true",
                        help="step with AdamW (its state and scratch often make the optimizer step the peak) instead of SGD")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    return_freed_memory()
    print(f"torch {torch.__version__}, {args.device}")
    for name in args.only or ("gpt2", "resnet18"):
        if name == "gpt2":
            run_case(f"GPT-2 ({args.layers} layers, {args.batch}x{args.seq_len} tokens)",
                     *gpt2_case(args.device, args.layers, args.batch, args.seq_len), args.device, args.adamw, args.rounds,
                     tuple(args.targets or TARGETS["gpt2"]))
        else:
            run_case("ResNet-18 (8 images of 128x128)", *resnet18_case(args.device), args.device, args.adamw, args.rounds,
                     tuple(args.targets or TARGETS["resnet18"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
