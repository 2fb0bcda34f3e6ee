"""The public functions: walk, then draw. They compose the modules and add nothing.

>>> import torch
>>> w = torch.ones(3, requires_grad=True)
>>> dot = make_dot((2 * w).sum(), params={"w": w})
>>> print(dot.source, end="")  # doctest: +NORMALIZE_WHITESPACE
digraph {
    graph [rankdir=TB]
    node [fontname=monospace fontsize=10 height=0.2 shape=box style=filled]
    n0 [fillcolor=darkolivegreen1 label="()"]
    n1 [fillcolor=lightgrey label=SumBackward0]
    n2 [fillcolor=lightgrey label=MulBackward0]
    n3 [fillcolor=lightgrey label=AccumulateGrad]
    n4 [color=gray40 fillcolor=white fontcolor=gray40 fontsize=8 label="no grad" style="dashed,filled"]
    n5 [fillcolor=lightblue label="w\\n(3)"]
    n2 -> n1
    n3 -> n2
    n4 -> n2 [color=gray40 style=dashed]
    n5 -> n3
    n1 -> n0
}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence, Union

import graphviz

from .diagnose import Finding, examine, finding_styles, gradient_norms, gradient_styles, merge_styles
from .dot import body_lines
from .graph import AutogradGraph
from .record import Recorder
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
    recorder: Optional[Recorder] = None,
    diagnose: Union[bool, Sequence[Finding]] = False,
    grad_colors: Params = None,
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

    ``diagnose=True`` runs :func:`~graphviz_autograd.check` on the graph (with
    ``params`` as the model) and marks what it finds: errors with a red border,
    warnings with an orange one, each message in the node's tooltip, and a note
    of what it found; a list of findings from ``check()`` is drawn as given.
    ``grad_colors`` (the model, or params) fills each parameter and its
    AccumulateGrad by the norm of its ``.grad`` on a log scale, with a key.

    >>> import torch
    >>> w = torch.nn.Parameter(torch.ones(2))
    >>> stray = torch.ones(2, requires_grad=True)
    >>> 'color=red' in make_dot((w * stray).sum(), {"w": w}, diagnose=True).source
    True
    """
    if params is None and recorder is not None:
        params = recorder.model
    graph = _as_graph(var, params, collect_saved=show_attrs or show_saved, recorder=recorder)
    overlays = []
    if diagnose is True:
        overlays.append(finding_styles(examine(graph, params=params).findings))
    elif diagnose is not False and diagnose is not None:
        overlays.append(finding_styles(list(diagnose)))
    if grad_colors is not None:
        overlays.append(gradient_styles(graph, gradient_norms(grad_colors)))
    node_styles, notes = merge_styles(*overlays)
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
        node_styles=node_styles,
        notes=notes,
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


def _as_graph(var: Any, params: Params, collect_saved: bool, recorder: Optional[Recorder] = None) -> AutogradGraph:
    if isinstance(var, AutogradGraph):
        return var
    return walk(var, params, collect_saved=collect_saved, recorder=recorder)
