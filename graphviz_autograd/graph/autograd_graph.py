"""The walked graph as plain data: no torch objects, nothing that keeps a tensor alive.

A graph can be walked once and drawn many ways, built by hand in tests, and drawn
after ``backward()`` has freed the buffers it describes.

>>> g = AutogradGraph(
...     nodes=(Node("n0", OUTPUT, "loss", shape=()), Node("n1", OP, "SumBackward0")),
...     edges=(Edge("n1", "n0"),),
... )
>>> [n.label for n in g.nodes_of_kind(OP)]
['SumBackward0']
"""

from __future__ import annotations

import json
from collections import Counter
from functools import partial
from operator import is_not, itemgetter
from typing import Any, Callable, Iterable, Iterator, Literal, Mapping, NamedTuple, Optional, Sequence, Tuple, TypeVar

_T = TypeVar("_T")

# Node kinds. Plain strings so that a graph serialises to JSON as it is.
OUTPUT = "output"  # a tensor the walk started from, named by its place in the outputs
OP = "op"  # a backward node (MulBackward0, AddmmBackward0, a custom Function's node)
ACCUMULATE_GRAD = "accumulate_grad"  # the node that stores a leaf's .grad
PARAMETER = "parameter"  # a leaf tensor found among the given params
LEAF = "leaf"  # a leaf tensor that requires grad but has no name
NO_GRAD = "no_grad"  # an input slot that carries no gradient (a None in next_functions)
SAVED = "saved"  # a tensor an op saved for backward (only with show_saved)
MODULE = "module"  # a module drawn as one box by collapse(); attrs hold its summary

# Why an input carries no gradient (Node.note of a no_grad node, set by a recorder).
DETACH = "detach"  # .detach() / .detach_()
DATA_ATTRIBUTE = "data"  # read through .data
NO_GRAD_MODE = "no_grad"  # made under torch.no_grad()
INFERENCE_MODE = "inference_mode"  # made under torch.inference_mode()
FROZEN = "frozen"  # a parameter with requires_grad=False, or computed from one
BUFFER = "buffer"  # a registered buffer
REQUIRES_GRAD_FALSE = "requires_grad_false"  # data: an input or constant without requires_grad
INTEGER = "integer"  # an integer or bool tensor
INTEGER_RESULT = "integer_result"  # an integer or bool tensor computed from one with gradient (x > 0, argmax(), .long())
# The attrs below are the package's own, beside a custom Function's ctx attributes, which the
# walk reads without those whose names start with "_": their keys start with "_", so that no
# ctx attribute (``ctx.port = ...``) is taken for one of them and hidden from the drawing.
#
# A number operand (a Python scalar, a 0-d constant): no input of its own but part of its op.
# A recorder notes it as a reason; the walk writes it into the op's attrs under CONSTANT_ATTR
# (``('_constant', 'variance_epsilon=1e-06')``) and draws no no-grad node for it.
CONSTANT = "constant"
CONSTANT_ATTR = "_constant"
# A parameter under several names (tied weights) holds each name after its label in its attrs:
# ``('_also', 'lm_head.weight')``.
ALSO_NAMED = "_also"
# An op node whose tensor a recorded module call took or returned holds, per such call,
# ``('_port', 'in\n<call path>\n<argument name>')`` (or ``out`` and the output's name) in its
# attrs: what the explorer names that level's port by. No saved value: show_attrs leaves it out.
PORT_ATTR = "_port"
PORT_IN = "in"
PORT_OUT = "out"

# An op node whose forward call raised (Node.note): the failing call of a forward pass that
# did not finish, drawn at the end of the graph up to it (see capture.recording.ForwardFailure).
FAILED = "failed"

REASON_CODES = (
    DETACH, DATA_ATTRIBUTE, NO_GRAD_MODE, INFERENCE_MODE, FROZEN, BUFFER, REQUIRES_GRAD_FALSE, INTEGER, INTEGER_RESULT,
    CONSTANT,
)
# Inputs that never had a gradient to lose, as every model has: a summary view
# (collapse) folds them away like unnamed ones.
PLAIN_INPUT_REASONS = frozenset((BUFFER, REQUIRES_GRAD_FALSE, INTEGER))

NODE_KINDS = (OUTPUT, OP, ACCUMULATE_GRAD, PARAMETER, LEAF, NO_GRAD, SAVED, MODULE)
# The same kinds, for type checkers (a theme is keyed by them).
NodeKind = Literal["output", "op", "accumulate_grad", "parameter", "leaf", "no_grad", "saved", "module"]

# Edge kinds.
DATA = "data"  # gradient flows along it (drawn input -> consumer, like the forward pass)
CUT = "no_grad"  # from a no-grad input to the op that consumed it
SAVED_BY = "saved"  # from an op to a tensor it saved; no direction

EDGE_KINDS = (DATA, CUT, SAVED_BY)

Shape = Tuple[int, ...]


class Node(NamedTuple):
    """One node of the drawn graph (an immutable record).

    ``label`` is the op name for ops, the parameter or output name for tensors
    ('' when a tensor has no name) and the attribute name for saved tensors.
    ``attrs`` holds an op's saved values as (name, text) pairs, collected only when
    the walk was asked for them; a saved tensor's ``attrs`` holds ``('tensor', name)``
    when it is a named tensor (a parameter, buffer or input) or a view of one.
    ``note`` says why a saved tensor could not be read:
    'freed' when ``backward()`` released its buffer, 'modified in place' when an
    in-place op changed it after it was saved (backward() would fail on it). A
    no-grad input that collapse() moved out of a collapsed module keeps that
    module's path, where the gradient was cut, in ``note``.
    A ``module`` node (made by :func:`graphviz_autograd.views.collapsing.collapse`) stands
    for a whole module: ``label`` is its path, ``module`` the module it sits in,
    and ``attrs`` its summary (``type``, ``ops``, ``params``, and ``repeats`` and
    ``first`` and ``last`` module paths when a run of alike blocks was folded into it).
    """

    id: str
    kind: str
    label: str = ""
    shape: Optional[Shape] = None
    dtype: Optional[str] = None
    device: Optional[str] = None
    attrs: Tuple[Tuple[str, str], ...] = ()
    note: str = ""
    module: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "label": self.label,
            "shape": None if self.shape is None else list(self.shape),
            "dtype": self.dtype,
            "device": self.device,
            "attrs": {k: v for k, v in self.attrs},
            "note": self.note,
            "module": self.module,
        }


class Edge(NamedTuple):
    """An edge drawn from ``source`` to ``target`` (input to consumer, as in the forward pass).

    ``shape`` and ``dtype`` describe the tensor flowing along a data edge; the walk
    fills them in only when asked (``collect_shapes``).
    """

    source: str
    target: str
    kind: str = DATA
    shape: Optional[Shape] = None
    dtype: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "kind": self.kind,
            "shape": None if self.shape is None else list(self.shape),
            "dtype": self.dtype,
        }


# A module called more than once in a recorded forward pass: each later call is noted as
# a module of its own, its path with "#2", "#3", ... (see record.Recorder), and the
# calls inside a later call under that path ("encoder#2.conv").
CALL_MARK = "#"


def module_of_call(path: str) -> str:
    """The path of the module whose call ``path`` names: ``path`` less its call marks.

    >>> module_of_call("encoder#2.layers.0.relu#3"), module_of_call("layers.0")
    ('encoder.layers.0.relu', 'layers.0')
    """
    if CALL_MARK not in path:
        return path
    return ".".join(_call_of(part) for part in path.split("."))


def _call_of(part: str) -> str:
    base, mark, number = part.rpartition(CALL_MARK)
    return base if mark and number.isdigit() else part


def op_constants(node: "Node") -> list[str]:
    """The number operands an op node holds (see CONSTANT_ATTR), as written: ``['1.0001']``.

    >>> op_constants(Node("n1", OP, "AddBackward0", attrs=((CONSTANT_ATTR, "variance_epsilon=1e-06"),)))
    ['variance_epsilon=1e-06']
    """
    return [value for key, value in node.attrs if key == CONSTANT_ATTR] if node.attrs else []


def other_names(node: "Node") -> list[str]:
    """The names a tensor node is also known by (tied weights), after its label.

    >>> other_names(Node("n5", PARAMETER, "transformer.wte.weight", attrs=((ALSO_NAMED, "lm_head.weight"),)))
    ['lm_head.weight']
    """
    return [value for key, value in node.attrs if key == ALSO_NAMED] if node.attrs else []


def saved_attrs(node: "Node") -> tuple[tuple[str, str], ...]:
    """A node's attrs less its ports (PORT_ATTR): what ``show_attrs`` lists."""
    attrs = node.attrs
    if not attrs or all(key != PORT_ATTR for key, _ in attrs):
        return attrs
    return tuple(pair for pair in attrs if pair[0] != PORT_ATTR)


def port_attrs(names: Mapping[tuple[str, str], str]) -> tuple[tuple[str, str], ...]:
    """The node attributes that say ``names``, ``{(PORT_IN or PORT_OUT, call path): name}``,
    in order: what :func:`port_names` reads back.

    >>> port_attrs({("in", "layers.0"): "hidden_states"})
    (('_port', 'in\\nlayers.0\\nhidden_states'),)
    """
    return tuple((PORT_ATTR, f"{way}\n{path}\n{name}") for (way, path), name in sorted(names.items()))


def calls_around(path: str) -> list[str]:
    """The module calls a node of call ``path`` is inside, outermost first, itself last
    (none for the model's own, '').

    >>> calls_around("h.0.attn"), calls_around("")
    (['h', 'h.0', 'h.0.attn'], [])
    """
    if not path:
        return []
    parts = path.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def port_names(node: "Node") -> dict[tuple[str, str], str]:
    """``{(PORT_IN or PORT_OUT, call path): name}`` of the module calls the node's tensor entered or left.

    >>> port_names(Node("n3", OP, "AddBackward0", attrs=((PORT_ATTR, "in\\nlayers.0\\nhidden_states"),)))
    {('in', 'layers.0'): 'hidden_states'}
    """
    found = {}
    for key, value in node.attrs:
        if key == PORT_ATTR:
            direction, path, name = value.split("\n", 2)
            found[(direction, path)] = name
    return found


def leaves_and_returns(inside: set, targets: Mapping[Any, Iterable[Any]]) -> bool:
    """Whether a path from ``inside`` through nodes outside it comes back into it
    (``targets``: node -> the nodes it feeds). Drawn as one box, ``inside`` would then
    be a loop.

    >>> leaves_and_returns({"a", "c"}, {"a": ["b"], "b": ["c"]}), leaves_and_returns({"a", "b"}, {"a": ["b"], "b": ["c"]})
    (True, False)
    """
    pending = [t for node in inside for t in targets.get(node, ()) if t not in inside]
    seen = set(pending)
    while pending:
        for target in targets.get(pending.pop(), ()):
            if target in inside:
                return True
            if target not in seen:
                seen.add(target)
                pending.append(target)
    return False


class ModuleInfo(NamedTuple):
    """A module of the recorded model: its qualified name ('' for the model itself),
    class name, and how many parameter elements it holds (its submodules' included)."""

    path: str
    type_name: str
    parameters: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "type_name": self.type_name, "parameters": self.parameters}


class Columns(NamedTuple):
    """A graph as the DOT writer reads it: one entry per node, edges by node index.

    ``ids[i]`` is node i's id (``None`` for ids ``n0, n1, ...`` in order), and
    ``contents[i]`` is the rest of its :class:`Node` (``node[1:]``); nodes with the
    same content may share one tuple, as most ops of a walk do. ``links`` holds
    ``(source index, target index, edge[2:])`` per edge. An edge to an id that
    names no node (possible in a hand-built graph) points past the last node,
    at an id appended to ``ids``.
    """

    ids: Optional[list]
    contents: Sequence[tuple]
    links: Sequence[tuple]


# ``Node(...)`` and ``Edge(...)`` run the Python-level ``__new__`` that NamedTuple
# generates (with keyword handling); ``tuple.__new__`` given every field in order
# builds the same object in a third of the time, and a big graph builds millions.
new_record = tuple.__new__


class AutogradGraph:
    """Nodes in walk order (ids ``n0, n1, ...``) and the edges between them; plain data,
    read-only, compared and hashed by its content.

    Nodes and edges are named tuples rather than dataclasses: a million-node walk
    creates two million of them, and a tuple is built several times faster.

    ``params_given`` records whether the walk was told parameter names, so that a
    renderer can flag leaves it could not name. ``modules`` lists the modules of a
    recorded model in definition order (empty without a recorder).
    ``sequence_numbers`` holds ``(node id, autograd sequence number)`` for each op
    node, in walk order, when the walk was asked for them (``collect_sequence_numbers``);
    they differ from one run of a model to the next, so graphs compare equal without them.

    A walk returns its graph as :class:`Columns` (:meth:`from_columns`), and the
    ``nodes`` and ``edges`` tuples are built the first time they are read: drawing
    a walked graph straight to DOT reads the columns and builds neither. What is
    worked out from a graph once and asked often (its columns, the reads of each
    node, whether edges carry shapes, nodes by id) is kept beside it, out of sight.

    >>> g = AutogradGraph((Node("n0", OP, "ExpBackward0"),), ())
    >>> g == AutogradGraph.from_columns(g.columns()), g.replace(params_given=True).params_given
    (True, True)
    """

    __slots__ = ("_nodes", "_edges", "_params_given", "_modules", "_sequence_numbers", "_columns", "_derived")

    def __init__(
        self,
        nodes: Tuple[Node, ...],
        edges: Tuple[Edge, ...],
        params_given: bool = False,
        modules: Tuple[ModuleInfo, ...] = (),
        sequence_numbers: Tuple[Tuple[str, int], ...] = (),
    ):
        self._nodes: Optional[Tuple[Node, ...]] = nodes
        self._edges: Optional[Tuple[Edge, ...]] = edges
        self._params_given = params_given
        self._modules = modules
        self._sequence_numbers = sequence_numbers
        self._columns: Optional[Columns] = None
        self._derived: dict[str, Any] = {}

    @classmethod
    def from_columns(
        cls,
        columns: Columns,
        params_given: bool = False,
        modules: Tuple[ModuleInfo, ...] = (),
        edge_shapes: Optional[bool] = None,
    ) -> "AutogradGraph":
        """A graph whose ``nodes`` and ``edges`` are built from ``columns`` when first read.

        ``edge_shapes=False`` says that no link carries a shape (see
        :meth:`has_edge_shapes`), as a walk without ``collect_shapes`` knows.

        >>> g = AutogradGraph.from_columns(Columns(None, [(OP, "ExpBackward0", None, None, None, (), "", "")], []))
        >>> g.nodes
        (Node(id='n0', kind='op', label='ExpBackward0', shape=None, dtype=None, device=None, attrs=(), note='', module=''),)
        """
        graph = cls((), (), params_given, modules)
        graph._nodes = graph._edges = None
        graph._columns = columns
        if edge_shapes is not None:
            graph._derived["has_edge_shapes"] = edge_shapes
        return graph

    @property
    def nodes(self) -> Tuple[Node, ...]:
        if self._nodes is None:
            self._build_records()
        assert self._nodes is not None
        return self._nodes

    @property
    def edges(self) -> Tuple[Edge, ...]:
        if self._edges is None:
            self._build_records()
        assert self._edges is not None
        return self._edges

    @property
    def params_given(self) -> bool:
        return self._params_given

    @property
    def modules(self) -> Tuple[ModuleInfo, ...]:
        return self._modules

    @property
    def sequence_numbers(self) -> Tuple[Tuple[str, int], ...]:
        return self._sequence_numbers

    def _build_records(self) -> None:
        columns = self.columns()
        ids = columns.ids
        assert ids is not None  # columns() fills them in
        self._nodes = tuple([new_record(Node, (node_id, *content)) for node_id, content in zip(ids, columns.contents)])
        self._edges = tuple([new_record(Edge, (ids[s], ids[t], *rest)) for s, t, rest in columns.links])

    def _key(self) -> tuple:
        return (self.nodes, self.edges, self._params_given, self._modules)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AutogradGraph):
            return NotImplemented
        return self is other or self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"AutogradGraph(nodes={self.nodes!r}, edges={self.edges!r}, params_given={self._params_given!r}, "
            f"modules={self._modules!r})"
        )

    def replace(self, **changes: Any) -> "AutogradGraph":
        """A copy with ``changes`` to ``nodes``, ``edges``, ``params_given``, ``modules`` or ``sequence_numbers``."""
        fields: dict[str, Any] = {
            "nodes": self.nodes, "edges": self.edges, "params_given": self._params_given,
            "modules": self._modules, "sequence_numbers": self._sequence_numbers,
        }
        unknown = set(changes) - set(fields)
        if unknown:
            raise TypeError(f"AutogradGraph has no field {sorted(unknown)[0]!r}; the fields are {', '.join(fields)}.")
        fields.update(changes)
        return AutogradGraph(**fields)

    def with_sequence_numbers(self, numbers: Iterable[Tuple[str, int]]) -> "AutogradGraph":
        """This graph with ``sequence_numbers`` set; the nodes, edges and columns are shared, not rebuilt.

        >>> g = AutogradGraph((Node("n0", OP, "ExpBackward0"),), ()).with_sequence_numbers([("n0", 7)])
        >>> g.sequence_numbers
        (('n0', 7),)
        """
        graph = AutogradGraph(self._nodes, self._edges, self._params_given, self._modules, tuple(numbers))  # type: ignore[arg-type]
        graph._columns = self._columns
        graph._derived = self._derived
        return graph

    def columns(self, fill_ids: bool = True) -> Columns:
        """The graph as :class:`Columns` (with ``ids`` filled in), built once.

        With ``fill_ids=False`` a walked graph's ``ids`` may be None, standing for
        ``n0, n1, ...`` in order: what reads only contents and links, or writes
        numbered ids itself, need not build a str per node.
        """
        columns = self._columns
        if columns is None:
            columns = _columns_of(self.nodes, self.edges)
        elif columns.ids is None and fill_ids:
            columns = Columns(numbered_ids(len(columns.contents)), columns.contents, columns.links)
        else:
            return columns
        self._columns = columns
        return columns

    def has_edge_shapes(self) -> bool:
        """Whether any edge carries a shape (a walk with ``collect_shapes``); found once."""

        def find() -> bool:
            links = self.columns(fill_ids=False).links
            # A shape may be (), so looked for as not None, not by truth.
            return next(filter(_is_not_none, map(itemgetter(1), map(itemgetter(2), links))), None) is not None

        return self.derived("has_edge_shapes", find)

    def source_reads(self) -> "Counter[int]":
        """How many edges leave each node, by node index in :meth:`columns`; counted once.

        Both the split of shared parameters and the fan-in junctions ask this of every
        drawn graph, and most graphs are drawn unchanged by either.
        """
        return self.derived("source_reads", lambda: Counter(map(itemgetter(0), self.columns(fill_ids=False).links)))

    def repeated_reads(self) -> int:
        """How many edges leave a node that another edge left before: 0 when each node
        feeds at most one op. An output read n times takes n - 1 of them, so a graph with
        fewer than n - 1 has no output read n times, and neither the split of shared
        parameters nor the junctions need :meth:`source_reads` to know they have nothing
        to do (a chain of a million ops reads each output once).

        A walk without saved tensors knows it without counting, and keeps it here
        through :meth:`derived` (see ``capture.walking``).

        >>> AutogradGraph.from_columns(Columns(None, [(OP, "A")] * 3, [(0, 1, ()), (0, 2, ()), (1, 2, ())])).repeated_reads()
        1
        """
        return self.derived("repeated_reads", self._count_repeated_reads)

    def _count_repeated_reads(self) -> int:
        sources = list(map(itemgetter(0), self.columns(fill_ids=False).links))
        return len(sources) - len(set(sources))

    def derived(self, key: str, make: Callable[[], _T]) -> _T:
        """``make()``, worked out once per graph and kept under ``key``: what is read of
        one graph more than once (the reads per node, its junctions: the layout estimate
        and the DOT writer both plan them). A graph is never changed, so what
        is derived from it stays true."""
        if key not in self._derived:
            self._derived[key] = make()
        return self._derived[key]

    def node(self, node_id: str) -> Node:
        """The node with this id; KeyError if there is none."""
        return self.derived("by_id", lambda: {n.id: n for n in self.nodes})[node_id]

    def nodes_of_kind(self, *kinds: str) -> Iterator[Node]:
        return (n for n in self.nodes if n.kind in kinds)

    def to_dict(self) -> dict[str, Any]:
        """The graph as JSON-ready plain data."""
        data = {
            "nodes": [n.to_dict() for n in self.nodes],
            "edges": [e.to_dict() for e in self.edges],
            "params_given": self.params_given,
            "modules": [m.to_dict() for m in self.modules],
        }
        if self.sequence_numbers:  # only walks that asked for them: other JSON stays as it was
            data["sequence_numbers"] = {node_id: number for node_id, number in self.sequence_numbers}
        return data

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text: keys sorted, indented, the same bytes on every run.

        >>> text = AutogradGraph((Node("n0", OP, "SumBackward0"),), ()).to_json()
        >>> json.loads(text)["nodes"][0]["label"], text.splitlines()[1]
        ('SumBackward0', '  "edges": [],')
        """
        return json.dumps(self.to_dict(), sort_keys=True, indent=2) + "\n"


_is_not_none = partial(is_not, None)

# The attribute of a saved-tensor node that names the tensor it is (or views).
SAVED_TENSOR_OF = "tensor"
CUT_IN = "cut in"  # a no-grad node's attrs key: where the cut happened, when the node was moved


def cut_location(node: Node) -> str:
    """Where a named no-grad input lost its gradient: its module, unless
    :func:`~graphviz_autograd.views.collapsing.collapse` moved the node beside a box and
    kept the module under ``CUT_IN`` in its attrs."""
    for key, value in node.attrs:
        if key == CUT_IN:
            return value
    return node.module


# Bytes per element of each dtype as the walk names it (torch's names without "torch.").
ITEMSIZES = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
    "float8_e4m3fn": 1, "float8_e4m3fnuz": 1, "float8_e5m2": 1, "float8_e5m2fnuz": 1,
    "complex128": 16, "complex64": 8, "complex32": 4,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint64": 8, "uint32": 4, "uint16": 2, "uint8": 1,
    "bool": 1, "qint8": 1, "quint8": 1, "qint32": 4,
}


def dtype_itemsize(dtype: str) -> int:
    """Bytes per element of ``dtype`` (``"float32"``: 4); 0 when unknown.

    >>> dtype_itemsize("bfloat16"), dtype_itemsize("no such dtype")
    (2, 0)
    """
    return ITEMSIZES.get(dtype, 0)


def parameter_nodes(graph: AutogradGraph) -> dict[str, tuple[str, ...]]:
    """Each parameter's node and its AccumulateGrad in ``graph``, by the parameter's name."""
    kinds = {node.id: node.kind for node in graph.nodes}
    accumulator: dict[str, str] = {}
    for edge in graph.edges:
        if edge.kind == DATA and kinds.get(edge.target) == ACCUMULATE_GRAD:
            accumulator.setdefault(edge.source, edge.target)
    found: dict[str, tuple[str, ...]] = {}
    for node in graph.nodes:
        if node.kind == PARAMETER and node.label not in found:
            found[node.label] = (node.id, accumulator[node.id]) if node.id in accumulator else (node.id,)
    return found


def numbered_ids(count: int) -> list[str]:
    """``['n0', 'n1', ...]``: the ids of a walk's nodes, in order.

    >>> numbered_ids(3)
    ['n0', 'n1', 'n2']
    """
    global _numbered
    if count > _NUMBERED_KEPT:
        return [f"n{i}" for i in range(count)]
    kept = _numbered
    if count > len(kept):
        # Replaced, not extended: a thread that reads the old list meanwhile still
        # reads right ids, and two threads growing it at once both leave a right one.
        kept = _numbered = [f"n{i}" for i in range(min(max(count, 2 * len(kept)), _NUMBERED_KEPT))]
    return kept[:count]


# The ids of graphs up to this many nodes are kept once for all (some 4 MB): most
# graphs drawn in a process are alike in size, and writing them anew was a tenth
# of the time it takes to draw one. Grown, never shrunk.
_NUMBERED_KEPT = 65_536
_numbered: list[str] = []


def _columns_of(nodes: Sequence[Node], edges: Sequence[Edge]) -> Columns:
    ids = [n[0] for n in nodes]
    index: dict[str, int] = {}
    for i, node_id in enumerate(ids):
        index.setdefault(node_id, i)  # a repeated id: edges meet its first node, as in DOT
    links = []
    for e in edges:
        ends = []
        for end in (e[0], e[1]):
            at = index.get(end)
            if at is None:
                at = index[end] = len(ids)
                ids.append(end)
            ends.append(at)
        links.append((ends[0], ends[1], tuple(e[2:])))
    return Columns(ids, [tuple(n[1:]) for n in nodes], links)
