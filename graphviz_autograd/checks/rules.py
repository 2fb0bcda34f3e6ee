"""The finding rules about gradients and activations, each written once.

A rule reads what one step showed (:class:`StepEvidence`: plain numbers, no tensors)
and returns the :class:`Condition` s that hold at that step. :func:`~graphviz_autograd.checks.diagnosis.check`
judges the one step it sees; :meth:`~graphviz_autograd.training.watching.Watcher.findings`
judges every logged step and makes one finding of a condition that holds over a run of
steps, with that run's first step (:func:`over_steps`). So a gradient that is zero at
every logged step is named by both, once.

Non-finite values are a rule of their own (:func:`nonfinite_values`): a number that is
NaN or Inf says nothing about zeros, dead units or saturation, so no other rule reads it,
and over steps no other rule reads a step at or after the first one that held any.

>>> evidence = StepEvidence(step=0, grad_norms={"a.weight": 0.0, "b.weight": 0.5})
>>> [(c.code, c.subject) for c in judge(evidence)]
[('grad_zero', 'a.weight')]
"""

from __future__ import annotations

import math
import statistics
from typing import Callable, Mapping, NamedTuple, Optional, Sequence

from ..graph.style import ERROR, INFO, WARNING

# Codes of the rules here (checks/diagnosis.py lists every code).
GRAD_NONFINITE = "grad_nonfinite"
NONFINITE_SEEN = "nonfinite_seen"
GRAD_ZERO = "grad_zero"
GRAD_NORM_OUTLIER = "grad_norm_outlier"
GRAD_NORM_SPAN = "grad_norm_span"
GRAD_NORM_TREND = "grad_norm_trend"
DEAD_UNITS = "dead_units"
SATURATED = "saturated"
UPDATE_RATIO = "update_ratio"
GRAD_MISSING = "grad_missing"
UNUSED_PARAMETER = "unused_parameter"
FROZEN_PARAMETER = "frozen_parameter"

# A gradient norm this many powers of ten away from the median of its peers is flagged;
# the gradient of a layer this many below a layer nearer the output (or above) vanishes (explodes).
DEFAULT_DECADES = 3.0
# Fewer peers than this with a finite, non-zero gradient give no median to trust.
MIN_PEERS = 3
DEAD_ZERO_FRACTION = 0.95  # outputs this much zero: the units have died
SATURATED_FRACTION = 0.9  # tanh/sigmoid outputs this much at their bounds: saturated
UPDATE_RATIO_RANGE = (1e-5, 1e-1)  # the usual range of ‖Δw‖/‖w‖ per step, around 1e-3
# A weight's step per unit of its gradient (‖Δw‖/‖g‖: SGD's learning rate; Adam's is larger)
# below this, with a ratio below the range, is a learning rate too small to learn with.
MIN_STEP_PER_GRADIENT = 1e-4
# A gradient this small beside its weight (‖g‖/‖w‖) moves no float32 weight at any usual
# learning rate: a step of zero is then the gradient's doing, not the learning rate's.
VANISHED = 1e-6

# Where a non-finite value can be seen, in the order a step makes them.
NONFINITE_PLACES = ("output", "output_gradient", "parameter", "gradient")


class StepEvidence(NamedTuple):
    """What one step showed, as plain numbers.

    ``grad_norms``: each trainable parameter with a gradient, its norm (NaN when the
    gradient holds NaN or Inf). ``layers``: modules holding parameters, in the order the
    forward runs them, each with its parameters' names. ``peers``: each parameter's
    role, the name alike parameters share (``h.*.attn.weight``); parameters with no role
    of at least :data:`MIN_PEERS` members are peers of each other. ``owners``: each
    parameter's module as a message names it (``fc (Linear)``). ``rounding``: how many
    decades below its peers a parameter's gradient is rounding alone. ``outputs``: each
    module call's output statistics (``activation_zero_fraction``, ``activation_abs_max``,
    ``activation_saturated_fraction``...). ``update_ratios``: ‖Δw‖/‖w‖ of each weight (two
    or more dimensions) where the weight was not zero, and ``param_norms`` ‖w‖. ``nonfinite``: where NaN or Inf was
    seen (one of :data:`NONFINITE_PLACES`), the keys in the order made; ``counts``: a
    gradient's NaN/Inf elements and its size, where known. ``trainable``: the parameters
    that require grad, ``ran``: the modules whose forward ran, ``held_frozen``: the
    parameters an optimizer holds that require no grad (where known: over steps), and
    ``sizes``: each parameter's count of elements (where known), by which layers'
    gradients are compared per element.
    """

    step: int = 0
    grad_norms: Mapping[str, float] = {}
    layers: Sequence[tuple[str, Sequence[str]]] = ()
    peers: Mapping[str, str] = {}
    owners: Mapping[str, str] = {}
    rounding: Mapping[str, float] = {}
    outputs: Mapping[str, Mapping[str, float]] = {}
    update_ratios: Mapping[str, float] = {}
    param_norms: Mapping[str, float] = {}
    nonfinite: Mapping[str, Sequence[str]] = {}
    counts: Mapping[str, tuple[int, int]] = {}
    trainable: Sequence[str] = ()
    ran: frozenset[str] = frozenset()
    held_frozen: Sequence[str] = ()
    sizes: Mapping[str, int] = {}


class Condition(NamedTuple):
    """What holds at one step: ``code`` and ``severity`` of the finding it makes, ``subject``
    (a parameter, a module call), ``layer`` (the module it is about), ``text`` (what holds,
    in words, without when), ``advice`` (what to do), ``points_at``: the parameters and
    module calls whose graph nodes the finding points at, and ``value``: the number the
    rule judged (a distance in decades, a ratio, a share), for the rules over steps."""

    code: str
    severity: str
    subject: str
    layer: str
    text: str
    advice: str
    points_at: tuple[str, ...] = ()
    value: float = math.nan


def module_of(name: str) -> str:
    """The module path of a parameter name ('' at the top level)."""
    return name.rpartition(".")[0]


# --- the rules ---------------------------------------------------------------------


def nonfinite_values(evidence: StepEvidence, decades: float = DEFAULT_DECADES) -> list[Condition]:
    """NaN or Inf in an output, an output's gradient, a parameter or a gradient: one
    condition per place, its subject the first key made there (each gradient a condition
    of its own, as check() names them). An error: the optimizer would write it into the
    weights. Over steps, watch() makes one finding of the first step that held any
    (``Watcher._nonfinite_finding``), where a description of the op that made it can go."""
    found = []
    for place in NONFINITE_PLACES:
        keys = list(evidence.nonfinite.get(place, ()))
        if place == "gradient":
            for key in keys:
                bad, size = evidence.counts.get(key, (0, 0))
                many = f"{bad} of {size} gradient values are" if size else "its gradient (or its norm) holds"
                found.append(Condition(
                    GRAD_NONFINITE, ERROR, key, module_of(key), f"{key}: {many} NaN or Inf",
                    "an optimizer step would write them into the weights. Look for NaN inputs, log(0), "
                    "division by zero or overflow", (key,)))
        elif keys:
            found.append(Condition(
                NONFINITE_SEEN, ERROR, keys[0], keys[0] if place != "parameter" else module_of(keys[0]),
                f"NaN/Inf {_PLACE_WORDS[place]} {keys[0] or 'model'!r}"
                + (f" (and {len(keys) - 1} more)" if len(keys) > 1 else ""),
                "look at what it computes (a division, log or exp) and at the learning rate before that step",
                (keys[0],)))
    return found


# A norm (of a gradient, of a parameter) is Inf also when its values are finite but past
# 1.8e19, whose squares float32 cannot hold: training has diverged all the same.
_PLACE_WORDS = {
    "output": "in the output of module",
    "output_gradient": "(or a norm past float32's range) in the gradient of the output of module",
    "parameter": "(or a norm past float32's range) in parameter",
    "gradient": "(or a norm past float32's range) in the gradient of parameter",
}


def zero_gradient(evidence: StepEvidence, decades: float = DEFAULT_DECADES) -> list[Condition]:
    """A parameter whose gradient is exactly zero: it will not change."""
    return [
        Condition(
            GRAD_ZERO, WARNING, name, module_of(name),
            f"{name} of {evidence.owners.get(name) or module_of(name) or 'the model'} takes part in the forward but "
            "its gradient is exactly zero",
            "a dead ReLU, a multiplication by zero or a mask before it; it will not change", (name,), 0.0)
        for name, norm in evidence.grad_norms.items() if norm == 0.0
    ]


def _layer_norms(evidence: StepEvidence) -> list[tuple[str, float, tuple[str, ...]]]:
    """(layer, log10 of its gradient's size per element, its parameters), in forward order.

    A layer's size is the largest over its parameters of each gradient's root mean square
    per element (its norm over the square root of its size, where the size is known):
    raw norms grow with a tensor's size, so the 6,000 of an audio model's wide
    subsampling linear put every small layer after it "3 decades below". The largest,
    not a median: the bias of a convolution before a batch norm has a gradient of
    rounding alone, and its layer learns all the same."""
    found = []
    for layer, names in evidence.layers:
        per_element = [
            math.log10(norm) - 0.5 * math.log10(evidence.sizes.get(n, 1) or 1)
            for n in names for norm in (evidence.grad_norms.get(n, math.nan),) if norm > 0 and math.isfinite(norm)
        ]
        if per_element:
            found.append((layer, max(per_element), tuple(names)))
    return found


def gradient_span(evidence: StepEvidence, decades: float = DEFAULT_DECADES) -> list[Condition]:
    """Vanishing or exploding gradients through the layers: one condition for the run of
    layers next to the input whose gradients are all more than ``decades`` powers of ten
    below a layer after them (vanishing), or next to the output, below a layer before them
    (exploding toward the input). A run, not each layer: one cause, one finding.

    Only a run that starts at the first layer (or ends at the last) counts: a block behind
    a small layer scale (ConvNeXt's 1e-6) has small gradients by design, between a stem
    and a head whose gradients are not."""
    layers = _layer_norms(evidence)
    if len(layers) < 2:
        return []
    found = []
    for toward_output in (True, False):
        ordered = layers if toward_output else layers[::-1]
        # The largest norm after each layer (nearer the output when toward_output).
        after = [-math.inf] * len(ordered)
        for i in range(len(ordered) - 2, -1, -1):
            after[i] = max(after[i + 1], ordered[i + 1][1])
        run = 0
        while run < len(ordered) - 1 and ordered[run][1] < after[run] - decades:
            run += 1
        if not run:
            continue
        span = ordered[:run] if toward_output else ordered[:run][::-1]
        smallest = min(span, key=lambda layer: layer[1])
        top = max(ordered[run:], key=lambda layer: layer[1])
        names = tuple(n for layer in span for n in layer[2])
        where = span[0][0] if len(span) == 1 else f"{span[0][0]} to {span[-1][0]}"
        how = "shrinks toward the input" if toward_output else "grows toward the input"
        found.append(Condition(
            GRAD_NORM_SPAN, WARNING, where, span[0][0] if toward_output else span[-1][0],
            f"the gradient {how}: {len(span)} layer{'s' if len(span) > 1 else ''} ({where}) "
            f"{'get' if len(span) > 1 else 'gets'} gradients (root mean square per element) more than {decades:g} powers of ten below "
            f"{top[0] or 'the model'} ({10 ** top[1]:.3g}), down to {10 ** smallest[1]:.3g} in {smallest[0] or 'the model'}",
            "look for a saturating or dying layer between them, or add normalisation or residual paths"
            if toward_output else "lower the initial scale of the layers or the learning rate, or clip gradients",
            names, top[1] - smallest[1]))
    return found


def gradient_outlier(evidence: StepEvidence, decades: float = DEFAULT_DECADES) -> list[Condition]:
    """A gradient norm more than ``decades`` powers of ten below the lower quartile of its
    peers' (the parameters of the same role, or the parameters of no role), or above their
    upper quartile. Quartiles of the others, not the median of all: where a quarter of the
    model is a stem, norms and a head with ordinary gradients and the rest is behind a small
    layer scale (SwiftFormer, whose blocks are no list of alike blocks), the median is the
    blocks', and the stem is no outlier of the model. Parameters of the layers a
    :func:`gradient_span` names are left to it. Below its peers' median by more than
    rounding alone explains is info (:data:`GRAD_ZERO`): the loss does not depend on it."""
    spanned = {n for c in gradient_span(evidence, decades) for n in c.points_at}
    roles: dict[str, list[str]] = {}
    for name in evidence.grad_norms:
        roles.setdefault(evidence.peers.get(name, ""), []).append(name)
    # A role of fewer than MIN_PEERS is still part of repeated blocks: judged by no one else's.
    pool = roles.get("", [])
    groups = [(names, True) for role, names in roles.items() if role and len(names) >= MIN_PEERS] + [(pool, False)]
    found = []
    for names, alike in groups:
        # The layers of a span are neither judged nor peers: their norms would drag the quartiles.
        logs = {n: math.log10(evidence.grad_norms[n]) for n in names
                if evidence.grad_norms[n] > 0 and math.isfinite(evidence.grad_norms[n]) and n not in spanned}
        if len(logs) < MIN_PEERS:
            continue
        ordered = sorted(logs.values())
        median = statistics.median(ordered)
        for name, log in logs.items():
            others = list(ordered)
            others.remove(log)
            low, high = _quartiles(others)
            if low - decades <= log <= high + decades:
                continue
            norm = evidence.grad_norms[name]
            peers = f"{len(logs) - 1} {'alike ' if alike else ''}parameters"
            if log < low and median - log > evidence.rounding.get(name, math.inf):
                found.append(Condition(
                    GRAD_ZERO, INFO, name, module_of(name),
                    f"{name}: gradient norm {norm:.2e} is {median - log:.1f} decades below the median of {peers} "
                    f"({10 ** median:.2e}), too far for anything but rounding",
                    "the loss does not depend on it (as with the key bias of an attention, which shifts every score "
                    "of a softmax alike, or a bias that a batch norm after it takes away)", (name,), log - median))
                continue
            above = log > high
            found.append(Condition(
                GRAD_NORM_OUTLIER, WARNING, name, module_of(name),
                f"{name}: gradient norm {norm:.2e} is {abs(log - (high if above else low)):.1f} decades "
                f"{'above the upper' if above else 'below the lower'} quartile of {peers} ({10 ** (high if above else low):.2e})",
                "exploding: clip gradients or lower the learning rate" if above else "vanishing",
                (name,), log - median))
    return found


def _quartiles(values: Sequence[float]) -> tuple[float, float]:
    """The lower and upper quartile of sorted ``values`` (linear between the nearest two)."""
    def at(share: float) -> float:
        place = share * (len(values) - 1)
        below = int(place)
        above = min(below + 1, len(values) - 1)
        return values[below] + (values[above] - values[below]) * (place - below)

    return at(0.25), at(0.75)


def _shares_at_least(evidence: StepEvidence, statistic: str, least: float) -> list[tuple[str, float, Mapping[str, float]]]:
    """(call, share, its statistics) of each module call whose output is finite and whose
    ``statistic`` (a share of its outputs) is ``least`` or more: a NaN output's share of
    zeros or of values at a bound says nothing."""
    return [
        (call, share, values)
        for call, values in evidence.outputs.items()
        for share in (values.get(statistic),)
        if share is not None and math.isfinite(share) and _finite_output(values) and share >= least
    ]


def dead_units(evidence: StepEvidence, decades: float = DEFAULT_DECADES) -> list[Condition]:
    """A module call whose finite output is :data:`DEAD_ZERO_FRACTION` zero or more."""
    found = []
    for call, zero, values in _shares_at_least(evidence, "activation_zero_fraction", DEAD_ZERO_FRACTION):
        units = values.get("activation_dead_fraction")
        unit_text = f", {units:.0%} of its units zero for every input" if units is not None and math.isfinite(units) else ""
        found.append(Condition(
            DEAD_UNITS, WARNING, call, call, f"{call or 'model'}: {zero:.0%} of its outputs are zero{unit_text}",
            "its units have died and pass no gradient; look at the bias and initialisation of the layer before it, "
            "or lower the learning rate", (call,), zero))
    return found


def saturated(evidence: StepEvidence, decades: float = DEFAULT_DECADES) -> list[Condition]:
    """A tanh/sigmoid module call whose finite outputs sit :data:`SATURATED_FRACTION` at their bounds or more."""
    return [
        Condition(
            SATURATED, WARNING, call, call, f"{call}: {share:.0%} of its outputs sit at their bounds",
            "saturated units pass almost no gradient; scale down the inputs to it (a normalisation before it, "
            "a smaller initialisation)", (call,), share)
        for call, share, _ in _shares_at_least(evidence, "activation_saturated_fraction", SATURATED_FRACTION)
    ]


def update_ratio(evidence: StepEvidence, decades: float = DEFAULT_DECADES) -> list[Condition]:
    """A weight whose step changed it by a share of its norm outside :data:`UPDATE_RATIO_RANGE`
    (a weight with a gradient that did not move counts: its learning rate is zero, or the
    optimizer does not hold it). Weights only: biases and norms' scales start at 0 or 1."""
    low, high = UPDATE_RATIO_RANGE
    found = []
    for name, ratio in evidence.update_ratios.items():
        if not math.isfinite(ratio) or low <= ratio <= high:
            continue
        grad = evidence.grad_norms.get(name)
        if ratio < low:
            if not grad or not math.isfinite(grad):
                continue  # no gradient, no step: the rules of gradients say why
            # A small step from a small gradient is the gradient's doing (vanishing, saturated,
            # or a loss learnt), said by those rules; the learning rate's is a small step per
            # unit of gradient (‖Δw‖/‖g‖, SGD's learning rate): below MIN_STEP_PER_GRADIENT.
            weight = evidence.param_norms.get(name)
            if weight and (ratio * weight / grad >= MIN_STEP_PER_GRADIENT or grad / weight < VANISHED):
                continue
        what = "barely changes: raise its learning rate" if ratio < low else "changes too fast to settle: lower its learning rate"
        found.append(Condition(
            UPDATE_RATIO, WARNING, name, module_of(name),
            f"{module_of(name) or 'model'}: {name} changes by {ratio:.2g} of its norm per step, outside the usual "
            f"{low:g}..{high:g} (about 1e-3)", f"it {what}", (name,), ratio))
    return found


def no_gradient(evidence: StepEvidence, decades: float = DEFAULT_DECADES) -> list[Condition]:
    """Trainable parameters that got no gradient at all, one condition per module: its
    module ran (a ``detach()``, ``torch.no_grad()`` or an integer result cut its path to
    the loss), or never ran (an unused module). Judged where the modules that ran are
    known (over steps); check() tells the same from the graph it walks."""
    if not evidence.ran:
        return []
    missing: dict[str, list[str]] = {}
    for name in evidence.trainable:
        if name not in evidence.grad_norms:
            missing.setdefault(module_of(name), []).append(name)
    found = []
    for module, names in missing.items():
        owner = evidence.owners.get(names[0]) or module or "the model"
        listed = _listed(names)
        if module in evidence.ran:
            found.append(Condition(
                GRAD_MISSING, WARNING, names[0], module,
                f"{listed} of {owner} got no gradient though {owner} ran",
                "something between it and the loss cuts the gradient (a detach(), torch.no_grad(), an integer result); "
                "remove the cut if it should learn", tuple(names)))
        else:
            found.append(Condition(
                UNUSED_PARAMETER, WARNING, names[0], module,
                f"{listed} of {owner} got no gradient: {owner} never ran",
                "use it in the loss, or leave it out of the model and the optimizer", tuple(names)))
    return found


def frozen_parameter(evidence: StepEvidence, decades: float = DEFAULT_DECADES) -> list[Condition]:
    """Parameters the optimizer holds that require no grad, one condition per module: frozen,
    but handed to the optimizer to train, which looks like a mistake (a
    ``requires_grad_(False)`` left over from fine-tuning another part)."""
    frozen: dict[str, list[str]] = {}
    for name in evidence.held_frozen:
        frozen.setdefault(module_of(name), []).append(name)
    return [
        Condition(
            FROZEN_PARAMETER, WARNING, names[0], module,
            f"{_listed(names)} of {evidence.owners.get(names[0]) or module or 'the model'} "
            f"{'are' if len(names) > 1 else 'is'} frozen (requires_grad=False) but the optimizer holds "
            f"{'them' if len(names) > 1 else 'it'}",
            "it will not train; set requires_grad=True if it should, or leave it out of the optimizer", tuple(names))
        for module, names in frozen.items()
    ]


def _listed(names: Sequence[str], most: int = 6) -> str:
    """``a``, ``a and b``, ``a, b and c``; past ``most``, ``... and N more``."""
    if len(names) > most:
        return f"{', '.join(names[:most])} and {len(names) - most} more"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _finite_output(values: Mapping[str, float]) -> bool:
    largest = values.get("activation_abs_max")
    return largest is None or math.isfinite(largest)


Rule = Callable[[StepEvidence, float], list[Condition]]

# Every rule judged on one step, in the order its findings are listed.
RULES: tuple[Rule, ...] = (
    nonfinite_values, zero_gradient, no_gradient, frozen_parameter, gradient_span, gradient_outlier,
    dead_units, saturated, update_ratio,
)


def judge(evidence: StepEvidence, decades: float = DEFAULT_DECADES) -> list[Condition]:
    """Every condition of :data:`RULES` that holds at one step."""
    return [condition for rule in RULES for condition in rule(evidence, decades)]


# --- over steps --------------------------------------------------------------------

# Rules over steps whose condition counts when it holds at most of the steps judged (a
# median), not at the last: a step's change is noisy.
MOST_STEPS = frozenset({UPDATE_RATIO})


class Held(NamedTuple):
    """A condition over steps: its last one, the step its run began and the step before that
    run (None when it held from the first step judged), the first and last steps judged,
    and how many of them it held at."""

    condition: Condition
    since: int
    before: Optional[int]
    first: int
    last: int
    times: int


def over_steps(judged: Sequence[tuple[int, Sequence[Condition]]]) -> list[Held]:
    """The conditions of ``judged`` ((step, conditions) in step order, none non-finite) that
    hold over steps: at the last step, since the step their run began; or, for
    :data:`MOST_STEPS`, at more than half the steps, since the first."""
    if not judged:
        return []
    steps = [step for step, _ in judged]
    held_at: dict[tuple[str, str], list[int]] = {}
    last_condition: dict[tuple[str, str], Condition] = {}
    for index, (_, conditions) in enumerate(judged):
        for condition in conditions:
            key = (condition.code, condition.subject)
            held_at.setdefault(key, []).append(index)
            last_condition[key] = condition
    found = []
    for key, indices in held_at.items():
        if key[0] in MOST_STEPS:
            if 2 * len(indices) <= len(steps):
                continue
            since_index = indices[0]
        else:
            if indices[-1] != len(steps) - 1:
                continue
            since_index = indices[-1]
            while since_index - 1 in indices:
                since_index -= 1
        before = steps[since_index - 1] if since_index > 0 else None
        found.append(Held(last_condition[key], steps[since_index], before, steps[0], steps[-1], len(indices)))
    return found


def gradient_trend(series: Mapping[str, Sequence[tuple[int, float]]], decades: float = DEFAULT_DECADES) -> list[Condition]:
    """Over steps: a parameter's gradient norm that grew by more than ``decades`` powers of
    ten from its first logged value to its last (exploding). One condition per module, its
    parameter of largest growth. ``series``: each parameter's (step, norm), finite and
    non-zero, in order.

    A gradient that shrinks is no finding of its own: every gradient shrinks as the loss
    is learnt (a net that fits its data ends with gradients 1e-4 of its first), and one
    that stops for a cause is named by that cause (a zero gradient, dead or saturated units).
    """
    worst: dict[str, Condition] = {}
    for name, points in series.items():
        if len(points) < 2:
            continue
        (first_step, first), (last_step, last) = points[0], points[-1]
        change = math.log10(last / first)
        if change <= decades:
            continue
        module = module_of(name)
        if module in worst and worst[module].value >= change:
            continue
        worst[module] = Condition(
            GRAD_NORM_TREND, WARNING, name, module,
            f"{module or 'model'}: the gradient norm of {name} grew by {change:.1f} powers of ten, from "
            f"{first:.3g} at step {first_step} to {last:.3g} at step {last_step}",
            "lower the learning rate or clip gradients", (name,), change)
    return list(worst.values())


__all__ = [
    "Condition",
    "DEAD_UNITS",
    "DEAD_ZERO_FRACTION",
    "FROZEN_PARAMETER",
    "GRAD_MISSING",
    "GRAD_NONFINITE",
    "GRAD_NORM_OUTLIER",
    "GRAD_NORM_SPAN",
    "GRAD_NORM_TREND",
    "GRAD_ZERO",
    "MOST_STEPS",
    "NONFINITE_SEEN",
    "SATURATED",
    "UNUSED_PARAMETER",
    "UPDATE_RATIO",
    "DEFAULT_DECADES",
    "Held",
    "MIN_PEERS",
    "NONFINITE_PLACES",
    "RULES",
    "SATURATED_FRACTION",
    "StepEvidence",
    "UPDATE_RATIO_RANGE",
    "dead_units",
    "frozen_parameter",
    "gradient_outlier",
    "gradient_span",
    "gradient_trend",
    "judge",
    "module_of",
    "no_gradient",
    "nonfinite_values",
    "over_steps",
    "saturated",
    "update_ratio",
    "zero_gradient",
]
