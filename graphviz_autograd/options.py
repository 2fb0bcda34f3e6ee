"""What a drawing may ask for, checked once and carried as one frozen object.

``make_dot``, ``render`` and ``to_dot`` keep their keyword arguments; each builds a
:class:`DrawOptions` once, and every layer below (the DOT writer, the layouts)
reads the fields it needs from that one object instead of taking them one by one.

>>> options = DrawOptions(show_saved=True, direction="LR")
>>> options.collect_saved, options.replace(direction="TB").direction
(True, 'TB')
>>> DrawOptions(direction="up")
Traceback (most recent call last):
...
graphviz_autograd.errors.OptionError: direction must be one of TB, LR, BT, RL; got 'up'.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional, Union, cast

from .errors import OptionError, check_choice
from .graph.style import DIRECTIONS, Theme, resolve_theme

LAYOUTS = ("auto", "dot", "fixed")
# depth: the largest drawing that fits a page (the default), or every node.
FIT: Literal["fit"] = "fit"
FULL: Literal["full"] = "full"
DepthOption = Union[int, Literal["fit", "full"], None]
LayoutName = Literal["auto", "dot", "fixed"]
# Seconds of `dot` layout we are willing to wait for before drawing the fixed layout.
DEFAULT_LAYOUT_BUDGET = 10.0
# The most nodes an explorer page's expanded view (a level with every module inside it
# opened) may draw: dot lays out about this many with their module boxes in a second or two.
DEFAULT_EXPAND_LIMIT = 1500


def check_depth(depth: object) -> int:
    """``depth`` if it is a non-negative int; OptionError otherwise."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise OptionError(f"depth must be a non-negative integer (0 = one box per top-level module); got {depth!r}.")
    return depth


def check_depth_option(depth: object) -> DepthOption:
    """``depth`` if it is a whole number of 0 or more, ``"fit"``, ``"full"`` or None; OptionError otherwise.

    >>> check_depth_option("full"), check_depth_option(2)
    ('full', 2)
    """
    if depth is None or depth in (FIT, FULL):
        return depth
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise OptionError(
            f"depth must be a whole number of 0 or more (0 = one box per top-level module), 'fit' (the "
            f"largest drawing that fits a page, the default) or 'full' (every node); got {depth!r}."
        )
    return check_depth(depth)


def check_layout(layout: str) -> LayoutName:
    """``layout`` if it is one of :data:`LAYOUTS`; OptionError otherwise."""
    check_choice("layout", layout, LAYOUTS)
    return cast(LayoutName, layout)


@dataclass(frozen=True)
class DrawOptions:
    """Every option of a picture or an explorer page, as ``make_dot`` documents them;
    each field is checked when the object is made, and the defaults are here alone.

    It holds how to draw, and nothing derived from a graph (how close a tall graph's
    ranks are set is the prepared view's to decide). What is drawn comes beside it:
    the outputs or a walked graph, ``params`` and ``recorder`` (what the capture
    reads), and overlays (``diagnose``, ``grad_colors``, a measured profile), which
    are data, not options.

    ``layout`` and ``layout_budget`` choose how the graph is laid out, ``depth`` and
    ``fold_repeated`` how far a recorded graph is collapsed before it is drawn
    (``depth="fit"``: as far as it takes to fit a page; ``"full"`` or None: not at
    all; see :func:`graphviz_autograd.views.page_fit.fit_to_page`). ``junctions``
    draws an output read by many ops far below as one trunk with a branch to each
    (see :mod:`graphviz_autograd.views.junctions`). ``expand_limit`` is the explorer
    page's: the most nodes its view of a level with every module opened may draw.
    """

    show_attrs: bool = False
    show_saved: bool = False
    max_attr_chars: int = 50
    direction: str = "TB"
    show_no_grad: bool = True
    show_device: bool = False
    theme: Optional[Theme] = None
    legend: bool = False
    clusters: bool = True
    show_shapes: bool = False
    split_shared: bool = True
    depth: DepthOption = FIT
    fold_repeated: bool = True
    layout: str = "dot"
    layout_budget: float = DEFAULT_LAYOUT_BUDGET
    junctions: bool = True
    expand_limit: int = DEFAULT_EXPAND_LIMIT

    def __post_init__(self) -> None:
        for name, check in _CHECKS.items():
            check(name, getattr(self, name))

    @property
    def collect_saved(self) -> bool:
        """Whether the walk must read what ops saved for backward."""
        return self.show_attrs or self.show_saved

    def replace(self, **changes: Any) -> "DrawOptions":
        """A copy with ``changes``, checked as a new one is; an unknown name is an OptionError."""
        return draw_options(self, **changes)


def _boolean(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise OptionError(f"{name} must be True or False; got {value!r}.")


def _positive_whole(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise OptionError(f"{name} must be a positive integer; got {value!r}.")


def _seconds(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise OptionError(f"{name} must be a positive number of seconds; got {value!r}.")


def _nodes(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise OptionError(f"{name} must be a whole number of nodes, 0 or more (0: no expanded views); got {value!r}.")


# One check per field, in the order of the fields.
_CHECKS: dict[str, Callable[[str, Any], object]] = {
    "show_attrs": _boolean,
    "show_saved": _boolean,
    "max_attr_chars": _positive_whole,
    "direction": lambda name, value: check_choice(name, value, DIRECTIONS),
    "show_no_grad": _boolean,
    "show_device": _boolean,
    "theme": lambda name, value: resolve_theme(value),  # a bad theme fails here, before any graph is walked
    "legend": _boolean,
    "clusters": _boolean,
    "show_shapes": _boolean,
    "split_shared": _boolean,
    "depth": lambda name, value: check_depth_option(value),
    "fold_repeated": _boolean,
    "layout": lambda name, value: check_layout(value),
    "layout_budget": _seconds,
    "junctions": _boolean,
    "expand_limit": _nodes,
}


def draw_options(options: Optional[DrawOptions] = None, **changes: Any) -> DrawOptions:
    """``options`` (the defaults when None) with ``changes``; an unknown name is an OptionError.

    >>> draw_options(legend=True).legend
    True
    >>> draw_options(colour="red")
    Traceback (most recent call last):
    ...
    graphviz_autograd.errors.OptionError: unknown drawing option 'colour'; the options are: show_attrs, show_saved, max_attr_chars, direction, show_no_grad, show_device, theme, legend, clusters, show_shapes, split_shared, depth, fold_repeated, layout, layout_budget, junctions, expand_limit.
    """
    base = options if options is not None else _DEFAULTS
    if not changes:
        return base
    for name in changes:
        if name not in _FIELD_NAMES:
            raise OptionError(f"unknown drawing option {name!r}; the options are: {', '.join(_FIELD_NAMES)}.")
    return dataclasses.replace(base, **changes)


_FIELD_NAMES = tuple(field.name for field in dataclasses.fields(DrawOptions))
_DEFAULTS = DrawOptions()
