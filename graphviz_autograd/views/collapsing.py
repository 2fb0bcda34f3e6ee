"""Collapse a recorded graph to a module depth: one box per module, repeated blocks folded.

A pure function over plain data: it reads ``Node.module`` and ``AutogradGraph.modules``
(which a recorded forward pass fills in) and returns a new, smaller graph.

>>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, Edge, ModuleInfo, Node, OP, OUTPUT
>>> g = AutogradGraph(
...     nodes=(Node("n0", OUTPUT, "out"), Node("n1", OP, "ReluBackward0", module="act"),
...            Node("n2", OP, "AddmmBackward0", module="fc")),
...     edges=(Edge("n1", "n0"), Edge("n2", "n1")),
...     modules=(ModuleInfo("", "Net", 10), ModuleInfo("fc", "Linear", 10), ModuleInfo("act", "ReLU")),
... )
>>> small = collapse(g, depth=0)
>>> [(n.id, n.kind, n.label) for n in small.nodes]
[('n0', 'output', 'out'), ('n1', 'module', 'act'), ('n2', 'module', 'fc')]
>>> dict(small.nodes[2].attrs)
{'type': 'Linear', 'ops': '1', 'params': '10'}
"""

from __future__ import annotations

import math
from collections import Counter
from typing import AbstractSet, Callable, Hashable, Mapping, Optional, Sequence

from ..options import check_depth
from ..errors import OptionError
from ..graph.module_tree import ModuleTree
from ..graph.autograd_graph import ACCUMULATE_GRAD, CUT, CUT_IN, LEAF, MODULE, NO_GRAD, OP, OUTPUT, PARAMETER, PLAIN_INPUT_REASONS, SAVED, SAVED_BY, AutogradGraph, Edge, ModuleInfo, Node, cut_location, leaves_and_returns, module_of_call

# A block's parameters and the nodes that take their gradients (the first call of a
# module holds them, its later calls read them from there), and its inputs without gradient.
_NOT_COUNTED = (PARAMETER, LEAF, ACCUMULATE_GRAD, NO_GRAD)
# Between the first and the last path of folded blocks: "transformer.h.0 … h.11".
ELLIPSIS = " \u2026 "


def collapse(graph: AutogradGraph, depth: int, fold_repeated: bool = True) -> AutogradGraph:
    """``graph`` with each module ``depth`` levels below the model drawn as one box.

    ``depth=0`` gives one box per top-level child of the model (``encoder``,
    ``decoder``), ``depth=1`` one per grandchild (``transformer.h``,
    ``transformer.wte``), and so on; a module shallower than that with no
    submodules is a box too. Every node whose module lies inside a box becomes
    that box: ops, parameters and their AccumulateGrad, the saved tensors of its
    ops, and the anonymous inputs without gradient its ops consume. Outputs, nodes
    of shallower modules and no-grad inputs that name their cause
    (``detach()``, ``frozen fc.weight``) stay. Edges follow their ends; duplicates
    and edges inside one box go.

    With ``fold_repeated``, consecutive sibling boxes of the same class and
    content (the same op names, the same parameter count) become one box, such as
    ``transformer.h.0 … h.11``, a ``GPT2Block`` ×12.

    Node ids are renumbered ``n0, n1, ...`` in the order nodes first appear in
    the walk, so the result is as byte-stable as the input.

    >>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, Node, ModuleInfo, OP
    >>> g = AutogradGraph((Node("n0", OP, "MulBackward0", module="a.b"),), (),
    ...                   modules=(ModuleInfo("", "M"), ModuleInfo("a", "A"), ModuleInfo("a.b", "B")))
    >>> collapse(g, 0).nodes[0].label, collapse(g, 1).nodes[0].label
    ('a', 'a.b')
    """
    return collapse_with_ids(graph, depth, fold_repeated)[0]


def collapse_with_ids(
    graph: AutogradGraph, depth: int, fold_repeated: bool = True
) -> tuple[AutogradGraph, dict[str, str]]:
    """What :func:`collapse` returns, and the id each node of ``graph`` has in it (its box's, or its own new id)."""
    check_depth(depth)
    if not isinstance(fold_repeated, bool):
        raise OptionError(f"fold_repeated must be True or False; got {fold_repeated!r}.")
    if not graph.modules:
        raise OptionError(
            "depth needs to know which module made each node, and this graph has no module info; "
            "draw a graph from a recorded forward pass (graphviz_autograd.record) or leave depth out."
        )
    tree = ModuleTree.of(graph.modules)
    return _collapsed(graph, tree, _BoxFinder(tree, depth), fold_repeated)


def collapse_to_boxes(graph: AutogradGraph, boxes: AbstractSet[str], fold_repeated: bool = True) -> tuple[AutogradGraph, dict[str, str]]:
    """``graph`` with each module of ``boxes`` (paths of listed modules, none inside
    another) drawn as one box, as :func:`collapse` draws the modules at a depth, and the
    id each node has in it. A diff closes the modules where nothing changed so.

    >>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, Node, ModuleInfo, OP
    >>> g = AutogradGraph((Node("n0", OP, "MulBackward0", module="a.b"), Node("n1", OP, "ExpBackward0", module="c")), (),
    ...                   modules=(ModuleInfo("", "M"), ModuleInfo("a", "A"), ModuleInfo("a.b", "B"), ModuleInfo("c", "C")))
    >>> [(n.kind, n.label) for n in collapse_to_boxes(g, {"a.b"})[0].nodes]
    [('module', 'a.b'), ('op', 'ExpBackward0')]
    """
    tree = ModuleTree.of(graph.modules)
    return _collapsed(graph, tree, _BoxFinder(tree, 0, frozenset(boxes)), fold_repeated)


def _collapsed(
    graph: AutogradGraph, tree: ModuleTree, box_of: "_BoxFinder", fold_repeated: bool
) -> tuple[AutogradGraph, dict[str, str]]:
    owner = _representatives(graph, box_of)  # node id -> box path, for nodes a box swallows

    members: dict[str, list[Node]] = {}
    for node in graph.nodes:
        path = owner.get(node.id)
        if path is not None:
            members.setdefault(path, []).append(node)
    folded_into = _fold(tree, members, graph_targets(graph)) if fold_repeated else {}

    # Renumber in walk order of first appearance; a box appears where its first member does.
    new_id: dict[str, str] = {}  # old node id -> new id
    box_id: dict[str, str] = {}  # box path (after folding) -> new id
    nodes: list[Optional[Node]] = []
    box_index: dict[str, int] = {}
    for node in graph.nodes:
        path = owner.get(node.id)
        if path is None:
            new_id[node.id] = f"n{len(nodes)}"
            nodes.append(_kept(node, new_id[node.id], box_of))
            continue
        path = folded_into.get(path, path)
        if path not in box_id:
            box_id[path] = f"n{len(nodes)}"
            box_index[path] = len(nodes)
            nodes.append(None)
        new_id[node.id] = box_id[path]

    group: dict[str, list[str]] = {}
    for path in members:
        group.setdefault(folded_into.get(path, path), []).append(path)
    for path, index in box_index.items():
        nodes[index] = _box_node(box_id[path], [tree.info[p] for p in sorted(group[path], key=tree.order.__getitem__)],
                                 members, tree)

    collapsed = AutogradGraph(
        nodes=tuple(nodes),  # type: ignore[arg-type]
        edges=_edges(graph.edges, new_id),
        params_given=graph.params_given,
        modules=graph.modules,
    )
    return collapsed, new_id


class _BoxFinder:
    """Which box (module path) a module path falls in at a depth, cached per path."""

    def __init__(self, tree: ModuleTree, depth: int, chosen: Optional[AbstractSet[str]] = None):
        self.tree = tree
        self.levels = depth + 1  # path components of a box's module
        self.chosen = chosen  # the boxes, when chosen by path rather than by depth
        self.cache: dict[str, Optional[str]] = {}

    def __call__(self, path: str) -> Optional[str]:
        try:
            return self.cache[path]
        except KeyError:
            pass
        box = None
        if path and self.chosen is not None:
            parts = path.split(".")
            box = next((p for p in (".".join(parts[:n]) for n in range(1, len(parts) + 1)) if p in self.chosen), None)
        elif path:
            parts = path.split(".")
            for count in range(1, min(len(parts), self.levels) + 1):
                prefix = ".".join(parts[:count])
                if prefix in self.tree.info and (count == self.levels or prefix not in self.tree.children):
                    box = prefix
                    break
        self.cache[path] = box
        return box

    def placed_in(self, path: str) -> str:
        """The module a kept node sits in: where it was, or beside the box that took its module."""
        box = self(path)
        return path if box is None else self.tree.parent(box)


def _kept(node: Node, node_id: str, box_of: _BoxFinder) -> Node:
    """A node that stays, renumbered; one whose module went into a box sits beside the box.

    A no-grad input moved so keeps the module where the gradient was cut in its
    attrs (see :func:`~graphviz_autograd.graph.autograd_graph.cut_location`).
    """
    placed = box_of.placed_in(node.module)
    if placed == node.module:
        return node._replace(id=node_id)
    if node.kind == NO_GRAD:
        return node._replace(id=node_id, module=placed, attrs=((CUT_IN, cut_location(node)),))
    return node._replace(id=node_id, module=placed)


def _representatives(graph: AutogradGraph, box_of: _BoxFinder) -> dict[str, str]:
    """The box path of every node a box swallows."""
    owner: dict[str, str] = {}
    followers: dict[str, Node] = {}  # saved tensors and anonymous no-grad inputs: they go where their op goes
    for node in graph.nodes:
        kind = node.kind
        if kind == OUTPUT or (kind == NO_GRAD and node.label and node.note not in PLAIN_INPUT_REASONS):
            continue  # kept: a cut that stops a gradient is what a summary must still show
        if kind == SAVED or kind == NO_GRAD:
            followers[node.id] = node
            continue
        box = box_of(node.module)
        if box is not None:
            owner[node.id] = box
    if followers:
        op_of: dict[str, str] = {}
        for edge in graph.edges:
            source, target, kind = edge[0], edge[1], edge[2]
            if kind == CUT and source in followers:
                op_of.setdefault(source, target)
            elif kind == SAVED_BY and target in followers:
                op_of.setdefault(target, source)
        for node_id, node in followers.items():
            op = op_of.get(node_id)
            box = owner.get(op) if op is not None else None
            if box is None and node.kind == NO_GRAD:
                box = box_of(node.module)
            if box is not None:
                owner[node_id] = box
    return owner


def _signature(info: ModuleInfo, nodes: list[Node]) -> tuple:
    ops = Counter(n.label for n in nodes if n.kind == OP)
    return (info.type_name, info.parameters, tuple(sorted(ops.items())))


def _fold(tree: ModuleTree, members: dict[str, list[Node]], targets: dict[str, set]) -> dict[str, str]:
    """Box path -> the first box of its run of alike consecutive siblings (runs of two or more),
    as :func:`box_runs` finds them."""
    folded_into: dict[str, str] = {}
    parents = {tree.parent(path) for path in members}
    for parent in sorted(parents, key=lambda p: tree.order.get(p, -1)):
        for run in box_runs(tree, tree.children.get(parent, []), members, targets):
            if len(run) > 1:
                folded_into.update((path, run[0]) for path in run)
    return folded_into


def box_runs(
    tree: ModuleTree,
    children: Sequence[str],
    members: Mapping[str, Sequence[Node]],
    targets: Mapping[str, set],
    apart: Optional[Callable[[str], Hashable]] = None,
) -> list[list[str]]:
    """Sibling module boxes (``children``, in order) as the runs one box stands for: alike
    consecutive siblings, of the same class, parameter count and ops. A summary
    (``collapse``) and every level of the explorer fold by this one rule.

    ``members`` holds each box's nodes (a child without any is drawn nowhere and ends a
    run) and ``targets`` each node's consumers. A run that a path leaves and enters
    again stays apart, one box each: one box would draw that path as a loop. So the
    three calls of the ReLU a ResNet block applies after each of its convolutions stay
    three boxes, where a stack of layers (each feeding the next) or alike modules side
    by side (a block's query, key and value) fold. A later call of a module is alike
    with its first call when it uses the same parameters (a cell run at every step folds).
    ``apart`` (a box's path -> a key) keeps boxes with different keys apart: the state of
    each in a diff.
    """

    def signature(child: str) -> Optional[tuple]:
        if child not in members:
            return None
        found = _signature(tree.info[child]._replace(parameters=_parameters_used(tree, child)), list(members[child]))
        return found if apart is None else (found, apart(child))

    runs: list[list[str]] = []
    for run in alike_runs(children, signature):
        if len(run) > 1 and _reenters(run, members, targets):
            runs.extend([child] for child in run)
        else:
            runs.append(run)
    return runs


def alike_runs(children: Sequence[str], signature: Callable[[str], Optional[Hashable]]) -> list[list[str]]:
    """``children`` (siblings, in order) as runs of consecutive ones with the same ``signature``.

    A child whose signature is None (nothing of it is drawn) belongs to no run and ends
    the one before it. Every fold of repeated blocks starts here: the boxes of a summary
    (``collapse``), the blocks a drawing of every node draws once
    (:func:`fold_to_representative`) and the boxes of an explorer level; each then asks
    what it needs of a run (that no path leaves it and comes back, that each block feeds
    the next).

    >>> alike_runs(["a", "b", "c", "d"], {"a": 1, "b": 1, "c": None, "d": 1}.get)
    [['a', 'b'], ['d']]
    """
    runs: list[list[str]] = []
    previous: Optional[Hashable] = None
    for child in children:
        found = signature(child)
        if found is None:
            previous = None
            continue
        if runs and found == previous:
            runs[-1].append(child)
        else:
            runs.append([child])
        previous = found
    return runs


def _box_node(node_id: str, infos: list[ModuleInfo], members: dict[str, list[Node]], tree: ModuleTree) -> Node:
    first = infos[0]
    ops = sum(1 for info in infos for n in members[info.path] if n.kind == OP)
    params = sum(info.parameters for info in infos)
    attrs = [("type", first.type_name), ("ops", str(ops)), ("params", str(params))]
    label = first.path
    if len(infos) > 1:
        parent = tree.parent(first.path)
        # The last path without the part shared with the parent's parent: "h.11", not "transformer.h.11".
        shared = tree.parent(parent) if parent else ""
        last = infos[-1].path
        last = last[len(shared) + 1 :] if shared and last.startswith(shared + ".") else last
        label = first.path + ELLIPSIS + last
        attrs += [("repeats", str(len(infos))), ("first", first.path), ("last", infos[-1].path)]
    return Node(node_id, MODULE, label, attrs=tuple(attrs), module=tree.parent(first.path))


def _edges(edges: tuple[Edge, ...], new_id: dict[str, str]) -> tuple[Edge, ...]:
    """Edges between the new ids: no self-loops, one per (source, target, kind), first one's place.

    A merged edge keeps its shape and dtype only when every edge it stands for agrees.
    """
    merged: dict[tuple[str, str, str], Edge] = {}
    for edge in edges:
        source, target = new_id[edge[0]], new_id[edge[1]]
        if source == target:
            continue
        key = (source, target, edge[2])
        seen = merged.get(key)
        if seen is None:
            merged[key] = Edge(source, target, edge[2], edge[3], edge[4])
        elif (seen[3], seen[4]) != (edge[3], edge[4]):
            merged[key] = seen._replace(shape=None, dtype=None)
    return tuple(merged.values())


def fold_to_representative(graph: AutogradGraph, depth: Optional[int] = None) -> AutogradGraph:
    """``graph`` with each run of identical sibling blocks drawn as its first block alone.

    For a drawing that goes deeper than the blocks of a run (the whole graph when
    ``depth`` is None, else a block more than ``depth`` levels below the model;
    a block at ``depth`` itself is one box, folded by :func:`collapse`), 80
    identical layers would be 80 copies of the same ops. The first block stands
    for all of them: the ops and parameters of the others go, edges from outside
    to any of them go to the matching node of the first, edges between the blocks
    of the run go, and the first block's module is titled with the count and the
    paths it stands for (``LlamaDecoderLayer ×80: layers.0 … layers.79``).
    Blocks are alike when their class, parameter count and ops (names and counts,
    nested modules included) agree and each feeds the next, and their nodes are matched by module path
    inside the block, kind, label and order; a run whose nodes do not match is
    kept as it is.

    >>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, Edge, ModuleInfo, Node, OP, OUTPUT
    >>> nodes = [Node("n0", OUTPUT, "y")] + [Node(f"n{i}", OP, "ExpBackward0", module=f"h.{3 - i}") for i in (1, 2, 3)]
    >>> g = AutogradGraph(tuple(nodes), (Edge("n1", "n0"), Edge("n2", "n1"), Edge("n3", "n2")),
    ...                   modules=(ModuleInfo("", "M"), ModuleInfo("h", "List"), *(ModuleInfo(f"h.{i}", "Block") for i in range(3))))
    >>> small = fold_to_representative(g)
    >>> [n.id for n in small.nodes], [(e.source, e.target) for e in small.edges]
    (['n0', 'n3'], [('n3', 'n0')])
    >>> [m.type_name for m in small.modules if m.path == "h.0"]
    ['Block ×3: h.0 … h.2']
    """
    return fold_with_stand_ins(graph, depth)[0]


def fold_with_stand_ins(graph: AutogradGraph, depth: Optional[int] = None) -> tuple[AutogradGraph, dict[str, str]]:
    """What :func:`fold_to_representative` returns, and for each node that went, the node of the
    first block that stands for it."""
    return Folding(graph).fold(depth)


class Folding:
    """:func:`fold_to_representative` of one graph, at any depth.

    What does not depend on the depth is worked out once and kept: the nodes in each
    module, the edges, each block's signature, and whether each run of alike blocks
    chains and matches. :func:`~graphviz_autograd.views.page_fit.fit_to_page` folds a
    graph once for every depth it tries (MobileViT: eight), and those were most of
    each fold.
    """

    def __init__(self, graph: AutogradGraph):
        self.graph = graph
        self.tree = ModuleTree.of(graph.modules)
        under: dict[str, list[Node]] = {}  # module path -> nodes in it or below it
        # The modules around a node depend on its module alone: found once per module, not per node.
        around: dict[str, list[list[Node]]] = {}  # module path -> the lists of under it joins
        for node in graph.nodes:
            lists = around.get(node.module)
            if lists is None:
                lists = around[node.module] = [under.setdefault(path, []) for path in self.tree.chain(node.module)]
            for nodes_under in lists:
                nodes_under.append(node)
        self.under = under
        self.targets = graph_targets(graph)
        self._signatures: dict[str, tuple] = {}  # module path -> _subtree_signature
        self._matches: dict[tuple[str, ...], Optional[list[dict[str, str]]]] = {}  # run -> _match_blocks, if it chains
        # Each fold made, with the depths that fold alike: (above, up_to, fold) for every depth d
        # with above < d <= up_to (math.inf standing for no depth, None).
        self._folds: list[tuple[float, float, tuple[AutogradGraph, dict[str, str]]]] = []

    def signature_of(self, path: str) -> tuple:
        known = self._signatures.get(path)
        if known is None:
            known = self._signatures[path] = _subtree_signature(self.tree, path, self.under[path])
        return known

    def matches_of(self, run: list[str]) -> Optional[list[dict[str, str]]]:
        """For a run of alike blocks that each feed the next, the matching node ids (see
        :func:`_match_blocks`); None when they do not chain or do not match."""
        key = tuple(run)
        if key not in self._matches:
            under, targets = self.under, self.targets
            chained = _each_feeds_the_next(run, under, targets) and not _reenters(run, under, targets)
            self._matches[key] = _match_blocks(run, under) if chained else None
        return self._matches[key]

    def fold(self, depth: Optional[int] = None) -> tuple[AutogradGraph, dict[str, str]]:
        """The graph with each run of identical sibling blocks deeper than ``depth`` drawn as
        its first block, and the stand-in of each node that went.

        A depth decides only whether each run it meets folds (a run folds above the depth),
        so the fold at one depth is the fold at every depth that decides those runs alike:
        above the deepest run folded and up to the shallowest left whole. Made once for
        them all: the page fit tries depth after depth, and most fold alike.
        """
        wanted = math.inf if depth is None else depth
        for above, up_to, made in self._folds:
            if above < wanted <= up_to:
                return made
        made, above, up_to = self._fold(depth)
        self._folds.append((above, up_to, made))
        return made

    def _fold(self, depth: Optional[int]) -> tuple[tuple[AutogradGraph, dict[str, str]], float, float]:
        """:meth:`fold`, and the depths that fold alike: above the run folded deepest and up
        to the shallowest run met but left whole (that depth would fold it)."""
        graph, tree, under = self.graph, self.tree, self.under
        above, up_to = -math.inf, math.inf
        if not graph.modules:
            return (graph, {}), above, up_to
        stand_in: dict[str, str] = {}  # dropped node id -> the id of its match in the first block
        # node id in a folded run -> (first block's path, block index), one per run it is in: a run
        # can sit inside the first block of another (a decoder layer's self- and cross-attention).
        block_of: dict[str, list[tuple[str, int]]] = {}
        titles: dict[str, str] = {}
        pending = [""]
        while pending:
            parent = pending.pop()
            children = [c for c in tree.children.get(parent, []) if c in under]
            for run in alike_runs(children, self.signature_of):
                level = run[0].count(".")
                expanded = depth is None or level < depth
                if len(run) > 1 and not expanded:
                    up_to = min(up_to, level)
                matches = self.matches_of(run) if len(run) > 1 and expanded else None
                if matches is None:
                    pending.extend(run)
                    continue
                above = max(above, level)
                first = run[0]
                for index, (path, match) in enumerate(zip(run, matches)):
                    for node in under[path]:
                        block_of.setdefault(node.id, []).append((first, index))
                    if index:
                        stand_in.update(match)
                titles[first] = f"{tree.info[first].type_name} ×{len(run)}: {_short(first, parent)}{ELLIPSIS}{_short(run[-1], parent)}"
                pending.append(first)
        # A node of an outer run's later block stands in for its match in the first block,
        # which a run inside that block may itself drop: follow to the node that stays.
        for node_id, twin in stand_in.items():
            while twin in stand_in:
                twin = stand_in[twin]
            stand_in[node_id] = twin
        return (_folded(graph, stand_in, block_of, titles), stand_in), above, up_to


def _folded(
    graph: AutogradGraph, stand_in: dict[str, str], block_of: dict[str, list[tuple[str, int]]], titles: dict[str, str]
) -> AutogradGraph:
    """``graph`` with the nodes of ``stand_in`` replaced by their stand-ins in the first blocks."""
    if not stand_in:
        return graph
    # An input from outside the run that feeds only blocks that go (a buffer read by
    # every layer, one dashed box per read) goes with them: the first block has its own.
    fed = Counter(e[1] for e in graph.edges)
    only_dropped: dict[str, bool] = {}
    for edge in graph.edges:
        source = edge[0]
        if source not in block_of and not fed[source]:
            only_dropped[source] = only_dropped.get(source, True) and edge[1] in stand_in
    gone = set(stand_in).union(n for n, dropped in only_dropped.items() if dropped)
    nodes = tuple(n for n in graph.nodes if n.id not in gone)
    edges: dict[tuple, Edge] = {}
    for edge in graph.edges:
        source, target = edge[0], edge[1]
        if source in gone and source not in stand_in:
            continue
        if _within_a_run(block_of.get(source), block_of.get(target)):
            continue  # between blocks of a run, or inside a block that goes
        new = edge._replace(source=stand_in.get(source, source), target=stand_in.get(target, target))
        key = (new[0], new[1], new[2])
        if key not in edges:
            edges[key] = new
    modules = tuple(m._replace(type_name=titles[m.path]) if m.path in titles else m for m in graph.modules)
    return AutogradGraph(nodes, tuple(edges.values()), graph.params_given, modules)


def _within_a_run(source: Optional[list[tuple[str, int]]], target: Optional[list[tuple[str, int]]]) -> bool:
    """Whether an edge from a node in the runs ``source`` (first block, index) to one in
    ``target`` goes: it joins two blocks of one run, or lies inside a block that goes."""
    if not source or not target:
        return False
    for first, index in source:
        for other_first, other_index in target:
            if first == other_first and (index != other_index or index > 0):
                return True
    return False


def node_targets(edges: Sequence[Edge]) -> dict[str, set]:
    """Node id -> the ids it feeds."""
    targets: dict[str, set] = {}
    for edge in edges:
        fed = targets.get(edge[0])
        if fed is None:
            targets[edge[0]] = {edge[1]}
        else:
            fed.add(edge[1])
    return targets


def graph_targets(graph: AutogradGraph) -> dict[str, set]:
    """:func:`node_targets` of ``graph``'s edges, once per graph: the page fit collapses one
    folded graph at each depth it tries, and the fold read them too. Not to be changed."""
    return graph.derived("node_targets", lambda: node_targets(graph.edges))


def _each_feeds_the_next(run: list[str], under: dict[str, list[Node]], targets: dict[str, set]) -> bool:
    """Whether each block of ``run`` feeds the one after it: a chain of layers, not two
    alike modules side by side (a block's two layer norms)."""
    for upper, lower in zip(run, run[1:]):
        below = {n.id for n in under[lower]}
        if not any(targets.get(n.id, set()) & below for n in under[upper]):
            return False
    return True


def _reenters(run: list[str], under: Mapping[str, Sequence[Node]], targets: Mapping[str, set]) -> bool:
    """Whether a path leaves the blocks of ``run`` and comes back into them (a residual
    add recorded outside its block): folded into the first block, it would be a cycle."""
    return leaves_and_returns({n.id for path in run for n in under[path]}, targets)


def _short(path: str, parent: str) -> str:
    """``path`` less the part it shares with its parent's parent: "layers.79", not "model.layers.79"."""
    shared = parent.rpartition(".")[0]
    return path[len(shared) + 1 :] if shared and path.startswith(shared + ".") else path


def _subtree_signature(tree: ModuleTree, path: str, nodes: list[Node]) -> tuple:
    """What alike blocks share: class, parameter count, ops, and how many nodes besides
    parameters and inputs without gradient. A later call of a module (``cell#2``) has
    the first call's parameter count and no parameter nodes of its own, and only the
    first call may read the model's input (a constant, data): the first call can stand
    for all. Which nodes match is for :func:`_match_blocks` to say."""
    ops = Counter(n.label for n in nodes if n.kind == OP)
    others = sum(1 for n in nodes if n.kind not in _NOT_COUNTED)
    return (tree.info[path].type_name, _parameters_used(tree, path), others, tuple(sorted(ops.items())))


def _parameters_used(tree: ModuleTree, path: str) -> int:
    """The parameter count of the module whose call ``path`` is: a later call (``cell#2``)
    holds none of its own, and uses its first call's."""
    info = tree.info[path]
    return tree.info.get(module_of_call(path), info).parameters


def _match_blocks(run: list[str], under: dict[str, list[Node]]) -> Optional[list[dict[str, str]]]:
    """For each block of ``run``, its node ids -> the matching ids of the first block; None if any fails to match."""

    def keys(path: str) -> list[tuple]:
        seen: Counter = Counter()
        found = []
        for node in under[path]:
            inner = node.module[len(path):]
            label = node.label.replace(path + ".", "\x00", 1) if node.label else ""
            base = (inner, node.kind, label)
            seen[base] += 1
            found.append((*base, seen[base]))
        return found

    first_keys = keys(run[0])
    first_ids = {key: node.id for key, node in zip(first_keys, under[run[0]])}
    if len(first_ids) != len(first_keys):
        return None
    matches = []
    for path in run:
        match = {}
        for key, node in zip(keys(path), under[path]):
            twin = first_ids.get(key)
            if twin is None:
                return None
            match[node.id] = twin
        matches.append(match)
    return matches
