"""The public functions: walk, then draw. They compose the modules and add nothing.

>>> import torch
>>> w = torch.ones(3, requires_grad=True)
>>> dot = make_dot((2 * w).sum(), params={"w": w})
>>> print(dot.source, end="")  # doctest: +NORMALIZE_WHITESPACE +ELLIPSIS
digraph {
    graph [rankdir=TB]
    node [fontname=monospace fontsize=10 height=0.2 shape=box style=filled]
    n0 [fillcolor=darkolivegreen1 label="()" tooltip=...]
    n1 [fillcolor=lightgrey label=SumBackward0 tooltip=...]
    n2 [fillcolor=lightgrey label=MulBackward0 tooltip="Gradient of mul: element-wise multiplication...]
    n3 [fillcolor=lightgrey label=AccumulateGrad tooltip=...]
    n4 [color=gray40 fillcolor=white fontcolor=gray40 fontsize=8 label="no grad" style="dashed,filled" tooltip=...]
    n5 [fillcolor=lightblue label="w\\n(3)" tooltip="parameter w\\nshape (3), float32"]
    n2 -> n1
    n3 -> n2
    n4 -> n2 [color=gray40 style=dashed]
    n5 -> n3
    n1 -> n0
}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import graphviz

from .collapse import check_depth, collapse
from .dot import body_lines
from .errors import OptionError
from .graph import AutogradGraph
from .render import DEFAULT_TIMEOUT, PathLike, render_source
from .style import Theme
from .walk import Params, walk


def make_dot(
    var: Any,
    params: Params = None,
    show_attrs: bool = False,
    show_saved: bool = False,
    max_attr_chars: int = 50,
    *,
    direction: str = "TB",
    show_no_grad: bool = True,
    show_device: bool = False,
    theme: Optional[Theme] = None,
    legend: bool = False,
    clusters: bool = True,
    depth: Optional[int] = None,
    fold_repeated: bool = True,
    show_shapes: bool = False,
) -> graphviz.Digraph:
    """The backward graph of ``var`` as a ``graphviz.Digraph``; a drop-in for ``torchviz.make_dot``.

    ``var`` is the loss, a model output, or any tuple/list/dict of tensors (or an
    :class:`AutogradGraph` walked earlier). ``params`` names parameters: a dict
    such as ``dict(model.named_parameters())`` or the model itself. In a notebook
    the result shows inline; ``.source`` is byte-stable DOT.

    Beyond torchviz: ``direction`` ("TB" or "LR"), ``show_no_grad`` (dashed inputs
    that carry no gradient), ``show_device``, ``theme`` (colours per node kind)
    and ``legend``. For a graph of a recorded forward pass (one with module info):
    ``clusters`` draws each module as a box around its nodes, ``depth`` draws each
    module that many levels below the model as a single node (see
    :func:`~graphviz_autograd.collapse.collapse`; 0 = one per top-level module),
    ``fold_repeated`` folds runs of identical blocks into one (``GPT2Block ×12``).
    ``show_shapes`` writes the tensor shape on each data edge that knows it.
    """
    if depth is not None:
        check_depth(depth)  # before the walk: a bad option should not wait for a big graph
    if not isinstance(fold_repeated, bool):
        raise OptionError(f"fold_repeated must be True or False; got {fold_repeated!r}.")
    graph = _as_graph(var, params, collect_saved=show_attrs or show_saved)
    if depth is not None:
        graph = collapse(graph, depth, fold_repeated)
    dot = graphviz.Digraph()
    dot.body = body_lines(
        graph,
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
    )
    return dot


def render(
    outputs_or_graph: Any,
    path: PathLike,
    params: Params = None,
    *,
    format: Optional[str] = None,
    timeout: Optional[float] = DEFAULT_TIMEOUT,
    **make_dot_options: Any,
) -> Path:
    """Draw the backward graph of ``outputs_or_graph`` into ``path``; return the path.

    The format comes from the suffix (``.dot``/``.gv``, ``.svg``, ``.pdf``, ``.png``)
    unless ``format`` is given. The file is written atomically: on any failure
    nothing is left at ``path`` (and a file already there is untouched). DOT
    needs no Graphviz; the other formats need the ``dot`` executable.

    >>> import torch, tempfile, os
    >>> x = torch.ones(2, requires_grad=True)
    >>> out = render((x * x).sum(), os.path.join(tempfile.mkdtemp(), "g.dot"))
    >>> out.read_text().startswith("digraph {")
    True
    """
    source = make_dot(outputs_or_graph, params, **make_dot_options).source
    return render_source(source, path, format=format, timeout=timeout)


def _as_graph(var: Any, params: Params, collect_saved: bool) -> AutogradGraph:
    if isinstance(var, AutogradGraph):
        return var
    return walk(var, params, collect_saved=collect_saved)
