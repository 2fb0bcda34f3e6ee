"""Whether a drawing fits: how long ``dot`` would take, how big its picture would be,
and the one decision of what a recorded graph's default drawing is.

Plain computation on an :class:`AutogradGraph` (no torch, no subprocess).

- :func:`estimate_layout_seconds` guesses how long ``dot`` will take.
- :func:`picture_size` guesses the size of the picture ``dot`` draws, in points.
- :func:`fit_to_page` turns a drawing's ``depth`` into the graph to draw: with
  ``depth="fit"`` (the default) a recorded graph too big for a page becomes the
  largest module summary that fits one, with a note saying how to see the rest;
  ``make_dot``, ``to_dot``, ``render``, the command line and a notebook's display
  all ask it.

A page is a picture whose long side is at most ``PAGE_LONG_SIDE`` points (4,000
pixels at Graphviz's default 96 dpi), holding at most ``PAGE_NODES`` boxes, that
``dot`` lays out within the layout budget.

>>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, Node
>>> fit_to_page(AutogradGraph((Node("n0", "op", "ExpBackward0"),), ())).depth is None  # fits: drawn whole
True
"""

from __future__ import annotations

import math
from typing import Dict, Iterable, List, Mapping, NamedTuple, Optional, Tuple

from .collapsing import Folding, collapse_with_ids
from ..graph.descriptions import module_label_lines, shape_text
from ..graph.module_tree import ModuleTree
from ..graph.autograd_graph import ACCUMULATE_GRAD, MODULE, NO_GRAD, OP, SAVED, SAVED_BY, AutogradGraph, Node, saved_attrs
from ..errors import OptionError
from ..options import DEFAULT_LAYOUT_BUDGET, FIT, DrawOptions, check_layout, draw_options
from .junctions import graph_junctions
from .stacking import ROW_POINTS, ROWS_UP_TO, graph_stacking_edges, longest_path_ranks, row_edges
from ..graph.style import GRAPH_ATTRS
from .shown import DEFAULT_MAX_USES, merge_alike_inputs, shown_graph, split_shared_leaves

# Seconds per iteration of dot's network simplex, per node of the graph it works on,
# and for ordering and routing, per unit of crowding (see estimate_layout_seconds).
SIMPLEX_SECONDS = 3e-8
ORDERING_SECONDS = 5e-10
# Seconds (estimated from size alone) past which estimate_layout_seconds does not
# count ranks: at some 200,000 nodes that costs a few tenths of a second, and the
# answer is the fixed layout either way.
UNCOUNTED_RANKS_ABOVE = 3600.0


# --- how long dot would take, and what to do about it ----------------------------------


def estimate_layout_seconds(graph: AutogradGraph, junctions: bool = True) -> float:
    """A rough guess of the seconds Graphviz ``dot`` needs to lay out ``graph`` as SVG,
    drawn with junctions (see :mod:`graphviz_autograd.views.junctions`) unless ``junctions`` is False.

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
    edge per read (:mod:`graphviz_autograd.views.junctions`). DenseNet-121 then has 58
    junctions and a few hundred virtual nodes, and is guessed at 0.3 s instead of
    9 s; ``dot`` takes 0.4 to 0.5 s without module boxes and 0.7 to 0.8 s with them
    (15 to 27 s without junctions).

    >>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, Node
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
    rerouted = graph_junctions(graph) if junctions else None
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




# Sizes in points (1/72 inch), as Graphviz measures them; the font is 10 pt monospace.
CHAR_WIDTH = 6.2
LINE_HEIGHT = 13.0
NODE_PADDING = 16.0

# A page: the picture's long side at most this many points (4,000 px at 96 dpi, the
# default of Graphviz's PNG), and at most this many boxes on it.
PAGE_LONG_SIDE = 3000.0
# How much longer than its estimate a picture may come out: over every model type of
# transformers (benchmarks/breadth.py), the long side of those estimated near a page came
# out up to a fifth longer, so a picture fits when its estimate is a fifth shorter than a page.
ESTIMATE_SLACK = 1.2
PAGE_NODES = 200
# Graphviz's gap between ranks (inches): its default, and the closer one a graph too
# tall for a page at the default is drawn with (``View.compact``). Much closer
# and the arrowheads (10 points long) fill the gaps.
RANKSEP = 0.5
COMPACT_RANKSEP = 0.2
NODESEP = 0.25
# Points a module box adds across the ranks, at its top (title) or at its foot, and
# around the whole drawing. Fitted to `dot -Tsvg` on BERT, GPT-2, T5, ResNet-50 and an
# 80-layer Llama at every depth: the height is within 6 % of dot's for most, up to 8 %
# over (Llama) and, with many boxes side by side, 20 to 30 % under (T5 at depth 6).
BOX_EDGE = 16.0
MARGIN = 25.0
# Points between a module box's border and what is in it, on each side (its margin, and the
# space Graphviz keeps around a cluster).
CLUSTER_MARGIN = 8.0



# --- the graph a drawing shows ---------------------------------------------------------


class Fitted(NamedTuple):
    """What to draw: the graph (folded, collapsed), the depth it was collapsed to (None:
    not collapsed), whether its ranks are set closer, and a note for the user ('' when
    nothing was left out). ``stand_ins`` (a folded node's id -> the id of the node of the
    first block that stands for it) and ``box_ids`` (the folded graph's ids -> the
    collapsed graph's, None when not collapsed) say where each walked node went."""

    graph: AutogradGraph
    depth: Optional[int]
    compact: bool
    note: str
    stand_ins: Mapping[str, str] = {}
    box_ids: Optional[Mapping[str, str]] = None

    def origin(self, walked: AutogradGraph) -> Optional[dict[str, Optional[str]]]:
        """Each node id of ``walked`` (the graph that was fitted) -> the id of the node drawn
        for it (None: not drawn); None when every node is drawn as itself."""
        if self.box_ids is None:
            return dict(self.stand_ins) if self.stand_ins else None
        stand_ins, box_ids = self.stand_ins, self.box_ids
        return {n.id: box_ids.get(stand_ins.get(n.id, n.id)) for n in walked.nodes}


def fit_to_page(graph: AutogradGraph, options: Optional[DrawOptions] = None, **changes: object) -> Fitted:
    """The graph a drawing with ``options`` shows: runs of identical blocks folded
    (``fold_repeated``), then collapsed as ``depth`` says.

    ``depth=N`` collapses each module N levels down into one box, ``"full"`` (or
    None) keeps every node, and ``"fit"`` (the default) keeps every node when the
    folded graph fits a page (see the module's docstring), else draws the deepest
    module summary that does, with a note saying so and how to see the rest. A
    graph without module info cannot be summarised and is drawn whole, as it was
    always drawn. When no summary fits, the smallest (one box per top-level
    module) is drawn. A recorded drawing too long for a page at Graphviz's gap
    between ranks gets a closer one (``compact``).

    The whole graph is folded with no depth, and a summary at depth N is the one
    ``depth=N`` draws: folded to that depth, then collapsed.

    >>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, Edge, ModuleInfo, Node, OP, OUTPUT
    >>> ops = [Node(f"n{i}", OP, f"Op{i}Backward0", module=f"h.{i}") for i in range(1, 301)]
    >>> modules = (ModuleInfo("", "Net"), ModuleInfo("h", "Stack"), *(ModuleInfo(f"h.{i}", f"B{i}") for i in range(1, 301)))
    >>> g = AutogradGraph((Node("n0", OUTPUT, "y"), *ops), tuple(Edge(f"n{i + 1}", f"n{i}") for i in range(300)), modules=modules)
    >>> fitted = fit_to_page(g)  # 300 unlike blocks in a row: one box for the stack
    >>> fitted.depth, len(fitted.graph.nodes), fitted.note[:47]
    (0, 2, 'This graph of 301 nodes is too big for a page; ')
    >>> full = fit_to_page(g, depth="full")
    >>> full.depth, len(full.graph.nodes), full.compact
    (None, 301, True)
    """
    options = draw_options(options, **changes)
    depth = options.depth
    asked = depth if isinstance(depth, int) else None
    whole = graph
    # One folding of the graph for every depth tried below: what does not depend on the depth is worked out once.
    folding = Folding(graph) if options.fold_repeated and graph.modules else None
    graph, stand_ins, box_ids = _summary(whole, asked, folding, options.fold_repeated)
    submodules = [m.path for m in graph.modules if m.path]  # the model itself ('') is no box of its own
    if not graph.modules:  # drawn as torchviz draws it, byte for byte; its nodes never built
        return Fitted(graph, asked, False, "", stand_ins, box_ids)
    if depth != FIT or not submodules:
        return Fitted(graph, asked, _compact(graph, options), "", stand_ins, box_ids)
    drawn = as_drawn(graph, options)
    compact = _page_spacing(drawn, options)
    if compact is not None:
        return Fitted(graph, None, compact, "", stand_ins, box_ids)
    reason = _why_not(drawn, options)
    deepest = max(path.count(".") for path in submodules)
    smallest = None
    for level in range(deepest, -1, -1):
        summary = _summary(whole, level, folding, options.fold_repeated)
        if len(summary[0].nodes) >= len(graph.nodes):
            continue  # collapses nothing
        smallest = summary
        compact = _page_spacing(as_drawn(summary[0], options), options)
        if compact is not None:
            note = _summary_note(whole, graph, summary[0], level, reason, fits=True)
            return Fitted(summary[0], level, compact, note, summary[1], summary[2])
    if smallest is None:
        return Fitted(graph, None, _compact(graph, options), "", stand_ins, box_ids)
    note = _summary_note(whole, graph, smallest[0], 0, reason, fits=False)
    return Fitted(smallest[0], 0, _compact(smallest[0], options), note, smallest[1], smallest[2])


def _summary(
    graph: AutogradGraph, depth: Optional[int], folding: Optional[Folding], fold_repeated: bool
) -> tuple[AutogradGraph, dict[str, str], Optional[dict[str, str]]]:
    """``graph`` folded by ``folding`` (runs of alike blocks drawn once; None: not folded) and
    collapsed to ``depth`` (None: not collapsed), with the stand-ins of the fold and the ids
    of the collapse."""
    stand_ins: dict[str, str] = {}
    if folding is not None:
        graph, stand_ins = folding.fold(depth)
    if depth is None:
        return graph, stand_ins, None
    collapsed, box_ids = collapse_with_ids(graph, depth, fold_repeated)
    return collapsed, stand_ins, box_ids


def as_drawn(graph: AutogradGraph, options: DrawOptions) -> AutogradGraph:
    """``graph`` as a picture draws it: shared parameters split per use (``split_shared``),
    inputs without gradient and saved tensors left out unless shown. Made once per graph
    and options: the page fit measures it, and :func:`~graphviz_autograd.views.prepared.prepare`
    draws the one it chose."""
    split, no_grad, saved = options.split_shared, options.show_no_grad, options.show_saved

    def make() -> AutogradGraph:
        drawn = split_shared_leaves(graph, DEFAULT_MAX_USES) if split else graph
        drawn = merge_alike_inputs(drawn, DEFAULT_MAX_USES)
        return shown_graph(drawn, no_grad, saved)

    return graph.derived(f"as_drawn {split!r} {no_grad!r} {saved!r}", make)


def _layout_seconds(drawn: AutogradGraph, junctions: bool) -> float:
    """:func:`estimate_layout_seconds`, once per drawn graph: the page fit asks it of each
    summary it tries, and :func:`choose_layout` of the one drawn."""
    return drawn.derived(f"layout_seconds {junctions!r}", lambda: estimate_layout_seconds(drawn, junctions))


def _page_spacing(drawn: AutogradGraph, options: DrawOptions) -> Optional[bool]:
    """Whether ``drawn`` fits a page at Graphviz's gap between ranks (False), only at
    the closer one (True), or not at all (None)."""
    if len(drawn.nodes) > PAGE_NODES:
        return None
    # Cheapest first, all needed to fit: the length, the time dot takes, then the breadth.
    lengths = _picture_length(drawn, options.direction, options.clusters)
    if min(lengths) * ESTIMATE_SLACK > PAGE_LONG_SIDE:
        return None
    if options.layout != "fixed" and _layout_seconds(drawn, options.junctions) > options.layout_budget:
        return None
    broad = _picture_breadth(drawn, options.direction, options.clusters)
    for compact in (False, True):
        if max(lengths[compact], broad) * ESTIMATE_SLACK <= PAGE_LONG_SIDE:
            return compact
    return None


def _compact(graph: AutogradGraph, options: DrawOptions) -> bool:
    """Whether a graph drawn as it is gets the closer gap between ranks: when it is too
    long for a page at Graphviz's own, or has more boxes than a page holds."""
    drawn = as_drawn(graph, options)
    if len(drawn.nodes) > PAGE_NODES:
        return True
    return max(picture_size(drawn, options.direction, False, options.clusters)) > PAGE_LONG_SIDE


def _why_not(drawn: AutogradGraph, options: DrawOptions) -> str:
    if len(drawn.nodes) <= PAGE_NODES and options.layout != "fixed":
        seconds = _layout_seconds(drawn, options.junctions)
        if seconds > options.layout_budget:
            return f"Graphviz dot would take about {seconds:,.0f} s to lay it out (budget {options.layout_budget:g} s)"
    return "too big for a page"


def _summary_note(
    whole: AutogradGraph, folded: AutogradGraph, summary: AutogradGraph, level: int, reason: str, *, fits: bool
) -> str:
    size = f"This graph of {len(whole.nodes):,} nodes"
    if len(folded.nodes) < len(whole.nodes):
        size += f" ({len(folded.nodes):,} with repeated blocks drawn once)"
    reason = "is " + reason if reason.startswith("too") else f"is not drawn whole: {reason}"
    drawn = f"drawn with each module at depth {level} as one box ({len(summary.nodes):,} nodes)"
    if not fits:
        drawn += ", which does not fit a page either"
    return (
        f"{size} {reason}; {drawn}. depth='full' (--depth full) draws every node, depth=N another "
        "level; explore() (-o model.html) browses all of it."
    )

# --- how big dot's picture would be ----------------------------------------------------


def flow_pairs(graph: AutogradGraph) -> List[Tuple[int, int]]:
    """The edges of ``graph`` as ``(upper, lower)`` node indices, data flowing down: inputs
    above their consumers, a saved tensor (whose edge points from the op to it) turned
    around; edges to unknown ids and loops left out."""
    index = {n.id: i for i, n in enumerate(graph.nodes)}
    pairs = []
    for edge in graph.edges:
        upper, lower = index.get(edge.source), index.get(edge.target)
        if upper is None or lower is None or upper == lower:
            continue
        if edge.kind == SAVED_BY:
            upper, lower = lower, upper
        pairs.append((upper, lower))
    return pairs


def picture_size(
    graph: AutogradGraph, direction: str = "TB", compact: bool = False, clusters: bool = True
) -> Tuple[float, float]:
    """A guess of ``(width, height)`` in points of the picture ``dot`` draws of ``graph`` (as drawn).

    Across the ranks it adds, rank by rank, the tallest box of each rank, the gap
    between ranks (``ranksep``, closer when ``compact``) and ``BOX_EDGE`` for each
    module box that begins or ends on a rank (the most of any one node there). Along
    the ranks it takes the widest rank: its boxes, and a gap for each box and each
    edge passing through, each module box as broad as its own widest rank beside the
    other boxes on its ranks. The ranks along are those ``dot`` settles on, with the
    invisible edges that stack module boxes (:func:`_settled_ranks`): parallel
    branches level with each other, not each as low as it can go. An edge that
    closes a cycle is left out, as ``dot`` turns it around.

    >>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, Node, Edge, OUTPUT
    >>> g = AutogradGraph((Node("n0", OUTPUT, "y"), Node("n1", "op", "ExpBackward0")), (Edge("n1", "n0"),))
    >>> width, height = picture_size(g)
    >>> round(height), round(picture_size(g, compact=True)[1]) < round(height)
    (112, True)
    """
    return _picture_sizes(graph, direction, clusters)[1 if compact else 0]


def _picture_sizes(graph: AutogradGraph, direction: str, clusters: bool) -> Tuple[Tuple[float, float], Tuple[float, float]]:
    """:func:`picture_size` at Graphviz's gap between ranks and at the closer one, from
    one count of ranks and boxes: :func:`fit_to_page` asks for both."""
    broad = _picture_breadth(graph, direction, clusters)
    spaced, compact = _picture_length(graph, direction, clusters)
    if direction in ("LR", "RL"):
        return (spaced, broad), (compact, broad)
    return (broad, spaced), (broad, compact)


def _picture_length(graph: AutogradGraph, direction: str, clusters: bool) -> Tuple[float, float]:
    """How long the picture of ``graph`` is across its ranks, at Graphviz's gap between ranks
    and at the closer one; once per graph. The page fit reads it first: a summary too long
    for a page is ruled out before its breadth is worked out."""

    def make() -> Tuple[float, float]:
        across = direction in ("LR", "RL")
        _, _, rank = _ranks_with_rows(graph, across)
        count = max(rank, default=-1) + 1
        length = [0.0] * count  # the longest box of each rank, across the ranks
        for i, (width, height) in enumerate(_node_sizes(graph)):
            length[rank[i]] = max(length[rank[i]], width if across else height)
        tree = ModuleTree.of(graph.modules) if clusters and graph.modules else None
        edges = _box_edges(graph.nodes, rank, count, tree)
        longest, gaps = sum(length), max(count - 1, 0)
        return (longest + RANKSEP * 72 * gaps + BOX_EDGE * edges + MARGIN,
                longest + COMPACT_RANKSEP * 72 * gaps + BOX_EDGE * edges + MARGIN)

    return graph.derived(f"picture_length {direction} {clusters!r}", make)


def _picture_breadth(graph: AutogradGraph, direction: str, clusters: bool) -> float:
    """How broad the picture of ``graph`` is along its ranks (see :func:`picture_size`); once per graph."""

    def make() -> float:
        nodes = graph.nodes
        across = direction in ("LR", "RL")
        gap = NODESEP * 72
        sizes = _node_sizes(graph)
        _, pairs, rank = _ranks_with_rows(graph, across)
        tree = ModuleTree.of(graph.modules) if clusters and graph.modules else None
        stacked = tree is not None and len(nodes) <= ROWS_UP_TO
        if stacked:
            pairs, rank = _with_stacking(graph, pairs)
        breadth = [0.0] * (max(rank, default=-1) + 1)  # the boxes of each rank side by side
        for i, (width, height) in enumerate(sizes):
            breadth[rank[i]] += (height if across else width) + gap
        for upper, lower in pairs:
            for r in range(rank[lower] + 1, rank[upper]):
                breadth[r] += gap
        broad = max(breadth, default=0.0)
        if stacked:
            assert tree is not None
            fed = [False] * len(nodes)
            for _, lower in pairs:
                fed[lower] = True
            broad = max(broad, _boxes_breadth(nodes, rank, [s[1] if across else s[0] for s in sizes], fed, tree))
        return broad + MARGIN

    return graph.derived(f"picture_breadth {direction} {clusters!r}", make)


def _with_stacking(graph: AutogradGraph, pairs: List[Tuple[int, int]]) -> Tuple[List[Tuple[int, int]], List[int]]:
    """``pairs`` with the invisible edges that stack module boxes (as the DOT writer gives
    them to ``dot``, see :func:`~graphviz_autograd.views.stacking.stacking_edges`), and the
    ranks ``dot`` settles all of them on (:func:`_settled_ranks`).

    The edges hold a box's parameters below the box before it where a sibling box feeds it,
    and only there: the parameters of a box fed by an op of the box around it (a layer norm
    of the queries, after a view of the attention's own) sit on the last rank of the sibling
    box above, and ``dot`` sets the two boxes side by side.
    """
    drawn = len(pairs)
    pairs = pairs + graph_stacking_edges(graph)
    count = len(graph.nodes)
    return pairs, _settled_ranks(count, pairs, longest_path_ranks(count, pairs), drawn)


def _settled_ranks(count: int, pairs: List[Tuple[int, int]], rank: List[int], drawn: int) -> List[int]:
    """The ranks ``dot`` settles the nodes of ``pairs`` on, from ``rank`` (each node as low as
    the edges let it, :func:`~graphviz_autograd.views.stacking.longest_path_ranks`). The
    first ``drawn`` pairs are drawn edges (weight 1), the rest invisible ones that only keep
    their ends apart (weight 0).

    ``dot`` ranks by network simplex: it starts from each node as high as its inputs let it
    and moves a node only where that shortens its edges. A node with at least as many drawn
    inputs as consumers gains nothing by going down and stays right under its lowest input:
    a branch from a fork to a join (the values of an attention, one op after another) is
    drawn level with the branches beside it (its queries and keys), not low beside their
    last ops. What hangs above one consumer alone (a parameter, its AccumulateGrad and its
    transpose) and a node with more consumers than inputs sit as low as they can, right above
    their highest consumer. Two passes: top down, each node of the first kind rises (what
    hangs above it rising along, as far as the invisible edges into that allow); then bottom
    up, each of the second kind sinks.

    >>> # 3 forks into 2 -> 1 -> 0 and 4 -> 0: 4 rises from beside 1 to beside 2
    >>> _settled_ranks(5, [(3, 2), (2, 1), (1, 0), (3, 4), (4, 0)], [0, 1, 2, 3, 1], 5)
    [0, 1, 2, 3, 2]
    """
    uppers: List[List[int]] = [[] for _ in range(count)]
    lowers: List[List[int]] = [[] for _ in range(count)]
    drawn_uppers: List[List[int]] = [[] for _ in range(count)]
    consumers = [0] * count
    for k, (upper, lower) in enumerate(pairs):
        uppers[lower].append(upper)
        lowers[upper].append(lower)
        if k < drawn:
            drawn_uppers[lower].append(upper)
            consumers[upper] += 1
    top_down = sorted(range(count), key=rank.__getitem__, reverse=True)
    hangs = [False] * count  # all above it reaches the rest of the graph through its one consumer
    for i in top_down:
        hangs[i] = consumers[i] == 1 and all(hangs[u] for u in drawn_uppers[i])
    rank = list(rank)
    highest = [math.inf] * count  # the highest rank a hanging node may take, by the invisible edges into it
    for i in top_down:
        below = min((highest[u] - 1 if hangs[u] else rank[u] - 1 for u in uppers[i]), default=math.inf)
        if hangs[i]:
            highest[i] = below
        elif drawn_uppers[i] and len(drawn_uppers[i]) >= consumers[i] and below < math.inf:
            rank[i] = max(rank[i], int(below))
    for i in reversed(top_down):
        if lowers[i] and (hangs[i] or consumers[i] > len(drawn_uppers[i])):
            rank[i] = max(rank[lower] for lower in lowers[i]) + 1
    lowest = min(rank, default=0)
    return [r - lowest for r in rank] if lowest else rank


def _boxes_breadth(
    nodes: Tuple[Node, ...], rank: List[int], broad: List[float], fed: List[bool], tree: ModuleTree
) -> float:
    """The breadth of a clustered drawing: ``dot`` sets each module box as one block, as broad
    as its widest rank (its own boxes and the boxes of the modules in it that reach that rank),
    beside the other boxes of its rank, never overlapping them. Worked out from the innermost
    box outward, each box a map of rank -> breadth taken there."""
    gap = NODESEP * 72
    taken: Dict[str, Dict[int, float]] = {}
    # A box spans the ranks of the nodes in it that have an input (an invisible edge of
    # stacking_edges counts: it holds a parameter below the box before); a parameter or input
    # free of one sits above its first op.
    own: Dict[str, List[int]] = {}
    for i, (node, r) in enumerate(zip(nodes, rank)):
        if fed[i]:
            for path in tree.chain(tree.listed(node.module)):
                own.setdefault(path, []).append(r)
    for i, (node, r, b) in enumerate(zip(nodes, rank, broad)):
        path = tree.listed(node.module)
        if not fed[i] and own.get(path):
            r = min(r, max(own[path]) + 1)
        row = taken.setdefault(path, {})
        row[r] = row.get(r, 0.0) + b + gap
    paths = sorted({p for path in taken for p in [*tree.chain(path), ""]}, key=lambda p: (-(p.count(".") + 1) if p else 0))
    for path in paths:
        row = taken.get(path, {})
        if not row:
            continue
        low, high = (min(own[path]), max(own[path])) if own.get(path) else (min(row), max(row))
        width = max(row.values()) + (2 * CLUSTER_MARGIN if path else 0.0)
        if not path:
            return width
        outer = taken.setdefault(tree.parent(path), {})
        for r in range(low, high + 1):
            outer[r] = outer.get(r, 0.0) + width + gap
    return max(taken.get("", {0: 0.0}).values(), default=0.0)


def _node_sizes(graph: AutogradGraph) -> List[Tuple[float, float]]:
    """:func:`node_size` of each node of ``graph``, once per graph."""
    return graph.derived("node_sizes", lambda: [node_size(node) for node in graph.nodes])


def _ranks_with_rows(graph: AutogradGraph, across: bool) -> Tuple[int, List[Tuple[int, int]], List[int]]:
    """How many of the edges of ``graph`` (as drawn) are its own, those edges (less any that
    close a cycle) with the edges of its rows of rows after them, and the ranks of all of
    them (:func:`_ranked_with_rows`); once per graph: the estimate and the DOT writer's
    :func:`row_of_rows` both read them."""

    def make() -> Tuple[int, List[Tuple[int, int]], List[int]]:
        count = len(graph.nodes)
        pairs = _without_cycles(count, flow_pairs(graph))
        with_rows, rank = _ranked_with_rows(count, pairs, _node_sizes(graph), across)
        return len(pairs), with_rows, rank

    return graph.derived(f"ranks_with_rows {across!r}", make)


def _ranked_with_rows(
    count: int, pairs: List[Tuple[int, int]], sizes: List[Tuple[float, float]], across: bool
) -> Tuple[List[Tuple[int, int]], List[int]]:
    """``pairs`` with the edges that lay a long row of sources as a row of rows (see
    :func:`~graphviz_autograd.views.stacking.row_edges`), and the ranks of all of them."""
    rank = longest_path_ranks(count, pairs)
    if count > ROWS_UP_TO:
        return pairs, rank
    fed = [False] * count
    for _, lower in pairs:
        fed[lower] = True
    gap = NODESEP * 72
    breadths = [(height if across else width) + gap for width, height in sizes]
    extra = row_edges(rank, fed, breadths)
    if not extra:
        return pairs, rank
    pairs = pairs + extra
    return pairs, longest_path_ranks(count, pairs)


# The fewest points a box takes along its rank (the least height of a box, a flat one in a
# drawing from left to right, and its gap).
_LEAST_BREADTH = 14.4 + NODESEP * 72


def rows_possible(count: int) -> bool:
    """Whether a drawing of ``count`` nodes can hold a row long enough to be laid as a row
    of rows: fewer nodes than fill a row at their smallest never do, and the DOT writer
    then need not read a node."""
    return count * _LEAST_BREADTH > ROW_POINTS and count <= ROWS_UP_TO


def row_of_rows(graph: AutogradGraph, direction: str = "TB") -> List[Tuple[int, int]]:
    """The invisible ``(upper, lower)`` edges, by node index, that a drawing of ``graph`` (as
    drawn) adds to lay each long row of sources as a row of rows; the estimate counts them."""
    if len(graph.nodes) > ROWS_UP_TO:
        return []
    own, with_rows, _ = _ranks_with_rows(graph, direction in ("LR", "RL"))
    return with_rows[own:]


def _box_edges(nodes: Tuple[Node, ...], rank: List[int], count: int, tree: Optional[ModuleTree]) -> int:
    """How many tops and feet of module boxes (those of ``tree``; none without one) the
    ranks hold: per rank, the most that begin or end at any one node of it (boxes
    nest, so their edges stack).

    Worked out per (rank, module) pair rather than per node: a node's chain of boxes
    depends on its module alone, and the nodes of one module on one rank count alike
    (a block of 100 ops has a few dozen such pairs).
    """
    if tree is None:
        return 0
    at = {(rank[i], node.module) for i, node in enumerate(nodes)}
    chains: dict[str, list[str]] = {}  # module path -> the boxes around its nodes, innermost first
    top: dict = {}
    foot: dict = {}
    for r, module in at:
        chain = chains.get(module)
        if chain is None:
            chain = chains[module] = tree.chain(module)
        for path in chain:
            top[path] = max(top.get(path, -1), r)
            foot[path] = min(foot.get(path, count), r)
    opening = [0] * count
    closing = [0] * count
    for r, module in at:
        chain = chains[module]
        if chain:
            opening[r] = max(opening[r], sum(1 for path in chain if top[path] == r))
            closing[r] = max(closing[r], sum(1 for path in chain if foot[path] == r))
    return sum(opening) + sum(closing)


def _without_cycles(count: int, pairs: List[Tuple[int, int]]) -> List[Tuple[int, int]]:
    """``pairs`` less the edges a depth-first search finds closing a cycle (none in a
    walked graph; folding blocks whose residual add sits outside them can make one)."""
    below: List[List[Tuple[int, int]]] = [[] for _ in range(count)]
    for k, (upper, lower) in enumerate(pairs):
        below[upper].append((lower, k))
    state = [0] * count  # 0 not seen, 1 on the current path, 2 done
    closing = set()
    for start in range(count):
        if state[start]:
            continue
        state[start] = 1
        stack = [(start, iter(below[start]))]
        while stack:
            node, rest = stack[-1]
            for lower, k in rest:
                if state[lower] == 1:
                    closing.add(k)
                elif state[lower] == 0:
                    state[lower] = 1
                    stack.append((lower, iter(below[lower])))
                    break
            else:
                state[node] = 2
                stack.pop()
    return [pair for k, pair in enumerate(pairs) if k not in closing] if closing else pairs


def node_size(node: Node) -> Tuple[float, float]:
    """(width, height) in points, from the lines its label will have."""
    lines = _label_lines(node)
    chars = max((len(line) for line in lines), default=0)
    width = max(chars * CHAR_WIDTH + NODE_PADDING, 54.0)
    height = max(len(lines) * LINE_HEIGHT + 6.0, 14.4)
    return width, height


def _label_lines(node: Node) -> List[str]:
    if node.kind == NO_GRAD:
        return ["no grad"]
    if node.kind == MODULE:
        return [node.label, *module_label_lines(node)]
    lines = node.label.split("\n") if node.label else []
    if node.kind in (OP, ACCUMULATE_GRAD):
        return lines + [f"{k}: {v}" for k, v in saved_attrs(node)]
    if node.shape is not None or node.kind != SAVED:
        lines.append(shape_text(node.shape or ()))
    return lines


# --- dot or the fixed layout -----------------------------------------------------------


def choose_layout(
    graph: AutogradGraph, layout: str = "auto", budget: float = DEFAULT_LAYOUT_BUDGET, junctions: bool = True
) -> Tuple[str, str]:
    """How to lay out ``graph`` (as drawn, with junctions unless ``junctions`` is False):
    ``("dot" or "fixed", note)``.

    The one place that decides. ``layout="dot"`` and ``"fixed"`` are taken as
    asked; ``"auto"`` picks ``dot`` unless :func:`estimate_layout_seconds` is over
    ``budget`` seconds, and then the fixed layered layout, with a one-line
    ``note`` saying so (empty otherwise) for the caller to show.

    >>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, Node
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
    estimate = _layout_seconds(graph, junctions)
    if estimate <= budget:
        return "dot", ""
    return "fixed", (
        f"Graphviz dot would take about {estimate:,.0f} s to lay out this graph of {len(graph.nodes):,} nodes "
        f"(budget {budget:g} s); drawing it with the fixed layered layout instead (layout='dot' to wait for dot)."
    )
