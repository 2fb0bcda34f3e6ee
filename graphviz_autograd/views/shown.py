"""Graph -> graph: the graph as it is drawn.

Plain computation on an :class:`AutogradGraph`, shared by the DOT writer and the
layouts so that both draw the same nodes: :func:`split_shared_leaves` draws a
parameter used many times once per use, and :func:`shown_graph` leaves out the
kinds of node a drawing hides. :func:`shown_text` is how any text is shown where it
cannot be carried as it is (the DOT writer's escaping and the explorer's names both
use it), and :func:`shown_names` is a graph with its names so. :func:`terminal_text` is
the command line's: the same escapes, and a backslash doubled.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from operator import itemgetter
from typing import Dict, List, Mapping, Optional, Sequence

from ..errors import OptionError
from ..graph.autograd_graph import ACCUMULATE_GRAD, LEAF, NO_GRAD, PARAMETER, SAVED, AutogradGraph, Columns, Node, module_of_call
from ..graph.descriptions import NO_GRAD_LABEL

# A parameter used more often than this is drawn once per use. One weight feeding
# every step of an unrolled loop makes edges that reach down across many ranks, which
# clutter the drawing and slow dot (see estimate_layout_seconds): an LSTM unrolled 8,
# 16 and 30 steps lays out whole in 0.06, 0.25 and 1.4 s (0.07, 1.4 and 28 s before
# style.GRAPH_ATTRS capped dot's network simplex), 30 steps split in 0.12 s (2 cores).
DEFAULT_MAX_USES = 8


def split_shared_leaves(graph: AutogradGraph, max_uses: Optional[int] = DEFAULT_MAX_USES) -> AutogradGraph:
    """``graph`` with each ``AccumulateGrad`` used more than ``max_uses`` times drawn once per use.

    Use ``u`` of ``k`` (counted in edge order) gets its own copy of the
    ``AccumulateGrad`` node, labelled ``(use u of k)``, and of the parameter or
    leaf that feeds it. Use 1 keeps the original ids; the others get
    ``<id>_<u>``, so ids stay the same from run to run. Nothing else changes,
    and a graph with no such node is returned as it is. ``max_uses=None`` turns
    the split off.

    >>> from graphviz_autograd.graph.autograd_graph import AutogradGraph, Node, Edge, OP, ACCUMULATE_GRAD, PARAMETER
    >>> nodes = [Node("n0", OP, "AddBackward0"), Node("n1", ACCUMULATE_GRAD, "AccumulateGrad"),
    ...          Node("n2", PARAMETER, "w", shape=(2,))]
    >>> edges = [Edge("n1", "n0"), Edge("n1", "n0"), Edge("n2", "n1")]
    >>> split = split_shared_leaves(AutogradGraph(tuple(nodes), tuple(edges)), max_uses=1)
    >>> [(n.id, n.label) for n in split.nodes]
    [('n0', 'AddBackward0'), ('n1', 'AccumulateGrad\\n(use 1 of 2)'), ('n1_2', 'AccumulateGrad\\n(use 2 of 2)'), ('n2', 'w'), ('n2_2', 'w')]
    >>> [(e.source, e.target) for e in split.edges]
    [('n1', 'n0'), ('n1_2', 'n0'), ('n2', 'n1'), ('n2_2', 'n1_2')]
    """
    if max_uses is None:
        return graph
    if isinstance(max_uses, bool) or not isinstance(max_uses, int) or max_uses < 1:
        raise OptionError(f"max_uses must be a positive integer or None; got {max_uses!r}.")
    # This runs on every drawn graph, a million-node one included, and most have no
    # node used that often at all: a node used more than max_uses times is max_uses
    # repeated reads, which a walked graph knows without counting. The uses of each
    # node are counted only past that, on the columns, in C-level passes.
    if graph.repeated_reads() < max_uses:
        return graph
    columns = graph.columns(fill_ids=False)
    contents, links = columns.contents, columns.links
    shared = _shared_accumulate_grads(contents, graph.source_reads(), max_uses)  # node index -> its uses
    if not shared:
        return graph

    # Parameters and leaves that feed a shared AccumulateGrad travel with each copy.
    copies_of = dict(shared)  # node index -> how many copies it gets (uses of what it feeds)
    fed: Dict[int, int] = {}  # parameter or leaf -> the shared AccumulateGrad it feeds
    for source, target, _ in links:
        if target in shared and source < len(contents) and contents[source][0] in (PARAMETER, LEAF):
            copies_of[source] = max(copies_of.get(source, 1), shared[target])
            fed.setdefault(source, target)
    modules = _modules_of_uses(contents, links, shared)

    # The result is built as columns too: node i's copies sit one after another
    # from index at[i], and a parameter's copies share its content tuple.
    ids = graph.columns().ids
    assert ids is not None  # columns() fills them in
    new_ids: List[str] = []
    new_contents: List[tuple] = []
    at: List[int] = []
    for i, content in enumerate(contents):
        at.append(len(new_ids))
        count = copies_of.get(i)
        node_id = ids[i]
        if count is None:
            new_ids.append(node_id)
            new_contents.append(content)
            continue
        new_ids.extend(node_id if u == 1 else f"{node_id}_{u}" for u in range(1, count + 1))
        in_modules = modules.get(i if i in shared else fed.get(i, -1))
        if i in shared:
            try:
                new_contents.extend(_kept_use_contents(content, count))
            except TypeError:  # a hand-built node holding a list cannot be a key
                new_contents.extend(_use_contents(content, count))
        else:
            new_contents.extend([content] * count)
        if in_modules is not None:  # each copy in the call of its module that reads it
            copies = new_contents[-count:]
            new_contents[-count:] = [(*copy[:-1], module) for copy, module in zip(copies, in_modules)] + copies[len(in_modules):]
    for i in range(len(contents), len(ids)):  # ids that edges name but no node has
        at.append(len(new_ids))
        new_ids.append(ids[i])

    new_links: List[tuple] = []
    seen_uses: Counter = Counter()
    for source, target, rest in links:
        if source in shared:
            seen_uses[source] += 1
            new_links.append((at[source] + seen_uses[source] - 1, at[target], rest))
        elif target in shared and source in copies_of:
            new_links.extend((at[source] + u, at[target] + u, rest) for u in range(shared[target]))
        else:
            new_links.append((at[source], at[target], rest))
    split = Columns(new_ids, new_contents, new_links)
    return AutogradGraph.from_columns(split, graph.params_given, graph.modules)


def _shared_accumulate_grads(contents: Sequence[tuple], uses: Mapping[int, int], max_uses: int) -> Dict[int, int]:
    """{node index: uses} of each AccumulateGrad node that feeds more than ``max_uses`` edges
    (``uses``: edges leaving each node)."""
    if not uses or max(uses.values()) <= max_uses:
        return {}
    return {
        i: count
        for i, count in uses.items()
        if count > max_uses and 0 <= i < len(contents) and contents[i][0] == ACCUMULATE_GRAD
    }


def _modules_of_uses(contents: Sequence[tuple], links: Sequence[tuple], shared: Mapping[int, int]) -> Dict[int, List[str]]:
    """For each shared AccumulateGrad read by later calls of its parameter's module (a
    recorded cell run at every step of a loop), the module of the op reading each use:
    the copy for that use is drawn in that call. Others are left where they are."""
    readers: Dict[int, List[str]] = {}
    for source, target, _ in links:
        if source in shared:
            readers.setdefault(source, []).append(contents[target][-1] if target < len(contents) else "")
    moved = {}
    for node, modules in readers.items():
        owner = contents[node][-1]
        if any(module != owner and module_of_call(module) == owner for module in modules):
            moved[node] = [module if module_of_call(module) == owner else owner for module in modules]
    return moved


def _use_contents(content: tuple, uses: int) -> tuple[tuple, ...]:
    """The contents of the ``uses`` copies of a shared AccumulateGrad node of ``content``."""
    kind, label, *rest = content
    return tuple((kind, _use_label(label, u, uses), *rest) for u in range(1, uses + 1))


# Kept, so that a model drawn again gets the very same copies, whose text the DOT writer
# then finds at once (the LSTM of the benchmarks draws 1.09x faster).
_kept_use_contents = functools.lru_cache(maxsize=256)(_use_contents)


def _use_label(label: str, use: int, uses: int) -> str:
    return f"{label}\n(use {use} of {uses})"


def merge_alike_inputs(graph: AutogradGraph, at_least: int = DEFAULT_MAX_USES) -> AutogradGraph:
    """``graph`` with each set of more than ``at_least`` alike inputs without gradient that
    feed one node and nothing else drawn as one, titled with the count ("int64 from
    argmax() ×500"): a decoding loop of 500 steps that reads its own ``argmax`` drew 500
    such inputs in one row, 60,000 points wide. Alike: the same label, note and module.

    >>> from graphviz_autograd.graph.autograd_graph import Edge, Node
    >>> nodes = (Node("n0", "op", "CatBackward0"), *(Node(f"n{i}", NO_GRAD, "mask") for i in range(1, 11)))
    >>> merged = merge_alike_inputs(AutogradGraph(nodes, tuple(Edge(f"n{i}", "n0") for i in range(1, 11))))
    >>> [n.label for n in merged.nodes], len(merged.edges)
    (['CatBackward0', 'mask ×10'], 1)
    """
    # From the columns: a graph of too few inputs without gradient is left as it is
    # without building its nodes (a walked graph of a million has none).
    if sum(1 for content in graph.columns(fill_ids=False).contents if content[0] == NO_GRAD) <= at_least:
        return graph
    fed = {e.target for e in graph.edges}
    reads: Dict[str, set] = {}
    for edge in graph.edges:
        reads.setdefault(edge.source, set()).add(edge.target)
    groups: Dict[tuple, List[Node]] = {}
    for node in graph.nodes:
        targets = reads.get(node.id, ())
        if node.kind == NO_GRAD and node.id not in fed and len(targets) == 1:
            groups.setdefault((next(iter(targets)), node.label, node.note, node.module), []).append(node)
    gone: set = set()
    renamed: Dict[str, Node] = {}
    for members in groups.values():
        if len(members) > at_least:
            first = members[0]
            renamed[first.id] = first._replace(label=f"{first.label or NO_GRAD_LABEL} ×{len(members)}")
            gone.update(n.id for n in members[1:])
    if not gone:
        return graph
    nodes = tuple(renamed.get(n.id, n) for n in graph.nodes if n.id not in gone)
    edges = tuple(e for e in graph.edges if e.source not in gone)
    return AutogradGraph(nodes, edges, graph.params_given, graph.modules)


def shown_graph(graph: AutogradGraph, show_no_grad: bool = True, show_saved: bool = False) -> AutogradGraph:
    """``graph`` less the nodes the DOT leaves out and their edges (``graph`` itself when none is)."""
    hidden: set[str] = set()
    # The kinds present, in one C-level pass over the columns: most graphs have no
    # saved tensors to hide, and then nothing is scanned node by node.
    kinds = set(map(itemgetter(0), graph.columns(fill_ids=False).contents))
    if not show_no_grad and NO_GRAD in kinds:
        hidden.update(n.id for n in graph.nodes if n.kind == NO_GRAD)
    if not show_saved and SAVED in kinds:
        hidden.update(n.id for n in graph.nodes if n.kind == SAVED)
    if not hidden:  # filtering costs a set look-up per node and edge: only when needed
        return graph
    nodes = tuple(n for n in graph.nodes if n.id not in hidden)
    edges = tuple(e for e in graph.edges if e.source not in hidden and e.target not in hidden)
    return AutogradGraph(nodes, edges, graph.params_given, graph.modules)


# Characters shown as an escape instead of written raw: control characters (C0 and C1),
# and those XML (so SVG) and UTF-8 cannot hold: lone surrogates, U+FFFE and U+FFFF.
# Tabs and line breaks are kept in text of many lines, escaped in a one-line name.
_UNSHOWABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
_UNSHOWABLE_IN_A_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
# On a page and in a terminal the backslash too: it begins every escape, so a text's own is
# written as two and no two texts look alike.
_UNSHOWABLE_ON_A_PAGE = re.compile(r"[\\\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
_UNSHOWABLE_ON_A_PAGE_LINE = re.compile(r"[\\\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def drawn_text(text: str, one_line: bool = True) -> str:
    """``text`` as a static drawing writes it before DOT's own quoting: control characters
    as ``\\xNN``, lone surrogates (which UTF-8 cannot encode), U+FFFE and U+FFFF as
    ``\\uNNNN``; a backslash of the text stays one (DOT's quoting doubles it). With
    ``one_line``, tabs and line breaks too.

    >>> print(drawn_text("a\\x00b\\ud800c\\n"), drawn_text("x\\ny", one_line=False) == "x\\ny")
    a\\x00b\\ud800c\\x0a True
    """
    unshowable = _UNSHOWABLE_IN_A_LINE if one_line else _UNSHOWABLE
    if unshowable.search(text) is None:
        return text
    return unshowable.sub(_shown_code, text)


def shown_text(text: str, one_line: bool = True) -> str:
    """``text`` with what a page or a drawing cannot show or carry written as an escape:
    control characters as ``\\xNN``, lone surrogates (which UTF-8 cannot encode), U+FFFE
    and U+FFFF as ``\\uNNNN``, and the backslash that begins every escape as two, so
    that each text is shown one way and no two alike: a name holding the character
    ``\\x01`` and one holding the four characters ``\\x01`` differ (as Python's repr
    writes them). With ``one_line``, tabs and line breaks too (a name is drawn on one line).

    >>> print(shown_text("a\\x00b\\ud800c\\n"), shown_text("x\\ny", one_line=False) == "x\\ny")
    a\\x00b\\ud800c\\x0a True
    >>> print(shown_text("\\x01"), shown_text("\\\\x01"))
    \\x01 \\\\x01
    """
    unshowable = _UNSHOWABLE_ON_A_PAGE_LINE if one_line else _UNSHOWABLE_ON_A_PAGE
    if unshowable.search(text) is None:
        return text
    return unshowable.sub(_terminal_code, text)


def _shown_code(match: re.Match) -> str:
    code = ord(match.group())
    return ("\\x%02x" if code < 0x100 else "\\u%04x") % code


def terminal_text(text: str, one_line: bool = False) -> str:
    """``text`` as the command line writes it to a terminal: what :func:`shown_text`
    escapes, escaped the same way (an ESC, BEL or NUL in a module's name cannot retitle
    the terminal or hide what follows it, a lone surrogate cannot fail the write), and
    a backslash written as two, as Python writes a string, so that a name holding the
    control character ``\\x01`` and one holding the four characters ``\\x01`` differ.
    Line breaks and tabs are kept unless ``one_line``.

    >>> print(terminal_text("u\\x1b]0;t\\x07 a\\ud800b"), terminal_text("\\\\x01"), terminal_text("\\x01"))
    u\\x1b]0;t\\x07 a\\ud800b \\\\x01 \\x01
    """
    return shown_text(text, one_line)  # the page's escape, which keeps line breaks unless one_line


def _terminal_code(match: re.Match) -> str:
    return "\\\\" if match.group() == "\\" else _shown_code(match)


def shown_names(graph: AutogradGraph) -> AutogradGraph:
    """``graph`` with every name and text as a page shows it (:func:`shown_text`).

    A name may hold what neither Graphviz nor a page can take as it is: a NUL ends a
    DOT string, a control character makes Graphviz's JSON invalid, and a lone
    surrogate cannot be written as UTF-8. Escaped once, before the explorer's levels
    and layouts are made of them, such a name is drawn, laid out and searched as text
    (``a\\x00b``), as in a static drawing. Most graphs hold none: one search over all
    their names says so, and they are returned as they are.
    """
    nodes = graph.nodes
    names = "/".join([n for node in nodes for n in (node.label, node.module)]
                     + [n for m in graph.modules for n in (m.path, m.type_name)])
    texts = "/".join([t for node in nodes if node.note or node.attrs for t in (node.note, *(v for a in node.attrs for v in a))])
    if _UNSHOWABLE_ON_A_PAGE_LINE.search(names) is None and _UNSHOWABLE_ON_A_PAGE.search(texts) is None:
        return graph
    shown_nodes = tuple(
        node._replace(label=shown_text(node.label), module=shown_text(node.module), note=shown_text(node.note, one_line=False),
                      attrs=tuple((shown_text(k), shown_text(v, one_line=False)) for k, v in node.attrs))
        for node in nodes
    )
    shown_modules = tuple(m._replace(path=shown_text(m.path), type_name=shown_text(m.type_name)) for m in graph.modules)
    return AutogradGraph(shown_nodes, graph.edges, params_given=graph.params_given, modules=shown_modules)
