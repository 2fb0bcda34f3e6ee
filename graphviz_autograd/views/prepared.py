"""The one prepared view: everything that decides what a picture shows, decided once.

:func:`prepare` takes a walked graph, the options and the overlays, and returns the
:class:`View` that ``make_dot``, ``render``, ``to_dot``, the command line, the
notebook display, the pytest plugin's drawings and the explorer all start from:

1. page fit and depth: runs of identical blocks folded, the graph collapsed to a
   module summary when ``depth`` asks or a page needs it, with a note saying so
   (:func:`~graphviz_autograd.views.page_fit.fit_to_page`);
2. the graph as drawn: a parameter used many times split per use, hidden kinds left
   out (:func:`~graphviz_autograd.views.page_fit.as_drawn`);
3. the layout: Graphviz ``dot`` or the fixed layered layout, and why;
4. overlays rolled up onto what is drawn: a module box carries the sum or the
   largest of the values of the nodes inside it, a folded block those of the blocks
   it stands for.

The drawing stage writes a view; it decides nothing of the above again.

An explorer page is a view too (``levels=True``): its levels are its page fit, so it
keeps every node, with names as a page shows them
(:func:`~graphviz_autograd.views.shown.shown_names`); each level folds its boxes by
the rule a summary folds by (:func:`~graphviz_autograd.views.collapsing.box_runs`)
and takes its layout by :func:`~graphviz_autograd.views.page_fit.choose_layout`, and
the overlays are rolled up onto its module boxes as onto a summary's.

>>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, Node
>>> view = prepare(AutogradGraph((Node("n0", "op", "ExpBackward0"),), ()))
>>> view.depth, view.layout, len(view.graph.nodes)
(None, 'dot', 1)
"""

from __future__ import annotations

import textwrap
from typing import Any, Mapping, NamedTuple, Optional, Sequence

from ..graph.autograd_graph import AutogradGraph
from ..options import DrawOptions, draw_options
from .overlays import FAILURE_OVERLAY, KeyItem, Overlay, failure_overlay, overlay_names
from .page_fit import as_drawn, choose_layout, fit_to_page
from .ports import EdgeKey, EdgeNames, edge_names
from .shown import shown_names

# How the note of a summary is drawn in the picture.
NOTE_ATTRS = {"shape": "note"}
NOTE_WIDTH = 80  # characters a line of it holds


class View(NamedTuple):
    """What a picture shows, decided once by :func:`prepare`.

    ``graph`` is the graph as drawn (folded, collapsed, shared parameters split,
    hidden kinds left out), ``options`` the options as asked, ``depth`` the depth it
    was collapsed to (None: every node drawn), ``compact`` whether its ranks are set
    closer (a graph too long for a page at Graphviz's gap), ``note`` what the user is
    told ('' when nothing was left out), ``layout`` ``"dot"`` or ``"fixed"`` with
    ``layout_note`` saying why the fixed one was taken (in a view of levels, the
    layout asked, which each level chooses by), ``overlays`` the overlays
    rolled onto ``graph``'s ids, ``notes`` the boxes of text the picture adds (the
    note, wrapped), ``source`` the walked graph it was prepared from, with the
    overlays as given (``source_overlays``), to prepare it again another way, and
    ``edge_names`` the argument and output names on the edges that cross a module's
    border, by ``(source, target, kind)`` (see :mod:`~graphviz_autograd.views.ports`).
    """

    graph: AutogradGraph
    options: DrawOptions
    depth: Optional[int]
    compact: bool
    note: str
    layout: str
    layout_note: str
    overlays: tuple[Overlay, ...]
    notes: tuple[KeyItem, ...]
    source: AutogradGraph
    source_overlays: tuple[Overlay, ...]
    edge_names: Mapping[EdgeKey, EdgeNames] = {}

    def again(self, **changes: Any) -> "View":
        """The same graph and overlays prepared with ``changes`` to the options."""
        return prepare(self.source, self.options.replace(**changes), overlays=self.source_overlays)


def prepare(
    graph: AutogradGraph,
    options: Optional[DrawOptions] = None,
    *,
    overlays: Sequence[Overlay] = (),
    levels: bool = False,
    **changes: Any,
) -> View:
    """The :class:`View` of ``graph`` drawn with ``options`` (or the keyword options of
    ``make_dot``) and ``overlays``; with ``levels``, as an explorer page shows it
    level by level (see the module's docstring)."""
    options = draw_options(options, **changes)
    overlays = tuple(overlays)
    overlay_names(overlays)
    if not levels and not any(overlay.name == FAILURE_OVERLAY for overlay in overlays):
        # (A page badges it as a finding instead: explore() adds it to the findings.)
        # A forward pass that raised: the box around the failing call is marked too, in any summary.
        failed = failure_overlay(graph)
        if failed is not None:
            overlays = (failed, *overlays)
    if levels:
        return View(
            graph=shown_names(graph), options=options, depth=None, compact=False, note="", layout=options.layout,
            layout_note="", overlays=overlays, notes=(), source=graph, source_overlays=overlays,
        )
    fitted = fit_to_page(graph, options)
    drawn = as_drawn(fitted.graph, options)
    notes = note_boxes(fitted.note)
    failed = next((o for o in overlays if o.name == FAILURE_OVERLAY), None)
    if failed is not None and fitted.depth is not None:
        # The failing call sits inside a module drawn as one box (marked red): its words go in a note.
        notes += [(textwrap.wrap(line, NOTE_WIDTH), {**NOTE_ATTRS, "color": "red", "fillcolor": "mistyrose", "fontcolor": "red3"})
                  for line in failed.tooltips.values()]
    layout, layout_note = choose_layout(drawn, options.layout, options.layout_budget, options.junctions)
    # Where each walked node is drawn: what overlays roll up by, and edge names (recorded graphs) follow.
    origin = fitted.origin(graph) if overlays or graph.modules else None
    return View(
        graph=drawn,
        options=options,
        depth=fitted.depth,
        compact=fitted.compact,
        note=fitted.note,
        layout=layout,
        layout_note=layout_note,
        overlays=tuple(overlay.rolled_onto(origin) for overlay in overlays),
        notes=tuple(notes),
        source=graph,
        source_overlays=overlays,
        edge_names=edge_names(graph, origin, drawn, fitted.stand_ins),
    )


def note_boxes(note: str) -> list[KeyItem]:
    """``note`` as a box of short lines for the picture (none when it is empty).

    >>> note_boxes("")
    []
    """
    return [(textwrap.wrap(note, NOTE_WIDTH), dict(NOTE_ATTRS))] if note else []
