"""Module boxes stacked in the order the data flows, not in a staircase.

``dot`` draws two clusters one above the other only when the ranks they span do
not overlap; when they overlap by a single rank it sets them side by side. A
block's parameters (and its inputs without gradient) feed nothing but the op
that uses them, so ``dot`` ranks each a few ranks above that op, and the first
ops of a block sit right below the previous block's output: the parameters of
the block stick up into the ranks of the block before, and every block steps
sideways from the last. Twelve BERT layers made a diagonal 46,000 points wide.

:func:`stacking_edges` gives the invisible edges that keep each such source
below the block before its own: for a source, the innermost module box around
it that is fed by a sibling box, and from that sibling the node whose output
enters last (lowest in a drawing by longest path). One edge per source at most,
so a graph grows by no more edges than it has parameters. An op fed only from
outside its box, and only by nodes above that entering output, floats up the
same way and gets the same edge: the transpose of a weight tied to an embedding,
in the output layer of GPT-2, would otherwise stretch that layer's box up to the
embedding.

>>> from graphviz_autograd.graph.autograd_graph import DATA
>>> # node 0 in box "a" feeds op 1 in box "b"; parameter 2 (in "b") feeds op 1 too
>>> links = [(0, 1, (DATA,)), (2, 1, (DATA,))]
>>> stacking_edges(links, ["a", "b", "b"], lambda path: "")
[(0, 2)]
"""

from __future__ import annotations

from itertools import compress
from operator import not_
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..graph.autograd_graph import CUT, DATA, AutogradGraph
from ..graph.module_tree import ModuleTree


def graph_stacking_edges(graph: AutogradGraph) -> List[Tuple[int, int]]:
    """:func:`stacking_edges` of ``graph`` drawn with a box per module, worked out once per
    graph: the page-size estimate and the DOT writer both add them."""

    def make() -> List[Tuple[int, int]]:
        tree = ModuleTree.of(graph.modules)
        box_of = [tree.listed(node.module) for node in graph.nodes]
        return stacking_edges(graph.columns(fill_ids=False).links, box_of, tree.parent)

    return graph.derived("stacking_edges", make)


def stacking_edges(
    links: Sequence[Tuple[int, int, tuple]], box_of: Sequence[str], parent: Callable[[str], str]
) -> List[Tuple[int, int]]:
    """``(upper, source)`` node indices: invisible edges that stack module boxes.

    ``links`` are the graph's edges by node index (``Columns.links``), ``box_of[i]``
    the module box node ``i`` is drawn in ('' for none), ``parent(path)`` the box
    around a box ('' at the top). Only data and cut edges count.
    """
    count = len(box_of)
    flows = [(s, t) for s, t, rest in links if rest[0] in (DATA, CUT) and s != t and s < count and t < count]
    chains: Dict[str, List[str]] = {}

    def chain(path: str) -> List[str]:
        """The boxes around ``path``, innermost first (``path`` itself included)."""
        found = chains.get(path)
        if found is None:
            found, at = [], path
            while at:
                found.append(at)
                at = parent(at)
            chains[path] = found
        return found

    height = longest_path_ranks(count, flows)
    # box -> the node of a sibling box that feeds it and sits lowest
    fed_by: Dict[str, int] = {}
    for s, t in flows:
        upper, lower = box_of[s], box_of[t]
        if upper == lower:
            continue
        sibling_below = _siblings_under_common_box(chain(upper), chain(lower))
        if sibling_below is None:
            continue
        known = fed_by.get(sibling_below)
        if known is None or height[s] < height[known]:
            fed_by[sibling_below] = s

    inputs: List[List[int]] = [[] for _ in range(count)]
    for s, t in flows:
        inputs[t].append(s)
    edges = []
    entering: Optional[Dict[str, int]] = None
    for i in range(count):
        if not box_of[i]:
            continue
        ins = inputs[i]
        if not ins:
            for box in chain(box_of[i]):
                feeder = fed_by.get(box)
                if feeder is not None:
                    if feeder != i:
                        edges.append((feeder, i))
                    break
            continue
        # An op fed only from outside its box, and only by nodes above the lowest output
        # entering the box (lm_head's TBackward0 of a weight tied to the embedding), floats
        # up as a source does: it gets an edge from that output. height[i] <= height of
        # that output: no path leads from i down to it, so the edge makes no cycle.
        if any(box_of[i] in chain(box_of[s]) for s in ins if box_of[s]):
            continue
        if entering is None:
            entering = _lowest_entering(flows, box_of, chain, height)
        feeder = entering.get(box_of[i])
        if feeder is not None and height[i] <= height[feeder] < min(height[s] for s in ins):
            edges.append((feeder, i))
    return edges


def _lowest_entering(
    flows: Sequence[Tuple[int, int]], box_of: Sequence[str], chain: Callable[[str], List[str]], height: List[int]
) -> Dict[str, int]:
    """box -> the node outside it whose output enters it lowest (least height)."""
    lowest: Dict[str, int] = {}
    for s, t in flows:
        if not box_of[t]:
            continue
        around_source = set(chain(box_of[s])) if box_of[s] else set()
        for box in chain(box_of[t]):
            if box in around_source:
                break
            known = lowest.get(box)
            if known is None or height[s] < height[known]:
                lowest[box] = s
    return lowest


def _siblings_under_common_box(upper_chain: List[str], lower_chain: List[str]) -> Optional[str]:
    """The box on ``lower_chain`` just inside the innermost box both chains share,
    when ``upper_chain`` also has a box there (two sibling boxes); else None."""
    shared = set(upper_chain)
    for k, box in enumerate(lower_chain):
        if box in shared:
            below = lower_chain[k - 1] if k > 0 else None
            return below if below is not None and upper_chain.index(box) > 0 else None
    # no box in common: siblings at the top when both have a box
    return lower_chain[-1] if lower_chain and upper_chain else None


# Points a row of sources side by side may take before the next row starts (a page is 3,000).
ROW_POINTS = 1500.0
# Graphs of more nodes are drawn with their rows as they are: no page holds them, and the
# ranking would add to the time of a drawing of a million nodes.
ROWS_UP_TO = 10_000


def row_edges(rank: Sequence[int], fed: Sequence[bool], breadths: Sequence[float], limit: float = ROW_POINTS) -> List[Tuple[int, int]]:
    """``(upper, lower)`` invisible edges that lay a long row of sources as a row of rows.

    ``dot`` sets every node that nothing feeds (an input, a parameter, an input without
    gradient) on the rank above its consumer, side by side: a decoding loop of 500 steps
    that reads its own ``argmax`` drew 500 inputs in one row 60,000 points wide. Where the
    sources of one rank (``rank``, by :func:`longest_path_ranks`; ``fed[i]``: node ``i`` has
    an input) would take more than ``limit`` points (``breadths``: each node's, its gap
    included), they are cut, in order, into rows of at most that, and each node of a row
    gets an edge to a node of the row before it, which stacks the rows upward.

    >>> row_edges([1, 1, 1, 0], [False, False, False, True], [10.0, 10.0, 10.0, 10.0], limit=20.0)
    [(2, 0)]
    """
    rows: Dict[int, List[int]] = {}
    for i, has_input in enumerate(fed):
        if not has_input:
            rows.setdefault(rank[i], []).append(i)
    edges: List[Tuple[int, int]] = []
    for _, row in sorted(rows.items()):
        if sum(breadths[i] for i in row) <= limit:
            continue
        cut: List[List[int]] = [[]]
        width = 0.0
        for i in row:
            if cut[-1] and width + breadths[i] > limit:
                cut.append([])
                width = 0.0
            cut[-1].append(i)
            width += breadths[i]
        for lower_row, upper_row in zip(cut, cut[1:]):
            edges.extend((node, lower_row[min(j, len(lower_row) - 1)]) for j, node in enumerate(upper_row))
    return edges


def longest_path_ranks(count: int, pairs: Sequence[Tuple[int, int]]) -> List[int]:
    """Longest path from each node down to a node that feeds nothing, by Kahn's algorithm.

    Nodes on a cycle (only a hand-made graph has one) keep rank 0 plus what their
    other consumers give them.

    >>> longest_path_ranks(3, [(2, 1), (1, 0), (2, 0)])
    [0, 1, 2]
    """
    uppers: List[List[int]] = [[] for _ in range(count)]
    waiting = [0] * count  # consumers not yet ranked
    for upper, lower in pairs:
        uppers[lower].append(upper)
        waiting[upper] += 1
    return _ranked(uppers, waiting)


def link_ranks(count: int, links: Sequence[Tuple[int, int, tuple]]) -> List[int]:
    """:func:`longest_path_ranks` of edges given as ``Columns.links`` (``(source, target,
    rest)``, the source above), loops left out: the same ranks without a list of pairs
    made first, which on a graph drawn with junctions was a fifth of their planning.

    >>> link_ranks(3, [(2, 1, ()), (1, 0, ()), (2, 0, ()), (1, 1, ())])
    [0, 1, 2]
    """
    uppers: List[List[int]] = [[] for _ in range(count)]
    waiting = [0] * count
    for upper, lower, _ in links:
        if upper != lower:
            uppers[lower].append(upper)
            waiting[upper] += 1
    return _ranked(uppers, waiting)


def _ranked(uppers: List[List[int]], waiting: List[int]) -> List[int]:
    """Kahn's algorithm from the nodes that feed nothing up: ``uppers[i]`` feed node i, and
    ``waiting[i]`` counts the edges leaving node i (counted down as they are ranked)."""
    rank = [0] * len(waiting)
    queue = list(compress(range(len(waiting)), map(not_, waiting)))  # nodes that feed nothing
    for lower in queue:  # the list grows while it is read: a queue without popping
        below = rank[lower] + 1
        for upper in uppers[lower]:
            if rank[upper] < below:
                rank[upper] = below
            waiting[upper] -= 1
            if not waiting[upper]:
                queue.append(upper)
    return rank
