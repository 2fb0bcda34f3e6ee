"""What ``make_dot`` returns: a ``graphviz.Digraph`` that shows itself in a notebook
within a time budget and a size limit.

The plain ``graphviz.Digraph`` lays itself out with no time limit when a notebook
shows it, so a big graph could keep a cell busy for many minutes, and put tens of
megabytes of SVG into the notebook. :class:`AutogradDigraph` is the same object
(``.source``, ``.render()``, ``.pipe()`` as before) that keeps the walked graph,
as plain data, and shows itself so:

- ``dot`` runs for at most the layout budget, then the fixed layered layout is
  drawn instead (see :mod:`graphviz_autograd.drawing.budget`);
- a drawing over ``INLINE_SVG_LIMIT`` bytes (one asked for with
  ``depth="full"``; by default a recorded graph too big for a page is already a
  summary) is not shown: a recorded graph is shown as the largest module summary
  that fits a page, as :func:`graphviz_autograd.views.page_fit.fit_to_page` decides for
  every drawing, with a note in the picture saying how to see the rest; any
  other graph as a line saying how to draw it to a file.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

import graphviz

from .budget import draw_within_budget
from ..graph.autograd_graph import AutogradGraph
from .layout import fixed_layout_source, lay_out
from ..options import FIT, DrawOptions
from ..views.prepared import View, note_boxes

# Bytes of SVG past which a drawing is not put into a notebook: a browser slows down
# on a page holding tens of thousands of SVG elements, and the notebook file keeps
# the drawing.
INLINE_SVG_LIMIT = 4_000_000
# Bytes of SVG a node takes, edges and tooltip included (a recorded GPT-2: about
# 900): a graph with more than INLINE_SVG_LIMIT of them is summarised before drawing.
SVG_BYTES_PER_NODE = 900


class AutogradDigraph(graphviz.Digraph):
    """A ``graphviz.Digraph`` of a backward graph that remembers the view it draws.

    ``view`` is the prepared view (:class:`~graphviz_autograd.views.prepared.View`)
    the source was written from: ``drawn`` is its graph as drawn, ``options`` its
    options (``options.layout_budget`` is the seconds ``dot`` may take when the
    graph is shown).
    """

    def __init__(self, *args: Any, view: Optional[View] = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.view = view
        self._shown: Optional[tuple[str, Optional[str], str]] = None  # (source, svg or None, message)

    @property
    def drawn(self) -> Optional[AutogradGraph]:
        """The graph as drawn (folded, collapsed, split), or None for a digraph made by hand."""
        return self.view.graph if self.view is not None else None

    @property
    def options(self) -> DrawOptions:
        return self.view.options if self.view is not None else DrawOptions()

    def copy(self) -> "AutogradDigraph":
        copied = super().copy()
        copied.view = self.view
        return copied

    def fixed_source(self) -> str:
        """The same graph as DOT that pins every node (the fixed layout), drawn by ``neato -n2``."""
        assert self.view is not None
        return fixed_layout_source(self.view)

    def draw(self, fmt: str = "svg", timeout: Optional[float] = None) -> tuple[bytes, str]:
        """``(bytes, note)`` of the drawing in ``fmt``; ``dot`` stops after the layout budget."""
        fixed = self.fixed_source if self.view is not None else None
        drawn = draw_within_budget(
            self.source, fmt, engine=self.engine, budget=self.options.layout_budget, fixed_source=fixed, timeout=timeout
        )
        return drawn.data, drawn.note

    # --- shown in a notebook -------------------------------------------------------

    def _repr_mimebundle_(
        self, include: Optional[Iterable[str]] = None, exclude: Optional[Iterable[str]] = None, **_: Any
    ) -> dict:
        wanted = set(include) if include is not None else {"image/svg+xml"}
        wanted -= set(exclude or ())
        bundle: dict = {}
        if "image/svg+xml" in wanted:
            svg, message = self._inline_svg()
            if svg is not None:
                bundle["image/svg+xml"] = svg
            if message:
                bundle["text/plain"] = message
        if "image/png" in wanted:
            bundle["image/png"] = self.draw("png")[0]
        return bundle

    def _repr_image_svg_xml(self) -> str:
        svg, message = self._inline_svg()
        return svg if svg is not None else message

    def _repr_svg_(self) -> Optional[str]:
        return self._inline_svg()[0]

    def _inline_svg(self) -> tuple[Optional[str], str]:
        """The SVG to show (None when there is none small enough) and a message ('' if none).

        Worked out once per source: a notebook asks several times for one display.
        """
        source = self.source
        if self._shown is not None and self._shown[0] == source:
            return self._shown[1], self._shown[2]
        svg, message = self._make_inline_svg()
        self._shown = (source, svg, message)
        return svg, message

    def _make_inline_svg(self) -> tuple[Optional[str], str]:
        graph = self.drawn
        if graph is None or len(graph.nodes) * SVG_BYTES_PER_NODE <= INLINE_SVG_LIMIT:
            data, note = self.draw("svg")
            if len(data) <= INLINE_SVG_LIMIT:
                return data.decode("utf-8"), note
        too_big = (
            f"This graph of {len(graph.nodes) if graph is not None else 'many'} nodes is too big to show inline "
            f"(over {INLINE_SVG_LIMIT / 1e6:g} MB of SVG)"
        )
        to_file = "graphviz_autograd.render(..., 'graph.svg') or .render() draws all of it to a file"
        if self.view is None or not self.view.source.modules:
            return None, f"{too_big}; {to_file}."
        fitted = self.view.again(depth=FIT, layout="auto")
        if fitted.depth is None:
            return None, f"{too_big}; {to_file}."
        message = f"{too_big}. {fitted.note}"
        view = fitted._replace(note=message, notes=tuple(note_boxes(message)))
        laid_out = lay_out(view)
        shown = AutogradDigraph(engine=laid_out.engine, view=view)
        shown.body = laid_out.lines
        data, _ = shown.draw("svg")
        return data.decode("utf-8"), message
