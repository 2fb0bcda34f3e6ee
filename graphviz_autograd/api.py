"""The public functions: walk, then draw. They compose the modules and add nothing.

>>> import torch
>>> w = torch.ones(3, requires_grad=True)
>>> dot = make_dot((2 * w).sum(), params={"w": w})
>>> print(dot.source, end="")  # doctest: +NORMALIZE_WHITESPACE +ELLIPSIS
digraph {
    graph [nslimit=3 rankdir=TB]
    node [fontname=monospace fontsize=10 height=0.2 shape=box style=filled]
    n0 [fillcolor=darkolivegreen1 label="()" tooltip=...]
    n1 [fillcolor=lightgrey label=SumBackward0 tooltip=...]
    n2 [fillcolor=lightgrey label="MulBackward0\\nwith 2" tooltip="Gradient of mul: element-wise multiplication...]
    n3 [fillcolor=lightgrey label=AccumulateGrad tooltip=...]
    n4 [fillcolor=lightblue label="w\\n(3)" tooltip="parameter w\\nshape (3), float32"]
    n2 -> n1
    n3 -> n2
    n4 -> n3
    n1 -> n0
}
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import graphviz

from .drawing.budget import draw_within_budget
from .checks.diagnosis import Finding, given_overlays
from .errors import OptionError
from .graph.autograd_graph import AutogradGraph
from .drawing.layout import LaidOut, lay_out
from .capture.naming import Params
from .drawing.notebook import AutogradDigraph
from .options import DEFAULT_LAYOUT_BUDGET, FIT, DepthOption, DrawOptions, LayoutName
from .views.overlays import Overlay, overlay_names
from .views.prepared import prepare
from .capture.recording import Recorder
from .drawing.rendering import DEFAULT_TIMEOUT, OutputFormat, PathLike, check_writable, format_for_path, render_source, write_atomic
from .graph.style import Direction, Theme
from .capture.walking import walk

__all__ = ["LaidOut", "lay_out", "make_dot", "render"]


def make_dot(
    var: Any,
    params: Params = None,
    show_attrs: bool = False,
    show_saved: bool = False,
    max_attr_chars: int = 50,
    *,
    direction: Direction = "TB",
    show_no_grad: bool = True,
    show_device: bool = False,
    theme: Optional[Theme] = None,
    legend: bool = False,
    recorder: Optional[Recorder] = None,
    clusters: bool = True,
    depth: DepthOption = FIT,
    fold_repeated: bool = True,
    show_shapes: bool = False,
    diagnose: Union[bool, Sequence[Finding]] = False,
    grad_colors: Params = None,
    split_shared: bool = True,
    layout: LayoutName = "dot",
    layout_budget: float = DEFAULT_LAYOUT_BUDGET,
    junctions: bool = True,
    overlays: Sequence[Overlay] = (),
) -> graphviz.Digraph:
    """The backward graph of ``var`` as a ``graphviz.Digraph``; a drop-in for ``torchviz.make_dot``.

    ``var`` is the loss, a model output, or any tuple/list/dict of tensors (or an
    :class:`AutogradGraph` walked earlier). ``params`` names parameters: a dict
    such as ``dict(model.named_parameters())`` or the model itself. In a notebook
    the result shows inline; ``.source`` is byte-stable DOT.

    Beyond torchviz: ``direction`` ("TB" or "LR"), ``show_no_grad`` (dashed inputs
    that carry no gradient), ``show_device``, ``theme`` (colours per node kind)
    and ``legend``. ``recorder``, from ``with record(model) as rec:`` around the
    forward pass, adds modules and says how each input without gradient lost it
    (its model then names the parameters when ``params`` is not given).

    For a graph of a recorded forward pass (one with module info): ``clusters``
    draws each module as a box around its nodes, ``depth=N`` draws each module
    that many levels below the model as a single node (see
    :func:`~graphviz_autograd.views.collapsing.collapse`; 0 = one per top-level module),
    ``fold_repeated`` folds runs of identical blocks into one (``GPT2Block ×12``).
    The default, ``depth="fit"``, draws every node of a graph that fits a page
    (runs of blocks folded) and otherwise the deepest module summary that does,
    with a note in the picture and on stderr saying how to see the rest;
    ``depth="full"`` (or None) draws every node (see
    :func:`~graphviz_autograd.views.page_fit.fit_to_page`). A graph without module info
    is always drawn whole, as ``torchviz`` draws it.
    ``show_shapes`` writes the tensor shape on each data edge.

    ``diagnose=True`` runs :func:`~graphviz_autograd.check` on the graph (with
    ``params`` as the model) and marks what it finds: errors with a red border,
    warnings with an orange one, each message in the node's tooltip, and a note
    of what it found; a list of findings from ``check()`` is drawn as given.
    ``grad_colors`` (the model, or params) fills each parameter and its
    AccumulateGrad by the norm of its ``.grad`` on a log scale, with a key.
    ``overlays`` draws more values over the graph (see
    :class:`~graphviz_autograd.views.overlays.Overlay`). With ``depth``, a module
    box carries what its nodes carry: the worst finding, the largest gradient norm,
    the sum of saved bytes or of measured time.

    ``split_shared`` draws a parameter used more than a few times (an RNN's
    weights, once per step) once per use, which keeps Graphviz fast. ``layout``
    is ``"dot"`` (Graphviz lays it out), ``"fixed"`` (our layered layout: every
    node pinned, the result drawn by ``neato``, fast for any size) or ``"auto"``
    (``dot`` unless it would take longer than ``layout_budget`` seconds).
    ``junctions`` draws an output read by many ops far below it (DenseNet's
    feature maps) as one line with a branch to each reader, which keeps ``dot``
    fast; False draws each read as its own edge.

    >>> import torch
    >>> w = torch.nn.Parameter(torch.ones(2))
    >>> stray = torch.ones(2, requires_grad=True)
    >>> 'color=red' in make_dot((w * stray).sum(), {"w": w}, diagnose=True).source
    True
    """
    # Checked once, before the walk: a bad option should not wait for a big graph.
    options = DrawOptions(
        show_attrs=show_attrs,
        show_saved=show_saved,
        max_attr_chars=max_attr_chars,
        direction=direction,
        show_no_grad=show_no_grad,
        show_device=show_device,
        theme=theme,
        legend=legend,
        clusters=clusters,
        show_shapes=show_shapes,
        split_shared=split_shared,
        depth=depth,
        fold_repeated=fold_repeated,
        layout=layout,
        layout_budget=layout_budget,
        junctions=junctions,
    )
    overlay_names(overlays)
    if params is None and recorder is not None:
        params = recorder.model
    graph = _as_graph(var, params, options, recorder)
    view = prepare(graph, options, overlays=[*given_overlays(graph, params, diagnose, grad_colors), *overlays])
    _say(view.note)
    laid_out = lay_out(view)
    _say(laid_out.note)
    # Keeps the view (plain data, no tensor) to draw it again with the fixed layout
    # when dot runs past the budget, in a notebook or in render().
    dot = AutogradDigraph(engine=laid_out.engine, prepared=view)
    dot.body = laid_out.lines
    return dot


def _say(note: str) -> None:
    if note:
        print(f"graphviz-autograd: {note}", file=sys.stderr)


def render(
    outputs_or_graph: Any,
    path: PathLike,
    params: Params = None,
    *,
    format: Optional[OutputFormat] = None,
    timeout: Optional[float] = DEFAULT_TIMEOUT,
    layout: LayoutName = "auto",
    layout_budget: float = DEFAULT_LAYOUT_BUDGET,
    **make_dot_options: Any,
) -> Path:
    """Draw the backward graph of ``outputs_or_graph`` into ``path``; return the path.

    The format comes from the suffix (``.dot``/``.gv``, ``.svg``, ``.pdf``, ``.png``)
    unless ``format`` is given. The file is written atomically: on any failure
    nothing is left at ``path`` (and a file already there is untouched). DOT
    needs no Graphviz; the other formats need the ``dot`` executable.

    ``layout="auto"`` lets Graphviz ``dot`` lay the graph out unless that would
    take longer than ``layout_budget`` seconds (by
    :func:`graphviz_autograd.drawing.layout.estimate_layout_seconds`); then it says so in
    one line on stderr and draws the fixed layered layout instead. ``"dot"`` and
    ``"fixed"`` force one or the other. A DOT file is written for ``dot`` unless
    ``layout="fixed"`` is asked for.

    >>> import torch, tempfile, os
    >>> x = torch.ones(2, requires_grad=True)
    >>> out = render((x * x).sum(), os.path.join(tempfile.mkdtemp(), "g.dot"))
    >>> out.read_text().startswith("digraph {")
    True
    """
    if format_for_path(path, format) == "html":
        return _explore_page(outputs_or_graph, path, params, timeout, dict(make_dot_options, layout=layout, layout_budget=layout_budget))
    if format_for_path(path, format) == "dot" and layout == "auto":
        layout = "dot"  # nothing is laid out here, so nothing to decide
    dot = make_dot(outputs_or_graph, params, layout=layout, layout_budget=layout_budget, **make_dot_options)
    fmt = format_for_path(path, format)
    if fmt == "dot" or layout != "auto":
        return render_source(dot.source, path, format=format, timeout=timeout, engine=dot.engine)
    check_writable(path)
    drawn = draw_within_budget(
        dot.source, fmt, engine=dot.engine, budget=layout_budget, fixed_source=dot.fixed_source, timeout=timeout
    )
    _say(drawn.note)
    return write_atomic(path, drawn.data)


# The options of make_dot that an explorer page also takes (explore.explore).
_EXPLORE_OPTIONS = ("recorder", "diagnose", "grad_colors", "overlays", "show_shapes", "show_attrs", "show_device",
                    "expand_limit", "layout", "layout_budget")


def _explore_page(outputs_or_graph: Any, path: PathLike, params: Params, timeout: Optional[float], options: dict) -> Path:
    from .explorer.pages import explore

    unknown = sorted(set(options) - set(_EXPLORE_OPTIONS))
    if unknown:
        raise OptionError(
            f"render() to an .html page takes none of {', '.join(unknown)} (they shape a static drawing); "
            f"leave them out, or pick another suffix."
        )
    return explore(outputs_or_graph, params, timeout=timeout, **options).save(path)


def _as_graph(var: Any, params: Params, options: DrawOptions, recorder: Optional[Recorder]) -> AutogradGraph:
    if isinstance(var, AutogradGraph):
        return var
    return walk(var, params, collect_saved=options.collect_saved, collect_shapes=options.show_shapes, recorder=recorder)
