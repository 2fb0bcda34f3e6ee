"""The memory of a training step: bytes alive over time, the peak, what is alive at it, and what to checkpoint.

:func:`~graphviz_autograd.checks.profiling.profile_step` runs one more step for
memory (``memory=True``, the default) under the profiler with ``profile_memory``:
its allocation and free events, summed from the step's start, give the bytes alive
over time (on CUDA the allocator's own ``max_memory_allocated`` gives the peak, and
``memory_allocated`` where the step starts). During that step, saved-tensor hooks
note every tensor autograd saves for backward: the node that saved it (by its
sequence number, so by node id of the walked graph), its bytes, when it was packed
and when backward last unpacked it; gradient hooks note when each parameter's
gradient was made. What is alive at the peak is then split into

- ``parameters``: the model's parameters and buffers;
- ``gradients``: the ``.grad`` made before the peak;
- ``optimizer_state``: the optimizer's state tensors;
- ``activations``: tensors saved for backward that were packed before the peak and not
  yet unpacked for the last time, per node and rolled up by module;
- ``temporaries``: the rest (outputs not saved, gradients on their way through backward).

Two plain steps before it time each module's forward pass (hooks before and after each
call; the faster of its two times), the time a ``torch.utils.checkpoint`` of it would spend
again in backward: in the process's CPU time on a CPU with torch on one thread, which other
work on a busy machine does not add to, else in wall time (:func:`forward_clock`); on CUDA,
the GPU's time between events recorded before and after each call. Those two steps run there
as a training loop runs them, nothing waiting for the GPU between forward and backward, and
also read how much work the GPU had queued where each module's forward starts, where backward
reaches it, and at the step's end: CPU work a checkpoint adds while the GPU has work queued
delays nothing (:func:`checkpoint_extra_time`). On CUDA two more steps time the CPU's
launching of each forward, and of the whole forward against the GPU's being done with it: a
step whose GPU waits on the CPU gets a note, since there a checkpoint's own Python work adds
to the step.
:meth:`StepMemory.advice` picks the modules whose saved tensors, dropped, bring the peak
under a target, and :meth:`CheckpointPlan.apply` wraps them (and undoes it).

Plain data, no tensors: :class:`StepMemory` is written to JSON with its profile.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import math
import re
import statistics
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Optional, Sequence

from ..errors import OptionError
from ..graph.autograd_graph import CALL_MARK, AutogradGraph, module_of_call
from ..graph.descriptions import format_bytes, format_seconds
from ..views.overlays import Overlay

PARAMETERS = "parameters"
GRADIENTS = "gradients"
OPTIMIZER_STATE = "optimizer_state"
ACTIVATIONS = "activations"
TEMPORARIES = "temporaries"
KINDS = (PARAMETERS, GRADIENTS, OPTIMIZER_STATE, ACTIVATIONS, TEMPORARIES)
PHASES = ("forward", "backward", "optimizer")
# A target peak, when none is asked for: three quarters of the measured one.
DEFAULT_TARGET = 0.75
# The most points of the timeline kept (the largest of each stretch of events is kept).
TIMELINE_POINTS = 1000
# The clocks a module's forward time is read by (see :func:`forward_clock`).
CPU_TIME = "CPU time"
WALL_TIME = "wall time"
# On CUDA, a forward that the CPU takes this share or more of its time to launch (till the GPU is
# done with it) is bound by launching its kernels (the GPU waits): there a checkpoint's extra time
# was 1.4 to 2.2 times the advice's (GPT-2 small on 2x512 tokens and ResNet-18 on 64 images of
# 224x224, H200).
LAUNCH_BOUND = 0.8


class CheckpointRates(NamedTuple):
    """What a checkpoint costs a step beyond the forward it runs again (:func:`checkpoint_cost`):
    per call, and per tensor saved inside it; and of that, what the forward pays (the
    checkpoint's call and its hooks packing each saved tensor), the rest being backward's."""

    per_call: float = 0.0
    per_saved: float = 0.0
    forward_per_call: float = 0.0
    forward_per_saved: float = 0.0

    def own(self, saved: float, calls: int = 1) -> tuple[float, float]:
        """A checkpoint's own work, whole and the forward's part, around ``calls`` calls of a module
        or run that save ``saved`` tensors in all.

        >>> CheckpointRates(5.0, 1.0, 2.0, 0.5).own(4), CheckpointRates(5.0, 1.0, 2.0, 0.5).own(4, calls=2)
        ((9.0, 4.0), (14.0, 6.0))
        """
        whole = self.per_call * calls + self.per_saved * saved
        return whole, min(self.forward_per_call * calls + self.forward_per_saved * saved, whole)


def checkpoint_extra_time(forward: float, own_forward: float, cpu: float,
                          backlog: tuple[float, float] = (0.0, 0.0)) -> float:
    """The time a checkpoint adds to a step: the larger of what it adds to the device's work and
    what the CPU's added work delays it by.

    ``forward`` is the module's forward time on the device (the recompute's work);
    ``own_forward`` the checkpoint's own CPU work in the forward, and ``cpu`` all the CPU work it
    adds: the launching of the forward again (on a CPU, the forward itself) and all its own
    work; ``backlog`` the least work the GPU had queued (:attr:`ModuleMemory.backlog`) from the
    module's forward to where backward reaches it, and from there to the step's end. CPU work
    done while the GPU has a queue delays nothing till the queue runs dry: the forward's part
    costs what it outlasts the first stretch's queue by, plus the recompute; all the CPU work
    what it outlasts the second's by.

    On a CPU (no queue), the forward again and the checkpoint's own work:

    >>> checkpoint_extra_time(10.0, 0.5, 12.0)
    12.0

    A GPU with a long queue hides the CPU's work: the recompute's time on the GPU alone.

    >>> checkpoint_extra_time(1.0, 0.5, 2.1, backlog=(3.0, 3.0))
    1.0

    A GPU waiting on the CPU: the forward's part of the checkpoint's work delays the GPU there,
    and all of the CPU's work adds where backward's launching is the longer.

    >>> checkpoint_extra_time(1.0, 0.5, 2.1), checkpoint_extra_time(1.0, 0.5, 2.1, backlog=(0.0, 1.0))
    (2.1, 1.5)
    """
    return max(forward, own_forward + forward - backlog[0], cpu - backlog[1])


def plan_extra_time(modules: Sequence["ModuleMemory"]) -> float:
    """The time several checkpoints add to a step together: on a CPU, or where the GPU's queue is
    not known, their costs summed; on CUDA, :func:`checkpoint_extra_time` of them all at once
    against the least queue under any of them, since one queue hides the CPU work of all the
    checkpoints before it runs dry, not each one's alike (for one checkpoint, its cost).

    >>> a = ModuleMemory("h.1", "Block", 1.0, 0.5, backlog=(4.0, 4.0), cpu_work=(0.5, 3.0))
    >>> b = ModuleMemory("h.5", "Block", 1.0, 0.5, backlog=(4.0, 4.0), cpu_work=(0.5, 3.0))
    >>> plan_extra_time([a]), plan_extra_time([a, b])
    (0.5, 2.0)
    """
    plan = _PlanSums()
    for module in modules:
        plan = plan.adding(module)
    return plan.time


class _PlanSums(NamedTuple):
    """What :func:`plan_extra_time` reads of a plan's checkpoints, as sums and least queues, so
    that the advice weighs one more checkpoint beside those chosen without adding them up again."""

    costs: float = 0.0
    forward: float = 0.0
    own_forward: float = 0.0
    cpu: float = 0.0
    backlog: tuple[float, float] = (math.inf, math.inf)
    # Whether any of them had a GPU queue under it (else, on a CPU, their costs add up).
    queued: bool = False

    def adding(self, module: "ModuleMemory") -> "_PlanSums":
        return _PlanSums(self.costs + module.cost, self.forward + module.forward_time,
                         self.own_forward + module.cpu_work[0], self.cpu + module.cpu_work[1],
                         (min(self.backlog[0], module.backlog[0]), min(self.backlog[1], module.backlog[1])),
                         self.queued or max(module.backlog) > 0)

    @property
    def time(self) -> float:
        if not self.queued:
            return self.costs
        return checkpoint_extra_time(self.forward, self.own_forward, self.cpu, self.backlog)

    def added_by(self, module: "ModuleMemory") -> float:
        """What ``module`` adds to the plan's time: with no queue under any of them, its own cost."""
        if not (self.queued or max(module.backlog) > 0):
            return module.cost
        return self.adding(module).time - self.time


@dataclass(frozen=True)
class ModuleMemory:
    """What checkpointing one module, or one run of consecutive alike blocks, would change: the
    bytes it saves for backward that are alive at the peak and would be dropped (its inputs and
    outputs stay: a checkpoint keeps its inputs, the next module saves its outputs), and its
    forward time (measured; a run's is its blocks'), what backward would spend again to
    recompute them. A run's ``path`` is its list's and the numbers of its first and last
    blocks (``transformer.h.0-5``), its ``type_name`` the blocks' class and count (``GPT2Block x6``)."""

    path: str
    type_name: str
    saved_at_peak: float
    forward_time: float
    # (seconds from the step's start when saved, when last read in backward, bytes, call) of
    # each tensor a checkpoint would drop, and per call of the module (a module called in a
    # loop, as a recurrent cell is, has one per call; a run, one per call of its list) the
    # stretch of backward that reads that call's saved tensors, when a checkpoint would make
    # them again: ``call`` is its index there (-1: a tensor backward never read).
    saved: tuple[tuple[float, float, float, int], ...] = ()
    backward: tuple[tuple[float, float], ...] = ()
    # On CUDA, the least the GPU lagged behind the CPU (seconds of queued work) from this
    # module's forward to where backward reached it, and from there to the step's end: the
    # CPU work a checkpoint adds in each stretch that the GPU's queue hides (0 where unknown).
    backlog: tuple[float, float] = (0.0, 0.0)
    # The CPU work a checkpoint adds: its own in the forward (its call, and its hooks packing
    # each tensor the module saves); and the launching of the forward again with all of its own
    # work (packed again and unpacked in the recompute), by the rates :func:`checkpoint_cost`
    # measured on the step's device.
    cpu_work: tuple[float, float] = (0.0, 0.0)

    @property
    def cost(self) -> float:
        """The step time a checkpoint of this module adds (:func:`checkpoint_extra_time`): its
        forward again, and what its CPU work outlasts the GPU's queue by."""
        return checkpoint_extra_time(self.forward_time, *self.cpu_work, self.backlog)

    @property
    def overhead(self) -> float:
        """What a checkpoint adds beyond the forward it runs again: on a CPU its own work; on CUDA
        what its CPU work outlasts the GPU's queue by. Small beside a large model's forward; most
        of a small one's on a GPU, where launching is the work."""
        return self.cost - self.forward_time

    def to_dict(self, index_of: Optional[Callable[[tuple[float, float, float, int]], int]] = None) -> dict[str, Any]:
        """Its fields as JSON; with ``index_of`` (a saved tensor's index in a table of them), its
        saved tensors as ranges of indices there, each ``[first, count, call]`` (see
        :func:`_modules_to_dict`)."""
        saved: list[list[Any]] = []
        if index_of is None:
            saved = [list(s) for s in self.saved]
        else:
            for entry in self.saved:
                index, call = index_of(entry), entry[3]
                if saved and saved[-1][2] == call and saved[-1][0] + saved[-1][1] == index:
                    saved[-1][1] += 1
                else:
                    saved.append([index, 1, call])
        return {"path": self.path, "type_name": self.type_name, "saved_at_peak": self.saved_at_peak,
                "forward_time": self.forward_time, "overhead": self.overhead, "saved": saved,
                "backward": [list(w) for w in self.backward], "backlog": list(self.backlog),
                "cpu_work": list(self.cpu_work)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ModuleMemory":
        windows = data.get("backward", ())
        if windows and not isinstance(windows[0], (list, tuple)):  # written before calls were told apart: one stretch
            windows = [windows]
        backlog = (float(data.get("backlog", (0, 0))[0]), float(data.get("backlog", (0, 0))[1]))
        # Written before the CPU work was kept: all of it beyond the forward, as much as gives the overhead written.
        cpu_work = data.get("cpu_work") or (0.0, data["forward_time"] + data.get("overhead", 0.0) + backlog[1])
        return cls(data["path"], data["type_name"], data["saved_at_peak"], data["forward_time"],
                   tuple((float(s[0]), float(s[1]), float(s[2]), int(s[3]) if len(s) > 3 else 0 if windows else -1)
                         for s in data.get("saved", ())),
                   tuple((float(a), float(b)) for a, b in windows), backlog,
                   (float(cpu_work[0]), float(cpu_work[1])))

    def dropped_at(self, when: float) -> float:
        """The bytes a checkpoint of this module would not hold at ``when`` (seconds from the step's
        start): its tensors alive then, but for those of a call whose saved tensors backward is
        remaking then for its own use (a module called in a loop drops its other calls' still).

        >>> cell = ModuleMemory("cell", "Cell", 6.0, 0.1, ((0.0, 0.9, 2.0, 1), (0.1, 0.8, 2.0, 0), (0.2, 0.7, 2.0, -1)),
        ...                     ((0.75, 0.8), (0.85, 0.9)))
        >>> cell.dropped_at(0.5), cell.dropped_at(0.78), cell.dropped_at(0.88)
        (6.0, 2.0, 0.0)
        """
        remade = {k for k, (begin, end) in enumerate(self.backward) if begin <= when <= end}
        return sum((size for saved, read, size, call in self.saved if saved <= when <= read and call not in remade), 0.0)

    def dropped_over(self, times: Any) -> Any:
        """:meth:`dropped_at` at each of ``times`` (a sorted float64 tensor), at once and without a
        tensor of saved tensors by times: a GPT-2 of 48 layers has 1,500 candidates holding
        430,000 saved tensors among them, over a timeline of 1,000 points. Each saved tensor
        adds its bytes over the points it is alive at, less those where its call is remade.

        >>> import torch
        >>> cell = ModuleMemory("cell", "Cell", 6.0, 0.1, ((0.0, 0.9, 2.0, 1), (0.1, 0.8, 2.0, 0), (0.2, 0.7, 2.0, -1)),
        ...                     ((0.75, 0.8), (0.85, 0.9)))
        >>> cell.dropped_over(torch.tensor([0.5, 0.78, 0.88], dtype=torch.float64)).tolist()
        [6.0, 2.0, 0.0]
        """
        import torch

        steps = torch.zeros(len(times) + 1, dtype=torch.float64)
        if not self.saved:
            return steps[:-1]
        saved = torch.tensor(self.saved, dtype=torch.float64)
        sizes = saved[:, 2]
        # Alive over the points [begin, end): the first at or after saving, the first after the last read.
        begin = torch.searchsorted(times, saved[:, 0].contiguous(), side="left")
        end = torch.searchsorted(times, saved[:, 1].contiguous(), side="right")
        calls = saved[:, 3].long()
        if self.backward:
            windows = torch.tensor(self.backward, dtype=torch.float64)
            remade_begin = torch.searchsorted(times, windows[:, 0].contiguous(), side="left")
            remade_end = torch.searchsorted(times, windows[:, 1].contiguous(), side="right")
            known = calls >= 0
            cut_begin = torch.where(known, remade_begin[calls.clamp(min=0)], end)
            cut_end = torch.where(known, remade_end[calls.clamp(min=0)], end)
        else:
            cut_begin = cut_end = end
        # Before the remade stretch, and after it.
        for first, last in ((begin, torch.minimum(end, cut_begin)), (torch.maximum(begin, cut_end), end)):
            kept = first < last
            steps.index_add_(0, first[kept], sizes[kept])
            steps.index_add_(0, last[kept], -sizes[kept])
        return steps.cumsum(0)[:-1]


@dataclass(frozen=True)
class CheckpointPlan:
    """The modules to wrap in ``torch.utils.checkpoint``, with the peak and extra step time predicted.

    ``predicted_peak`` is the most bytes alive at any moment of the measured step less what the
    modules would not hold then (a module's saved tensors are dropped from when they were saved to
    when backward last read them, except while backward is remaking them for that module);
    ``extra_time`` is their cost together (:func:`plan_extra_time`: forward time and the
    checkpoints' own overhead), measured by ``clock`` (:func:`forward_clock`).
    ``reached`` says whether the target is met; when no choice of modules meets it, the plan
    holds every module that helps. ``step_time`` is a plain step's time on the same clock
    (0 where not measured), and :attr:`extra_share` the extra time as a share of it: a machine
    whose speed drifts (other work on it) moves both alike.
    """

    target: float
    peak: float
    predicted_peak: float
    extra_time: float
    modules: tuple[ModuleMemory, ...]
    reached: bool
    clock: str = WALL_TIME
    step_time: float = 0.0

    @property
    def extra_share(self) -> Optional[float]:
        """The extra step time over a plain step's, or None where the step's time is unknown."""
        return self.extra_time / self.step_time if self.step_time > 0 else None

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(m.path for m in self.modules)

    def apply(self, model: Any) -> "AppliedCheckpoints":
        """Wrap this plan's modules of ``model`` in ``torch.utils.checkpoint`` (non-reentrant);
        the result's :meth:`~AppliedCheckpoints.undo` (or leaving its ``with`` block) puts
        each ``forward`` back. ``model`` is changed only here, only when asked."""
        return apply_checkpointing(model, self.paths)

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "peak": self.peak, "predicted_peak": self.predicted_peak,
                "extra_time": self.extra_time, "reached": self.reached, "clock": self.clock,
                "step_time": self.step_time, "extra_share": self.extra_share,
                "modules": [m.to_dict() for m in self.modules]}

    def text(self) -> str:
        """The plan in lines, as ``profile`` prints it."""
        head = (f"to bring the peak of {format_bytes(int(self.peak))} under {format_bytes(int(self.target))}: ")
        if not self.modules:
            return head + ("nothing to checkpoint, it is under already\n" if self.reached
                           else "checkpointing no module would lower it (what is alive at the peak is "
                           "none of the tensors a checkpoint drops)\n")
        lines = [head + f"checkpoint {len(self.modules)} module{'s' if len(self.modules) != 1 else ''}, "
                 f"predicted peak {format_bytes(int(self.predicted_peak))}, "
                 f"step {format_seconds(self.extra_time)} longer ({self.clock}"
                 + (f"; {100 * self.extra_share:.1f}% of a step" if self.extra_share is not None else "") + ")"
                 + ("" if self.reached else " (the target is out of reach by checkpointing)") + "\n"]
        rows = [("module", "type", "saved at the peak", "forward time", "checkpoint's own")]
        rows += [(m.path, m.type_name, format_bytes(int(m.saved_at_peak)), format_seconds(m.forward_time),
                  format_seconds(m.overhead)) for m in self.modules]
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        for r in rows:
            lines.append("  " + "  ".join([r[0].ljust(widths[0]), r[1].ljust(widths[1]), r[2].rjust(widths[2]),
                                           r[3].rjust(widths[3]), r[4]]) + "\n")
        # On CUDA, where the GPU's queue hid the checkpoints' own work (some or all of it).
        queued = [min(m.backlog) for m in self.modules if min(m.backlog) > 0]
        if queued:
            lines.append(f"  the GPU had at least {format_seconds(min(queued))} of work queued under "
                         f"{'each of ' + str(len(queued)) if len(queued) > 1 else 'it'}: a checkpoint's own CPU work "
                         "adds only what outlasts its queue\n")
        return "".join(lines)


class AppliedCheckpoints:
    """Modules whose ``forward`` runs under ``torch.utils.checkpoint`` until :meth:`undo`."""

    def __init__(self, wrapped: Sequence[tuple[Any, Optional[Callable[..., Any]]]], paths: tuple[str, ...]):
        self._wrapped = list(wrapped)
        self.paths = paths

    def undo(self) -> None:
        """Put each module's own ``forward`` back; a second call does nothing."""
        for module, own in reversed(self._wrapped):
            if own is None:
                module.__dict__.pop("forward", None)
            else:
                module.forward = own
        self._wrapped = []

    def __enter__(self) -> "AppliedCheckpoints":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.undo()


def apply_checkpointing(model: Any, paths: Sequence[str]) -> AppliedCheckpoints:
    """Wrap the modules of ``model`` at ``paths`` in non-reentrant ``torch.utils.checkpoint``;
    a path ``h.0-5`` is a run of blocks, checkpointed as one (their saved tensors made again at
    once in backward, only the first block's input kept).

    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    >>> with apply_checkpointing(net, ["0"]):
    ...     "forward" in vars(net[0])
    True
    >>> "forward" in vars(net[0])
    False
    >>> deep = torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range(4)])
    >>> with apply_checkpointing(deep, ["1-3"]):
    ...     deep(torch.ones(1, 2)).sum().backward()
    """
    import torch.utils.checkpoint

    modules = dict(model.named_modules())
    missing = [p for p in paths if not all(m in modules for m in run_members(p))]
    if missing:
        raise OptionError(f"{type(model).__name__} has no module {missing[0]!r} to checkpoint; give paths of "
                          f"model.named_modules() or runs of their numbered blocks (h.0-5) "
                          f"(the plan was made for another model?).")
    wrapped: list[tuple[Any, Optional[Callable[..., Any]]]] = []
    for path in paths:
        blocks = [modules[m] for m in run_members(path)]
        wrapped += [(block, block.__dict__.get("forward")) for block in blocks]
        if len(blocks) == 1:
            blocks[0].forward = functools.partial(
                torch.utils.checkpoint.checkpoint, blocks[0].forward, use_reentrant=False,
                context_fn=functools.partial(_running_stats_kept, blocks))
        else:
            _checkpoint_run(path, blocks)
    return AppliedCheckpoints(wrapped, tuple(paths))


# The buffers a normalisation layer updates as it runs in training (BatchNorm, InstanceNorm
# with track_running_stats).
_RUNNING_STATS = ("running_mean", "running_var", "num_batches_tracked")


def _running_stats_kept(blocks: Sequence[Any]) -> tuple[Any, Any]:
    """The ``context_fn`` of a checkpoint of ``blocks``: nothing around the forward pass, and
    around the forward pass run again in backward, the running statistics of their
    normalisation layers put back as they were, so that a checkpointed BatchNorm counts
    each step once (run again, it would move its running mean and variance a second time)."""
    return contextlib.nullcontext(), _RunningStatsKept(blocks)


class _RunningStatsKept:
    """Copies of the running statistics of ``blocks``' normalisation layers, taken on entering and
    put back on leaving (entered again, as a recomputation may be, it copies again)."""

    def __init__(self, blocks: Sequence[Any]):
        self.buffers = [buffer for block in blocks for module in block.modules()
                        if getattr(module, "track_running_stats", False)
                        for buffer in (getattr(module, name, None) for name in _RUNNING_STATS) if buffer is not None]
        self.saved: list[list[Any]] = []

    def __enter__(self) -> None:
        self.saved.append([buffer.clone() for buffer in self.buffers])

    def __exit__(self, *exc: Any) -> None:
        import torch

        with torch.no_grad():
            for buffer, value in zip(self.buffers, self.saved.pop()):
                buffer.copy_(value)


def _checkpoint_run(path: str, blocks: Sequence[Any]) -> None:
    """Checkpoint consecutive ``blocks`` as one: the first block's call runs them all (each given
    the one before's output, or its first item, and the first's other arguments) under one
    ``torch.utils.checkpoint``, and the calls of the others, which the model still makes, hand on
    that output. A model that does not call them one after the other on each other's output
    gets a named error."""
    import torch.utils.checkpoint

    forwards = [block.forward for block in blocks]
    state: dict[str, Any] = {"inside": False, "output": None, "next": 0}

    def run(*args: Any, **kwargs: Any) -> Any:
        outer, state["inside"] = state["inside"], True
        try:
            output = forwards[0](*args, **kwargs)
            for block in blocks[1:]:
                output = block(output[0] if isinstance(output, tuple) else output, *args[1:], **kwargs)
        finally:
            state["inside"] = outer
        return output

    def first(*args: Any, **kwargs: Any) -> Any:
        output = torch.utils.checkpoint.checkpoint(
            run, *args, use_reentrant=False, context_fn=functools.partial(_running_stats_kept, blocks), **kwargs)
        state["output"], state["next"] = output, 1
        return output

    def handed_on(k: int, *args: Any, **kwargs: Any) -> Any:
        if state["inside"]:
            return forwards[k](*args, **kwargs)
        output = state["output"]
        given = args[0] if args else None
        if state["next"] != k or not (given is output or (isinstance(output, tuple) and output and given is output[0])):
            raise OptionError(f"the run of blocks {path!r} cannot be checkpointed as one: block {k} of it was not "
                              f"called on the output of the block before it; checkpoint its blocks one by one.")
        state["next"] = k + 1
        if k == len(blocks) - 1:  # the last: keep no tensor of this step past it
            state["output"], state["next"] = None, 0
        return output

    blocks[0].forward = first
    for k, block in enumerate(blocks[1:], start=1):
        block.forward = functools.partial(handed_on, k)


@dataclass(frozen=True)
class StepMemory:
    """The memory of one training step, measured; plain data.

    ``timeline`` holds ``(seconds from the step's start, bytes alive, phase)`` points;
    ``peak`` is the most bytes alive, at ``peak_time`` in ``peak_phase``; ``at_peak`` splits
    it by kind (:data:`KINDS`); ``node_activations`` holds the bytes saved for backward and
    alive at the peak per node id of the profile's graph, ``modules`` each module's
    checkpoint candidate numbers, most saved first. ``source`` says where the bytes came from.
    ``timeline_kinds`` splits each point of the timeline by kind, and ``saved_by_node`` says
    when each node's saved tensors were made and last read: what :meth:`page_data` gives the
    explorer's memory strip.
    """

    device: str
    source: str
    peak: float
    peak_time: float
    peak_phase: str
    at_peak: Mapping[str, float]
    start_bytes: float
    timeline: tuple[tuple[float, float, str], ...]
    node_activations: Mapping[str, float]
    module_activations: Mapping[str, float]
    modules: tuple[ModuleMemory, ...]
    phase_peaks: Mapping[str, float]
    measure_time: float = 0.0
    plain_step_time: float = 0.0
    # A plain step's time on :attr:`clock` (the faster of the two steps timing each module).
    step_time: float = 0.0
    notes: tuple[str, ...] = ()
    graph: Optional[AutogradGraph] = field(default=None, compare=False, repr=False)
    # Per point of the timeline, its bytes by kind (:data:`KINDS`, in order); per node id, the
    # tensors it saved for backward: (seconds when saved, when last read in backward, bytes).
    timeline_kinds: tuple[tuple[float, ...], ...] = ()
    saved_by_node: Mapping[str, tuple[tuple[float, float, float], ...]] = field(default_factory=dict)
    # The clock of the modules' forward times (:func:`forward_clock`).
    clock: str = WALL_TIME
    # What a checkpoint costs beyond its recompute on this device, by that clock: per call, and
    # per tensor saved inside it, and the forward's part of each (:func:`checkpoint_cost`).
    checkpoint_rates: CheckpointRates = CheckpointRates()

    def activations_by_module(self) -> list[tuple[str, float]]:
        """``(module path, bytes)`` saved for backward and alive at the peak, submodules'
        included, most first (the model itself left out)."""
        return sorted(self.module_activations.items(), key=lambda kv: (-kv[1], kv[0]))

    def overlay(self) -> Overlay:
        """Bytes saved for backward and alive at the peak, per node, summed onto modules:
        ``make_dot(profile.graph, overlays=[profile.memory.overlay()])``."""
        return Overlay(
            "peak_memory", "saved for backward, alive at the peak", dict(self.node_activations), rollup="sum",
            scale="log", unit="B",
            key=(([f"alive at the peak ({format_bytes(int(self.peak))}, {self.peak_phase}, {self.device}): "
                   + ", ".join(f"{k.replace('_', ' ')} {format_bytes(int(self.at_peak[k]))}" for k in KINDS if k in self.at_peak)],
                  {"shape": "note", "style": "filled", "fillcolor": "white"}),),
        )

    def advice(self, target: Optional[float] = None) -> CheckpointPlan:
        """The modules and runs of blocks to checkpoint to bring the peak under ``target`` bytes
        (a number of 1 or less is a fraction of the peak; default 0.75).

        Each candidate (:attr:`modules`: a module, or a run of consecutive alike blocks such as
        ``transformer.h.0-5``) drops its saved tensors from the measured timeline for what it
        adds to the plan's time (:func:`plan_extra_time` with it, less without: on a CPU its
        :attr:`ModuleMemory.cost`; on CUDA, what it adds beside those chosen, whose CPU work
        one GPU queue hides together). Each time, of the candidates that share no module with
        one chosen, the cheapest that alone brings the predicted peak under the target is
        taken; when none does, the one that lowers the peak most per second it adds (of those
        that lower it by a hundredth of what is left to go, at least), and so on.
        A module that holds a list of blocks (``transformer`` around ``transformer.h.0`` ...
        ``transformer.h.11``) is never taken: its run of all blocks drops the same tensors."""
        goal = _target_bytes(target, self.peak)
        chosen: list[ModuleMemory] = []
        predicted = self.peak
        if self.timeline:
            import torch

            alive, open_, dropped, spans = self._replay
            allowed = [True] * len(open_)
            plan = _PlanSums()
            while predicted > goal:
                rows = [k for k, ok in enumerate(allowed) if ok]
                if not rows:
                    break
                # Only the candidates still open: each choice rules out those sharing a module with it.
                peaks = (alive - dropped[torch.tensor(rows)]).max(dim=1).values.tolist()
                # A candidate that lowers the peak by less than a hundredth of what is left to go
                # (a batch norm's few saved bytes) is not worth a checkpoint of its own.
                options = [(peak, k) for k, peak in zip(rows, peaks) if predicted - peak > 0.01 * (predicted - goal)]
                if not options:
                    break
                adds = {k: plan.added_by(open_[k]) for _, k in options}
                enough = [(adds[k], peak, open_[k].path, k) for peak, k in options if peak <= goal]
                if enough:
                    _, peak, _, best = min(enough)
                else:
                    _, peak, _, best = min((-(predicted - peak) / max(adds[k], 1e-6), peak, open_[k].path, k)
                                           for peak, k in options)
                predicted = peak
                alive = alive - dropped[best]
                chosen.append(open_[best])
                plan = plan.adding(open_[best])
                allowed = [ok and not spans[k].overlaps(spans[best]) for k, ok in enumerate(allowed)]
        return CheckpointPlan(goal, self.peak, predicted, plan_extra_time(chosen), tuple(chosen),
                              predicted <= goal, self.clock, self.step_time)

    @functools.cached_property
    def _replay(self) -> tuple[Any, list[ModuleMemory], Any, list[_Span]]:
        """What :meth:`advice` replays, made once: the bytes alive over the timeline, scaled so
        that its highest point is the measured peak (on CUDA, the allocator's); the candidates
        it may take (no module that holds a list of blocks) and the bytes each drops over the
        timeline, a row each (a GPT-2 of 48 layers has some 1,500 candidates); their modules."""
        import torch

        alive = torch.tensor([b for _, b, _ in self.timeline], dtype=torch.float64)
        alive *= self.peak / max(float(alive.max()), 1.0)
        stacks = _block_holders([(m.path, m.type_name) for m in self.modules])
        at = torch.tensor([t for t, _, _ in self.timeline], dtype=torch.float64)
        open_ = [m for m in self.modules if m.saved_at_peak > 0 and m.path not in stacks]
        dropped = torch.stack([m.dropped_over(at) for m in open_]) if open_ else torch.zeros((0, len(at)), dtype=torch.float64)
        return alive, open_, dropped, [_Span(m.path) for m in open_]

    def table(self, target: Optional[float] = None, top: int = 10, types: Optional[Mapping[str, str]] = None) -> str:
        """The memory lines ``profile`` prints: the peak, its split, the modules whose saved
        tensors are alive at it (with ``types``, each module's class name by path, alike
        blocks ``h.0`` ... ``h.11`` are one row ``h.*``), and the checkpoint advice for ``target``."""
        lines = [
            f"\nmemory ({self.source}): peak {format_bytes(int(self.peak))} in the {self.peak_phase} "
            f"at {format_seconds(self.peak_time)}; at the start {format_bytes(int(self.start_bytes))}; "
            "phase peaks " + ", ".join(f"{k} {format_bytes(int(self.phase_peaks[k]))}" for k in PHASES if k in self.phase_peaks) + "\n",
            "alive at the peak: " + ", ".join(
                f"{k.replace('_', ' ')} {format_bytes(int(self.at_peak[k]))} ({_share(self.at_peak[k], self.peak)})"
                for k in KINDS if k in self.at_peak) + "\n",
        ]
        rows = _folded([row for row in self.activations_by_module() if row[1] > 0], types)[:top]
        if rows:
            width = max(len(p) for p, _, _ in rows)
            sizes = [format_bytes(int(v)) for _, v, _ in rows]
            right = max(len(size) for size in sizes)
            lines.append("\nsaved for backward and alive at the peak, by module\n")
            lines += [f"{p.ljust(width)}  {size.rjust(right)}{how}\n" for (p, _, how), size in zip(rows, sizes)]
        lines.append("\n" + self.advice(target).text())
        if self.plain_step_time > 0:
            lines.append(f"measuring memory took {format_seconds(self.measure_time)}, "
                         f"{self.measure_time / self.plain_step_time:.1f} times a plain step ({format_seconds(self.plain_step_time)})\n")
        lines += [f"note: {n}\n" for n in self.notes]
        return "".join(lines)

    def page_data(self) -> dict[str, Any]:
        """The step's memory as the explorer's strip draws it: the timeline (seconds, bytes, phase,
        and bytes per kind), the peak, and per node id of :attr:`graph` when each tensor it saved
        for backward was made and last read (``[saved, read, bytes]``).

        >>> memory = StepMemory("cpu", "", 10.0, 0.5, "backward", {}, 4.0, ((0.0, 4.0, "forward"), (0.5, 10.0, "backward")),
        ...                     {}, {}, (), {}, timeline_kinds=((4, 0, 0, 0, 0), (4, 1, 0, 5, 0)), saved_by_node={"n3": ((0.1, 0.6, 5.0),)})
        >>> data = memory.page_data()
        >>> data["points"][1], data["saved"]
        ([0.5, 10.0, 'backward', [4.0, 1.0, 0.0, 5.0, 0.0]], {'n3': [[0.1, 0.6, 5.0]]})
        """
        kinds = self.timeline_kinds if len(self.timeline_kinds) == len(self.timeline) else ()
        return {
            "device": self.device, "peak": self.peak, "peak_time": self.peak_time, "peak_phase": self.peak_phase,
            "kinds": list(KINDS),
            "points": [[t, b, phase, [float(v) for v in kinds[i]] if kinds else []]
                       for i, (t, b, phase) in enumerate(self.timeline)],
            "saved": {node_id: [list(s) for s in saved] for node_id, saved in self.saved_by_node.items()},
        }

    def to_dict(self, target: Optional[float] = None) -> dict[str, Any]:
        return {
            "device": self.device, "source": self.source, "peak": self.peak, "peak_time": self.peak_time,
            "peak_phase": self.peak_phase, "at_peak": dict(self.at_peak), "start_bytes": self.start_bytes,
            "timeline": [list(p) for p in self.timeline], "node_activations": dict(self.node_activations),
            "module_activations": dict(self.module_activations),
            **_modules_to_dict(self.modules), "phase_peaks": dict(self.phase_peaks),
            "measure_time": self.measure_time, "plain_step_time": self.plain_step_time, "step_time": self.step_time,
            "notes": list(self.notes),
            "clock": self.clock, "checkpoint_rates": list(self.checkpoint_rates),
            "timeline_kinds": [list(k) for k in self.timeline_kinds],
            "saved_by_node": {n: [list(s) for s in saved] for n, saved in self.saved_by_node.items()},
            "advice": self.advice(target).to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "StepMemory":
        return cls(
            device=data["device"], source=data["source"], peak=data["peak"], peak_time=data["peak_time"],
            peak_phase=data["peak_phase"], at_peak=dict(data["at_peak"]), start_bytes=data["start_bytes"],
            timeline=tuple((float(t), float(b), str(p)) for t, b, p in data["timeline"]),
            node_activations=dict(data["node_activations"]), module_activations=dict(data["module_activations"]),
            modules=_modules_from_dict(data), phase_peaks=dict(data["phase_peaks"]),
            measure_time=data.get("measure_time", 0.0), plain_step_time=data.get("plain_step_time", 0.0),
            step_time=data.get("step_time", 0.0),
            notes=tuple(data.get("notes", ())), clock=data.get("clock", WALL_TIME),
            checkpoint_rates=CheckpointRates(*(float(v) for v in data.get("checkpoint_rates", ())[:4])),
            timeline_kinds=tuple(tuple(float(v) for v in k) for k in data.get("timeline_kinds", ())),
            saved_by_node={n: tuple((float(a), float(b), float(c)) for a, b, c in saved)
                           for n, saved in data.get("saved_by_node", {}).items()},
        )


def _modules_to_dict(modules: Sequence[ModuleMemory]) -> dict[str, Any]:
    """The candidates as JSON: their saved tensors, which runs of blocks repeat (a GPT-2 of 48
    layers: 432,189 among 1,513 candidates, 17 MB written out each time), once each in
    ``saved_tensors``, and each candidate's ``saved`` as ranges of indices there, each
    ``[first, count, call]``. The largest candidates come first and are written in order,
    so that the others' tensors mostly fall in one range each (1,513 ranges at 48 layers).

    >>> one = ModuleMemory("h.0", "Block", 2.0, 0.1, ((0.1, 0.9, 2.0, 0),), ((0.8, 0.9),))
    >>> run = ModuleMemory("h.0-1", "Block x2", 4.0, 0.2, ((0.1, 0.9, 2.0, 0), (0.2, 0.8, 2.0, 0)), ((0.7, 0.9),))
    >>> data = _modules_to_dict([one, run])
    >>> data["saved_tensors"], data["modules"][1]["saved"]
    ([[0.1, 0.9, 2.0], [0.2, 0.8, 2.0]], [[0, 2, 0]])
    >>> _modules_from_dict(data) == (one, run)
    True
    """
    table: dict[tuple[float, float, float], int] = {}
    # By each entry's identity first: candidates that drop a tensor as the same call share one entry.
    known: dict[int, int] = {}

    def index_of(entry: tuple[float, float, float, int]) -> int:
        index = known.get(id(entry))
        if index is None:
            index = known[id(entry)] = table.setdefault(entry[:3], len(table))
        return index

    rows = [module.to_dict(index_of) for module in modules]
    return {"saved_tensors": [list(key) for key in table], "modules": rows}


def _modules_from_dict(data: Mapping[str, Any]) -> tuple[ModuleMemory, ...]:
    """The candidates :func:`_modules_to_dict` wrote; or, written before, each saved tensor as
    a pair of its index and call, or whole (before ``saved_tensors``)."""
    table = data.get("saved_tensors")
    if table is None:
        return tuple(ModuleMemory.from_dict(m) for m in data["modules"])
    # One entry per saved tensor and call, shared by the candidates that drop it, as measured.
    entries: dict[tuple[int, int], tuple[float, float, float, int]] = {}

    def entry(index: int, call: int) -> tuple[float, float, float, int]:
        found = entries.get((index, call))
        if found is None:
            when, read, size = table[index]
            found = entries[(index, call)] = (float(when), float(read), float(size), int(call))
        return found

    def saved(written: Sequence[Sequence[int]]) -> tuple[tuple[float, float, float, int], ...]:
        return tuple(entry(k, item[-1]) for item in written
                     for k in (range(item[0], item[0] + item[1]) if len(item) == 3 else (item[0],)))

    return tuple(replace(ModuleMemory.from_dict({**m, "saved": ()}), saved=saved(m.get("saved", ())))
                 for m in data["modules"])


def _folded(rows: list[tuple[str, float]], types: Optional[Mapping[str, str]]) -> list[tuple[str, float, str]]:
    """``(path, bytes)`` rows with alike blocks summed into one ``h.*`` row (and ``h`` itself left
    out when its total is its blocks'), most first; the third item says how many blocks."""
    if not types:
        return [(path, value, "") for path, value in rows]
    from .diagnosis import repeated_module_patterns

    values = dict(rows)
    folded = []
    for pattern, paths in repeated_module_patterns(values, types).items():
        total = sum(values[p] for p in paths)
        how = "" if len(paths) == 1 else f"  x{len(paths)}, {format_bytes(int(min(values[p] for p in paths)))} to " \
            f"{format_bytes(int(max(values[p] for p in paths)))} each"
        folded.append((pattern, total, how))
    totals = {p: v for p, v, _ in folded}
    kept = [row for row in folded if not math.isclose(totals.get(row[0] + ".*", -1.0), row[1], rel_tol=1e-9)]
    return sorted(kept, key=lambda row: (-row[1], row[0]))


def _block_lists(modules: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """The lists of two or more numbered blocks of one class among ``modules`` (path, class
    name), by the path holding them, each in its order (a Sequential of a Conv2d and a
    BatchNorm2d is no list of blocks).

    >>> _block_lists([("t", "M"), ("t.h", "L"), ("t.h.1", "B"), ("t.h.0", "B"), ("t.h.0.d.0", "C"), ("t.h.0.d.1", "N")])
    {'t.h': ['t.h.0', 't.h.1']}
    """
    numbered: dict[str, dict[int, str]] = {}
    kinds: dict[str, set[str]] = {}
    for path, type_name in modules:
        parent, _, last = path.rpartition(".")
        if last.isdigit():
            numbered.setdefault(parent, {})[int(last)] = path
            kinds.setdefault(parent, set()).add(type_name)
    return {parent: [blocks[k] for k in sorted(blocks)] for parent, blocks in numbered.items()
            if len(blocks) >= 2 and len(kinds[parent]) == 1}


def _block_holders(modules: Sequence[tuple[str, str]]) -> set[str]:
    """The paths among ``modules`` (path, class name) that hold a list of alike blocks that are
    also among them (:func:`_block_lists`).

    >>> sorted(_block_holders([("t", "M"), ("t.h.0", "B"), ("t.h.1", "B"), ("t.h.0.d.0", "C"), ("t.h.0.d.1", "N")]))
    ['t']
    """
    lists = list(_block_lists(modules))
    paths = [path for path, _ in modules]
    return {p for p in paths if any(parent == p or parent.startswith(p + ".") or (p == "" and parent) for parent in lists)}


def _share(value: float, whole: float) -> str:
    return f"{100 * value / whole:.0f}%" if whole > 0 else "-"


_RUN = re.compile(r"^(?:(.*)\.)?(\d+)-(\d+)$")


def run_members(path: str) -> list[str]:
    """The blocks a candidate runs: a run ``h.2-4`` its blocks, a module itself.

    >>> run_members("transformer.h.2-4"), run_members("layer1.0")
    (['transformer.h.2', 'transformer.h.3', 'transformer.h.4'], ['layer1.0'])
    """
    match = _RUN.match(path)
    if not match:
        return [path]
    holder, first, last = match.group(1), int(match.group(2)), int(match.group(3))
    return [f"{holder}.{k}" if holder is not None else str(k) for k in range(first, last + 1)]


class _Span:
    """A candidate's modules (a run's blocks, or the module), and those and all that hold them.

    >>> run = _Span("h.0-2")
    >>> run.overlaps(_Span("h.2.mlp")), run.overlaps(_Span("h.3-4")), run.overlaps(_Span("h")), run.overlaps(_Span("h.1-2"))
    (True, False, True, True)
    """

    def __init__(self, path: str):
        self.members = set(run_members(path))
        self.around = {".".join(parts[:k]) for parts in (m.split(".") for m in self.members) for k in range(1, len(parts) + 1)}

    def overlaps(self, other: "_Span") -> bool:
        """Whether a module of one is a module of the other, or holds one of its (or is held by one)."""
        return not self.members.isdisjoint(other.around) or not other.members.isdisjoint(self.around)


_SIZE = re.compile(r"^\s*([0-9.]+)\s*([KMGT]?i?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def parse_target(text: str) -> float:
    """A target peak from the command line: ``0.5`` (a fraction of the peak), ``300MiB``, ``2GB``.

    >>> parse_target("0.5"), parse_target("1KiB")
    (0.5, 1024.0)
    """
    match = _SIZE.match(str(text))
    if not match:
        raise OptionError(f"a target peak is a fraction of the peak (0.75) or bytes (300MiB, 2GB); got {text!r}.")
    return float(match.group(1)) * _UNITS[(match.group(2) or "").upper()]


def _target_bytes(target: Optional[float], peak: float) -> float:
    value = DEFAULT_TARGET if target is None else target
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise OptionError(f"target must be bytes, or a fraction of the peak (0.75); got {target!r}.")
    return float(value) * peak if value <= 1 else float(value)


# --- measuring -------------------------------------------------------------------------


def _storage(tensor: Any) -> tuple[int, float]:
    storage = tensor.untyped_storage()
    return storage.data_ptr(), float(storage.nbytes())


def _last_sequence_nr() -> Optional[int]:
    """The sequence number autograd gave last, without making a node (which would move the count on)."""
    import torch

    peek = getattr(torch._C._autograd, "_get_sequence_nr", None)
    return int(peek()) - 1 if peek is not None else None


class _ClockAnchors:
    """Moments stamped on both clocks: our hooks' (``time.time_ns``) and the profiler's, by an
    empty range opened at each. The two agree on most machines; where they do not (the
    profiler converts its own cycle counter to epoch time, and a virtual machine's counter can
    run off from the system clock), a hook's stamp is put on the profiler's clock by the
    offsets of the anchors around it, so that what was alive at the peak is read at the peak."""

    NAME = "graphviz_autograd.clock#"
    # The anchors on each side of a moment whose least offset puts it on the profiler's clock.
    NEAR = 2

    def __init__(self) -> None:
        self.ours: list[int] = []

    def stamp(self) -> int:
        """Stamp now on both clocks; returns our stamp."""
        import torch

        now = time.time_ns()
        self.ours.append(now)
        with torch.profiler.record_function(f"{self.NAME}{len(self.ours) - 1}"):
            pass
        return now

    def mark(self, *_: Any) -> None:
        """:meth:`stamp` as a module's or optimizer's hook, which must return None (a value would
        stand in for the call's arguments or output)."""
        self.stamp()

    def mapping(self, theirs: Mapping[int, int]) -> Callable[[float], float]:
        """Our clock to the profiler's, given the profiler's start of each anchor by number: the
        least offset of the anchors near a moment (:attr:`NEAR` on each side), none without
        anchors. An anchor's two stamps are taken one after the other, ours first, so whatever
        runs between them (another thread, the scheduler putting the process aside) only ever
        makes its offset larger: on this machine the offsets of one step were 3 to 8 µs at
        least and up to 0.1 ms more under load. Averaging them between two anchors moved the
        saved tensors' stamps by that much, across the peak; the least of a few follows a
        clock that drifts over the step and leaves out the late ones."""
        pairs = sorted((self.ours[k], theirs[k] - self.ours[k]) for k in theirs if 0 <= k < len(self.ours))
        if not pairs:
            return lambda when: when
        ours = [when for when, _ in pairs]
        offsets = [offset for _, offset in pairs]

        def mapped(when: float) -> float:
            k = bisect.bisect_left(ours, when)
            return when + min(offsets[max(k - self.NEAR, 0):k + self.NEAR])

        return mapped


class _SavedTensors:
    """The saved-tensor and gradient hooks of the memory step: what autograd saved, when."""

    def __init__(self, kept: set[int], clock: Callable[[], int]):
        self.kept = kept  # storages alive before the step: parameters, buffers, inputs, optimizer state
        self.clock = clock
        # storage -> [sequence number of the node that saved it, bytes, packed at, last unpacked at]
        self.saved: dict[int, list[Any]] = {}
        # sequence number -> how many tensors the node saved (each a checkpoint's hooks would handle)
        self.saves: dict[Optional[int], int] = {}

    def pack(self, tensor: Any) -> Any:
        # The node saving it was made just before: the last number given.
        number = _last_sequence_nr()
        self.saves[number] = self.saves.get(number, 0) + 1
        try:
            key, size = _storage(tensor)
        except (RuntimeError, NotImplementedError):  # a tensor without storage (sparse, a subclass)
            return tensor
        if key and key not in self.kept and key not in self.saved:
            self.saved[key] = [number, size, self.clock(), None, None]
        return (tensor, key)

    def unpack(self, packed: Any) -> Any:
        tensor, key = packed if isinstance(packed, tuple) else (packed, 0)
        entry = self.saved.get(key)
        if entry is not None:
            entry[3] = self.clock()
            if entry[4] is None:
                entry[4] = entry[3]
        return tensor


def measure_memory(
    runner: Any,
    graph: AutogradGraph,
    node_of: Callable[[int], Optional[str]],
    profiled_step: Callable[[], tuple[Iterable[Any], int]],
    phase_ranges: Mapping[str, str],
    memory_event: str,
) -> StepMemory:
    """One step under the profiler with ``profile_memory`` and saved-tensor hooks, one plain
    step with each module's forward timed; see the module's docstring. ``runner`` is a
    :class:`~graphviz_autograd.checks.profiling.StepRunner` whose warm-up steps have run;
    ``profiled_step()`` runs its marked step under the profiler and returns the events and the
    first sequence number of the step; ``phase_ranges`` names the range of each phase, and
    ``memory_event`` the profiler's allocation events."""
    import torch

    from ..capture.naming import named_tensors

    device = runner.device
    cuda = device.type == "cuda"
    model = runner.model
    optimizer = runner.optimizer
    notes: list[str] = []

    # Two plain steps: the faster is what measuring memory is compared with; module hooks time each
    # forward in both, and each module's faster time is kept (a machine busy with other work only
    # ever adds to a time, and a checkpoint's extra time is predicted from these).
    forward_times: dict[str, float] = {}
    # On CUDA, two more steps time each module's forward without waiting for the GPU: the CPU's
    # time to launch its kernels, which a checkpoint's recompute adds when it outlasts the GPU's.
    launch_times: dict[str, float] = {}
    plain = math.inf
    # What measuring memory costs: all of it (these steps, the checkpoint's rates, the memory step
    # and reading it), against the faster of the first two steps, a plain one with hooks.
    measuring_started = time.perf_counter()
    clock_name, clock = forward_clock(device.type, torch.get_num_threads())
    # On CUDA the forward times are read from events recorded on the stream before and after each
    # call, the GPU's own time: waiting for the GPU before and after each call (each of a block's
    # children's too) leaves it idle while the next kernels are launched, which made GPT-2's blocks
    # (8x1024 tokens, H200) read a fifth longer than their forward takes again in backward.
    timings = [("first", False), ("second", False)] + ([("third", True), ("fourth", True)] if cuda else [])
    # In those two, the whole forward: the CPU's time to launch it, and its time till the GPU is done.
    launched, done = math.inf, math.inf
    step_time = math.inf  # the first two steps' on ``clock``
    backlogs: list[_GpuBacklog] = []
    for which, launching in timings:
        times: dict[str, float] = {}
        plain_started, on_clock = time.perf_counter(), clock()
        if launching:
            timer = _module_timer(model, lambda: None, times, clock)
        else:
            timer = _module_timer_on_gpu(model, times) if cuda else _module_timer(model, runner.synchronize, times, clock)
        # On CUDA the steps reading events run as in a training loop, nothing waiting for the GPU
        # between the forward and backward, and measure how far the GPU lags behind the CPU; the
        # events go on the step's device's stream (it need not be the current device).
        on_device = torch.cuda.device(device) if cuda else contextlib.nullcontext()
        with on_device, timer, _whole_forward(model if launching else None, runner.synchronize, clock) as spans, \
                _gpu_backlog(model if cuda and not launching else None, backlogs, runner.synchronize):
            runner.step(f"the {which} step timing each module", wait=launching or not cuda)
        for launch, finished in spans:
            launched, done = min(launched, launch), min(done, finished)
        plain = min(plain, time.perf_counter() - plain_started)
        kept_times = launch_times if launching else forward_times
        if not launching:
            step_time = min(step_time, clock() - on_clock)
        for path, seconds in times.items():
            kept_times[path] = min(kept_times.get(path, math.inf), seconds)
    rates = checkpoint_cost(device, runner.synchronize, clock) if model is not None else CheckpointRates()
    # The whole forward, GPU's time and the CPU's to launch it: where they are alike the GPU waits
    # on the CPU, and a checkpoint's own work (Python, per call and per tensor saved, in the forward
    # and again in backward) adds to the step rather than running under the GPU's.
    if cuda and math.isfinite(done) and launched >= LAUNCH_BOUND * done:
        notes.append(f"the forward is bound by launching its kernels (the CPU took {format_seconds(launched)} to launch "
                     f"them, the GPU was done {format_seconds(done)} after the start): a checkpoint's own work adds to "
                     f"the step here, and its extra time may be up to twice the advice's (a larger batch keeps the GPU busy)")

    parameters: dict[int, float] = {}
    if model is not None:
        parameters.update(_storage(t) for t in [*model.parameters(), *model.buffers()])
    if optimizer is not None:
        parameters.update(_storage(p) for g in optimizer.param_groups for p in g["params"])
    state: dict[int, float] = {}
    if optimizer is not None:
        for values in optimizer.state.values():
            state.update(_storage(v) for v in values.values() if isinstance(v, torch.Tensor) and v.numel() > 1)
    inputs: dict[int, float] = {}
    for _, tensor in named_tensors(runner.inputs):
        if tensor.device.type == device.type:
            inputs.update([_storage(tensor)])
    kept = set(parameters) | set(state) | set(inputs)
    # The clock of the profiler's events: epoch nanoseconds.
    hooks = _SavedTensors(kept, time.time_ns)
    grads: list[tuple[float, float]] = []  # (made at, bytes)

    anchors = _ClockAnchors()

    def grad_made(tensor: Any) -> None:
        if tensor.grad is not None:
            grads.append((anchors.stamp(), float(tensor.grad.untyped_storage().nbytes())))

    handles = [leaf.register_post_accumulate_grad_hook(grad_made) for leaf in runner.leaves if leaf.requires_grad]
    if model is not None:
        handles += [model.register_forward_pre_hook(anchors.mark), model.register_forward_hook(anchors.mark)]
    if optimizer is not None:
        handles += [optimizer.register_step_pre_hook(anchors.mark), optimizer.register_step_post_hook(anchors.mark)]
    # The step sets every .grad to None before its forward, out of the events read: done here
    # first, so that the bytes alive where it starts are those of the step (on CUDA, read from
    # the allocator, they held the last step's gradients).
    runner.clear_grads()
    # The gradients there were before the profile, which it holds to give back, are no part of the step.
    held = runner.held_bytes(device)
    if cuda:
        torch.cuda.synchronize(device)
        start_bytes = float(torch.cuda.memory_allocated(device)) - held
        torch.cuda.reset_peak_memory_stats(device)
    else:
        start_bytes = float(sum(parameters.values()) + sum(state.values()) + sum(inputs.values()))
    module_inputs: dict[str, set[int]] = {}
    module_outputs: dict[str, set[int]] = {}
    try:
        with torch.autograd.graph.saved_tensors_hooks(hooks.pack, hooks.unpack), _module_boundaries(model, module_inputs, module_outputs):
            events, base = profiled_step()
    finally:
        for handle in handles:
            handle.remove()
    allocator_peak = float(torch.cuda.max_memory_allocated(device)) - held if cuda else 0.0

    measured_type = torch.autograd.DeviceType.CUDA if cuda else torch.autograd.DeviceType.CPU
    phases: dict[str, tuple[int, int]] = {}
    changes: list[tuple[int, int]] = []
    phase_of = {name: phase for phase, name in phase_ranges.items()}
    anchored: dict[int, int] = {}
    for event in events:
        name = event.name()
        if name == memory_event:
            if event.device_type() == measured_type:
                changes.append((event.start_ns(), event.nbytes()))
        elif event.device_type() != torch.autograd.DeviceType.CPU:
            # On CUDA a range is also drawn on the GPU's timeline, over the kernels launched in
            # it, later than on the CPU's: the allocations and the hooks are the CPU's.
            continue
        elif name in phase_of:
            phases[phase_of[name]] = (event.start_ns(), event.start_ns() + event.duration_ns())
        elif name.startswith(_ClockAnchors.NAME) and name[len(_ClockAnchors.NAME):].isdigit():
            anchored[int(name[len(_ClockAnchors.NAME):])] = event.start_ns()
    on_profiler_clock = anchors.mapping(anchored)
    grads = [(on_profiler_clock(made), size) for made, size in grads]
    for entry in hooks.saved.values():
        for k in (2, 3, 4):
            if entry[k] is not None:
                entry[k] = on_profiler_clock(entry[k])
    if "forward" not in phases:
        raise RuntimeError("the memory step's forward range was not recorded")
    begin = phases["forward"][0]
    end = max(e for _, e in phases.values())
    changes = sorted(c for c in changes if begin <= c[0] <= end)

    def phase_at(when: int) -> str:
        for name in PHASES:
            if name in phases and when <= phases[name][1]:
                return name
        return PHASES[-1] if "optimizer" in phases else "backward"

    alive = start_bytes
    peak, peak_at = start_bytes, begin
    points: list[tuple[int, float]] = [(begin, alive)]
    phase_peaks: dict[str, float] = {name: start_bytes for name in PHASES if name in phases}
    for when, size in changes:
        alive += size
        points.append((when, alive))
        phase = phase_at(when)
        phase_peaks[phase] = max(phase_peaks.get(phase, 0.0), alive)
        if alive > peak:
            peak, peak_at = alive, when
    source = "the profiler's memory events"
    if cuda and allocator_peak > 0:
        # The allocator's high-water mark is the peak; the events give its moment and the timeline.
        source = "the CUDA allocator (peak) and the profiler's memory events (timeline)"
        if abs(allocator_peak - peak) > 0.05 * allocator_peak:
            notes.append(f"the allocator's peak, {format_bytes(int(allocator_peak))}, differs from the events' "
                         f"{format_bytes(int(peak))} by more than 5%: the peak is the allocator's")
        peak = allocator_peak

    node_activations: dict[str, float] = {}
    activations = 0.0
    alive_storages: dict[int, tuple[Optional[str], float]] = {}
    last = points[-1][0]
    lifetimes: dict[int, tuple[Optional[str], float, float, float, Optional[float]]] = {}
    for key, (number, size, packed_at, unpacked_at, first_read) in hooks.saved.items():
        node_id = node_of(number - base) if number is not None else None
        lifetimes[key] = (node_id, size, (packed_at - begin) / 1e9, ((unpacked_at or last) - begin) / 1e9,
                          None if first_read is None else (first_read - begin) / 1e9)
        if packed_at <= peak_at and (unpacked_at is None or unpacked_at >= peak_at):
            activations += size
            alive_storages[key] = (node_id, size)
            if node_id is not None:
                node_activations[node_id] = node_activations.get(node_id, 0.0) + size
    gradients = float(sum(size for made, size in grads if made <= peak_at))
    parameter_bytes = float(sum(parameters.values()))
    state_bytes = float(sum(state.values()))
    temporaries = peak - parameter_bytes - gradients - state_bytes - activations
    if temporaries < 0:
        notes.append(f"the kinds named add up to {format_bytes(int(-temporaries))} more than the peak: "
                     "tensors saved for backward that share storage with others are counted once each")
        temporaries = 0.0
    at_peak = {PARAMETERS: parameter_bytes, GRADIENTS: gradients, OPTIMIZER_STATE: state_bytes,
               ACTIVATIONS: activations, TEMPORARIES: temporaries}

    node_saves: dict[str, float] = {}
    for number, count in hooks.saves.items():
        node_id = node_of(number - base) if number is not None else None
        if node_id is not None:
            node_saves[node_id] = node_saves.get(node_id, 0) + count
    modules = _candidates(graph, model, alive_storages, lifetimes, module_inputs, module_outputs, forward_times,
                          node_saves, rates, launch_times, backlogs)
    timeline = _thinned(points, begin, phase_at)
    saved_by_node: dict[str, list[tuple[float, float, float]]] = {}
    for saver, nbytes, packed_s, read_s, _ in lifetimes.values():
        if saver is not None:
            saved_by_node.setdefault(saver, []).append((round(packed_s, 6), round(read_s, 6), nbytes))
    measure_time = time.perf_counter() - measuring_started  # the events read and the candidates made included
    return StepMemory(
        device=str(device), source=source, peak=peak, peak_time=(peak_at - begin) / 1e9, peak_phase=phase_at(peak_at),
        at_peak=at_peak, start_bytes=start_bytes, timeline=timeline, node_activations=node_activations,
        module_activations=_by_module(graph, node_activations),
        modules=modules, phase_peaks=phase_peaks, measure_time=measure_time, plain_step_time=plain,
        step_time=step_time if math.isfinite(step_time) else 0.0, notes=tuple(notes),
        graph=graph,
        timeline_kinds=_kinds_over_time(
            timeline, parameter_bytes, state_bytes, [((made - begin) / 1e9, size) for made, size in grads],
            [(packed, read, size) for _, size, packed, read, _ in lifetimes.values()]),
        saved_by_node={n: tuple(sorted(saved)) for n, saved in sorted(saved_by_node.items())},
        clock=clock_name,
        checkpoint_rates=rates,
    )


def _kinds_over_time(timeline: Sequence[tuple[float, float, str]], parameters: float, optimizer_state: float,
                     grads: Sequence[tuple[float, float]], saved: Sequence[tuple[float, float, float]]) -> tuple[tuple[float, ...], ...]:
    """Each point of ``timeline`` split by kind (:data:`KINDS`): the parameters and optimizer
    state throughout, the gradients made by then, the saved tensors made and not yet read for the
    last time, and the rest of the bytes alive as temporaries.

    >>> _kinds_over_time([(0.0, 10.0, "forward"), (1.0, 19.0, "backward")], 8.0, 0.0, [(0.5, 4.0)], [(0.0, 0.8, 2.0)])
    ((8.0, 0.0, 0.0, 2.0, 0.0), (8.0, 4.0, 0.0, 0.0, 7.0))
    """
    # Three sweeps over sorted times: gradients made, tensors saved, tensors read for the last time.
    made = sorted(grads)
    packed = sorted((a, size) for a, _, size in saved)
    ended = sorted((b, size) for _, b, size in saved)
    at = [0, 0, 0]
    grad_bytes = saved_bytes = 0.0
    rows: list[tuple[float, ...]] = []
    for when, total, _ in timeline:
        while at[0] < len(made) and made[at[0]][0] <= when:
            grad_bytes += made[at[0]][1]
            at[0] += 1
        while at[1] < len(packed) and packed[at[1]][0] <= when:
            saved_bytes += packed[at[1]][1]
            at[1] += 1
        while at[2] < len(ended) and ended[at[2]][0] < when:
            saved_bytes -= ended[at[2]][1]
            at[2] += 1
        rest = max(0.0, total - parameters - optimizer_state - grad_bytes - saved_bytes)
        rows.append((parameters, grad_bytes, optimizer_state, saved_bytes, rest))
    return tuple(rows)


def _module_of_node(graph: AutogradGraph) -> dict[str, str]:
    """The module (not the call: ``layers.0``, not ``layers.0#2``) each node of ``graph`` ran
    in, by id: made once per graph, for the rolls by module and the checkpoint candidates."""
    return graph.derived("module_of_node", lambda: {n.id: module_of_call(n.module) for n in graph.nodes})


def _by_module(graph: AutogradGraph, node_activations: Mapping[str, float]) -> dict[str, float]:
    """Each module's bytes of ``node_activations``, its submodules' included (the model left out)."""
    modules = _module_of_node(graph)
    totals: dict[str, float] = {}
    for node_id, value in node_activations.items():
        path = modules.get(node_id, "")
        while path:
            totals[path] = totals.get(path, 0.0) + value
            path = path.rpartition(".")[0]
    return totals


def _thinned(points: list[tuple[int, float]], begin: int, phase_at: Callable[[int], str]) -> tuple[tuple[float, float, str], ...]:
    """At most :data:`TIMELINE_POINTS` points: of each stretch of events, its highest."""
    stride = max(1, -(-len(points) // TIMELINE_POINTS))
    kept = []
    for i in range(0, len(points), stride):
        when, value = max(points[i:i + stride], key=lambda p: p[1])
        kept.append(((when - begin) / 1e9, value, phase_at(when)))
    return tuple(kept)


def _candidates(graph: AutogradGraph, model: Any, alive: Mapping[int, tuple[Optional[str], float]],
                lifetimes: Mapping[int, tuple[Optional[str], float, float, float, Optional[float]]],
                inputs: Mapping[str, set[int]], outputs: Mapping[str, set[int]],
                forward_times: Mapping[str, float], node_saves: Mapping[str, float] = {},
                rates: Optional[CheckpointRates] = None,
                launch_times: Mapping[str, float] = {},
                backlogs: Sequence[_GpuBacklog] = ()) -> tuple[ModuleMemory, ...]:
    """Each module (not the model) and each run of two or more consecutive blocks of a list of
    alike blocks (``transformer.h.0-5``) whose nodes saved bytes alive at the peak, most first.
    The storages a checkpoint keeps are left out: a module's inputs and outputs; a run's inputs
    from outside it (its first block's, and what every block is given alike, such as a mask)
    and its last block's outputs. A run's forward time is its blocks' (each measured). Its
    overhead is what :func:`checkpoint_extra_time` adds to its forward time, for one checkpoint
    (``rates``) saving what its blocks' nodes save (``node_saves``), with the CPU's time to launch
    the forward again (``launch_times``, on CUDA; a module without one, its forward time) and
    the GPU's queue in each step of ``backlogs`` (the least of them), none on a CPU."""
    if model is None:
        return ()
    rates = rates or CheckpointRates()
    types = {path: type(m).__name__ for path, m in model.named_modules()}
    module_of = _module_of_node(graph)
    calls = {n.id: n.module for n in graph.nodes}  # with call marks: ``cell#3.up``
    inside: dict[str, list[int]] = {}  # module path -> the storages its nodes saved (its submodules' included)
    for key, (node_id, *_rest) in lifetimes.items():
        path = module_of.get(node_id or "", "")
        while path:
            inside.setdefault(path, []).append(key)
            path = path.rpartition(".")[0]
    saves = _by_module(graph, node_saves)  # module path -> the tensors its nodes saved, counted each time
    # (path, class name, the modules it runs, the storages its checkpoint keeps, how many parts
    # of a node's module path name one call of it: the module's own, or a run's list's, and
    # whether it is a run, one of whose calls is one pass over its blocks)
    wanted: list[tuple[str, str, list[str], set[int], int, bool]] = [
        (path, types[path], [path], inputs.get(path, set()) | outputs.get(path, set()), path.count(".") + 1, False)
        for path in inside if path in types and path in forward_times]
    for holder, blocks in _block_lists(list(types.items())).items():
        for i in range(len(blocks)):
            for j in range(i + 1, len(blocks)):
                run = blocks[i:j + 1]
                if not all(block in forward_times for block in run):
                    break
                made = set().union(*(outputs.get(block, set()) for block in run[:-1]))
                kept = set().union(*(inputs.get(block, set()) for block in run)) - made
                first, last = run[0].rpartition(".")[2], run[-1].rpartition(".")[2]
                wanted.append((f"{holder}.{first}-{last}" if holder else f"{first}-{last}",
                               f"{types[run[0]]} x{len(run)}", run, kept | outputs.get(run[-1], set()),
                               holder.count(".") + 1 if holder else 0, True))
    # Per module and way of naming its calls: its saved storages as (saved, read, bytes, call,
    # storage, bytes alive at the peak), in order, and per call the stretch of backward that reads
    # them. A run is its blocks' lists put together, so each block's is made once, not once per
    # run holding it (a GPT-2 of 48 layers has 1,128 runs).
    Item = tuple[float, float, float, str, int, float]
    parts: dict[tuple[str, int, bool], tuple[list[Item], dict[str, tuple[float, float]]]] = {}
    call_of: dict[tuple[str, int, bool], str] = {}

    def part(member: str, depth: int, passes: bool) -> tuple[list[Item], dict[str, tuple[float, float]]]:
        found = parts.get((member, depth, passes))
        if found is None:
            items: list[Item] = []
            windows: dict[str, tuple[float, float]] = {}
            for key in inside.get(member, ()):
                node_id, size, packed, read, first_read = lifetimes[key]
                module = calls.get(node_id or "", "")
                call = call_of.get((module, depth, passes))
                if call is None:
                    call = call_of[(module, depth, passes)] = _call_key(module, depth, passes)
                items.append((packed, read, size, call, key, alive[key][1] if key in alive else 0.0))
                if first_read is not None:
                    begin, end = windows.get(call, (math.inf, -math.inf))
                    windows[call] = (min(begin, first_read), max(end, read))
            items.sort()
            found = parts[(member, depth, passes)] = (items, windows)
        return found

    # Each saved tensor's entry, one object for every candidate that drops it as the same call.
    entries: dict[tuple[int, int], tuple[float, float, float, int]] = {}
    rows = []
    for path, type_name, members, kept, depth, passes in wanted:
        pieces = [part(member, depth, passes) for member in members]
        dropped = [item for items, _ in pieces for item in items if item[4] not in kept]
        saved = sum(item[5] for item in dropped)
        if saved <= 0:
            continue
        # Per call (:func:`_call_key`: ``cell#3``, ``transformer.h``, ``blocks#2`` for a second
        # pass over a list's blocks), the stretch of backward that reads its saved tensors.
        windows: dict[str, tuple[float, float]] = {}
        for _, theirs in pieces:
            for call, (begin, end) in theirs.items():
                was = windows.get(call, (math.inf, -math.inf))
                windows[call] = (min(was[0], begin), max(was[1], end))
        order = sorted(windows, key=lambda call: windows[call])
        index = {call: k for k, call in enumerate(order)}
        intervals = []
        for packed, read, size, call, key, _ in dropped:
            k = index.get(call, -1)
            entry = entries.get((key, k))
            if entry is None:
                entry = entries[(key, k)] = (packed, read, size, k)
            intervals.append(entry)
        intervals.sort()
        forward = sum(forward_times[m] for m in members)
        launch = sum(launch_times.get(m, forward_times[m]) for m in members)
        own, own_forward = rates.own(sum(saves.get(m, 0) for m in members), max(len({d[3] for d in dropped} | set(windows)), 1))
        hidden = [backlog.hidden(members) for backlog in backlogs]
        queued = (min(h[0] for h in hidden), min(h[1] for h in hidden)) if hidden else (0.0, 0.0)
        rows.append(ModuleMemory(path, type_name, saved, forward, tuple(intervals), tuple(windows[call] for call in order),
                                 queued, (own_forward, launch + own)))
    rows.sort(key=lambda m: (-m.saved_at_peak, m.forward_time, m.path))
    return tuple(rows)


def _call_key(module: str, depth: int, passes: bool) -> str:
    """Which call of a candidate a node ran in, from its module path with call marks: the path's
    first ``depth`` parts (a call of the module, or of a run's list, or of one above it); for a
    run (``passes``), with the call number of the block it ran in, since a model that goes over
    its blocks twice makes two passes, each one call of the run.

    >>> _call_key("cell#3.up", 1, False), _call_key("blocks.2#2.act", 1, True), _call_key("enc#2.h.0.mlp", 2, True)
    ('cell#3', 'blocks#2', 'enc#2.h')
    """
    parts = module.split(".")
    key = ".".join(parts[:depth])
    if passes and len(parts) > depth:
        _, mark, number = parts[depth].rpartition(CALL_MARK)
        if mark and number.isdigit():
            key += mark + number
    return key


def checkpoint_cost(device: Any, synchronize: Callable[[], None], clock: Callable[[], float],
                    repeats: int = 15, fastest_of: int = 3) -> CheckpointRates:
    """What a checkpoint applied as :func:`apply_checkpointing` applies it costs a step on
    ``device`` beyond the forward it runs again: per call, and per tensor saved inside it; and
    the forward's part of that.

    Measured on two tiny modules, chains of one and of nine ``tanh`` (each saves one tensor),
    each step (forward and backward) taken plain and checkpointed, and its forward alone, plain
    and checkpointed: the checkpointed step less the plain one and the forward is the overhead,
    the checkpointed forward less the plain one the forward's part, and the two chains give the
    rates. That is done ``repeats`` times over, each time every timing the fastest of
    ``fastest_of`` (other work only ever adds to a time), and each rate is the median of its
    rounds': each round's timings are taken within a few milliseconds, while a machine's speed
    moves from one second to the next (taking each timing's fastest of 15 instead, a tensor's
    rate read 0 to 54 µs in six calls in a row on a busy 2-core machine, 14 to 29 µs in eight so). On a
    large model the overhead is a sliver of the recompute; on a small one on a GPU, where the
    work is launching kernels, it is most of what a checkpoint adds (a ResNet-18 on 8 small
    images: 4 ms over 1 ms of recompute)."""
    import torch
    from torch import nn

    def timed(call: Callable[[], Any]) -> float:
        best = math.inf
        for _ in range(fastest_of):
            synchronize()
            started = clock()
            call()
            synchronize()
            best = min(best, clock() - started)
        return best

    leaf = torch.ones(64, device=device, requires_grad=True)

    def step(holder: Any) -> None:
        holder(leaf * 1.0).sum().backward()

    def forward(holder: Any) -> None:
        holder(leaf * 1.0)

    lengths = (1, 9)
    holders = [nn.Sequential(nn.Sequential(*[nn.Tanh() for _ in range(length)])) for length in lengths]

    def rates(costs: list[float]) -> tuple[float, float]:
        per_saved = (costs[1] - costs[0]) / (lengths[1] - lengths[0])
        return costs[0] - per_saved * lengths[0], per_saved

    rounds = []
    for _ in range(repeats):
        overheads, in_forward = [], []
        for holder in holders:
            plain, alone = timed(functools.partial(step, holder)), timed(functools.partial(forward, holder))
            with apply_checkpointing(holder, ["0"]):
                checkpointed, checkpointed_alone = timed(functools.partial(step, holder)), timed(functools.partial(forward, holder))
            overheads.append(checkpointed - plain - alone)
            in_forward.append(checkpointed_alone - alone)
        rounds.append((*rates(overheads), *rates(in_forward)))
    return CheckpointRates(*(max(statistics.median(column), 0.0) for column in zip(*rounds)))


def forward_clock(device_type: str, threads: int) -> tuple[str, Callable[[], float]]:
    """The clock a module's forward, and so a checkpoint's extra time, is measured by: on a CPU
    with torch on one thread (``torch.set_num_threads(1)``), the process's CPU time, which other
    work on a busy machine does not add to and which is then the step's own time; else the wall
    time (on CUDA the GPU's, read from events on its stream), since several threads' CPU times
    add up to more than the step takes.

    >>> forward_clock("cpu", 1)[0], forward_clock("cpu", 8)[0], forward_clock("cuda", 1)[0]
    ('CPU time', 'wall time', 'wall time')
    """
    if device_type == "cpu" and threads == 1:
        return CPU_TIME, time.process_time
    return WALL_TIME, time.perf_counter


@contextlib.contextmanager
def _around_each_call(model: Any, before: Callable[..., None], after: Callable[..., None]) -> Iterator[None]:
    """``before(path, module, args)`` and ``after(path, module, args, output)`` around each call
    of each of ``model``'s modules (the model itself left out), while in the block."""
    handles = []
    for path, module in model.named_modules():
        if path:
            handles.append(module.register_forward_pre_hook(functools.partial(before, path)))
            handles.append(module.register_forward_hook(functools.partial(after, path)))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def _module_timer(model: Any, synchronize: Callable[[], None], times: dict[str, float],
                  clock: Callable[[], float] = time.perf_counter) -> Iterator[None]:
    """Each module's forward time (all its calls summed) by ``clock``, with hooks before and after each call."""
    if model is None:
        yield
        return
    started: dict[int, list[float]] = {}

    def before(path: str, module: Any, *args: Any) -> None:
        synchronize()
        started.setdefault(id(module), []).append(clock())

    def after(path: str, module: Any, *args: Any) -> None:
        synchronize()
        stack = started.get(id(module))
        if stack:
            times[path] = times.get(path, 0.0) + clock() - stack.pop()

    with _around_each_call(model, before, after):
        yield


@contextlib.contextmanager
def _whole_forward(model: Any, synchronize: Callable[[], None], clock: Callable[[], float]) -> Iterator[list[tuple[float, float]]]:
    """Each forward call of ``model`` as (the time till the call returns, having launched its work;
    the time till the device is done with it, waiting for it there), by ``clock``."""
    spans: list[tuple[float, float]] = []
    if model is None:
        yield spans
        return
    started: list[float] = []

    def before(*_: Any) -> None:
        started.append(clock())

    def after(*_: Any) -> None:
        if started:
            begin = started.pop()
            launched = clock() - begin
            synchronize()
            spans.append((launched, clock() - begin))

    handles = [model.register_forward_pre_hook(before), model.register_forward_hook(after)]
    try:
        yield spans
    finally:
        for handle in handles:
            handle.remove()


def _cuda_event() -> Any:
    """A CUDA event recorded now on the current stream, timing enabled."""
    import torch

    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


@dataclass(frozen=True)
class _GpuBacklog:
    """How far the GPU lagged behind the CPU through one step (:func:`_gpu_backlog`): at each
    mark, in the CPU's order, the seconds of work the GPU had still queued; the first mark of
    each module's forward, and of backward reaching it (a gradient for one of its outputs)."""

    lags: tuple[float, ...]
    forward_at: Mapping[str, int]
    backward_at: Mapping[str, int]

    def hidden(self, members: Sequence[str]) -> tuple[float, float]:
        """The least lag from the forward of the first of ``members`` to where backward reaches
        the first of them, and from there to the step's end; (0, 0) where a mark is missing.

        >>> _GpuBacklog((0.0, 2.0, 3.0, 5.0, 4.0, 1.5), {"a": 1, "b": 2}, {"b": 3, "a": 4}).hidden(["a", "b"])
        (2.0, 1.5)
        """
        reached = [self.backward_at[m] for m in members if m in self.backward_at]
        if not reached or any(m not in self.forward_at for m in members):
            return (0.0, 0.0)
        begin, middle = min(self.forward_at[m] for m in members), min(reached)
        if middle < begin:
            return (0.0, 0.0)
        return min(self.lags[begin:middle + 1]), min(self.lags[middle:])


@contextlib.contextmanager
def _gpu_backlog(model: Any, found: list[_GpuBacklog], synchronize: Callable[[], None],
                 clock: Callable[[], float] = time.perf_counter) -> Iterator[None]:
    """How far the GPU lags behind the CPU through the step run in the block, added to ``found``.

    A CUDA event is recorded on the stream, with the CPU's time by ``clock``, where each of
    ``model``'s modules' calls starts, where backward reaches each module (a hook on its
    outputs' gradients) and at the step's end; once it is done, each event's time on the GPU,
    from one recorded when the GPU was idle at the start, less the CPU's, is the work it had
    queued there. Nothing waits for the GPU inside the step."""
    if model is None:
        yield
        return
    from ..capture.naming import named_tensors

    marks: list[tuple[str, str, float, Any]] = []
    hooks: list[Any] = []

    def mark(kind: str, path: str) -> None:
        marks.append((kind, path, clock(), _cuda_event()))

    def before(path: str, module: Any, *args: Any) -> None:
        mark("forward", path)

    def after(path: str, module: Any, args: Any, output: Any) -> None:
        reached = [False]

        def on_gradient(_: Any) -> None:
            if not reached[0]:
                reached[0] = True
                mark("backward", path)

        for _, tensor in named_tensors(output):
            if tensor.requires_grad:
                with contextlib.suppress(RuntimeError):
                    hooks.append(tensor.register_hook(on_gradient))

    synchronize()
    start, began = _cuda_event(), clock()
    try:
        with _around_each_call(model, before, after):
            yield
        mark("end", "")
    finally:
        for hook in hooks:
            hook.remove()
    synchronize()
    forward_at: dict[str, int] = {}
    backward_at: dict[str, int] = {}
    for k, (kind, path, _, _) in enumerate(marks):
        if kind != "end":
            (forward_at if kind == "forward" else backward_at).setdefault(path, k)
    found.append(_GpuBacklog(tuple(max(start.elapsed_time(event) / 1e3 - (at - began), 0.0) for _, _, at, event in marks),
                             forward_at, backward_at))


@contextlib.contextmanager
def _module_timer_on_gpu(model: Any, times: dict[str, float]) -> Iterator[None]:
    """Each module's forward time on the GPU (all its calls summed): the time between CUDA events
    recorded on the current stream before and after each call, read once the step is done.
    Nothing waits for the GPU inside the step, so its kernels run as in a plain one."""
    if model is None:
        yield
        return
    import torch

    started: dict[int, list[Any]] = {}
    spans: list[tuple[str, Any, Any]] = []

    def before(path: str, module: Any, *args: Any) -> None:
        started.setdefault(id(module), []).append(_cuda_event())

    def after(path: str, module: Any, *args: Any) -> None:
        stack = started.get(id(module))
        if stack:
            spans.append((path, stack.pop(), _cuda_event()))

    with _around_each_call(model, before, after):
        yield
    torch.cuda.synchronize()
    for path, begin, end in spans:
        times[path] = times.get(path, 0.0) + begin.elapsed_time(end) / 1e3


@contextlib.contextmanager
def _module_boundaries(model: Any, inputs: dict[str, set[int]], outputs: dict[str, set[int]]) -> Iterator[None]:
    """The storages of each module's inputs and of its outputs (all its calls), by path."""
    from ..capture.naming import named_tensors

    if model is None:
        yield
        return
    handles = []

    def seen(found: set[int], *values: Any) -> None:
        for _, tensor in named_tensors(values):
            with contextlib.suppress(RuntimeError, NotImplementedError):
                found.add(tensor.untyped_storage().data_ptr())

    for path, module in model.named_modules():
        if path:
            handles.append(module.register_forward_pre_hook(
                functools.partial(lambda found, _m, args, kwargs: seen(found, args, kwargs), inputs.setdefault(path, set())),
                with_kwargs=True))
            handles.append(module.register_forward_hook(
                functools.partial(lambda found, _m, _args, output: seen(found, output), outputs.setdefault(path, set()))))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
