"""Findings that answer "why doesn't this layer learn?", from a walked graph and from gradients.

Each :class:`Finding` is plain data: a severity (``error``, ``warning``, ``info``),
a code, a one-line message, the ids of the graph nodes it points at and its
subject (a parameter name, a module path, the reason of a cut).

>>> import torch
>>> from torch import nn
>>> model = nn.ModuleDict({"body": nn.Linear(2, 2), "head": nn.Linear(2, 1)})
>>> loss = model["body"](torch.ones(1, 2)).sum()  # the head never runs
>>> [(f.severity, f.code, f.subject) for f in check(loss, model) if f.severity != "info"]
[('warning', 'unused_parameter', 'head.weight'), ('warning', 'unused_parameter', 'head.bias')]
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, NamedTuple, Optional, Sequence, Union

import torch

from ..errors import CheckFailedError, InputTypeError, OptionError, check_choice
from ..graph.autograd_graph import ACCUMULATE_GRAD, DATA, FAILED, INTEGER, OP, INTEGER_RESULT, LEAF, NO_GRAD, PARAMETER, REQUIRES_GRAD_FALSE, SAVED_BY, AutogradGraph, parameter_nodes
from ..graph.style import ERROR, INFO, SEVERITIES, SEVERITY_STYLES, WARNING
from ..capture.recording import Recorder
from ..capture.attribute_names import unregistered_tensors
from ..capture.naming import Params, named_tensors, parameter_names
from ..capture.walking import walk
from ..graph.descriptions import format_bytes, shape_text
from ..views.overlays import Overlay, saved_bytes_by_op, severity_value
from .rules import (
    DEAD_UNITS,
    FROZEN_PARAMETER,
    GRAD_MISSING,
    UNUSED_PARAMETER,
    DEFAULT_DECADES,
    GRAD_NONFINITE,
    GRAD_NORM_OUTLIER,
    GRAD_NORM_SPAN,
    GRAD_NORM_TREND,
    GRAD_ZERO,
    NONFINITE_SEEN,
    SATURATED,
    UPDATE_RATIO,
    StepEvidence,
    judge,
)


# Finding codes.
UNREGISTERED_LEAF = "unregistered_leaf"
GRADIENT_CUT = "gradient_cut"
SAVED_MEMORY = "saved_memory"
# The forward pass raised: the graph is the part that ran (a walked ForwardFailure).
FORWARD_FAILED = "forward_failed"
# Where NaN/Inf is born in a step (checks.nonfinite_origin.find_nonfinite).
NONFINITE_FORWARD = "nonfinite_forward"
NONFINITE_BACKWARD = "nonfinite_backward"
NONFINITE_STEP = "nonfinite_step"
# Modules put into a model after watch() started (training.watching).
UNWATCHED_MODULE = "unwatched_module"

CODES = (
    FORWARD_FAILED,
    UNREGISTERED_LEAF,
    UNUSED_PARAMETER,
    FROZEN_PARAMETER,
    GRADIENT_CUT,
    GRAD_NONFINITE,
    GRAD_MISSING,
    GRAD_ZERO,
    GRAD_NORM_OUTLIER,
    SAVED_MEMORY,
    NONFINITE_FORWARD,
    NONFINITE_BACKWARD,
    NONFINITE_STEP,
    NONFINITE_SEEN,
    DEAD_UNITS,
    SATURATED,
    GRAD_NORM_SPAN,
    GRAD_NORM_TREND,
    UPDATE_RATIO,
    UNWATCHED_MODULE,
)

# Why a no_grad node carries no gradient (its ``note``, set by the forward recorder).
# The first four are calls that stop a gradient the model would otherwise get:
# warnings. The others are inputs that never had one to give: info.
STOPPING_CUTS = {
    "detach": "detach() cuts the gradient here",
    "data": ".data cuts the gradient here",
    "no_grad": "code under torch.no_grad() cuts the gradient here",
    "inference_mode": "code under torch.inference_mode() cuts the gradient here",
    "integer_result": "an integer or bool result carries no gradient, which cuts it here",
}
# How to keep a gradient each stopping cut would end, where removing the call is not it.
KEEP_GRADIENT = {
    "integer_result": "compute it in floating point (a soft mask such as sigmoid(), or softmax() for a choice)",
}
INPUT_CUTS = {
    "buffer": "a buffer, which carries no gradient (expected unless it was meant to be a parameter)",
}
# Data inputs (requires_grad=False) and integer tensors have no gradient to lose:
# every model has them, and a finding for each would bury the ones that matter.
EXPECTED_INPUTS = {REQUIRES_GRAD_FALSE, INTEGER}
FROZEN_CUT = "frozen"

# A gradient norm this many powers of ten away from the median of its peers is flagged
# (checks/rules.py holds the rules of gradients, for check() and watch() alike).
DEFAULT_OUTLIER_DECADES = DEFAULT_DECADES
DEFAULT_TOP_MEMORY = 5


class Finding(NamedTuple):
    """One thing worth knowing about a graph or its gradients.

    ``severity`` is ``"error"``, ``"warning"`` or ``"info"``; ``code`` one of
    :data:`CODES`; ``nodes`` the ids of the graph nodes it points at (empty when
    what it is about is not in the graph, such as an unused parameter);
    ``subject`` what it is about in the model's words; ``step``, for a finding over
    training steps (from ``watch()``), the first step it held at.

    >>> Finding("warning", "grad_zero", "fc.weight: gradient is zero", ("n5",), "fc.weight").to_dict()["nodes"]
    ['n5']
    """

    severity: str
    code: str
    message: str
    nodes: tuple[str, ...] = ()
    subject: str = ""
    step: Optional[int] = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
            "nodes": list(self.nodes),
            "subject": self.subject,
        }
        if self.step is not None:
            data["step"] = self.step
        return data


class Findings(list):
    """What :func:`check` returns: a list of :class:`Finding`, errors first, and
    ``graph``, the graph they were found in (None for gradient-only checks), whose
    node ids the findings use."""

    def __init__(self, findings: Iterable[Finding] = (), graph: Optional[AutogradGraph] = None):
        super().__init__(findings)
        self.graph = graph


def check(
    outputs: Any = None,
    model: Optional[torch.nn.Module] = None,
    params: Params = None,
    recorder: Optional[Recorder] = None,
    *,
    inputs: Any = None,
    backward: bool = False,
    top_memory: int = DEFAULT_TOP_MEMORY,
    outlier_decades: float = DEFAULT_OUTLIER_DECADES,
    collect_saved: bool = True,
    fail_on: Optional[str] = None,
) -> Findings:
    """Findings about the backward graph of ``outputs`` and the gradients of ``model``, errors first.

    ``outputs`` is what :func:`~graphviz_autograd.capture.walking` takes (or a graph it
    returned, walked with the same params). ``model`` (or ``params``, as walk
    takes them) names the parameters: needed for unused parameters, unregistered
    leaves, frozen parameters and gradients. ``recorder`` is passed to the walk.
    ``inputs`` names the forward's inputs (a dict or any nesting of tensors), so
    that an input that requires grad is not taken for a stray weight.

    Gradients: ``backward=True`` computes them from ``outputs`` (a scalar loss)
    with ``torch.autograd.grad``, leaving every ``.grad`` untouched; otherwise the
    parameters' ``.grad`` is read when any is set (after ``loss.backward()``).
    ``check(model=model)`` after ``backward()`` checks gradients alone.

    The list returned is :class:`Findings`: its ``graph`` is the graph walked, whose
    node ids the findings use. ``collect_saved=False`` walks without saved tensors (no
    memory findings), so that node ids match a drawing made without
    ``show_attrs``/``show_saved``.

    ``fail_on`` (``"error"``, ``"warning"`` or ``"info"``) raises
    :class:`~graphviz_autograd.errors.CheckFailedError`, an ``AssertionError``
    listing them, when any finding is that severe or more: in a test,
    ``check(loss, model, backward=True, fail_on="warning")`` asserts that every
    parameter is used, trainable and gets a finite, non-zero gradient.

    >>> import torch
    >>> w = torch.nn.Parameter(torch.ones(2))
    >>> (w * 0).sum().backward()
    >>> [(f.severity, f.code, f.subject) for f in check(params={"w": w})]
    [('warning', 'grad_zero', 'w')]
    """
    if fail_on is not None:
        _check_severity(fail_on)  # before any work
    if isinstance(params, torch.nn.Module) and model is None:
        model, params = params, None
    if model is not None and not isinstance(model, torch.nn.Module):
        raise InputTypeError(
            f"check() takes an nn.Module as model; got {type(model).__name__}. "
            "Pass parameters as params=dict(model.named_parameters()) instead."
        )
    if isinstance(top_memory, bool) or not isinstance(top_memory, int) or top_memory < 0:
        raise OptionError(f"top_memory must be a non-negative integer; got {top_memory!r}.")
    if not (isinstance(outlier_decades, (int, float)) and outlier_decades > 0):
        raise OptionError(f"outlier_decades must be a positive number; got {outlier_decades!r}.")
    known = _KnownTensors(model, params, inputs)
    if recorder is not None:
        known.frozen_in_forward = dict(recorder.frozen_in_forward)
        known.escapes = list(recorder.escapes)
        known.frozen_used = set(recorder.frozen_used)
        if recorder.model is not None:
            known.called = recorder.called_modules
    if outputs is None:
        if backward:
            raise OptionError("check(backward=True) needs outputs to run backward from; pass the loss.")
        if not known.parameters:
            raise OptionError("check() needs outputs, a model or params; pass the loss and the model.")
        if not any(t.grad is not None for t in known.trainable()):
            raise OptionError(
                "check() got no outputs and no parameter has a .grad, so there is nothing to check; "
                "call loss.backward() first, or pass the outputs to check the graph."
            )
        findings = _frozen_findings(known, None) + _gradient_findings(known, _read_grads(known), None, outlier_decades)
        return _found(Findings(_by_severity(findings)), fail_on)

    graph = _as_graph(outputs, known, recorder, collect_saved)
    if not isinstance(outputs, AutogradGraph):
        known.zero_leaf_shapes = _zero_leaf_shapes(outputs, known)
    if backward:
        grads: Optional[dict[int, Optional[torch.Tensor]]] = _compute_grads(outputs, known)
    elif any(t.grad is not None for t in known.trainable()):
        grads = _read_grads(known)
    else:
        grads = None
    findings = examine_graph(graph, known, grads, top_memory=top_memory, outlier_decades=outlier_decades)
    return _found(Findings(findings, graph), fail_on)


def _found(findings: Findings, fail_on: Optional[str]) -> Findings:
    if fail_on is not None:
        raise_on(findings, fail_on)
    return findings


def failing(findings: Iterable[Finding], fail_on: str) -> list[Finding]:
    """The findings whose severity is ``fail_on`` or worse (``"warning"``: errors and warnings).

    >>> failing([Finding("info", "saved_memory", "m"), Finding("error", "grad_nonfinite", "w: NaN")], "warning")
    [Finding(severity='error', code='grad_nonfinite', message='w: NaN', nodes=(), subject='', step=None)]
    """
    _check_severity(fail_on)
    worst = SEVERITIES.index(fail_on)
    return [f for f in findings if SEVERITIES.index(f.severity) <= worst]


def raise_on(findings: list[Finding], fail_on: str, what: str = "check()") -> list[Finding]:
    """Raise :class:`CheckFailedError` listing the findings at or above ``fail_on``; else return ``findings``."""
    bad = failing(findings, fail_on)
    if bad:
        lines = "\n".join(f"  {f.severity} {f.code} {f.subject or '-'}: {f.message}" for f in bad)
        count = f"{len(bad)} finding{'s' if len(bad) != 1 else ''}"
        raise CheckFailedError(f"{what} found {count} at or above {fail_on!r}:\n{lines}", bad)
    return findings


def _check_severity(fail_on: str) -> bool:
    check_choice("fail_on", fail_on, SEVERITIES, ", ".join(map(repr, SEVERITIES)))
    return True


def examine_graph(
    graph: AutogradGraph,
    known: "_KnownTensors",
    grads: Optional[Mapping[int, Optional[torch.Tensor]]] = None,
    *,
    top_memory: int = DEFAULT_TOP_MEMORY,
    outlier_decades: float = DEFAULT_OUTLIER_DECADES,
) -> list[Finding]:
    """Findings about a walked graph, and about ``grads`` (id of parameter -> gradient) when given."""
    index = _GraphIndex(graph)
    findings: list[Finding] = failure_findings(graph)
    if known.names_leaves:
        findings += _unregistered_findings(index, known)
    unused: list[Finding] = []
    if known.parameters:
        unused = _unused_findings(index, known)
        findings += unused
        findings += _frozen_findings(known, index)
    # A cut that leaves no parameter without a path to the outputs keeps none from
    # learning (a target, a stop-gradient on purpose): worth knowing, not a warning. Nor
    # is a cut in one module while the unused parameters are in modules beside it (an
    # unused pooler beside a straight-through estimator): what it stops is not theirs.
    # And a parameter of a module whose forward never ran (a vision tower given no image) was
    # stranded by no cut: only one that ran, or that a cut names (weight.data), can be.
    stranded = [f.subject.rpartition(".")[0] for f in unused if _may_be_cut_off(f.subject, known.called, index)] \
        if known.parameters else None
    findings += _cut_findings(index, stranded, bool(unused))
    findings += _escape_findings(known, stranded, bool(unused))
    if grads is not None:
        findings += _gradient_findings(known, grads, index, outlier_decades)
    findings += _memory_findings(index, top_memory)
    return _by_severity(findings)


# --- what the caller told us -------------------------------------------------------


class _KnownTensors:
    """Parameters (grouped by tensor, so tied weights are one), inputs, and stray leaves.

    A stray leaf is a tensor that requires grad, kept in a module attribute (a
    plain list, dict or tensor attribute) but not registered as a parameter.
    """

    def __init__(self, model: Optional[torch.nn.Module], params: Params, inputs: Any):
        self.model = model
        pairs: list[tuple[str, torch.Tensor]] = []
        buffers: list[tuple[str, torch.Tensor]] = []
        if model is not None:
            pairs += list(model.named_parameters(remove_duplicate=False))
            buffers += list(model.named_buffers(remove_duplicate=False))
        data: list[tuple[str, torch.Tensor]] = []
        if params is not None:
            parameter_names(params)  # validates, with the walk's messages
            if isinstance(params, Mapping):
                given: Iterable[Any] = params.items()
            elif isinstance(params, torch.nn.Module):  # params= a second module beside model=
                given = params.named_parameters(remove_duplicate=False)
            else:
                given = params
            for name, tensor in given:
                # A plain tensor without grad among params (an input, a buffer) names a leaf, not a weight.
                is_weight = isinstance(tensor, torch.nn.Parameter) or tensor.requires_grad
                (pairs if is_weight else data).append((str(name), tensor))
        self.parameters: dict[str, torch.Tensor] = {}
        for name, tensor in pairs:
            self.parameters.setdefault(str(name), tensor)
        # Names of one tensor, in order: the first is the one the walk shows.
        groups: dict[int, list[str]] = {}
        self.tensors: dict[int, torch.Tensor] = {}
        for name, tensor in self.parameters.items():
            groups.setdefault(id(tensor), []).append(name)
            self.tensors[id(tensor)] = tensor
        self.groups = groups
        self.inputs = dict(data)
        if inputs is not None:
            self.inputs.update(named_tensors(inputs))
        self.buffers = dict(buffers)
        self.stray = self._stray_tensors() if model is not None else {}
        # What a recorded forward pass saw beyond the graph (set by check()).
        self.frozen_in_forward: dict[str, str] = {}
        # The modules whose forward ran, from a recorder (None: not known).
        self.called: Optional[frozenset[str]] = None
        # Shapes of the leaves outside the model that hold only zeros (a decoder's zero start made in forward).
        self.zero_leaf_shapes: set[tuple[int, ...]] = set()
        self.escapes: list[tuple[str, str, str]] = []
        self.frozen_used: set[str] = set()

    @property
    def names_leaves(self) -> bool:
        """Whether every leaf that requires grad should have a name: a model or parameters were given."""
        return self.model is not None or bool(self.parameters)

    def trainable(self) -> list[torch.Tensor]:
        return [t for t in self.tensors.values() if t.requires_grad]

    def walk_names(self) -> dict[str, torch.Tensor]:
        names = dict(self.parameters)
        taken = {id(t) for t in names.values()}
        for source in (self.buffers, self.inputs, self.stray):
            for name, tensor in source.items():
                if id(tensor) not in taken and name not in names:
                    names[name] = tensor
                    taken.add(id(tensor))
        return names

    def module_of(self, name: str) -> str:
        """'fc (Linear)' for 'fc.weight'; 'the model' for a top-level name."""
        path = name.rpartition(".")[0]
        type_name = ""
        if self.model is not None:
            try:
                type_name = type(self.model.get_submodule(path)).__name__
            except (AttributeError, TypeError):
                type_name = ""
        if not path:
            return f"the model ({type_name})" if type_name else "the model"
        return f"{path} ({type_name})" if type_name else path

    def _stray_tensors(self) -> dict[str, torch.Tensor]:
        assert self.model is not None
        return {
            name: tensor
            for name, tensor in unregistered_tensors(self.model).items()
            if tensor.requires_grad and tensor.is_leaf
        }


def _as_graph(outputs: Any, known: _KnownTensors, recorder: Optional[Recorder], collect_saved: bool) -> AutogradGraph:
    if isinstance(outputs, AutogradGraph):
        if known.parameters and not outputs.params_given:
            raise OptionError(
                "check() was given a graph walked without parameter names, so it cannot tell "
                "parameters apart; walk it with walk(outputs, model) or pass the outputs instead."
            )
        return outputs
    names = known.walk_names() if (known.names_leaves or known.inputs) else None
    return walk(outputs, names, collect_saved=collect_saved, recorder=recorder)


def _zero_leaf_shapes(outputs: Any, known: _KnownTensors) -> set[tuple[int, ...]]:
    """The shapes of the leaves that require grad, are no known tensor and hold only zeros
    (a shape also held by a leaf that is not all zero is left out): made in forward as a
    start of zeros (MaskFormer's decoder input), such a leaf is no weight lost."""
    known_ids = {id(t) for t in known.tensors.values()}
    zero: set[tuple[int, ...]] = set()
    other: set[tuple[int, ...]] = set()
    stack = [t.grad_fn for _, t in named_tensors(outputs) if t.grad_fn is not None]
    seen: dict[int, Any] = {}  # id -> the node's wrapper, held: an id is only unique while its object lives
    while stack:
        function = stack.pop()
        if function is None or id(function) in seen:
            continue
        seen[id(function)] = function
        variable = getattr(function, "variable", None)
        if isinstance(variable, torch.Tensor) and id(variable) not in known_ids:
            shape = tuple(variable.shape)
            with torch.no_grad():
                is_zero = variable.numel() > 0 and not variable.is_meta and not bool(variable.detach().any())
            (zero if is_zero else other).add(shape)
        stack.extend(next_function for next_function, _ in getattr(function, "next_functions", ()))
    return zero - other


def _read_grads(known: _KnownTensors) -> dict[int, Optional[torch.Tensor]]:
    return {key: tensor.grad for key, tensor in known.tensors.items() if tensor.requires_grad}


def _compute_grads(outputs: Any, known: _KnownTensors) -> dict[int, Optional[torch.Tensor]]:
    if isinstance(outputs, AutogradGraph):
        raise OptionError("check(backward=True) needs the loss tensor, not a walked graph; pass the loss.")
    tensors = [t for _, t in named_tensors(outputs) if t.grad_fn is not None or t.requires_grad]
    if len(tensors) != 1 or tensors[0].numel() != 1:
        shapes = ", ".join(str(tuple(t.shape)) for t in tensors[:3]) or "none"
        raise OptionError(
            f"check(backward=True) needs one scalar output (a loss); got tensors of shape {shapes}. "
            "Pass the loss, or reduce the output first (output.sum())."
        )
    keys = [key for key, t in known.tensors.items() if t.requires_grad]
    if not keys:
        return {}
    # autograd.grad rather than backward(): every .grad stays as the caller left it.
    grads = torch.autograd.grad(
        tensors[0], [known.tensors[k] for k in keys], retain_graph=True, allow_unused=True
    )
    return dict(zip(keys, grads))


# --- the graph, indexed ------------------------------------------------------------


class _GraphIndex:
    def __init__(self, graph: AutogradGraph):
        self.graph = graph
        self.parameter_nodes: dict[str, str] = {}
        for node in graph.nodes:
            if node.kind == PARAMETER:
                self.parameter_nodes.setdefault(node.label, node.id)
        self.accumulator: dict[str, str] = {}  # leaf node id -> its AccumulateGrad's id
        self.saved_owner: dict[str, str] = {}  # saved node id -> the first op that saved it
        kinds = {node.id: node.kind for node in graph.nodes}
        for edge in graph.edges:
            if edge.kind == DATA and kinds.get(edge.target) == ACCUMULATE_GRAD:
                self.accumulator.setdefault(edge.source, edge.target)
            elif edge.kind == SAVED_BY:
                self.saved_owner.setdefault(edge.target, edge.source)
        self.recorded = bool(graph.modules) or any(n.kind == NO_GRAD and n.note for n in graph.nodes)

    def nodes_of(self, names: Iterable[str]) -> tuple[str, ...]:
        """The parameter node of the first of ``names`` in the graph, and its AccumulateGrad."""
        for name in names:
            node_id = self.parameter_nodes.get(name)
            if node_id is not None:
                acc = self.accumulator.get(node_id)
                return (node_id, acc) if acc else (node_id,)
        return ()


def failure_findings(graph: AutogradGraph) -> list[Finding]:
    """An error for the call a forward pass stopped at, when ``graph`` is the graph of one
    that raised (a walked :class:`~graphviz_autograd.capture.recording.ForwardFailure`)."""
    found = []
    for node in graph.nodes:
        if node.kind == OP and node.note == FAILED:
            attrs = dict(node.attrs)
            where = f"in {node.module}" if node.module else "at the top level"
            at = f" at {attrs['at']}" if "at" in attrs else ""
            given = "; ".join(value for key, value in node.attrs if key == "input")
            found.append(Finding(
                ERROR, FORWARD_FAILED,
                f"The forward pass stopped at {node.label} {where}{at}: {attrs.get('error', 'it raised')}"
                f"{' (given ' + given + ')' if given else ''}. The graph holds what ran before it.",
                (node.id,), node.label))
    return found


def _by_severity(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: SEVERITIES.index(f.severity))


# --- structural findings -----------------------------------------------------------


def _registration_fix(name: str) -> str:
    """How to register a stray leaf, from the attribute path that holds it."""
    if "]." in name:  # layers[0].weight: a module kept in a plain list or dict
        return "keep such modules in nn.ModuleList / nn.ModuleDict instead of a plain list or dict"
    if name.endswith("]"):  # weights[0]: a tensor kept in a plain list or dict
        return "keep such tensors in nn.ParameterList / nn.ParameterDict instead of a plain list or dict"
    return "wrap it in nn.Parameter (nn.ParameterList / nn.ParameterDict for a list or dict) or call register_parameter()"


def _unregistered_findings(index: _GraphIndex, known: _KnownTensors) -> list[Finding]:
    findings = []
    for node in index.graph.nodes:
        if node.kind == LEAF and node.module:
            what = f"An unnamed leaf tensor of shape {_shape(node.shape)}, first used in the forward of {node.module},"
            subject = f"(unnamed {_shape(node.shape)})"
        elif node.kind == LEAF:
            what = (
                f"An unnamed leaf tensor of shape {_shape(node.shape)} (made in forward, or kept where "
                f"the model's attributes do not reach)"
            )
            subject = f"(unnamed {_shape(node.shape)})"
        elif node.kind == PARAMETER and node.label in known.stray:
            what = f"{node.label} (shape {_shape(node.shape)})"
            subject = node.label
        else:
            continue
        acc = index.accumulator.get(node.id)
        severity = ERROR
        if node.kind == LEAF and node.shape is not None and tuple(node.shape) in known.zero_leaf_shapes:
            # Zeros made in forward with requires_grad (a decoder's start, a trick for checkpointing):
            # no weight is lost; what it stands in for, if anything, the gradient rules name.
            severity = WARNING
            fix = (f"it holds only zeros (made in the forward of {node.module or 'the model'}?): a start of zeros needs no "
                   "requires_grad, and if it stands in for a computation the layers before it get no gradient")
        elif node.kind == LEAF and node.module:
            fix = f"make it an nn.Parameter of {node.module} in its __init__ (one made in forward is new on every call)"
        else:
            fix = _registration_fix(node.label if node.kind == PARAMETER else "")
        findings.append(
            Finding(
                severity,
                UNREGISTERED_LEAF,
                f"{what} requires grad and feeds the graph but is not a parameter of the model, so the "
                f"optimizer built from model.parameters() never sees it and it never changes: {fix}.",
                (node.id, acc) if acc else (node.id,),
                subject,
            )
        )
    return findings


def _unused_findings(index: _GraphIndex, known: _KnownTensors) -> list[Finding]:
    findings = []
    for key, names in known.groups.items():
        if not known.tensors[key].requires_grad or any(n in index.parameter_nodes for n in names):
            continue
        tied = f" (also named {', '.join(names[1:])})" if len(names) > 1 else ""
        findings.append(
            Finding(
                WARNING,
                UNUSED_PARAMETER,
                f"{names[0]}{tied} of {known.module_of(names[0])} is never reached from the outputs: it gets "
                f"no gradient and will not train. Use it in the loss, or freeze it if that is intended.",
                (),
                names[0],
            )
        )
    return findings


def _frozen_findings(known: _KnownTensors, index: Optional[_GraphIndex]) -> list[Finding]:
    cuts: dict[str, list[str]] = {}
    if index is not None:
        for node in index.graph.nodes:
            if node.kind == NO_GRAD and node.note == FROZEN_CUT:
                cuts.setdefault(node.label.partition(" ")[2], []).append(node.id)
    recorded = index is not None and index.recorded
    findings = []
    for key, names in known.groups.items():
        if known.tensors[key].requires_grad:
            continue
        nodes = tuple(i for name in names for i in cuts.get(name, ()))
        frozen_by = next((known.frozen_in_forward[n] for n in names if n in known.frozen_in_forward), None)
        if frozen_by is not None:
            where = f"in {frozen_by}" if frozen_by else "at the top level"
            findings.append(Finding(
                WARNING, FROZEN_PARAMETER,
                f"{names[0]} of {known.module_of(names[0])} was frozen by requires_grad_(False) inside the "
                f"forward ({where}): from then on it gets no gradient and will not train; freeze it once "
                f"before training if that is intended, or remove the call.",
                nodes, names[0]))
            continue
        if recorded and not nodes and not known.frozen_used.intersection(names):
            continue  # the recorder saw every use, and this one was not used
        if recorded:
            message = (
                f"{names[0]} of {known.module_of(names[0])} is frozen (requires_grad=False): the forward "
                f"uses it, but it gets no gradient and will not train."
            )
        else:
            message = (
                f"{names[0]} of {known.module_of(names[0])} is frozen (requires_grad=False): it gets no "
                f"gradient and will not train; fine if that is intended."
            )
        findings.append(Finding(INFO, FROZEN_PARAMETER, message, nodes, names[0]))
    return findings


def _may_be_cut_off(name: str, called: Optional[frozenset[str]], index: "_GraphIndex") -> bool:
    """Whether parameter ``name``, unused, may have been stranded by a cut: its module (or one
    inside it) ran, or a cut in the graph names it; always when what ran is not known."""
    if called is None:
        return True
    module = name.rpartition(".")[0]
    if not module or module in called or any(path.startswith(module + ".") for path in called):
        return True
    return any(node.kind == NO_GRAD and node.label.startswith(name) for node in index.graph.nodes)


def _harmless(module: str, stranded: Optional[Sequence[str]]) -> bool:
    """Whether a cut in ``module`` keeps no parameter from learning: ``stranded`` are the
    modules of the parameters without a path to the outputs (None: parameters unknown). A
    cut can strand only those in its module, within it or around it."""
    if stranded is None:
        return False
    return not any(_nested(module, other) for other in stranded)


def _nested(a: str, b: str) -> bool:
    """Whether module path ``a`` is ``b``, inside it or around it ('' is around all)."""
    return not a or not b or a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _cut_findings(index: _GraphIndex, stranded: Optional[Sequence[str]] = None, any_unused: bool = False) -> list[Finding]:
    """One finding per distinct cut (reason, label, module), pointing at all its nodes.

    A cut that would stop gradients is info rather than a warning when it strands no
    parameter (see :func:`_harmless`).
    """
    groups: dict[tuple[str, str, str], list[str]] = {}
    for node in index.graph.nodes:
        if node.kind == NO_GRAD and node.note and node.note != FROZEN_CUT and node.note not in EXPECTED_INPUTS:
            groups.setdefault((node.note, node.label, node.module), []).append(node.id)
    findings = []
    for (reason, text, module), nodes in groups.items():
        where = f"in {module}" if module else "at the top level"
        subject = text or reason
        harmless = _harmless(module, stranded)
        if reason in STOPPING_CUTS:
            cut = STOPPING_CUTS[reason]
            if text.startswith("torch.tensor("):
                cut = f"{text} copies the values without their history, which cuts the gradient here"
            elif reason == INTEGER_RESULT:
                cut = f"{text}: {cut}"
            fix = KEEP_GRADIENT.get(reason, "remove it")
            if harmless:
                still = ("every parameter still gets a gradient along another path" if not (stranded or any_unused)
                         else "the parameters without a gradient are in other modules")
                message = (
                    f"{cut} ({where}), but {still}: fine for a target, a mask or a stop-gradient; "
                    f"{fix} if that was not the intent."
                )
                severity = INFO
            else:
                message = (
                    f"{cut} ({where}): nothing before it gets a gradient along this path; "
                    f"{fix} if the layers before should learn."
                )
                severity = WARNING
        else:
            what = INPUT_CUTS.get(reason, f"no gradient ({reason})")
            message = f"{subject} ({where}) is {what}." if reason in INPUT_CUTS else f"{subject} ({where}) carries {what}."
            severity = INFO
        if len(nodes) > 1:
            message = message[:-1] + f"; {len(nodes)} places."
        findings.append(Finding(severity, GRADIENT_CUT, message, tuple(nodes), subject))
    return findings


def _escape_findings(known: _KnownTensors, stranded: Optional[Sequence[str]], any_unused: bool = False) -> list[Finding]:
    """Tensors that require grad turned into Python numbers during the recorded forward (``.item()``)."""
    groups: dict[tuple[str, str, str], int] = {}
    for escape in known.escapes:
        groups[escape] = groups.get(escape, 0) + 1
    findings = []
    for (call, name, module), count in groups.items():
        what = f"{name}{call}" if name and call.startswith(".") else f"{call[:-1]}{name})" if name else call
        where = f"in {module}" if module else "at the top level"
        times = f" ({count} times)" if count > 1 else ""
        harmless = _harmless(module, stranded)
        if harmless:
            message = (
                f"{what} ({where}){times} turns a tensor into Python or NumPy values, which carry no gradient; "
                f"{'every parameter still gets one along another path' if not (stranded or any_unused) else 'the parameters without one are in other modules'}, "
                "so fine if intended."
            )
        else:
            message = (
                f"{what} ({where}){times} turns a tensor into Python or NumPy values, so nothing before it "
                f"gets a gradient along this path; keep it a tensor if the layers before should learn."
            )
        findings.append(Finding(INFO if harmless else WARNING, GRADIENT_CUT, message, (), what))
    return findings


# --- gradients ---------------------------------------------------------------------


def gradient_norms(params: Params) -> dict[str, float]:
    """The 2-norm of each parameter's ``.grad`` by name: ``nan`` when it holds NaN or Inf; no entry without one.

    >>> w = torch.nn.Parameter(torch.ones(2))
    >>> (3 * w).sum().backward()
    >>> round(gradient_norms({"w": w})["w"], 3)
    4.243
    """
    known = _KnownTensors(params if isinstance(params, torch.nn.Module) else None,
                          None if isinstance(params, torch.nn.Module) else params, None)
    norms = {}
    for key, names in known.groups.items():
        grad = known.tensors[key].grad
        health = _grad_health(grad) if grad is not None else None
        if health is not None:
            nonfinite, norm = health
            for name in names:
                norms[name] = math.nan if nonfinite else norm
    return norms


def _grad_health(grad: torch.Tensor) -> Optional[tuple[int, float]]:
    """(count of NaN/Inf elements, 2-norm of the finite gradient); None when it cannot be read."""
    try:
        values = grad.detach()
        if values.is_sparse:
            values = values.coalesce().values()
        if values.device.type == "meta":
            return None
        nonfinite = int((~torch.isfinite(values)).sum())
        if nonfinite:
            return nonfinite, math.nan
        return 0, float(torch.linalg.vector_norm(values, dtype=torch.float64))
    except (RuntimeError, TypeError, NotImplementedError):
        return None


def _gradient_findings(
    known: _KnownTensors,
    grads: Mapping[int, Optional[torch.Tensor]],
    index: Optional[_GraphIndex],
    outlier_decades: float,
) -> list[Finding]:
    findings = []
    norms: dict[str, float] = {}
    counts: dict[str, tuple[int, int]] = {}
    rounding: dict[str, float] = {}
    for key, names in known.groups.items():
        if not known.tensors[key].requires_grad:
            continue
        name = names[0]
        nodes = index.nodes_of(names) if index is not None else ()
        grad = grads.get(key)
        if grad is None:
            used = bool(nodes) if index is not None else None
            if used is False:
                continue  # an unused_parameter finding says why
            if used:
                findings.append(Finding(
                    ERROR, GRAD_MISSING,
                    f"{name} is in the graph but has no gradient: backward() ran on another output, or its "
                    f".grad was cleared (zero_grad()) after it.",
                    nodes, name))
            else:
                findings.append(Finding(
                    WARNING, GRAD_MISSING,
                    f"{name} of {known.module_of(name)} got no gradient from backward(): the loss does not "
                    f"depend on it, so it will not train.",
                    nodes, name))
            continue
        health = _grad_health(grad)
        if health is None:
            continue
        nonfinite, norm = health
        norms[name] = math.nan if nonfinite else norm
        if nonfinite:
            counts[name] = (nonfinite, grad.numel())
        rounding[name] = _rounding_decades(grad)
    evidence = StepEvidence(
        grad_norms=norms,
        layers=_layers(known),
        peers=_peer_roles(known),
        owners={name: known.module_of(name) for name in norms},
        rounding=rounding,
        nonfinite={"gradient": [name for name in norms if name in counts]},
        counts=counts,
        sizes={names[0]: known.tensors[key].numel() for key, names in known.groups.items() if names[0] in norms},
    )
    keys = {names[0]: key for key, names in known.groups.items()}
    for condition in judge(evidence, outlier_decades):
        nodes = tuple(
            node for name in condition.points_at if name in keys and index is not None
            for node in index.nodes_of(known.groups[keys[name]])
        )
        findings.append(Finding(condition.severity, condition.code, f"{condition.text}; {condition.advice}.", nodes, condition.subject))
    return findings


def _layers(known: _KnownTensors) -> list[tuple[str, list[str]]]:
    """Modules holding parameters (by their first names), in the model's order of definition,
    which is the order most forwards run them in."""
    layers: dict[str, list[str]] = {}
    if known.model is not None:
        for path, module in known.model.named_modules():
            if any(True for _ in module.parameters(recurse=False)):
                layers[path] = []
    for key, names in known.groups.items():
        if known.tensors[key].requires_grad:
            layers.setdefault(names[0].rpartition(".")[0], []).append(names[0])
    return [(path, names) for path, names in layers.items() if names]


def _peer_roles(known: _KnownTensors) -> dict[str, str]:
    if known.model is None:
        return {}
    types = {path: type(module).__name__ for path, module in known.model.named_modules()}
    return peer_roles([names[0] for names in known.groups.values()], types)


def peer_roles(names: Sequence[str], types: Mapping[str, str]) -> dict[str, str]:
    """Each parameter's role among alike blocks: its name with the index of each block in
    a list of alike blocks written ``*``; '' for a parameter in no such list. ``types``
    maps each module path to its class name. The gradients of one role are compared with
    each other: a block behind a small layer scale is not held against a stem or a head.

    >>> types = {"h": "ModuleList", "h.0": "Block", "h.1": "Block", "head": "Linear"}
    >>> peer_roles(["h.0.weight", "h.1.weight", "head.weight"], types)
    {'h.0.weight': 'h.*.weight', 'h.1.weight': 'h.*.weight', 'head.weight': ''}
    """
    roles = {}
    for pattern, members in repeated_module_patterns([n.rpartition(".")[0] for n in names], types).items():
        if "*" in pattern:
            for path in members:
                roles[path] = pattern
    return {
        name: f"{roles[name.rpartition('.')[0]]}.{name.rpartition('.')[2]}" if name.rpartition(".")[0] in roles else ""
        for name in names
    }


def _rounding_decades(grad: Optional[torch.Tensor]) -> float:
    if grad is None:
        return math.inf
    return rounding_decades(grad.dtype)


def rounding_decades(dtype: torch.dtype) -> float:
    """How many decades below its peers a gradient of ``dtype`` is rounding alone: two less
    than the digits its dtype holds (4.9 for float32, 0.1 for bfloat16).

    A gradient that is zero in exact arithmetic (the key bias of an attention, a bias a
    batch norm takes away) comes out of backward() as the rounding error of long sums of
    larger terms, some 5 to 10 decades below the others in float32: no vanishing
    gradient, which shrinks a few decades a layer.

    >>> round(rounding_decades(torch.float32), 1)
    4.9
    """
    if not dtype.is_floating_point:
        return math.inf
    return -math.log10(torch.finfo(dtype).eps) - 2.0


# --- memory ------------------------------------------------------------------------


def saved_bytes_by_module(graph: AutogradGraph) -> dict[str, tuple[int, int, tuple[str, ...]]]:
    """Bytes of tensors saved for backward per module: (bytes, tensors, ids of the ops that saved them).

    Counts what :func:`~graphviz_autograd.views.overlays.saved_bytes_by_op` counts,
    grouped by the module of each op. Needs a graph walked with
    ``collect_saved=True``; ``''`` is the top level.
    """
    sizes, _, tensors = saved_bytes_by_op(graph)
    modules: dict[str, dict[str, Any]] = {}
    for op_id, size in sizes.items():
        entry = modules.setdefault(graph.node(op_id).module, {"bytes": 0, "tensors": 0, "ops": []})
        entry["bytes"] += size
        entry["tensors"] += tensors[op_id]
        entry["ops"].append(op_id)
    return {path: (e["bytes"], e["tensors"], tuple(e["ops"])) for path, e in modules.items()}


def _memory_findings(index: _GraphIndex, top: int) -> list[Finding]:
    by_module = saved_bytes_by_module(index.graph)
    total = sum(b for b, _, _ in by_module.values())
    if not total or not top:
        return []
    groups = repeated_module_groups(by_module, {info.path: info.type_name for info in index.graph.modules})
    ranked = sorted(groups.items(), key=lambda item: (-item[1][0], item[0]))[:top]
    findings = []
    for path, (size, count, ops, repeats) in ranked:
        where = path or ("the top level" if len(by_module) > 1 else "the graph")
        if repeats > 1:
            where = f"{path} ×{repeats}"
        findings.append(Finding(
            INFO, SAVED_MEMORY,
            f"{where} saves {format_bytes(size)} for backward in {count} tensor{'s' if count != 1 else ''} "
            f"({100 * size / total:.0f}% of {format_bytes(total)}; parameters and inputs not counted).",
            ops, path))
    return findings


def repeated_module_groups(
    by_module: Mapping[str, tuple[int, int, tuple[str, ...]]], types: Mapping[str, str]
) -> dict[str, tuple[int, int, tuple[str, ...], int]]:
    """Modules that differ only by their index in a list of alike blocks (``layers.0.mlp``,
    ``layers.1.mlp``) summed under one pattern (``layers.*.mlp``): (bytes, tensors, ops, repeats).

    ``types`` maps each module path to its class name: an index is replaced by ``*``
    only in a container whose children are all of one class (a ModuleList of
    blocks), not in a Sequential of different layers.

    >>> types = {"h": "ModuleList", "h.0": "Block", "h.1": "Block", "h.0.mlp": "MLP", "h.1.mlp": "MLP"}
    >>> repeated_module_groups({"h.0.mlp": (4, 1, ("n1",)), "h.1.mlp": (4, 1, ("n2",)), "head": (2, 1, ("n3",))}, types)
    {'h.*.mlp': (8, 2, ('n1', 'n2'), 2), 'head': (2, 1, ('n3',), 1)}
    """
    groups: dict[str, tuple[int, int, tuple[str, ...], int]] = {}
    for pattern, paths in repeated_module_patterns(by_module, types).items():
        size = sum(by_module[p][0] for p in paths)
        count = sum(by_module[p][1] for p in paths)
        ops = tuple(op for p in paths for op in by_module[p][2])
        groups[pattern if len(paths) > 1 else paths[0]] = (size, count, ops, len(paths))
    return groups


def repeated_module_patterns(paths: Iterable[str], types: Mapping[str, str]) -> dict[str, list[str]]:
    """``paths`` grouped by the pattern they share when each index in a list of alike
    blocks is written ``*`` (``layers.0.mlp`` and ``layers.1.mlp`` under ``layers.*.mlp``),
    in the order of their first path.

    ``types`` maps each module path to its class name: an index is replaced by ``*``
    only in a container whose children are all of one class (a ModuleList of
    blocks), not in a Sequential of different layers.

    >>> types = {"h": "ModuleList", "h.0": "Block", "h.1": "Block", "f": "Sequential", "f.0": "Conv", "f.1": "ReLU"}
    >>> repeated_module_patterns(["h.0", "h.1", "f.0", "f.1"], types)
    {'h.*': ['h.0', 'h.1'], 'f.0': ['f.0'], 'f.1': ['f.1']}
    >>> stages = {"s": "ModuleList", "s.0": "ModuleList", "s.1": "ModuleList", "s.0.0": "Layer", "s.1.0": "Layer", "s.1.1": "Layer"}
    >>> repeated_module_patterns(["s.0.0", "s.1.0", "s.1.1"], stages)
    {'s.*.*': ['s.0.0', 's.1.0', 's.1.1']}
    """
    children: dict[str, set[str]] = {}
    for path, type_name in types.items():
        parent, _, last = path.rpartition(".")
        if last.isdigit():
            children.setdefault(parent, set()).add(type_name)
    alike = {parent for parent, kinds in children.items() if len(kinds) == 1}
    members: dict[str, list[str]] = {}
    for path in paths:
        parts = path.split(".") if path else []
        original = list(parts)  # a list of lists (stages of blocks): each index is judged by its own parent
        for i, part in enumerate(original):
            if part.isdigit() and ".".join(original[:i]) in alike:
                parts[i] = "*"
        pattern = ".".join(parts)
        # A pattern of indices alone (a Sequential of blocks: '*') says nothing a reader could find.
        if not pattern.replace("*", "").strip("."):
            pattern = path
        members.setdefault(pattern, []).append(path)
    return members


def _shape(shape: Optional[tuple[int, ...]]) -> str:
    return "unknown" if shape is None else shape_text(shape)


# --- on the picture ----------------------------------------------------------------

# Lines of the note listing findings that point at no node (unused parameters).
MAX_NOTE_LINES = 8


def finding_overlay(findings: Sequence[Finding]) -> Overlay:
    """Errors and warnings as an overlay: each node the worst severity of what points at it,
    the messages in its tooltip; a key counting findings per code, and notes of the
    findings that point at no node and of the memory saved for backward.

    >>> overlay = finding_overlay([Finding("error", "grad_nonfinite", "w: NaN", ("n3",), "w")])
    >>> overlay.tooltips["n3"], overlay.key[0][0]
    ('w: NaN', ['error: grad nonfinite (1)'])
    """
    values: dict[str, float] = {}
    messages: dict[str, list[str]] = {}
    counts: dict[tuple[str, str], int] = {}
    loose: list[str] = []
    memory: list[str] = []
    for finding in findings:
        if finding.code == SAVED_MEMORY:
            memory.append(finding.message)
        if finding.severity not in SEVERITY_STYLES:
            continue
        counts[(finding.severity, finding.code)] = counts.get((finding.severity, finding.code), 0) + 1
        if not finding.nodes:
            loose.append(f"{finding.severity}: {finding.message}")
        value = severity_value(finding.severity)
        for node_id in finding.nodes:
            values[node_id] = max(values.get(node_id, value), value)
            messages.setdefault(node_id, []).append(finding.message)
    key: list[tuple[list[str], dict[str, str]]] = [
        ([f"{severity}: {code.replace('_', ' ')} ({count})"], dict(SEVERITY_STYLES[severity], style="filled", fillcolor="white"))
        for (severity, code), count in sorted(counts.items(), key=lambda i: (SEVERITIES.index(i[0][0]), CODES.index(i[0][1])))
    ]
    if loose:
        shown = loose[:MAX_NOTE_LINES]
        if len(loose) > MAX_NOTE_LINES:
            shown.append(f"... and {len(loose) - MAX_NOTE_LINES} more")
        key.append((["not in the graph:", *shown], {"shape": "note", "style": "filled", "fillcolor": "white"}))
    if memory:  # what decides activation memory: the top consumers (walks that collected saved tensors)
        key.append((["memory saved for backward:", *memory[:MAX_NOTE_LINES]], {"shape": "note", "style": "filled", "fillcolor": "white"}))
    return Overlay(
        "findings", "findings", values, rollup="max", scale="severity",
        tooltips={node_id: "\n".join(lines) for node_id, lines in messages.items()}, key=tuple(key),
    )


def gradient_overlay(graph: AutogradGraph, norms: Mapping[str, float]) -> Overlay:
    """Gradient norms as an overlay on parameters and their AccumulateGrad (log scale).

    ``norms`` maps parameter names to norms, as :func:`gradient_norms` returns them:
    zero and NaN/Inf get their own colours, a name without a norm stays as it is; the
    scale spans every norm given, drawn or not.
    """
    values: dict[str, float] = {}
    tooltips: dict[str, str] = {}
    for name, targets in parameter_nodes(graph).items():
        norm = norms.get(name)
        if norm is None:
            continue
        for target in targets:
            values[target] = norm
            tooltips[target] = f"{name}: gradient norm {norm:.3g}"
    return Overlay(
        "grad_norm", "grad norm", values, rollup="max", scale="log", tooltips=tooltips,
        nonfinite="grad NaN/Inf", domain=tuple(norms.values()),
    )


def given_overlays(
    graph: AutogradGraph, params: Params, diagnose: Union[bool, Sequence[Finding], None], grad_colors: Params
) -> list[Overlay]:
    """The overlays ``make_dot``'s ``diagnose`` and ``grad_colors`` ask for: what :func:`check`
    finds (``diagnose=True``, with ``params`` as the model) or the findings given, and the
    gradient norms of ``grad_colors`` (the model or its named parameters)."""
    overlays = []
    if diagnose is True:
        overlays.append(finding_overlay(check(graph, params=params)))
    elif diagnose is not False and diagnose is not None:
        overlays.append(finding_overlay(list(diagnose)))
    if grad_colors is not None:
        overlays.append(gradient_overlay(graph, gradient_norms(grad_colors)))
    return overlays


__all__ = [
    "CODES",
    "DEAD_UNITS",
    "GRAD_NORM_SPAN",
    "GRAD_NORM_TREND",
    "NONFINITE_SEEN",
    "SATURATED",
    "UPDATE_RATIO",
    "ERROR",
    "Findings",
    "Finding",
    "INFO",
    "SEVERITIES",
    "WARNING",
    "check",
    "failing",
    "failure_findings",
    "finding_overlay",
    "given_overlays",
    "gradient_overlay",
    "gradient_norms",
    "peer_roles",
    "rounding_decades",
    "raise_on",
    "saved_bytes_by_module",
]
