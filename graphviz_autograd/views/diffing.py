"""What changed between two graphs: one graph of both, a state per node, and the words.

:func:`diff` matches the nodes of an old and a new graph, module by module, and
returns a :class:`GraphDiff`: each node matched, added, removed or changed (its op,
shape, dtype, attributes, or gradient state: frozen, cut), rolled up by module, and
said in sentences, most significant first. It is new data on the same pipeline, not a
drawing of its own: :attr:`GraphDiff.merged` is one graph holding the nodes of both,
:meth:`GraphDiff.overlay` its state per node (rolled onto module boxes like any
overlay), and :meth:`GraphDiff.view` the one prepared view of them, with the modules
where nothing changed drawn as closed boxes.

Matching follows the module tree first: modules by path (so a block added to a run is
one block added, not every later block changed), then a sibling of the same class
where a name went and another came (a renamed module). Inside a module, nodes that name
a tensor (parameters, outputs, frozen parameters) match by that name; the others by
the order of ops, aligned as a text diff aligns lines. Node ids play no part, so two
walks of one model are equal whatever ids they gave.

Plain data, no torch: the graphs are compared as walked.

>>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, Edge, ModuleInfo, Node
>>> def net(act):
...     return AutogradGraph(
...         (Node("n0", "output", "y"), Node("n1", "op", act, module="act")), (Edge("n1", "n0"),),
...         modules=(ModuleInfo("", "Net"), ModuleInfo("act", "Act")))
>>> print(diff(net("ReluBackward0"), net("GeluBackward0")).text(), end="")
act: GeluBackward0 where ReluBackward0 was
>>> diff(net("ReluBackward0"), net("ReluBackward0")).text()
'no change\\n'
"""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from typing import Any, Iterable, NamedTuple, Optional, Sequence

from ..errors import InputTypeError
from ..graph.autograd_graph import (
    ACCUMULATE_GRAD, DATA, DATA_ATTRIBUTE, DETACH, FROZEN, INFERENCE_MODE, LEAF, NO_GRAD, NO_GRAD_MODE, OP, OUTPUT,
    PARAMETER, PORT_ATTR, AutogradGraph, Columns, ModuleInfo, Node, new_record, numbered_ids,
)
from ..graph.descriptions import count_text, plural, shape_text
from ..graph.module_tree import ModuleTree
from ..options import DrawOptions
from .collapsing import collapse_to_boxes
from .overlays import Overlay
from .prepared import View, prepare

# A node's state, and a module's (a module may also be renamed: see ModuleChange).
UNCHANGED = "unchanged"
ADDED = "added"
REMOVED = "removed"
CHANGED = "changed"
STATES = (UNCHANGED, ADDED, REMOVED, CHANGED)
# The overlay's value of each state: one bit each, so that a module box rolled up from
# its nodes (by "union") reads as added when all it holds was added, removed when all
# was removed, unchanged when nothing changed, and changed otherwise (see state_of).
STATE_BITS = {UNCHANGED: 1, ADDED: 2, REMOVED: 4, CHANGED: 8}
OVERLAY_NAME = "diff"
NO_CHANGE = "no change"
# How many sentences name one change on many tensors one by one before they are said
# once, of the module that holds them all.
_MANY = 4
_FROZEN_PREFIX = "frozen "
_CUT_WORDS = {DETACH: ".detach()", DATA_ATTRIBUTE: ".data", NO_GRAD_MODE: "torch.no_grad()",
              INFERENCE_MODE: "torch.inference_mode()"}
_INDEX = re.compile(r"^\d+$")
# The most pairs of items a module's changed middle is aligned over as a text diff aligns
# lines (its time grows with their product when items repeat, as ops do): past it, a
# middle of equal length pairs place by place, and another is all removed and added.
_ALIGN_LIMIT = 4_000_000
# What a node's change says that its renamed module's sentence says already.
_SAID_BY_MODULE = ("name", "module")


def state_of(value: float) -> str:
    """The state an overlay value of a diff stands for (a node's, or a module box's roll-up).

    >>> state_of(STATE_BITS[ADDED]), state_of(STATE_BITS[ADDED] | STATE_BITS[UNCHANGED])
    ('added', 'changed')
    """
    bits = int(value)
    for state, bit in STATE_BITS.items():
        if bits == bit:
            return state
    return CHANGED if bits else UNCHANGED


class NodeChange(NamedTuple):
    """One node of the merged graph: its ``state``, its id there (``id``), in the old
    graph (``old``, '' when added) and in the new one (``new``, '' when removed), its
    module path in the merged graph, and what changed as ``(what, was, now)`` triples."""

    state: str
    id: str
    old: str
    new: str
    module: str
    changes: tuple[tuple[str, str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state, "id": self.id, "old": self.old or None, "new": self.new or None, "module": self.module,
            "changes": [{"what": what, "was": was, "now": now} for what, was, now in self.changes],
        }


class ModuleChange(NamedTuple):
    """A module of either graph: its path in the merged graph (the new path; the old one
    when removed), the path it had in the old graph ('' when added, and for the model),
    its class now and before, its state (``renamed`` when its path changed, and nothing
    else did) and how many nodes inside it, submodules included, were added, removed or changed."""

    path: str
    old_path: str
    type_name: str
    old_type: str
    state: str
    added: int
    removed: int
    changed: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self._asdict())


class GraphDiff:
    """What :func:`diff` found: the two graphs, the merged graph, each node's change
    (``nodes``, in the merged graph's order), each module's (``modules``), and the
    ``sentences`` that say it, most significant first."""

    __slots__ = ("old", "new", "merged", "nodes", "modules", "sentences")

    def __init__(self, old: AutogradGraph, new: AutogradGraph, merged: AutogradGraph,
                 nodes: tuple[NodeChange, ...], modules: tuple[ModuleChange, ...], sentences: tuple[str, ...]):
        self.old, self.new, self.merged = old, new, merged
        self.nodes, self.modules, self.sentences = nodes, modules, sentences

    @property
    def equal(self) -> bool:
        """Whether nothing changed (no sentence to say)."""
        return not self.sentences

    def __bool__(self) -> bool:
        return not self.equal

    def __repr__(self) -> str:
        counts = Counter(change.state for change in self.nodes)
        return f"GraphDiff({', '.join(f'{state}={counts[state]}' for state in STATES)})"

    def text(self, limit: Optional[int] = None) -> str:
        """The sentences, one a line (the first ``limit`` of them and a line saying how many
        more), or ``no change``."""
        if not self.sentences:
            return NO_CHANGE + "\n"
        shown = list(self.sentences[:limit] if limit is not None else self.sentences)
        if len(shown) < len(self.sentences):
            shown.append(f"... and {plural(len(self.sentences) - len(shown), 'change')} more")
        return "\n".join(shown) + "\n"

    def counts(self) -> dict[str, int]:
        """How many nodes are in each state."""
        counts = Counter(change.state for change in self.nodes)
        return {state: counts[state] for state in STATES}

    def overlay(self) -> Overlay:
        """Each node's state in the merged graph as an :class:`Overlay` (scale ``diff``),
        with what changed in its tooltip (``was -> now``)."""
        values = {change.id: float(STATE_BITS[change.state]) for change in self.nodes}
        tooltips = {}
        for change in self.nodes:
            if change.state == CHANGED:
                tooltips[change.id] = "changed: " + "; ".join(f"{what} {was} -> {now}" for what, was, now in change.changes)
            elif change.state != UNCHANGED:
                tooltips[change.id] = change.state
        return Overlay(OVERLAY_NAME, "change", values, rollup="union", scale="diff", tooltips=tooltips)

    def drawn(self) -> tuple[AutogradGraph, Overlay]:
        """The merged graph with every module whose nodes share one state closed to one box
        (those where nothing changed, and those added or removed whole), and the overlay on
        it: the graph a picture of the diff starts from, open only where it changed."""
        overlay = self.overlay()
        if not self.merged.modules:
            return self.merged, overlay
        tree = ModuleTree(self.merged.modules)
        states: dict[str, set[str]] = {}
        for change in self.nodes:
            for path in tree.chain(change.module):
                states.setdefault(path, set()).add(change.state)
        uniform = {path for path, found in states.items() if len(found) == 1 and CHANGED not in found}
        boxes = {path for path in uniform if tree.parent(path) not in uniform}
        if not boxes:
            return self.merged, overlay
        graph, ids = collapse_to_boxes(self.merged, boxes)
        return graph, overlay.rolled_onto(ids)

    def view(self, options: Optional[DrawOptions] = None, **changes: Any) -> View:
        """The prepared view of the diff: :meth:`drawn` given to :func:`prepare`, with the
        options of ``make_dot``. Every front end (DOT, SVG, the command line, goldens) draws it."""
        graph, overlay = self.drawn()
        return prepare(graph, options, overlays=[overlay], **changes)

    def to_dict(self) -> dict[str, Any]:
        """The diff as JSON-ready plain data: sentences, counts, modules and nodes."""
        return {
            "equal": self.equal,
            "sentences": list(self.sentences),
            "counts": self.counts(),
            "modules": [m.to_dict() for m in self.modules if m.state != UNCHANGED],
            "nodes": [n.to_dict() for n in self.nodes if n.state != UNCHANGED],
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text, keys sorted: the same bytes on every run."""
        return json.dumps(self.to_dict(), sort_keys=True, indent=2) + "\n"


def diff(old: Any, new: Any, params: Any = None, **walk_options: Any) -> GraphDiff:
    """What changed from the graph ``old`` to the graph ``new`` (walked graphs, or what
    :func:`~graphviz_autograd.walk` takes, walked with ``params`` and ``walk_options``).

    >>> import torch
    >>> from graphviz_autograd import walk
    >>> w = torch.ones(2, requires_grad=True)
    >>> found = diff(walk((w * 2).sum(), {"w": w}), walk((w * 2).exp().sum(), {"w": w}))
    >>> found.sentences, found.counts()["added"]
    (('the model: ExpBackward0 added',), 1)
    """
    return _Differ(_graph(old, params, walk_options), _graph(new, params, walk_options)).run()


def _graph(value: Any, params: Any, walk_options: dict) -> AutogradGraph:
    if isinstance(value, AutogradGraph):
        return value
    if isinstance(value, GraphDiff):
        raise InputTypeError("diff() takes two graphs or two outputs to walk; got a GraphDiff. Pass the graphs it compared.")
    from ..capture.walking import walk

    return walk(value, params, **walk_options)


class _Side:
    """One graph, as the matching reads it."""

    def __init__(self, graph: AutogradGraph):
        self.graph = graph
        self.nodes = graph.nodes
        self.tree = ModuleTree(graph.modules)
        self.accumulator: dict[str, str] = {}  # a leaf's id -> its AccumulateGrad's
        kinds = {node.id: node.kind for node in self.nodes}
        for edge in graph.edges:
            if edge.kind == DATA and kinds.get(edge.target) == ACCUMULATE_GRAD:
                self.accumulator.setdefault(edge.source, edge.target)


def _tensor_name(node: Node) -> Optional[str]:
    """The name a node matches by, across modules: parameters and frozen ones, named leaves."""
    if node.kind in (PARAMETER, LEAF) and node.label:
        return node.label
    if node.kind == NO_GRAD and node.note == FROZEN and node.label.startswith(_FROZEN_PREFIX):
        return node.label[len(_FROZEN_PREFIX):]
    return None


class _Differ:
    def __init__(self, old: AutogradGraph, new: AutogradGraph):
        self.a, self.b = _Side(old), _Side(new)
        self.module_map: dict[str, str] = {}  # old listed path -> new listed path
        self.pairs: dict[str, str] = {}  # old node id -> new node id

    def run(self) -> GraphDiff:
        self.match_modules()
        self.match_nodes()
        return self.result()

    # --- modules ---------------------------------------------------------------------

    def match_modules(self) -> None:
        a, b = self.a.tree, self.b.tree
        mapping = self.module_map
        mapping[""] = ""
        pending = [("", "")]
        while pending:
            old_parent, new_parent = pending.pop()
            old_children = a.children.get(old_parent, [])
            new_children = b.children.get(new_parent, [])
            new_by_name = {_child_name(path, new_parent): path for path in new_children}
            taken: set[str] = set()
            left: list[str] = []
            for path in old_children:
                match = new_by_name.get(_child_name(path, old_parent))
                if match is not None and match not in taken:
                    mapping[path] = match
                    taken.add(match)
                else:
                    left.append(path)
            # Where a name went and one of the same class came, in the same place: renamed.
            others = [path for path in new_children if path not in taken]
            for path in left:
                type_name = a.info[path].type_name
                match = next((p for p in others if b.info[p].type_name == type_name), None)
                if match is not None:
                    others.remove(match)
                    mapping[path] = match
            pending.extend((path, mapping[path]) for path in old_children if path in mapping)

    def mapped_path(self, path: str) -> Optional[str]:
        """An old module path as the new graph names it (None: its module went)."""
        listed = self.a.tree.listed(path)
        new = self.module_map.get(listed)
        if new is None:
            return None
        rest = path[len(listed):]
        return new + rest if new or not rest else rest.lstrip(".")

    def mapped_name(self, name: str) -> str:
        """An old tensor name (``h.0.mlp.c_fc.weight``) under the new module paths."""
        owner, _, leaf = name.rpartition(".")
        if not owner:
            return name
        mapped = self.mapped_path(owner)
        return f"{mapped}.{leaf}" if mapped else (leaf if mapped == "" else name)

    # --- nodes -----------------------------------------------------------------------

    def match_nodes(self) -> None:
        a, b = self.a, self.b
        pairs = self.pairs
        # Tensors by name: a parameter, frozen or not, is itself wherever its module went.
        named_b: dict[str, str] = {}
        for node in b.nodes:
            name = _tensor_name(node)
            if name is not None:
                named_b.setdefault(name, node.id)
        matched_b: set[str] = set()
        for node in a.nodes:
            name = _tensor_name(node)
            if name is None:
                continue
            match = named_b.get(self.mapped_name(name))
            if match is not None and match not in matched_b:
                pairs[node.id] = match
                matched_b.add(match)
                old_grad, new_grad = a.accumulator.get(node.id), b.accumulator.get(match)
                if old_grad and new_grad:
                    pairs[old_grad] = new_grad
                    matched_b.add(new_grad)
        # Outputs by name and order.
        outputs_b: dict[str, list[str]] = {}
        for node in b.nodes:
            if node.kind == OUTPUT:
                outputs_b.setdefault(node.label, []).append(node.id)
        for node in a.nodes:
            if node.kind == OUTPUT and outputs_b.get(node.label):
                match = outputs_b[node.label].pop(0)
                pairs[node.id] = match
                matched_b.add(match)
        # The rest by module, in the order of the walk: aligned like lines of text.
        groups_a: dict[str, list[Node]] = {}
        for node in a.nodes:
            if node.id in pairs:
                continue
            path = self.mapped_path(node.module)
            if path is not None:
                groups_a.setdefault(path, []).append(node)
        groups_b: dict[str, list[Node]] = {}
        for node in b.nodes:
            if node.id not in matched_b:
                groups_b.setdefault(node.module, []).append(node)
        for path, old_nodes in groups_a.items():
            new_nodes = groups_b.get(path)
            if not new_nodes:
                continue
            for i, j in aligned([_order_key(n) for n in old_nodes], [_order_key(n) for n in new_nodes]):
                pairs[old_nodes[i].id] = new_nodes[j].id

    # --- the result ------------------------------------------------------------------

    def result(self) -> GraphDiff:
        a, b = self.a, self.b
        pairs = self.pairs
        old_of = {new: old for old, new in pairs.items()}
        old_by_id = {node.id: node for node in a.nodes}
        # The merged graph is built as columns (see AutogradGraph.from_columns): the new
        # graph's nodes as they are, then the old graph's that went; ids n0, n1, ... in that order.
        new_columns, old_columns = b.graph.columns(), a.graph.columns()
        contents: list[tuple] = list(new_columns.contents)
        count = len(contents)
        ids = numbered_ids(count + len(a.nodes))
        changes: list[NodeChange] = []
        old_index: dict[str, int] = {}  # old node id -> its index in the merged graph
        for index, node in enumerate(b.nodes):
            old_id = old_of.get(node.id)
            if old_id is None:
                changes.append(new_record(NodeChange, (ADDED, ids[index], "", node.id, node.module, ())))
                continue
            old_index.setdefault(old_id, index)
            found = _changes(old_by_id[old_id], node)
            changes.append(new_record(NodeChange, (CHANGED if found else UNCHANGED, ids[index], old_id, node.id,
                                                   node.module, found)))
        removed_modules = self.removed_modules()
        for node in a.nodes:
            if node.id in pairs or node.id in old_index:
                continue
            index = old_index[node.id] = len(contents)
            path = self.mapped_path(node.module)
            module = node.module if path is None else path
            contents.append((*node[1:-1], module))
            changes.append(new_record(NodeChange, (REMOVED, ids[index], node.id, "", module, ())))
        links = [link for link in new_columns.links if link[0] < count and link[1] < count]  # none to an unknown id
        seen = {(source, target, rest[0] if rest else DATA) for source, target, rest in links}
        old_ids = old_columns.ids
        assert old_ids is not None  # columns() fills them in
        for source, target, rest in old_columns.links:
            if source >= len(a.nodes) or target >= len(a.nodes):
                continue
            ends = old_index.get(old_ids[source]), old_index.get(old_ids[target])
            key = (ends[0], ends[1], rest[0] if rest else DATA)
            if ends[0] is not None and ends[1] is not None and key not in seen:
                seen.add(key)
                links.append((ends[0], ends[1], rest))
        del ids[len(contents):]
        modules = _merged_modules(a.graph.modules, b.graph.modules, removed_modules, self.module_map)
        merged = AutogradGraph.from_columns(Columns(ids, contents, links), params_given=a.graph.params_given or
                                            b.graph.params_given, modules=modules)
        module_changes = self.module_changes(changes, modules, removed_modules)
        sentences = _Sentences(self, changes, module_changes, merged).all()
        return GraphDiff(a.graph, b.graph, merged, tuple(changes), module_changes, tuple(sentences))

    def removed_modules(self) -> list[ModuleInfo]:
        return [m for m in self.a.graph.modules if m.path and m.path not in self.module_map]

    def module_changes(self, changes: Sequence[NodeChange], modules: Sequence[ModuleInfo],
                       removed: Sequence[ModuleInfo]) -> tuple[ModuleChange, ...]:
        tree = ModuleTree(modules)
        counts: dict[str, Counter] = {}
        for change in changes:
            if change.state == UNCHANGED:
                continue
            for path in [*tree.chain(change.module), ""]:
                counts.setdefault(path, Counter())[change.state] += 1
        old_path = {new: old for old, new in self.module_map.items()}
        removed_paths = {m.path for m in removed}
        found = []
        for module in modules:
            count = counts.get(module.path, Counter())
            if module.path in removed_paths:
                state, before, old_type = REMOVED, module.path, module.type_name
            elif module.path not in old_path:
                state, before, old_type = ADDED, "", ""
            else:
                before = old_path[module.path]
                old_type = self.a.tree.info[before].type_name if before in self.a.tree.info else module.type_name
                if old_type != module.type_name or any(count.values()):
                    state = CHANGED
                elif before != module.path:
                    state = "renamed"
                else:
                    state = UNCHANGED
            found.append(ModuleChange(module.path, before, module.type_name, old_type, state,
                                      count[ADDED], count[REMOVED], count[CHANGED]))
        return tuple(found)


def aligned(old: Sequence[Any], new: Sequence[Any]) -> list[tuple[int, int]]:
    """The places ``(i, j)`` where ``old[i]`` and ``new[j]`` stand for one node: the common
    start and end as they are, and between them what a text diff aligns (runs of other
    items of the same length pair up: changed, not removed and added).

    >>> aligned("abcxde", "abcyde"), aligned("ab", "axxb")
    ([(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)], [(0, 0), (1, 3)])
    """
    start = 0
    while start < len(old) and start < len(new) and old[start] == new[start]:
        start += 1
    end = 0
    while end < len(old) - start and end < len(new) - start and old[-1 - end] == new[-1 - end]:
        end += 1
    pairs = [(i, i) for i in range(start)]
    middle_old, middle_new = old[start:len(old) - end], new[start:len(new) - end]
    if middle_old and middle_new:
        if len(middle_old) * len(middle_new) <= _ALIGN_LIMIT:
            matcher = difflib.SequenceMatcher(None, middle_old, middle_new, autojunk=False)
            for tag, i1, i2, j1, j2 in matcher.get_opcodes():
                if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
                    pairs.extend((start + i, start + j) for i, j in zip(range(i1, i2), range(j1, j2)))
        elif len(middle_old) == len(middle_new):  # too long to align in time: place by place
            pairs.extend((start + k, start + k) for k in range(len(middle_old)))
    pairs.extend((len(old) - end + k, len(new) - end + k) for k in range(end))
    return pairs


def _child_name(path: str, parent: str) -> str:
    return path[len(parent) + 1:] if parent else path


def _order_key(node: Node) -> tuple[str, str]:
    """What a node is matched by in its module's order: its kind and op name, its reason when
    it carries no gradient (a named cut is one of a kind; anonymous inputs are alike)."""
    if node.kind == NO_GRAD:
        return (node.kind, node.note)
    return (node.kind, node.label)


def _changes(old: Node, new: Node) -> tuple[tuple[str, str, str], ...]:
    """What differs between two matched nodes, as (what, was, now)."""
    if old[1:] == new[1:]:  # most nodes: the same content, whatever their ids
        return ()
    found = []
    if old.kind != new.kind:
        found.append(("gradient" if _tensor_name(old) else "kind", _grad_state(old), _grad_state(new)))
    elif old.label != new.label and old.kind not in (PARAMETER, LEAF):
        found.append(("op" if old.kind == OP else "name", old.label, new.label))
    if old.note != new.note and old.kind == new.kind:
        found.append(("reason", old.note or "none", new.note or "none"))
    if old.shape != new.shape and old.shape is not None and new.shape is not None:
        found.append(("shape", shape_text(old.shape), shape_text(new.shape)))
    if old.dtype != new.dtype and old.dtype and new.dtype:
        found.append(("dtype", old.dtype, new.dtype))
    old_name, new_name = _tensor_name(old), _tensor_name(new)
    if old_name and new_name and old_name != new_name:
        found.append(("name", old_name, new_name))  # its module was renamed
    if old.module != new.module:
        found.append(("module", old.module, new.module))
    if old.attrs != new.attrs and old.attrs and new.attrs and old.kind != NO_GRAD:
        # A port's name is where the tensor crosses a module call, by path and argument: the
        # module's own change (a rename) says it, not each op at its border.
        before = {k: v for k, v in old.attrs if k != PORT_ATTR}
        after = {k: v for k, v in new.attrs if k != PORT_ATTR}
        for key in sorted(set(before) | set(after)):
            if before.get(key) != after.get(key):
                found.append((f"attribute {key}", before.get(key, "none"), after.get(key, "none")))
    return tuple(found)


def _grad_state(node: Node) -> str:
    if node.kind == NO_GRAD:
        return "frozen" if node.note == FROZEN else "no gradient"
    if node.kind in (PARAMETER, LEAF):
        return "learning"
    return node.kind


def _merged_modules(old: Sequence[ModuleInfo], new: Sequence[ModuleInfo], removed: Sequence[ModuleInfo],
                    mapping: dict[str, str]) -> tuple[ModuleInfo, ...]:
    """The new graph's modules, with each removed module of the old graph put in after the
    module (as the new graph names it) that came before it there."""
    if not removed:
        return tuple(new)
    after: dict[str, list[ModuleInfo]] = {}
    previous = ""
    removed_paths = {m.path for m in removed}
    for module in old:
        if module.path in removed_paths:
            after.setdefault(previous, []).append(module)
        else:
            previous = mapping.get(module.path, previous)
    merged: list[ModuleInfo] = []
    placed = {m.path for m in new}
    if "" not in placed:  # no model listed in the new graph: what came first goes first
        merged.extend(after.pop("", []))
    for module in new:
        merged.append(module)
        merged.extend(after.pop(module.path, []))
    for rest in after.values():
        merged.extend(rest)
    return tuple(merged)


class _Sentences:
    """The words of a diff: one sentence per module (or per tensor) that changed, the same
    change in alike blocks said once (``h.{0,1}.mlp``), most nodes changed first."""

    def __init__(self, differ: _Differ, changes: Sequence[NodeChange], modules: Sequence[ModuleChange],
                 merged: AutogradGraph):
        self.differ = differ
        self.changes = changes
        self.modules = {m.path: m for m in modules}
        self.order = {m.path: i for i, m in enumerate(modules)}
        self.tree = ModuleTree(merged.modules)
        self.nodes = self.changed_nodes(differ, changes)
        self.subtree: Counter = Counter()  # merged module path -> nodes of either side inside it
        self.new_side: Counter = Counter()  # ... of the new graph
        for change in changes:
            for path in self.tree.chain(change.module):
                self.subtree[path] += 1
                if change.state != REMOVED:
                    self.new_side[path] += 1
        self.parts: dict[str, list[str]] = {}  # module path -> what changed in it, in words
        self.weight: Counter = Counter()  # module path -> nodes its words stand for
        self.minor: list[tuple[str, str]] = []  # inputs without gradient added or removed, by module
        # (weight, module order, subject, text) of each sentence
        self.found: list[tuple[int, int, str, str]] = []

    @staticmethod
    def changed_nodes(differ: _Differ, changes: Sequence[NodeChange]) -> dict[str, Node]:
        """The node of each change that is not ``unchanged``, by its id in the merged graph, in its module there."""
        new_nodes = {node.id: node for node in differ.b.nodes}
        old_nodes = {node.id: node for node in differ.a.nodes}
        return {
            change.id: (new_nodes[change.new] if change.new else old_nodes[change.old])._replace(id=change.id, module=change.module)
            for change in changes if change.state != UNCHANGED
        }

    def part(self, path: str, weight: int, text: str) -> None:
        self.parts.setdefault(path, []).append(text)
        self.weight[path] += weight

    def say(self, weight: int, path: str, subject: str, text: str) -> None:
        self.found.append((weight, self.order.get(self.tree.listed(path), -1), subject, text))

    def all(self) -> list[str]:
        whole = self.whole_modules()
        per_module: dict[str, list[NodeChange]] = {}
        tensors: list[tuple[str, str, str, str]] = []  # (subject, change text, module, kind)
        for change in self.changes:
            if change.state == UNCHANGED or any(path in whole for path in self.tree.chain(change.module)):
                continue
            node = self.nodes[change.id]
            name = _tensor_name(node) or (("output " + node.label).strip() if node.kind == OUTPUT else None)
            if name is not None:
                text = self.tensor_text(change, node)
                if text:
                    tensors.append((name, text, change.module, node.kind))
                continue
            if node.kind == ACCUMULATE_GRAD and change.state != CHANGED:
                continue  # said with its parameter: frozen, added or removed
            per_module.setdefault(self.tree.listed(change.module), []).append(change)
        for path, found in per_module.items():
            self.module_parts(path, found)
        for path, parts in self.parts.items():
            self.say(self.weight[path], path, _named(path), "; ".join(parts))
        self.tensor_sentences(tensors)
        if not self.found:
            for path, text in self.minor:
                self.say(1, path, _named(path), text)
        return self.joined()

    def joined(self) -> list[str]:
        """The sentences, those that say the same of alike blocks said once, most significant first."""
        groups: dict[tuple[str, str], list[tuple[int, int, str]]] = {}
        for weight, order, subject, text in self.found:
            groups.setdefault((_pattern(subject), text), []).append((weight, order, subject))
        said = []
        for (_, text), members in groups.items():
            subject = members[0][2] if len(members) == 1 else _joined([m[2] for m in members])
            said.append((-sum(m[0] for m in members), min(m[1] for m in members), f"{subject}: {text}"))
        return [text for _, _, text in sorted(said)]

    def whole_modules(self) -> set[str]:
        """Modules added, removed, renamed, of another class, or no longer (or newly) in the
        backward graph: their own words say them, and an added or removed one says all it holds."""
        whole: set[str] = set()
        for path, module in self.modules.items():
            if not path or any(path.startswith(w + ".") for w in whole):
                continue
            if module.state in (ADDED, REMOVED):
                whole.add(path)
                self.part(path, max(self.subtree[path], 1) + 1, self.whole_module_text(module))
                continue
            renamed = module.path != module.old_path and self.modules.get(self.tree.parent(path), module).path == \
                self.modules.get(self.tree.parent(path), module).old_path
            if renamed:
                self.part(path, 1, f"renamed from {module.old_path}")
            if module.type_name != module.old_type:
                self.part(path, self.subtree[path] + 1, f"a {module.type_name} where a {module.old_type} was")
            elif self.subtree[path] and module.removed == self.subtree[path]:
                whole.add(path)
                self.part(path, self.subtree[path], f"no longer in the backward graph ({self.counts_text(path, REMOVED)})")
            elif self.subtree[path] and module.added == self.subtree[path]:
                whole.add(path)
                self.part(path, self.subtree[path], f"now in the backward graph ({self.counts_text(path, ADDED)})")
        return whole

    def counts_text(self, path: str, state: str) -> str:
        inside = [self.nodes[c.id] for c in self.changes if c.state == state and path in self.tree.chain(c.module)]
        ops = sum(1 for node in inside if node.kind == OP)
        tensors = sum(1 for node in inside if _tensor_name(node))
        return plural(ops, "op") + (f", {plural(tensors, 'parameter')}" if tensors else "")

    def whole_module_text(self, module: ModuleChange) -> str:
        side = self.differ.b if module.state == ADDED else self.differ.a
        path = module.path if module.state == ADDED else module.old_path
        ops = sum(1 for node in side.nodes if node.kind == OP and path in side.tree.chain(node.module))
        info = side.tree.info.get(path)
        params = info.parameters if info is not None else 0
        counts = plural(ops, "op") + (f", {count_text(params)} parameters" if params else "")
        return f"a {module.type_name} {module.state} ({counts})"

    def tensor_text(self, change: NodeChange, node: Node) -> str:
        if change.state == ADDED:
            return "added" + (f" {shape_text(node.shape)}" if node.shape is not None and node.kind != OUTPUT else "")
        if change.state == REMOVED:
            return "removed"
        parts = []
        for what, was, now in change.changes:
            if what in _SAID_BY_MODULE:
                continue
            if what == "gradient":
                parts.append(f"{now}, was {was}")
            elif what == "shape":
                parts.append(f"shape {now} where {was} was")
            elif what == "dtype":
                parts.append(f"{now} where {was} was")
            else:
                parts.append(f"{what} {now} where {was} was")
        return ", ".join(parts)

    def module_parts(self, path: str, found: list[NodeChange]) -> None:
        added: Counter = Counter()
        removed: Counter = Counter()
        replaced: Counter = Counter()
        other: list[str] = []
        cuts: list[str] = []
        inputs: Counter = Counter()  # inputs without gradient (constants): said only when nothing else is
        for change in found:
            node = self.nodes[change.id]
            if node.kind == NO_GRAD and node.note in _CUT_WORDS and change.state != CHANGED:
                cuts.append(("gradient cut by " if change.state == ADDED else "no longer cut by ") + _CUT_WORDS[node.note])
            elif node.kind == NO_GRAD and change.state != CHANGED:
                inputs[change.state] += 1
            elif change.state == ADDED:
                added[_node_word(node)] += 1
            elif change.state == REMOVED:
                removed[_node_word(node)] += 1
            else:
                for field, was, now in change.changes:
                    if field in _SAID_BY_MODULE:
                        continue
                    if field == "op":
                        replaced[(now, was)] += 1
                    else:
                        other.append(f"{_node_word(node)} {field} {now} where {was} was")
        parts = list(dict.fromkeys(cuts))
        for (now, was), count in sorted(replaced.items()):
            parts.append(f"{_times(count, now)} where {_times(count, was)} {'was' if count == 1 else 'were'}")
        if added and removed:
            parts.append(f"{_listed(added)} where {_listed(removed)} {'was' if sum(removed.values()) == 1 else 'were'}")
        elif added:
            parts.append(f"{_listed(added)} added")
        elif removed:
            parts.append(f"{_listed(removed)} removed")
        parts.extend(dict.fromkeys(other))
        if parts:
            self.part(path, len(found), "; ".join(parts))
        else:  # a constant more or less: said only when nothing else changed
            self.minor.extend((path, f"{plural(count, 'input')} without gradient {state}") for state, count in sorted(inputs.items()))

    def tensor_sentences(self, tensors: list[tuple[str, str, str, str]]) -> None:
        by_text: dict[str, list[tuple[str, str, str]]] = {}
        for subject, text, module, kind in tensors:
            by_text.setdefault(text, []).append((subject, module, kind))
        for text, subjects in by_text.items():
            weight = 3 if text.startswith(("frozen", "learning", "no gradient")) else 1
            if len({_pattern(subject) for subject, _, _ in subjects}) > _MANY:
                common = _common_module([self.tree.listed(module) for _, module, _ in subjects])
                kinds = Counter("output" if kind == OUTPUT else "parameter" for _, _, kind in subjects)
                what = " and ".join(plural(count, kind) for kind, count in sorted(kinds.items(), key=lambda i: i[0] != "parameter"))
                self.say(weight * len(subjects), common, _named(common), f"{what} {text}")
                continue
            for subject, module, _ in subjects:
                self.say(weight, module, subject, text)


def _named(path: str) -> str:
    return path or "the model"


def _node_word(node: Node) -> str:
    if node.kind == NO_GRAD:
        return "input without gradient" + (f" ({node.label})" if node.label else "")
    if node.kind == OUTPUT:
        return "output"
    return node.label or node.kind


def _times(count: int, what: str) -> str:
    return what if count == 1 else f"{count} {what}"


def _listed(counts: Counter, most: int = 3) -> str:
    """Ops by name and count: ``ReluBackward0``, ``2 MulBackward0, AddBackward0``, or for
    many, ``9 ops (4 MulBackward0, 2 AddBackward0, PowBackward0 and 2 more)``."""
    items = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    words = [_times(count, what) for what, count in items[:most]]
    if len(items) <= most:
        return ", ".join(words)
    rest = sum(count for _, count in items[most:])
    return f"{sum(counts.values())} ops ({', '.join(words)} and {rest} more)"


def _pattern(subject: str) -> str:
    return ".".join("*" if _INDEX.match(part) else part for part in subject.split("."))


def _joined(subjects: Iterable[str]) -> str:
    """Names alike but for their block indices, as one: ``h.{0,1}.mlp.c_fc.weight``."""
    split = [subject.split(".") for subject in subjects]
    parts = []
    for column in zip(*split):
        values = list(dict.fromkeys(column))
        parts.append(values[0] if len(values) == 1 else "{" + ",".join(values) + "}")
    return ".".join(parts)


def _common_module(paths: Sequence[str]) -> str:
    split = [path.split(".") if path else [] for path in paths]
    common: list[str] = []
    for column in zip(*split):
        if len(set(column)) > 1:
            break
        common.append(column[0])
    return ".".join(common)
