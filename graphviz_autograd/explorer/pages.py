"""One self-contained HTML page to explore a whole backward graph, level by level.

The page opens on the top level of the model (one box per top-level module, the
outputs, ops outside modules), and each box opens into its module's interior, down
to single ops, parameters and their ``AccumulateGrad``. Runs of identical sibling
blocks fold into one box (``LlamaDecoderLayer ×80``) that opens one of them.

Everything is computed here, from one walked :class:`AutogradGraph`:

- the levels: one per module that made a node (``ModuleList`` and ``ModuleDict``,
  which run nothing, are looked through), and the top level;
- a *template* per distinct level: its items (nodes, boxes of child modules and
  ports where edges enter or leave it), its edges and its layout, drawn by Graphviz
  ``dot``. Levels with the same structure (the 80 layers of a Llama) share one
  template, so the layout work grows with the number of distinct module kinds, not
  with the number of layers;
- per level, only which graph nodes and modules fill the template's items.

The page (``web/explorer.js``) draws a level from its template, moves between
levels, searches, highlights and colours. It holds no layout code.

>>> import torch
>>> w = torch.ones(3, requires_grad=True)
>>> page = explore((w * 2).sum(), {"w": w})
>>> html = page.html()
>>> html.startswith("<!DOCTYPE html>"), '"label":"w"' in html
(True, True)
"""

from __future__ import annotations

import html as html_text
import json
import math
import functools
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from ..graph.module_tree import ModuleTree
from ..graph.descriptions import (
    NO_GRAD_LABEL, UNNAMED, describe_op, failed_call_tooltip, module_box_lines, port_name, shape_text,
)
from ..drawing.dot_writer import label as dot_label
from ..drawing.dot_writer import attr_list, digraph, quote
from ..errors import (
    GRAPHVIZ_INSTALL_HINT,
    GraphTooBigError,
    GraphvizNotFoundError,
    InputTypeError,
    LayoutTimeoutError,
    RenderError,
)
from ..graph.autograd_graph import ACCUMULATE_GRAD, CUT, DATA, FAILED, LEAF, NO_GRAD, OP, OUTPUT, PARAMETER, SAVED, SAVED_BY
from ..graph.autograd_graph import (
    AutogradGraph, Edge, ModuleInfo, Node, leaves_and_returns, op_constants, other_names, saved_attrs,
)
from ..views.collapsing import alike_runs, box_runs, node_targets
from ..views.junctions import link_routes, plan_junctions
from ..drawing.layout import layered_positions
from ..views.page_fit import choose_layout, node_size
from ..views.prepared import View, prepare
from ..views.shown import shown_text
from ..options import DrawOptions
from ..views.overlays import Overlay, failure_overlay, overlay_names, roll_up, saved_bytes_by_op, saved_bytes_overlay
from ..views.stacking import stacking_edges
from ..graph.style import EDGE_STYLES
from ..drawing.rendering import DEFAULT_TIMEOUT, PathLike, check_timeout, run_dot, write_atomic

# Modules that hold others and run nothing themselves: a level of their own would
# only add a click, so their children are shown in the level of their parent.
PASS_THROUGH_TYPES = frozenset(("ModuleList", "ModuleDict", "ParameterList", "ParameterDict"))

# The most ops (autograd functions, AccumulateGrad included) a graph explore() takes
# may have: a 200,000-op chain builds in some 10 s and 1.4 GB (see docs/explorer.md);
# past this a page would take minutes and gigabytes, and is refused before the walk.
MAX_OPS = 300_000
# A level with more nodes of its own than this shows them as parts of PART_OPS ops
# (a number many periods of a repeated chain divide), and at most PART_NODES nodes, each.
SPLIT_LEVELS_ABOVE = 2_000
PART_OPS = 600
PART_NODES = 2_000
# The class name the page shows for such a part.
PART_TYPE = "Part"

# The version of the page's data (docs/explorer-data.md): 2 names the fields of items
# and findings, and says the order of an edge's fields.
DATA_FORMAT = 2
# An edge, in the page's data: [source, target, kind, shape], by node or item index.
EDGE_FIELDS = ("source", "target", "kind", "shape")

# Item kinds of a level besides node kinds: a child module, and the two ends of an
# edge that crosses the level's border.
BOX = "box"
PORT_IN = "in"
PORT_OUT = "out"

# Per level, the dot runs in parallel: each is a process of its own.
_LAYOUT_WORKERS = 4
# How much more dot keeps a data edge short and straight than an input without gradient.
DATA_WEIGHT = "4"
# DOT characters laid out by one dot at the least: small views share a process.
_BATCH_CHARS = 60_000
# Points per inch, as Graphviz measures node sizes.
_POINTS = 72.0
# The widest label, in characters, a node is laid out for; the page shortens longer ones.
MAX_LABEL_CHARS = 40

_WEB = "web"
_ASSETS = ("explorer.html", "explorer.css", "explorer.js", "vendor/svg-pan-zoom/svg-pan-zoom.min.js")

Params = Any
# The defaults of every drawing option, shared with make_dot.
_DEFAULTS = DrawOptions()


class Explorer:
    """An explorer page, ready to write: :meth:`save` writes the file, :meth:`html`
    gives its text, and a notebook shows it inline (:meth:`_repr_html_`).

    Made by :func:`explore`; ``data`` is the plain data the page is built from.
    """

    def __init__(self, data: dict, title: str):
        self.data = data
        self.title = title
        self._html: Optional[str] = None

    def html(self) -> str:
        """The page: one HTML document with every script, style and datum inlined."""
        if self._html is None:
            self._html = page_html(self.data, self.title)
        return self._html

    def save(self, path: PathLike) -> Path:
        """Write the page to ``path`` atomically (nothing is left there on failure); return the path."""
        return write_atomic(path, self.html().encode("utf-8"))

    def _repr_html_(self) -> str:
        # A notebook puts this into its own page: the explorer goes into an iframe,
        # so its script, styles and keys stay apart from the notebook's.
        return (
            '<iframe style="width:100%;height:640px;border:1px solid #ccc" sandbox="allow-scripts" srcdoc="'
            + html_text.escape(self.html(), quote=True)
            + '"></iframe>'
        )

    def __repr__(self) -> str:
        levels = len(self.data["levels"])
        return f"<Explorer {self.title!r}: {len(self.data['nodes'])} nodes, {levels} levels, {len(self.data['templates'])} layouts>"


def explore(
    output: Any,
    params: Params = None,
    *,
    recorder: Any = None,
    diagnose: Union[bool, Sequence[Any]] = False,
    grad_colors: Params = None,
    overlays: Sequence[Overlay] = (),
    show_shapes: bool = _DEFAULTS.show_shapes,
    show_attrs: bool = _DEFAULTS.show_attrs,
    show_device: bool = _DEFAULTS.show_device,
    title: Optional[str] = None,
    timeline: Optional[dict] = None,
    memory: Any = None,
    timeout: Optional[float] = DEFAULT_TIMEOUT,
    expand_limit: int = _DEFAULTS.expand_limit,
    layout: str = "auto",
    layout_budget: float = _DEFAULTS.layout_budget,
) -> Explorer:
    """An interactive page of the backward graph of ``output``, level by level.

    ``output``, ``params``, ``recorder``, ``diagnose``, ``grad_colors``, ``overlays``
    and the drawing options mean what they mean for :func:`~graphviz_autograd.make_dot`,
    with the same defaults (checked by the same :class:`~graphviz_autograd.options.DrawOptions`);
    ``output`` may also be an :class:`AutogradGraph` walked before. With a
    ``recorder`` the page has one level per module; without, the graph is one level.
    Its colour menu lists the overlays: the bytes each op saves for backward, the
    gradient norms of ``grad_colors`` (the model or its named parameters, after
    ``backward()``) and any others given (a measured profile's times), each rolled up
    onto module boxes as in a static drawing; the findings of ``diagnose`` are
    badges and a list. Its details panel always gives each tensor's shape and
    device, so ``show_shapes`` and ``show_device`` change nothing on the page;
    ``show_attrs`` lists each op's saved values there. Graphviz ``dot`` lays out
    each distinct level (within ``timeout`` seconds per level), and once more
    *expanded*: every module inside it opened, as nested boxes, down to single ops,
    unless that view would draw more than ``expand_limit`` nodes (the page then
    offers only level by level).

    ``layout`` and ``layout_budget`` work as for :func:`~graphviz_autograd.render`
    (which also lays out with ``"auto"`` by default), per level: with ``"auto"`` a
    level that ``dot`` would take longer than ``layout_budget`` seconds to lay out
    (by its estimate, or on the clock) is laid out by the fixed layered layout
    instead; ``"fixed"`` lays out every level so, and ``"dot"`` waits for ``dot`` (up
    to ``timeout``). A level of more than ``SPLIT_LEVELS_ABOVE`` nodes of its own is
    shown as boxes of ``PART_OPS`` ops each, in walk order (``(part 3 of 200)``),
    which fold as alike modules do. A graph of more than ``MAX_OPS`` ops is refused
    before it is walked.

    Overlays measured over training steps (``Watcher.overlays_over_steps()``) give the
    page a step axis: a slider (and the keys ``[`` and ``]``) chooses the step whose
    values colour it; ``timeline`` (``Watcher.timeline()``) adds each module's and
    parameter's statistics over the steps to its details. ``Watcher.page()`` does both.

    ``memory``, the memory of a profiled step (``profile.memory``, with ``output`` its
    ``profile.graph``), adds a strip under the graph: the bytes alive over the step, stacked
    by kind, with the peak marked; choosing a moment on it marks the modules and ops whose
    tensors saved for backward are alive then.

    >>> import torch
    >>> x = torch.ones(2, requires_grad=True)
    >>> page = explore((x * x).sum())
    >>> [item["kind"] for item in page.data["templates"][0]["items"]]
    ['output', 'op', 'op', 'accumulate_grad', 'leaf']
    """
    options = DrawOptions(
        show_shapes=show_shapes, show_attrs=show_attrs, show_device=show_device, expand_limit=expand_limit,
        layout=layout, layout_budget=layout_budget,
    )
    overlay_names(overlays)
    check_timeout(timeout)
    check_graph_size(output)
    if params is None and recorder is not None:
        params = recorder.model
    if isinstance(output, AutogradGraph):
        graph = output
    else:
        from ..capture.walking import walk

        # Saved tensors and shapes are walked whatever the options: the page's details show them.
        graph = walk(output, params, collect_saved=True, collect_shapes=True, recorder=recorder)
    findings: list = []
    if diagnose is True:
        from ..checks.diagnosis import check

        findings = check(graph, params=params if graph.params_given else None)
    elif diagnose is not False and diagnose is not None:
        findings = list(diagnose)
    if failure_overlay(graph) is not None:  # a forward pass that raised: its failing call badged, as check says it
        from ..checks.diagnosis import FORWARD_FAILED, failure_findings

        if not any(getattr(f, "code", "") == FORWARD_FAILED for f in findings):
            findings = failure_findings(graph) + findings
    colours = [saved_bytes_overlay(graph)]
    if grad_colors is not None:
        from ..checks.diagnosis import gradient_norms, gradient_overlay

        colours.append(gradient_overlay(graph, gradient_norms(grad_colors)))
    colours.extend(overlays)
    view = prepare(graph, options, overlays=colours, levels=True)
    if title is None:
        title = graph.modules[0].type_name if graph.modules else "autograd graph"
    if not isinstance(title, str):
        raise InputTypeError(f"title must be a str; got {type(title).__name__}.")
    title = shown_text(title)
    data = explorer_data(view, findings=findings, timeout=timeout,
                         memory=memory.page_data() if memory is not None else None)
    data["title"] = title
    if timeline is not None:
        # Each module call's and parameter's statistics over training (Watcher.timeline()):
        # the details panel draws them as lines and histograms over time.
        data["timeline"] = shown_timeline(timeline)
    return Explorer(data, title)


def shown_timeline(timeline: dict) -> dict:
    """``timeline`` (``Watcher.timeline()``) with its module calls and parameters named as
    the page names them (:func:`~graphviz_autograd.views.shown.shown_text`, as the graph's
    names are): the page finds a module's series by the path it shows, and a name that
    UTF-8 cannot carry (a lone surrogate) cannot fail the page's writing.

    >>> shown_timeline({"steps": [0], "statistics": {"grad_norm": {"a\\ud800b": [1.0]}}})["statistics"]
    {'grad_norm': {'a\\\\ud800b': [1.0]}}
    """
    shown = dict(timeline)
    for part in ("statistics", "histograms"):
        if isinstance(timeline.get(part), dict):
            shown[part] = {
                kind: {shown_text(key): series for key, series in by_key.items()} for kind, by_key in timeline[part].items()
            }
    return shown


# --- how big a graph the page takes -------------------------------------------------


def check_graph_size(output: Any) -> None:
    """Refuse, before the walk, a graph of more than ``MAX_OPS`` ops (AccumulateGrad included):
    a GraphTooBigError saying what to do instead.

    >>> import torch
    >>> x = torch.ones(1, requires_grad=True)
    >>> check_graph_size(x * 2)  # one op and an AccumulateGrad: nothing to say
    """
    if isinstance(output, AutogradGraph):
        count = sum(1 for content in output.columns(fill_ids=False).contents if content[0] in (OP, ACCUMULATE_GRAD))
    else:
        from ..capture.walking import count_functions

        count = count_functions(output, MAX_OPS)
    if count > MAX_OPS:
        raise GraphTooBigError(
            f"explore() takes graphs of up to {MAX_OPS:,} ops, and this one has "
            f"{'more' if not isinstance(output, AutogradGraph) else f'{count:,}'}: its page would take minutes to build "
            "and gigabytes to open. Explore a smaller part of it (the output of one block, or the model built with "
            "fewer layers), or draw it as a static picture (an .svg, .pdf or .png file), which lays out any size."
        )


def _split_big_levels(home: list[str], kinds: Sequence[str], modules: ModuleTree) -> ModuleTree:
    """Put the nodes of each level that holds more than ``SPLIT_LEVELS_ABOVE`` of its own
    (outputs aside) into parts, in walk order, each a level of its own: a new part
    begins at the ``PART_OPS + 1``-th op of one, or its ``PART_NODES + 1``-th node.

    A level of 200,000 ops is more than a page can draw at once, and more than
    ``dot`` lays out in minutes. As parts, its level holds a few boxes. Parts are
    counted in ops so that the parts of a repeated chain start at the same place of
    it and are alike: they fold into one box, laid out once, as repeated blocks are.
    Returns the module tree with the parts in it.
    """
    counts: dict[str, int] = {}
    for path, kind in zip(home, kinds):
        if kind != OUTPUT:
            counts[path] = counts.get(path, 0) + 1
    big = {path for path, count in counts.items() if count > SPLIT_LEVELS_ABOVE}
    if not big:
        return modules
    part_of: dict[int, int] = {}  # node -> its part's number in its level, from 0
    state = {path: [0, 0, 0] for path in big}  # part number, its ops, its nodes
    for k, (path, kind) in enumerate(zip(home, kinds)):
        if path not in big or kind == OUTPUT:
            continue
        part = state[path]
        if part[2] == PART_NODES or (kind == OP and part[1] == PART_OPS):
            part[0], part[1], part[2] = part[0] + 1, 0, 0
        part[1] += kind == OP
        part[2] += 1
        part_of[k] = part[0]
    names_of: dict[str, list[str]] = {}
    parts: dict[str, ModuleInfo] = {}
    for path in big:
        total = state[path][0] + 1
        prefix = path + "." if path else ""
        names = names_of[path] = []
        for number in range(1, total + 1):
            name = f"{prefix}(part {number} of {total})"
            while name in modules.info:  # a module of the model named so
                name += "'"
            parts[name] = ModuleInfo(name, PART_TYPE)
            names.append(name)
    for k, number in part_of.items():
        home[k] = names_of[home[k]][number]
    return ModuleTree((*modules.modules, *parts.values()), modules.look_through)


# --- the levels --------------------------------------------------------------------


class _Level:
    __slots__ = ("path", "nodes", "children", "items", "refs", "edges", "signature", "template", "ops", "in_ports")

    def __init__(self, path: str):
        self.path = path
        self.nodes: list[int] = []  # display node indexes whose home is this level
        self.children: list[str] = []  # child levels, in definition order
        self.items: list[tuple] = []
        self.refs: list[Any] = []
        self.edges: list[tuple] = []
        self.signature: tuple = ()
        self.template = -1
        self.ops = 0  # op nodes in this level and every level below it
        self.in_ports: dict[int, int] = {}  # outside display node index -> the in-port item its edges enter by


def explorer_data(view: View, *, findings: Iterable[Any] = (), timeout: Optional[float] = DEFAULT_TIMEOUT,
                  memory: Optional[Mapping[str, Any]] = None) -> dict:
    """The plain data an explorer page of ``view`` (``prepare(..., levels=True)``) is
    built from (what :func:`explore` embeds), with the ``findings`` of its graph.

    Keys: ``nodes`` (every node but saved tensors: kind, label, level, shape, dtype,
    device, note, saved bytes), ``edges`` (``[source, target, kind, shape]`` by node
    index), ``levels`` (per module shown: path, type, parent, template, and the
    nodes, child levels and outside nodes filling the template's items),
    ``templates`` (items, edges and layout, shared by alike levels, and the
    ``expanded`` view of the level with every module inside it opened), ``meanings``
    (op name -> lines), ``findings``, ``overlays`` (what the colour menu lists: name,
    title, unit, roll-up) and ``metrics`` (each overlay's values, per node index); with
    ``memory`` (``StepMemory.page_data()``), ``memory``: its timeline and peak, and when the
    tensors each node saved for backward were made and last read, by node index.
    """
    graph, options, overlays = view.graph, view.options, view.overlays
    nodes = graph.nodes
    modules = ModuleTree(graph.modules, look_through=PASS_THROUGH_TYPES)
    saved_owner = saved_bytes_by_op(graph)[1]
    shown = [i for i, node in enumerate(nodes) if node.kind != SAVED]
    index_of = {nodes[i].id: k for k, i in enumerate(shown)}

    # Each node's level: its module's; an anonymous input without gradient goes where its op is.
    cut_target: dict[str, str] = {}
    for edge in graph.edges:
        if edge[2] == CUT:
            cut_target.setdefault(edge[0], edge[1])
    home: list[str] = []
    for i in shown:
        node = nodes[i]
        path = "" if node.kind == OUTPUT else node.module
        if node.kind == NO_GRAD and not node.label and node.id in cut_target:
            try:
                path = graph.node(cut_target[node.id]).module
            except KeyError:
                pass
        home.append(modules.listed(path))
    modules = _split_big_levels(home, [nodes[i].kind for i in shown], modules)

    levels: dict[str, _Level] = {"": _Level("")}
    for k, path in enumerate(home):
        level = levels.get(path)
        if level is None:
            level = _add_level(levels, modules, path)
        level.nodes.append(k)
    ordered = sorted(levels.values(), key=lambda lv: modules.order.get(lv.path, 0))
    for level in ordered:
        if level.path:
            levels[modules.parent(level.path)].children.append(level.path)
    for level in levels.values():
        level.children.sort(key=modules.order.__getitem__)

    # Chains of levels from the top, for lifting an edge's ends to the item each level shows.
    chain_of: dict[str, tuple[str, ...]] = {}

    def chain(path: str) -> tuple[str, ...]:
        found = chain_of.get(path)
        if found is None:
            found = chain_of[path] = (chain(modules.parent(path)) + (path,)) if path else ("",)
        return found

    edges_out: list[list] = []
    # Per level: edges as (source end, target end, kind, shape text), an end being
    # ("n", node index), ("m", child level path) or ("x", outside node index).
    level_edges: dict[str, list[tuple]] = {path: [] for path in levels}
    for edge in graph.edges:
        source, target, kind = edge[0], edge[1], edge[2]
        if kind == SAVED_BY:
            continue
        s, t = index_of.get(source), index_of.get(target)
        if s is None or t is None:
            continue
        shape = _shape_text(edge[3])
        edges_out.append([s, t, kind, shape])
        cs, ct = chain(home[s]), chain(home[t])
        common = 0
        while common < len(cs) and common < len(ct) and cs[common] == ct[common]:
            common += 1
        meet = cs[common - 1]
        s_end = ("n", s) if common == len(cs) else ("m", cs[common])
        t_end = ("n", t) if common == len(ct) else ("m", ct[common])
        if s_end != t_end:
            level_edges[meet].append((s_end, t_end, kind, shape))
        for depth in range(common, len(cs)):  # levels the edge leaves
            inner = ("n", s) if depth + 1 == len(cs) else ("m", cs[depth + 1])
            level_edges[cs[depth]].append((inner, ("x", t, PORT_OUT, s), kind, shape))
        for depth in range(common, len(ct)):  # levels the edge enters
            inner = ("n", t) if depth + 1 == len(ct) else ("m", ct[depth + 1])
            level_edges[ct[depth]].append((("x", s, PORT_IN), inner, kind, shape))

    node_rows = []
    for i in shown:
        node = nodes[i]
        node_rows.append(_node_row(node, show_attrs=options.show_attrs))
    level_paths = [lv.path for lv in ordered]
    level_number = {path: n for n, path in enumerate(level_paths)}
    for k, path in enumerate(home):
        node_rows[k]["level"] = level_number[path]

    # Which child boxes fold: by the rule a static summary folds its boxes by (box_runs).
    members: dict[str, list[Any]] = {}  # module path -> the walked nodes in it or below it
    for node in nodes:
        for path in modules.chain(node.module):
            members.setdefault(path, []).append(node)
    # A diff's boxes fold only with boxes in the same state: an added block is not one of a run of unchanged ones.
    states: dict[str, float] = {}
    for overlay in overlays:
        if overlay.scale == "diff":
            for node in nodes:
                value = overlay.values.get(node.id)
                if value is not None:
                    for path in modules.chain(node.module):
                        states[path] = roll_up(overlay.rollup, states[path], value) if path in states else value
    runs_of = functools.partial(box_runs, modules, members=members, targets=node_targets(graph.edges),
                                apart=states.get if states else None)

    # The leaf (a parameter, an input) each AccumulateGrad stores the gradient of: a port it crosses is named by it.
    kind_of = {node.id: node.kind for node in nodes}
    leaf_of = {edge[1]: graph.node(edge[0]) for edge in graph.edges
               if kind_of.get(edge[0]) in (PARAMETER, LEAF) and kind_of.get(edge[1]) == ACCUMULATE_GRAD}
    # Deepest levels first: a box's signature needs its level's template.
    templates: list[dict] = []
    template_of: dict[tuple, int] = {}
    for level in sorted(ordered, key=lambda lv: -len(chain(lv.path))):
        _build_level(level, levels, modules, nodes, shown, level_edges[level.path], template_of, templates, runs_of,
                     leaf_of)

    _add_expanded_views(ordered, levels, home, edges_out, templates, options.expand_limit)
    # Each item's label, made here once: Graphviz lays it out with these lines, the page
    # draws them (and a box opened in an expanded view is titled with its first two).
    for template in templates:
        template["labels"] = [_item_lines(item, templates) for item in template["items"]]
    _lay_out(templates, timeout, options.layout, options.layout_budget)

    finding_rows = []
    for finding in findings:
        ids = [index_of[n] for n in finding.nodes if n in index_of]
        ids += [index_of[saved_owner[n]] for n in finding.nodes if n in saved_owner and saved_owner[n] in index_of]
        finding_rows.append({
            "severity": finding.severity, "code": finding.code, "message": shown_text(finding.message, one_line=False),
            "nodes": sorted(set(ids)), "subject": shown_text(finding.subject),
        })

    # Each overlay's values by node index; NaN and infinities as "nan" (JSON has none).
    metrics: dict[str, dict[str, Any]] = {}
    for overlay in overlays:
        values = metrics[overlay.name] = {}
        if overlay.steps:  # one value per step: the page's slider picks the step
            for node_id, series in overlay.series.items():
                at = index_of.get(node_id)
                if at is not None:
                    values[str(at)] = [None if v is None else v if math.isfinite(v) else "nan" for v in series]
            continue
        for node_id, value in overlay.values.items():
            at = index_of.get(node_id)
            if at is not None:
                values[str(at)] = value if math.isfinite(value) else "nan"

    meanings = {}
    for node in nodes:
        if node.kind == OP and node.label not in meanings:
            # The call a forward pass stopped at is no backward op: its words say what happened.
            meanings[node.label] = failed_call_tooltip(node) if node.note == FAILED else describe_op(node.label)

    level_rows = []
    for path in level_paths:
        level = levels[path]
        info = modules.info.get(path, ModuleInfo(path, "" if path else "model"))
        level_rows.append({
            "path": path,
            "type": info.type_name,
            "params": info.parameters,
            "parent": level_number[modules.parent(path)] if path else -1,
            "template": level.template,
            "refs": [_ref(ref, level_number) for ref in level.refs],
        })
    start = start_level(levels, level_paths)
    for template in templates:  # laid out from the items as tuples; sent with named fields
        template["items"] = [item_record(item) for item in template["items"]]
    return {
        "format": DATA_FORMAT,
        "edge_fields": list(EDGE_FIELDS),
        "nodes": node_rows,
        "edges": edges_out,
        "levels": level_rows,
        "start": level_number[start],
        "templates": templates,
        "meanings": meanings,
        "findings": finding_rows,
        "overlays": [
            {"name": o.name, "title": shown_text(o.title), "unit": o.unit, "rollup": o.rollup, "stepped": bool(o.steps),
             "scale": o.scale, **({"notes": _overlay_notes(o, index_of)} if o.scale == "diff" else {})}
            for o in overlays if o.scale in ("log", "diff")
        ],
        "steps": next((list(o.steps) for o in overlays if o.steps), []),
        "metrics": metrics,
        **({"memory": memory_strip(memory, index_of)} if memory is not None else {}),
    }


def memory_strip(memory: Mapping[str, Any], index_of: Mapping[str, int]) -> dict:
    """``memory`` (``StepMemory.page_data()``) with its saved tensors by page node index (of
    ``index_of``, node id -> index) instead of node id; nodes the page does not show are left out.

    >>> memory_strip({"peak": 1.0, "saved": {"n2": [[0.0, 1.0, 8.0]], "n9": [[0.0, 1.0, 4.0]]}}, {"n2": 0})
    {'peak': 1.0, 'saved': [[0, [[0.0, 1.0, 8.0]]]]}
    """
    saved = [[index_of[node_id], list(spans)] for node_id, spans in memory.get("saved", {}).items() if node_id in index_of]
    return {**memory, "saved": sorted(saved)}


def _overlay_notes(overlay: Overlay, index_of: dict[str, int]) -> dict[str, str]:
    """A diff's words for each node, by node index: what changed, old -> new."""
    return {str(index_of[node_id]): shown_text(text, one_line=False)
            for node_id, text in overlay.tooltips.items() if node_id in index_of}


# The page opens past a level where one module box holds at least this share of its ops
# (GPT-2's transformer, Llama's model: 287 of 295 ops), since every reader's first click
# would be that box; the breadcrumb and Backspace still go up.
OPEN_PAST_SHARE = 0.9


def start_level(levels: dict[str, "_Level"], level_paths: Sequence[str]) -> str:
    """The level a page opens at: from the top, down through each level where one box
    (one module, not a folded run) holds at least ``OPEN_PAST_SHARE`` of the level's ops."""
    path = level_paths[0] if level_paths else ""
    while True:
        level = levels[path]
        inner = [ref[1][0] for item, ref in zip(level.items, level.refs) if item[0] == BOX and len(ref[1]) == 1]
        if not level.ops:
            return path
        big = [child for child in inner if levels[child].ops >= OPEN_PAST_SHARE * level.ops]
        if len(big) != 1:
            return path
        path = big[0]


def item_record(item: Sequence[Any]) -> dict[str, Any]:
    """One item of a level, with the names the page reads (see docs/explorer-data.md).

    >>> item_record(("box", "h.0 \u2026 h.3", "GPT2Block", 4, 2, 27, 7087872))["count"]
    4
    >>> item_record(("parameter", "fc.weight", "(2, 3)", ""))
    {'kind': 'parameter', 'label': 'fc.weight', 'shape': '(2, 3)', 'note': ''}
    """
    kind = item[0]
    if kind == BOX:
        return dict(zip(("kind", "label", "type", "count", "template", "ops", "params"), item))
    if kind in (PORT_IN, PORT_OUT):
        return {"kind": kind, "label": item[1]}
    return dict(zip(("kind", "label", "shape", "note"), item))


def _add_level(levels: dict[str, _Level], modules: ModuleTree, path: str) -> _Level:
    """The level of ``path``, made with every missing ancestor."""
    made = levels[path] = _Level(path)
    parent = modules.parent(path)
    while parent not in levels:
        levels[parent] = _Level(parent)
        parent = modules.parent(parent)
    return made


def _ref(ref: Any, level_number: dict[str, int]) -> Any:
    kind, value = ref
    if kind == "m":
        return [level_number[path] for path in value]
    return value


def _build_level(
    level: _Level,
    levels: dict[str, _Level],
    modules: ModuleTree,
    nodes: Sequence[Any],
    shown: list[int],
    edges: list[tuple],
    template_of: dict[tuple, int],
    templates: list[dict],
    runs_of: Callable[[Sequence[str]], list[list[str]]],
    leaf_of: Mapping[str, Node],
) -> None:
    """Fill ``level``'s items, references and edges, and find or make its template.

    Child modules fold into one box as a static summary folds them (``runs_of``:
    :func:`~graphviz_autograd.views.collapsing.box_runs`). The parts a huge level is
    split into are no modules of the model: alike ones (the same items and edges)
    fold, unless a path leaves and re-enters them.
    """
    prefix = level.path + "." if level.path else ""
    box_of: dict[str, int] = {}
    items: list[tuple] = []
    refs: list[Any] = []
    if level.children and modules.info[level.children[0]].type_name == PART_TYPE:
        runs = alike_runs(level.children, lambda child: levels[child].signature)
        runs = [part for run in runs for part in ([run] if len(run) == 1 or not _reenters(run, edges) else [[c] for c in run])]
    else:
        runs = runs_of(level.children)
    # Order: items as their first node was walked (the output first), boxes among them.
    first_seen: dict[tuple, int] = {}
    for k in level.nodes:
        first_seen[("n", k)] = shown[k]
    for run in runs:
        first_seen[("m", run[0])] = min(_first_node(levels, path, shown) for path in run)
    order = sorted(first_seen, key=first_seen.__getitem__)
    run_of = {run[0]: run for run in runs}
    item_of: dict[tuple, int] = {}
    for key in order:
        if key[0] == "n":
            node = nodes[shown[key[1]]]
            label = node.label
            if node.kind in (PARAMETER, LEAF) and prefix and label.startswith(prefix):
                label = label[len(prefix):]
            # An op's note is its number operands (x * 1.0001), which have no item of their own.
            # A tied weight's, its other names (each kept whole: another level may own it).
            note = (node.note if node.kind == NO_GRAD else ", ".join(op_constants(node)) if node.kind == OP
                    else "\n".join(other_names(node)) if node.kind == PARAMETER else "")
            items.append((node.kind, label, _shape_text(node.shape) if node.kind in (PARAMETER, LEAF, OUTPUT) else "",
                          note))
            refs.append(("n", key[1]))
        else:
            run = run_of[key[1]]
            child_level = levels[run[0]]
            info = modules.info[run[0]]
            name = run[0][len(prefix):] if prefix and run[0].startswith(prefix) else run[0]
            if len(run) > 1:
                last = run[-1][len(prefix):] if prefix and run[-1].startswith(prefix) else run[-1]
                name = f"{name} \u2026 {last}"
            items.append((BOX, name, info.type_name, len(run), child_level.template, child_level.ops, info.parameters))
            refs.append(("m", tuple(run)))
            for path in run:
                box_of[path] = len(items) - 1
        item_of[key] = len(items) - 1

    def end(e: tuple) -> Any:
        if e[0] == "n":
            return item_of[e]
        if e[0] == "m":
            return box_of[e[1]]
        return e

    # Ports, numbered as first met: one per outside node an edge comes from. Each is named
    # by what enters or leaves when a recorder saw it (the argument or output name of this
    # module's call: hidden_states, position_embeddings[0]; a parameter's name), else `in N`.
    # Named alike, two are one port: one tensor read twice (a rotary cos cut off once by q
    # and once by k), or one value read by several outside nodes.
    port_of: dict[tuple, int] = {}
    level_edges: dict[tuple, tuple] = {}

    def port(way: str, node_index: int, key: tuple, ref: tuple) -> int:
        at = port_of.get(key)
        if at is not None:
            return at
        name = _port_name(nodes[shown[node_index]], way, level.path, leaf_of)
        if name is None:
            name = f"{way} {sum(1 for item in items if item[0] == way) + 1}"
        elif (way, name) in port_of:
            at = port_of[key] = port_of[(way, name)]
            return at
        at = port_of[key] = port_of[(way, name)] = len(items)
        items.append((way, name, "", ""))
        refs.append(ref)
        return at

    for source, target, kind, shape in edges:
        s, t = end(source), end(target)
        if isinstance(s, tuple):
            s = port(PORT_IN, s[1], (PORT_IN, s[1]), ("x", s[1]))
        if isinstance(t, tuple):
            # One per value that leaves, however many outside nodes use it: the
            # last of a run of blocks then has the same ports as the others.
            t = port(PORT_OUT, t[3], (PORT_OUT, s), ("x", t[1]))
        if s == t:
            continue
        merged = level_edges.get((s, t, kind))
        if merged is None:
            level_edges[(s, t, kind)] = (s, t, kind, shape)
        elif merged[3] != shape:
            level_edges[(s, t, kind)] = (s, t, kind, "")
    level.items = items
    level.refs = refs
    level.in_ports = {key[1]: at for key, at in port_of.items() if key[0] == PORT_IN and isinstance(key[1], int)}
    level.ops = sum(1 for k in level.nodes if nodes[shown[k]].kind == OP)
    level.ops += sum(levels[child].ops for child in level.children)
    level.edges = list(level_edges.values())
    info = modules.info.get(level.path, ModuleInfo(level.path, "" if level.path else "model"))
    level.signature = (info.type_name, info.parameters, tuple(items), tuple(level.edges))
    template = template_of.get(level.signature)
    if template is None:
        template = template_of[level.signature] = len(templates)
        templates.append({"items": [list(item) for item in items], "edges": [list(e) for e in level.edges]})
    level.template = template


def _port_name(node: Any, way: str, path: str, leaf_of: Mapping[str, Node]) -> Optional[str]:
    """What a port of the level ``path`` is named by (see
    :func:`~graphviz_autograd.graph.descriptions.port_name`); an AccumulateGrad by its
    leaf's (``leaf_of``): a parameter or input given as an argument."""
    if node.kind == ACCUMULATE_GRAD:
        node = leaf_of.get(node.id)
        if node is None:
            return None
    return port_name(node, way, path)


def _add_expanded_views(
    ordered: list[_Level],
    levels: dict[str, _Level],
    home: list[str],
    edges_out: list[list],
    templates: list[dict],
    limit: int,
) -> None:
    """Give each template with a box in it an ``expanded`` view: the first level made
    from it drawn with every module inside opened, as nested boxes (clusters).

    Items are paths of item indexes from the level down through boxes (``[3, 0, 5]``:
    item 5 of the first module of box 0 of the first module of box 3), so the view
    fits every level of the template. A folded run is drawn once, as its first
    member; an edge into any member laid out alike goes to the first one's matching
    node, edges of a member laid out otherwise (a later call of a layer, without the
    parameters of the first) are left to the first one's, and edges between members of
    one run are left out, as its box leaves them out. A view with
    more than ``limit`` nodes is not laid out: ``{"skipped": count}``.
    """
    # Where each level sits in its parent: (parent path, box item, place in the run).
    place: dict[str, tuple[str, int, int]] = {}
    item_of_node: dict[int, int] = {}
    for level in ordered:
        for i, ref in enumerate(level.refs):
            if ref[0] == "m":
                for member, child in enumerate(ref[1]):
                    place[child] = (level.path, i, member)
            elif ref[0] == "n":
                item_of_node[ref[1]] = i
    outgoing: dict[int, list[list]] = {}
    incoming: dict[int, list[list]] = {}
    for edge in edges_out:
        outgoing.setdefault(edge[0], []).append(edge)
        incoming.setdefault(edge[1], []).append(edge)
    done: set[int] = set()
    for level in ordered:
        template = templates[level.template]
        if level.template in done or not any(item[0] == BOX for item in level.items):
            continue
        done.add(level.template)
        paths, clusters = _expanded_items(level, levels)
        if len(paths) > limit:
            template["expanded"] = {"skipped": len(paths)}
            continue
        edges = _expanded_edges(level, levels, place, item_of_node, home, outgoing, incoming, paths)
        template["expanded"] = {"items": [list(path) for path in paths], "clusters": clusters, "edges": edges}


def _expanded_items(level: _Level, levels: dict[str, _Level]) -> tuple[list[tuple[int, ...]], list[list]]:
    """The item paths of ``level`` expanded (its own ports, no inner ones) and its
    clusters as ``[path, parent cluster or -1]``, parents before children."""
    paths: list[tuple[int, ...]] = []
    clusters: list[list] = []
    stack: list[tuple[str, tuple[int, ...], int]] = [(level.path, (), -1)]
    while stack:
        path, prefix, cluster = stack.pop()
        inner = levels[path]
        boxes = []
        for i, (item, ref) in enumerate(zip(inner.items, inner.refs)):
            key = prefix + (i,)
            if item[0] == BOX:
                clusters.append([list(key), cluster])
                boxes.append((ref[1][0], key, len(clusters) - 1))
            elif prefix == () or item[0] not in (PORT_IN, PORT_OUT):
                paths.append(key)
        stack.extend(reversed(boxes))
    return paths, clusters


def _expanded_edges(
    level: _Level,
    levels: dict[str, _Level],
    place: dict[str, tuple[str, int, int]],
    item_of_node: dict[int, int],
    home: list[str],
    outgoing: dict[int, list[list]],
    incoming: dict[int, list[list]],
    paths: list[tuple[int, ...]],
) -> list[list]:
    """The graph's edges inside ``level`` and across its border, between the expanded items."""
    index = {path: n for n, path in enumerate(paths)}
    in_port = {outside: index[(i,)] for outside, i in level.in_ports.items()}
    out_port: dict[int, int] = {}
    for source, target, _kind, _shape in level.edges:
        if level.items[target][0] == PORT_OUT:
            out_port[source] = index[(target,)]

    # Each level below: its item path and place in runs from here (member 0 stands for its
    # run), and whether its items line up with those of the member standing for it: a
    # later member laid out alike (the same template) does, one that differs (a later
    # call of a layer, without the parameters its first call holds) does not, and its
    # nodes have no place of their own in the view.
    first_of = {(spot[0], spot[1]): child for child, spot in place.items() if spot[2] == 0}
    below: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {level.path: ((), ())}
    aligned: dict[str, bool] = {level.path: True}
    stack = [level.path]
    while stack:
        parent = stack.pop()
        key, members = below[parent]
        for child in levels[parent].children:
            _, box, member = place[child]
            below[child] = (key + (box,), members + (member,))
            first = first_of[(parent, box)]
            aligned[child] = aligned[parent] and (member == 0 or levels[child].template == levels[first].template)
            stack.append(child)

    def where(k: int) -> Optional[tuple[tuple[int, ...], tuple[int, ...]]]:
        found = below.get(home[k])
        if found is None:
            return None
        return found[0] + (item_of_node[k],), found[1]

    drawn: dict[tuple[int, int, str], None] = {}
    for path in below:
        if not aligned[path]:
            continue
        for k in levels[path].nodes:
            source = where(k)
            assert source is not None
            s = index[source[0]]
            for edge in outgoing.get(k, ()):
                target = where(edge[1])
                if target is None:
                    drawn[(s, out_port[source[0][0]], edge[2])] = None
                    continue
                if _between_members_of_a_run(source, target) or not aligned[home[edge[1]]]:
                    continue
                t = index[target[0]]
                if s != t:
                    drawn[(s, t, edge[2])] = None
            for edge in incoming.get(k, ()):
                if where(edge[0]) is None:
                    drawn[(in_port[edge[0]], s, edge[2])] = None
    return [list(edge) for edge in drawn]


def _between_members_of_a_run(source: tuple, target: tuple) -> bool:
    """Whether two places are in different members of one folded run of blocks."""
    for box_s, box_t, member_s, member_t in zip(source[0], target[0], source[1], target[1]):
        if box_s != box_t:
            return False
        if member_s != member_t:
            return True
    return False


def _reenters(run: list[str], edges: list[tuple]) -> bool:
    """Whether a path among one level's items leaves the child boxes of ``run`` and comes back
    into them (``edges`` as :func:`_build_level` takes them)."""
    targets: dict[tuple, set] = {}
    for source, target, _, _ in edges:
        if source[0] != "x" and target[0] != "x":
            targets.setdefault(source, set()).add(target)
    return leaves_and_returns({("m", path) for path in run}, targets)


def _first_node(levels: dict[str, _Level], path: str, shown: list[int]) -> int:
    """The walk index of the first node in a level or any level below it."""
    found = math.inf
    stack = [path]
    while stack:
        level = levels[stack.pop()]
        if level.nodes:
            found = min(found, shown[level.nodes[0]])
        stack.extend(level.children)
    return int(found) if found != math.inf else 0


def _node_row(node: Any, *, show_attrs: bool) -> dict:
    row: dict[str, Any] = {"kind": node.kind, "label": node.label}
    if node.shape is not None:
        row["shape"] = shape_text(node.shape)
    if node.dtype:
        row["dtype"] = node.dtype
    if node.device:
        row["device"] = node.device
    if node.note:
        row["note"] = node.note
    if node.module:
        row["module"] = node.module
    if node.kind == PARAMETER and other_names(node):
        row["also"] = other_names(node)
    if node.kind == OP and op_constants(node):
        row["constants"] = op_constants(node)
    if show_attrs and saved_attrs(node):
        row["attrs"] = [[k, v] for k, v in saved_attrs(node)]
    elif node.kind == NO_GRAD:
        cut_in = dict(node.attrs).get("cut in")
        if cut_in:
            row["cut_in"] = cut_in
    return row


# --- layout --------------------------------------------------------------------------


def _shape_text(shape: Optional[Sequence[int]]) -> str:
    return "" if shape is None else shape_text(tuple(shape))


def _item_lines(item: list, templates: list[dict]) -> list[str]:
    """The lines a level's item is laid out with (the page writes the same ones)."""
    kind = item[0]
    if kind == BOX:
        return box_lines(item)
    if kind in (PORT_IN, PORT_OUT):
        return [item[1]]
    if kind == PARAMETER and len(item) > 3 and item[3]:  # a tied weight: each name it goes by
        return [_short(item[1]), *(_short(f"= {name}") for name in item[3].split("\n")), item[2]]
    if kind in (PARAMETER, LEAF):
        return [_short(item[1] or UNNAMED), item[2]]
    if kind == OUTPUT:
        return [_short(item[1] or "output"), item[2]]
    if kind == NO_GRAD:
        return [_short(item[1] or NO_GRAD_LABEL)]
    if kind == OP and len(item) > 3 and item[3]:
        return [_short(item[1]), _short(f"with {item[3]}")]
    return [_short(item[1])]


def box_lines(item: Sequence[Any]) -> list[str]:
    """A child module's box: its name, its class (×N when folded) and what one of it holds.

    >>> box_lines(["box", "h.0 \u2026 h.3", "GPT2Block", 4, 2, 27, 7087872])
    ['h.0 … h.3', 'GPT2Block ×4', '27 ops, 7.1M params']
    """
    _, name, type_name, repeats, _, ops, params = item[:7]
    kind_line, counts = module_box_lines(type_name, repeats, ops, params)
    return [_short(name), _short(kind_line), counts]


def _short(text: str) -> str:
    return text if len(text) <= MAX_LABEL_CHARS else text[: MAX_LABEL_CHARS - 1] + "\u2026"


# How Graphviz lays out a level, and a level with every module opened.
LEVEL_ATTRS = {
    "graph": {"rankdir": "TB", "nodesep": "0.25", "ranksep": "0.35", "nslimit": "3"},
    "node": {"shape": "box", "fontname": "monospace", "fontsize": "10", "height": "0.3", "margin": "0.12,0.05"},
    "edge": {"fontname": "monospace", "fontsize": "8", "arrowsize": "0.6"},
}
EXPANDED_ATTRS = {
    "graph": {"rankdir": "TB", "newrank": "true", "nodesep": "0.2", "ranksep": "0.3", "nslimit": "3",
              "fontname": "monospace", "fontsize": "10", "labeljust": "l", "margin": "8"},
    "node": LEVEL_ATTRS["node"],
    "edge": {"arrowsize": "0.6"},
}


def _defaults(attrs: dict[str, dict[str, str]]) -> list[str]:
    return [f" {kind} [{attr_list(values, quoted=())}]" for kind, values in attrs.items()]


def _dot_source(template: dict, templates: list[dict]) -> tuple[str, "_ViewEdges"]:
    lines = _defaults(LEVEL_ATTRS)
    for i, item in enumerate(template["items"]):
        attrs = {"label": dot_label(_item_lines(item, templates)), **({"fontsize": "11"} if item[0] == BOX else {})}
        lines.append(f" i{i} [{attr_list(attrs)}]")
    edges = _ViewEdges(template["edges"], len(template["items"]), [quote(e[3]) if e[3] else "" for e in template["edges"]])
    lines.extend(edges.junction_line(k) for k in range(len(edges.junction_ends)))
    lines.extend(edges.lines)
    return digraph([line + "\n" for line in lines]), edges


class _ViewEdges:
    """The DOT edges of one view, and how to draw each edge of the view from Graphviz's layout.

    An output read by many items far below (a DenseNet block's feature maps, read by
    every later layer) runs down a trunk of junctions with a branch to each reader,
    as in a static drawing (:mod:`graphviz_autograd.views.junctions`): ``dot`` then sees one
    long line instead of one per read, and the view stays readable. The page still
    draws each edge as one path (:meth:`add_paths`): its output's join, the trunk down
    to its branch, and the branch, one after another; a trunk shared by many reads is
    drawn once per read, on top of itself, so that tracing an edge lights its whole way.
    """

    def __init__(self, edges: Sequence[Sequence[Any]], item_count: int, labels: Sequence[str]):
        links = [(e[0], e[1], (e[2], None, None)) for e in edges]
        rerouted = plan_junctions(item_count, links)
        self.routes: Optional[list[tuple[int, ...]]] = None
        self.junction_ends: list[tuple[int, ...]] = []  # per junction: the items whose edges run through it
        self.segment_count = len(edges)  # the DOT edges: the view's own, or those through junctions
        if rerouted is None:
            # An input without gradient pulls nothing into line: each op of a chain sat
            # between it and the op before, half a box further aside each time, and a
            # part of a long chain (see _split_big_levels) ran down the page diagonally.
            self.lines = [
                f" i{s} -> i{t} [id=e{n}{' weight=' + DATA_WEIGHT if kind == DATA else ''}{' label=' + labels[n] if labels[n] else ''}]"
                for n, (s, t, kind, *_rest) in enumerate(edges)
            ]
            return
        self.routes = routes = link_routes(rerouted, links)
        self.junction_ends = [(*j.sources, *j.reads) for j in rerouted.junctions]
        # A segment drawing one edge alone keeps that edge's label; a shared branch has none.
        users: dict[int, list[int]] = {}
        for n, route in enumerate(routes):
            users.setdefault(route[-1], []).append(n)
        names = [f"i{i}" for i in range(item_count)] + [f"j{k}" for k in range(len(rerouted.junctions))]
        self.lines = []
        for position, (s, t, rest) in enumerate(rerouted.links):
            style = EDGE_STYLES.get(rest[0], {})
            attrs = f" arrowhead=none weight={style.get('weight', '1')}" if style.get("arrowhead") == "none" else ""
            owners = users.get(position, ())
            if len(owners) == 1 and labels[owners[0]]:
                attrs += f" label={labels[owners[0]]}"
            self.lines.append(f" {names[s]} -> {names[t]} [id=e{position}{attrs}]")
        self.segment_count = len(rerouted.links)

    @staticmethod
    def junction_line(k: int) -> str:
        return f' j{k} [shape=point width=0.04 height=0.04 label=""]'

    def add_paths(self, layout: dict, segments: list[list]) -> None:
        """Put Graphviz's paths of the DOT edges in ``layout``: as each edge's
        [bezier points, arrow end, label position] (``edges``), or, with junctions, as
        ``segments`` and, per edge, the ``routes`` through them that the page joins
        into one path (each trunk written once, however many reads run down it)."""
        if self.routes is None:
            layout["edges"] = segments
        else:
            layout["segments"] = segments
            layout["routes"] = self.routes


def _expanded_item(template: dict, path: Sequence[int], templates: list[dict]) -> list:
    """The item a path of item indexes leads to, through the templates of boxes."""
    for box in path[:-1]:
        template = templates[template["items"][box][4]]
    return template["items"][path[-1]]


def cluster_lines(item: Sequence[Any]) -> list[str]:
    """The label of an opened module in an expanded view: its name and class (×N when folded),
    the first two lines of its box.

    >>> cluster_lines(["box", "h.0 \u2026 h.3", "GPT2Block", 4, 2, 27, 7087872])
    ['h.0 … h.3  GPT2Block ×4']
    """
    name, kind, _ = box_lines(item)
    return [name + "  " + kind]


def _expanded_dot_source(template: dict, templates: list[dict]) -> tuple[str, "_ViewEdges"]:
    """DOT of a template's expanded view: a cluster per opened module, no edge labels
    (their shapes are in the details), so big views stay quick to lay out."""
    expanded = template["expanded"]
    clusters = expanded["clusters"]
    cluster_of = {tuple(path): n for n, (path, _parent) in enumerate(clusters)}
    members: dict[int, list[str]] = {-1: []}
    for n, (_path, parent) in enumerate(clusters):
        members.setdefault(n, [])
        members[parent].append(f"c{n}")
    item_cluster = []
    for i, path in enumerate(expanded["items"]):
        item_cluster.append(cluster_of.get(tuple(path[:-1]), -1))
        members[item_cluster[-1]].append(f" i{i} [label={dot_label(_item_lines(_expanded_item(template, path, templates), templates))}]")
    edges = _ViewEdges(expanded["edges"], len(expanded["items"]), [""] * len(expanded["edges"]))
    # A junction sits in the innermost module box around its source and every op it feeds.
    parent_of = {n: parent for n, (_path, parent) in enumerate(clusters)}
    for k, ends in enumerate(edges.junction_ends):
        members[_innermost_cluster([item_cluster[i] for i in ends], parent_of)].append(edges.junction_line(k))
    lines = _defaults(EXPANDED_ATTRS)
    stack: list[str] = ["c-1"]
    while stack:
        entry = stack.pop()
        if entry == "}":
            lines.append(" }")
            continue
        if not entry.startswith("c"):
            lines.append(entry)
            continue
        n = int(entry[1:])
        if n >= 0:
            box = _expanded_item(template, clusters[n][0], templates)
            lines.append(f" subgraph cluster_c{n} {{ label={quote(cluster_lines(box)[0])}")
            stack.append("}")
        stack.extend(reversed(members[n]))
    lines.extend(edges.lines)
    # Module boxes one above the other in the order the data flows, not in a staircase
    # (see graphviz_autograd.stacking): one ranking of the whole view, and invisible edges.
    box_of = [f"c{n}" if n >= 0 else "" for n in item_cluster]
    outer = lambda box: f"c{parent_of[int(box[1:])]}" if parent_of[int(box[1:])] >= 0 else ""  # noqa: E731
    links = [(s, t, (kind,)) for s, t, kind in expanded["edges"]]
    lines.extend(f" i{upper} -> i{source} [style=invis weight=0]" for upper, source in stacking_edges(links, box_of, outer))
    return digraph([line + "\n" for line in lines]), edges


def _innermost_cluster(boxes: Sequence[int], parent_of: dict[int, int]) -> int:
    """The innermost cluster (-1: none) around every cluster of ``boxes``."""
    def chain(box: int) -> list[int]:
        found = [box]
        while found[-1] != -1:
            found.append(parent_of[found[-1]])
        return found

    common = chain(boxes[0])
    for box in set(boxes[1:]):
        around = set(chain(box))
        common = [c for c in common if c in around]
    return common[0]


def _lay_out(
    templates: list[dict], timeout: Optional[float], layout: str = "auto", budget: float = _DEFAULTS.layout_budget
) -> None:
    """Add ``layout`` to every template and to every expanded view: the drawing's
    size, node boxes, module boxes and edge paths.

    With ``layout="auto"``, as for a static picture, a view that ``dot`` would take
    longer than ``budget`` seconds to lay out (by :func:`choose_layout`, as a static
    picture is chosen for), or that runs past them, is laid out by the fixed layered layout instead
    (:func:`layered_positions`), its layout carrying a ``note`` the page shows; an
    expanded view is then left out (``{"skipped": count}``), as one over the limit is.
    ``"fixed"`` does so for every view, ``"dot"`` for none.
    """
    jobs: list[tuple[dict, dict, tuple[str, _ViewEdges]]] = []
    owners: list[dict] = []  # the template of each job
    for template in templates:
        jobs.append((template, template, _dot_source(template, templates)))
        owners.append(template)
        expanded = template.get("expanded")
        if expanded is not None and "items" in expanded:
            jobs.append((expanded, expanded, _expanded_dot_source(template, templates)))
            owners.append(template)
    fixed: dict[int, str] = {}  # job -> why it is not laid out by dot
    for n, (_target, view, _dot) in enumerate(jobs):
        if layout == "fixed":
            fixed[n] = "Laid out by the fixed layered layout (layout='fixed')."
        elif layout == "auto":
            chosen, why = choose_layout(_view_graph(view, owners[n], templates), layout, budget)
            if chosen == "fixed":
                fixed[n] = why
    dot_jobs = [n for n in range(len(jobs)) if n not in fixed]
    # Expanded views run in a dot of their own: laid out after other graphs with module
    # boxes, dot places boxes a little differently from run to run.
    batches = [[dot_jobs[k] for k in batch] for batch in _batches(
        [len(jobs[n][2][0]) for n in dot_jobs], ["clusters" in jobs[n][1] for n in dot_jobs])]
    limit = timeout if layout != "auto" else (budget if timeout is None else min(timeout, budget))
    advice = (
        "Pass a larger timeout=, or layout='auto' (the default) or 'fixed' to lay out such a level without dot.",
        "Pass layout='fixed' to lay out every level without dot, or explore a smaller part of the graph.",
    )

    def lay_out_batch(batch: list[int]) -> Optional[list[dict]]:
        # One dot for many small views: dot reads graph after graph and writes one JSON
        # document per graph. Starting dot costs more than laying out a small level, and
        # a model whose layers all differ (DenseNet) has hundreds of them.
        try:
            output = run_dot("".join(jobs[n][2][0] for n in batch), "json0", timeout=limit, advice=advice)
        except LayoutTimeoutError:
            if layout != "auto":
                raise
            return None
        except GraphvizNotFoundError:
            raise GraphvizNotFoundError(
                "The Graphviz 'dot' executable was not found on PATH, and the explorer page lays out its levels "
                f"with it. {GRAPHVIZ_INSTALL_HINT.partition(' or write')[0]}, or pass layout='fixed', which lays out "
                "every level without it."
            ) from None
        return _layout_documents(output, len(batch))

    with ThreadPoolExecutor(max_workers=min(_LAYOUT_WORKERS, max(1, len(batches)))) as pool:
        drawn: dict[int, dict] = {}
        for batch, documents in zip(batches, pool.map(lay_out_batch, batches)):
            if documents is None:
                for n in batch:
                    fixed[n] = (f"Laid out by the fixed layered layout: Graphviz dot did not finish within the layout "
                                f"budget of {limit:g} s (explore(..., layout='dot') waits for it).")
            else:
                drawn.update(zip(batch, documents))
    for n, (target, view, (_source, edges)) in enumerate(jobs):
        if n in drawn:
            target["layout"] = _read_layout(drawn[n], len(view["items"]), edges, len(view.get("clusters", ())))
        elif "clusters" in view:
            owners[n]["expanded"] = {"skipped": len(view["items"])}
        else:
            target["layout"] = _fixed_layout(view, owners[n], templates, fixed[n])


def _layout_documents(output: bytes, count: int) -> list[dict]:
    """The ``count`` JSON documents one ``dot -Tjson0`` wrote, or a RenderError saying
    they could not be read (a broken Graphviz that exits 0 with something else)."""
    documents: list[dict] = []
    try:
        text = output.decode("utf-8")
        decoder, at = json.JSONDecoder(), 0
        while len(documents) < count:
            while text[at].isspace():
                at += 1
            document, at = decoder.raw_decode(text, at)
            if not isinstance(document, dict):
                raise ValueError("not a graph")
            documents.append(document)
    except (ValueError, IndexError):
        shown = output[:40].decode("utf-8", "replace").strip()
        raise RenderError(
            f"Graphviz 'dot' exited without error, but its output could not be read as the layout of "
            f"{'a level' if count == 1 else f'{count} levels'} of the explorer page (JSON, {len(output):,} bytes, "
            f"beginning {shown!r}), and no page was written. Check that 'dot -V' runs the Graphviz you meant."
        ) from None
    return documents


def _view_graph(view: dict, template: dict, templates: list[dict]) -> AutogradGraph:
    """A view's items and edges as a graph (each item an op of its lines), to estimate
    how long ``dot`` takes on it and to lay it out without ``dot``."""
    if "clusters" in view:
        items = [_expanded_item(template, path, templates) for path in view["items"]]
    else:
        items = view["items"]
    nodes = tuple(Node(f"n{i}", OP, "\n".join(_item_lines(item, templates))) for i, item in enumerate(items))
    edges = tuple(Edge(f"n{e[0]}", f"n{e[1]}", e[2]) for e in view["edges"])
    return AutogradGraph(nodes, edges)


def _fixed_layout(view: dict, template: dict, templates: list[dict], note: str) -> dict:
    """A view laid out by the package's fixed layered layout (:func:`layered_positions`),
    in the form of :func:`_read_layout`: edges are straight, from box to box."""
    graph = _view_graph(view, template, templates)
    positions = layered_positions(graph)
    sizes = [node_size(node) for node in graph.nodes]
    centres = [positions[node.id] for node in graph.nodes]
    margin = 4.0
    left = min((x - w / 2 for (x, _y), (w, _h) in zip(centres, sizes)), default=0.0) - margin
    right = max((x + w / 2 for (x, _y), (w, _h) in zip(centres, sizes)), default=0.0) + margin
    bottom = min((y - h / 2 for (_x, y), (_w, h) in zip(centres, sizes)), default=0.0) - margin
    top = max((y + h / 2 for (_x, y), (_w, h) in zip(centres, sizes)), default=0.0) + margin
    # y points down on the page, up in the layout.
    boxes = [[round(x - left, 1), round(top - y, 1), round(w, 1), round(h, 1)] for (x, y), (w, h) in zip(centres, sizes)]
    paths: list[list] = []
    for edge in view["edges"]:
        (sx, sy, _sw, sh), (tx, ty, _tw, th) = boxes[edge[0]], boxes[edge[1]]
        down = 1.0 if ty >= sy else -1.0
        start = [sx, round(sy + down * sh / 2, 1)]
        tip = [tx, round(ty - down * th / 2, 1)]
        dx, dy = tip[0] - start[0], tip[1] - start[1]
        length = math.hypot(dx, dy) or 1.0
        end = [round(tip[0] - dx / length * 6, 1), round(tip[1] - dy / length * 6, 1)]
        middle = [round((start[0] + end[0]) / 2, 1), round((start[1] + end[1]) / 2, 1)]
        paths.append([start + start + end + end, tip, middle])
    return {"width": round(right - left, 1), "height": round(top - bottom, 1), "nodes": boxes, "edges": paths, "note": note}


def _batches(sizes: Sequence[int], alone: Sequence[bool]) -> list[list[int]]:
    """Job numbers in groups for one dot each: a big view alone, and each one ``alone``
    says; small ones together, about as much DOT in each group as in the biggest view;
    the group with the biggest view first, so that one long layout does not start last.

    >>> _batches([50_000, 10, 20, 30_000, 40], [False, False, True, False, False])
    [[0], [3, 4, 1], [2]]
    """
    order = sorted(range(len(sizes)), key=lambda n: -sizes[n])
    limit = max(max(sizes, default=0), _BATCH_CHARS)
    batches: list[list[int]] = [[n] for n in order if alone[n]]
    filled = limit
    shared: list[list[int]] = []
    for n in order:
        if alone[n]:
            continue
        if filled + sizes[n] > limit:
            shared.append([])
            filled = 0
        shared[-1].append(n)
        filled += sizes[n]
    return sorted(batches + shared, key=lambda batch: -sizes[batch[0]])


def _read_layout(drawn: dict, item_count: int, edges: "_ViewEdges", cluster_count: int = 0) -> dict:
    """Graphviz's json0 output as the page draws it, y pointing down, in points rounded to tenths."""
    x0, y0, x1, y1 = (float(v) for v in drawn.get("bb", "0,0,0,0").split(","))
    height = y1 - y0

    def point(text: str) -> list[float]:
        x, y = text.split(",")[:2]
        return [round(float(x) - x0, 1), round(height - (float(y) - y0), 1)]

    boxes: list[list[float]] = [[0, 0, 0, 0]] * item_count
    clusters: list[list[float]] = [[0, 0, 0, 0]] * cluster_count
    for obj in drawn.get("objects", []):
        name = obj.get("name", "")
        if name.startswith("cluster_c") and "bb" in obj:
            left, bottom, right, top = (float(v) for v in obj["bb"].split(","))
            corner = point(f"{left},{top}")
            clusters[int(name[len("cluster_c"):])] = corner + [round(right - left, 1), round(top - bottom, 1)]
            continue
        if not name.startswith("i") or "pos" not in obj:
            continue
        index = int(name[1:])
        x, y = point(obj["pos"])
        boxes[index] = [x, y, round(float(obj["width"]) * _POINTS, 1), round(float(obj["height"]) * _POINTS, 1)]
    paths: list[list] = [[[], None, None]] * edges.segment_count
    for edge in drawn.get("edges", []):
        # Graphviz lists edges in an order of its own: each carries the id it was given.
        number = int(edge.get("id", "e-1")[1:])
        if not 0 <= number < edges.segment_count or "pos" not in edge:
            continue
        points = []
        arrow_end = None
        for part in edge["pos"].split():
            if part.startswith("e,"):
                arrow_end = point(part[2:])
            elif not part.startswith("s,"):
                points.append(point(part))
        label = point(edge["lp"]) if "lp" in edge else None
        paths[number] = [[c for p in points for c in p], arrow_end, label]
    layout = {"width": round(x1 - x0, 1), "height": round(height, 1), "nodes": boxes}
    edges.add_paths(layout, paths)
    if cluster_count:
        layout["clusters"] = clusters
    return layout


# --- the page ------------------------------------------------------------------------


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(_WEB).joinpath(name).read_text(encoding="utf-8")


def embedded_json(data: Any) -> str:
    """``data`` as JSON that can sit inside a ``<script>`` element: no ``<``, ``>`` or
    ``&`` appears as itself, so no name can end the element or open a comment.

    >>> embedded_json({"name": "</script><img>"})
    '{"name":"\\\\u003c/script\\\\u003e\\\\u003cimg\\\\u003e"}'
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def page_html(data: dict, title: str) -> str:
    """The explorer page for ``data`` (:func:`explorer_data`), everything inlined."""
    page = _asset("explorer.html")
    script = _asset("explorer.js")
    vendor = _asset("vendor/svg-pan-zoom/svg-pan-zoom.min.js")
    for text in (script, vendor):
        if "</script" in text.lower():  # would end the element early
            raise AssertionError("an inlined script contains '</script'")
    parts = {
        "{{TITLE}}": html_text.escape(title, quote=True),
        "{{STYLE}}": _asset("explorer.css"),
        "{{DATA}}": embedded_json(data),
        "{{VENDOR}}": vendor,
        "{{SCRIPT}}": script,
    }
    # One pass, so that nothing inserted is read again as a placeholder.
    out = []
    rest = page
    while True:
        start = rest.find("{{")
        if start < 0:
            out.append(rest)
            break
        stop = rest.find("}}", start)
        key = rest[start : stop + 2]
        out.append(rest[:start])
        out.append(parts.get(key, key))
        rest = rest[stop + 2 :]
    return "".join(out)


__all__ = ["Explorer", "explore", "explorer_data", "memory_strip", "page_html", "embedded_json"]
