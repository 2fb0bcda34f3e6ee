"""Walk an autograd graph into plain data.

This is the only module that touches autograd internals (``grad_fn``,
``next_functions``, ``AccumulateGrad.variable``, ``_saved_*``). It iterates with an
explicit stack, so a chain of a million ops walks as easily as ten, and it returns
an :class:`~graphviz_autograd.graph.autograd_graph.AutogradGraph` that holds no tensor.

>>> import torch
>>> w = torch.ones(2, requires_grad=True)
>>> g = walk((w * 3).sum(), params={"w": w})
>>> [(n.kind, n.label, n.attrs) for n in g.nodes]  # doctest: +NORMALIZE_WHITESPACE
[('output', '', ()), ('op', 'SumBackward0', ()), ('op', 'MulBackward0', (('_constant', '3'),)),
 ('accumulate_grad', 'AccumulateGrad', ()), ('parameter', 'w', ())]

A number an op takes (``w * 3``) is part of its op, not an input of its own; see
:meth:`_Walker.saved_constant` for what the graph alone can tell of one.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Optional

import torch
from torch.autograd.function import BackwardCFunction

from . import deep_graphs
from ..errors import GraphvizAutogradError, NoGraphError
from .naming import Params, layout_name, named_tensors, number_text, parameter_names, view_name
from ..graph.autograd_graph import (
    ACCUMULATE_GRAD, ALSO_NAMED, CONSTANT, CONSTANT_ATTR, CUT, DATA, FAILED, INTEGER, LEAF, NO_GRAD, OP, OUTPUT, PARAMETER, REQUIRES_GRAD_FALSE, SAVED,
    SAVED_BY, SAVED_TENSOR_OF,
)
from ..graph.autograd_graph import AutogradGraph, Columns, Edge, Node, port_attrs
from .compiled_regions import COMPILED_REGION_ATTR, open_regions
from .recording import ForwardFailure

if TYPE_CHECKING:
    from .recording import Recorder


# The rest of an edge (Edge[2:]) for each kind without a shape: shared by every such edge.
_DATA_LINK = (DATA, None, None)
_CUT_LINK = (CUT, None, None)
_SAVED_LINK = (SAVED_BY, None, None)
_NO_NOTES: tuple = ("", ())  # what a recorder noted of a node it did not see: no module, no reasons
_ACCUMULATE_GRAD = "AccumulateGrad"
# What the walk keeps for the type AccumulateGrad in place of a shared content: its
# nodes differ by the leaf they feed, and go straight to _Walker.accumulate_grad.
_FEEDS_LEAF = ("feeds a leaf",)
# type(grad_fn) -> the content every node of the type has in a plain walk (no recorder,
# no saved values): _Walker.plain_ops of every plain walk. Kept between walks, since a
# type's label never changes: working it out anew cost 5 us a type, a tenth of a
# GPT-2 walk. Emptied when full, so that types made on the fly (a custom Function
# defined inside a loop) are not kept alive for good.
_PLAIN_OPS: dict[type, tuple] = {}
_PLAIN_OPS_KEPT = 1_000

_SAVED_PREFIX = "_saved_"
_SAVED_SELF, _SAVED_OTHER = "_saved_self", "_saved_other"
_is_tensor = torch.Tensor.__instancecheck__
# A number operand in device memory: its value is not read back (that would wait for the device).
_DEVICE_CONSTANT = (CONSTANT, "0-d tensor", "")
# float -> the reason a number operand of that value gives; kept between walks, up to a bound.
_NUMBER_TEXTS: dict[float, tuple[str, str, str]] = {}
_NUMBER_TEXTS_KEPT = 10_000
_RAW_SAVED_PREFIX = "_raw_saved_"
_CPP_PREFIX = "torch::autograd::"
# Why a saved value cannot be read (Node.note), and how an op's attribute shows it.
FREED_NOTE = "freed"
MODIFIED_NOTE = "modified in place"
FREED = f"[{FREED_NOTE}]"
SAVED_TENSOR = "[saved tensor]"
SAVED_TENSORS = "[saved tensors]"


def walk(
    outputs: Any,
    params: Params = None,
    *,
    collect_saved: bool = False,
    collect_shapes: bool = False,
    recorder: Optional["Recorder"] = None,
    collect_sequence_numbers: bool = False,
) -> AutogradGraph:
    """Walk the backward graph of ``outputs`` and return it as plain data.

    ``outputs`` is a tensor or any nesting of tuples, lists, dicts, namedtuples and
    dict-like model outputs holding tensors; non-tensor values are skipped. Each
    output tensor becomes an output node named by its place in the nesting
    (``'[0]'``, ``'logits'``, ``'hidden_states[2]'``; ``''`` for a bare tensor).

    ``params`` names leaf tensors: a ``dict`` of name to tensor (as torchviz takes),
    an ``nn.Module`` (its parameters and buffers), or an iterable of
    ``(name, tensor)`` pairs such as ``model.named_parameters()``.

    ``collect_saved`` also records what each op saved for backward: non-tensor
    values as text, tensors as their own nodes (``show_attrs``/``show_saved``).
    ``collect_shapes`` records on each data edge the shape and dtype of the tensor
    flowing along it (from autograd's input metadata; no data is read).

    ``recorder`` (from :func:`~graphviz_autograd.capture.recording.record`) adds what a recorded
    forward pass knows: each op's module, the modules of the model, and why each
    input without gradient lost it.

    ``collect_sequence_numbers`` records each op node's autograd sequence number
    (:attr:`AutogradGraph.sequence_numbers`), the number the profiler tags its
    forward op and its backward with (see :mod:`graphviz_autograd.checks.profiling`).

    ``outputs`` may also be the :class:`~graphviz_autograd.capture.recording.ForwardFailure`
    of a forward pass that raised (``rec.failure``): the graph up to the failing call, which
    is an op node (``n0``, ``note="failed"``) fed by the tensors it was given.
    """
    if isinstance(outputs, ForwardFailure):
        return _failure_graph(outputs, params, collect_saved=collect_saved, collect_shapes=collect_shapes,
                              recorder=recorder, collect_sequence_numbers=collect_sequence_numbers)
    # A lone tensor (a loss) is the common case: named '' without starting the
    # generator that takes a nesting apart.
    named_outputs = [("", outputs)] if type(outputs) is torch.Tensor else list(named_tensors(outputs))
    with_graph = [(name, t) for name, t in named_outputs if t.grad_fn is not None or t.requires_grad]
    if not with_graph:
        raise NoGraphError(_no_graph_message(outputs, named_outputs))
    aliases: dict[int, list[str]] = {}
    recorded = recorder.model_tensors(params) if recorder is not None else None
    names = parameter_names(params if recorded is None else recorded, aliases)
    # With names asked for, the forward's arguments are named too, as the CLI names them.
    recorded_inputs = recorder.named_inputs() if recorder is not None and params is not None else ()
    for name, tensor in recorded_inputs:
        names.setdefault(id(tensor), name)
    deep_graphs.release_unreferenced()
    walker = _Walker(names, params is not None, collect_saved, collect_shapes, recorder, aliases)
    with _gc_paused:
        graph = walker.run(with_graph)
    if collect_sequence_numbers:
        graph = graph.with_sequence_numbers(_sequence_numbers(walker.fn_index))
    deep_graphs.hold(walker.fn_index)
    if recorder is not None:
        if recorder.compiled.regions:
            graph = open_regions(graph, recorder.compiled)
        recorder.note_unseen(graph)
    return graph


def _failure_graph(
    failure: ForwardFailure,
    params: Params,
    *,
    collect_saved: bool,
    collect_shapes: bool,
    recorder: Optional["Recorder"],
    collect_sequence_numbers: bool,
) -> AutogradGraph:
    """The graph up to a forward pass's failing call: that call as the op node ``n0``, fed by
    the graphs of the tensors it was given (walked as outputs, then joined into it) and by a
    no-grad input for each one that carries no gradient."""
    tensors = failure.tensors
    with_graph = {name: t for name, t in tensors if t.grad_fn is not None or t.requires_grad}
    plain = [(name, t) for name, t in tensors if name not in with_graph]
    if with_graph:
        walked = walk(with_graph, params, collect_saved=collect_saved, collect_shapes=collect_shapes,
                      recorder=recorder, collect_sequence_numbers=collect_sequence_numbers)
        nodes, edges = list(walked.nodes), list(walked.edges)
        modules, numbers = walked.modules, walked.sequence_numbers
    else:
        nodes, edges = [], []
        modules, numbers = (recorder.modules if recorder is not None else ()), ()
    outputs = {node.id for node in nodes if node.kind == OUTPUT}
    kept = [node for node in nodes if node.id not in outputs]
    renamed = {node.id: f"n{i + 1}" for i, node in enumerate(kept)}
    failed_id = "n0"
    for name in outputs:
        renamed[name] = failed_id
    attrs = (("error", failure.error),) + ((("at", failure.where),) if failure.where else ()) + tuple(
        ("input", text) for text in failure.inputs)
    new_nodes = [Node(failed_id, OP, failure.call, attrs=attrs, note=FAILED, module=failure.module)]
    new_nodes += [node._replace(id=renamed[node.id]) for node in kept]
    new_edges = [edge._replace(source=renamed[edge.source], target=renamed[edge.target]) for edge in edges]
    for name, tensor in plain:
        integer = not (tensor.is_floating_point() or tensor.is_complex())
        text = f"{name} ({str(tensor.dtype).replace('torch.', '')})" if integer else f"{name} (requires_grad=False)"
        node_id = f"n{len(new_nodes)}"
        new_nodes.append(Node(node_id, NO_GRAD, text, note=INTEGER if integer else REQUIRES_GRAD_FALSE,
                              module=failure.module))
        new_edges.append(Edge(node_id, failed_id, CUT))
    graph = AutogradGraph(tuple(new_nodes), tuple(new_edges), params is not None, modules)
    if numbers:
        graph = graph.with_sequence_numbers((renamed[node_id], number) for node_id, number in numbers if node_id in renamed)
    return graph


# The name of a leaf that is a view of a tensor without gradient no one named: data a
# forward made require grad (Wav2Vec2's feature encoder does, on its input), no weight.
UNNAMED_DATA_VIEW = "data (view)"


def _views_data(tensor: torch.Tensor) -> bool:
    """Whether a leaf is a view of a tensor that carries no gradient (data, not a weight)."""
    base = getattr(tensor, "_base", None)
    return base is not None and not base.requires_grad


class _GcPause:
    """Pauses the cyclic garbage collector while any walk runs, in any thread.

    A walk creates millions of small tuples that hold no cycles; with the collector
    running, each young-generation pass re-scans them and the walk takes twice as long.

    Walks in several threads share one pause: the first to start records whether
    the collector was enabled, and the last to finish restores that. (With each
    walk saving and restoring on its own, a walk starting while another held the
    collector off recorded "disabled"; if the other ended between that and its
    own gc.disable(), the collector stayed off for the rest of the process.)

    A plain ``__enter__``/``__exit__`` pair rather than a ``contextlib`` generator:
    every walk goes through it, and a generator-based manager costs a walk of a
    small graph a third of its time when the interpreter's caches are cold.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.walks = 0
        self.was_enabled = False

    def __enter__(self) -> None:
        with self.lock:
            if self.walks == 0:
                self.was_enabled = gc.isenabled()
                gc.disable()
            self.walks += 1

    def __exit__(self, *exc_info: object) -> None:
        with self.lock:
            self.walks -= 1
            if self.walks == 0 and self.was_enabled:
                gc.enable()


_gc_paused = _GcPause()


def _sequence_numbers(fn_index: dict[Any, int]) -> tuple[tuple[str, int], ...]:
    """(node id, autograd sequence number) of each op node, in walk order.

    Read after the walk, so that a walk that does not ask pays nothing. AccumulateGrad
    nodes have no number of their own (autograd gives them the largest uint64) and are left out.
    """
    numbered = sorted((index, fn._sequence_nr()) for fn, index in fn_index.items())
    return tuple((f"n{index}", number) for index, number in numbered if number < _NO_SEQUENCE_NR)


_NO_SEQUENCE_NR = 2**63  # AccumulateGrad's is 2**64 - 1


# --- outputs -----------------------------------------------------------------------


def _no_graph_message(outputs: Any, named_outputs: list[tuple[str, torch.Tensor]]) -> str:
    fix = "Call it on the loss or the model output, computed with gradients enabled."
    if not named_outputs:
        return (
            f"Nothing to draw: expected a tensor or a tuple/list/dict of tensors, "
            f"got {_describe_value(outputs)}. {fix}"
        )
    if len(named_outputs) == 1:
        return f"Nothing to draw: the output tensor has no autograd graph: {_why_no_grad(named_outputs[0][1])}. {fix}"
    reasons = "; ".join(f"{name}: {_why_no_grad(t)}" for name, t in named_outputs[:5])
    more = f" (and {len(named_outputs) - 5} more)" if len(named_outputs) > 5 else ""
    return f"Nothing to draw: none of the {len(named_outputs)} output tensors has an autograd graph ({reasons}{more}). {fix}"


def _why_no_grad(t: torch.Tensor) -> str:
    if t.is_inference():
        return "it was created under torch.inference_mode()"
    if not (t.is_floating_point() or t.is_complex()):
        return f"its dtype is {_dtype_name(t.dtype)}, and only floating-point and complex tensors carry gradients"
    return (
        "it has requires_grad=False and no grad_fn, so it was created under torch.no_grad(), "
        "cut off with .detach(), or computed only from tensors that do not require grad "
        "(for example with every parameter frozen)"
    )


def _describe_value(value: Any) -> str:
    if isinstance(value, (tuple, list, Mapping)) and not value:
        return f"an empty {type(value).__name__}"
    if isinstance(value, (tuple, list, Mapping)):
        return f"a {type(value).__name__} that holds no tensor"
    return f"a value of type {type(value).__name__}"


# --- the walk ----------------------------------------------------------------------


class _Walker:
    """One walk. Holds autograd objects only while it runs; ``run`` returns plain data.

    Nodes are stored by index (node ``i`` has id ``n{i}``) as :class:`Columns`: an
    index is handed out when a node is first seen, and its content (``Node[1:]``)
    filled in when the node is processed. Nodes alike share one content tuple (every
    MulBackward0 of a model without a recorder, every plain input without
    gradient), so a walk builds a tuple per kind of op, not per node.
    """

    def __init__(
        self,
        parameter_names: dict[int, str],
        params_given: bool,
        collect_saved: bool,
        collect_shapes: bool = False,
        recorder: Optional["Recorder"] = None,
        aliases: Optional[dict[int, list[str]]] = None,
    ):
        self.parameter_names = parameter_names
        # id -> the other names of a tensor under several (tied weights), as ALSO_NAMED attrs
        self.aliases = {key: tuple((ALSO_NAMED, name) for name in names) for key, names in (aliases or {}).items()}
        self.params_given = params_given
        self.collect_saved = collect_saved
        self.collect_shapes = collect_shapes
        self.recorder = recorder
        self.edge_meta: dict[Any, tuple] = {}  # grad_fn -> edge rest (DATA, shape, dtype) per output, with collect_shapes
        self.contents: list[Optional[tuple]] = []  # per node: Node[1:], None until processed
        self.links: list[tuple] = []  # per edge: (source, target, Edge[2:])
        self.fn_index: dict[Any, int] = {}  # grad_fn object -> node index
        self.leaf_index: dict[int, int] = {}  # id(leaf tensor) -> node index
        self.saved_index: dict[int, int] = {}  # id(saved tensor) -> node index
        # Tensors whose id() is a key above must outlive the walk, or a new tensor
        # could reuse the id. Dropped with the walker.
        self.keep_alive: list[torch.Tensor] = []
        # type(grad_fn) -> its label, for types whose every node has the label of the type's name
        self.labels: dict[type, str] = {}
        self.shared: dict[Any, tuple] = {}  # (kind, label, module) -> the content nodes alike share
        # Whether every node of an op type has the same content: nothing noted per node.
        self.plain = recorder is None and not collect_saved
        # type(grad_fn) -> the content all its nodes share (see content_of); filled by plain walks only
        self.plain_ops: dict[type, tuple] = _PLAIN_OPS if self.plain else {}
        self.saved_names: dict[type, tuple[str, ...]] = {}
        self.saved_operands: dict[type, tuple[str, ...]] = {}  # type -> the names its operands are saved by
        self.with_numbers: dict[tuple, tuple] = {}  # (id(content), number texts) -> the content with them

    def new_index(self) -> int:
        index = len(self.contents)
        self.contents.append(None)
        return index

    def run(self, outputs: list[tuple[str, torch.Tensor]]) -> AutogradGraph:
        for name, tensor in outputs:
            out = self.new_index()
            meta = _tensor_meta(tensor)
            self.contents[out] = (OUTPUT, name, *meta, (), "", "")
            fn = tensor.grad_fn
            if fn is None:
                source = self.leaf(tensor)
            else:
                known = self.fn_index.get(fn)
                if known is None:
                    known = self.fn_index[fn] = self.new_index()
                    self.drain([fn])
                source = known
            self.links.append((source, out, (DATA, *meta[:2]) if self.collect_shapes else _DATA_LINK))
        modules = self.recorder.modules if self.recorder is not None else ()
        columns = Columns(None, self.contents, self.links)  # type: ignore[arg-type]
        graph = AutogradGraph.from_columns(columns, self.params_given, modules, None if self.collect_shapes else False)
        if not self.collect_saved:
            # Every node but the outputs was added together with an edge leaving it (the
            # input that made it known), so every edge past one per such node reads a node
            # again: the graph's repeated reads, known without counting them. (A saved
            # tensor's edge enters its node instead, so a walk with them leaves the count.)
            repeated = len(self.links) - (len(self.contents) - len(outputs))
            graph.derived("repeated_reads", lambda: repeated)
        return graph

    def drain(self, stack: list[Any]) -> None:
        """Process grad_fn nodes depth first; children get indices in input order.

        The hot loop of a walk: locals instead of attribute look-ups, one shared
        content per kind of op, an index and a link per input and nothing else.
        """
        fn_index = self.fn_index
        contents = self.contents
        add_content = contents.append
        add_link = self.links.append
        push = stack.append
        shapes = self.collect_shapes
        plain_ops = self.plain_ops
        module = ""
        cut_reasons: tuple = ()
        plain_cut = self.shared_content(NO_GRAD, "", "")
        # A plain walk's AccumulateGrad nodes, handled here rather than through
        # accumulate_grad(): GPT-2 has 148, and three calls each were a fifth of its walk.
        leaf_index = self.leaf_index
        plain_accumulate = self.shared_content(ACCUMULATE_GRAD, _ACCUMULATE_GRAD, "")
        constants: Optional[list[str]] = None  # the number operands of the node at hand, once one is met
        while stack:
            fn = stack.pop()
            index = fn_index[fn]
            content = plain_ops.get(type(fn))
            if content is None:
                noted = self.content_of(fn, index)
                if noted is None:  # an AccumulateGrad, done
                    continue
                content, module, cut_reasons, plain_cut = noted
            elif content is _FEEDS_LEAF:  # only in plain walks: no recorder, so no owner module
                tensor = fn.variable
                leaf = leaf_index.get(id(tensor))
                if leaf is None:
                    leaf = self.leaf(tensor)
                contents[index] = plain_accumulate
                add_link((leaf, index, (DATA, *contents[leaf][2:4]) if shapes else _DATA_LINK))  # type: ignore[index]
                continue
            contents[index] = content
            # New children go straight onto the stack (no list per node), then the
            # run of them is reversed so that the first input is walked first.
            new_children = 0
            cuts = 0
            for child, output_nr in fn.next_functions:
                if child is None:
                    if cut_reasons:
                        reason = cut_reasons[cuts] if cuts < len(cut_reasons) else None
                    else:  # no recorder's word: what the op saved may show a number
                        reason = self.saved_constant(fn, cuts)
                    cuts += 1
                    if reason is not None:
                        code, text, where = reason[:3]
                        if code == CONSTANT:  # part of its op, not an input of its own
                            if constants is None:
                                constants = []
                            constants.append(text)
                            continue
                        add_link((len(contents), index, _CUT_LINK))
                        # A fourth: the module calls that took it as an argument (its ports).
                        add_content((NO_GRAD, text, None, None, None, reason[3] if len(reason) > 3 else (), code, where))
                        continue
                    add_link((len(contents), index, _CUT_LINK))
                    add_content(plain_cut)
                    continue
                child_index = fn_index.get(child)
                if child_index is None:
                    child_index = fn_index[child] = len(contents)
                    add_content(None)
                    push(child)
                    new_children += 1
                add_link((child_index, index, self.output_meta(child, output_nr) if shapes else _DATA_LINK))
            if new_children > 1:
                stack[-new_children:] = stack[-new_children:][::-1]
            if constants is not None:
                contents[index] = self.with_constants(content, constants)
                constants = None

    def content_of(self, fn: Any, index: int) -> Optional[tuple[tuple, str, tuple, tuple]]:
        """What :meth:`drain` needs of a node whose type it has no content for: the
        node's content, module, the recorder's reasons for its cut inputs, and the
        content of a cut input without a reason. None for an AccumulateGrad, which
        is done here.

        Without a recorder and saved values, every node of a type has the same
        content: it is kept per type, and later nodes of the type never get here.
        """
        label = self.labels.get(type(fn))
        if label is None:
            label = self.label_of(fn)
        attrs = self.saved(fn, index) if self.collect_saved else ()
        plain = self.plain and type(fn) in self.labels
        if label == _ACCUMULATE_GRAD:
            if plain:
                self.keep_plain_op(type(fn), _FEEDS_LEAF)
            self.accumulate_grad(fn, index, attrs)
            return None
        module, cut_reasons = "", ()
        if self.recorder is not None:
            metadata = fn.metadata
            module, cut_reasons = metadata.get(self.recorder.key) or _NO_NOTES
            ports = metadata.get(self.recorder.ports_key)
            if ports:  # the module calls its tensor entered or left, by argument or output name
                attrs += port_attrs(ports)
            aot_id = getattr(getattr(fn, "_forward_cls", None), "_aot_id", None)
            if isinstance(aot_id, int) and label.startswith("CompiledFunction"):  # which region it runs: see open_regions
                attrs += ((COMPILED_REGION_ATTR, str(aot_id)),)
        if attrs:
            content = (OP, label, None, None, None, attrs, "", module)
        else:
            content = self.shared_content(OP, label, module)
            if plain:
                self.keep_plain_op(type(fn), content)
        return content, module, cut_reasons, self.shared_content(NO_GRAD, "", module)

    def saved_constant(self, fn: Any, nth: int) -> Optional[tuple[str, str, str]]:
        """``(CONSTANT, value, '')`` when the ``nth`` input without gradient of ``fn`` is a
        number, as far as the graph alone tells: a binary op that saved both operands
        (``MulBackward0``, ``DivBackward0``, ...) saved it as a 0-d tensor. None otherwise.

        Ops that save no operand (``AddBackward0``, ``SubBackward0``: ``x + 1e-6``) cannot
        tell a number from a tensor cut off; a recorder can. Read per input without
        gradient only, which most ops have none of.
        """
        operands = self.saved_operands.get(type(fn))
        if operands is None:
            names = self.saved_attr_names(fn)
            both = "self" in names and "other" in names
            operands = self.saved_operands[type(fn)] = (_SAVED_SELF, _SAVED_OTHER) if both else ()
        if not operands:
            return None
        # A binary op: its first input without gradient is "self" only when its first input is one.
        first, *rest = fn.next_functions
        position = nth if first[0] is None else nth + 1
        if position > 1 or not rest:
            return None
        try:
            value = getattr(fn, operands[position])
        except RuntimeError:  # freed by backward(): nothing left to tell by
            return None
        # One look at its metadata tells a number: a 0-d tensor without gradient. A chain of
        # 20,000 x * 1.0001 reads 20,000 of them: the text is kept per value, and the value
        # read with tolist() (half of item()'s time), from host memory only.
        if not _is_tensor(value) or value.ndim != 0 or value.requires_grad:
            return None
        if not value.is_cpu:
            return _DEVICE_CONSTANT
        number = value.tolist()
        found = _NUMBER_TEXTS.get(number) if type(number) is float else None
        if found is None:
            found = (CONSTANT, number_text(number), "")
            if type(number) is float and len(_NUMBER_TEXTS) < _NUMBER_TEXTS_KEPT:
                _NUMBER_TEXTS[number] = found
        return found

    def with_constants(self, content: tuple, constants: list[str]) -> tuple:
        """An op's content with its number operands in its attrs: one tuple per op and values
        (by the content's identity: contents alike are one tuple already)."""
        key = (id(content), *constants)
        found = self.with_numbers.get(key)
        if found is None:
            attrs = content[5] + tuple((CONSTANT_ATTR, text) for text in constants)
            found = self.with_numbers[key] = (*content[:5], attrs, *content[6:])
            self.keep_alive.append(content)  # type: ignore[arg-type]  # its id is a key above
        return found

    def keep_plain_op(self, fn_type: type, content: tuple) -> None:
        if len(self.plain_ops) >= _PLAIN_OPS_KEPT:
            self.plain_ops.clear()
        self.plain_ops[fn_type] = content

    def label_of(self, fn: Any) -> str:
        """A node's label: its name(), less the C++ namespace of nodes such as AccumulateGrad.

        Remembered per type when the label is the type's own name, as it is for
        every node type PyTorch and custom Functions define: then later nodes of
        the type are not asked for their name().
        """
        raw_name = fn.name()
        label = raw_name[len(_CPP_PREFIX):] if raw_name.startswith(_CPP_PREFIX) else raw_name
        if label == type(fn).__name__:
            self.labels[type(fn)] = label
        return label

    def shared_content(self, kind: str, label: str, module: str) -> tuple:
        """The one content tuple of the nodes of ``kind`` with ``label`` in ``module`` and nothing else."""
        content = self.shared.get((kind, label, module))
        if content is None:
            content = self.shared[(kind, label, module)] = (kind, label, None, None, None, (), "", module)
        return content

    def accumulate_grad(self, fn: Any, index: int, attrs: tuple) -> None:
        """An AccumulateGrad node, the leaf tensor it feeds (added the first time) and the edge between."""
        leaf = self.leaf(fn.variable)
        leaf_content = self.contents[leaf]
        owner = leaf_content[-1]  # type: ignore[index]
        if attrs:
            self.contents[index] = (ACCUMULATE_GRAD, _ACCUMULATE_GRAD, None, None, None, attrs, "", owner)
        else:
            self.contents[index] = self.shared_content(ACCUMULATE_GRAD, _ACCUMULATE_GRAD, owner)
        rest = (DATA, *leaf_content[2:4]) if self.collect_shapes else _DATA_LINK  # type: ignore[index]
        self.links.append((leaf, index, rest))

    def output_meta(self, fn: Any, output_nr: int) -> tuple:
        """The rest of a data edge (``Edge[2:]``) carrying output ``output_nr`` of the forward op behind ``fn``:
        its kind, shape and dtype."""
        metas = self.edge_meta.get(fn)
        if metas is None:
            metas = self.edge_meta[fn] = tuple((DATA, *_input_meta(m)) for m in fn._input_metadata)
        return metas[output_nr] if output_nr < len(metas) else _DATA_LINK

    def leaf(self, tensor: torch.Tensor) -> int:
        """The index of a leaf tensor's node, adding the node the first time."""
        key = id(tensor)
        index = self.leaf_index.get(key)
        if index is not None:
            return index
        index = self.leaf_index[key] = len(self.contents)
        self.keep_alive.append(tensor)
        name = self.parameter_names.get(key)
        if name is None and self.parameter_names:
            name = view_name(tensor, self.parameter_names)  # an input's view on which the forward set requires_grad
            if name is None and _views_data(tensor):
                name = UNNAMED_DATA_VIEW  # the same, of an input no one named (no recorder)
        owner = ""
        also = self.aliases.get(key, ()) if self.aliases else ()
        if self.recorder is not None:
            # A named tensor belongs to the module that owns it; an unnamed one to the module
            # whose forward first used it (a tensor made there).
            owner = self.recorder.owner(name) if name else self.recorder.first_used_in(tensor)
            also += self.recorder.leaf_ports(tensor)  # the module calls that took it, by argument name
        kind = LEAF if name is None else PARAMETER
        if tensor.layout is not _STRIDED or tensor.is_nested:  # sparse, nested...: say so
            self.contents.append((kind, name or "", *_tensor_meta(tensor), also, "", owner))
            return index
        # _tensor_meta() spelled out: a model's every parameter comes here once a walk.
        # A strided tensor's sizes are plain ints (symbolic ones exist only while
        # tracing), so they need none of _shape_of's checks.
        dtype, device = tensor.dtype, tensor.device
        self.contents.append(
            (
                kind,
                name or "",
                tuple(tensor.size()),
                _DTYPE_NAMES.get(dtype) or _dtype_name(dtype),
                _DEVICE_NAMES.get(device) or _device_name(device),
                also,
                "",
                owner,
            )
        )
        return index

    # --- saved values (show_attrs / show_saved) ---

    def saved(self, fn: Any, owner: int) -> tuple[tuple[str, str], ...]:
        """Record what ``fn`` saved for backward: text for values, nodes for tensors."""
        attrs: list[tuple[str, str]] = []
        for name in self.saved_attr_names(fn):
            is_tensor = hasattr(fn, _RAW_SAVED_PREFIX + name)
            try:
                value = getattr(fn, _SAVED_PREFIX + name)
            except RuntimeError as error:
                attrs.append((name, self.unreadable(name, error, owner, is_tensor)))
                continue
            attrs.append((name, self.saved_value(name, value, owner)))
        attrs.extend(self.custom_function_saved(fn, owner))
        return tuple(attrs)

    def saved_attr_names(self, fn: Any) -> tuple[str, ...]:
        names = self.saved_names.get(type(fn))
        if names is None:
            names = tuple(a[len(_SAVED_PREFIX):] for a in dir(fn) if a.startswith(_SAVED_PREFIX))
            self.saved_names[type(fn)] = names
        return names

    def saved_value(self, name: str, value: Any, owner: int) -> str:
        if isinstance(value, torch.Tensor):
            self.saved_tensor_node(name, value, owner)
            return SAVED_TENSOR
        if isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in value):
            for i, item in enumerate(value):
                if isinstance(item, torch.Tensor):
                    self.saved_tensor_node(f"{name}[{i}]", item, owner)
            return SAVED_TENSORS
        return str(value)

    def custom_function_saved(self, fn: Any, owner: int) -> list[tuple[str, str]]:
        """A custom autograd.Function's ctx: save_for_backward tensors and plain ctx attributes."""
        # Not hasattr(fn, "_raw_saved_tensors"): after backward() that getter raises
        # RuntimeError, which hasattr() lets through.
        if not isinstance(fn, BackwardCFunction):
            return []
        attrs = []
        try:
            saved_count = len(fn._raw_saved_tensors)
        except RuntimeError:
            # backward() freed them, and with them how many there were: no node to draw.
            attrs.append(("saved_tensors", FREED))
            saved_count = 0
        if saved_count:
            try:
                attrs.append(("saved_tensors", self.saved_value("saved_tensors", fn.saved_tensors, owner)))
            except RuntimeError as error:
                attrs.append(("saved_tensors", self.unreadable("saved_tensors", error, owner, True)))
        for key, value in sorted(getattr(fn, "__dict__", {}).items()):
            if not key.startswith("_"):
                attrs.append((key, self.saved_value(key, value, owner)))
        return attrs

    def unreadable(self, name: str, error: RuntimeError, owner: int, is_tensor: bool) -> str:
        """The text of a saved value autograd refused to hand out; a noted node for a tensor."""
        note = _unreadable_note(error)
        if is_tensor:
            self.saved_tensor_node(name, None, owner, note)
        return f"[{note}]"

    def saved_tensor_node(self, name: str, tensor: Optional[torch.Tensor], owner: int, note: str = "") -> None:
        """Add (or reuse, for a tensor several ops saved) a saved-tensor node tied to its op.

        ``tensor`` is None when it cannot be read; ``note`` then says why.
        """
        if tensor is None:
            index = self.new_index()
            self.contents[index] = (SAVED, name, None, None, None, (), note, "")
        else:
            known = self.saved_index.get(id(tensor))
            if known is None:
                known = self.saved_index[id(tensor)] = self.new_index()
                self.keep_alive.append(tensor)
                self.contents[known] = (SAVED, name, *_tensor_meta(tensor), self.saved_as(tensor), "", "")
            index = known
        self.links.append((owner, index, _SAVED_LINK))

    def saved_as(self, tensor: torch.Tensor) -> tuple[tuple[str, str], ...]:
        """``(('tensor', name),)`` when a saved tensor is a named tensor or a view of one, else ``()``.

        A parameter, buffer or input saved for backward costs no memory of its own
        (it exists anyway), unlike an activation; memory reports leave it out.
        """
        name = self.parameter_names.get(id(tensor))
        if name is None:
            base = getattr(tensor, "_base", None)
            name = None if base is None else self.parameter_names.get(id(base))
        return () if name is None else ((SAVED_TENSOR_OF, name),)


def _unreadable_note(error: RuntimeError) -> str:
    """Why autograd refused to hand out a saved value: freed by backward(), or changed in place.

    PyTorch raises RuntimeError for both and tells them apart only in the message.
    """
    if "modified by an inplace operation" in str(error):
        return MODIFIED_NOTE
    return FREED_NOTE


def _tensor_meta(t: torch.Tensor) -> tuple[Optional[tuple[int, ...]], str, str]:
    """Shape, dtype and device, read from metadata only (no data leaves the device).

    A tensor not laid out as a plain strided array has its layout after the dtype
    (``float32 sparse_coo``, ``float32 nested``), so labels and tooltips say it.
    """
    if t.layout is _STRIDED and not t.is_nested:
        return _shape_of(t), _dtype_name(t.dtype), _device_name(t.device)
    return _shape_of(t), f"{_dtype_name(t.dtype)} {layout_name(t)}", _device_name(t.device)


_STRIDED = torch.strided


def _shape_of(t: Any) -> Optional[tuple[int, ...]]:
    """The shape of a tensor or of autograd's record of one; None for nested tensors."""
    try:
        size = tuple(t.shape)
    except (RuntimeError, TypeError, ValueError, AttributeError):  # strided nested tensors have no shape at all
        return None
    # A jagged nested tensor's ragged dimension is a symbolic int, which int() cannot read.
    return size if all(map(_is_int, size)) else None



# isinstance(s, int) as a C function: all(map(...)) then runs without a Python-level
# generator, which halves the check on the shape of every parameter of a model.
_is_int = int.__instancecheck__


def _input_meta(meta: Any) -> tuple[Optional[tuple[int, ...]], Optional[str]]:
    """Shape and dtype from autograd's record of a tensor an op received or made."""
    return _shape_of(meta), _dtype_name(meta.dtype)


# A model has hundreds of parameters but one or two dtypes and devices: their
# names are kept rather than built again from str() for every tensor.
_DTYPE_NAMES: dict = {}
_DEVICE_NAMES: dict = {}


def _dtype_name(dtype: torch.dtype) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    return name


def _device_name(device: torch.device) -> str:
    name = _DEVICE_NAMES.get(device)
    if name is None:
        name = _DEVICE_NAMES[device] = str(device)
    return name


def count_functions(outputs: Any, limit: int) -> int:
    """The autograd functions behind ``outputs``, counted up to one past ``limit``:
    cheap (no names, shapes or saved values), to refuse a graph before walking it.

    Reading ``next_functions`` gives each function a Python wrapper, which makes
    freeing a long chain recursive: the wrappers go to :func:`deep_graphs.hold`, in
    the order they were found, as a walk's do.

    >>> import torch
    >>> x = torch.ones(1, requires_grad=True)
    >>> count_functions((x * 2).exp(), limit=10)  # ExpBackward0, MulBackward0, AccumulateGrad
    3
    """
    try:
        tensors = [t for _, t in (outputs.tensors if isinstance(outputs, ForwardFailure) else named_tensors(outputs))]
    except GraphvizAutogradError:
        return 0  # the walk says what is wrong with the outputs
    seen: dict[Any, None] = {}  # in the order found: each after one of its consumers
    stack = []
    for tensor in tensors:
        fn = getattr(tensor, "grad_fn", None)
        if fn is not None and fn not in seen:
            seen[fn] = None
            stack.append(fn)
    try:
        while stack and len(seen) <= limit:
            for next_fn, _ in stack.pop().next_functions:
                if next_fn is not None and next_fn not in seen:
                    seen[next_fn] = None
                    stack.append(next_fn)
    finally:
        deep_graphs.hold(seen)
    return len(seen)
