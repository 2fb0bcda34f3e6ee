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
- the cost of measuring memory: all the work of ``memory=True`` (the steps timing each module, the
  checkpoint's rates, the memory step and reading it), in wall time, over a plain step's;
- per target: the modules and runs of blocks advised, the predicted peak and the one measured
  after applying them (within 10%?), the predicted extra step time (the forward time of what is
  checkpointed, measured, and the checkpoints' own overhead, ``ModuleMemory.overhead``) and the
  measured one (within 20%?): ``--rounds`` rounds of a plain step then one with the advice
  applied, and the median of the rounds' differences; the same as a share of a plain step
  (``CheckpointPlan.extra_share`` against each round's difference over its plain step), which
  a machine whose speed drifts between the profile and the rounds moves alike on both sides;
  and the same for the part of the steps
  after the forward, where a checkpoint's extra work falls (its first forward does the plain
  one's work, less the saving), which is steadier; and the recompute alone, timed by a
  stand-in ``forward`` on each checkpointed block, over the forward time it repeats. Each
  median comes with a 95% interval (``median_interval``), and "within 20%" is said only
  where the whole interval is.

Both sides of the time comparison read one clock, the plan's (``plan.clock``): on CPU, where
the script runs torch on one thread, the process's CPU time, which other work on a shared
machine does not add to (its wall time does: the same plain step of GPT-2 took 16.3 s in one
round and 37.2 s in another); on CUDA the wall time after synchronizing. Taking the steps in
turn and the median of the differences lets a machine whose speed drifts (other work's use of
the caches and memory) slow both sides alike. On a 2-core machine shared with other work the
CPU time of the same step still moves by some 5% from step to step, as much as the extra time
of a checkpoint of 3 of GPT-2's 12 blocks: the whole step's ratio landed from 0.85 to 1.72
over four targets in two runs of 7 rounds, the part after the forward within 20% in each of
the last run's (``docs/benchmarks.md``).

Cases:

- ``gpt2``: GPT-2 small (``--layers`` layers, 12 unless given; 768 wide, eager attention, no
  cache) on ``--batch`` (2) sequences of ``--seq-len`` (512) tokens, with the language-model loss.
  At 2x128 tokens its peak is the end of the backward (the embedding's gradient, the tied
  head's), when every saved tensor has been read: no checkpoint lowers it. On a CPU, at 2x512
  its heap outgrows a machine of 24 GiB unless ``--map-large``; ``--batch 1`` runs with
  malloc's defaults (2.3 to 2.5 GiB) and twice the rounds in the same time;
- ``resnet18``: the hand-written ResNet-18 of ``benchmarks.profiling`` on ``--images`` (8)
  images of ``--size`` (128) pixels square.

With ``--dump FILE`` every measurement is also written as JSON (per case: the profile's memory,
each plan, the peak measured after applying it, and each round's times), to read again without
running the steps again.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn

from graphviz_autograd import profile_step
from graphviz_autograd.checks.memory import CPU_TIME
from graphviz_autograd.graph.descriptions import format_bytes

from .profiling import ResNet18
from .stand_ins import stand_in_forwards

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


def resnet18_case(device: str, images: int = 8, size: int = 128) -> tuple[nn.Module, Any, Callable[[Any], Any]]:
    torch.manual_seed(0)
    labels = torch.randint(0, 1000, (images,), device=device)
    return (ResNet18().to(device), torch.randn(images, 3, size, size, device=device),
            lambda out: F.cross_entropy(out, labels))


def call(model: nn.Module, inputs: Any) -> Any:
    return model(**inputs) if isinstance(inputs, dict) else model(inputs)


def plain_step_time(model: nn.Module, inputs: Any, loss: Callable[[Any], Any], optimizer: Any, device: str,
                    repeats: int = 3) -> float:
    return statistics.median(timed_step(model, inputs, loss, optimizer, device, time.perf_counter)[0]
                             for _ in range(repeats))


def timed_step(model: nn.Module, inputs: Any, loss: Callable[[Any], Any], optimizer: Any, device: str,
               clock: Callable[[], float]) -> tuple[float, float]:
    """One step's time on ``clock``, and that of its part after the forward (the loss, the
    backward, the optimizer's step)."""
    synchronize = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    optimizer.zero_grad(set_to_none=True)
    started = clock()
    output = call(model, inputs)
    synchronize()
    forward_done = clock()
    loss(output).backward()
    optimizer.step()
    synchronize()
    ended = clock()
    optimizer.zero_grad(set_to_none=True)
    return ended - started, ended - forward_done


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
                      paths: tuple[str, ...], rounds: int, clock: Callable[[], float],
                      repeats: int = 1) -> tuple[float, float, list[float], list[float], list[float]]:
    """The median step without and with ``paths`` checkpointed on ``clock``, each round's
    difference, each round's difference of the steps' parts after the forward, and each round's
    difference over its plain step (the share of a step that the checkpoints add). The steps
    are taken in turn (plain, checkpointed, plain, ...) so that a machine whose speed drifts
    (other work's use of the caches and memory) slows both alike, and each round's difference
    is of two neighbouring steps. With ``repeats`` over 1, each side of a round is the fastest
    of that many steps in a row: other work only ever slows a step down."""
    from graphviz_autograd.checks.memory import apply_checkpointing

    plain: list[tuple[float, float]] = []
    checkpointed: list[tuple[float, float]] = []
    for _ in range(rounds):
        for into, applied in ((plain, ()), (checkpointed, paths)):
            with apply_checkpointing(model, applied):
                taken = [timed_step(model, inputs, loss, optimizer, device, clock) for _ in range(repeats)]
            into.append((min(step for step, _ in taken), min(after for _, after in taken)))
    return (statistics.median(step for step, _ in plain), statistics.median(step for step, _ in checkpointed),
            [b[0] - a[0] for a, b in zip(plain, checkpointed)], [b[1] - a[1] for a, b in zip(plain, checkpointed)],
            [(b[0] - a[0]) / a[0] for a, b in zip(plain, checkpointed)])


def recompute_times(model: nn.Module, inputs: Any, loss: Callable[[Any], Any], optimizer: Any, device: str,
                    paths: tuple[str, ...], steps: int, clock: Callable[[], float]) -> list[float]:
    """Per step with ``paths`` checkpointed, the time its blocks' forward calls take inside the
    backward pass (the recompute): what checkpointing adds, read apart from the whole step's
    time, which moves by more than it from step to step on a shared machine. A checkpoint calls
    a block's ``forward`` itself, without the block's hooks: each block gets a timing stand-in
    ``forward`` before the checkpoint wraps it, which counts the calls made by backward, its own
    ops and its children's alike (an attention's product and softmax run between its
    children). A call that the checkpoint cuts short (its early stop raises once the last saved
    tensor is made again) counts up to there."""
    from graphviz_autograd.checks.memory import apply_checkpointing, run_members

    synchronize = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    modules = dict(model.named_modules())
    blocks = [modules[member] for path in paths for member in run_members(path)]
    spent = [0.0]
    depth = [0]  # a block called inside another's recompute is counted by the outer one

    def timing(forward: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if torch._C._current_graph_task_id() == -1 or depth[0]:  # not the recompute, or inside one timed
                return forward(*args, **kwargs)
            synchronize()
            started = clock()
            depth[0] += 1
            try:
                return forward(*args, **kwargs)
            finally:
                depth[0] -= 1
                synchronize()
                spent[0] += clock() - started

        return timed

    times = []
    with stand_in_forwards(blocks, timing), apply_checkpointing(model, paths):
        for _ in range(steps):
            spent[0] = 0.0
            timed_step(model, inputs, loss, optimizer, device, clock)
            times.append(spent[0])
    return times


def run_case(name: str, model: nn.Module, inputs: Any, loss: Callable[[Any], Any], device: str, adamw: bool,
             rounds: int, targets: tuple[float, ...], repeats: int = 1) -> dict[str, Any]:
    """Measure and print one case; return what was measured (for ``--dump``)."""
    optimizer = torch.optim.AdamW(model.parameters()) if adamw else torch.optim.SGD(model.parameters(), lr=1e-3)
    # One plain step first, so that the optimizer's state exists as in the measured steps.
    plain_step_time(model, inputs, loss, optimizer, device)
    profile = profile_step(model, inputs, loss=loss, optimizer=optimizer, steps=1)
    memory = profile.memory
    assert memory is not None
    record: dict[str, Any] = {"case": name, "device": device, "torch": torch.__version__, "memory": memory.to_dict(),
                              "plans": []}
    print(f"\n== {name} on {device}: peak {format_bytes(int(memory.peak))} in the {memory.peak_phase}")
    print("ours:       " + ", ".join(f"{k} {format_bytes(int(v))}" for k, v in memory.at_peak.items()))
    for note in memory.notes:
        print(f"note: {note}")
    if device.startswith("cuda"):
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        timed_step(model, inputs, loss, optimizer, device, time.perf_counter)
        print(f"a plain step's allocator peak: {format_bytes(int(torch.cuda.max_memory_allocated()))}")
    tracked = memtracker_split(model, inputs, loss, optimizer)
    print("MemTracker: " + (tracked if tracked is not None else "not in this torch"))
    rates = memory.checkpoint_rates
    print(f"a checkpoint's own cost: {rates.per_call * 1e6:.0f} us a call, {rates.per_saved * 1e6:.1f} us a tensor saved "
          f"(in the forward {rates.forward_per_call * 1e6:.0f} and {rates.forward_per_saved * 1e6:.1f} us)")
    print(f"measuring memory: {memory.measure_time / memory.plain_step_time:.2f} times a plain step "
          f"({memory.measure_time:.2f} s over {memory.plain_step_time:.3f} s)")
    for target in targets:
        plan = memory.advice(target)
        with plan.apply(model):
            after = profile_step(model, inputs, loss=loss, optimizer=optimizer, steps=1, memory=True).memory
        assert after is not None
        clock = time.process_time if plan.clock == CPU_TIME else time.perf_counter
        plain, checkpointed, differences, after_forward, shares = paired_step_times(
            model, inputs, loss, optimizer, device, plan.paths, rounds, clock, repeats)
        extra, extra_after_forward = statistics.median(differences), statistics.median(after_forward)
        peak_ratio = plan.predicted_peak / after.peak
        print(f"target {target:.2f} ({format_bytes(int(plan.target))}): {len(plan.modules)} checkpoints "
              f"{', '.join(plan.paths) or '-'}{'' if plan.reached else ' (out of reach)'}")
        print(f"  peak predicted {format_bytes(int(plan.predicted_peak))}, measured {format_bytes(int(after.peak))}: "
              f"predicted/measured {peak_ratio:.3f} ({'within' if abs(peak_ratio - 1) <= 0.10 else 'MISSES'} 10%)")
        print(f"  extra step time ({plan.clock}) predicted {plan.extra_time:.3f} s "
              f"(of it the checkpoints' own {sum(m.overhead for m in plan.modules):.3f} s), measured {extra:.3f} s "
              f"(median of {rounds} rounds' differences{f', each side the fastest of {repeats}' if repeats > 1 else ''}; median steps {plain:.3f} s -> {checkpointed:.3f} s): "
              f"measured/predicted {_verdict(extra, plan.extra_time, differences)}")
        print("  each round's difference: " + ", ".join(f"{d:+.3f}" for d in differences) + " s")
        if device.startswith("cuda"):
            print("  under each checkpoint, the GPU's queue (from its forward to backward, then to the end) and the CPU work "
                  "it adds (in the forward; launching and all its own): " + ", ".join(
                      f"{m.path} {m.backlog[0] * 1e3:.2f} and {m.backlog[1] * 1e3:.2f} ms; {m.cpu_work[0] * 1e3:.2f} and "
                      f"{m.cpu_work[1] * 1e3:.2f} ms against {m.forward_time * 1e3:.2f} ms of forward" for m in plan.modules))
        if plan.extra_share is not None:
            print(f"  as a share of a plain step (read on the same clock where the plan was made, {plan.step_time:.3f} s, "
                  f"and in each round, which a machine whose speed drifts moves alike): predicted {100 * plan.extra_share:.1f}%, "
                  f"measured {100 * statistics.median(shares):.1f}%, measured/predicted {_verdict(statistics.median(shares), plan.extra_share, shares)}")
        print(f"  of it after the forward (where the checkpoint runs the forward again; its first forward does "
              f"the same work, less the saving): {extra_after_forward:.3f} s, measured/predicted "
              f"{_verdict(extra_after_forward, plan.extra_time, after_forward)}")
        print("  each round's: " + ", ".join(f"{d:+.3f}" for d in after_forward) + " s")
        recomputed = recompute_times(model, inputs, loss, optimizer, device, plan.paths, rounds, clock)
        forward = sum(m.forward_time for m in plan.modules)
        print(f"  the recompute itself (the checkpointed blocks' forward calls inside the backward, timed by a stand-in forward on each): "
              f"{statistics.median(recomputed):.3f} s, over their forward time {forward:.3f} s: "
              f"{_verdict(statistics.median(recomputed), forward, recomputed)}")
        print("  each step's: " + ", ".join(f"{d:.3f}" for d in recomputed) + " s")
        record["plans"].append({"target": target, "plan": plan.to_dict(), "measured_peak": after.peak,
                                "after": after.to_dict(target), "plain_median": plain,
                                "checkpointed_median": checkpointed, "differences": differences, "shares": shares,
                                "after_forward_differences": after_forward, "recompute": recomputed})
    return record


def _verdict(measured: float, predicted: float, rounds: Optional[list[float]] = None) -> str:
    """Measured over predicted, and whether it is within 20%. With ``rounds`` (each round's
    measurement, of which ``measured`` is the median), also the 95% interval of that median
    (see ``median_interval``), and the verdict only where the whole interval agrees: a median
    of a few noisy rounds can land inside or outside 20% by chance."""
    if predicted <= 0:
        return "-"
    ratio = measured / predicted
    if rounds is None:
        return f"{ratio:.3f} ({'within' if abs(ratio - 1) <= 0.20 else 'MISSES'} 20%)"
    low, high = (bound / predicted for bound in median_interval(rounds))
    if 0.8 <= low and high <= 1.2:
        verdict = "within 20%"
    elif high < 0.8 or low > 1.2:
        verdict = "MISSES 20%"
    else:
        verdict = "undecided: the interval crosses 20%, more rounds would tell"
    return f"{ratio:.3f}, 95% interval {low:.3f} to {high:.3f} ({verdict})"


def median_interval(values: list[float], draws: int = 2000) -> tuple[float, float]:
    """A 95% interval of the median of ``values``, by the bootstrap: the 2.5th and 97.5th
    percentiles of the medians of ``draws`` samples of ``values`` drawn with replacement
    (seeded, so one list always gives one interval)."""
    import random

    pick = random.Random(0)
    medians = sorted(statistics.median(pick.choices(values, k=len(values))) for _ in range(draws))
    return medians[int(0.025 * draws)], medians[int(0.975 * draws) - 1]


def return_freed_memory() -> None:
    """Have glibc's malloc hand large freed blocks back to the system at once (``--map-large``):
    a checkpointed step frees and makes again tensors of many sizes, and a heap that keeps them
    grew this process to tens of GiB over a few steps of GPT-2 at 2x512 tokens (the tensors
    alive were 0.3 GiB; at 1x512 it stays at 2.3 to 2.5 GiB). The price: each such block is
    mapped afresh, and its pages faulted in, which made a step of GPT-2 (4 layers, 2x512
    tokens) take half as much CPU time again (7.0 s against 4.6 s), and a checkpointed step
    pays those faults again for what it makes again (4 layers at 1x512, two blocks
    checkpointed: 0.155 s more system time after the forward with the mapping, 0.065 s without)."""
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
    parser.add_argument("--images", type=int, default=8, help="ResNet-18's batch (default 8)")
    parser.add_argument("--size", type=int, default=128, help="ResNet-18's image size in pixels (default 128)")
    parser.add_argument("--dump", help="also write every measurement to this JSON file")
    parser.add_argument("--rounds", type=int, default=3, help="steps timed each way (plain, checkpointed) per target")
    parser.add_argument("--repeats", type=int, default=1,
                        help="steps taken each way in a round, of which the fastest counts (default 1)")
    parser.add_argument("--map-large", action="store_true",
                        help="have malloc map blocks of 1 MiB and more afresh each time (see return_freed_memory): "
                             "for GPT-2 at 2x512 tokens, whose heap otherwise outgrows the machine")
    parser.add_argument("--targets", type=float, nargs="+", help="targets, fractions of the peak (each model's own unless given)")
    parser.add_argument("--adamw", action="store_true",
                        help="step with AdamW (its state and scratch often make the optimizer step the peak) instead of SGD")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    cases = args.only or ("gpt2", "resnet18")
    if args.map_large:
        return_freed_memory()
    print(f"torch {torch.__version__}, {args.device}")
    records = []
    for name in cases:
        if name == "gpt2":
            records.append(run_case(
                f"GPT-2 ({args.layers} layers, {args.batch}x{args.seq_len} tokens)",
                *gpt2_case(args.device, args.layers, args.batch, args.seq_len), args.device, args.adamw, args.rounds,
                tuple(args.targets or TARGETS["gpt2"]), args.repeats))
        else:
            records.append(run_case(
                f"ResNet-18 ({args.images} images of {args.size}x{args.size})",
                *resnet18_case(args.device, args.images, args.size), args.device, args.adamw, args.rounds,
                tuple(args.targets or TARGETS["resnet18"]), args.repeats))
        if args.dump:  # after each case, so that a run cut short keeps what it measured
            with open(args.dump, "w") as out:
                json.dump(records, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
