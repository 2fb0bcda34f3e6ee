"""Overlays as Graphviz attributes: the static drawing's renderer of
:class:`~graphviz_autograd.views.overlays.Overlay` (the explorer's is its page script).

A ``severity`` overlay draws a thick border in the colour of the worst severity on a
node (errors red, warnings orange) with the messages in its tooltip; a ``log``
overlay fills each node by the power of ten of its value, on the scale of
``style.GRADIENT_NORM_SCALE``, zero and NaN/Inf in colours of their own, with a key of
the steps used, and writes the value beside each filled node (its ``xlabel``: ``1.2 ms
· 14%``, the share of all the values of an overlay that adds up; in black beside a dark
box too, see :func:`~graphviz_autograd.drawing.dot_writer.xlabel_value`), so that the
picture reads without the key. Several overlays merge: later attributes win, tooltips are
joined, keys follow one another.

>>> from graphviz_autograd.views.overlays import Overlay
>>> styles, key = overlay_styles([Overlay("grad_norm", "grad norm", {"n1": 0.5, "n2": 0.0}, rollup="max")])
>>> styles["n2"]["fillcolor"], key[-1][0]
('white', ['grad norm', '4.6e-01 - 6.0e-01', 'grad norm 0'])
"""

from __future__ import annotations

import math
from typing import Iterable, Optional

from ..graph.style import DIFF_STATE_STYLES, DIFF_STATE_WORDS, GRADIENT_NORM_SCALE, GRADIENT_SPECIAL_STYLES, SEVERITY_STYLES
from ..views.diffing import state_of
from ..views.overlays import KeyItem, Overlay, severity_of

NodeStyles = dict[str, dict[str, str]]
# A key item with this attribute is a colour bar, drawn as one small table by the DOT writer:
# its first line the title, then one cell per colour (the value: "fillcolor fontcolor",
# tab-separated, in the order of the lines after the title).
COLOUR_BAR = "colour_bar"


def overlay_styles(overlays: Iterable[Overlay]) -> tuple[NodeStyles, list[KeyItem]]:
    """Per-node attributes and key boxes of ``overlays`` (each keyed by the ids drawn)."""
    styles: NodeStyles = {}
    key: list[KeyItem] = []
    for overlay in overlays:
        if overlay.scale == "diff":
            node_styles, items = _state_styles(overlay)
        else:
            node_styles, items = _severity_styles(overlay) if overlay.scale == "severity" else _log_styles(overlay)
        for node_id, attrs in node_styles.items():
            merged = styles.setdefault(node_id, {})
            tooltip = merged.get("tooltip")
            merged.update(attrs)
            if tooltip and "tooltip" in attrs:
                merged["tooltip"] = tooltip + "\n" + attrs["tooltip"]
        key.extend(items)
        if overlay.scale == "severity":
            key.extend(_severity_key(overlay))
        else:
            key.extend((list(lines), dict(attrs)) for lines, attrs in overlay.key)
    return styles, key


# The border colours of severities: a key item of one line in one of them stands for a severity.
_SEVERITY_COLOURS = frozenset(style["color"] for style in SEVERITY_STYLES.values())


def _severity_key(overlay: Overlay) -> list[KeyItem]:
    """A severity overlay's key as one small table, as a log overlay's is: its title over a
    cell per item (``error: grad nonfinite (1)``) written in the colour of the borders it
    stands for, rather than a bordered box per item. Notes (a list of findings with no node)
    stay boxes of their own, after it.

    >>> from graphviz_autograd.views.overlays import Overlay
    >>> items = _severity_key(Overlay("findings", "findings", {}, scale="severity", key=(
    ...     (["error: grad nonfinite (1)"], {"color": "red", "penwidth": "3"}),
    ...     (["warning: grad zero (2)"], {"color": "orange", "penwidth": "3"}),
    ...     (["not in the graph:", "info: ..."], {"shape": "note"}))))
    >>> items[0]
    (['findings', 'error: grad nonfinite (1)', 'warning: grad zero (2)'], {'colour_bar': 'white red\\twhite orange'})
    >>> items[1][1]["shape"]
    'note'
    """
    cells: list[tuple[str, str]] = []  # (colour, text)
    others: list[KeyItem] = []
    for lines, attrs in overlay.key:
        if len(lines) == 1 and attrs.get("color") in _SEVERITY_COLOURS and "shape" not in attrs:
            cells.append((attrs["color"], lines[0]))
        else:
            others.append((list(lines), dict(attrs)))
    if not cells:
        return others
    bar = {COLOUR_BAR: "\t".join(f"white {colour}" for colour, _ in cells)}
    return [([overlay.title, *(text for _, text in cells)], bar), *others]


def _severity_styles(overlay: Overlay) -> tuple[NodeStyles, list[KeyItem]]:
    styles: NodeStyles = {}
    for node_id, value in overlay.values.items():
        severity = severity_of(value)
        if severity not in SEVERITY_STYLES:
            continue
        styles[node_id] = dict(SEVERITY_STYLES[severity])
        tooltip = overlay.tooltips.get(node_id)
        if tooltip:
            styles[node_id]["tooltip"] = tooltip
    return styles, []  # the counts per finding code come with the overlay's own key


def _state_styles(overlay: Overlay) -> tuple[NodeStyles, list[KeyItem]]:
    """A diff's states: added, removed (dashed) and changed nodes and boxes in their colours,
    what changed in the tooltip; unchanged ones as they are."""
    styles: NodeStyles = {}
    used: set[str] = set()
    for node_id, value in overlay.values.items():
        state = state_of(value)
        if state not in DIFF_STATE_STYLES:
            continue
        used.add(state)
        styles[node_id] = dict(DIFF_STATE_STYLES[state], tooltip=overlay.tooltips.get(node_id) or state)
    key: list[KeyItem] = [([DIFF_STATE_WORDS[state]], dict(DIFF_STATE_STYLES[state])) for state in DIFF_STATE_STYLES if state in used]
    return styles, key


def _log_styles(overlay: Overlay) -> tuple[NodeStyles, list[KeyItem]]:
    values = overlay.values
    low, high = _log_domain(overlay)
    steps = len(GRADIENT_NORM_SCALE)
    styles: NodeStyles = {}
    used_steps: set[int] = set()
    used_special: set[str] = set()
    # Values that add up (time, bytes) are each a share of their sum: the drawn nodes and
    # boxes hold every value once, rolled up.
    finite = [v for v in values.values() if math.isfinite(v) and v > 0]
    total = sum(finite) if overlay.rollup == "sum" and len(finite) > 1 else 0.0
    for node_id, value in values.items():
        if math.isnan(value) or math.isinf(value):
            style, special = GRADIENT_SPECIAL_STYLES["nonfinite"], "nonfinite"
        elif value <= 0:
            style, special = GRADIENT_SPECIAL_STYLES["zero"], "zero"
        else:
            step = min(steps - 1, max(0, int((math.log10(value) - low) / (high - low) * steps)))
            style, special = GRADIENT_NORM_SCALE[step], None
            used_steps.add(step)
        if special:
            used_special.add(special)
        tooltip = overlay.tooltips.get(node_id) or f"{overlay.title}: {overlay.value_text(value)}"
        styles[node_id] = dict(style, tooltip=tooltip, xlabel=_value_label(value, total, overlay))
    # The key: one compact bar, a swatch per step used over the range it stands for (and
    # zero and NaN/Inf), under the overlay's title, rather than a box per step.
    cells: list[tuple[str, str, str]] = []  # (fillcolor, fontcolor, text)
    for step in sorted(used_steps):
        lo = 10 ** (low + (high - low) * step / steps)
        hi = 10 ** (low + (high - low) * (step + 1) / steps)
        style = GRADIENT_NORM_SCALE[step]
        cells.append((style["fillcolor"], style.get("fontcolor", "black"), f"{_key_number(lo, overlay)} - {_key_number(hi, overlay)}"))
    if "zero" in used_special:
        cells.append((GRADIENT_SPECIAL_STYLES["zero"]["fillcolor"], "black", f"{overlay.title} 0"))
    if "nonfinite" in used_special:
        style = GRADIENT_SPECIAL_STYLES["nonfinite"]
        cells.append((style["fillcolor"], style.get("fontcolor", "black"), overlay.nonfinite or f"{overlay.title} NaN/Inf"))
    if not cells:
        return styles, []
    bar = {COLOUR_BAR: "\t".join(f"{fill} {font}" for fill, font, _ in cells)}
    return styles, [([overlay.title, *(text for _, _, text in cells)], bar)]


def _value_label(value: float, total: float, overlay: Overlay) -> str:
    """The text written beside a filled node: its value, and its share of ``total`` when one is given.

    >>> _value_label(0.0012, 0.0048, Overlay("backward_time", "backward time", {}, unit="s"))
    '1.2 ms · 25%'
    """
    text = overlay.value_text(value)
    if total and math.isfinite(value) and value > 0:
        text += f" \u00b7 {value / total:.0%}"
    return text


def _log_domain(overlay: Overlay) -> tuple[int, int]:
    """Whole powers of ten around the overlay's positive finite values (its ``domain`` when given)."""
    finite = [v for v in (overlay.domain or overlay.values.values()) if v > 0 and math.isfinite(v)]
    low = math.floor(math.log10(min(finite))) if finite else 0
    high = math.ceil(math.log10(max(finite))) if finite else 1
    return low, max(high, low + 1)


def _key_number(value: float, overlay: Overlay) -> Optional[str]:
    return f"{value:.1e}" if not overlay.unit else overlay.value_text(value)
