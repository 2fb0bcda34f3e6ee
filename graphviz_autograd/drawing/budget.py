"""Draw within a layout budget: Graphviz ``dot`` for as long as the budget allows,
then the fixed layered layout.

:func:`graphviz_autograd.drawing.layout.choose_layout` decides from an estimate, and an
estimate can be wrong by far (a 20,000-op chain guessed at 96 s ran past 400 s).
Here the budget is held by the clock instead: ``dot`` runs with what is left of
the budget as its timeout, and when it runs past it is stopped and the graph is
drawn again by ``neato -n2`` from positions we compute, which takes seconds at
any size.

>>> from graphviz_autograd.drawing.budget import fallback_note
>>> fallback_note(10)[:45]
'Graphviz dot did not finish within the layout'
"""

from __future__ import annotations

import time
from typing import Callable, NamedTuple, Optional

from ..errors import LayoutTimeoutError
from .rendering import DEFAULT_TIMEOUT, check_timeout, run_dot


class Drawn(NamedTuple):
    """What Graphviz drew, the program that drew it, and a note for the user ('' if none)."""

    data: bytes
    engine: str
    note: str


def fallback_note(budget: float) -> str:
    """The line said when ``dot`` ran out of budget and the fixed layout was drawn instead."""
    return (
        f"Graphviz dot did not finish within the layout budget of {budget:g} s and was stopped; "
        "drawn with the fixed layered layout instead (layout='dot' to wait for dot, depth=N for a summary)."
    )


def draw_within_budget(
    source: str,
    fmt: str,
    *,
    engine: str,
    budget: float,
    fixed_source: Optional[Callable[[], str]],
    timeout: Optional[float] = DEFAULT_TIMEOUT,
) -> Drawn:
    """Draw DOT ``source`` as ``fmt`` with ``engine``; stop ``dot`` after ``budget`` seconds.

    ``fixed_source`` gives the same graph pinned by the fixed layout (it is only
    called when needed); when it is None, or ``engine`` is not ``dot``, the source
    is drawn as it is with ``timeout`` alone. ``timeout`` still bounds the whole
    drawing: when it is the shorter of the two, running past it is an error, as
    without a budget.
    """
    timeout = check_timeout(timeout)
    if fixed_source is None or engine != "dot" or (timeout is not None and timeout <= budget):
        return Drawn(run_dot(source, fmt, timeout=timeout, engine=engine), engine, "")
    started = time.monotonic()
    try:
        return Drawn(run_dot(source, fmt, timeout=budget, engine="dot"), "dot", "")
    except LayoutTimeoutError:
        pass
    pinned = fixed_source()
    left = None if timeout is None else max(timeout - (time.monotonic() - started), 1.0)
    return Drawn(run_dot(pinned, fmt, timeout=left, engine="neato"), "neato", fallback_note(budget))
