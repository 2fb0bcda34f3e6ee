"""AutogradGraph -> DOT text. The only module that quotes or escapes.

Output is byte-stable: node ids come from the walk (``n0, n1, ...``), attributes
are written in sorted order, and nothing depends on memory addresses, versions,
paths or time.

>>> from graphviz_autograd.graph import AutogradGraph, Node, Edge, OP, OUTPUT
>>> g = AutogradGraph((Node("n0", OUTPUT, "loss", shape=()), Node("n1", OP, "SumBackward0")),
...                   (Edge("n1", "n0"),))
>>> print(to_dot(g), end="")  # doctest: +NORMALIZE_WHITESPACE
digraph {
    graph [rankdir=TB]
    node [fontname=monospace fontsize=10 height=0.2 shape=box style=filled]
    n0 [fillcolor=darkolivegreen1 label="loss\\n()"]
    n1 [fillcolor=lightgrey label=SumBackward0]
    n1 -> n0
}
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping, Optional, Sequence

from .errors import OptionError
from .graph import ACCUMULATE_GRAD, LEAF, NO_GRAD, NODE_KINDS, OP, SAVED, AutogradGraph, Node
from .layout import DEFAULT_MAX_USES, split_shared_leaves
from .style import EDGE_STYLES, GRAPH_ATTRS, LEGEND_TEXT, NODE_DEFAULTS, Theme, check_direction, resolve_theme

DEFAULT_DTYPE = "float32"
UNNAMED = "(unnamed)"
NO_GRAD_TEXT = "no grad"

_PLAIN_ID = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|-?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)")
_DOT_KEYWORDS = {"node", "edge", "graph", "digraph", "subgraph", "strict"}
# Characters shown as an escape instead of written raw: control characters (C0 and
# C1; line breaks and tab are handled before), and those XML, so SVG output, cannot
# hold at all: lone surrogates, U+FFFE and U+FFFF.
_UNSHOWABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
# Every character escape() changes; most labels hold none, and one search is
# cheaper than the passes below.
_NEEDS_ESCAPE = re.compile(r'[\\"&\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]')


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
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("&", "&amp;")
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", line_end).replace("\t", " ")
    if _UNSHOWABLE.search(text):
        text = _UNSHOWABLE.sub(_escaped_code, text)
    return text


def _escaped_code(match: re.Match) -> str:
    code = ord(match.group())
    # Two backslashes, which DOT reads as one shown backslash.
    return ("\\\\x%02x" if code < 0x100 else "\\\\u%04x") % code


def quote(text: str) -> str:
    """A DOT string literal for any text."""
    return '"' + escape(text) + '"'


def attr_value(value: str) -> str:
    """An attribute value: bare when DOT reads it as an ID, quoted otherwise."""
    if _PLAIN_ID.fullmatch(value) and value.lower() not in _DOT_KEYWORDS:
        return value
    return quote(value)


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
    lines, line, chars, i = [], [], written[1:-1], 0
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


def attr_list(attrs: Mapping[str, str]) -> str:
    """``key=value`` pairs in sorted order; ``label`` comes already quoted, the rest is quoted here.

    Names are quoted as values are: a theme may name any attribute.
    """
    return " ".join(
        f"{attr_value(key)}={attrs[key] if key == 'label' else attr_value(attrs[key])}" for key in sorted(attrs)
    )


def shape_text(shape: Optional[tuple[int, ...]]) -> str:
    """Shapes written as the tutorials show them: ``(1)``, ``(3, 4)``, ``()``."""
    if shape is None:
        return "(shape unknown)"
    return "(" + ", ".join(str(s) for s in shape) + ")"


def to_dot(graph: AutogradGraph, **options) -> str:
    """DOT source for ``graph``; ``options`` as for :func:`body_lines`."""
    lines = body_lines(graph, **options)
    # One join over every piece: ``head + body + tail`` would copy a big graph's
    # text (hundreds of MB for a million ops) twice more.
    lines.insert(0, "digraph {\n")
    lines.append("}\n")
    return "".join(lines)


def digraph(lines: list[str]) -> str:
    """``lines`` from :func:`body_lines` (and any added to them) as a whole DOT graph.

    >>> digraph(["\\tn0\\n"])
    'digraph {\\n\\tn0\\n}\\n'
    """
    return "".join(["digraph {\n", *lines, "}\n"])


def body_lines(
    graph: AutogradGraph,
    *,
    show_attrs: bool = False,
    show_saved: bool = False,
    max_attr_chars: int = 50,
    direction: str = "TB",
    show_no_grad: bool = True,
    show_device: bool = False,
    theme: Optional[Theme] = None,
    legend: bool = False,
    node_styles: Optional[Mapping[str, Mapping[str, str]]] = None,
    notes: Sequence[tuple[Sequence[str], Mapping[str, str]]] = (),
    split_shared: bool = True,
) -> list[str]:
    """The statements between ``digraph {`` and ``}``, one line each.

    ``show_attrs`` lists each op's saved values in its box, ``show_saved`` draws the
    tensors ops saved for backward (both need a walk with ``collect_saved=True``).
    Labels longer than ``max_attr_chars`` are cut. ``show_no_grad=False`` hides the
    dashed inputs that carry no gradient. ``show_device`` adds each tensor's device.
    ``theme`` overrides colours per node kind; ``legend`` adds a key.
    ``node_styles`` lays extra attributes over single nodes (node id -> attributes,
    e.g. a border for a finding), and ``notes`` draws boxes (text lines, attributes)
    in a cluster of their own that explains them. ``split_shared`` draws a parameter
    used more than a few times once per use
    (see :func:`graphviz_autograd.layout.split_shared_leaves`).
    """
    if isinstance(max_attr_chars, bool) or not isinstance(max_attr_chars, int) or max_attr_chars < 1:
        raise OptionError(f"max_attr_chars must be a positive integer; got {max_attr_chars!r}.")
    styles = resolve_theme(theme)
    if split_shared:
        graph = split_shared_leaves(graph, DEFAULT_MAX_USES)
    writer = _Writer(graph, styles, max(max_attr_chars, 4), show_attrs, show_device)
    hidden = set()
    if not show_no_grad:
        hidden.update(n.id for n in graph.nodes if n.kind == NO_GRAD)
    if not show_saved:
        hidden.update(n.id for n in graph.nodes if n.kind == SAVED)

    graph_attrs = dict(GRAPH_ATTRS, rankdir=check_direction(direction))
    out = [f"\tgraph [{attr_list(graph_attrs)}]\n", f"\tnode [{attr_list(NODE_DEFAULTS)}]\n"]
    nodes, edges = graph.nodes, graph.edges
    if hidden:  # filtering costs a set look-up per node and edge: only when needed
        nodes = [n for n in nodes if n.id not in hidden]
        edges = [e for e in edges if e.source not in hidden and e.target not in hidden]
    out.extend(writer.node_lines(nodes, node_styles or {}))
    edge_suffix = {kind: (f" [{attr_list(attrs)}]" if attrs else "") for kind, attrs in EDGE_STYLES.items()}
    # Indexing is faster than attribute reads on a million edges.
    out.extend([f"\t{e[0]} -> {e[1]}{edge_suffix[e[2]]}\n" for e in edges])
    if legend:
        shown = {n.kind for n in graph.nodes if n.id not in hidden}
        out.extend(_legend_lines([k for k in NODE_KINDS if k in shown], styles))
    if notes:
        out.extend(_note_lines(notes))
    return out


class _Writer:
    """Writes node lines; caches what repeats across a big graph."""

    def __init__(self, graph: AutogradGraph, styles: dict, max_chars: int, show_attrs: bool, show_device: bool):
        self.params_given = graph.params_given
        self.max_chars = max_chars
        self.show_attrs = show_attrs
        self.show_device = show_device
        self.styles = styles
        # "[attrs before label " and " attrs after label]" per kind, so most nodes
        # are one f-string with no sorting.
        self.templates = {}
        for kind, attrs in styles.items():
            before = " ".join(f"{attr_value(k)}={attr_value(v)}" for k, v in sorted(attrs.items()) if k < "label")
            after = " ".join(f"{attr_value(k)}={attr_value(v)}" for k, v in sorted(attrs.items()) if k > "label")
            self.templates[kind] = (before + " " if before else "", " " + after if after else "")

    def node_lines(self, nodes: Iterable[Node], node_styles: Mapping[str, Mapping[str, str]]) -> list[str]:
        """One line per node: ``\\t<id> [<attributes>]\\n``.

        The attributes depend on every field of a node but its id, and a big graph
        repeats them (each MulBackward0 is drawn alike, each input without gradient
        too), so they are written once per distinct node content and then reused:
        a million-op chain writes three, not two million.
        """
        attrs_by_content: dict[tuple, str] = {}
        lines = []
        add_line = lines.append
        for node in nodes:
            if node_styles and node[0] in node_styles:
                add_line(f"\t{node[0]} {self.styled_attrs(node, node_styles[node[0]])}\n")
                continue
            content = node[1:]  # every field but the id
            try:
                attrs = attrs_by_content[content]
            except KeyError:
                attrs = attrs_by_content[content] = self.node_attrs(node)
            except TypeError:  # a hand-built node holding a list cannot be a key
                attrs = self.node_attrs(node)
            add_line(f"\t{node[0]} {attrs}\n")
        return lines

    def node_attrs(self, node: Node) -> str:
        """The bracketed attribute list of one node, as its line writes it."""
        kind = node.kind
        if (kind == OP or kind == ACCUMULATE_GRAD) and not (self.show_attrs and node.attrs):
            before, after = self.templates[kind]
            return f"[{before}label={self.quoted_id_or_label(node.label)}{after}]"
        lines, tooltip, left = self.label_lines(node)
        if tooltip is None:
            before, after = self.templates[kind]
            return f"[{before}label={label(lines, left)}{after}]"
        attrs = dict(self.styles[kind])
        attrs["label"] = label(lines, left)
        attrs["tooltip"] = tooltip
        return f"[{attr_list(attrs)}]"

    def styled_attrs(self, node: Node, overlay: Mapping[str, str]) -> str:
        """:meth:`node_attrs` with ``overlay`` laid over them (its ``label``, if any, ignored)."""
        kind = node.kind
        attrs = dict(self.styles[kind])
        if (kind == OP or kind == ACCUMULATE_GRAD) and not (self.show_attrs and node.attrs):
            attrs["label"] = self.quoted_id_or_label(node.label)
        else:
            lines, tooltip, left = self.label_lines(node)
            attrs["label"] = label(lines, left)
            if tooltip is not None:
                attrs["tooltip"] = tooltip
        attrs.update((str(k), str(v)) for k, v in overlay.items() if k != "label")
        return f"[{attr_list(attrs)}]"

    @staticmethod
    def quoted_id_or_label(text: str) -> str:
        return text if _PLAIN_ID.fullmatch(text) and text.lower() not in _DOT_KEYWORDS else quote(text)

    def label_lines(self, node: Node) -> tuple[list[str], Optional[str], bool]:
        """The label's lines, a tooltip with the full name when it was cut, and alignment."""
        kind = node.kind
        if kind == OP or kind == ACCUMULATE_GRAD:
            return self.attr_table(node), None, True
        if kind == NO_GRAD:
            return self.cut_lines(node), None, False
        name, tooltip = self.cut_name(node.label)
        if kind == LEAF and self.params_given:
            name = UNNAMED
        if kind == SAVED and node.note:
            return [name, f"[{node.note}]"], tooltip, False
        lines = [name] if name else []
        lines.append(self.tensor_text(node))
        return lines, tooltip, False

    @staticmethod
    def cut_lines(node: Node) -> list[str]:
        """A no-grad input: how it lost its gradient and where, when a recorder saw it."""
        if not node.label:
            return [NO_GRAD_TEXT]
        return [node.label, f"at {node.module}"] if node.module else [node.label]

    def tensor_text(self, node: Node) -> str:
        parts = [shape_text(node.shape)]
        if node.dtype and node.dtype != DEFAULT_DTYPE:
            parts.append(node.dtype)
        if self.show_device and node.device:
            parts.append(node.device)
        return " ".join(parts)

    def cut_name(self, name: str) -> tuple[str, Optional[str]]:
        """Long names keep their end, where a parameter's own name is."""
        if len(name) <= self.max_chars:
            return name, None
        return "..." + name[len(name) - self.max_chars + 3 :], name

    def attr_table(self, node: Node) -> list[str]:
        """An op's name over a table of its saved values, values cut at max_chars."""
        width = max(len(k) for k, _ in node.attrs)
        # A value's repr may span lines (a module held on a ctx); one row each.
        values = [" ".join(v.split()) for _, v in node.attrs]
        values = [v if len(v) <= self.max_chars else v[: self.max_chars - 3] + "..." for v in values]
        rows = [f"{k.ljust(width)}: {v}" for (k, _), v in zip(node.attrs, values)]
        rule = "-" * max(len(node.label), max(len(r) for r in rows))
        return [node.label, rule, *rows]


def _legend_lines(kinds: list[str], styles: dict[str, dict[str, str]]) -> list[str]:
    lines = ["\tsubgraph cluster_legend {\n", '\t\tgraph [label=legend style=dashed]\n']
    for kind in kinds:
        attrs = dict(styles[kind])
        attrs["label"] = quote(LEGEND_TEXT[kind])
        lines.append(f"\t\tlegend_{kind} [{attr_list(attrs)}]\n")
    lines.extend(f"\t\tlegend_{a} -> legend_{b} [style=invis]\n" for a, b in zip(kinds, kinds[1:]))
    lines.append("\t}\n")
    return lines


def _note_lines(notes: Sequence[tuple[Sequence[str], Mapping[str, str]]]) -> list[str]:
    lines = ["\tsubgraph cluster_notes {\n", "\t\tgraph [label=notes style=dashed]\n"]
    for i, (text, attrs) in enumerate(notes):
        node_attrs = {str(k): str(v) for k, v in attrs.items()}
        node_attrs["label"] = label(list(text), left=len(text) > 1)
        lines.append(f"\t\tnote{i} [{attr_list(node_attrs)}]\n")
    lines.extend(f"\t\tnote{i} -> note{i + 1} [style=invis]\n" for i in range(len(notes) - 1))
    lines.append("\t}\n")
    return lines
