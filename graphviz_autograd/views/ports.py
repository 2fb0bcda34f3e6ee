"""What enters and leaves a module, named on the edges of a picture.

A recorded graph knows under which argument or output name each tensor entered or left
each module call (:func:`~graphviz_autograd.graph.descriptions.port_name`). A picture
says it where an edge crosses a module's border: an edge into a module drawn as one box
(a summary's depth) is labelled with the argument's name (not the plain ``input``, the one
argument of torch's own modules), an edge out of one with the output's (not the plain
``output``, which every module has), and any edge that crosses borders, into a box or a
cluster, says each crossing in its tooltip.

>>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, Edge, ModuleInfo, Node, MODULE, OP, PORT_ATTR
>>> walked = AutogradGraph((Node("n0", OP, "MmBackward0", module="h.0"),
...                         Node("n1", OP, "AddBackward0", attrs=((PORT_ATTR, "in\\nh.0\\nhidden_states"),))),
...                        (Edge("n1", "n0"),), modules=(ModuleInfo("", "M"), ModuleInfo("h.0", "Block")))
>>> drawn = AutogradGraph((Node("b0", MODULE, "h.0", module=""), Node("n1", OP, "AddBackward0")), (Edge("n1", "b0"),))
>>> edge_names(walked, {"n0": "b0", "n1": "n1"}, drawn)[("n1", "b0", "data")]
EdgeNames(head='hidden_states', tail='', crossings=('enters h.0 as hidden_states',))
"""

from __future__ import annotations

import re
from typing import Container, Mapping, NamedTuple, Optional

from ..graph.autograd_graph import (
    ACCUMULATE_GRAD, LEAF, MODULE, PARAMETER, PORT_ATTR, PORT_IN, PORT_OUT, SAVED_BY, AutogradGraph, Node, calls_around,
)
from ..graph.descriptions import port_name

# The output name every module call has: a box's tail says only the others.
PLAIN_OUTPUT = "output"
# The one argument of torch's own modules (Linear, LayerNorm, Conv2d, Dropout ...): an edge into
# such a box says nothing by it, and the label sat on the titles of the clusters the edge enters.
PLAIN_INPUT = "input"

# A drawn edge: (source id, target id, kind).
EdgeKey = tuple[str, str, str]


class EdgeNames(NamedTuple):
    """The names a drawn edge carries: ``head``, the argument it enters a module box by;
    ``tail``, the output it leaves one by ('' for none, or for the plain ``output``);
    ``crossings``, each module border it crosses in words, for its tooltip."""

    head: str
    tail: str
    crossings: tuple[str, ...]


def edge_names(
    walked: AutogradGraph, origin: Optional[Mapping[str, Optional[str]]], drawn: AutogradGraph,
    stood_for: Container[str] = (),
) -> dict[EdgeKey, EdgeNames]:
    """The names of the edges of ``drawn`` that cross a module border where a recorder saw
    what crossed, by ``(source, target, kind)``; ``origin`` says which drawn node each
    walked node went to (None: not drawn; one it leaves out, or None for all: drawn as
    itself), ``stood_for`` which walked nodes of a folded run of blocks are drawn by the
    first block's (an edge between two of them is the first block's to name). A name on
    several edges leaving one node is on the first of them only. Empty for a graph with no
    names."""
    if not walked.modules:
        return {}
    named = walked.derived("port_sources", lambda: _port_sources(walked))
    if not named:
        return {}
    nodes = walked.derived("by_id", lambda: {node.id: node for node in walked.nodes})
    boxes = {node.id: node for node in drawn.nodes if node.kind == MODULE}
    drawn_ids = {node.id for node in drawn.nodes}
    found: dict[EdgeKey, list[tuple[str, str, list[str]]]] = {}
    for source_id, target_id, kind, *_ in walked.edges:
        tensor = named.get(source_id)
        if tensor is None or kind == SAVED_BY or (source_id in stood_for and target_id in stood_for):
            continue
        s = origin.get(source_id, source_id) if origin is not None else source_id
        t = origin.get(target_id, target_id) if origin is not None else target_id
        if s is None or t is None or s == t or s not in drawn_ids or t not in drawn_ids:
            continue
        names = _crossing_names(tensor, nodes[source_id].module, nodes[target_id].module, boxes.get(s), boxes.get(t))
        if names is not None:
            found.setdefault((s, t, kind), []).append(names)
    merged = {key: _merged(each) for key, each in found.items()}
    # A name on several edges leaving one node is said on the first of them only, each keeping
    # its tooltip: a rotary embedding's output[0] and output[1] each go to two products of each
    # attention, and their labels, side by side on edges that leave together, were drawn over
    # one another.
    said: set[tuple[str, str, str]] = set()
    for key, edge in merged.items():
        if edge.head or edge.tail:
            if (key[0], edge.tail, edge.head) in said:
                merged[key] = edge._replace(head="", tail="")
            said.add((key[0], edge.tail, edge.head))
    return merged


def _port_sources(walked: AutogradGraph) -> dict[str, Node]:
    """The nodes whose tensor has a name to say, by id: the few at a module's border, and
    parameters; an AccumulateGrad stands for its leaf. Only edges from them are looked at."""
    named = {node.id: node for node in walked.nodes
             if node.kind == PARAMETER or (node.attrs and any(key == PORT_ATTR for key, _ in node.attrs))}
    if not named:
        return named
    leaves = {node_id for node_id, node in named.items() if node.kind in (PARAMETER, LEAF)}
    accumulators = {node.id for node in walked.nodes if node.kind == ACCUMULATE_GRAD}
    for source_id, target_id, *_ in walked.edges:
        if source_id in leaves and target_id in accumulators:
            named[target_id] = named[source_id]
    return named


def _crossing_names(
    named: Node, source_call: str, target_call: str, source_box: Optional[Node], target_box: Optional[Node]
) -> Optional[tuple[str, str, list[str]]]:
    """(head, tail, crossings) of one walked edge from a node of ``source_call`` to one of
    ``target_call``, its tensor ``named``'s node; None when no border it crosses is named."""
    left = calls_around(source_call)
    entered = calls_around(target_call)
    shared = 0
    while shared < len(left) and shared < len(entered) and left[shared] == entered[shared]:
        shared += 1
    crossings = []
    for call in reversed(left[shared:]):
        name = port_name(named, PORT_OUT, call)
        if name is not None:
            crossings.append(f"leaves {call} as {name}")
    for call in entered[shared:]:
        name = port_name(named, PORT_IN, call)
        if name is not None:
            crossings.append(f"enters {call} as {name}")
    head = tail = ""
    if target_box is not None:  # the name it enters the box's call by, or the first call inside it that names it
        head = _outermost_name(named, PORT_IN, entered[shared:], _box_call(target_call, target_box))
        if (named.kind == PARAMETER and head == named.label) or head == PLAIN_INPUT:
            head = ""  # a parameter's own name is on its box, or the box it comes from
    if source_box is not None:
        tail = _outermost_name(named, PORT_OUT, left[shared:], _box_call(source_call, source_box))
        tail = "" if tail == PLAIN_OUTPUT else tail
    if not (head or tail or crossings):
        return None
    return head, tail, crossings


def _outermost_name(named: Node, way: str, calls: list[str], box: str) -> str:
    """The name ``named``'s tensor crosses the border of the outermost of ``calls`` (outermost
    first) that is the call ``box`` or inside it by: a box of a ModuleList, which runs nothing,
    says the name its first block took it by."""
    for call in calls:
        if call == box or call.startswith(box + "."):
            name = port_name(named, way, call)
            if name is not None:
                return name
    return ""


def _box_call(call: str, box: Node) -> str:
    """The call a module box stands for around a node of ``call``: its own, or, for a box
    that folds a run of blocks (``h.0 … h.11``), the block's the node is in."""
    first = dict(box.attrs).get("first", box.label)
    return ".".join(call.split(".")[: first.count(".") + 1])


def _merged(each: list[tuple[str, str, list[str]]]) -> EdgeNames:
    """The names of the walked edges one drawn edge stands for, each once, in order."""
    heads = list(dict.fromkeys(head for head, _, _ in each if head))
    tails = list(dict.fromkeys(tail for _, tail, _ in each if tail))
    crossings = tuple(dict.fromkeys(line for _, _, lines in each for line in lines))
    return EdgeNames(_joined(heads), _joined(tails), crossings)


_INDEXED = re.compile(r"(.*)\[(\d+)\]")


def _joined(names: list[str]) -> str:
    """Several names as one short text: items of one argument as one
    (``position_embeddings[0]``, ``position_embeddings[1]`` -> ``position_embeddings[0,1]``).

    >>> _joined(["position_embeddings[0]", "position_embeddings[1]", "attention_mask"])
    'position_embeddings[0,1], attention_mask'
    """
    groups: dict[str, list[str]] = {}
    for name in names:
        match = _INDEXED.fullmatch(name)
        base, index = (match.group(1), match.group(2)) if match else (name, None)
        groups.setdefault(base, [])
        if index is not None:
            groups[base].append(index)
    return ", ".join(f"{base}[{','.join(indexes)}]" if indexes else base for base, indexes in groups.items())
