"""What a graph is, as canonical text: the golden files of the pytest plugin.

The text holds the ops (with the numbers they take, as their boxes say:
``with=0.5``), how they connect, the names, shapes and dtypes of parameters,
inputs and outputs, where gradient is cut and why, and which module made each node. It holds nothing of how a graph is drawn (colours, themes,
tooltips, layout), so a release that changes the drawing leaves it as it was.

Each output starts a chain of lines: a node, then the node that feeds it, and so
on, written one under the other. A node fed by several inputs lists each input
as a branch, one level deeper, starting with ``- ``. A node reached a second time
is not written again: its first line ends with ``&N`` and the later ones are
``*N``. So one op more, or one op changed, is one line of a diff.

>>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, Edge, Node, OP, OUTPUT, PARAMETER, ACCUMULATE_GRAD
>>> g = AutogradGraph(
...     nodes=(Node("n0", OUTPUT, "loss", shape=(), dtype="float32"), Node("n1", OP, "MulBackward0"),
...            Node("n2", ACCUMULATE_GRAD, "AccumulateGrad"), Node("n3", PARAMETER, "w", shape=(3,), dtype="float32")),
...     edges=(Edge("n1", "n0"), Edge("n2", "n1"), Edge("n2", "n1"), Edge("n3", "n2")),
... )
>>> print(structure_text(g), end="")
# graphviz-autograd graph structure, format 1
- output loss dtype=float32 shape=()
  op MulBackward0
    - accumulate_grad AccumulateGrad &1
      parameter w dtype=float32 shape=(3)
    - accumulate_grad AccumulateGrad *1
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Optional

from ..graph.autograd_graph import (
    CUT, DATA, MODULE, NO_GRAD, OUTPUT, PORT_ATTR, SAVED, SAVED_BY, CONSTANT_ATTR, AutogradGraph, Edge, ModuleInfo, Node,
    op_constants,
)

FORMAT_VERSION = 1
HEADER = f"# graphviz-autograd graph structure, format {FORMAT_VERSION}"

# A word written as it is; anything else is written as a JSON string.
_PLAIN = re.compile(r"[\w.\[\]()<>,:+/-]+")
# Characters that JSON leaves as they are but that end a line for str.splitlines(),
# or that cannot be written as UTF-8.
_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\S+')
# The field of an op's numbers (see _node_fields), written as its box writes them.
_WITH = "with"
_UNKNOWN = "unknown"  # the kind of an id an edge names but no node has (hand-made graphs)


def word(text: str) -> str:
    """``text`` as one word of a structure line: as it is when plain, else quoted as JSON.

    >>> word("fc.weight"), word("x (requires_grad=False)"), word("")
    ('fc.weight', '"x (requires_grad=False)"', '""')
    """
    if _PLAIN.fullmatch(text) and not text.startswith(("&", "*")):
        return text
    quoted = json.dumps(text, ensure_ascii=False)
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", quoted)


def read_word(written: str) -> str:
    """The text of a word that :func:`word` wrote.

    >>> read_word(word('a "b"\\n')) == 'a "b"\\n'
    True
    """
    if written.startswith('"'):
        return str(json.loads(written))
    return written


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ",".join(str(size) for size in shape) + ")"


def structure_text(
    graph: AutogradGraph,
    *,
    show_attrs: bool = False,
    show_saved: bool = False,
    show_no_grad: bool = True,
    show_device: bool = False,
    show_shapes: bool = False,
) -> str:
    """The canonical text of what ``graph`` is (see the module docstring).

    The options mean what they mean for :func:`~graphviz_autograd.make_dot`: what
    the drawing leaves out, the text leaves out too.
    """
    nodes: dict[str, Node] = {}
    for node in graph.nodes:
        if node.kind == SAVED and not show_saved:
            continue
        if node.kind == NO_GRAD and not show_no_grad:
            continue
        nodes.setdefault(node.id, node)
    # Inputs of each node in the walk's order (the op's argument order), then the
    # tensors it saved.
    inputs: dict[str, list[tuple[str, Edge]]] = {}
    saved: dict[str, list[tuple[str, Edge]]] = {}
    fed: Counter[str] = Counter()
    for edge in graph.edges:
        if edge.kind == SAVED_BY:
            parent, child, table = edge.source, edge.target, saved
        else:
            parent, child, table = edge.target, edge.source, inputs
        if not _kept(parent, nodes, graph) or not _kept(child, nodes, graph):
            continue
        for end in (parent, child):
            if end not in nodes:
                nodes[end] = Node(end, _UNKNOWN, end)
        table.setdefault(parent, []).append((child, edge))
        fed[child] += 1
    children = {node_id: inputs.get(node_id, []) + saved.get(node_id, []) for node_id in nodes}

    lines = [HEADER]
    anchors: dict[str, int] = {}
    written: set[str] = set()
    # Outputs first, then whatever feeds nothing, then anything left (a cycle in a
    # hand-made graph): every node is written once.
    roots = [n for n in nodes if nodes[n].kind == OUTPUT and not fed[n]]
    roots += [n for n in nodes if not fed[n] and nodes[n].kind != OUTPUT]
    roots += list(nodes)
    for root in roots:
        if root in written:
            continue
        stack: list[tuple[str, int, bool, Optional[Edge]]] = [(root, 0, True, None)]
        while stack:
            node_id, depth, branch, via = stack.pop()
            node = nodes[node_id]
            indent = "    " * depth + ("- " if branch else "  ")
            edge_fields = _edge_fields(via) if show_shapes else []
            if node_id in written:
                lines.append(f"{indent}{node.kind} {word(node.label)} *{anchors[node_id]}")
                continue
            written.add(node_id)
            fields = _node_fields(node, show_attrs, show_device) + edge_fields
            if fed[node_id] > 1:
                anchors[node_id] = len(anchors) + 1
                fields.append(f"&{anchors[node_id]}")
            lines.append(" ".join([f"{indent}{node.kind}", word(node.label), *fields]))
            below = children[node_id]
            if len(below) == 1 and node_id not in saved:
                stack.append((below[0][0], depth, False, below[0][1]))
            else:
                stack.extend((child, depth + 1, True, e) for child, e in reversed(below))
    if graph.modules:
        lines.append("modules:")
        for module in sorted(graph.modules):
            lines.append(f"  {word(module.path)} {word(module.type_name)} parameters={module.parameters}")
    return "\n".join(lines) + "\n"


def _kept(node_id: str, nodes: dict[str, Node], graph: AutogradGraph) -> bool:
    """Whether an edge's end is shown: a node left out (saved, no-grad) takes its edges with it."""
    if node_id in nodes:
        return True
    try:
        graph.node(node_id)
    except KeyError:
        return True  # an id of no node: written as an unknown node
    return False


def _node_fields(node: Node, show_attrs: bool, show_device: bool) -> list[str]:
    fields = []
    if node.shape is not None:
        fields.append(f"shape={_shape(node.shape)}")
    if node.dtype is not None:
        fields.append(f"dtype={word(node.dtype)}")
    if show_device and node.device is not None:
        fields.append(f"device={word(node.device)}")
    if node.module:
        fields.append(f"module={word(node.module)}")
    if node.note:
        fields.append(f"{'reason' if node.kind == NO_GRAD else 'note'}={word(node.note)}")
    if show_attrs or node.kind in (MODULE, NO_GRAD, SAVED):
        # Ports (where a tensor crosses a module call) are how a page names its borders, not the graph.
        fields.extend(f"attr.{word(key)}={word(value)}" for key, value in node.attrs if key != PORT_ATTR)
    else:
        # The numbers an op takes (x * 0.5, variance + eps) are part of it, as its box says
        # ("with variance_epsilon=1e-06"): a changed epsilon is a changed line.
        constants = op_constants(node)
        if constants:
            fields.append(f"{_WITH}={word(', '.join(constants))}")
    return sorted(fields)


def _edge_fields(edge: Optional[Edge]) -> list[str]:
    if edge is None:
        return []
    fields = []
    if edge.shape is not None:
        fields.append(f"edge_shape={_shape(edge.shape)}")
    if edge.dtype is not None:
        fields.append(f"edge_dtype={word(edge.dtype)}")
    return fields


# --- reading it back, for the summary of a mismatch ---------------------------------


class StructureLine:
    """One node line of a structure text: kind, label, fields, and whether it repeats a node."""

    def __init__(self, line: str):
        body = line.lstrip(" ")
        self.root = body.startswith("- ") and line.startswith("- ")
        if body.startswith("- "):
            body = body[2:]
        tokens = _TOKEN.findall(body)
        self.kind = tokens[0] if tokens else ""
        self.label = read_word(tokens[1]) if len(tokens) > 1 else ""
        self.repeat = bool(tokens) and tokens[-1].startswith("*")
        self.fields: dict[str, str] = {}
        for token in tokens[2:]:
            key, equals, value = token.partition("=")
            if equals:
                self.fields[key] = read_word(value)


def node_lines(text: str) -> list[StructureLine]:
    """The node lines of a structure text (no header, no module list)."""
    lines = []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line == "modules:":
            break
        lines.append(StructureLine(line))
    return lines


def structure_graph(text: str) -> AutogradGraph:
    """The graph a structure text holds, read back (ids ``n0, n1, ...`` in the order of its
    lines): what a failed golden test diffs against the graph it obtained.

    >>> g = structure_graph("- output y shape=(2)\\n  op ExpBackward0 module=act\\n    - no_grad detach() reason=detach\\n"
    ...                     "modules:\\n  \\"\\" Net parameters=0\\n  act Act parameters=0\\n")
    >>> [(n.kind, n.label, n.shape, n.module) for n in g.nodes], [(e.source, e.target, e.kind) for e in g.edges]
    ([('output', 'y', (2,), ''), ('op', 'ExpBackward0', None, 'act'), ('no_grad', 'detach()', None, '')], [('n1', 'n0', 'data'), ('n2', 'n1', 'no_grad')])
    >>> [m.path for m in g.modules]
    ['', 'act']
    """
    nodes: list[Node] = []
    edges: list[Edge] = []
    anchors: dict[str, str] = {}
    chain: list[str] = []  # the node last written at each depth
    modules: list[ModuleInfo] = []
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if line.startswith("#") or not line.strip():
            continue
        if line == "modules:":
            for written in lines[number + 1:]:
                tokens = _TOKEN.findall(written)
                if len(tokens) >= 3 and tokens[2].startswith("parameters="):
                    modules.append(ModuleInfo(read_word(tokens[0]), read_word(tokens[1]), int(tokens[2].partition("=")[2] or 0)))
            break
        parsed = StructureLine(line)
        leading = len(line) - len(line.lstrip(" "))
        branch = line.lstrip(" ").startswith("- ")
        depth = leading // 4 if branch else max(leading - 2, 0) // 4
        mark = _TOKEN.findall(line.lstrip(" -"))[-1]
        if parsed.repeat and mark[1:] in anchors:
            node_id = anchors[mark[1:]]
            kind = parsed.kind
        else:
            node_id = f"n{len(nodes)}"
            kind = parsed.kind
            fields = parsed.fields
            nodes.append(Node(
                node_id, kind, parsed.label, shape=_read_shape(fields.get("shape")), dtype=fields.get("dtype"),
                device=fields.get("device"), note=fields.get("reason", fields.get("note", "")), module=fields.get("module", ""),
                attrs=tuple((key[5:], value) for key, value in sorted(fields.items()) if key.startswith("attr."))
                + tuple((CONSTANT_ATTR, value) for value in (fields[_WITH].split(", ") if _WITH in fields else ())),
            ))
            if mark.startswith("&"):
                anchors[mark[1:]] = node_id
        if branch:
            parent = chain[depth - 1] if 0 < depth <= len(chain) else None
        else:
            parent = chain[depth] if depth < len(chain) else None
        if parent is not None:
            if kind == SAVED:
                edges.append(Edge(parent, node_id, SAVED_BY))
            else:
                edges.append(Edge(node_id, parent, CUT if kind == NO_GRAD else DATA))
        del chain[depth:]
        chain.append(node_id)
    return AutogradGraph(tuple(nodes), tuple(edges), modules=tuple(modules))


def _read_shape(text: Optional[str]) -> Optional[tuple[int, ...]]:
    if text is None:
        return None
    inner = text.strip("()")
    return tuple(int(size) for size in inner.split(",")) if inner else ()
