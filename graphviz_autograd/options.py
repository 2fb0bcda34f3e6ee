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
from typing import Any, Literal, Optional, Union, cast

from .errors import OptionError
from .graph.style import Theme, check_direction, resolve_theme

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
    if layout not in LAYOUTS:
        raise OptionError(f"layout must be one of {', '.join(LAYOUTS)}; got {layout!r}.")
    return cast(LayoutName, layout)


@dataclass(frozen=True)
class DrawOptions:
    """Every option of a drawing, as ``make_dot`` documents them; checked when made.

    ``layout`` and ``layout_budget`` choose how the graph is laid out (read by
    ``make_dot``/``render``; the DOT writer ignores them), ``depth`` and
    ``fold_repeated`` how far a recorded graph is collapsed before it is drawn
    (``depth="fit"``: as far as it takes to fit a page; ``"full"`` or None: not at
    all; see :func:`graphviz_autograd.views.page_fit.fit_to_page`). ``compact`` sets the
    ranks closer together (Graphviz's ``ranksep``), as is done for a graph too
    long for a page.
    ``junctions`` draws an output read by many ops far below as one trunk with a
    branch to each (see :mod:`graphviz_autograd.views.junctions`); False draws each read
    as its own edge.
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
    compact: bool = False
    junctions: bool = True

    def __post_init__(self) -> None:
        chars = self.max_attr_chars
        if isinstance(chars, bool) or not isinstance(chars, int) or chars < 1:
            raise OptionError(f"max_attr_chars must be a positive integer; got {chars!r}.")
        for name in ("clusters", "show_shapes", "fold_repeated", "compact", "junctions"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise OptionError(f"{name} must be True or False; got {value!r}.")
        check_direction(self.direction)
        check_layout(self.layout)
        check_depth_option(self.depth)
        budget = self.layout_budget
        if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget > 0:
            raise OptionError(f"layout_budget must be a positive number of seconds; got {budget!r}.")
        resolve_theme(self.theme)  # a bad theme fails here, before any graph is walked

    @property
    def collect_saved(self) -> bool:
        """Whether the walk must read what ops saved for backward."""
        return self.show_attrs or self.show_saved

    def replace(self, **changes: Any) -> "DrawOptions":
        """A copy with ``changes``, checked as a new one is."""
        return dataclasses.replace(self, **changes)


def draw_options(options: Optional[DrawOptions] = None, **changes: Any) -> DrawOptions:
    """``options`` (the defaults when None) with ``changes``; an unknown name is an OptionError.

    >>> draw_options(legend=True).legend
    True
    >>> draw_options(colour="red")
    Traceback (most recent call last):
    ...
    graphviz_autograd.errors.OptionError: unknown drawing option 'colour'; the options are: show_attrs, show_saved, max_attr_chars, direction, show_no_grad, show_device, theme, legend, clusters, show_shapes, split_shared, depth, fold_repeated, layout, layout_budget, compact, junctions.
    """
    base = options if options is not None else _DEFAULTS
    if not changes:
        return base
    known = _FIELD_NAMES
    for name in changes:
        if name not in known:
            raise OptionError(f"unknown drawing option {name!r}; the options are: {', '.join(known)}.")
    return dataclasses.replace(base, **changes)


_FIELD_NAMES = tuple(field.name for field in dataclasses.fields(DrawOptions))
_DEFAULTS = DrawOptions()
