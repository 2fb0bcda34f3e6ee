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

import os
import sys
from pathlib import Path
from typing import Any, Iterable, Optional, Union

import graphviz

from .budget import draw_within_budget
from ..errors import OptionError, OutputPathError
from ..graph.autograd_graph import AutogradGraph
from .layout import fixed_layout_source, lay_out
from ..options import FIT, DrawOptions
from ..views.prepared import View, note_boxes
from .rendering import DEFAULT_TIMEOUT, check_writable, write_atomic

# Bytes of SVG past which a drawing is not put into a notebook: a browser slows down
# on a page holding tens of thousands of SVG elements, and the notebook file keeps
# the drawing.
INLINE_SVG_LIMIT = 4_000_000
# Bytes of SVG a node takes, edges and tooltip included (a recorded GPT-2: about
# 900): a graph with more than INLINE_SVG_LIMIT of them is summarised before drawing.
SVG_BYTES_PER_NODE = 900


class AutogradDigraph(graphviz.Digraph):
    """A ``graphviz.Digraph`` of a backward graph that remembers the view it draws.

    ``prepared`` is the view (:class:`~graphviz_autograd.views.prepared.View`)
    the source was written from: ``drawn`` is its graph as drawn, ``options`` its
    options (``options.layout_budget`` is the seconds ``dot`` may take when the
    graph is shown or rendered).

    ``render()`` and ``view()`` take graphviz's arguments and draw as
    :func:`graphviz_autograd.render` does: within the layout budget, output checked
    and written atomically, and no DOT source file left beside the drawing unless
    ``cleanup=False`` is passed.
    """

    def __init__(self, *args: Any, prepared: Optional[View] = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.prepared = prepared
        self._shown: Optional[tuple[str, Optional[str], str]] = None  # (source, svg or None, message)

    @property
    def drawn(self) -> Optional[AutogradGraph]:
        """The graph as drawn (folded, collapsed, split), or None for a digraph made by hand."""
        return self.prepared.graph if self.prepared is not None else None

    @property
    def options(self) -> DrawOptions:
        return self.prepared.options if self.prepared is not None else DrawOptions()

    def copy(self) -> "AutogradDigraph":
        copied = super().copy()
        copied.prepared = self.prepared
        return copied

    def fixed_source(self) -> str:
        """The same graph as DOT that pins every node (the fixed layout), drawn by ``neato -n2``."""
        assert self.prepared is not None
        return fixed_layout_source(self.prepared)

    def draw(self, fmt: str = "svg", timeout: Optional[float] = None) -> tuple[bytes, str]:
        """``(bytes, note)`` of the drawing in ``fmt``; ``dot`` stops after the layout budget."""
        fixed = self.fixed_source if self.prepared is not None else None
        drawn = draw_within_budget(
            self.source, fmt, engine=self.engine, budget=self.options.layout_budget, fixed_source=fixed, timeout=timeout
        )
        return drawn.data, drawn.note

    # --- drawn to a file (graphviz's render and view) -------------------------------

    def render(
        self,
        filename: Union[os.PathLike, str, None] = None,
        directory: Union[os.PathLike, str, None] = None,
        view: bool = False,
        cleanup: Optional[bool] = None,
        format: Optional[str] = None,
        renderer: Optional[str] = None,
        formatter: Optional[str] = None,
        neato_no_op: Union[bool, int, None] = None,
        quiet: bool = False,
        quiet_view: bool = False,
        *,
        outfile: Union[os.PathLike, str, None] = None,
        engine: Optional[str] = None,
        raise_if_result_exists: bool = False,
        overwrite_source: bool = False,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
    ) -> str:
        """Draw the graph to a file, as ``graphviz.Digraph.render`` does; return its path.

        The file is named as graphviz names it (``filename`` + ``.`` + format, or
        ``outfile``). Unlike graphviz, ``dot`` runs for at most the layout budget
        and the fixed layout is drawn past it, Graphviz's output is checked before
        it replaces a file, and the DOT source is saved (at ``filename``) only with
        ``cleanup=False``: the source of a big graph runs to hundreds of megabytes.
        ``timeout`` bounds the whole drawing.

        >>> import torch, tempfile, os
        >>> from graphviz_autograd import make_dot
        >>> x = torch.ones(2, requires_grad=True)
        >>> folder = tempfile.mkdtemp()
        >>> path = make_dot((x * x).sum()).render("g", directory=folder, format="svg")
        >>> os.path.basename(path), os.listdir(folder)
        ('g.svg', ['g.svg'])
        """
        if renderer is not None or formatter is not None or neato_no_op is not None:
            raise OptionError(
                "AutogradDigraph.render() draws with Graphviz's default renderer and takes no renderer=, "
                "formatter= or neato_no_op=; leave them out, or save the DOT with .save() and run Graphviz on it."
            )
        folder = os.fspath(directory) if directory is not None else os.fsdecode(self.directory)  # type: ignore[has-type]
        if outfile is not None:
            outfile = Path(outfile)
            fmt = self._get_format(outfile, format=format)
            if directory is None:
                outfile = Path(folder, outfile)
        else:
            fmt = format if format is not None else self.format
        graphviz.parameters.verify_format(fmt, required=True)
        # The names are kept as graphviz.save() keeps them, for a later render() or save().
        if filename is not None:
            self.filename = os.fspath(filename)
        elif outfile is not None:
            self.filename = os.fspath(self._get_filepath(outfile))
        if directory is not None:
            self.directory = folder
        source_path = Path(self.filepath)
        target = outfile if outfile is not None else Path(f"{self.filepath}.{fmt}")
        if source_path.resolve() == target.resolve() and not overwrite_source:
            raise OptionError(
                f"render() would write the drawing over its own DOT source {os.fspath(target)!r}; "
                "give another outfile= or filename=."
            )
        if raise_if_result_exists and target.exists():
            raise graphviz.FileExistsError(f"output file exists: {os.fspath(target)!r}")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)  # graphviz makes the folder too
        except OSError as error:
            blocking = next((folder for folder in (target.parent, *target.parent.parents) if folder.is_file()), None)
            why = f"{os.fspath(blocking)!r} is a file, not a folder" if blocking else (error.strerror or str(error))
            raise OutputPathError(
                f"Cannot write {os.fspath(target)!r}: its folder cannot be made ({why}); "
                "give a path in a folder that exists or can be created."
            ) from None
        check_writable(target)
        if engine is not None and engine != self.engine:
            drawn = self.copy()
            drawn.engine = engine
        else:
            drawn = self
        data, note = drawn.draw(fmt, timeout=timeout)
        if note:
            print(f"graphviz-autograd: {note}", file=sys.stderr)
        if cleanup is False:
            write_atomic(source_path, self.source.encode(self.encoding))
        write_atomic(target, data)
        if view or quiet_view:
            self._view(target, format=fmt, quiet=quiet_view)
        return os.fspath(target)

    def view(
        self,
        filename: Union[os.PathLike, str, None] = None,
        directory: Union[os.PathLike, str, None] = None,
        cleanup: Optional[bool] = None,
        quiet: bool = False,
        quiet_view: bool = False,
    ) -> str:
        """Draw the graph to a file with :meth:`render` and open it in the default viewer."""
        return self.render(
            filename=filename, directory=directory, view=True, cleanup=cleanup, quiet=quiet, quiet_view=quiet_view
        )

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
        if self.prepared is None or not self.prepared.source.modules:
            return None, f"{too_big}; {to_file}."
        fitted = self.prepared.again(depth=FIT, layout="auto")
        if fitted.depth is None:
            return None, f"{too_big}; {to_file}."
        message = f"{too_big}. {fitted.note}"
        view = fitted._replace(note=message, notes=tuple(note_boxes(message)))
        laid_out = lay_out(view)
        shown = AutogradDigraph(engine=laid_out.engine, prepared=view)
        shown.body = laid_out.lines
        data, _ = shown.draw("svg")
        return data.decode("utf-8"), message
