"""Layouts that stay fast: how long ``dot`` would take, and our own layered layout.

Plain computation on an :class:`AutogradGraph` (no torch, no subprocess; the DOT
statements it writes are quoted by :mod:`graphviz_autograd.dot`). The graph it
lays out is the one drawn (:mod:`graphviz_autograd.views`): a parameter used
many times is drawn once per use, which keeps ``dot`` fast on unrolled loops.

- :func:`estimate_layout_seconds` guesses how long ``dot`` will take, and
  :func:`choose_layout` is the one place that decides, from that guess and a
  budget, how a graph is laid out.
- :func:`layered_positions` is a cheap layered layout for graphs too big for
  ``dot`` (ranks by longest path, a few barycenter sweeps, then coordinates);
  :func:`fixed_layout_lines` turns it into DOT statements that Graphviz's
  ``neato -n2`` draws without laying anything out.

>>> from graphviz_autograd.graph import AutogradGraph, Node, Edge, OP, OUTPUT
>>> g = AutogradGraph((Node("n0", OUTPUT, "y"), Node("n1", OP, "ExpBackward0")), (Edge("n1", "n0"),))
>>> layered_positions(g)["n1"][1] > layered_positions(g)["n0"][1]  # inputs above outputs
True
"""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from .collapse import collapse
from .errors import OptionError
from .graph import (
    ACCUMULATE_GRAD,
    NO_GRAD,
    NODE_KINDS,
    OP,
    SAVED,
    SAVED_BY,
    AutogradGraph,
    Node,
)
from .dot import attr_list, body_lines
from .junctions import plan_junctions
from .options import DEFAULT_LAYOUT_BUDGET, DrawOptions, check_layout, draw_options
from .stacking import longest_path_ranks
from .style import GRAPH_ATTRS, check_direction
from .views import DEFAULT_MAX_USES, shown_graph, split_shared_leaves

# Seconds per iteration of dot's network simplex, per node of the graph it works on,
# and for ordering and routing, per unit of crowding (see estimate_layout_seconds).
SIMPLEX_SECONDS = 3e-8
ORDERING_SECONDS = 5e-10
# Seconds (estimated from size alone) past which estimate_layout_seconds does not
# count ranks: at some 200,000 nodes that costs a few tenths of a second, and the
# answer is the fixed layout either way.
UNCOUNTED_RANKS_ABOVE = 3600.0

Position = Tuple[float, float]


# --- how long dot would take, and what to do about it ----------------------------------


def estimate_layout_seconds(graph: AutogradGraph, junctions: bool = True) -> float:
    """A rough guess of the seconds Graphviz ``dot`` needs to lay out ``graph`` as SVG,
    drawn with junctions (see :mod:`graphviz_autograd.junctions`) unless ``junctions`` is False.

    ``dot`` puts a virtual node on every rank an edge crosses beyond its first, so
    long edges, not the node count alone, decide its time: DenseNet-121's 1,282
    nodes get 26,852 virtual ones (each feature map feeds every later
    ``torch.cat`` of its block), GPT-2's 1,113 get 1,302. Two steps grow with them.
    The network simplex placing nodes across the page works on ``size = nodes +
    edges + 2 * virtual`` nodes, for about ``size / 2`` iterations of a cost in
    proportion to ``size``, and stops at 3 iterations per node (``nslimit``, see
    ``style.GRAPH_ATTRS``). Ordering nodes within ranks and routing edges grow with
    how crowded the ranks are, ``crowding`` being the sum over ranks of the square
    of their width, virtual nodes included (see :func:`rank_widths`)::

        seconds = 0.05 + 3e-8 * size * min(size / 2, 3 * nodes) + 5e-10 * crowding ** 1.5

    Fitted to ``dot -Tsvg`` on 2 cores (chains of 2,000 to 10,000 nodes, GPT-2 with
    12 and 48 layers, BERT, ResNet-50, DenseNet-121, LSTMs unrolled 8 to 30 steps,
    split and whole, dense blocks of 12 to 48 layers), the guess is within a factor
    of 1.5 of each, from 0.06 to 164 s: enough to tell a graph that takes seconds
    from one that takes minutes, nothing finer. Ranks are counted in Python, so past
    an hour on size alone (some 200,000 nodes) they are not, and the estimate is
    that lower bound.

    The graph counted is the one ``dot`` is given: with junctions, an output read by
    many ops far below is one trunk of points with short branches, not one long
    edge per read (:mod:`graphviz_autograd.junctions`). DenseNet-121 then has 58
    junctions and a few hundred virtual nodes, and is guessed at 0.3 s instead of
    9 s; ``dot`` takes 0.4 to 0.5 s without module boxes and 0.7 to 0.8 s with them
    (15 to 27 s without junctions).

    >>> from graphviz_autograd.graph import AutogradGraph, Node
    >>> estimate_layout_seconds(AutogradGraph((Node("n0", "op"),), ())) < 1
    True
    """
    ids, contents, links = graph.columns(fill_ids=False)  # a walked graph's ids are not needed: n0, n1, ...
    count = len(contents) if ids is None else len(ids)  # an edge to an id that names no node gets a node of its own
    size = count + len(links)
    max_iterations = float(GRAPH_ATTRS.get("nslimit", "inf")) * count
    seconds = _placing_seconds(size, max_iterations)
    if seconds >= UNCOUNTED_RANKS_ABOVE:
        return seconds
    rerouted = plan_junctions(count, links) if junctions else None
    if rerouted is not None:
        # What dot is given: the junctions are nodes, their trunks and branches edges.
        count += len(rerouted.junctions)
        links = rerouted.links
        size = count + len(links)
        max_iterations = float(GRAPH_ATTRS.get("nslimit", "inf")) * count
    widths = rank_widths(count, links)
    virtual = sum(widths) - count
    crowding = sum(width * width for width in widths)
    return _placing_seconds(size + 2 * virtual, max_iterations) + ORDERING_SECONDS * crowding**1.5


def _placing_seconds(size: int, max_iterations: float) -> float:
    return 0.05 + SIMPLEX_SECONDS * size * min(size / 2, max_iterations)


def rank_widths(count: int, links: Iterable[Tuple[int, int, object]]) -> List[int]:
    """How many nodes ``dot`` puts on each rank, the virtual nodes of long edges included.

    ``links`` are edges as ``(source, target, ...)`` by node index, source above
    target. Ranks are counted from the bottom, each node one above the highest of
    the nodes it feeds (the longest path to a node that feeds nothing), as ``dot``
    ranks a graph drawn top to bottom; an edge then has a virtual node on each
    rank it crosses between its ends.

    >>> rank_widths(3, [(2, 1, ()), (1, 0, ()), (2, 0, ())])  # 2 -> 0 crosses the rank of 1
    [1, 2, 1]
    """
    pairs = [(link[0], link[1]) for link in links if link[0] != link[1]]
    rank = longest_path_ranks(count, pairs)
    widths = [0] * (max(rank, default=-1) + 1)
    for r in rank:
        widths[r] += 1
    crossing = [0] * len(widths)  # +1 on the first rank an edge crosses, -1 on the rank of its source
    for source, target in pairs:
        if rank[source] - rank[target] > 1:
            crossing[rank[target] + 1] += 1
            crossing[rank[source]] -= 1
    passing = 0
    for r in range(len(widths)):
        passing += crossing[r]
        widths[r] += passing
    return widths


def choose_layout(
    graph: AutogradGraph, layout: str = "auto", budget: float = DEFAULT_LAYOUT_BUDGET, junctions: bool = True
) -> Tuple[str, str]:
    """How to lay out ``graph`` (as drawn, with junctions unless ``junctions`` is False):
    ``("dot" or "fixed", note)``.

    The one place that decides. ``layout="dot"`` and ``"fixed"`` are taken as
    asked; ``"auto"`` picks ``dot`` unless :func:`estimate_layout_seconds` is over
    ``budget`` seconds, and then the fixed layered layout, with a one-line
    ``note`` saying so (empty otherwise) for the caller to show.

    >>> from graphviz_autograd.graph import AutogradGraph, Node
    >>> choose_layout(AutogradGraph((Node("n0", "op"),), ()))
    ('dot', '')
    >>> choose_layout(AutogradGraph((Node("n0", "op"),), ()), budget=0.01)[0]
    'fixed'
    """
    check_layout(layout)
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget > 0:
        raise OptionError(f"layout budget must be a positive number of seconds; got {budget!r}.")
    if layout != "auto":
        return layout, ""
    estimate = estimate_layout_seconds(graph, junctions)
    if estimate <= budget:
        return "dot", ""
    return "fixed", (
        f"Graphviz dot would take about {estimate:,.0f} s to lay out this graph of {len(graph.nodes):,} nodes "
        f"(budget {budget:g} s); drawing it with the fixed layered layout instead (layout='dot' to wait for dot)."
    )


class Fitted(NamedTuple):
    """A graph collapsed so that ``dot`` lays it out within budget (``depth`` None: as it was)."""

    graph: AutogradGraph
    depth: Optional[int]
    note: str


def collapse_to_fit(
    graph: AutogradGraph, budget: float = DEFAULT_LAYOUT_BUDGET, *, fold_repeated: bool = True, junctions: bool = True
) -> Fitted:
    """``graph``, collapsed by module depth (deepest first) until ``dot`` fits ``budget`` seconds
    (drawn with junctions unless ``junctions`` is False).

    Only a recorded graph (one with module info) can be collapsed; a graph that fits
    already, or that no depth makes fit, comes back as it was (and
    :func:`choose_layout` then falls back to the fixed layout). ``note`` says what
    was done, for the caller to show.

    >>> from graphviz_autograd.graph import AutogradGraph, Node
    >>> collapse_to_fit(AutogradGraph((Node("n0", "op"),), ())).depth is None
    True
    """
    estimate = estimate_layout_seconds(split_shared_leaves(graph), junctions)
    submodules = [m.path for m in graph.modules if m.path]  # the model itself ('') is no box of its own
    if estimate <= budget or not submodules:
        return Fitted(graph, None, "")
    deepest = max(path.count(".") for path in submodules)
    for depth in range(deepest, -1, -1):
        collapsed = collapse(graph, depth, fold_repeated)
        if estimate_layout_seconds(split_shared_leaves(collapsed), junctions) <= budget:
            return Fitted(
                collapsed,
                depth,
                f"Graphviz dot would take about {estimate:,.0f} s to lay out all {len(graph.nodes):,} nodes "
                f"(budget {budget:g} s); drawing modules below depth {depth} as boxes instead "
                f"({len(collapsed.nodes):,} nodes; --depth N or --layout dot to choose).",
            )
    return Fitted(graph, None, "")


# --- our own layered layout ------------------------------------------------------------

# Sizes in points (1/72 inch), as Graphviz measures them; the font is 10 pt monospace.
CHAR_WIDTH = 6.2
LINE_HEIGHT = 13.0
NODE_PADDING = 16.0
NODE_GAP = 14.0
RANK_GAP = 30.0
SWEEPS = 4
# A drawing longer than this (points, across its ranks) is folded into bands side by
# side (see _fold): 200 inches, the most a PDF page may measure.
FOLD_LONGER_THAN = 14_400.0
FOLD_ASPECT = 1.4  # length over breadth a folded drawing comes nearest, as a portrait page
BAND_GAP = 100.0  # between two bands, beside the gap each box keeps


def layered_positions(graph: AutogradGraph, direction: str = "TB") -> Dict[str, Position]:
    """Node centres in points for a layered drawing of ``graph``; linear time but for sorting.

    Ranks: a node sits one rank above the highest of the nodes it feeds (the
    longest path to an output), found with a queue, not recursion; a saved tensor
    sits beside the op that saved it. Within a rank nodes start in walk order and
    are reordered by a few barycenter sweeps (each node moves to the mean place of
    its neighbours). Then each rank is packed left to right, every node as near
    its barycenter as the widths allow, and centred on the drawing's axis. A
    drawing longer than a PDF page is folded into bands side by side (see
    :func:`_fold`). ``direction`` turns the picture as Graphviz's ``rankdir`` does.

    >>> from graphviz_autograd.graph import AutogradGraph, Node, Edge, OP, OUTPUT
    >>> g = AutogradGraph((Node("n0", OUTPUT), Node("n1", OP, "A"), Node("n2", OP, "B")),
    ...                   (Edge("n1", "n0"), Edge("n2", "n0")))
    >>> p = layered_positions(g)
    >>> p["n1"][1] == p["n2"][1] > p["n0"][1], p["n1"][0] < p["n2"][0]
    (True, True)
    """
    check_direction(direction)
    nodes = graph.nodes
    count = len(nodes)
    index = {n.id: i for i, n in enumerate(nodes)}
    # Edges as (upper, lower): data flows down, inputs above their consumers. A saved
    # tensor's edge points from the op to it, so it is turned around.
    pairs = []
    for edge in graph.edges:
        upper, lower = index.get(edge.source), index.get(edge.target)
        if upper is None or lower is None or upper == lower:
            continue
        if edge.kind == SAVED_BY:
            upper, lower = lower, upper
        pairs.append((upper, lower))

    rank = longest_path_ranks(count, pairs)
    order = _order_in_ranks(count, pairs, rank)
    across = direction in ("LR", "RL")
    breadth = [0.0] * count  # size along a rank
    length = [0.0] * count  # size across ranks
    for i, node in enumerate(nodes):
        width, height = _node_size(node)
        breadth[i], length[i] = (height, width) if across else (width, height)
    centre = _place_in_ranks(order, pairs, breadth)

    rank_length: Dict[int, float] = {}
    for i in range(count):
        rank_length[rank[i]] = max(rank_length.get(rank[i], 0.0), length[i])
    offset, at = {}, 0.0
    for r in sorted(rank_length):
        offset[r] = at + rank_length[r] / 2
        at += rank_length[r] + RANK_GAP
    shift = _fold(offset, rank_length, rank, centre, breadth)

    positions = {}
    for i, node in enumerate(nodes):
        along, up = centre[i] + shift[rank[i]][0], offset[rank[i]] + shift[rank[i]][1]
        if direction == "TB":
            x, y = along, up
        elif direction == "BT":
            x, y = along, -up
        elif direction == "LR":
            x, y = -up, -along
        else:
            x, y = up, -along
        positions[node.id] = (x, y)
    return positions


def _fold(
    offset: Dict[int, float], rank_length: Dict[int, float], rank: List[int], centre: List[float], breadth: List[float]
) -> Dict[int, Tuple[float, float]]:
    """Rank -> (shift along the ranks, shift up) that folds a drawing too long to
    show into bands side by side, as a newspaper sets a long text in columns.

    A deep graph (a long chain, an RNN unrolled over many steps) is a strip
    hundreds of inches long: past PDF's page limit of 200 inches, and cairo, which
    draws Graphviz's PDF and PNG, takes time in proportion to the strip's length
    for every shape (a 20,000-node chain: 1 s as SVG, 40 s as PDF). Past
    ``FOLD_LONGER_THAN`` points, runs of consecutive ranks are set side by side, in
    as many bands as bring the drawing nearest ``FOLD_ASPECT`` (length over
    breadth). The inputs begin the first band and the outputs end the last; each
    band starts at the top, the next to the right of the last (below it, for a
    drawing from left to right), as broad as its own widest rank. Edges between
    bands are drawn straight across.
    """
    ranks = sorted(offset, reverse=True)  # from the top: a drawing is read from its inputs down
    length = offset[ranks[0]] + rank_length[ranks[0]] / 2 if ranks else 0.0
    if length <= FOLD_LONGER_THAN:
        return dict.fromkeys(ranks, (0.0, 0.0))
    bands = _Bands(ranks, length, offset, rank_length, rank, centre, breadth)
    # The drawing grows broader and shorter with every band: the fewest bands that
    # make it no longer than FOLD_ASPECT, or one fewer if that is nearer.
    low, high = 1, len(ranks)
    while low < high:
        middle = (low + high) // 2
        if bands.aspect(middle) <= FOLD_ASPECT:
            high = middle
        else:
            low = middle + 1
    if low > 1 and abs(math.log(bands.aspect(low - 1) / FOLD_ASPECT)) < abs(math.log(bands.aspect(low) / FOLD_ASPECT)):
        low -= 1
    return bands.shifts(low)


class _Bands:
    """A drawing's ranks, top first, cut into bands of consecutive ranks (see :func:`_fold`)."""

    def __init__(
        self,
        ranks: List[int],
        length: float,
        offset: Dict[int, float],
        rank_length: Dict[int, float],
        rank: List[int],
        centre: List[float],
        breadth: List[float],
    ):
        self.ranks = ranks
        self.length = length
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

    def spans(self, bands: int) -> List[Tuple[int, int]]:
        """(first, end) of each band, as indices in ``ranks``, for ``bands`` bands of about equal length."""
        band_length = self.length / bands
        firsts = [0]
        while len(firsts) < bands:  # the first rank a band's length below the last band's first
            k = bisect_left(self.top, self.top[firsts[-1]] + band_length, firsts[-1] + 1)
            if k == len(self.ranks):
                break
            firsts.append(k)
        return list(zip(firsts, firsts[1:] + [len(self.ranks)]))

    def extents(self, spans: List[Tuple[int, int]]) -> List[Tuple[float, float]]:
        return [(min(self.left[a:b]), max(self.right[a:b])) for a, b in spans]

    def aspect(self, bands: int) -> float:
        """Length over breadth of the drawing folded into ``bands`` bands."""
        spans = self.spans(bands)
        longest = max(self.bottom[b - 1] - self.top[a] for a, b in spans)
        broad = sum(end - begin for begin, end in self.extents(spans)) + BAND_GAP * (len(spans) - 1)
        return longest / broad

    def shifts(self, bands: int) -> Dict[int, Tuple[float, float]]:
        """Rank -> (shift along, shift up) setting each band a gap to the right of the last, its top at the top."""
        spans = self.spans(bands)
        extents = self.extents(spans)
        shifts = {}
        at = extents[0][0]
        for (a, b), (begin, end) in zip(spans, extents):
            for r in self.ranks[a:b]:
                shifts[r] = (at - begin, self.top[a])
            at += end - begin + BAND_GAP
        return shifts


def _order_in_ranks(count: int, pairs: Sequence[Tuple[int, int]], rank: List[int]) -> List[List[int]]:
    """Each rank's nodes left to right: walk order, then barycenter sweeps down and up."""
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
    for sweep in range(SWEEPS):
        downward = sweep % 2 == 0
        neighbours = above if downward else below
        for layer in layers if downward else reversed(layers):
            keys = {}
            for i in layer:
                linked = neighbours[i]
                keys[i] = sum(place[j] for j in linked) / len(linked) if linked else place[i]
            layer.sort(key=keys.__getitem__)  # stable: ties keep their order
            _set_places(layer, place)
    return layers


def _set_places(layer: List[int], place: List[float]) -> None:
    size = len(layer)
    for k, i in enumerate(layer):
        place[i] = (k + 0.5) / size


def _place_in_ranks(layers: List[List[int]], pairs: Sequence[Tuple[int, int]], breadth: List[float]) -> List[float]:
    """Centres along each rank: as near the mean of a node's neighbours as the rank allows.

    The widest rank is packed tight first; the others then follow the ranks above
    them, each node at the mean centre of its neighbours placed so far, pushed right
    as far as needed to clear the node to its left. Each rank is then centred on
    the drawing's axis (see :func:`_pack`).
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
    widest = max(range(len(layers)), key=lambda k: sum(breadth[i] for i in layers[k]))
    _pack(layers[widest], [0.0] * len(layers[widest]), breadth, centre)
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
        _pack(layer, wanted, breadth, centre)
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


def _pack(layer: List[int], wanted: Sequence[Optional[float]], breadth: List[float], centre: List[float]) -> None:
    """Place ``layer`` left to right at its wanted centres, keeping a gap between
    boxes, then centre the rank on the drawing's axis; its nodes keep their order
    and gaps.

    Each rank follows the ranks placed before it, and small pulls to one side add
    up: uncentred, an LSTM unrolled 30 steps drifted 1,000 points sideways, GPT-2
    with 250 layers some 40,000, a diagonal strip on a page mostly empty. Centred
    as it is placed, the next rank follows a centred one: a chain of blocks runs
    straight down, and an edge from far above (a tied weight) does not pull its
    node out across the page.
    """
    if not layer:
        return
    edge = None
    for i, want in zip(layer, wanted):
        half = breadth[i] / 2
        x = want if want is not None else 0.0
        if edge is not None and x - half < edge + NODE_GAP:
            x = edge + NODE_GAP + half
        centre[i] = x
        edge = x + half
    assert edge is not None  # the layer has a node
    middle = (centre[layer[0]] - breadth[layer[0]] / 2 + edge) / 2
    for i in layer:
        centre[i] -= middle


def _node_size(node: Node) -> Tuple[float, float]:
    """(width, height) in points, from the lines its label will have."""
    lines = _label_lines(node)
    chars = max((len(line) for line in lines), default=0)
    width = max(chars * CHAR_WIDTH + NODE_PADDING, 54.0)
    height = max(len(lines) * LINE_HEIGHT + 6.0, 14.4)
    return width, height


def _label_lines(node: Node) -> List[str]:
    if node.kind == NO_GRAD:
        return ["no grad"]
    lines = node.label.split("\n") if node.label else []
    if node.kind in (OP, ACCUMULATE_GRAD):
        return lines + [f"{k}: {v}" for k, v in node.attrs]
    if node.shape is not None or node.kind != SAVED:
        lines.append("(" + ", ".join(str(s) for s in node.shape or ()) + ")")
    return lines


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
    graph: AutogradGraph, direction: str = "TB", legend_kinds: Iterable[str] = ()
) -> List[str]:
    """DOT statements that pin every node of ``graph`` (as drawn) where :func:`layered_positions` puts it.

    Appended to the body of the DOT of the same graph, they make it drawable by
    ``neato -n2`` with straight edges and no layout work. Nodes of the legend,
    when drawn (``legend_kinds``, in legend order), go in a column to the right.

    >>> from graphviz_autograd.graph import AutogradGraph, Node
    >>> fixed_layout_lines(AutogradGraph((Node("n0", "op", "A"),), ()))
    ['\\tgraph [inputscale=72 maxiter=0 overlap=true splines=false]\\n', '\\tn0 [pos="0,9.5!"]\\n']
    """
    positions = layered_positions(graph, direction)
    lines = [f"\tgraph [{attr_list(FIXED_GRAPH_ATTRS)}]\n"]
    lines.extend(f"\t{node_id} [{attr_list({'pos': _pos(x, y)})}]\n" for node_id, (x, y) in positions.items())
    kinds = [k for k in NODE_KINDS if k in set(legend_kinds)]
    if kinds:
        right = max((x for x, _ in positions.values()), default=0.0) + 200.0
        top = max((y for _, y in positions.values()), default=0.0)
        lines.extend(f"\tlegend_{kind} [{attr_list({'pos': _pos(right, top - 30.0 * k)})}]\n" for k, kind in enumerate(kinds))
    return lines


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


def lay_out(
    graph: AutogradGraph,
    options: Optional[DrawOptions] = None,
    *,
    node_styles: Optional[Mapping[str, Mapping[str, str]]] = None,
    notes: Sequence[tuple[Sequence[str], Mapping[str, str]]] = (),
    **changes: Any,
) -> LaidOut:
    """The DOT body of ``graph`` drawn with ``options`` (or the keyword options of
    ``make_dot``), laid out as ``options.layout`` says; ``depth`` is not applied here.

    :func:`graphviz_autograd.layout.choose_layout` decides; with the fixed layout,
    the lines pin every node and ``engine`` is ``"neato"``.

    >>> from graphviz_autograd.graph import AutogradGraph, Node
    >>> laid = lay_out(AutogradGraph((Node("n0", "op", "A"),), ()), layout="fixed")
    >>> laid.engine, laid.lines[-1]
    ('neato', '\\tn0 [pos="0,9.5!"]\\n')
    """
    options = draw_options(options, **changes)
    # Split once here: the fixed layout places the same copies the DOT draws.
    if options.split_shared:
        graph = split_shared_leaves(graph, DEFAULT_MAX_USES)
    options = options.replace(split_shared=False)
    if options.layout == "dot":
        return LaidOut(body_lines(graph, options, node_styles=node_styles, notes=notes), "dot", "")
    drawn = shown_graph(graph, options.show_no_grad, options.show_saved)
    chosen, note = choose_layout(drawn, options.layout, options.layout_budget, options.junctions)
    if chosen == "dot":
        return LaidOut(body_lines(graph, options, node_styles=node_styles, notes=notes), "dot", note)
    # The fixed layout draws each read as a straight edge, at no cost for long
    # ones: junctions, which are for dot, are left out (they have no place there).
    lines = body_lines(graph, options.replace(junctions=False), node_styles=node_styles, notes=notes)
    legend_kinds = {n.kind for n in drawn.nodes} if options.legend else ()
    lines.extend(fixed_layout_lines(drawn, options.direction, legend_kinds))
    return LaidOut(lines, "neato", note)
