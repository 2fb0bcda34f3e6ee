"""What a torch.compile'd model runs, kept while :func:`~graphviz_autograd.capture.recording.record`
records it: each compiled region's backward graph, what it saved, and the graph breaks between regions.

A compiled model's backward is one opaque ``CompiledFunctionBackward`` node per compiled
region. While a recorder records, two of torch's compile steps are watched (nothing they
return is changed, and the user's backend compiles what it always did):

- AOTAutograd's partition of a region's joint graph into a forward and a backward graph
  (``torch._functorch._aot_autograd.graph_compile._partition_joint_graph_into_fw_bw``): the
  graphs are read into plain :class:`CompiledRegion` records at once, before a compiler
  changes them, under the region's ``aot_id`` (which its ``CompiledFunctionBackward`` node
  carries as ``_forward_cls._aot_id``);
- Dynamo's note of a graph break (``InstructionTranslatorBase.log_graph_break``): its reason
  and the user's source line, as :class:`GraphBreak`.

AOTAutograd's cache would skip the partition of a region compiled in an earlier process, so
it is off while recording. A region Dynamo compiled before recording began is not compiled
again: its node stays opaque and the walk says why (call ``torch._dynamo.reset()`` first).

:func:`open_regions` then puts each region's backward ATen ops into a walked graph in place of
its node: in a module box per region (``compiled region 0``) holding the modules the ops
came from (their forward op's ``nn_module_stack``, matched by ``seq_nr``), the tensors the
region saved as saved-tensor nodes with their bytes, ops the backward recomputes marked, and
a ``graph break`` node between two regions with Dynamo's reason and the user's line.

These are torch internals (tested with torch 2.13): where one is missing, recording goes on
without them and :attr:`CompiledCapture.missing` says which, in one sentence.

>>> region = CompiledRegion(0, ops=(CompiledOp("mm", "aten.mm", "fc", inputs=("tangents_1", "primals_1")),),
...     saved=(SavedInput("primals_1", (4, 4), "float32", 64, 0, "fc"),), tangents=("tangents_1",), outputs=("mm",))
>>> region.saved_bytes, region.module_paths()
(64, ['fc'])
"""

from __future__ import annotations

import itertools
import re
import sys
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional

from ..errors import CompiledCaptureError
from ..graph.autograd_graph import (
    ACCUMULATE_GRAD, CUT, DATA, NO_GRAD, OP, PARAMETER, SAVED, SAVED_BY, SAVED_TENSOR_OF, AutogradGraph, Edge, ModuleInfo, Node,
    dtype_itemsize, parameter_nodes,
)
from ..graph.descriptions import format_bytes

# An op node's attrs key: the compiled region (its aot_id) a CompiledFunctionBackward node runs.
COMPILED_REGION_ATTR = "compiled region"
# An op node's attrs key and value: a forward op the backward runs again instead of saving its result.
RECOMPUTED_ATTR = "recomputed"
RECOMPUTED_TEXT = "forward op run again in backward"
GRAPH_BREAK = "graph break"
# The module box of the k-th region of a walked graph (its ops' modules sit inside it).
REGION_PREFIX = "compiled region"
REGION_TYPE = "torch.compile"


@dataclass(frozen=True)
class CompiledOp:
    """One op of a region's backward graph: its FX ``name``, ``label`` (``aten.mm``), the module
    path of the forward op it came from ('' when unknown), the names of the nodes it reads
    (ops, saved inputs or tangents), and whether it is a forward op the backward recomputes."""

    name: str
    label: str
    module: str = ""
    inputs: tuple[str, ...] = ()
    recomputed: bool = False
    shape: Optional[tuple[int, ...]] = None
    dtype: Optional[str] = None


@dataclass(frozen=True)
class SavedInput:
    """A tensor the forward saved for the backward (a backward graph input that is no tangent):
    its FX ``name``, shape, dtype and bytes (from its meta ``val``), its place among the region's
    inputs when it is one of them (``primals_3``: 2; None for an activation) and the module of
    the forward op that made it."""

    name: str
    shape: Optional[tuple[int, ...]]
    dtype: Optional[str]
    bytes: int
    input_index: Optional[int] = None
    module: str = ""


@dataclass(frozen=True)
class CompiledRegion:
    """The backward graph of one compiled region, as plain data (``aot_id`` names it).

    ``outputs`` holds, per input of the region, the name of the node giving its gradient
    (None for an input without one); ``module_types`` the ``(path, class name)`` of each
    module its forward ops came from; ``forward_ops`` how many ops its forward graph runs.
    """

    aot_id: int
    ops: tuple[CompiledOp, ...] = ()
    saved: tuple[SavedInput, ...] = ()
    tangents: tuple[str, ...] = ()
    outputs: tuple[Optional[str], ...] = ()
    module_types: tuple[tuple[str, str], ...] = ()
    forward_ops: int = 0

    @property
    def saved_bytes(self) -> int:
        """Bytes of every tensor the forward saved for this region's backward (inputs included)."""
        return sum(saved.bytes for saved in self.saved)

    @property
    def recomputed(self) -> int:
        """How many forward ops the backward runs again."""
        return sum(op.recomputed for op in self.ops)

    def module_paths(self) -> list[str]:
        """The module paths of the region's ops and saved tensors, sorted, '' left out."""
        return sorted({op.module for op in self.ops if op.module} | {s.module for s in self.saved if s.module})


@dataclass(frozen=True)
class GraphBreak:
    """Where Dynamo stopped a compiled region and ran Python instead: its ``reason``, the user's
    ``filename``, ``line`` and ``source`` text, and ``before_region``: how many regions had been
    compiled when it was met (the region that ends at it is that one, counting from 0)."""

    reason: str
    filename: str = ""
    line: int = 0
    source: str = ""
    before_region: int = 0
    kind: str = ""  # Dynamo's kind of break ("Failed to trace builtin operator"), when it names one

    @property
    def where(self) -> str:
        """``file.py:12: x.item()`` ('' when Dynamo gave no line)."""
        if not self.filename:
            return ""
        return f"{self.filename}:{self.line}" + (f": {self.source}" if self.source else "")


@dataclass
class CompiledCapture:
    """What one recording saw of compiled code: ``regions`` in the order they were compiled,
    ``graph_breaks`` in the order met (:meth:`distinct_breaks` deduplicates them), and
    ``missing``: the capability this torch lacks, in a sentence ('' when none)."""

    regions: list[CompiledRegion] = field(default_factory=list)
    graph_breaks: list[GraphBreak] = field(default_factory=list)
    missing: str = ""
    watching: bool = False  # whether torch's steps were watched (torch.compile was in use when recording began)

    def region(self, aot_id: int) -> Optional[CompiledRegion]:
        """The region compiled under ``aot_id``, None when it was not seen."""
        return next((r for r in self.regions if r.aot_id == aot_id), None)

    def distinct_breaks(self) -> list[GraphBreak]:
        """Each graph break once (by reason and line), in the order first met."""
        seen: set[tuple[str, str, int]] = set()
        found = []
        for item in self.graph_breaks:
            key = (item.reason, item.filename, item.line)
            if key not in seen:
                seen.add(key)
                found.append(item)
        return found

    def require(self) -> None:
        """Raise :class:`CompiledCaptureError` when this torch cannot show compiled regions."""
        if self.missing:
            raise CompiledCaptureError(self.missing)


# --- watching torch's compile steps ---

_lock = threading.Lock()
_active: list[CompiledCapture] = []  # the captures of the recorders recording now
_originals: dict[str, Any] = {}  # what was replaced, while any capture is active
_cache_patch: list[Any] = []


def _missing_capability() -> str:
    try:
        from torch._dynamo import symbolic_convert
        from torch._functorch._aot_autograd import graph_compile
    except ImportError as error:  # pragma: no cover - depends on the torch installed
        return f"this torch cannot show compiled regions (it has no {error.name}); they stay one CompiledFunctionBackward node."
    if not callable(getattr(graph_compile, "_partition_joint_graph_into_fw_bw", None)):
        return ("this torch has no AOTAutograd partition step to watch (graph_compile._partition_joint_graph_into_fw_bw), "
                "so compiled regions stay one CompiledFunctionBackward node; torch 2.13 has it.")
    if not callable(getattr(symbolic_convert.InstructionTranslatorBase, "log_graph_break", None)):
        return ("this torch has no Dynamo graph-break note to watch (InstructionTranslatorBase.log_graph_break), "
                "so graph breaks are not named; torch 2.13 has it.")
    return ""


def start(capture: CompiledCapture) -> None:
    """Watch torch's compile steps for ``capture`` until :func:`stop`; sets ``capture.missing``
    instead when this torch lacks one of them."""
    if "torch._dynamo" not in sys.modules:
        # Nothing was compiled yet in this process, and importing the compiler takes seconds.
        return
    capture.missing = _missing_capability()
    if capture.missing:
        return
    capture.watching = True
    import torch
    from torch._dynamo import symbolic_convert
    from torch._functorch._aot_autograd import graph_compile

    with _lock:
        _active.append(capture)
        if len(_active) > 1:
            return
        partition = _originals["partition"] = graph_compile._partition_joint_graph_into_fw_bw
        note_break = _originals["log_graph_break"] = symbolic_convert.InstructionTranslatorBase.log_graph_break

        def partition_seen(fx_g: Any, joint_inputs: Any, inner_meta: Any, fw_metadata: Any, aot_config: Any,
                           partition_fn: Callable) -> Any:
            result = partition(fx_g, joint_inputs, inner_meta, fw_metadata, aot_config, partition_fn)
            _keep_region(getattr(aot_config, "aot_id", None), result[0], result[1])
            return result

        def graph_break_seen(self: Any, code_options: Any, reason: str, exc: Any) -> Any:
            if not getattr(exc, "logged", False):
                _keep_break(reason, exc)
            return note_break(self, code_options, reason, exc)

        graph_compile._partition_joint_graph_into_fw_bw = partition_seen
        symbolic_convert.InstructionTranslatorBase.log_graph_break = graph_break_seen  # type: ignore[method-assign]
        # A region found in AOTAutograd's cache is not partitioned again: read it anew while recording.
        patch = torch._functorch.config.patch(enable_autograd_cache=False)
        patch.__enter__()
        _cache_patch.append(patch)


def stop(capture: CompiledCapture) -> None:
    """Stop watching for ``capture``; torch's steps are put back when no recorder watches."""
    if not capture.watching:
        return
    from torch._dynamo import symbolic_convert
    from torch._functorch._aot_autograd import graph_compile

    with _lock:
        if capture in _active:
            _active.remove(capture)
        if _active or not _originals:
            return
        graph_compile._partition_joint_graph_into_fw_bw = _originals.pop("partition")
        symbolic_convert.InstructionTranslatorBase.log_graph_break = _originals.pop("log_graph_break")  # type: ignore[method-assign]
        while _cache_patch:
            _cache_patch.pop().__exit__(None, None, None)


def _keep_region(aot_id: Optional[int], forward: Any, backward: Any) -> None:
    if aot_id is None:
        return
    region = read_region(aot_id, forward, backward)
    for capture in list(_active):
        capture.regions.append(region)


def _keep_break(reason: str, exc: Any) -> None:
    import torch

    stack = getattr(exc, "real_stack", None)
    if stack is None:
        try:
            stack = torch._guards.TracingContext.extract_stack()
        except Exception:  # no tracing context: the break still has its reason
            stack = []
    frame = stack[-1] if len(stack) else None
    for capture in list(_active):
        capture.graph_breaks.append(GraphBreak(
            reason=_short_reason(reason, exc),
            filename=getattr(frame, "filename", "") or "",
            line=getattr(frame, "lineno", 0) or 0,
            source=(getattr(frame, "line", "") or "").strip(),
            before_region=len(capture.regions),
            kind=str(getattr(exc, "gb_type", "") or ""),
        ))


def _short_reason(reason: str, exc: Any) -> str:
    """Dynamo's reason in one line: its kind of break and the explanation, without hints and links."""
    kind = getattr(exc, "gb_type", "") or ""
    explanation = next((line.strip()[len("Explanation:"):].strip() for line in reason.splitlines()
                        if line.strip().startswith("Explanation:")), "")
    if kind and explanation:
        return f"{kind}: {explanation}"
    first = next((line.strip() for line in reason.splitlines() if line.strip()), "")
    return kind or first or "graph break"


# --- reading FX graphs into plain records ---

_PRIMAL = re.compile(r"^primals_(\d+)$")


def read_region(aot_id: int, forward: Any, backward: Any) -> CompiledRegion:
    """A region's forward and backward FX graphs (as AOTAutograd's partition made them) as a
    :class:`CompiledRegion`; nothing of the graphs is kept.

    A backward op's module is that of the forward op with its ``seq_nr`` (backward ops carry
    no ``nn_module_stack`` of their own), else that of the first op it reads that has one; a
    backward op whose name is also a forward op's is one the partitioner chose to recompute
    (or that a checkpoint tagged ``recompute``).
    """
    module_of_seq: dict[int, str] = {}
    module_of_name: dict[str, str] = {}
    types: dict[str, str] = {}
    forward_ops = set()
    for node in forward.graph.nodes:
        path = _module_path(node.meta.get("nn_module_stack"), types)
        if node.op == "call_function":
            forward_ops.add(node.name)
        if path:
            module_of_name[node.name] = path
            seq = node.meta.get("seq_nr")
            if isinstance(seq, int):
                module_of_seq.setdefault(seq, path)
    ops: list[CompiledOp] = []
    saved: list[SavedInput] = []
    tangents: list[str] = []
    outputs: tuple[Optional[str], ...] = ()
    for node in backward.graph.nodes:
        if node.op == "placeholder":
            if node.name.startswith("tangents_"):
                tangents.append(node.name)
                continue
            shape, dtype, size = _tensor_facts(node.meta.get("val"))
            if shape is None:
                continue  # a symbolic size or other number: no memory of its own
            primal = _PRIMAL.match(node.name)
            saved.append(SavedInput(node.name, shape, dtype, size, int(primal.group(1)) - 1 if primal else None,
                                    module_of_name.get(node.name, "")))
        elif node.op == "call_function":
            own = _module_path(node.meta.get("nn_module_stack"), types)
            seq = node.meta.get("seq_nr")
            module = own or (module_of_seq.get(seq, "") if isinstance(seq, int) else "")
            recomputed = node.name in forward_ops or str(node.meta.get("recompute", "")).endswith("RECOMPUTE")
            shape, dtype, _ = _tensor_facts(node.meta.get("val"))
            ops.append(CompiledOp(node.name, _op_label(node.target), module, tuple(_node_names(node.args)),
                                  recomputed, shape, dtype))
        elif node.op == "output":
            returned = node.args[0] if node.args else ()
            outputs = tuple(getattr(item, "name", None) for item in (returned if isinstance(returned, (list, tuple)) else (returned,)))
    # An op no forward op stands for (the sum of a tensor's gradients from its several uses)
    # joins the module of the first op it reads that has one: graph order makes one pass enough.
    module_of_op: dict[str, str] = {}
    for at, op in enumerate(ops):
        if not op.module:
            found = next((module_of_op[name] for name in op.inputs if module_of_op.get(name)), "")
            if found:
                ops[at] = op = replace(op, module=found)
        module_of_op[op.name] = op.module
    return CompiledRegion(aot_id, tuple(ops), tuple(saved), tuple(tangents), outputs,
                          tuple(sorted(types.items())), len(forward_ops))


def _module_path(stack: Any, types: dict[str, str]) -> str:
    """The innermost module path of an ``nn_module_stack`` (``L['self'].h[0].attn`` as ``h.0.attn``),
    noting the class of every module in it in ``types``."""
    if not stack:
        return ""
    path = ""
    for value in stack.values():
        fqn, module_type = value[0], value[1]
        path = module_path_of(str(fqn))
        if path:
            types.setdefault(path, getattr(module_type, "__name__", None) or str(module_type).rpartition(".")[2])
    return path


def module_path_of(fqn: str) -> str:
    """A module path as a model names it, from Dynamo's source text of it.

    A recorder's stand-in forward (see ``Recorder._watch_calls``) reaches each module's own
    forward through its closure: ``.forward.__func__.__closure__[1].cell_contents.__self__``
    leads from a module to itself, and ``L['forward'].__self__`` is the module compiled.

    >>> module_path_of("L['self'].h[0]._modules['attn']"), module_path_of("L['self']._orig_mod.fc"), module_path_of("L['self']")
    ('h.0.attn', 'fc', '')
    >>> module_path_of("L['called'].h.0.forward.__func__.__closure__[1].cell_contents.__self__.attn")
    'h.0.attn'
    >>> module_path_of("L['forward'].__self__.lm_head")
    'lm_head'
    """
    text = re.sub(r"\.forward\.__func__\.__closure__\[\d+\]\.cell_contents\.__self__", "", fqn)
    text = re.sub(r"^[LG]\['[^']*'\](\.__self__)?", "", text)
    text = re.sub(r"\._modules\['([^']*)'\]", r".\1", text)
    text = re.sub(r"\['([^']*)'\]", r".\1", text)
    text = re.sub(r"\[(\d+)\]", r".\1", text)
    text = text.strip(".")
    while text == "_orig_mod" or text.startswith("_orig_mod."):
        text = text[len("_orig_mod."):] if text != "_orig_mod" else ""
    return text


def _node_names(args: Any) -> list[str]:
    """The names of the FX nodes among ``args`` (in lists and tuples too), in order."""
    found: list[str] = []
    pending = [args]
    while pending:
        item = pending.pop()
        if isinstance(item, (list, tuple)):
            pending.extend(reversed(item))
        elif hasattr(item, "op") and hasattr(item, "name"):
            found.append(item.name)
    return found


def _op_label(target: Any) -> str:
    """``aten.mm`` for ``aten.mm.default``: the op without its overload."""
    text = str(getattr(target, "_name", None) or target)
    if "::" in text:
        text = text.replace("::", ".")
    parts = text.split(".")
    if len(parts) == 3 and parts[0] in ("aten", "prims"):
        return ".".join(parts[:2])
    return text


def _tensor_facts(value: Any) -> tuple[Optional[tuple[int, ...]], Optional[str], int]:
    """Shape, dtype name and bytes of a meta ``val`` when it is a tensor of known size."""
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is None or dtype is None:
        return None, None, 0
    try:
        dims = tuple(int(size) for size in shape)
    except (TypeError, ValueError):  # a symbolic size
        return None, None, 0
    name = str(dtype).replace("torch.", "")
    count = 1
    for size in dims:
        count *= size
    return dims, name, count * dtype_itemsize(name)


# --- the regions in a walked graph ---


def region_name(index: int) -> str:
    """The module path of the box of the ``index``-th region: ``compiled region 0``."""
    return f"{REGION_PREFIX} {index}"


def within_region(path: str) -> str:
    """A module path with its region's box taken off: the model's own path.

    >>> within_region("compiled region 1.h.0.attn"), within_region("compiled region 0"), within_region("h.0")
    ('h.0.attn', '', 'h.0')
    """
    if not path.startswith(REGION_PREFIX + " "):
        return path
    return path.partition(".")[2]


def region_of_node(node: Node) -> Optional[int]:
    """The aot_id a walked ``CompiledFunctionBackward`` node runs (see COMPILED_REGION_ATTR), else None."""
    for key, value in node.attrs:
        if key == COMPILED_REGION_ATTR and value.isdigit():
            return int(value)
    return None


def unseen_regions(graph: AutogradGraph) -> list[int]:
    """The aot_ids of the compiled regions still drawn as one opaque node in ``graph``."""
    return [aot_id for node in graph.nodes if node.kind == OP and (aot_id := region_of_node(node)) is not None]


def open_regions(graph: AutogradGraph, capture: CompiledCapture) -> AutogradGraph:
    """``graph`` with each ``CompiledFunctionBackward`` node whose region ``capture`` holds
    replaced by that region's backward ops (see the module's docstring). New nodes take ids
    after the walked ones, in the order of the regions' nodes and their FX graphs.

    A region's incoming edges (one per input of the region, in order) meet the ops that give
    each input its gradient; the ops that read the region's output gradients (its tangents)
    feed what the node fed. Saved tensors hang off the first op that reads them.
    """
    nodes = list(graph.nodes)
    regions: dict[str, CompiledRegion] = {}
    for node in nodes:
        if node.kind == OP:
            aot_id = region_of_node(node)
            region = capture.region(aot_id) if aot_id is not None else None
            if region is not None:
                regions[node.id] = region
    if not regions:
        return graph
    by_id = {node.id: node for node in nodes}
    parameters = {ids[-1]: label for label, ids in parameter_nodes(graph).items()}  # AccumulateGrad -> name
    incoming: dict[str, list[int]] = {node_id: [] for node_id in regions}
    for index, edge in enumerate(graph.edges):
        if edge.target in regions:
            incoming[edge.target].append(index)
    ids = (f"n{i}" for i in itertools.count(len(nodes)))
    added: list[Node] = []
    added_edges: list[Edge] = []
    as_source: dict[str, list[str]] = {}  # region node -> ops its output gradients enter
    as_target: dict[int, list[str]] = {}  # edge index into a region node -> ops giving that input's gradient
    region_index: dict[str, int] = {}
    modules: list[ModuleInfo] = []
    order = sorted(regions, key=lambda node_id: capture.regions.index(regions[node_id]))
    for node_id in order:
        region = regions[node_id]
        index = capture.regions.index(region)
        region_index[node_id] = index
        prefix = region_name(index)
        region_at = len(modules)
        modules.extend(ModuleInfo(f"{prefix}.{path}", type_name) for path, type_name in region.module_types)
        slots = incoming[node_id]
        names = [_input_name(graph.edges[at], by_id, parameters) for at in slots]
        made: dict[str, str] = {}
        for op in region.ops:
            made[op.name] = next(ids)
            attrs = ((RECOMPUTED_ATTR, RECOMPUTED_TEXT),) if op.recomputed else ()
            label = op.label + (" (recomputed)" if op.recomputed else "")
            added.append(Node(made[op.name], OP, label, op.shape, op.dtype, None, attrs, "",
                              _inside(prefix, op.module)))
        saved_ids: dict[str, str] = {}
        activations = 0  # bytes of the saved tensors that are none of the model's parameters or inputs
        for item in region.saved:
            saved_ids[item.name] = next(ids)
            given = names[item.input_index] if item.input_index is not None and item.input_index < len(names) else ""
            attrs = ((SAVED_TENSOR_OF, given),) if given else ()
            added.append(Node(saved_ids[item.name], SAVED, f"{item.name} ({format_bytes(item.bytes)})", item.shape,
                              item.dtype, None, attrs, "", prefix))
            activations += 0 if given else item.bytes
        modules.insert(region_at, ModuleInfo(prefix, region_type(region.saved_bytes, activations)))
        tangents = set(region.tangents)
        entered: list[str] = []
        tied: set[str] = set()
        for op in region.ops:
            for name in op.inputs:
                if name in made:
                    added_edges.append(Edge(made[op.name], made[name]))
                elif name in saved_ids and name not in tied:
                    tied.add(name)
                    added_edges.append(Edge(made[op.name], saved_ids[name], SAVED_BY))
                elif name in tangents and made[op.name] not in entered:
                    entered.append(made[op.name])
        as_source[node_id] = entered
        outputs = region.outputs
        for slot, at in enumerate(slots):
            gradient: Optional[str] = outputs[slot] if len(outputs) == len(slots) else None
            as_target[at] = [made[gradient]] if gradient is not None and gradient in made else []
            if gradient in tangents:  # a gradient passed straight through: what the tangent enters
                as_target[at] = list(entered)
    kept = [node for node in nodes if node.id not in regions]
    edges: list[Edge] = []
    breaks: dict[tuple[str, str], str] = {}
    for at, edge in enumerate(graph.edges):
        source, target = edge.source, edge.target
        if source not in regions and target not in regions:
            edges.append(edge)
            continue
        if edge.kind == SAVED_BY:  # what the opaque node's ctx held: the region's saved inputs say it better
            continue
        sources = as_source[source] if source in regions else [source]
        targets = as_target[at] if target in regions else [target]
        if source in regions and target in regions:
            pair = (source, target)
            if pair not in breaks:
                breaks[pair] = next(ids)
                added.append(_break_node(breaks[pair], capture, region_index[source]))
                edges.extend(Edge(s, breaks[pair], DATA, edge.shape, edge.dtype) for s in sources)
            sources = [breaks[pair]]
        edges.extend(Edge(s, t, edge.kind, edge.shape, edge.dtype) for s in sources for t in targets)
    used = {end for edge in itertools.chain(edges, added_edges) for end in edge[:2]}
    # An input slot without gradient whose region gives it none, and the tensors the opaque
    # node's ctx held, have nothing left to meet.
    kept = [node for node in kept if node.kind not in (NO_GRAD, SAVED) or node.id in used]
    kept = _into_regions(kept, edges, {n.id: n.module for n in added})
    return graph.replace(nodes=tuple(kept + added), edges=tuple(edges + added_edges),
                         modules=tuple(graph.modules) + tuple(modules))


def _into_regions(nodes: list[Node], edges: list[Edge], region_module: dict[str, str]) -> list[Node]:
    """The parameters (and their AccumulateGrad nodes) that only one region reads, moved into
    that region's box of their module, beside the ops that use them, so that the model's module
    boxes are not drawn twice: once inside the region, once outside around its parameters."""
    movable = {node.id: node for node in nodes if node.kind in (PARAMETER, ACCUMULATE_GRAD)}
    if not movable:
        return nodes
    targets: dict[str, list[str]] = {}
    for edge in edges:
        if edge.source in movable:
            targets.setdefault(edge.source, []).append(edge.target)
    moved: dict[str, str] = {}
    # AccumulateGrad nodes first (they feed region ops), then the parameters that feed them.
    for kind in (ACCUMULATE_GRAD, PARAMETER):
        for node_id, node in movable.items():
            if node.kind != kind:
                continue
            homes = {moved.get(t) or region_module.get(t, "") for t in targets.get(node_id, ())}
            regions = {home.partition(".")[0] for home in homes}
            if len(regions) == 1 and "" not in homes:
                region = regions.pop()
                moved[node_id] = f"{region}.{node.module}" if node.module else region
    if not moved:
        return nodes
    return [node._replace(module=moved[node.id]) if node.id in moved else node for node in nodes]


def region_type(saved: int, activations: int) -> str:
    """The words a region's box shows after its name: what it saves, and how much of it is activations.

    >>> region_type(4096, 1024)
    'torch.compile, saves 4.0 KiB: 1.0 KiB activations'
    """
    return f"{REGION_TYPE}, saves {format_bytes(saved)}: {format_bytes(activations)} activations"


def _inside(prefix: str, path: str) -> str:
    return f"{prefix}.{path}" if path else prefix


def _input_name(edge: Edge, by_id: dict[str, Node], parameters: dict[str, str]) -> str:
    """The tensor a region's input is when it exists anyway (so saving it costs nothing, as
    ``saved_bytes_by_op`` counts): the parameter whose AccumulateGrad gives it, or an input without
    gradient (a model input, a buffer); '' for an activation of the model, made by an earlier op."""
    if edge.source in parameters:
        return parameters[edge.source]
    node = by_id.get(edge.source)
    if node is not None and node.kind == PARAMETER:
        return node.label
    if edge.kind == CUT:
        return (node.label if node is not None else "") or "an input without gradient"
    return ""


def _break_node(node_id: str, capture: CompiledCapture, before: int) -> Node:
    """The node drawn between region ``before`` and the region after it: Dynamo's reason and line."""
    found = next((item for item in capture.graph_breaks if item.before_region == before), None)
    if found is None:
        return Node(node_id, OP, GRAPH_BREAK)
    # The file by its name alone: a drawing holds no paths of the machine it was made on.
    where = f"{_file_name(found.filename)}:{found.line}" + (f": {found.source}" if found.source else "")
    attrs = (("reason", found.reason),) + ((("where", where),) if found.filename else ())
    return Node(node_id, OP, break_label(found), attrs=attrs)


def _file_name(path: str) -> str:
    return path.replace("\\", "/").rpartition("/")[2]


def break_label(item: GraphBreak) -> str:
    """The words of a graph break's node: its kind and the user's file and line.

    >>> break_label(GraphBreak("print: no", "/src/model.py", 12, kind="Failed to trace builtin operator"))
    'graph break: Failed to trace builtin operator at model.py:12'
    """
    kind = item.kind or item.reason.partition(":")[0]
    place = f" at {_file_name(item.filename)}:{item.line}" if item.filename else ""
    return f"{GRAPH_BREAK}: {kind}{place}"


def regions_text(capture: CompiledCapture) -> str:
    """The regions and graph breaks of a recording in words, one line each.

    >>> print(regions_text(CompiledCapture([CompiledRegion(3, saved=(SavedInput("x", (2,), "float32", 8),))],
    ...                                    [GraphBreak("print", "m.py", 9, "print(x)")])))
    compiled region 0: 0 backward ops, 1 saved tensor, 8 B saved, 0 recomputed
    graph break: print at m.py:9: print(x)
    """
    lines = []
    for index, region in enumerate(capture.regions):
        count = len(region.saved)
        lines.append(f"{region_name(index)}: {len(region.ops)} backward ops, {count} saved tensor{'' if count == 1 else 's'}, "
                     f"{format_bytes(region.saved_bytes)} saved, {region.recomputed} recomputed")
    for item in capture.distinct_breaks():
        lines.append(f"{GRAPH_BREAK}: {item.reason}" + (f" at {item.where}" if item.where else ""))
    if capture.missing:
        lines.append(capture.missing)
    return "\n".join(lines)
