"""AutogradGraph -> DOT text. The only module that quotes or escapes.

Output is byte-stable: node ids come from the walk (``n0, n1, ...``), attributes
are written in sorted order, and nothing depends on memory addresses, versions,
paths or time.

>>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, Node, Edge, OP, OUTPUT
>>> g = AutogradGraph((Node("n0", OUTPUT, "loss", shape=()), Node("n1", OP, "SumBackward0")),
...                   (Edge("n1", "n0"),))
>>> print(to_dot(g), end="")  # doctest: +NORMALIZE_WHITESPACE
digraph {
    graph [nslimit=3 rankdir=TB]
    node [fontname=monospace fontsize=10 height=0.2 shape=box style=filled]
    n0 [fillcolor=darkolivegreen1 label="loss\\n()" tooltip="output loss\\nshape ()"]
    n1 [fillcolor=lightgrey label=SumBackward0 tooltip="Gradient of sum: sum over elements.\\nThe trailing 0 is PyTorch's overload index, not a layer number."]
    n1 -> n0
}
"""

from __future__ import annotations

import functools
import re
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence, cast

from ..graph.module_tree import ModuleTree
from ..graph.descriptions import (
    NO_GRAD_LABEL, UNNAMED, constant_lines, describe, failed_call_lines, junction_lines, module_label_lines, shape_text, tensor_headline,
)
from ..graph.autograd_graph import (
    ACCUMULATE_GRAD, DATA, FAILED, LEAF, MODULE, NO_GRAD, NODE_KINDS, OP, OUTPUT, PARAMETER, SAVED,
)
from ..graph.autograd_graph import (
    AutogradGraph, Columns, ModuleInfo, Node, Shape, new_record, cut_location, op_constants, other_names, saved_attrs,
)
from ..views.junctions import Rerouted, graph_junctions
from ..views.stacking import graph_stacking_edges
from ..graph.style import (
    CLUSTER_ATTRS,
    CLUSTERED_GRAPH_ATTRS,
    DATA_JOIN,
    EDGE_LABEL_ATTRS,
    EDGE_STYLES,
    FAILED_STYLE,
    GRAPH_ATTRS,
    JUNCTION_ATTRS,
    LEGEND_TEXT,
    NODE_DEFAULTS,
    STACKING_EDGE_ATTRS,
    resolve_theme,
)
from ..options import DrawOptions
from ..views.overlays import Overlay
from ..views.page_fit import COMPACT_RANKSEP, row_of_rows, rows_possible
from ..views.ports import EdgeKey, EdgeNames
from ..views.prepared import View, prepare
from ..views.shown import drawn_text
from .overlay_styles import COLOUR_BAR, overlay_styles

DEFAULT_DTYPE = "float32"
# to_dot joins node and edge lines in runs of this many (see body_lines).
_JOIN_EVERY = 16_384

# Writer.node_text reads this many node contents at the start of a run of at least
# _FEW_CONTENTS times as many; with fewer than one distinct content in _FEW_CONTENTS among
# them, it writes the run in C-level passes. (A small graph is written by the loop: the
# look costs more than the passes save there.)
_SAMPLED_CONTENTS = 512
_FEW_CONTENTS = 8

# Kinds whose box shows a tensor's name over its shape (see _Writer.tensor_values).
_TENSOR_KINDS = frozenset((OUTPUT, PARAMETER, LEAF, SAVED))
_PLAIN_ID = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|-?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)")
_DOT_KEYWORDS = {"node", "edge", "graph", "digraph", "subgraph", "strict"}
# Every character escape() changes; most labels hold none, and one search is
# cheaper than the passes below.
_NEEDS_ESCAPE = re.compile(r'[\\"&\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]')
# Stand-ins for a named tensor's name and the numbers of its shape, written where they
# go to cut a node's text into pieces (see _Writer.named_tensor_pieces): private-use
# characters, which escape() leaves as they are.
_NAME_MARK = "\ue000"
_SHAPE_TEXT_MARK = "\ue001"
_SHOWN_NAME_MARK = "\ue002"  # what cut_name() gives for _NAME_MARK: the name as a label shows it


class _ShapeMark:
    def __str__(self) -> str:
        return _SHAPE_TEXT_MARK


_SHAPE_MARK = _ShapeMark()
# Where a named tensor's name, its shape's text and its name as cut for the label go
# among the pieces of its attributes.
NAME_SLOT, SHAPE_SLOT, SHOWN_NAME_SLOT = 0, 1, 2
_SLOT_OF_MARK = {_NAME_MARK: NAME_SLOT, _SHOWN_NAME_MARK: SHOWN_NAME_SLOT}
_MARKS = re.compile(f"({_NAME_MARK}|{_SHOWN_NAME_MARK}|\\({_SHAPE_TEXT_MARK}(?:, {_SHAPE_TEXT_MARK})*\\))")
_NEEDS_ESCAPE_BUT_NEWLINE = re.compile(r'[\\"&\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]')


def escape(text: str, line_end: str = "\\n") -> str:
    """Text made safe inside a DOT double-quoted string, shown exactly as given.

    Backslashes and quotes are escaped, ``&`` is written as an entity (Graphviz
    decodes entities even in plain labels), line breaks (``\\n``, ``\\r\\n``,
    ``\\r``) become ``line_end`` (DOT's centred ``\\n``, or ``\\l`` in a
    left-justified label), a tab becomes a space, other control characters are
    shown as ``\\xNN``, and lone surrogates, U+FFFE and U+FFFF as ``\\uNNNN``.

    >>> escape('a "b" \\\\ c & d')
    'a \\\\"b\\\\" \\\\\\\\ c &amp; d'
    >>> print(escape("bell\\a, nul\\x00"))
    bell\\\\x07, nul\\\\x00
    """
    if not _NEEDS_ESCAPE.search(text):
        return text
    if not _NEEDS_ESCAPE_BUT_NEWLINE.search(text):
        # Every tooltip has line breaks and most have nothing else to escape: one
        # replace instead of the passes below, which would change nothing else.
        return text.replace("\n", line_end)
    # Line breaks are made one kind and tabs spaces first; what is left that cannot be
    # shown becomes an escape (drawn_text), whose backslash is then doubled with the
    # others, as DOT reads one shown backslash.
    text = drawn_text(text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", " "), one_line=False)
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("&", "&amp;")
    return text.replace("\n", line_end)


def quote(text: str) -> str:
    """A DOT string literal for any text."""
    return '"' + escape(text) + '"'


def attr_value(value: str) -> str:
    """An attribute value: bare when DOT reads it as an ID, quoted otherwise."""
    if _PLAIN_ID.fullmatch(value) and value.lower() not in _DOT_KEYWORDS:
        return value
    return quote(value)


def xlabel_value(text: str, fontcolor: str) -> str:
    """A node's ``xlabel`` (written beside it, outside its fill), as DOT reads it. Graphviz
    draws an xlabel in the node's ``fontcolor``: white text for a dark fill would be white on
    the page, so with any colour but black it is an HTML label in black of its own (its text
    escaped as a key's table escapes it, :func:`html_text`).

    >>> xlabel_value("1.2 ms · 25%", "black"), xlabel_value("9 MiB < 10", "white")
    ('"1.2 ms · 25%"', '<<font color="black">9 MiB &lt; 10</font>>')
    """
    if fontcolor == "black":
        return quote(text)
    return '<<font color="black">' + html_text(text) + "</font>>"


def label(lines: Iterable[str], left: bool = False) -> str:
    """A quoted multi-line label; ``left`` justifies every line to the left."""
    if left:
        return '"' + "".join(escape(line, "\\l") + "\\l" for line in lines) + '"'
    return '"' + "\\n".join(escape(line) for line in lines) + '"'


def read_label(written: str) -> list[str]:
    r"""The text lines of a label or value as this module wrote it; the inverse of :func:`label`.

    For reading DOT back (the golden-file plugin summarises a mismatch with it).

    >>> read_label(r'"fc.weight\n(2, 4)"'), read_label("MulBackward0")
    (['fc.weight', '(2, 4)'], ['MulBackward0'])
    >>> read_label(label(['op', 'a: "x" & \\'], left=True))
    ['op', 'a: "x" & \\']
    """
    if not written.startswith('"'):
        return [written]
    lines: list[str] = []
    line: list[str] = []
    chars, i = written[1:-1], 0
    while i < len(chars):
        char = chars[i]
        if char == "\\" and i + 1 < len(chars):
            i += 1
            if chars[i] in "nlr":
                lines.append("".join(line))
                line = []
            else:
                line.append(chars[i])
        else:
            line.append(char)
        i += 1
    if line or not lines:
        lines.append("".join(line))
    return [text.replace("&amp;", "&") for text in lines]


def tooltip_value(lines: Iterable[str]) -> str:
    r"""A quoted tooltip of several lines, shown exactly as given.

    Graphviz reads a tooltip's backslashes once more than a label's (``\N`` would
    become the node's name), so each backslash :func:`escape` writes is doubled.

    >>> tooltip_value(["a\\b", 'say "hi"'])
    '"a\\\\\\\\b\\nsay \\"hi\\""'
    """
    return '"' + escape("\n".join(lines)).replace("\\\\", "\\\\\\\\") + '"'


def attr_list(attrs: Mapping[str, str], quoted: Iterable[str] = ("label",)) -> str:
    """``key=value`` pairs in sorted order; values of ``quoted`` keys come already quoted, the rest is quoted here.

    Names are quoted as values are: a theme may name any attribute.
    """
    quoted = set(quoted)
    return " ".join(
        f"{attr_value(key)}={attrs[key] if key in quoted else attr_value(attrs[key])}" for key in sorted(attrs)
    )


def to_dot(
    graph: AutogradGraph, options: Optional[DrawOptions] = None, *, overlays: Sequence[Overlay] = (), **changes: Any
) -> str:
    """DOT source for ``graph``, drawn with ``options`` (a :class:`DrawOptions`) or the
    keyword options of ``make_dot`` (``show_attrs``, ``direction``, ``depth``...); the
    same bytes as ``make_dot(graph, ...).source`` with ``layout="dot"``, runs of identical
    blocks folded to one unless ``fold_repeated=False``, and a recorded graph too big
    for a page drawn as the largest module summary that fits, with a note (see
    :func:`graphviz_autograd.views.prepared.prepare`)."""
    return dot_source(prepare(graph, options, overlays=overlays, **changes))


def dot_source(view: View) -> str:
    """The whole DOT source of ``view``, as Graphviz ``dot`` lays it out."""
    # One join over every piece: ``head + body + tail`` would copy a big graph's
    # text (hundreds of MB for a million ops) twice more.
    text = ""
    for piece in _body_pieces(view, _JOIN_EVERY, True):
        # Grown in place: CPython extends a str that nothing else refers to, so the
        # whole text and all its pieces are never held at once (a million-op chain's
        # DOT is 460 MB; a join of its pieces would hold twice that).
        text += piece
    return text


def digraph(lines: list[str]) -> str:
    """``lines`` from :func:`body_lines` (and any added to them) as a whole DOT graph.

    >>> digraph(["\\tn0\\n"])
    'digraph {\\n\\tn0\\n}\\n'
    """
    return "".join(["digraph {\n", *lines, "}\n"])


def body_lines(view: View, *, junctions: Optional[bool] = None) -> list[str]:
    """The statements between ``digraph {`` and ``}`` of ``view``, one line each.

    Of the options: ``show_attrs`` lists each op's saved values in its box,
    ``show_saved`` draws the tensors ops saved for backward (both need a walk with
    ``collect_saved=True``). Labels longer than ``max_attr_chars`` are cut.
    ``show_device`` adds each tensor's device. ``theme`` overrides colours per node
    kind; ``legend`` adds a key. ``clusters`` draws each module of a recorded graph
    as a box around the nodes its forward made (a graph without module info is
    drawn as without it). ``show_shapes`` writes the shape of the tensor along each
    data edge that knows it. ``junctions`` (the option, or the argument when given)
    draws an output read by many ops far below it as a trunk with a branch to each
    (see :mod:`graphviz_autograd.views.junctions`).
    What is drawn (page fit, split, hidden kinds, overlays) the view decided.
    Every node has a tooltip (shown in SVG) saying what its short label leaves out;
    the view's overlays colour nodes and add their keys, and its notes draw boxes
    in a cluster of their own that explains them.
    """
    return list(_body_pieces(view, junctions=junctions))


def _body_pieces(
    view: View, join_every: int = 0, braces: bool = False, junctions: Optional[bool] = None
) -> Iterator[str]:
    """The pieces of :func:`body_lines`, made as they are read: with ``join_every``,
    each run of that many node or edge lines comes as one piece."""
    options = view.options
    shown = view.graph
    theme, show_shapes, clusters = options.theme, options.show_shapes, options.clusters
    styles = resolve_theme(theme)
    styles_key = _DEFAULT_STYLES_KEY if theme is None else _frozen(styles)
    node_styles, key = overlay_styles(view.overlays)
    notes = [*key, *view.notes]
    writer = _Writer(
        shown, styles, max(options.max_attr_chars, 4), options.show_attrs, options.show_device, node_styles or None,
        styles_key,
    )

    if braces:  # to_dot's whole graph
        yield "digraph {\n"
    yield from _header_lines(options.direction, view.compact)
    raw = writer.raw_columns
    tail = []
    if options.legend:
        kinds = set(map(itemgetter(0), raw.contents))
        tail.extend(_legend_lines([k for k in NODE_KINDS if k in kinds], styles))
    if notes:
        tail.extend(_note_lines(notes))
    if braces:
        tail.append("}\n")
    run_length = join_every
    in_runs = run_length > 0
    columns = writer.columns
    with_junctions = options.junctions if junctions is None else junctions
    rerouted = graph_junctions(shown) if with_junctions else None
    numbered = writer.raw_columns.ids is None
    junction_lines = _junction_lines(columns, rerouted, numbered) if rerouted is not None else []
    if clusters and shown.modules:
        yield from _cluster_lines(columns, shown.modules, writer, view.compact, rerouted, junction_lines)
    elif in_runs:
        # to_dot: each run of lines joined as soon as written, so that a million-node
        # graph never holds millions of line strings at once.
        count = len(columns.contents)
        yield from (writer.node_text(i, min(i + run_length, count)) for i in range(0, count, run_length))
        yield from (line for _, line in junction_lines)
    else:
        yield from writer.node_lines(range(len(columns.contents)))
        yield from (line for _, line in junction_lines)
    if rerouted is not None:
        columns = Columns(writer.ids + [junction_id for junction_id, _ in junction_lines], columns.contents, rerouted.links)
    names = view.edge_names
    if in_runs:
        count = len(columns.links)
        yield from ("".join(_edge_lines(columns, show_shapes, i, i + run_length, names)) for i in range(0, count, run_length))
    else:
        yield from _edge_lines(columns, show_shapes, names=names)
    if rows_possible(len(columns.contents)):
        ids = writer.ids
        # A long row of inputs laid as a row of rows (the estimate of page_fit counts the same edges).
        yield from (f"\t{ids[upper]} -> {ids[lower]}{STACKING_EDGE_END}" for upper, lower in row_of_rows(shown, options.direction))
    yield from tail


def _junction_lines(columns: Columns, rerouted: Rerouted, numbered: bool = False) -> list[tuple[str, str]]:
    """(id, line) of each junction of ``rerouted``: a point named after the first node whose
    output runs through it, ``n12_j0``, with a tooltip saying whose outputs branch there.
    ``numbered``: the graph's ids are a walk's ``n0, n1, ...``, which no junction id can be."""
    ids = columns.ids
    assert ids is not None
    suffix = "_j"
    if not numbered:
        # A hand-built graph may hold any id: the junctions' ids take a suffix none of them has.
        taken = set(ids)
        while any(f"{ids[j.owner]}{suffix}{j.number}" in taken for j in rerouted.junctions):
            suffix += "j"
    contents = columns.contents
    shown: dict[int, tuple[str, str]] = {}  # node index -> (kind, label); a bus names each output many times

    def kind_and_label(index: int) -> tuple[str, str]:
        found = shown.get(index)
        if found is None:
            found = shown[index] = (contents[index][0], contents[index][1]) if index < len(contents) else ("", ids[index])
        return found

    lines = []
    templates = _junction_templates()
    for junction in rerouted.junctions:
        head, tail = templates[junction.kind]
        tooltip = tooltip_value(junction_lines(list(map(kind_and_label, junction.sources)), len(junction.reads), junction.further))
        junction_id = f"{ids[junction.owner]}{suffix}{junction.number}"
        lines.append((junction_id, f"\t{junction_id} [{head}{tooltip}{tail}]\n"))
    return lines


@functools.lru_cache(maxsize=1)
def _junction_templates() -> dict[str, tuple[str, str]]:
    """Edge kind -> a junction's attribute list cut where its tooltip goes, written by
    :func:`attr_list` once: JUNCTION_ATTRS is a constant of the package."""
    return {kind: _around_value(attrs, "tooltip") for kind, attrs in JUNCTION_ATTRS.items()}


def edge_shape_text(shape: tuple[int, ...], dtype: Optional[str]) -> str:
    """The shape along an edge, with its dtype when it is not float32: ``(2, 3) float16``."""
    text = shape_text(shape)
    return text if not dtype or dtype == DEFAULT_DTYPE else f"{text} {dtype}"


@functools.lru_cache(maxsize=None)
def _header_lines(direction: str, compact: bool = False) -> tuple[str, str]:
    """The graph's and the nodes' default attributes: the same for every graph drawn in
    ``direction``, but for the closer gap between ranks of a ``compact`` one."""
    graph_attrs = dict(GRAPH_ATTRS, rankdir=direction)
    if compact:
        graph_attrs["ranksep"] = f"{COMPACT_RANKSEP:g}"
    return f"\tgraph [{attr_list(graph_attrs)}]\n", f"\tnode [{attr_list(NODE_DEFAULTS)}]\n"


@functools.lru_cache(maxsize=1)
def _edge_line_ends() -> dict[str, str]:
    """Edge kind -> what follows the target's id on its line: the attributes (if any) and the line
    break. Written once: EDGE_STYLES is a constant of the package."""
    return {kind: (f" [{attr_list(attrs)}]\n" if attrs else "\n") for kind, attrs in EDGE_STYLES.items()}


def _edge_lines(
    columns: Columns, show_shapes: bool, start: int = 0, stop: Optional[int] = None,
    names: Mapping[EdgeKey, EdgeNames] = {},
) -> list[str]:
    """The lines of the edges ``columns.links[start:stop]``; those in ``names`` (by source
    id, target id and kind) carry what enters and leaves a module along them."""
    ids = columns.ids
    assert ids is not None  # the writer's columns have their ids filled in
    links = columns.links if start == 0 and stop is None else columns.links[start:stop]
    line_ends = _edge_line_ends()
    if names:
        return _named_edge_lines(ids, links, show_shapes, names)
    if not show_shapes:
        # Indexing is faster than attribute reads on a million edges.
        return [f"\t{ids[s]} -> {ids[t]}{line_ends[rest[0]]}" for s, t, rest in links]
    shaped: dict[tuple, str] = {}  # (kind, shape, dtype) -> line end; a big graph repeats a few shapes
    lines = []
    for s, t, rest in links:
        kind = rest[0]
        if (kind != DATA and kind != DATA_JOIN) or rest[1] is None:
            lines.append(f"\t{ids[s]} -> {ids[t]}{line_ends[kind]}")
            continue
        key = (kind, rest[1], rest[2])
        end = shaped.get(key)
        if end is None:
            attrs = dict(EDGE_STYLES[kind], **EDGE_LABEL_ATTRS, label=quote(edge_shape_text(rest[1], rest[2])))
            end = shaped[key] = f" [{attr_list(attrs)}]\n"
        lines.append(f"\t{ids[s]} -> {ids[t]}{end}")
    return lines


def _named_edge_lines(ids: Sequence[str], links: Sequence[tuple], show_shapes: bool,
                      names: Mapping[EdgeKey, EdgeNames]) -> list[str]:
    """:func:`_edge_lines` of a graph some of whose edges cross a module's border by a name
    (a recorded graph's): an edge into or out of a module box is labelled with the
    argument it enters by and the output it leaves by (``output[0] → hidden_states``),
    above its shape when shapes are shown, and every border it crosses is in its tooltip.
    A label beside the edge, not at its end: Graphviz makes room for it there, where a
    head label would run into the title of a cluster around the box.

    >>> from graphviz_autograd.views.ports import EdgeNames
    >>> named = {("n1", "n0", DATA): EdgeNames("hidden_states", "", ("enters h.0 as hidden_states",))}
    >>> _named_edge_lines(["n0", "n1"], [(1, 0, (DATA,))], False, named)
    ['\\tn1 -> n0 [fontcolor=gray30 fontsize=8 tooltip="enters h.0 as hidden_states" xlabel="hidden_states"]\\n']
    """
    lines = []
    line_ends = _edge_line_ends()
    for s, t, rest in links:
        kind = rest[0]
        shaped = show_shapes and (kind == DATA or kind == DATA_JOIN) and len(rest) > 1 and rest[1] is not None
        named = names.get((ids[s], ids[t], kind))
        if named is None and not shaped:
            lines.append(f"\t{ids[s]} -> {ids[t]}{line_ends[kind]}")
            continue
        attrs = dict(EDGE_STYLES[kind])
        if named is not None:
            if named.head or named.tail:
                attrs.update(EDGE_LABEL_ATTRS, xlabel=quote(" \u2192 ".join(name for name in (named.tail, named.head) if name)))
            if named.crossings:
                attrs["tooltip"] = tooltip_value(named.crossings)
        if shaped:
            attrs.update(EDGE_LABEL_ATTRS, label=quote(edge_shape_text(rest[1], rest[2])))
        lines.append(f"\t{ids[s]} -> {ids[t]} [{attr_list(attrs, quoted=('label', 'xlabel', 'tooltip'))}]\n")
    return lines


CLUSTERED_GRAPH_LINE = f"\tgraph [{attr_list(CLUSTERED_GRAPH_ATTRS)}]\n"
# A compact drawing (too tall for a page) keeps its closer ranks with boxes on too.
COMPACT_CLUSTERED_GRAPH_LINE = f"\tgraph [{attr_list(dict(CLUSTERED_GRAPH_ATTRS, ranksep=f'{COMPACT_RANKSEP:g}'))}]\n"
STACKING_EDGE_END = f" [{attr_list(STACKING_EDGE_ATTRS)}]\n"


def cluster_title(module: ModuleInfo) -> str:
    """The title of a module's box: ``path (TypeName)``, as both layouts write it.

    >>> cluster_title(ModuleInfo("encoder.layer.0", "BertLayer"))
    'encoder.layer.0 (BertLayer)'
    """
    return f"{module.path} ({module.type_name})" if module.type_name else module.path


def _cluster_lines(
    columns: Columns,
    modules: tuple[ModuleInfo, ...],
    writer: "_Writer",
    compact: bool = False,
    rerouted: Optional[Rerouted] = None,
    junctions: Sequence[tuple[str, str]] = (),
) -> list[str]:
    """Nodes of the model itself first, then one nested cluster per module that holds any node.

    A node sits in the cluster of its ``module`` (or of the nearest listed module
    above it). Clusters come in the order of ``modules`` and are named from their
    index there, never from a module's name. A junction (``junctions``: id and
    line of each of ``rerouted.junctions``) sits in the innermost cluster around
    both its source and the ops it feeds, so that a trunk runs beside the boxes
    of the layers it feeds rather than through them.
    """
    tree = ModuleTree.of(modules)
    index = tree.order
    by_module: dict[str, list[int]] = {}  # cluster -> indices of its nodes
    box_of: list[str] = []  # node index -> its cluster
    for i, content in enumerate(columns.contents):
        cluster = tree.listed(content[7])  # Node.module
        by_module.setdefault(cluster, []).append(i)
        box_of.append(cluster)

    junctions_in: dict[str, list[str]] = {}  # cluster -> lines of the junctions in it
    if rerouted is not None:
        for junction, (_, line) in zip(rerouted.junctions, junctions):
            ends = [*junction.sources, *junction.reads]
            box = _innermost_common_box([box_of[i] if i < len(box_of) else "" for i in ends], tree.parent)
            junctions_in.setdefault(box, []).append(line)

    used = tree.holding(by_module)  # clusters holding a node, directly or below
    children = {path: [c for c in inside if c in used] for path, inside in tree.children.items()}

    # One ranking of the whole graph, not one per cluster: with the invisible edges
    # of stacking_edges, each box then spans the ranks of its own ops and the
    # boxes of a model stack in one column (see graphviz_autograd.stacking).
    lines = [COMPACT_CLUSTERED_GRAPH_LINE if compact else CLUSTERED_GRAPH_LINE]
    lines.extend(writer.node_lines(by_module.get("", ())))
    lines.extend(junctions_in.get("", ()))
    # Every cluster has the same attributes but its title: sorted and quoted once.
    before_title, after_title = _around_value(CLUSTER_ATTRS, "label")
    # Depth first with an explicit stack: (path, depth), or a closing brace as (None, depth).
    stack: list[tuple[Optional[str], int]] = [(path, 1) for path in reversed(children.get("", []))]
    while stack:
        path, depth = stack.pop()
        indent = "\t" * depth
        if path is None:
            lines.append(indent + "}\n")
            continue
        title = cluster_title(modules[index[path]])
        lines.append(f"{indent}subgraph cluster_m{index[path]} {{\n")
        lines.append(f"{indent}\tgraph [{before_title}{quote(title)}{after_title}]\n")
        lines.extend(indent + line for line in writer.node_lines(by_module.get(path, ())))
        lines.extend(indent + line for line in junctions_in.get(path, ()))
        stack.append((None, depth))
        stack.extend((child, depth + 1) for child in reversed(children.get(path, [])))
    ids = columns.ids
    assert ids is not None
    lines.extend(
        f"\t{ids[upper]} -> {ids[source]}{STACKING_EDGE_END}"
        for upper, source in graph_stacking_edges(writer.graph)
    )
    return lines


def _innermost_common_box(boxes: Sequence[str], outer: Callable[[str], str]) -> str:
    """The innermost cluster around every one of ``boxes`` ('' for none but the graph);
    ``outer(path)`` is the cluster around ``path``."""
    around = []  # the clusters around the first box, innermost first
    path = boxes[0]
    while path:
        around.append(path)
        path = outer(path)
    common = 0  # index in ``around`` of the innermost cluster around all boxes so far
    for box in set(boxes[1:]):
        path = box
        while path and (path not in around or around.index(path) < common):
            path = outer(path)
        if not path:
            return ""
        common = around.index(path)
    return around[common] if around else ""


class _Writer:
    """Writes node lines; caches what repeats across a big graph."""

    def __init__(
        self,
        graph: AutogradGraph,
        styles: dict,
        max_chars: int,
        show_attrs: bool,
        show_device: bool,
        node_styles: Optional[Mapping[str, Mapping[str, str]]] = None,
        styles_key: Optional[tuple] = None,
    ):
        self.params_given = graph.params_given
        self.graph = graph
        # The columns as walked: ids None for n0, n1, ...
        self.raw_columns = graph.columns(fill_ids=False)
        self.node_styles = node_styles or {}
        self.max_chars = max_chars
        self.show_attrs = show_attrs
        self.show_device = show_device
        self.styles = styles
        self.edge_shapes = _edge_shapes(graph)
        self.templates: dict[str, tuple[str, str, str]] = {}  # node kind -> _attr_template() of its style
        self.op_labels: dict[str, str] = {}  # op name -> its label value
        # (kind, shape, dtype, device, attrs, note, module) -> (shape line, rest of the tooltip),
        # both written: what a tensor node shows but its name (see tensor_values).
        self.tensor_parts: dict[tuple, tuple[str, str]] = {}
        # (kind, dtype, device, attrs, note, module) -> a named tensor node's attributes cut
        # where its name and shape go (see named_tensor_pieces).
        self.named_parts: dict[tuple, tuple] = {}
        # Node content (Node[1:], with its edge shapes when there are any) -> its attributes,
        # kept for every writer with the same settings (see _written_attrs).
        self.attrs_by_content = _written_attrs(
            (self.params_given, max_chars, show_attrs, show_device, _frozen(styles) if styles_key is None else styles_key)
        )
        # id() of a content tuple of self.columns -> its attributes, for the loop of
        # node_lines. A walk shares one content among
        # nodes alike, so most nodes are found here without hashing their content; the
        # tuples live as long as the columns, so ids stay theirs.
        self.attrs_by_identity: dict[int, str] = {}
        # The same, as a node's line ends after its id (see node_text).
        self.line_ends_by_identity: dict[int, str] = {}

    def node_lines(self, indices: Iterable[int]) -> list[str]:
        """One line per node (by index in :attr:`columns`): ``\\t<id> [<attributes>]\\n``.

        The attributes depend on every field of a node but its id (and on the
        shapes along its edges, when the walk collected them), and a big graph
        repeats them (each MulBackward0 is drawn alike, each input without gradient
        too), so they are written once per distinct node content and then reused:
        a million-op chain writes three, not two million.
        """
        ids, contents = self.ids, self.columns.contents
        node_styles = self.node_styles
        if self.edge_shapes is None and not node_styles:
            by_identity = self.attrs_by_identity
            known = by_identity.get
            if type(indices) is range and indices.step == 1:  # a run of nodes: no indexing per node
                pairs: Iterable[tuple[str, tuple]] = zip(
                    ids[indices.start : indices.stop], contents[indices.start : indices.stop]
                )
            else:
                pairs = [(ids[i], contents[i]) for i in indices]
            lines: list[str] = []
            add_line = lines.append
            for node_id, content in pairs:
                attrs = known(id(content))
                if attrs is None:
                    attrs = self.attrs_of(node_id, content)
                add_line(f"\t{node_id} {attrs}\n")
            return lines
        return [self.styled_node_line(i) for i in indices]

    def node_text(self, start: int, stop: int) -> str:
        """The lines of nodes ``start`` to ``stop`` (by index in :attr:`columns`) as one text:
        the same as joining :meth:`node_lines`, written in C-level passes.

        Where nodes repeat a few contents (a long chain's have three among them), the
        attributes are written (or found) once per distinct content of the run, a dict
        from each content's identity to its index telling them apart, and the lines are
        one join of tab, id and attributes per node: half the time of a loop. Where most
        nodes have a content of their own (a model's parameters), building that dict
        costs more than it saves, and the loop of :meth:`node_lines` writes them; the
        first nodes of a long run tell which, and a short run takes the loop.
        """
        all_contents = self.columns.contents
        if (
            stop - start < _SAMPLED_CONTENTS * _FEW_CONTENTS
            or self.edge_shapes is not None
            or self.node_styles
            or len(set(map(id, all_contents[start : start + _SAMPLED_CONTENTS]))) * _FEW_CONTENTS > _SAMPLED_CONTENTS
        ):
            return "".join(self.node_lines(range(start, stop)))
        ids, contents = self.ids[start:stop], all_contents[start:stop]
        lines_of = self.line_ends_by_identity
        for key, at in dict(zip(map(id, contents), range(len(contents)))).items():
            if key not in lines_of:
                lines_of[key] = f" {self.attrs_of(ids[at], contents[at])}\n"
        return "".join(chain.from_iterable(zip(repeat("\t"), ids, map(lines_of.__getitem__, map(id, contents)))))

    def attrs_of(self, node_id: str, content: tuple) -> str:
        """The attributes of a node that no overlay styles, by the identity of its content."""
        attrs = self.attrs_by_identity.get(id(content))
        if attrs is None:
            attrs = self.attrs_by_identity[id(content)] = self.content_attrs(node_id, content, content)
        return attrs

    @functools.cached_property
    def columns(self) -> Columns:
        """The columns with every id filled in, built when first read."""
        return self.graph.columns()

    @functools.cached_property
    def ids(self) -> list[str]:
        """The node ids of :attr:`columns`."""
        ids = self.columns.ids
        assert ids is not None  # columns() fills them in
        return ids

    def styled_node_line(self, index: int) -> str:
        """A node's line when some node has a style of its own or edges have shapes."""
        node_id, content = self.ids[index], self.columns.contents[index]
        if node_id in self.node_styles:  # drawn apart: not cached
            return f"\t{node_id} {self.node_attrs(new_record(Node, (node_id, *content)), self.node_styles[node_id])}\n"
        key = content if self.edge_shapes is None else (content, self.edge_shapes.get(node_id))
        return f"\t{node_id} {self.content_attrs(node_id, content, key)}\n"

    def named_tensor_attrs(self, content: tuple) -> Optional[str]:
        """The attributes of a named tensor node (a parameter) put together from pieces written
        once per kind, dtype, device and module (:meth:`named_tensor_pieces`), with its name
        and shape text put in; None for a node they do not fit (then written in full).

        They fit a tensor node whose name holds nothing to escape, without shapes
        along edges (which make its tooltip depend on its id); not a leaf drawn as
        unnamed, nor a saved tensor with a note. A model's parameters differ in name
        and shape, and in little else.
        """
        kind, name = content[0], content[1]
        if kind not in _TENSOR_KINDS or not name or self.edge_shapes is not None or not self.takes_parts(content):
            return None
        pieces = _cached(self.named_parts, (kind, *content[3:]), self.named_tensor_pieces)
        if not pieces:
            return None
        values = {NAME_SLOT: name, SHAPE_SLOT: shape_text(content[2]), SHOWN_NAME_SLOT: self.cut_name(name)}
        return "".join([piece if type(piece) is str else values[piece] for piece in pieces])

    def named_tensor_pieces(self, key: tuple) -> tuple:
        """What :meth:`overlaid_attrs` writes for a named tensor of ``key`` (its content less
        name and shape), cut where the name, the shape's text and the name as the label
        shows it go: text pieces with :data:`NAME_SLOT`, :data:`SHAPE_SLOT` and
        :data:`SHOWN_NAME_SLOT` between them. () where the
        text depends on the shape in another way than its text.

        Written with stand-ins for the name and the shape's numbers, for shapes of one
        and of two dimensions: both must give the same pieces.
        """
        kind, rest = key[0], key[1:]
        found = []
        for dims in (1, 2):
            # The marks stand where the shape's numbers go: its text shows where they are.
            node = Node("", kind, _NAME_MARK, cast(Shape, (_SHAPE_MARK,) * dims), *rest)
            try:
                written = self.overlaid_attrs(node, {})
            except Exception:  # noqa: BLE001 - shape text used as numbers: written in full instead
                return ()
            # Text, mark, text, mark, ..., text: the marks become their slots.
            split = _MARKS.split(written)
            split[1::2] = [_SLOT_OF_MARK.get(mark, SHAPE_SLOT) for mark in split[1::2]]
            found.append(tuple(split))
        marks = (_NAME_MARK, _SHOWN_NAME_MARK, _SHAPE_TEXT_MARK)
        if found[0] != found[1] or any(mark in text for text in found[0][::2] for mark in marks):
            return ()
        return found[0]

    def content_attrs(self, node_id: str, content: tuple, key: tuple) -> str:
        """The attributes of a node not drawn apart with ``content``: as written before by a
        writer with these settings for ``key`` (the content, with its edge shapes when
        edges have some), or written now and kept."""
        # get() rather than catching KeyError: the first drawing of a model misses on
        # every parameter, and raising and catching costs more than writing them.
        try:
            attrs = self.attrs_by_content.get(key)
        except TypeError:  # a hand-built node holding a list cannot be a key
            return self.node_attrs(new_record(Node, (node_id, *content)))
        if attrs is None:
            attrs = self.named_tensor_attrs(content)  # None with edge shapes, or for any other node
            if attrs is None:
                attrs = self.node_attrs(new_record(Node, (node_id, *content)))
            _keep(self.attrs_by_content, key, attrs)
        return attrs

    def node_attrs(self, node: Node, overlay: Optional[Mapping[str, str]] = None) -> str:
        """The bracketed attribute list of one node, as its line writes it, with ``overlay`` laid over."""
        if node.note == FAILED and node.kind == OP:  # the call a forward pass stopped at: red
            return self.overlaid_attrs(node, {**FAILED_STYLE, **(overlay or {})})
        if overlay:
            return self.overlaid_attrs(node, overlay)
        # Every node of a kind has the same attributes but its label and tooltip: those
        # two are written into the kind's template, which was sorted and quoted once,
        # instead of building, sorting and quoting a dict per node. The same text as
        # overlaid_attrs(node, {}) (the golden files hold it).
        kind = node.kind
        template = self.templates.get(kind)
        if template is None:
            template = self.templates[kind] = _style_template(tuple(sorted(self.styles[kind].items())))
        head, middle, tail = template
        values = self.tensor_values(node) if kind in _TENSOR_KINDS else None
        if values is not None:
            label_value, tooltip = values
        else:
            label_value, tooltip = self.label_value(node), None
        if not middle:  # the theme set the tooltip: it is in the template already
            return head + label_value + tail
        if tooltip is None:
            tooltip = tooltip_value(self.tooltip_lines(node))
        return head + label_value + middle + tooltip + tail

    def overlaid_attrs(self, node: Node, overlay: Mapping[str, str]) -> str:
        """:meth:`node_attrs` with ``overlay`` laid over (a tooltip in it goes first in the node's)."""
        kind = node.kind
        style = self.styles[kind]
        attrs = dict(style)
        attrs["label"] = self.label_value(node)
        if "tooltip" in style:  # a theme's tooltip wins
            attrs["tooltip"] = attr_value(style["tooltip"])
        else:
            first = [str(overlay["tooltip"])] if "tooltip" in overlay else []
            attrs["tooltip"] = tooltip_value(first + self.tooltip_lines(node))
        attrs.update((str(k), str(v)) for k, v in overlay.items() if k not in ("label", "tooltip"))
        if "xlabel" in attrs:
            attrs["xlabel"] = xlabel_value(attrs["xlabel"], attrs.get("fontcolor", "black"))
        return f"[{attr_list(attrs, quoted=('label', 'tooltip', 'xlabel'))}]"

    def tensor_values(self, node: Node) -> Optional[tuple[str, str]]:
        """The label and tooltip values of a tensor node, from parts written once per
        shape, dtype and module; None for a node they do not fit (then written in full).

        A model's parameters all differ by name, but the name is all that differs
        between most of them, and it needs no escaping: such a node's label is
        ``"<name>\\n<shape line>"`` and its tooltip ``"<headline>\\n<rest>"``
        with only the name written per node. A name with characters to escape,
        a leaf drawn as unnamed and a saved tensor with a note take the full path.
        """
        found = self.tensor_parts_for(node[0], node[1:])
        if found is None:
            return None
        kind, name = node[1], node[2]
        shape_line, rest = found[1]
        headline = tensor_headline(kind, name)
        if not name:
            return f'"{shape_line}"', f'"{headline}\\n{rest}"'
        return f'"{self.cut_name(name)}\\n{shape_line}"', f'"{headline}\\n{rest}"'

    def tensor_parts_for(self, node_id: str, content: tuple) -> Optional[tuple[tuple, tuple[str, str]]]:
        """``(key, (shape line, rest of the tooltip))`` of a tensor node (by id and
        content, ``Node[1:]``) whose text can be put together from parts; None for one that
        takes the full path: a name to escape, a leaf drawn as unnamed, a saved
        tensor with a note. The parts are written once per key: the kind and
        every field but id and name."""
        if not self.takes_parts(content):
            return None

        def write(key: tuple) -> tuple[str, str]:
            node = new_record(Node, (node_id, *content))
            lines, _ = self.label_lines(node)
            # The tooltip's first line is tensor_headline(); the rest does not name
            # the node. Joined after a line with nothing to escape, the rest is
            # escaped as it would be in the whole text.
            return escape(lines[-1]), tooltip_value(self.tooltip_lines(node)[1:])[1:-1]

        key = (content[0], *content[2:])
        parts = _cached(self.tensor_parts, key, write)
        return None if parts is None else (key, parts)

    def takes_parts(self, content: tuple) -> bool:
        """Whether a tensor node's text can be put together from parts written for others:
        not for a name with characters to escape, a leaf drawn as unnamed, or a saved
        tensor with a note."""
        kind = content[0]
        return not (_NEEDS_ESCAPE.search(content[1]) or (kind == LEAF and self.params_given) or (kind == SAVED and content[6])
                    or (kind == PARAMETER and content[5]))  # a tied weight's other names

    def label_value(self, node: Node) -> str:
        """The value of a node's ``label`` attribute, quoted as needed."""
        kind = node.kind
        if node.note == FAILED and kind == OP:
            return label(failed_call_lines(node), True)
        if (kind == OP or kind == ACCUMULATE_GRAD) and not (self.show_attrs and saved_attrs(node)):
            # A recorded graph has the same op in many modules: its label is one text.
            value = self.op_labels.get(node.label)
            if value is None:
                value = self.op_labels[node.label] = self.quoted_id_or_label(node.label)
            if node.attrs:  # its number operands under its name (x * 1.0001: "with 1.0001")
                constants = op_constants(node)
                if constants:
                    return label([node.label, *constant_lines(constants, self.max_chars)], False)
            return value
        lines, left = self.label_lines(node)
        return label(lines, left)

    @staticmethod
    def quoted_id_or_label(text: str) -> str:
        return text if _PLAIN_ID.fullmatch(text) and text.lower() not in _DOT_KEYWORDS else quote(text)

    def label_lines(self, node: Node) -> tuple[list[str], bool]:
        """The label's lines, and whether they are justified to the left."""
        kind = node.kind
        if kind == OP or kind == ACCUMULATE_GRAD:
            return self.attr_table(node), True
        if kind == NO_GRAD:
            return self.cut_lines(node), False
        name = self.cut_name(node.label)
        if kind == MODULE:
            return [name, *module_label_lines(node)], False
        if kind == LEAF and self.params_given:
            name = UNNAMED
        if kind == SAVED and node.note:
            return [name, f"[{node.note}]"], False
        lines = [name] if name else []
        if kind == PARAMETER and node.attrs:  # tied weights: each name it goes by
            lines += [f"= {self.cut_name(other)}" for other in other_names(node)]
        lines.append(self.tensor_text(node))
        return lines, False

    def cut_lines(self, node: Node) -> list[str]:
        """A no-grad input: how it lost its gradient and where, when a recorder saw it."""
        if not node.label:
            return [NO_GRAD_LABEL]
        where = cut_location(node)
        return [self.cut_name(node.label), f"at {where}"] if where else [self.cut_name(node.label)]

    def tooltip_lines(self, node: Node) -> list[str]:
        ins: Sequence[str] = ()
        outs: Sequence[str] = ()
        if self.edge_shapes is not None:
            ins, outs = self.edge_shapes.get(node.id, ((), ()))
        return describe(node, show_attrs=self.show_attrs, show_device=self.show_device, inputs=ins, outputs=outs)

    def tensor_text(self, node: Node) -> str:
        parts = [shape_text(node.shape)]
        if node.dtype and node.dtype != DEFAULT_DTYPE:
            parts.append(node.dtype)
        if self.show_device and node.device:
            parts.append(node.device)
        return " ".join(parts)

    def cut_name(self, name: str) -> str:
        """Long names keep their end, where a parameter's own name is; the tooltip has them whole."""
        if name == _NAME_MARK:  # marks where the name as cut goes (see named_tensor_pieces)
            return _SHOWN_NAME_MARK
        if len(name) <= self.max_chars:
            return name
        return "..." + name[len(name) - self.max_chars + 3 :]

    def attr_table(self, node: Node) -> list[str]:
        """An op's name over a table of its saved values, values cut at max_chars."""
        attrs = saved_attrs(node)
        width = max(len(k) for k, _ in attrs)
        # A value's repr may span lines (a module held on a ctx); one row each.
        values = [" ".join(v.split()) for _, v in attrs]
        values = [v if len(v) <= self.max_chars else v[: self.max_chars - 3] + "..." for v in values]
        rows = [f"{k.ljust(width)}: {v}" for (k, _), v in zip(attrs, values)]
        rule = "-" * max(len(node.label), max(len(r) for r in rows))
        return [node.label, rule, *rows]


# Attributes written for node contents, kept from one drawing to the next: a model
# drawn again (each training step, each notebook run, each golden test of a
# family of models) has the same op types and parameters, and writing their text
# was most of the time of drawing it. One dict per set of writer settings; at most
# _WRITTEN_KEPT contents in each (some 10 MB), emptied when full.
_WRITTEN_KEPT = 20_000
_WRITTEN_SETTINGS_KEPT = 16
_written: dict[tuple, dict] = {}


def _written_attrs(settings: tuple) -> dict:
    """The kept attributes of node contents drawn with ``settings``."""
    attrs = _written.get(settings)
    if attrs is None:
        if len(_written) >= _WRITTEN_SETTINGS_KEPT:
            _written.clear()
        attrs = _written[settings] = {}
    return attrs


def _cached(cache: dict, key: tuple, write: Callable[[tuple], Any]) -> Any:
    """``cache[key]``, written by ``write(key)`` the first time; None for a key that cannot be
    one (a hand-built node holding a list)."""
    try:
        value = cache.get(key)
    except TypeError:
        return None
    if value is None:
        value = cache[key] = write(key)
    return value


def _keep(written: dict, key: tuple, attrs: str) -> None:
    if len(written) >= _WRITTEN_KEPT:
        written.clear()
    written[key] = attrs


def forget_written_attrs() -> None:
    """Drop the node attributes kept from earlier drawings (benchmarks time a first drawing with this)."""
    _written.clear()


def _frozen(styles: Mapping[str, Mapping[str, str]]) -> tuple:
    """Node styles as a key: kind and sorted attributes."""
    return tuple((kind, tuple(sorted(attrs.items()))) for kind, attrs in sorted(styles.items()))


# The key of the styles without a theme, worked out once rather than per drawing.
_DEFAULT_STYLES_KEY = _frozen(resolve_theme(None))


def _around_value(attrs: Mapping[str, str], key: str) -> tuple[str, str]:
    """What :func:`attr_list` writes for ``attrs`` with ``key`` (a label, a tooltip: a value
    written quoted beforehand), cut where that value goes.

    >>> _around_value({"style": "rounded", "color": "gray60"}, "label")
    ('color=gray60 label=', ' style=rounded')
    """
    # A placeholder no written text can hold (see _attr_template).
    before, after = attr_list({**attrs, key: "\x00"}, quoted=(key,)).split("\x00")
    return before, after


@functools.lru_cache(maxsize=256)
def _style_template(style_items: tuple[tuple[str, str], ...]) -> tuple[str, str, str]:
    """:func:`_attr_template` of a style given as its sorted items, written once per
    process for each style (a theme's, most often the default one's)."""
    return _attr_template(dict(style_items))


def _attr_template(style: Mapping[str, str]) -> tuple[str, str, str]:
    """A kind's bracketed attribute list cut where a node's label and tooltip go: ``(head, middle, tail)``.

    ``head + label + middle + tooltip + tail`` is what :func:`attr_list` writes for
    the style with that label and tooltip; ``middle`` is '' when the style fixes
    the tooltip (then ``head + label + tail``).

    >>> _attr_template({"fillcolor": "lightblue"})
    ('[fillcolor=lightblue label=', ' tooltip=', ']')
    """
    # Written by attr_list itself around two placeholders, so that key order and
    # quoting are its own. Escaping shows control characters as \\xNN, so no
    # written key or value holds a raw one: the placeholders are the only ones.
    attrs = dict(style, label="\x00")
    fixed_tooltip = "tooltip" in style
    attrs["tooltip"] = attr_value(style["tooltip"]) if fixed_tooltip else "\x01"
    written = f"[{attr_list(attrs, quoted=('label', 'tooltip'))}]"
    head, rest = written.split("\x00")
    if fixed_tooltip:
        return head, "", rest
    middle, tail = rest.split("\x01")
    return head, middle, tail


def _edge_shapes(graph: AutogradGraph) -> Optional[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]]:
    """Node id -> (shapes coming in, shapes going out) along data edges; None when no edge has a shape."""
    if not graph.has_edge_shapes():
        return None
    links = graph.columns(fill_ids=False).links
    ids = graph.columns().ids
    assert ids is not None  # columns() fills them in
    ins: dict[str, list[str]] = {}
    outs: dict[str, list[str]] = {}
    texts: dict[tuple, str] = {}  # (shape, dtype) -> text: a model has far fewer shapes than edges
    for s, t, rest in links:
        if rest[0] != DATA or rest[1] is None:
            continue
        try:
            text = texts.get(rest)
        except TypeError:  # a hand-built edge whose shape is a list
            text = edge_shape_text(rest[1], rest[2])
        if text is None:
            text = texts[rest] = edge_shape_text(rest[1], rest[2])
        ins.setdefault(ids[t], []).append(text)
        shown = outs.setdefault(ids[s], [])
        if text not in shown:  # one output feeding many ops: its shape once
            shown.append(text)
    return {node_id: (tuple(ins.get(node_id, ())), tuple(outs.get(node_id, ()))) for node_id in ins.keys() | outs.keys()}


def _legend_lines(kinds: list[str], styles: dict[str, dict[str, str]]) -> list[str]:
    lines = ["\tsubgraph cluster_legend {\n", '\t\tgraph [label=legend style=dashed]\n']
    for kind in kinds:
        attrs = dict(styles[kind])
        attrs["label"] = quote(LEGEND_TEXT[kind])
        lines.append(f"\t\tlegend_{kind} [{attr_list(attrs)}]\n")
    lines.extend(f"\t\tlegend_{a} -> legend_{b} [style=invis]\n" for a, b in zip(kinds, kinds[1:]))
    lines.append("\t}\n")
    return lines


def html_text(text: str) -> str:
    """Text in an HTML-like label (a key's table): escaped as a drawing shows it, then as HTML.

    >>> html_text('a < b & "c"\\x00')
    'a &lt; b &amp; &quot;c&quot;\\\\x00'
    """
    text = drawn_text(text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _colour_bar(text: Sequence[str], colours: str) -> str:
    """A colour key as one small table: the title over a row of swatches, each with the
    range of values it stands for written in it."""
    title, *cells = text
    row = "".join(
        f'<TD BGCOLOR="{html_text(fill)}"><FONT COLOR="{html_text(font)}" POINT-SIZE="8">{html_text(cell)}</FONT></TD>'
        for cell, (fill, font) in zip(cells, (pair.split(" ", 1) for pair in colours.split("\t")))
    )
    return (f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="2">'
            f'<TR><TD COLSPAN="{len(cells)}">{html_text(title)}</TD></TR><TR>{row}</TR></TABLE>>')


def _note_lines(notes: Sequence[tuple[Sequence[str], Mapping[str, str]]]) -> list[str]:
    lines = ["\tsubgraph cluster_notes {\n", "\t\tgraph [label=notes style=dashed]\n"]
    for i, (text, attrs) in enumerate(notes):
        if COLOUR_BAR in attrs:
            lines.append(f"\t\tnote{i} [label={_colour_bar(text, attrs[COLOUR_BAR])} shape=plaintext style=solid]\n")
            continue
        node_attrs = {str(k): str(v) for k, v in attrs.items()}
        node_attrs["label"] = label(list(text), left=len(text) > 1)
        lines.append(f"\t\tnote{i} [{attr_list(node_attrs)}]\n")
    lines.extend(f"\t\tnote{i} -> note{i + 1} [style=invis]\n" for i in range(len(notes) - 1))
    lines.append("\t}\n")
    return lines
