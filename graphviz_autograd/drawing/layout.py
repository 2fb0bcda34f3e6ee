"""Layouts that stay fast: how long ``dot`` would take, and our own layered layout.

Plain computation on an :class:`AutogradGraph` (no torch, no subprocess; the DOT
statements it writes are quoted by :mod:`graphviz_autograd.drawing.dot_writer`). The graph it
lays out is the one drawn (:mod:`graphviz_autograd.views.shown`): a parameter used
many times is drawn once per use, which keeps ``dot`` fast on unrolled loops.

- :func:`choose_layout` is the one place that decides, from how long ``dot``
  would take (:func:`graphviz_autograd.views.page_fit.estimate_layout_seconds`) and a
  budget, how a graph is laid out.
- :func:`layered_positions` is a cheap layered layout for graphs too big for
  ``dot`` (ranks by longest path, a few barycenter sweeps, then coordinates);
  :func:`fixed_layout_lines` turns it into DOT statements that Graphviz's
  ``neato -n2`` draws without laying anything out.

>>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, Node, Edge, OP, OUTPUT
>>> g = AutogradGraph((Node("n0", OUTPUT, "y"), Node("n1", OP, "ExpBackward0")), (Edge("n1", "n0"),))
>>> layered_positions(g)["n1"][1] > layered_positions(g)["n0"][1]  # inputs above outputs
True
"""

from __future__ import annotations

import functools
import math
from bisect import bisect_left
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from ..graph.module_tree import ModuleTree
from ..graph.autograd_graph import (
    NODE_KINDS,
    AutogradGraph,
    ModuleInfo,
    Node,
)
from .dot_writer import attr_list, body_lines, cluster_title, digraph, quote, tooltip_value
from ..views.page_fit import flow_pairs, node_size
from ..views.prepared import View
from ..views.stacking import longest_path_ranks, stacking_edges
from ..errors import check_choice
from ..graph.style import CLUSTER_ATTRS, DIRECTIONS

Position = Tuple[float, float]


# --- dot or the fixed layout -----------------------------------------------------------


# --- our own layered layout ------------------------------------------------------------

# Sizes in points (1/72 inch), as Graphviz measures them (see page.node_size).
NODE_GAP = 14.0
RANK_GAP = 30.0
SWEEPS = 4
# A drawing longer than this (points, across its ranks) is folded into bands side by
# side (see _Bands): 200 inches, the most a PDF page may measure.
FOLD_LONGER_THAN = 14_400.0
FOLD_ASPECT = 1.4  # length over breadth a folded drawing comes nearest, as a portrait page
BAND_GAP = 100.0  # between two bands, beside the gap each box keeps


def layered_positions(graph: AutogradGraph, direction: str = "TB", clusters: bool = False) -> Dict[str, Position]:
    """Node centres in points for a layered drawing of ``graph``; linear time but for sorting.

    Ranks: a node sits one rank above the highest of the nodes it feeds (the
    longest path to an output), found with a queue, not recursion; a saved tensor
    sits beside the op that saved it. Within a rank nodes start in walk order and
    are reordered by a few barycenter sweeps (each node moves to the mean place of
    its neighbours). Then each rank is packed left to right, every node as near
    its barycenter as the widths allow, and centred on the drawing's axis. A
    drawing longer than a PDF page is folded into bands side by side (see
    :class:`_Bands`). ``direction`` turns the picture as Graphviz's ``rankdir`` does.
    With ``clusters``, a recorded graph's nodes are laid out to be drawn in module
    boxes (see :func:`module_boxes`).

    >>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, Node, Edge, OP, OUTPUT
    >>> g = AutogradGraph((Node("n0", OUTPUT), Node("n1", OP, "A"), Node("n2", OP, "B")),
    ...                   (Edge("n1", "n0"), Edge("n2", "n0")))
    >>> p = layered_positions(g)
    >>> p["n1"][1] == p["n2"][1] > p["n0"][1], p["n1"][0] < p["n2"][0]
    (True, True)
    """
    return _layered(graph, direction, clusters).positions


class Box(NamedTuple):
    """A module's box in the fixed layout, or the piece of it in one band of a folded drawing.

    ``module`` is its index in ``graph.modules``, ``band`` the band (0 when the
    drawing is not folded), ``depth`` how many boxes hold it (0 for a box of a
    top-level module); ``left, bottom, right, top`` in points, as node positions are.
    """

    module: int
    band: int
    depth: int
    left: float
    bottom: float
    right: float
    top: float


class _Layered(NamedTuple):
    positions: Dict[str, Position]
    boxes: List[Box]


def module_boxes(graph: AutogradGraph, direction: str = "TB") -> List[Box]:
    """The module boxes drawn around the nodes of ``graph`` (with module info) in the
    fixed layout, one per module and band it has nodes in, outer boxes first.

    Each holds its nodes (at :func:`layered_positions` with ``clusters=True``) and
    the boxes inside it, a margin away, and a strip at its top for its title. The
    layout makes room for them: the nodes of a module are kept side by side in
    each rank, the gap between two ranks grows with the box edges it holds, and a
    box whose rectangle would reach over nodes of another is moved aside.

    >>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, ModuleInfo, Node, Edge, OP
    >>> g = AutogradGraph((Node("n0", OP, "A", module="fc"), Node("n1", OP, "B", module="fc")),
    ...                   (Edge("n1", "n0"),), modules=(ModuleInfo("", "Net"), ModuleInfo("fc", "Linear")))
    >>> [(b.module, b.depth) for b in module_boxes(g)]
    [(1, 0)]
    """
    return _layered(graph, direction, True).boxes


def _layered(graph: AutogradGraph, direction: str, clusters: bool) -> _Layered:
    check_choice("direction", direction, DIRECTIONS)
    nodes = graph.nodes
    count = len(nodes)
    pairs = flow_pairs(graph)  # (upper, lower): data flows down

    boxes = _Boxes(nodes, graph.modules, direction) if clusters and graph.modules else None
    if boxes is not None and not boxes.used:
        boxes = None
    if boxes is None:
        rank = longest_path_ranks(count, pairs)
    else:
        # The invisible edges that stack dot's clusters (see graphviz_autograd.stacking)
        # rank a block's parameters below the block before it, not beside its last ops.
        rank = longest_path_ranks(count, pairs + boxes.stacking(graph.columns(fill_ids=False).links))
    order = _order_in_ranks(count, pairs, rank, boxes)
    across = direction in ("LR", "RL")
    breadth = [0.0] * count  # size along a rank
    length = [0.0] * count  # size across ranks
    for i, node in enumerate(nodes):
        width, height = node_size(node)
        breadth[i], length[i] = (height, width) if across else (width, height)
    centre = _place_in_ranks(order, pairs, breadth, boxes)

    rank_length: Dict[int, float] = {}
    for i in range(count):
        rank_length[rank[i]] = max(rank_length.get(rank[i], 0.0), length[i])
    room = boxes.rank_room(rank) if boxes is not None else None
    offset, at = {}, 0.0
    previous = None
    for r in sorted(rank_length):
        if room is not None and previous is not None:
            at += room[0].get(previous, 0.0) + room[1].get(r, 0.0)  # box edges between the two ranks
        offset[r] = at + rank_length[r] / 2
        at += rank_length[r] + RANK_GAP
        previous = r
    crossing = None
    folding_breadth = breadth
    if boxes is not None:
        centre = boxes.separate(rank, centre, breadth)
        crossing = boxes.crossing(rank)
        folding_breadth = boxes.with_margins(breadth)
    shift, band = _Bands(offset, rank_length, rank, centre, folding_breadth, crossing).fold()

    positions = {}
    along = [0.0] * count
    up = [0.0] * count
    for i, node in enumerate(nodes):
        along[i], up[i] = centre[i] + shift[rank[i]][0], offset[rank[i]] + shift[rank[i]][1]
        positions[node.id] = _turned(along[i], up[i], direction)
    drawn = boxes.pieces(rank, band, along, up, breadth, length) if boxes is not None else []
    return _Layered(positions, drawn)


def _turned(along: float, up: float, direction: str) -> Position:
    """A point of the layout (along the ranks, up across them) on the page, as ``rankdir`` turns it."""
    if direction == "TB":
        return along, up
    if direction == "BT":
        return along, -up
    if direction == "LR":
        return -up, -along
    return up, -along


class _Bands:
    """A drawing's ranks, top first, cut into bands of consecutive ranks: :meth:`fold`
    gives rank -> (shift along the ranks, shift up) that folds a drawing too long to
    show into bands side by side, as a newspaper sets a long text in columns, and
    rank -> its band.

    A deep graph (a long chain, an RNN unrolled over many steps) is a strip
    hundreds of inches long: past PDF's page limit of 200 inches, and cairo, which
    draws Graphviz's PDF and PNG, takes time in proportion to the strip's length
    for every shape (a 20,000-node chain: 1 s as SVG, 40 s as PDF). Past
    ``FOLD_LONGER_THAN`` points, runs of consecutive ranks are set side by side, in
    as many bands as bring the drawing nearest ``FOLD_ASPECT`` (length over
    breadth). The inputs begin the first band and the outputs end the last; each
    band starts at the top, the next to the right of the last (below it, for a
    drawing from left to right), as broad as its own widest rank. Edges between
    bands are drawn straight across. With ``crossing`` (how many module boxes
    each cut between two ranks, from the top, would split), a band ends where the
    fewest boxes are split, near where it would end otherwise.
    """

    def __init__(
        self,
        offset: Dict[int, float],
        rank_length: Dict[int, float],
        rank: List[int],
        centre: List[float],
        breadth: List[float],
        crossing: Optional[List[int]] = None,
    ):
        self.ranks = ranks = sorted(offset, reverse=True)  # from the top: a drawing is read from its inputs down
        self.length = offset[ranks[0]] + rank_length[ranks[0]] / 2 if ranks else 0.0
        self.crossing = crossing
        # How far below the drawing's top each rank (in the order of ``ranks``) begins and ends.
        self.top = [self.length - offset[r] - rank_length[r] / 2 for r in ranks]
        self.bottom = [self.length - offset[r] + rank_length[r] / 2 for r in ranks]
        # Where each rank's boxes begin and end along it.
        left = dict.fromkeys(ranks, math.inf)
        right = dict.fromkeys(ranks, -math.inf)
        for r, c, b in zip(rank, centre, breadth):
            left[r] = min(left[r], c - b / 2)
            right[r] = max(right[r], c + b / 2)
        self.left = [left[r] for r in ranks]
        self.right = [right[r] for r in ranks]

    def fold(self) -> Tuple[Dict[int, Tuple[float, float]], Dict[int, int]]:
        """Rank -> (shift along, shift up), and rank -> its band: nothing moved when the
        drawing is no longer than ``FOLD_LONGER_THAN``."""
        ranks = self.ranks
        if self.length <= FOLD_LONGER_THAN:
            return dict.fromkeys(ranks, (0.0, 0.0)), dict.fromkeys(ranks, 0)
        # The drawing grows broader and shorter with every band: the fewest bands that
        # make it no longer than FOLD_ASPECT, or one fewer if that is nearer.
        low, high = 1, len(ranks)
        while low < high:
            middle = (low + high) // 2
            if self.aspect(middle) <= FOLD_ASPECT:
                high = middle
            else:
                low = middle + 1
        if low > 1 and abs(math.log(self.aspect(low - 1) / FOLD_ASPECT)) < abs(math.log(self.aspect(low) / FOLD_ASPECT)):
            low -= 1
        return self.shifts(low)

    def spans(self, bands: int, adjusted: bool = False) -> List[Tuple[int, int]]:
        """(first, end) of each band, as indices in ``ranks``, for ``bands`` bands of about equal length;
        ``adjusted``, each band ends where it splits the fewest boxes nearby (the aspect is
        measured without: nearly the same, and found faster)."""
        band_length = self.length / bands
        firsts = [0]
        while len(firsts) < bands:  # the first rank a band's length below the last band's first
            k = bisect_left(self.top, self.top[firsts[-1]] + band_length, firsts[-1] + 1)
            if k == len(self.ranks):
                break
            if self.crossing is not None and adjusted:
                k = self.nearby_cut(k, firsts[-1], band_length)
            firsts.append(k)
        return list(zip(firsts, firsts[1:] + [len(self.ranks)]))

    def nearby_cut(self, k: int, first: int, band_length: float) -> int:
        """The rank near ``k`` (within a fifth of a band) to begin a band at, splitting the fewest boxes."""
        crossing = self.crossing
        assert crossing is not None
        reach = band_length / 5
        low = max(bisect_left(self.top, self.top[k] - reach, first + 1), first + 1)
        high = bisect_left(self.top, self.top[k] + reach, k)
        best = k
        for j in range(low, min(high, len(self.ranks) - 1) + 1):
            if (crossing[j], abs(j - k)) < (crossing[best], abs(best - k)):
                best = j
        return best

    def extents(self, spans: List[Tuple[int, int]]) -> List[Tuple[float, float]]:
        return [(min(self.left[a:b]), max(self.right[a:b])) for a, b in spans]

    def aspect(self, bands: int) -> float:
        """Length over breadth of the drawing folded into ``bands`` bands."""
        spans = self.spans(bands)
        longest = max(self.bottom[b - 1] - self.top[a] for a, b in spans)
        broad = sum(end - begin for begin, end in self.extents(spans)) + BAND_GAP * (len(spans) - 1)
        return longest / broad

    def shifts(self, bands: int) -> Tuple[Dict[int, Tuple[float, float]], Dict[int, int]]:
        """Rank -> (shift along, shift up) setting each band a gap to the right of the last, its top at
        the top; and rank -> its band."""
        spans = self.spans(bands, adjusted=True)
        extents = self.extents(spans)
        shifts = {}
        band_of = {}
        at = extents[0][0]
        for band, ((a, b), (begin, end)) in enumerate(zip(spans, extents)):
            for r in self.ranks[a:b]:
                shifts[r] = (at - begin, self.top[a])
                band_of[r] = band
            at += end - begin + BAND_GAP
        return shifts, band_of


# --- module boxes in the fixed layout -------------------------------------------------

# Sizes in points of the boxes drawn around a recorded graph's modules (see _Boxes).
BOX_MARGIN = 6.0  # between a box and what it holds
BOX_TITLE = 12.0  # the strip at a box's top that holds its title (9 pt, style.CLUSTER_ATTRS)
BOX_TITLE_CHAR = 5.4  # the width of a character of a title, 9-pt Times, over rather than under
BOX_TITLE_INSET = 5.0  # between a title and the box's left and right edges
BOX_GAP = 10.0  # between a box and a node or box beside it
_SIDES = ("along_low", "along_high", "up_low", "up_high")
# The side of a box, in the layout's terms, that ends up at the top of the page.
_TITLE_SIDE = {"TB": "up_high", "BT": "up_low", "LR": "along_low", "RL": "along_low"}


class _Boxes:
    """The boxes of a recorded graph's modules, as the fixed layout draws them.

    A node sits in the box of its module, or of the nearest listed module above
    it, as in ``dot``'s clusters; the model itself ('') is no box. A box is named
    by its module's index in ``modules``; -1 stands for the drawing around them
    all, and lists indexed by box have one slot more, the last, for it. Margins
    are in the layout's terms, along the ranks and up across them; the side that
    ends up at the top of the page also holds the title.

    Everything here is linear in the nodes and boxes, but for sorting, except
    :meth:`separate`, which also walks the ranks each box spans.
    """

    def __init__(self, nodes: Sequence[Node], modules: Tuple[ModuleInfo, ...], direction: str):
        tree = ModuleTree(modules)

        def listed(path: str) -> int:
            at = tree.listed(path)
            return tree.order[at] if at else -1

        count = len(modules)
        self.box_of = [listed(n.module) for n in nodes]
        self.parent = [listed(m.path.rpartition(".")[0]) if m.path else -1 for m in modules] + [-1]
        self.depth = [0] * (count + 1)
        for k in sorted(range(count), key=lambda k: modules[k].path.count(".")):  # a parent has fewer dots
            if modules[k].path:
                self.depth[k] = self.depth[self.parent[k]] + 1
        used = [False] * (count + 1)
        for b in set(self.box_of):
            while b >= 0 and not used[b]:
                used[b] = True
                b = self.parent[b]
        # Boxes that hold a node, directly or below: outer boxes first.
        self.used = sorted((b for b in range(count) if used[b]), key=lambda b: (self.depth[b], b))
        self.members: List[List[int]] = [[] for _ in range(count + 1)]
        for i, b in enumerate(self.box_of):
            self.members[b].append(i)
        self.children: List[List[int]] = [[] for _ in range(count + 1)]
        for b in self.used:
            self.children[self.parent[b]].append(b)
        self.number = [len(members) for members in self.members]  # nodes in each box, those of boxes inside included
        for b in reversed(self.used):
            if self.parent[b] >= 0:
                self.number[self.parent[b]] += self.number[b]
        margin = dict.fromkeys(_SIDES, BOX_MARGIN)
        margin[_TITLE_SIDE[direction]] += BOX_TITLE
        self.along_low, self.along_high = margin["along_low"], margin["along_high"]
        self.up_low, self.up_high = margin["up_low"], margin["up_high"]
        self.direction = direction
        self.paths = [m.path for m in modules]
        self.gap_between: Dict[Tuple[int, int], float] = {}
        # The keys of the last ordering sweep, which separate() follows.
        self.last_key = [0.0] * len(nodes)
        self.last_position = [0.0] * (count + 1)
        self.low: List[int] = []
        self.high: List[int] = []

    def stacking(self, links: Sequence[Tuple[int, int, tuple]]) -> List[Tuple[int, int]]:
        """(upper, lower) pairs that stack sibling boxes one below the other (see :func:`stacking_edges`)."""
        path_of = {b: self.paths[b] for b in self.used}
        path_of[-1] = ""
        box_paths = [path_of[b] for b in self.box_of]
        parent_path = {self.paths[b]: path_of[self.parent[b]] for b in self.used}
        return stacking_edges(links, box_paths, lambda path: parent_path.get(path, ""))

    # Ordering: a box's nodes side by side, boxes in one order in every rank.

    def box_keys(self, place: List[float]) -> Dict[int, tuple]:
        """Box -> the start of its nodes' sort keys: for each box around it, outer first,
        (mean place of its nodes, box), so that a box's nodes sort together."""
        total = [0.0] * len(self.parent)
        for b, at in zip(self.box_of, place):
            total[b] += at
        number = self.number
        for b in reversed(self.used):
            p = self.parent[b]
            if p >= 0:
                total[p] += total[b]
        keys: Dict[int, tuple] = {}
        for b in self.used:
            position = self.last_position[b] = total[b] / number[b]
            p = self.parent[b]
            keys[b] = keys[p] + (position, b) if p >= 0 else (position, b)
        return keys

    def sort_keys(self, layer: List[int], barycenters: Dict[int, Any], prefix: Dict[int, tuple]) -> Dict[int, Any]:
        """Node -> its sort key in ``layer``: the keys of the boxes around it, then its barycenter.

        Keys compare as a nested order would: two boxes by their mean places, a box
        and a node of the box around it by its mean place and the node's barycenter.
        """
        box_of = self.box_of
        keys: Dict[int, Any] = {}
        for i in layer:
            b = box_of[i]
            keys[i] = prefix[b] + (barycenters[i],) if b >= 0 else (barycenters[i],)
        return keys

    def keep_keys(self, layer: List[int], barycenters: Dict[int, Any]) -> None:
        """Keep the barycenters of the last sweep, which :meth:`separate` orders nodes by."""
        last = self.last_key
        for i in layer:
            last[i] = barycenters[i]

    # Room for the boxes: between nodes in a rank, between ranks.

    def gaps(self, layer: List[int]) -> List[float]:
        """The gap after each node of ``layer`` but the last: room for the box edges between it and the next."""
        box_of = self.box_of
        return [self.gap(box_of[a], box_of[b]) for a, b in zip(layer, layer[1:])]

    def gap(self, left: int, right: int) -> float:
        if left == right:
            return NODE_GAP
        known = self.gap_between.get((left, right))
        if known is None:
            closed = opened = 0
            a, b, depth, parent = left, right, self.depth, self.parent
            while depth[a] > depth[b]:
                a, closed = parent[a], closed + 1
            while depth[b] > depth[a]:
                b, opened = parent[b], opened + 1
            while a != b:
                a, b, closed, opened = parent[a], parent[b], closed + 1, opened + 1
            known = self.gap_between[(left, right)] = NODE_GAP + closed * self.along_high + opened * self.along_low
        return known

    def rank_room(self, rank: List[int]) -> Tuple[Dict[int, float], Dict[int, float]]:
        """(rank -> room above it for the top edges of boxes it tops, rank -> room below it
        for the bottom edges of boxes it ends), in points: one margin for each box of a
        nest that begins (or ends) there."""
        count = len(self.parent)
        low, high = [0] * count, [0] * count
        seen = [False] * count
        for i, b in enumerate(self.box_of):
            r = rank[i]
            if not seen[b]:
                seen[b], low[b], high[b] = True, r, r
            elif r < low[b]:
                low[b] = r
            elif r > high[b]:
                high[b] = r
        for b in reversed(self.used):
            p = self.parent[b]
            if p >= 0:
                if not seen[p]:
                    seen[p], low[p], high[p] = True, low[b], high[b]
                else:
                    low[p], high[p] = min(low[p], low[b]), max(high[p], high[b])
        self.low, self.high = low, high
        tops, bottoms = [0] * count, [0] * count  # boxes nested inside and around each that share its top (bottom) rank
        above: Dict[int, float] = {}
        below: Dict[int, float] = {}
        for b in self.used:
            p = self.parent[b]
            tops[b] = 1 + (tops[p] if p >= 0 and high[p] == high[b] else 0)
            bottoms[b] = 1 + (bottoms[p] if p >= 0 and low[p] == low[b] else 0)
            above[high[b]] = max(above.get(high[b], 0.0), tops[b] * self.up_high)
            below[low[b]] = max(below.get(low[b], 0.0), bottoms[b] * self.up_low)
        return above, below

    def separate(self, rank: List[int], centre: List[float], breadth: List[float]) -> List[float]:
        """``centre`` with boxes moved aside where a box would reach over what stands beside it.

        Within each box (inner boxes first), the nodes and boxes it holds are taken in
        the order the ranks were sorted in; each moves right, with what it holds, just
        far enough to clear those before it on the ranks it spans. A box spans whole
        ranks: one broader in some rank than in the next would otherwise cover the
        node beside it there.
        """
        count = len(self.parent)
        moved_node = [0.0] * len(centre)
        moved_box = [0.0] * count
        left_edge, right_edge = [0.0] * count, [0.0] * count  # a box's edges, before it is moved itself
        reach = [-math.inf] * (max(rank, default=0) + 1)  # rank -> right edge of what is placed there so far
        low, high, last_key, last_position = self.low, self.high, self.last_key, self.last_position
        for p in [*reversed(self.used), -1]:
            units: List[Tuple[tuple, int, bool]] = [((last_key[i], -1, i), i, True) for i in self.members[p]]
            units.extend(((last_position[c], c), c, False) for c in self.children[p])
            units.sort()
            leftmost, rightmost = math.inf, -math.inf
            for _, unit, is_node in units:
                if is_node:  # one rank: read and written without slices
                    r = rank[unit]
                    begin = centre[unit] - breadth[unit] / 2
                    end = begin + breadth[unit]
                    clear = reach[r] + BOX_GAP
                    if begin < clear:
                        moved_node[unit] = clear - begin
                        end += clear - begin
                        begin = clear
                    if reach[r] < end:
                        reach[r] = end
                else:
                    first, last = low[unit], high[unit]
                    begin, end = left_edge[unit], right_edge[unit]
                    clear = max(reach[first : last + 1]) + BOX_GAP
                    if begin < clear:
                        moved_box[unit] = clear - begin
                        end += clear - begin
                        begin = clear
                    reach[first : last + 1] = [end if at < end else at for at in reach[first : last + 1]]
                if begin < leftmost:
                    leftmost = begin
                if end > rightmost:
                    rightmost = end
            for _, unit, is_node in units:
                if is_node:
                    reach[rank[unit]] = -math.inf
                else:
                    reach[low[unit] : high[unit] + 1] = [-math.inf] * (high[unit] - low[unit] + 1)
            if p >= 0:
                left_edge[p], right_edge[p] = leftmost - self.along_low, rightmost + self.along_high
        total = [0.0] * count
        for b in self.used:
            total[b] = total[self.parent[b]] + moved_box[b]
        box_of = self.box_of
        return [c + moved_node[i] + total[box_of[i]] for i, c in enumerate(centre)]

    # Folding and drawing.

    def crossing(self, rank: List[int]) -> List[int]:
        """For each rank from the top (as :class:`_Bands` counts them), how many boxes a
        cut just above it would split."""
        top = max(rank, default=0)
        crossing = [0] * (top + 2)
        for b in self.used:
            crossing[top - self.high[b] + 1] += 1
            crossing[top - self.low[b] + 1] -= 1
        for k in range(1, len(crossing)):
            crossing[k] += crossing[k - 1]
        return crossing[: top + 1]

    def with_margins(self, breadth: List[float]) -> List[float]:
        """Each node's breadth with the margins of the boxes around it, for folding."""
        margin = 2 * max(self.along_low, self.along_high)
        depth = self.depth
        return [size + margin * depth[b] for size, b in zip(breadth, self.box_of)]

    def pieces(
        self,
        rank: List[int],
        band: Dict[int, int],
        along: List[float],
        up: List[float],
        breadth: List[float],
        length: List[float],
    ) -> List[Box]:
        """The box of each module in each band it has nodes in, on the page, outer boxes first."""
        rects: Dict[Tuple[int, int], List[float]] = {}  # (box, band) -> [left, bottom, right, top] in the layout's terms
        bands_of: Dict[int, List[int]] = {}
        for i, b in enumerate(self.box_of):
            if b < 0:
                continue
            half_breadth, half_length = breadth[i] / 2, length[i] / 2
            _grow(rects, bands_of, (b, band[rank[i]]), along[i] - half_breadth, up[i] - half_length, along[i] + half_breadth, up[i] + half_length)
        boxes = []
        for b in reversed(self.used):
            p = self.parent[b]
            for piece in bands_of.get(b, ()):
                left, bottom, right, top = rects[(b, piece)]
                left, bottom = left - self.along_low, bottom - self.up_low
                right, top = right + self.along_high, top + self.up_high
                if p >= 0:
                    _grow(rects, bands_of, (p, piece), left, bottom, right, top)
                x0, y0 = _turned(left, bottom, self.direction)
                x1, y1 = _turned(right, top, self.direction)
                boxes.append(Box(b, piece, self.depth[b] - 1, min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)))
        boxes.sort(key=lambda box: (box.depth, box.module, box.band))
        return boxes


def _grow(
    rects: Dict[Tuple[int, int], List[float]],
    bands_of: Dict[int, List[int]],
    key: Tuple[int, int],
    left: float,
    bottom: float,
    right: float,
    top: float,
) -> None:
    rect = rects.get(key)
    if rect is None:
        rects[key] = [left, bottom, right, top]
        bands_of.setdefault(key[0], []).append(key[1])
    else:
        rect[0], rect[1] = min(rect[0], left), min(rect[1], bottom)
        rect[2], rect[3] = max(rect[2], right), max(rect[3], top)


def _order_in_ranks(
    count: int, pairs: Sequence[Tuple[int, int]], rank: List[int], boxes: Optional["_Boxes"] = None
) -> List[List[int]]:
    """Each rank's nodes left to right: walk order, then barycenter sweeps down and up.

    With ``boxes``, the nodes of a box stay side by side, and boxes keep one order
    left to right in every rank (see :meth:`_Boxes.sort_keys`).
    """
    top = max(rank, default=0)
    layers: List[List[int]] = [[] for _ in range(top + 1)]
    for i in range(count):
        layers[top - rank[i]].append(i)  # layers[0] is the top rank
    above: List[List[int]] = [[] for _ in range(count)]
    below: List[List[int]] = [[] for _ in range(count)]
    for upper, lower in pairs:
        below[upper].append(lower)
        above[lower].append(upper)
    # A node's place as a fraction of its rank's width, so ranks of any size compare.
    place = [0.0] * count
    for layer in layers:
        _set_places(layer, place)
    crowded = any(len(layer) > 1 for layer in layers)  # a chain has nothing to keep together
    for sweep in range(SWEEPS):
        downward = sweep % 2 == 0
        neighbours = above if downward else below
        prefix = boxes.box_keys(place) if boxes is not None and crowded else None
        for layer in layers if downward else reversed(layers):
            keys: Dict[int, Any] = {}
            for i in layer:
                linked = neighbours[i]
                keys[i] = sum(place[j] for j in linked) / len(linked) if linked else place[i]
            if boxes is not None and sweep == SWEEPS - 1:
                boxes.keep_keys(layer, keys)
            if prefix is not None and boxes is not None and len(layer) > 1:
                keys = boxes.sort_keys(layer, keys, prefix)
            layer.sort(key=keys.__getitem__)  # stable: ties keep their order
            _set_places(layer, place)
    return layers


def _set_places(layer: List[int], place: List[float]) -> None:
    size = len(layer)
    for k, i in enumerate(layer):
        place[i] = (k + 0.5) / size


def _place_in_ranks(
    layers: List[List[int]], pairs: Sequence[Tuple[int, int]], breadth: List[float], boxes: Optional["_Boxes"] = None
) -> List[float]:
    """Centres along each rank: as near the mean of a node's neighbours as the rank allows.

    The widest rank is packed tight first; the others then follow the ranks above
    them, each node at the mean centre of its neighbours placed so far, pushed right
    as far as needed to clear the node to its left. Each rank is then centred on
    the drawing's axis (see :func:`_pack`). With ``boxes``, two nodes keep room
    between them for the box edges that pass between them.
    """
    count = len(breadth)
    neighbours: List[List[int]] = [[] for _ in range(count)]
    for upper, lower in pairs:
        neighbours[upper].append(lower)
        neighbours[lower].append(upper)
    centre = [0.0] * count
    placed = [False] * count
    if not layers:
        return centre
    gaps = [boxes.gaps(layer) if boxes is not None else None for layer in layers]
    widest = max(range(len(layers)), key=lambda k: sum(breadth[i] for i in layers[k]))
    _pack(layers[widest], [0.0] * len(layers[widest]), breadth, centre, gaps[widest])
    for i in layers[widest]:
        placed[i] = True
    sequence = list(range(widest - 1, -1, -1)) + list(range(widest + 1, len(layers)))
    for k in sequence:
        layer = layers[k]
        wanted = []
        for i in layer:
            known = [centre[j] for j in neighbours[i] if placed[j]]
            wanted.append(sum(known) / len(known) if known else None)
        _fill_gaps(wanted)
        _pack(layer, wanted, breadth, centre, gaps[k])
        for i in layer:
            placed[i] = True
    return centre


def _fill_gaps(wanted: List[Optional[float]]) -> None:
    """Nodes with no placed neighbour follow the node before them (or after, at the start)."""
    last = None
    for k, value in enumerate(wanted):
        if value is None:
            wanted[k] = last
        else:
            last = value
    nxt = 0.0
    for k in range(len(wanted) - 1, -1, -1):
        if wanted[k] is None:
            wanted[k] = nxt
        else:
            nxt = wanted[k]  # type: ignore[assignment]


def _pack(
    layer: List[int],
    wanted: Sequence[Optional[float]],
    breadth: List[float],
    centre: List[float],
    gaps: Optional[List[float]] = None,
) -> None:
    """Place ``layer`` left to right at its wanted centres, keeping a gap between
    boxes, then centre the rank on the drawing's axis; its nodes keep their order
    and gaps.

    Each rank follows the ranks placed before it, and small pulls to one side add
    up: uncentred, an LSTM unrolled 30 steps drifted 1,000 points sideways, GPT-2
    with 250 layers some 40,000, a diagonal strip on a page mostly empty. Centred
    as it is placed, the next rank follows a centred one: a chain of blocks runs
    straight down, and an edge from far above (a tied weight) does not pull its
    node out across the page. ``gaps[k]``, when given, is the gap between the
    ``k``-th node and the next (``NODE_GAP`` otherwise).
    """
    if not layer:
        return
    edge = None
    gap = NODE_GAP
    for k, (i, want) in enumerate(zip(layer, wanted)):
        half = breadth[i] / 2
        x = want if want is not None else 0.0
        if gaps is not None and k > 0:
            gap = gaps[k - 1]
        if edge is not None and x - half < edge + gap:
            x = edge + gap + half
        centre[i] = x
        edge = x + half
    assert edge is not None  # the layer has a node
    middle = (centre[layer[0]] - breadth[layer[0]] / 2 + edge) / 2
    for i in layer:
        centre[i] -= middle


# --- DOT for the fixed layout --------------------------------------------------------

FIXED_GRAPH_ATTRS = {
    # Positions are in points: `neato -n2` reads them so, plain neato (a notebook's
    # display) with inputscale=72; maxiter=0 stops plain neato from iterating over
    # pinned nodes (5 minutes for 20,000 nodes).
    "inputscale": "72",
    "maxiter": "0",
    "overlap": "true",
    "splines": "false",
}


def fixed_layout_lines(
    graph: AutogradGraph, direction: str = "TB", legend_kinds: Iterable[str] = (), clusters: bool = False
) -> List[str]:
    """DOT statements that pin every node of ``graph`` (as drawn) where :func:`layered_positions` puts it.

    Appended to the body of the DOT of the same graph, they make it drawable by
    ``neato -n2`` with straight edges and no layout work. Nodes of the legend,
    when drawn (``legend_kinds``, in legend order), go in a column to the right.
    With ``clusters``, each module of a recorded graph is drawn as a box around
    its nodes, titled and styled as ``dot`` draws its clusters (see
    :func:`module_boxes`): an empty cluster with its rectangle given (``bb``),
    which ``neato -n2`` draws beneath the nodes, one per band it has nodes in.

    >>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, Node
    >>> fixed_layout_lines(AutogradGraph((Node("n0", "op", "A"),), ()))
    ['\\tgraph [inputscale=72 maxiter=0 overlap=true splines=false]\\n', '\\tn0 [pos="0,9.5!"]\\n']
    """
    laid = _layered(graph, direction, clusters)
    positions = laid.positions
    lines = [f"\tgraph [{attr_list(FIXED_GRAPH_ATTRS)}]\n"]
    lines.extend(_box_lines(laid.boxes, graph.modules))
    lines.extend(f"\t{node_id} [{attr_list({'pos': _pos(x, y)})}]\n" for node_id, (x, y) in positions.items())
    kinds = [k for k in NODE_KINDS if k in set(legend_kinds)]
    if kinds:
        right = max((x for x, _ in positions.values()), default=0.0) + 200.0
        top = max((y for _, y in positions.values()), default=0.0)
        lines.extend(f"\tlegend_{kind} [{attr_list({'pos': _pos(right, top - 30.0 * k)})}]\n" for k, kind in enumerate(kinds))
    return lines


def _box_lines(boxes: List[Box], modules: Tuple[ModuleInfo, ...]) -> List[str]:
    """One empty cluster per box: its rectangle (``bb``) and the place of its title (``lp``)
    given, named for its module's index and band (``cluster_m3_0``)."""
    lines = []
    plain, with_tooltip = _box_template(False), _box_template(True)
    for box in boxes:
        title = cluster_title(modules[box.module])
        shown = _fitted(title, box.right - box.left - 2 * BOX_TITLE_INSET)
        bb = f'"{_number(box.left)},{_number(box.bottom)},{_number(box.right)},{_number(box.top)}"'
        title_x = box.left + BOX_TITLE_INSET + len(shown) * BOX_TITLE_CHAR / 2
        lp = f'"{_number(title_x)},{_number(box.top - BOX_TITLE / 2)}"'
        values = [bb, quote(shown), lp]
        if shown != title:
            values.append(tooltip_value([title]))
        pieces = with_tooltip if shown != title else plain
        text = "".join(piece + value for piece, value in zip(pieces, values)) + pieces[-1]
        lines.append(f"\tsubgraph cluster_m{box.module}_{box.band} {{graph [{text}]}}\n")
    return lines


@functools.lru_cache(maxsize=2)
def _box_template(tooltip: bool) -> Tuple[str, ...]:
    """The attributes of a box as :func:`attr_list` writes them, cut where its ``bb``,
    ``label``, ``lp`` (and ``tooltip``) go: the style is written once."""
    keys = ("bb", "label", "lp", "tooltip") if tooltip else ("bb", "label", "lp")
    return tuple(attr_list(dict(CLUSTER_ATTRS, **dict.fromkeys(keys, "\x00")), quoted=keys).split("\x00"))


def _fitted(title: str, width: float) -> str:
    """``title`` cut to ``width`` points from its start, where a box's path repeats the boxes around it.

    >>> _fitted("encoder.layer.0.attention (BertAttention)", 100.0)
    '…n (BertAttention)'
    """
    fits = max(int(width / BOX_TITLE_CHAR), 1)
    return title if len(title) <= fits else "\u2026" + title[len(title) - fits + 1 :]


def _pos(x: float, y: float) -> str:
    # Two decimals at most, trailing zeros dropped: the same text on every platform.
    return f"{_number(x)},{_number(y)}!"


def _number(value: float) -> str:
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


class LaidOut(NamedTuple):
    """DOT body lines, the Graphviz program that draws them, and a note on the choice ('' if none)."""

    lines: list
    engine: str
    note: str


def lay_out(view: View) -> LaidOut:
    """The DOT body of ``view``, laid out as the view decided (``view.layout``): for
    ``dot``, the lines :func:`~graphviz_autograd.drawing.dot_writer.body_lines` writes;
    for the fixed layout, the same lines without junctions (every read is a straight
    edge there, at no cost for long ones) and every node pinned, drawn by ``neato``.

    >>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, Node
    >>> from graphviz_autograd.views.prepared import prepare
    >>> laid = lay_out(prepare(AutogradGraph((Node("n0", "op", "A"),), ()), layout="fixed"))
    >>> laid.engine, laid.lines[-1]
    ('neato', '\\tn0 [pos="0,9.5!"]\\n')
    """
    if view.layout == "dot":
        return LaidOut(body_lines(view), "dot", view.layout_note)
    options = view.options
    lines = body_lines(view, junctions=False)
    legend_kinds = {n.kind for n in view.graph.nodes} if options.legend else ()
    lines.extend(fixed_layout_lines(view.graph, options.direction, legend_kinds, options.clusters))
    return LaidOut(lines, "neato", view.layout_note)


def fixed_layout_source(view: View) -> str:
    """``view`` as a whole DOT graph in the fixed layout, every node pinned, for ``neato -n2``:
    what is drawn instead when ``dot`` runs past its budget."""
    if view.layout != "fixed":
        view = view._replace(layout="fixed", layout_note="")
    return digraph(lay_out(view).lines)
