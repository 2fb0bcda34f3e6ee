"""What one logged step of :func:`~graphviz_autograd.training.watching.watch` measures: tensors
on their own device while the step runs, one vector of numbers when it ends.

A logged step of a 4-layer GPT-2 measures 55 module calls and 50 parameters, with 266
histograms. Measured in a hook, between one module's forward and the next, each torch call
costs several times what it does in a loop (its code and data are fetched again: the signs
of 65,536 floats take 11 µs in a loop and 50 µs there), so each thing measured takes as few
calls as it can, and what is alike for all of them is done once, on vectors, when the step
ends (:meth:`StepMeasures.flat`):

- a module's output: its sum, its sum of squares, its count of nonzero elements (on an even
  sample of :data:`ZERO_COUNT_SAMPLE` elements of a larger output) and each unit's largest
  and smallest value (about ten calls; the mean, std, zero fraction,
  largest magnitude and dead units of every output follow at the end, in a few calls for
  all, ``segment_reduce`` over the units of every output);
- parameters: multi-tensor norms (``torch._foreach_norm``), one stack per statistic;
- histograms: a sample of each tensor; at the end one logarithm of every sample and one
  ``index_add_`` that counts every bin of every histogram (a ``histc`` per histogram took
  2.5 ms for 266 of them, this 1 ms, with the same counts).

>>> import torch
>>> measures = StepMeasures(histograms=True, sample=None)
>>> measures.output("relu", None, torch.tensor([[0.0, 2.0], [0.0, -4.0]]))
>>> flat, layout = measures.flat()
>>> values, counts = layout.read(flat.tolist())
>>> values["activation_mean"], values["activation_zero_fraction"], values["activation_dead_fraction"]
({'relu': -0.5}, {'relu': 0.5}, {'relu': 0.5})
>>> sum(counts["activation"]["relu"])
4
"""

from __future__ import annotations

import math
import weakref
from typing import Callable, NamedTuple, Optional, Sequence

import torch

# Histogram bins: log10 of the magnitude, -8 to 4 in half decades.
HISTOGRAM_LOW = -8.0
HISTOGRAM_HIGH = 4.0
HISTOGRAM_BINS = 24
# Histograms count a sample of at most this many elements of each tensor (None: every element).
DEFAULT_HISTOGRAM_SAMPLE = 1024
HISTOGRAM_EDGES = tuple(HISTOGRAM_LOW + i * (HISTOGRAM_HIGH - HISTOGRAM_LOW) / HISTOGRAM_BINS for i in range(HISTOGRAM_BINS + 1))
NEAR_BOUND = 0.01  # a bounded output within this share of its range from a bound is saturated
# The zero fraction of an output of more elements than this is counted on an even sample of
# this many (standard error under 0.2 percentage points): counting every element of a conv
# net's activations was a third of a logged step's cost.
ZERO_COUNT_SAMPLE = 65536
# What is measured of each module call's output, in the order of the flat vector.
OUTPUT_STATISTICS = (
    "activation_mean",
    "activation_std",
    "activation_abs_max",
    "activation_zero_fraction",
    "activation_dead_fraction",
)


class Layout(NamedTuple):
    """Where each number of a step's flat vector belongs: ``groups`` of (statistic, keys),
    one number per key, in turn; then a histogram of :data:`HISTOGRAM_BINS` counts for each
    (kind, key) of ``histograms``."""

    groups: list[tuple[str, list[str]]]
    histograms: list[tuple[str, str]]

    def scalar_keys(self) -> list[tuple[str, str]]:
        """(statistic, key) of each number before the histograms."""
        return [(statistic, key) for statistic, keys in self.groups for key in keys]

    def read(self, numbers: Sequence[float]) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, tuple[int, ...]]]]:
        """The flat vector's numbers as ``values[statistic][key]`` and ``counts[kind][key]``;
        a key measured twice in one step (several forward or backward passes) keeps its last."""
        values: dict[str, dict[str, float]] = {}
        start = 0
        for statistic, keys in self.groups:
            end = start + len(keys)
            values.setdefault(statistic, {}).update(zip(keys, numbers[start:end]))
            start = end
        counts: dict[str, dict[str, tuple[int, ...]]] = {}
        # Every count rounded in one C-level pass: a generator per histogram cost a logged
        # step of a 4-layer GPT-2 a millisecond and a half (266 histograms of 24 bins).
        rounded = list(map(round, numbers[start:]))
        for index, (kind, key) in enumerate(self.histograms):
            first = index * HISTOGRAM_BINS
            counts.setdefault(kind, {})[key] = tuple(rounded[first : first + HISTOGRAM_BINS])
        return values, counts


class _Measured(NamedTuple):
    """The last tensor measured (a module output or a gradient): a block whose output is its
    last child's (a transformers MLP's is its dropout's) hands on the same tensor, unchanged
    when its version is the same, and its numbers are taken again instead of measured again."""

    tensor: "weakref.ref[torch.Tensor]"
    version: int
    row: int  # an output's place among the outputs
    norm: Optional[torch.Tensor]  # a gradient's norm, squared
    sample: Optional[torch.Tensor]


class StepMeasures:
    """The tensors one logged step measures, kept as the step runs; :meth:`flat` reduces them
    to one vector on their device. Holds only tensors of its own (reductions and copied
    samples), none of the model's, except parameters' samples taken when the step ends."""

    def __init__(self, histograms: bool, sample: Optional[int]):
        self.with_histograms = histograms
        self.sample = sample
        # Module call outputs: per output, its path, element count and unit count; its sum, sum
        # of squares and nonzero count (three 0-dim tensors each, in turn); each unit's extremes.
        self._paths: list[str] = []
        self._sizes: list[int] = []
        self._widths: list[int] = []
        self._sums: list[torch.Tensor] = []
        self._unit_max: list[torch.Tensor] = []
        self._unit_min: list[torch.Tensor] = []
        # Statistics measured one 0-dim tensor at a time: statistic -> (keys, values).
        self._scalars: dict[str, tuple[list[str], list[torch.Tensor]]] = {}
        # Gradient norms, squared (0-dim tensors): statistic -> (keys, squares).
        self._squared_norms: dict[str, tuple[list[str], list[torch.Tensor]]] = {}
        # Statistics measured for many keys at once: (statistic, keys, vector).
        self._vectors: list[tuple[str, list[str], torch.Tensor]] = []
        self._histogram_keys: list[tuple[str, str]] = []
        # Samples of the histograms, copies of ours: one tensor per histogram or per call of
        # histograms(), and how many elements of them each histogram counts.
        self._samples: list[torch.Tensor] = []
        self._sample_sizes: list[int] = []
        self._last_output: Optional[_Measured] = None
        self._last_gradient: Optional[_Measured] = None

    def anew(self) -> "StepMeasures":
        """Empty measures for the next logged step, with these settings."""
        return StepMeasures(self.with_histograms, self.sample)

    @property
    def empty(self) -> bool:
        """Whether nothing was measured."""
        return not (self._paths or self._scalars or self._squared_norms or self._vectors or self._samples)

    def output(self, path: str, bounds: Optional[tuple[float, float]], tensor: torch.Tensor) -> None:
        """Measure a module call's output (``bounds``: the range of a bounded activation's
        outputs, whose share near a bound is measured too)."""
        # The reductions vectorise, one pass each: torch.std_mean and torch.aminmax(dim=0) take a
        # hundred times as long on a CPU, count_nonzero twenty times (it branches per element).
        x = tensor.detach()  # detached: no graph is recorded, with no no_grad() to enter and leave
        if x.dtype != torch.float32:
            x = x.float()
        if bounds is not None:
            low, high = bounds
            margin = NEAR_BOUND * (high - low)
            self.scalar("activation_saturated_fraction", path, ((x <= low + margin) | (x >= high - margin)).float().mean())
        last = self._last_output
        if last is not None and last.tensor() is tensor and last.version == tensor._version:
            self._output_again(path, last)
            return
        count = x.numel()
        if count == 0:
            return
        flat = x.reshape(-1)
        width = x.shape[-1] if x.dim() > 1 else 1
        units = flat.view(-1, width)
        row = len(self._paths)
        self._paths.append(path)
        self._sizes.append(count)
        self._widths.append(width)
        counted = _runs(flat, ZERO_COUNT_SAMPLE)
        # -1, 0 or 1: the sum of their squares counts the nonzero elements (at most 256 KiB of them).
        signs = torch.sign(counted)
        if counted is flat:
            nonzero = torch.dot(signs, signs)
        else:  # runs of a larger output, side by side
            signs = signs.view(-1)
            nonzero = torch.dot(signs, signs) * (count / signs.numel())
        self._sums += (flat.sum(), torch.dot(flat, flat), nonzero)
        self._unit_max.append(_per_unit(units, torch.amax))
        self._unit_min.append(_per_unit(units, torch.amin))
        sample = None
        if self.with_histograms:
            # A copy (abs() makes one): in-place ops later in the step may change the output.
            sample = _sample(flat, _last_dimension(x), self.sample).abs()
            self._add_sample("activation", path, sample)
        self._last_output = _Measured(weakref.ref(tensor), tensor._version, row, None, sample)

    def _output_again(self, path: str, last: _Measured) -> None:
        """The numbers of output ``last`` again, for the call ``path`` that returned it too."""
        row = last.row
        self._paths.append(path)
        self._sizes.append(self._sizes[row])
        self._widths.append(self._widths[row])
        self._sums += self._sums[3 * row : 3 * row + 3]
        self._unit_max.append(self._unit_max[row])
        self._unit_min.append(self._unit_min[row])
        if last.sample is not None:
            self._add_sample("activation", path, last.sample)

    def gradient(self, statistic: str, kind: str, key: str, grad: torch.Tensor) -> None:
        """Measure a gradient as it arrives: its norm as ``statistic`` and its histogram as
        ``kind``, from a copy of its sample (it may be added to in place before the step ends)."""
        last = self._last_gradient
        if last is not None and last.norm is not None and last.tensor() is grad and last.version == grad._version:
            norm, sample = last.norm, last.sample
        else:
            g = grad.detach()
            if g.dtype != torch.float32:
                g = g.float()
            # dot(g, g) reads g once without the scaling pass of vector_norm: 40% less time; the
            # square roots of all are taken at the end, in one call.
            if g.is_contiguous():
                flat = g.view(-1)
                norm = torch.dot(flat, flat)
            else:
                norm = torch.linalg.vector_norm(g).square()
            sample = _sample(g.reshape(-1), _last_dimension(g), self.sample).abs() if self.with_histograms else None
        self._last_gradient = _Measured(weakref.ref(grad), grad._version, -1, norm, sample)
        keys, squares = self._squared_norms.setdefault(statistic, ([], []))
        keys.append(key)
        squares.append(norm)
        if sample is not None:
            self._add_sample(kind, key, sample)

    def scalar(self, statistic: str, key: str, value: torch.Tensor) -> None:
        """Keep one value (a 0-dim tensor) of ``statistic``."""
        keys, values = self._scalars.setdefault(statistic, ([], []))
        keys.append(key)
        values.append(value)

    def vector(self, statistic: str, keys: list[str], values: torch.Tensor) -> None:
        """Keep a value of ``statistic`` for each of ``keys`` (a vector, one per key)."""
        if keys:
            self._vectors.append((statistic, keys, values))

    def norms(
        self, statistic: str, kind: str, keys: list[str], tensors: list[torch.Tensor], known: Optional[torch.Tensor] = None
    ) -> torch.Tensor:
        """The norm of each of ``tensors`` as ``statistic`` (multi-tensor: a few calls for all;
        ``known``: their norms, taken already), and a histogram of each as ``kind``; returns the
        norms, a float32 vector."""
        if known is not None:
            norms = known
        else:
            norms = torch.stack(torch._foreach_norm(tensors)).float() if tensors else torch.zeros(0)
        self.vector(statistic, keys, norms)
        self.histograms(kind, keys, tensors)
        return norms

    def histograms(self, kind: str, keys: list[str], tensors: Sequence[torch.Tensor]) -> None:
        """Count a histogram of each of ``tensors`` as ``kind``, from a sample copied now."""
        if not self.with_histograms or not keys:
            return
        samples = [_sample(t.reshape(-1), _last_dimension(t), self.sample) for t in tensors]
        self._histogram_keys += [(kind, key) for key in keys]
        self._samples.append(_together(torch.cat, samples))  # one copy of them all
        self._sample_sizes += [sample.numel() for sample in samples]

    def _add_sample(self, kind: str, key: str, sample: torch.Tensor) -> None:
        self._histogram_keys.append((kind, key))
        self._samples.append(sample)
        self._sample_sizes.append(sample.numel())

    def flat(self) -> tuple[torch.Tensor, Layout]:
        """Every number of the step in one float32 vector on the device of what was measured
        (the first measured's, for a model split over devices), and where each belongs."""
        parts: list[torch.Tensor] = []
        groups: list[tuple[str, list[str]]] = []
        if self._paths:
            parts.append(self._output_statistics())
            groups += [(statistic, self._paths) for statistic in OUTPUT_STATISTICS]
        for statistic, (keys, values) in self._scalars.items():
            parts.append(_together(torch.stack, values).float())
            groups.append((statistic, keys))
        for statistic, (keys, squares) in self._squared_norms.items():
            parts.append(_together(torch.stack, squares).float().sqrt_())
            groups.append((statistic, keys))
        for statistic, keys, vector in self._vectors:
            parts.append(vector)
            groups.append((statistic, keys))
        if self._samples:
            parts.append(histogram_counts(self._samples, self._sample_sizes))
        return _together(torch.cat, parts), Layout(groups, self._histogram_keys)

    def _output_statistics(self) -> torch.Tensor:
        """The mean, std, largest magnitude, zero fraction and dead units of every module output,
        one statistic after another, from the reductions kept: the same float32 arithmetic as on
        each output's own numbers, once for all."""
        sums = _together(torch.stack, self._sums).view(-1, 3)
        device = sums.device
        total, squares, nonzero = sums.unbind(1)
        sizes = torch.tensor(self._sizes, dtype=torch.float32, device=device)
        mean = total / sizes
        variance = (squares - total * mean) / torch.tensor([max(n - 1, 1) for n in self._sizes], dtype=torch.float32, device=device)
        std = variance.clamp_min_(0.0).sqrt_()
        zero_fraction = 1.0 - nonzero / sizes
        # Each unit's largest magnitude; a unit is dead when it is 0 (its largest and smallest are 0).
        magnitudes = torch.maximum(_together(torch.cat, self._unit_max), _together(torch.cat, self._unit_min).neg_())
        widths = torch.tensor(self._widths, device=device)
        # unsafe: the lengths are right by construction, and checking them would wait on a GPU.
        abs_max = torch.segment_reduce(magnitudes, "max", lengths=widths, unsafe=True)
        dead = torch.segment_reduce((magnitudes == 0).float(), "sum", lengths=widths, unsafe=True) / widths.float()
        return torch.cat((mean, std, abs_max, zero_fraction, dead))


def histogram_counts(samples: Sequence[torch.Tensor], sizes: Sequence[int]) -> torch.Tensor:
    """The counts of values (float, any sign) per bin of :data:`HISTOGRAM_EDGES` of histograms
    whose values are ``samples`` one after another, ``sizes`` values each: one histogram after
    another, in one flat float32 tensor. NaN counts in no bin.

    One logarithm of every value at once, then each value's bin among the bins of all
    histograms, counted by one ``index_add_``; its bin is the one ``torch.histc`` gives it,
    computed as ``histc`` computes it (``(x - low) * bins / (high - low)``, truncated), so the
    counts are those of a ``histc`` per histogram. ``bincount`` would count as fast on a CPU,
    but waits on a GPU to size its result.

    >>> samples = [torch.tensor([0.0, 1e-3, -1.0]), torch.tensor([float("nan"), 1e9])]
    >>> histogram_counts(samples, [3, 2]).reshape(2, -1).sum(1).tolist()
    [3.0, 1.0]
    """
    exponents = _together(torch.cat, list(samples)).float().abs_()
    exponents = exponents.clamp_(10.0**HISTOGRAM_LOW, 10.0**HISTOGRAM_HIGH).log10_()
    span = HISTOGRAM_HIGH - HISTOGRAM_LOW
    bins = exponents.sub_(HISTOGRAM_LOW).mul_(HISTOGRAM_BINS).div_(span).floor_().clamp_(max=HISTOGRAM_BINS - 1)
    device = bins.device
    total = len(sizes) * HISTOGRAM_BINS
    bins += _first_bins(tuple(sizes), device)
    index = bins.nan_to_num_(nan=total).long()  # NaN into one more bin, left out
    counts = torch.zeros(total + 1, device=device).index_add_(0, index, torch.ones((), device=device).expand(index.numel()))
    return counts[:total]


def _first_bins(sizes: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """The first bin of each value's histogram, for histograms of ``sizes`` values one after
    another: kept for the last sizes and device asked, which a logged step asks again."""
    global _first_bins_kept
    key = (sizes, device)
    kept = _first_bins_kept  # one (key, tensor) pair, read and replaced whole: watchers in threads
    if kept is not None and kept[0] == key:
        return kept[1]
    first_bins = torch.arange(len(sizes), dtype=torch.float32, device=device).mul_(HISTOGRAM_BINS)
    expanded = torch.repeat_interleave(first_bins, torch.tensor(sizes, device=device), output_size=sum(sizes))
    _first_bins_kept = (key, expanded)
    return expanded


_first_bins_kept: Optional[tuple[tuple[tuple[int, ...], torch.device], torch.Tensor]] = None


def _sample(flat: torch.Tensor, width: int, size: Optional[int]) -> torch.Tensor:
    """At most about ``size`` elements of ``flat`` (a tensor's elements in order, units of
    ``width`` elements side by side), evenly spaced, as a view: every k-th element, with k
    prime to ``width`` so that every unit is sampled alike (``size`` None: every element).

    >>> _sample(torch.arange(12.0), 4, 4).tolist()
    [0.0, 3.0, 6.0, 9.0]
    """
    count = flat.numel()
    if size is None or count <= size:
        return flat
    key = (count, width, size)
    step = _SAMPLE_STEPS.get(key)
    if step is None:
        step = -(-count // size)
        while math.gcd(step, width) != 1:
            step += 1
        if len(_SAMPLE_STEPS) > 4096:  # shapes of a run are few; a run of ever new ones starts afresh
            _SAMPLE_STEPS.clear()
        _SAMPLE_STEPS[key] = step
    return flat[::step]


# The step of each sample, by (elements, unit width, sample size): a step samples the same shapes again.
_SAMPLE_STEPS: dict[tuple[int, int, int], int] = {}


_RUN = 256  # elements: 1 KiB of float32, whole cache lines


def _runs(flat: torch.Tensor, size: int) -> torch.Tensor:
    """About ``size`` elements of ``flat`` in runs of :data:`_RUN` side by side, evenly spaced
    over it (a view; ``flat`` itself when it is no larger). Every k-th element would read
    every cache line of a large tensor, and cost nearly as much as counting them all.

    >>> _runs(torch.arange(2048.0), 512).shape, _runs(torch.arange(2048.0), 512)[1, 0].item()
    (torch.Size([2, 256]), 1024.0)
    """
    count = flat.numel()
    if count <= size:
        return flat
    rows = count // _RUN
    step = -(-rows // max(size // _RUN, 1))
    return flat[: rows * _RUN].view(rows, _RUN)[::step]


# Rows of fewer units than this are reduced a few at a time side by side (see _per_unit).
_NARROW = 32
_FOLDED_WIDTH = 128


def _per_unit(units: torch.Tensor, reduce: Callable[..., torch.Tensor]) -> torch.Tensor:
    """``reduce(units, 0)`` (``torch.amax`` or ``torch.amin`` over the rows): each unit's extreme.

    A reduction over the rows of fewer than 32 columns does not vectorise on a CPU: a conv
    net's outputs (the last dimension is a feature map's width, 16 or 8) took 20 times as
    long as wide ones, 3.5 ms for a (32, 128, 16, 16) output, half a logged step's cost.
    Rows laid side by side, ``k`` of them (k a power of two that divides the rows), are
    reduced as one row of ``k`` times the units, and those ``k`` extremes of each unit
    then: the same numbers, ten times faster.

    >>> x = torch.arange(24.0).view(6, 4)
    >>> torch.equal(_per_unit(x, torch.amax), x.amax(0))
    True
    """
    rows, width = units.shape
    folds = 1
    while width * folds < _FOLDED_WIDTH and width < _NARROW and rows % (2 * folds) == 0:
        folds *= 2
    if folds == 1:
        return reduce(units, 0)
    return reduce(reduce(units.reshape(rows // folds, folds * width), 0).view(folds, width), 0)


def _last_dimension(tensor: torch.Tensor) -> int:
    """The length of ``tensor``'s last dimension (1 for a number): the units a sample spreads over."""
    return tensor.shape[-1] if tensor.dim() else 1


def _together(join: Callable[[list[torch.Tensor]], torch.Tensor], tensors: list[torch.Tensor]) -> torch.Tensor:
    """``join(tensors)`` (``torch.stack`` or ``torch.cat``), moving them to the first one's
    device when they are not all on it: a model split over devices; one call otherwise."""
    try:
        return join(tensors)
    except RuntimeError:
        device = tensors[0].device
        return join([t.to(device) for t in tensors])


__all__ = [
    "DEFAULT_HISTOGRAM_SAMPLE",
    "HISTOGRAM_BINS",
    "HISTOGRAM_EDGES",
    "HISTOGRAM_HIGH",
    "HISTOGRAM_LOW",
    "Layout",
    "NEAR_BOUND",
    "OUTPUT_STATISTICS",
    "StepMeasures",
    "histogram_counts",
]
