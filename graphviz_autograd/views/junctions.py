"""Junctions: an output read by many ops far below drawn as one trunk with branches.

Graphviz ``dot`` puts a virtual node on every rank an edge crosses, and orders
and places those as it does real nodes. Where one op's output is read by many
ops far below it (each feature map of a DenseNet block is concatenated again
in every later layer; a mask is read by every layer of a transformer), the
reads are many long edges side by side: DenseNet-121's 1,282 nodes get 26,852
virtual ones, and ``dot`` spends seconds to minutes on them.

Drawn through junctions, such an output runs down one trunk instead: a chain of
small points, one just above each rank where ops read it, with a short branch
from each point to each op that reads it there. Every read is still drawn, as
the path ``source -> junction -> ... -> junction -> op``, with its arrowhead at
the op alone (see ``style.JOIN_OF`` and ``style.TRUNK_OF``). ``dot`` then sees one
long line per output instead of one per read. Outputs read by the same ops
from some point down share the rest of their trunks (see :func:`plan_junctions`):
a DenseNet block is drawn with one bus that each feature map joins and each
concatenation reads, as the paper draws it.

A source gets a trunk for the reads of one kind (data, or no gradient) when at
least :data:`MIN_LONG_READS` of them are long, crossing a rank on their way;
reads on the rank right below stay direct edges, as do all the reads of an
output read fewer times. Ranks are counted as :func:`graphviz_autograd.drawing.layout.rank_widths`
counts them: the longest path down to a node that feeds nothing.

Plain computation on edges by node index (``Columns.links``); the DOT writer
(:mod:`graphviz_autograd.drawing.dot_writer`) names and draws the junctions.

>>> from graphviz_autograd.graph.autograd_graph import DATA
>>> # node 0 is read by ops 2, 4, 6 and 8, each at the end of a chain from the one before
>>> links = [(i, i + 1, (DATA, None, None)) for i in range(8)] + [(0, i, (DATA, None, None)) for i in (2, 4, 6, 8)]
>>> found = plan_junctions(9, links)
>>> [(j.sources, j.reads, j.further) for j in found.junctions]
[((0,), (2,), 3), ((0,), (4,), 2), ((0,), (6,), 1), ((0,), (8,), 0)]
>>> found.links[8:13]  # 0 joins its trunk 9 -> 10 -> 11 -> 12 where its first read was, then a branch
[(0, 9, ('data_join', None, None)), (9, 10, ('data_trunk', None, None)), (10, 11, ('data_trunk', None, None)), (11, 12, ('data_trunk', None, None)), (9, 2, ('data', None, None))]
"""

from __future__ import annotations

from collections import Counter
from operator import itemgetter
from itertools import compress
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from .stacking import link_ranks
from ..graph.autograd_graph import AutogradGraph
from ..graph.style import JOIN_OF, TRUNK_OF

# Long reads of one output (of one edge kind) from which they go through junctions.
# Four: an output read two or three times is drawn as it always was, as in every
# drawing of the project's golden files; DenseNet's feature maps are read up to 24 times.
MIN_LONG_READS = 4
# Past this many nodes ``dot`` needs over an hour on any graph, long edges or not
# (``layout.estimate_layout_seconds``): junctions cannot bring it within reach, and
# looking for them would only slow the writing of a big graph's DOT.
MAX_NODES = 250_000


class Junction(NamedTuple):
    """A point on a trunk where ``reads`` (node indices of the ops fed here) branch off.

    ``sources`` are the nodes whose outputs run through it, ``owner`` the first of
    them, whose id names it, and ``number`` counts the junctions named after the
    owner from the top. ``kind`` is the edge kind of the reads (data, or no
    gradient); ``further`` is how many reads branch off below this junction.
    """

    owner: int
    number: int
    kind: str
    sources: Tuple[int, ...]
    reads: Tuple[int, ...]
    further: int


class Rerouted(NamedTuple):
    """Edges drawn through junctions: junction ``k`` is node ``node_count + k``.

    ``links`` holds every edge as ``Columns.links`` does, in order: a read that
    goes through a junction becomes its branch (from the junction, with the
    read's own kind, shape and dtype), and the edges of a trunk (the output
    joining it, ``style.JOIN_OF``, and from junction to junction, ``style.TRUNK_OF``)
    come just before its first branch. When all the reads through a trunk carry
    tensors of one shape and dtype, the joining edge carries them and the
    branches none, so a drawing with shapes writes the shape once; otherwise
    each branch keeps its own.
    """

    node_count: int
    junctions: List[Junction]
    links: List[tuple]


def plan_junctions(
    count: int, links: Sequence[tuple], min_long_reads: int = MIN_LONG_READS, reads: Optional[Mapping[int, int]] = None
) -> Optional[Rerouted]:
    """The junctions that carry long reads of one output, for a graph of ``count`` nodes
    with edges ``links`` (``(source, target, (kind, shape, dtype))`` by node index); None
    when no output is read ``min_long_reads`` times far enough below it.

    Trunks share their ends: where the outputs of several nodes are read by the
    same ops, in the same ranks, all the way down (every later layer of a
    DenseNet block reads every earlier feature map), their trunks join and run
    on as one, a bus. A junction is shared only so: each output that runs
    through it is read by every op that branches off it or below it, so every
    path drawn is a read, and every read is drawn.

    Linear in the edges, but for sorting the reads of the outputs that get a trunk.
    ``reads``, the edges leaving each node when the caller has counted them
    (:meth:`~graphviz_autograd.graph.autograd_graph.AutogradGraph.source_reads`), spares a count.
    """
    if not links or count > MAX_NODES:
        return None
    # A read is long when its op sits two ranks or more below the output; the op of the
    # output's longest way down sits one below, so at least one of its edges is not a long
    # read: an output needs min_long_reads + 1 edges for a trunk. (A transformer layer's
    # normalised input, read by q, k, v and the residual, has four, and costs no ranking.)
    needed = min_long_reads + 1
    sources = None
    if reads is None:
        # Most graphs have no output read that often. Each output read n times is n - 1
        # edges more than the outputs read: a set tells, in half the time of a count.
        sources = list(map(itemgetter(0), links))
        if len(sources) - len(set(sources)) < needed - 1:
            return None
        reads = Counter(sources)
    read_counts = reads
    if not read_counts or max(read_counts.values()) < needed:
        return None
    if sources is None:
        sources = list(map(itemgetter(0), links))
    candidates = {source for source, reads in read_counts.items() if reads >= needed}
    rank = link_ranks(count, links)
    planner = _Planner(count, links, rank)
    # Only the edges of the outputs looked at are read one by one, found in C-level passes.
    for (source, kind), positions in _long_reads(links, rank, _reads_of(sources, candidates)).items():
        if len(positions) >= min_long_reads:
            planner.add_trunk(source, kind, positions, new_junctions=True)
    if not planner.made:
        return None
    # An output read fewer times joins a bus that already runs past all its readers:
    # one more line into it, no more points. Only an output that feeds some op reading
    # a junction can, and only when every op its long reads of a kind go to reads a
    # junction of that kind; the others, most outputs of a graph, are not looked at.
    readers: Dict[str, set] = {}
    for junction in planner.made:
        readers.setdefault(junction[2], set()).update(map(itemgetter(0), junction[4]))
    any_reader = set().union(*readers.values())
    feeding = set(compress(sources, map(any_reader.__contains__, map(itemgetter(1), links)))) - planner.trunked
    for (source, kind), positions in _long_reads(links, rank, _reads_of(sources, feeding)).items():
        if all(links[p][1] in readers.get(kind, ()) for p in positions):
            planner.add_trunk(source, kind, positions, new_junctions=False)
    return planner.rerouted()


def graph_junctions(graph: AutogradGraph) -> Optional[Rerouted]:
    """:func:`plan_junctions` of ``graph``'s own nodes and links, planned once per graph:
    a drawing asks it twice of the graph it draws (the layout estimate, then the DOT
    writer)."""

    def plan() -> Optional[Rerouted]:
        if graph.repeated_reads() < MIN_LONG_READS:  # no output is read MIN_LONG_READS + 1 times
            return None
        ids, contents, links = graph.columns(fill_ids=False)
        # An edge to an id that names no node gets a node of its own, after the nodes.
        return plan_junctions(len(contents) if ids is None else len(ids), links, reads=graph.source_reads())

    return graph.derived("junctions", plan)


def _reads_of(sources: List[int], wanted: set) -> List[int]:
    """Positions of the edges whose source (``sources``, by position) is in ``wanted``, in order."""
    return list(compress(range(len(sources)), map(wanted.__contains__, sources)))


def _long_reads(links: Sequence[tuple], rank: List[int], positions: List[int]) -> Dict[Tuple[int, str], List[int]]:
    """(source, kind) -> those of ``positions`` in ``links`` that are long reads, by kinds that
    can have a trunk: reads that cross a rank on their way. In the order of ``positions``."""
    found: Dict[Tuple[int, str], List[int]] = {}
    for position in positions:
        source, target, rest = links[position]
        if rest[0] in TRUNK_OF and rank[source] - rank[target] >= 2:
            key = (source, rest[0])
            known = found.get(key)
            if known is None:
                found[key] = [position]
            else:
                known.append(position)
    return found


class _Planner:
    """Junctions made so far, and the edges that replace the reads through them."""

    def __init__(self, count: int, links: Sequence[tuple], rank: List[int]):
        self.count, self.links, self.rank = count, links, rank
        # Each junction as [owner, number, kind, sources, branches, next junction or None].
        self.made: List[list] = []
        self.known: Dict[tuple, int] = {}  # (kind, branches, next junction) -> the junction
        self.trunk_at: Dict[int, List[tuple]] = {}  # position of a trunk's first read -> the edges written there
        self.branch_at: Dict[int, tuple] = {}  # position of a read through a new junction -> its branch
        self.through: set = set()  # positions of the reads drawn through junctions
        self.trunked: set = set()  # sources with a trunk
        self.numbers: Counter = Counter()  # owner -> junctions named after it so far

    def add_trunk(self, source: int, kind: str, positions: List[int], new_junctions: bool) -> None:
        """Draw the reads at ``positions`` (of ``source``'s output, of edge ``kind``) through
        junctions: shared ones from the bottom up as far as they go, new ones above them
        (when ``new_junctions``; otherwise only when none is needed)."""
        links, made, count, rank = self.links, self.made, self.count, self.rank
        reads = [links[position] for position in positions]
        shared_rest = _shared_rest([read[2] for read in reads])
        plain = (kind, None, None)
        # The reads by the rank of the op reading (a band), in edge order within a rank,
        # each as (position, branch). A branch: (target, rest); a trunk's reads of one
        # shape write it once, on the trunk.
        by_rank: Dict[int, List[tuple]] = {}
        for position, (_, target, rest) in zip(positions, reads):
            read = (position, (target, plain if shared_rest is not None else rest))
            same_rank = by_rank.get(rank[target])
            if same_rank is None:
                by_rank[rank[target]] = [read]
            else:
                same_rank.append(read)
        bands = [by_rank[band_rank] for band_rank in sorted(by_rank, reverse=True)]  # top first
        # Sorted by reader alone: rests need not compare (a shape may be None in one, a tuple in another).
        branches = [
            (reads_here[0][1],) if len(reads_here) == 1 else tuple(sorted(map(itemgetter(1), reads_here), key=itemgetter(0)))
            for reads_here in bands
        ]
        below: Optional[int] = None
        first_new = len(bands)
        shareable = _hashable(tuple(branches))
        while shareable and first_new > 0:
            found = self.known.get((kind, branches[first_new - 1], below))
            if found is None:
                break
            first_new -= 1
            below = found
        if first_new and not new_junctions:
            return
        trunk = TRUNK_OF[kind]
        top = len(made)  # the first new junction, if any; numbered from the top
        for band in range(first_new):
            after = top + band + 1 if band + 1 < first_new else below
            made.append([source, self.numbers[source], kind, [], branches[band], after])
            self.numbers[source] += 1
            if shareable:
                self.known[(kind, branches[band], after)] = top + band
            for position, (target, rest) in bands[band]:
                self.branch_at[position] = (count + top + band, target, rest)
        first = top if first_new else below
        assert first is not None  # a trunk has a band
        # The output joins at its first junction; a shape shared by all its reads rides there.
        join = JOIN_OF[kind]
        edges = [(source, count + first, (join, *shared_rest[1:]) if shared_rest is not None else (join, None, None))]
        for index in range(top, top + first_new):  # each new junction on to the next
            after = made[index][5]
            if after is not None:
                edges.append((count + index, count + after, (trunk, None, None)))
        self.trunk_at[min(positions)] = edges
        self.through.update(positions)
        self.trunked.add(source)
        at: Optional[int] = first
        while at is not None:
            made[at][3].append(source)
            at = made[at][5]

    def rerouted(self) -> Rerouted:
        # The edges between the reads drawn through junctions stay as they are: copied by
        # the slice, not one by one.
        links, trunk_at, branch_at = self.links, self.trunk_at, self.branch_at
        rerouted: List[tuple] = []
        done = 0
        for position in sorted(self.through):  # each trunk's first read among them
            if position > done:
                rerouted.extend(links[done:position])
            trunk = trunk_at.get(position)
            if trunk is not None:
                rerouted.extend(trunk)
            branch = branch_at.get(position)  # a read through a shared junction has its branch already
            if branch is not None:
                rerouted.append(branch)
            done = position + 1
        rerouted.extend(links[done:])
        made = self.made
        further = [0] * len(made)
        for index in _bottom_up(made):
            below = made[index][5]
            further[index] = 0 if below is None else further[below] + len(made[below][4])
        junctions = [
            Junction(owner, number, kind, tuple(sources), tuple(target for target, _ in branches), further[index])
            for index, (owner, number, kind, sources, branches, _) in enumerate(made)
        ]
        return Rerouted(self.count, junctions, rerouted)


def link_routes(rerouted: Rerouted, links: Sequence[tuple]) -> List[Tuple[int, ...]]:
    """For each edge of ``links`` (as given to :func:`plan_junctions`), the positions in
    ``rerouted.links`` of the edges that draw it: its own, or its output's join, the
    trunk down to the junction it branches off at, and its branch. What draws each
    read as one path (the explorer) puts these together.

    >>> from graphviz_autograd.graph.autograd_graph import DATA
    >>> links = [(i, i + 1, (DATA, None, None)) for i in range(8)] + [(0, i, (DATA, None, None)) for i in (2, 4, 6, 8)]
    >>> routes = link_routes(plan_junctions(9, links), links)
    >>> routes[0], routes[9], routes[11]  # 0 -> 1 is drawn as it was; 0 -> 4 and 0 -> 8 run down the trunk
    ((0,), (8, 9, 13), (8, 9, 10, 11, 15))
    """
    count = rerouted.node_count
    kind_of_join = {join: kind for kind, join in JOIN_OF.items()}
    direct: Dict[tuple, List[int]] = {}  # (source, target, kind) -> positions of edges drawn as they were
    join: Dict[tuple, Tuple[int, int]] = {}  # (source, kind) -> (position of its join, the junction it joins)
    below: Dict[int, Tuple[int, int]] = {}  # junction -> (position of the trunk edge on, the next junction)
    branch: Dict[Tuple[int, int], List[int]] = {}  # (junction, target) -> positions of its branches
    for position, (source, target, rest) in enumerate(rerouted.links):
        if source < count and target < count:
            direct.setdefault((source, target, rest[0]), []).append(position)
        elif source < count:
            join[(source, kind_of_join[rest[0]])] = (position, target - count)
        elif target >= count:
            below[source - count] = (position, target - count)
        else:
            branch.setdefault((source - count, target), []).append(position)
    taken: Counter = Counter()
    # An op that reads an output twice has two branches; one branch off a shared trunk
    # (a bus) stands for the reads of every output that runs down it.
    branched: Counter = Counter()
    routes: List[Tuple[int, ...]] = []
    for source, target, rest in links:
        key = (source, target, rest[0])
        drawn = direct.get(key, ())
        if taken[key] < len(drawn):
            routes.append((drawn[taken[key]],))
            taken[key] += 1
            continue
        position, junction = join[(source, rest[0])]
        route = [position]
        while (junction, target) not in branch:
            position, junction = below[junction]
            route.append(position)
        branches = branch[(junction, target)]
        route.append(branches[branched[(junction, target)] % len(branches)])
        branched[(junction, target)] += 1
        routes.append(tuple(route))
    return routes


def _bottom_up(made: List[list]) -> List[int]:
    """Junction indices, each after the junction below it (its next)."""
    order: List[int] = []
    done = [False] * len(made)
    for start in range(len(made)):
        chain = []
        at: Optional[int] = start
        while at is not None and not done[at]:
            chain.append(at)
            at = made[at][5]
        for index in reversed(chain):
            done[index] = True
            order.append(index)
    return order


def _hashable(value: object) -> bool:
    """Whether ``value`` can be a key: a hand-built edge's shape may be a list."""
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _shared_rest(rests: List[tuple]) -> Optional[tuple]:
    """The one ``(kind, shape, dtype)`` all ``rests`` have when it has a shape; None otherwise."""
    first = rests[0]
    if len(first) < 2 or first[1] is None:
        return None
    try:
        return first if len(set(rests)) == 1 else None
    except TypeError:  # a hand-built edge whose shape is a list
        return None
