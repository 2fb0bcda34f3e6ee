"""Values drawn over a graph: one kind of thing for every overlay.

An :class:`Overlay` is a number per node of the walked graph (the severity of what
``check`` found there, a parameter's gradient norm, the bytes an op saved for
backward, a measured time, a diff's state, ...), how those numbers roll up onto a module
(``sum``, ``max``, or ``union``: their bits or-ed) and how they are coloured (``log``: a
fill per power of ten; ``severity``: a border per severity; ``diff``: added, removed
and changed in colours of their own, see :mod:`graphviz_autograd.views.diffing`). Both renderers read the same overlays: the DOT writer colours
nodes and module boxes (:mod:`graphviz_autograd.drawing.overlay_styles`), the
explorer lists them in its colour menu and rolls them up per level. A new overlay is
one function that returns an ``Overlay``; neither renderer changes.

Plain data, no torch: an overlay holds numbers and words, never a tensor.

>>> sizes = Overlay("saved_bytes", "saved for backward", {"n1": 400.0, "n2": 100.0}, rollup="sum", unit="B")
>>> sizes.rolled_onto({"n1": "n0", "n2": "n0", "n3": "n3"}).values
{'n0': 500.0}
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Optional, Sequence

from ..errors import OptionError, check_choice
from ..graph.autograd_graph import FAILED, OP, SAVED, SAVED_BY, SAVED_TENSOR_OF, AutogradGraph, dtype_itemsize
from ..graph.descriptions import format_bytes, format_seconds
from ..graph.style import ERROR, SEVERITIES

# "union": the bits of the values meeting on a module, or-ed (a diff's states, see views.diffing).
ROLLUPS = ("sum", "max", "union")
# "diff": each value is the bits of a diff's states (views.diffing.state_of reads them).
SCALES = ("log", "severity", "diff")
# What a unit's numbers read as in keys and menus: bytes and seconds, or plain numbers.
UNITS = ("", "B", "s")

KeyItem = tuple[Sequence[str], Mapping[str, str]]


@dataclass(frozen=True)
class Overlay:
    """Numbers per node, and how to roll them up onto modules and colour them.

    ``name`` is the key the explorer's data and menu use, ``title`` the words a key,
    a menu or a tooltip shows. ``values`` maps node ids of the walked graph to
    numbers (NaN and infinities allowed: they are drawn as such). ``tooltips``
    gives a node's line in its tooltip (the default is ``title: value``), and
    ``key`` boxes (text lines, attributes) the static drawing adds to its key as
    they are, for what has no node (an unused parameter's finding). ``nonfinite``
    names NaN/Inf values in a key, and ``domain`` (numbers) sets the range of a ``log``
    scale when it should span more than the values drawn.

    An overlay measured over training ``steps`` also holds each node's ``series``, one
    value per step (None where not measured); ``values`` are then those of one step,
    the one a static drawing shows, and the explorer page chooses the step with a slider.
    """

    name: str
    title: str
    values: Mapping[str, float]
    rollup: str = "sum"
    scale: str = "log"
    unit: str = ""
    tooltips: Mapping[str, str] = field(default_factory=dict)
    key: tuple[KeyItem, ...] = ()
    nonfinite: str = ""
    domain: tuple[float, ...] = ()
    steps: tuple[int, ...] = ()
    series: Mapping[str, tuple[Optional[float], ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise OptionError(f"an overlay's name must be a Python identifier, such as 'backward_time'; got {self.name!r}.")
        for what, value, allowed in (("rollup", self.rollup, ROLLUPS), ("scale", self.scale, SCALES), ("unit", self.unit, UNITS)):
            check_choice(f"overlay {self.name!r}: {what}", value, allowed, ", ".join(map(repr, allowed)))

    def value_text(self, value: float) -> str:
        """``value`` in this overlay's unit: ``'1.5 KiB'``, ``'3.20 ms'``, ``'0.00123'``."""
        return value_text(value, self.unit)

    def rolled_onto(self, origin: Optional[Mapping[str, Optional[str]]]) -> "Overlay":
        """This overlay on another drawing of the same graph: ``origin`` maps each node id
        of the walked graph to the id of the node that stands for it (None: not drawn),
        and the values meeting on one node roll up (``sum`` or ``max``; NaN wins a max).
        ``origin`` None keeps the ids as they are."""
        if origin is None:
            return self
        values: dict[str, float] = {}
        lines: dict[str, list[str]] = {}
        for node_id, value in self.values.items():
            target = origin.get(node_id, node_id)
            if target is None:
                continue
            if target in values:
                values[target] = roll_up(self.rollup, values[target], value)
            else:
                values[target] = value
            line = self.tooltips.get(node_id)
            if line:
                lines.setdefault(target, []).append(line)
        series: dict[str, tuple[Optional[float], ...]] = {}
        for node_id, values_over_steps in self.series.items():
            target = origin.get(node_id, node_id)
            if target is None:
                continue
            now = series.get(target)
            series[target] = values_over_steps if now is None else tuple(
                b if a is None else a if b is None else roll_up(self.rollup, a, b) for a, b in zip(now, values_over_steps)
            )
        return replace(self, values=values, tooltips={k: "\n".join(v) for k, v in lines.items()}, series=series)


def severity_value(severity: str) -> float:
    """The number a ``severity`` overlay holds for ``severity``: larger is worse.

    >>> severity_value("error") > severity_value("warning") > severity_value("info")
    True
    """
    return float(len(SEVERITIES) - 1 - SEVERITIES.index(severity))


def severity_of(value: float) -> str:
    """The severity of a ``severity`` overlay's value (see :func:`severity_value`)."""
    return SEVERITIES[len(SEVERITIES) - 1 - int(value)]


def roll_up(rollup: str, total: float, value: float) -> float:
    """``total`` and ``value`` rolled up: their sum, the larger (NaN is the larger of any two),
    or their bits or-ed (``union``).

    >>> roll_up("sum", 2, 4), roll_up("max", 2, 4), roll_up("union", 2, 4)
    (6, 4, 6.0)
    """
    if rollup == "sum":
        return total + value
    if rollup == "union":
        return float(int(total) | int(value))
    if math.isnan(total) or math.isnan(value):
        return math.nan
    return max(total, value)


def value_text(value: float, unit: str = "") -> str:
    """A number as a key or tooltip shows it.

    >>> value_text(1536, "B"), value_text(0.0032, "s"), value_text(0.000123)
    ('1.5 KiB', '3.2 ms', '0.000123')
    """
    if not math.isfinite(value):
        return str(value)
    if unit == "B":
        return format_bytes(int(round(value)))
    if unit == "s":
        return format_seconds(value)
    return f"{value:.3g}"


def saved_bytes_by_op(graph: AutogradGraph) -> tuple[dict[str, int], dict[str, str], dict[str, int]]:
    """Bytes each op saved for backward, each saved tensor's op, and how many tensors each op's bytes count.

    Counts each saved tensor once, for the first op that saved it, and leaves out
    parameters, buffers and inputs (they exist anyway: ``saved tensor of`` marks them)
    and tensors whose shape or dtype is unknown. Needs a graph walked with
    ``collect_saved=True``; otherwise there is nothing to count.
    """
    sizes: dict[str, int] = {}
    owner: dict[str, str] = {}
    counts: dict[str, int] = {}
    saved = {node.id: node for node in graph.nodes if node.kind == SAVED}
    if not saved:
        return sizes, owner, counts
    for edge in graph.edges:
        if edge[2] == SAVED_BY and edge[1] in saved:
            owner.setdefault(edge[1], edge[0])
    for node_id, node in saved.items():
        op = owner.get(node_id)
        if op is None or node.shape is None or not node.dtype:
            continue
        if any(key == SAVED_TENSOR_OF for key, _ in node.attrs):
            continue
        size = dtype_itemsize(node.dtype)
        if size:
            sizes[op] = sizes.get(op, 0) + math.prod(node.shape) * size
            counts[op] = counts.get(op, 0) + 1
    return sizes, owner, counts


def saved_bytes_overlay(graph: AutogradGraph) -> Overlay:
    """The bytes each op saves for backward, summed over a module (see :func:`saved_bytes_by_op`)."""
    sizes = saved_bytes_by_op(graph)[0]
    return Overlay(
        "saved_bytes", "saved for backward", {op: float(size) for op, size in sizes.items()}, rollup="sum", unit="B"
    )


def overlay_names(overlays: Iterable[Overlay]) -> list[str]:
    """The names of ``overlays``, checked to be distinct."""
    names: list[str] = []
    for overlay in overlays:
        if not isinstance(overlay, Overlay):
            raise OptionError(f"overlays must be Overlay objects; got {type(overlay).__name__}.")
        if overlay.name in names:
            raise OptionError(f"two overlays are named {overlay.name!r}; give each its own name.")
        names.append(overlay.name)
    return names


FAILURE_OVERLAY = "failure"


def failure_overlay(graph: AutogradGraph) -> Optional[Overlay]:
    """The call a forward pass stopped at as an error, rolled onto the module boxes around it
    (so that a summary still shows where the pass failed); None for a graph of a pass that finished.

    The failing call of a walked :class:`~graphviz_autograd.capture.recording.ForwardFailure`
    is its first node, ``n0``: only that node is looked at, so a graph of a million nodes pays nothing.

    >>> from graphviz_autograd.graph.autograd_graph import Node
    >>> failed = AutogradGraph((Node("n0", "op", "F.linear", attrs=(("error", "RuntimeError: bad"),), note="failed"),), ())
    >>> failure_overlay(failed).values, failure_overlay(AutogradGraph((Node("n0", "op", "ExpBackward0"),), ())) is None
    ({'n0': 2.0}, True)
    """
    contents = graph.columns(fill_ids=False)
    if not contents.contents:
        return None
    first = contents.contents[0]
    if first is None or first[0] != OP or first[6] != FAILED:
        return None
    node_id = contents.ids[0] if contents.ids is not None else "n0"
    error = next((value for key, value in first[5] if key == "error"), "")
    return Overlay(
        FAILURE_OVERLAY, "forward pass failed", {node_id: severity_value(ERROR)}, rollup="max", scale="severity",
        tooltips={node_id: f"The forward pass stopped at {first[1]}"
                           f"{' in ' + first[7] if first[7] else ''} (marked red): {error}"},
    )
