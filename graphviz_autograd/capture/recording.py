"""Record a forward pass: which module made each op, and why an input carries no gradient.

The backward graph alone knows neither. ``record`` watches the forward pass with a
``TorchFunctionMode`` and a stand-in for the ``forward`` of each module of the model
(see ``Recorder._watch_calls``), and notes on each new autograd node (in its ``metadata`` dict, which lives and dies
with the node) the innermost module that was running and the reason for each of
its inputs that carries no gradient. :func:`~graphviz_autograd.capture.walking.walk` reads the
notes when given the recorder; nothing else is kept, so the recorder holds no
tensor and the graph is freed as usual.

>>> import torch
>>> model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU())
>>> with record(model) as rec:
...     out = model(torch.ones(1, 3)).sum()
>>> from graphviz_autograd import walk
>>> g = walk(out, model, recorder=rec)
>>> sorted({(n.label, n.module) for n in g.nodes if n.kind == "op"})
[('AddmmBackward0', '0'), ('ReluBackward0', '1'), ('SumBackward0', ''), ('TBackward0', '0')]
>>> [(n.label, n.note, n.module) for n in g.nodes if n.kind == "no_grad"]
[('input (requires_grad=False)', 'requires_grad_false', '0')]

Entering and leaving restores everything, also when the forward raises: each module's
``forward`` is put back, hooks are removed, the mode is popped, and grad mode, the
model's parameters, buffers, ``training`` flag and device are never touched.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import os
import threading
import traceback
import types
import weakref
import warnings
from collections.abc import Mapping
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from ..errors import InputTypeError, first_line
from ..graph.autograd_graph import (
    BUFFER,
    CALL_MARK,
    CONSTANT,
    DATA_ATTRIBUTE,
    DETACH,
    FROZEN,
    INFERENCE_MODE,
    INTEGER,
    INTEGER_RESULT,
    NO_GRAD_MODE,
    OP,
    PORT_IN,
    PORT_OUT,
    REQUIRES_GRAD_FALSE,
    AutogradGraph,
    ModuleInfo,
    module_of_call,
    port_attrs,
)
from ..graph.descriptions import shape_text
from . import compiled_regions
from .attribute_names import unregistered_tensors
from .naming import layout_name, named_tensors, number_text
from .nonfinite_values import LIBRARY_DIRS, ForwardValues, call_name, short_path, user_frame


# (code, label text, module where the gradient was cut), and on an input a module call took
# as an argument, a fourth: its (PORT_ATTR, text) pairs (see _note_port)
Reason = tuple[Any, ...]

# Calls that cut a tensor off: code, how a label says it of a named tensor, of an unnamed one.
_DETACHING = {
    torch.Tensor.detach: (DETACH, "{}.detach()", "detach()"),
    torch.Tensor.detach_: (DETACH, "{}.detach_()", "detach_()"),
    torch.detach: (DETACH, "{}.detach()", "detach()"),
    torch.Tensor.data.__get__: (DATA_ATTRIBUTE, "{}.data", ".data"),  # type: ignore[attr-defined]
    # A new tensor built from the values of one: it has no history.
    torch.tensor: (DETACH, "torch.tensor({})", "torch.tensor()"),
}
# F.linear(input, weight, bias) becomes addmm(bias, input, weight.t()): its
# inputs without gradient show up in that order among the new nodes' slots.
# (F.linear is torch._C._nn.linear: one entry serves both names.)
_SLOT_ORDER: dict[Callable, Callable[[list], list]] = {
    F.linear: lambda args: [args[2], args[0], args[1]] if len(args) > 2 else args,
}
# Calls that turn a tensor into Python values, which carry no gradient: how a message names them.
_ESCAPING = {
    torch.Tensor.item: ".item()",
    torch.Tensor.tolist: ".tolist()",
    torch.Tensor.__float__: "float()",
    torch.Tensor.__int__: "int()",
    torch.Tensor.numpy: ".numpy()",
}
# Ops that add an input of their own before the caller's: torch.sparse.mm(a, b) is
# addmm(zeros, a, b), whose first slot is that zero matrix, not ``a``.
_HIDDEN_INPUTS: dict[Callable, str] = {torch.sparse.mm: "zeros added by sparse.mm"}
# Operators whose result is a bool tensor, by the name of the method behind them: how a label writes them.
_OPERATORS = {
    "__gt__": ">", "__ge__": ">=", "__lt__": "<", "__le__": "<=", "__eq__": "==", "__ne__": "!=",
    "gt": ">", "ge": ">=", "lt": "<", "le": "<=", "eq": "==", "ne": "!=",
}
_ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"
# Whether a node type is AccumulateGrad, by type: asked of every node a call makes.
_ACCUMULATES: dict[type, bool] = {}
_keys = itertools.count()


class Recorder:
    """What :func:`record` saw. Pass it to ``walk``/``make_dot``/``render`` as ``recorder=``.

    ``modules`` lists the model's modules (``ModuleInfo``: qualified name, class,
    parameter count) in definition order, and the later calls of a module called more
    than once (``relu#2``); empty when recording without a model.
    """

    def __init__(self, model: Optional[torch.nn.Module], *, nonfinite: bool = False):
        if model is not None and not isinstance(model, torch.nn.Module):
            raise InputTypeError(
                f"record() takes an nn.Module (or nothing); got {type(model).__name__}. "
                "Pass the model whose forward pass you want to record."
            )
        self.model = model
        # The key under which this recorder's notes sit in each node's metadata, and the key of
        # the module calls a node's tensor enters or leaves: {(PORT_IN or PORT_OUT, call path): name}.
        self.key = f"graphviz_autograd.record.{next(_keys)}"
        self.ports_key = self.key + ".ports"
        self._forward_arguments: dict[type, tuple[str, ...]] = {}
        # Tensors without gradient a module call took as arguments or returned:
        # {(PORT_IN or PORT_OUT, call path): name}.
        self._entered: _ByTensor = _ByTensor()
        # Leaf tensors that require grad (parameters, inputs) a module call took or returned, alike.
        self._leaf_ports: _ByTensor = _ByTensor()
        self._any_entered = False  # whether _entered ever held one (asking its length is slow)
        # The model's own modules, without the calls after the first (see modules).
        # Its modules, parameters and buffers, walked once for the constructor, __enter__ and the
        # parameter counts of ``modules`` (counted when a picture asks, not while recording).
        self._model_tensors: Optional[_ModelTensors] = _ModelTensors(model) if model is not None else None
        # The model's own modules (without parameter counts), without the calls after the first (see modules).
        self._module_types: tuple[ModuleInfo, ...] = self._model_tensors.module_infos(counted=False) if (
            self._model_tensors) else ()
        self._counted: Optional[tuple[ModuleInfo, ...]] = None
        self._module_index = {info.path: i for i, info in enumerate(self._module_types)}  # path -> place among them
        self._module_paths = frozenset(self._module_index)
        self._calls = ModuleCalls(self._module_types)
        self._modules: Optional[tuple[ModuleInfo, ...]] = None  # modules, once put together
        self._modules_seen = 0  # the later calls _modules was put together with
        self._reasons: _ByTensor = _ByTensor()
        self._fixed_reasons: dict[int, Reason] = {}  # id -> reason, for frozen parameters and buffers
        # id -> name of the model's inputs, parameters and buffers, while recording
        self._names: dict[int, str] = {}
        self._named_inputs: list[torch.Tensor] = []
        # The model's inputs by argument name, kept after recording without keeping the tensors.
        self._input_names: _ByTensor = _ByTensor()
        # Parameters the forward froze with requires_grad_(False): name -> module that did it.
        self.frozen_in_forward: dict[str, str] = {}
        # Tensors that require grad turned into Python values (.item(), .tolist(), float()):
        # (call, tensor name or '', module) in the order seen.
        self.escapes: list[tuple[str, str, str]] = []
        # Names of the frozen parameters the forward passed to any call (kept after recording).
        self.frozen_used: set[str] = set()
        self._frozen_names: dict[int, str] = {}
        # Leaf tensors that require grad but are none of the model's (made in forward):
        # the module whose forward first used each.
        self._stray_leaves: _ByTensor = _ByTensor()
        # (module, its own forward before, the stand-in put there), and hooks, while recording: see _watch_calls.
        self._hooks: list[Any] = []
        self._stand_ins: list[tuple[torch.nn.Module, Any, Callable]] = []
        self._mode: Optional[_RecordingMode] = None
        self._thread: Optional[int] = None
        # With nonfinite=True: where NaN and Inf were born, call by call (see nonfinite_values).
        self.nonfinite: Optional[ForwardValues] = ForwardValues(self._name_of) if nonfinite else None
        # The call that raised, while the forward pass runs; kept as ``failure`` when it ends the pass.
        self.failure: Optional[ForwardFailure] = None
        self._failing: Optional[tuple[ForwardFailure, BaseException]] = None
        self._last_result: Any = None  # what the latest call returned, while recording
        self._last_module = ""
        # While recording: the model's modules by path, and the floats each keeps by one name.
        self._module_objects: dict[str, torch.nn.Module] = {}
        self._number_names: dict[str, dict[float, str]] = {}
        # What torch.compile'd regions the recorded call compiled: their backward graphs and graph breaks.
        self.compiled = compiled_regions.CompiledCapture()
        # The model's named tensors as the latest recording found them (see model_tensors).
        self._named_tensors: Optional[list[tuple[str, "weakref.ref[torch.Tensor]"]]] = None

    @property
    def modules(self) -> tuple[ModuleInfo, ...]:
        """The model's modules (:class:`ModuleInfo`) in definition order, each later call
        of one right after the calls before it; empty when recording without a model."""
        if self._modules is None or self._modules_seen != len(self._calls.later_calls):
            if self._counted is None:
                self._counted = self._model_tensors.module_infos() if self._model_tensors else ()
            self._modules = _with_later_calls(self._counted, self._module_index, self._calls.later_calls)
            self._modules_seen = len(self._calls.later_calls)
        return self._modules

    # --- what the walk asks ---

    @property
    def called_modules(self) -> frozenset[str]:
        """The modules whose forward ran while recording (their names in the model), under
        ``no_grad()`` too; empty when recording without a model."""
        return frozenset(self._calls.called)

    def notes(self, grad_fn: Any) -> Optional[tuple[str, tuple[Optional[Reason], ...]]]:
        """(module, reason per no-grad slot) noted on ``grad_fn``, or None if this recorder never saw it."""
        return grad_fn.metadata.get(self.key)

    def named_inputs(self) -> list[tuple[str, torch.Tensor]]:
        """The model's forward inputs still alive, by the names its forward gives them (``x``, ``batch.mask``)."""
        return sorted(((name, tensor) for tensor, name in self._input_names.items()), key=lambda pair: pair[0])

    def model_tensors(self, params: Any) -> Optional[list[tuple[str, torch.Tensor]]]:
        """The (name, tensor) pairs the walk names when given ``params``, as the recording
        found them (what ``parameter_names(model)`` lists: parameters, buffers, tensors in
        plain attributes), when ``params`` is the recorded model; else None. Saves the walk
        a second pass over the model's modules and attributes."""
        if params is None or params is not self.model or self._named_tensors is None:
            return None
        alive = [(name, ref()) for name, ref in self._named_tensors]
        return [(name, tensor) for name, tensor in alive if tensor is not None]

    def owner(self, parameter_name: str) -> str:
        """The module that owns a parameter or buffer of this name ('' if none does)."""
        path = parameter_name
        while path:
            path = path.rpartition(".")[0]
            if path in self._module_paths:
                return path
        return ""

    def first_used_in(self, tensor: torch.Tensor) -> str:
        """The module whose forward first used ``tensor``, a leaf that requires grad and is
        none of the model's parameters or inputs ('' when unseen or at the top level).

        One given to a module call as an argument was made outside that call: it belongs
        to the module around the outermost such call that its first use is in."""
        used = self._stray_leaves.get(tensor, "")
        noted = self._leaf_ports.get(tensor)
        if noted:
            outer = [path for way, path in noted if way == PORT_IN and (not path or used == path or used.startswith(path + "."))]
            if outer:
                used = min(outer, key=len).rpartition(".")[0]
        return used

    def note_unseen(self, graph: AutogradGraph) -> None:
        """Say once, as a warning, when a walked graph holds compiled code this recorder could not see
        (a ``CompiledFunctionBackward`` node :func:`~graphviz_autograd.capture.compiled_regions.open_regions`
        could not open), and why."""
        if not any(node.kind == OP and node.label.startswith("CompiledFunction") for node in graph.nodes):
            return
        compiled = self.compiled
        if compiled.missing:
            why = compiled.missing
        elif not compiled.watching:
            why = ("torch.compile had not been used in this process when record() began; "
                   "compile the model (torch.compile) before recording its first call.")
        else:
            why = ("its regions were compiled before record() began, and Dynamo does not compile them again; "
                   "call torch._dynamo.reset() before the recorded call, or make the first compiled call inside record().")
        warnings.warn(f"graphviz-autograd: {COMPILED_NOTE} {why[:1].upper()}{why[1:]}", stacklevel=3)

    # --- the context manager ---

    def __enter__(self) -> "Recorder":
        if self._mode is not None:
            raise RuntimeError("This recorder is already recording; use a new record() for each forward pass.")
        self.failure = None
        self._calls.stack.clear()
        self._thread = threading.get_ident()
        if self.model is not None:
            tensors = self._model_tensors = self._model_tensors or _ModelTensors(self.model)
            self._fixed_reasons = tensors.frozen_and_buffers()
            self._frozen_names = {id(p): name for name, p in tensors.parameters if not p.requires_grad}
            for name, tensor in itertools.chain(tensors.parameters, tensors.buffers):
                self._names.setdefault(id(tensor), name)
            registered = {id(tensor) for _, tensor in itertools.chain(tensors.parameters, tensors.buffers)}
            unregistered = unregistered_tensors(self.model, registered)
            for name, tensor in unregistered.items():
                self._names.setdefault(id(tensor), name)
            # Weakly: a tensor the model lets go of later (a cache kept in a plain list) is not kept for it.
            self._named_tensors = [
                (name, weakref.ref(tensor)) for name, tensor in itertools.chain(
                    tensors.parameters, tensors.buffers, unregistered.items())
            ]
            self._module_objects = tensors.modules
            for name, module in tensors.modules.items():
                self._watch_calls(name, module)
        self._mode = _RecordingMode(self)
        try:
            self._mode.__enter__()
            compiled_regions.start(self.compiled)
        except BaseException:
            self._unwatch_calls()
            self._mode = None
            raise
        return self

    def __exit__(self, *exc_info: Any) -> None:
        mode, self._mode = self._mode, None
        try:
            self._keep_failure(exc_info[1] if len(exc_info) > 1 else None)
            if mode is not None:
                mode.__exit__(*exc_info)
        finally:
            compiled_regions.stop(self.compiled)
            self._failing = None
            self._last_result = None
            self._unwatch_calls()
            self._calls.stack.clear()
            self._fixed_reasons = {}
            self._frozen_names = {}
            self._names = {}
            self._named_inputs = []
            self._module_objects = {}
            self._number_names = {}

    def _name_of(self, tensor: torch.Tensor) -> str:
        """The name the model gives ``tensor`` (a parameter, buffer or input), '' when it gives none."""
        return self._names.get(id(tensor), "")

    def saw_failure(self, func: Callable, args: tuple, kwargs: dict, error: BaseException) -> None:
        """A call of the forward pass raised ``error``: note it, with the tensors it was given.
        Kept as :attr:`failure` if the error (or one raised from it) ends the recorded block."""
        inputs = _tensors_in(args, kwargs)
        named = [(self._names.get(id(t)) or f"argument {i}", t) for i, t in enumerate(inputs)]
        module = self.current_module
        failure = ForwardFailure(
            call_name(func), module, self._type_of(module), _error_text(error), user_frame(),
            tuple(f"{name}: {_tensor_text(t)}" for name, t in named), named,
        )
        self._failing = (failure, error)

    def _keep_failure(self, error: Optional[BaseException]) -> None:
        """At the end of the recorded block: the failure that ended it, if an exception did."""
        if error is None or not isinstance(error, Exception):
            return
        failing = self._failing
        if failing is not None and _raised_from(error, failing[1]):
            self.failure = failing[0]
            return
        # Raised by Python code between calls (a check of shapes, a raise of the model's own):
        # the graph is drawn up to what the last call made.
        last = _tensors_in((self._last_result,)) if self._last_result is not None else []
        cause = _root_error(error)
        module = self._last_module
        self.failure = ForwardFailure(
            f"{type(cause).__name__} raised by Python code", module, self._type_of(module), _error_text(cause),
            _error_frame(cause), tuple(f"{_LAST_RESULT}: {_tensor_text(t)}" for t in last),
            [(_LAST_RESULT, t) for t in last],
        )

    def _type_of(self, module_call: str) -> str:
        index = self._module_index.get(module_of_call(module_call))
        return self._module_types[index].type_name if index is not None else ""

    def _watch_calls(self, name: str, module: torch.nn.Module) -> None:
        """Note each call of ``module`` while recording: its path and its ports, around its forward.

        A module without forward hooks gets a stand-in for its ``forward``, set on the module
        itself for as long as the recording lasts: it costs a call one Python call more, where
        a pair of hooks takes every call down ``Module.__call__``'s slow path (a quarter of a
        plain forward pass, recorded). Whatever ``forward`` the module had of its own (a
        wrapper another library set, another recorder's stand-in) is called by the stand-in
        and put back after. A module with hooks of its own is on the slow path already: it gets
        a pair of hooks after them, so that what its hooks do counts as part of its call."""
        names = self._argument_names(module)
        enter, leave, calls = self._calls.enter, self._calls.leave, self._calls
        note_in, note_out = self._note_inputs, self._note_output
        top = functools.partial(self._name_inputs, _forward_signature(module)) if module is self.model else None
        thread = self._thread

        def active() -> bool:
            # Not while Dynamo traces, nor in another thread, nor after the recording ended.
            return not _compiling() and threading.get_ident() == thread and self._mode is not None

        def starts(args: tuple, kwargs: dict) -> None:
            if top is not None:
                top(args, kwargs)
            path = enter(name)
            if args or kwargs:
                note_in(args, kwargs, names, path)

        def ends(output: Any) -> None:
            note_out(output, calls.current)
            leave(name)

        if module._forward_hooks or module._forward_pre_hooks:
            def pre_hook(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
                if active():
                    starts(args, kwargs)

            def hook(module: torch.nn.Module, args: tuple, output: Any) -> None:  # (output None when forward raised)
                if active():
                    ends(output)

            self._hooks.append(module.register_forward_pre_hook(pre_hook, with_kwargs=True))
            self._hooks.append(module.register_forward_hook(hook, always_call=True))
            return
        own = vars(module)
        before = own.get("forward", _NOT_SET)
        forward = module.forward

        def stand_in(called: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            if called is not module:  # a copy made while recording (copy.deepcopy) gets its own forward back
                vars(called).pop("forward", None)
                return called.forward(*args, **kwargs)
            # (A stand-in left behind, when recorders nested on one model end out of order, only calls on.)
            if not active():
                return forward(*args, **kwargs)
            starts(args, kwargs)
            try:
                output = forward(*args, **kwargs)
            except BaseException:
                leave(name)
                raise
            ends(output)
            return output

        setattr(stand_in, _STAND_IN, forward)
        # Bound to the module, so that a deep copy of the module is bound to the copy.
        bound = own["forward"] = types.MethodType(stand_in, module)
        self._stand_ins.append((module, before, bound))

    def _unwatch_calls(self) -> None:
        """Put back each module's ``forward`` as it was (unless something else replaced the stand-in
        meanwhile), and remove the hooks."""
        for module, before, stand_in in self._stand_ins:
            own = vars(module)
            if own.get("forward") is stand_in:
                if before is _NOT_SET:
                    del own["forward"]
                else:
                    own["forward"] = before
        self._stand_ins = []
        for handle in self._hooks:
            handle.remove()
        self._hooks = []

    def _name_inputs(self, signature: Optional[inspect.Signature], args: tuple, kwargs: dict) -> None:
        """Remember the model's input tensors by the names its forward (of ``signature``) gives them."""
        try:
            if signature is None:
                raise ValueError("no signature")
            bound = signature.bind_partial(*args, **kwargs).arguments
        except (TypeError, ValueError):  # a signature that cannot be read or bound
            bound = {f"input{i}": value for i, value in enumerate(args)} | kwargs
        for name, value in bound.items():
            for tensor_name, tensor in named_tensors(value, name):
                self._names.setdefault(id(tensor), tensor_name)
                self._named_inputs.append(tensor)  # keeps the id valid while recording
                if tensor not in self._input_names:
                    self._input_names[tensor] = tensor_name

    def _note_inputs(self, args: tuple, kwargs: dict, names: tuple[str, ...], path: str) -> None:
        """Note the tensors a module call takes by the names its forward gives them (see _note_port)."""
        # Reading a tensor's grad_fn with the mode on is a call of the mode (a tenth of a
        # recorded forward pass went there); the stand-ins read them with it off.
        with _mode_off():
            for i, value in enumerate(args):
                self._note_port(value, path, PORT_IN, names[i] if i < len(names) else f"args[{i}]")
            for key, value in kwargs.items():
                self._note_port(value, path, PORT_IN, key)

    def _note_output(self, output: Any, path: str) -> None:
        """Note the tensors a module call returns: ``output``, or the fields of a model output."""
        with _mode_off():
            if _is_tensor(output):
                self._note_port(output, path, PORT_OUT, "output")
            elif isinstance(output, Mapping):  # a model output (logits, last_hidden_state...)
                for key, value in output.items():
                    self._note_port(value, path, PORT_OUT, str(key))
            else:
                self._note_port(output, path, PORT_OUT, "output")

    def _argument_names(self, module: torch.nn.Module) -> tuple[str, ...]:
        """The names of the positional parameters of ``module``'s forward (up to a ``*args``)."""
        known = self._forward_arguments.get(type(module))
        if known is not None:
            return known
        signature = _forward_signature(module)
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        names: list[str] = []
        for parameter in signature.parameters.values() if signature is not None else ():
            if parameter.kind not in positional:
                break
            names.append(parameter.name)
        found = self._forward_arguments[type(module)] = tuple(names)
        return found

    def _note_port(self, value: Any, path: str, direction: str, name: str) -> None:
        """Note on the node that made ``value`` (a tensor, or a tuple or list of them) that it
        enters (or leaves) the call ``path`` as ``name``: what the explorer names a port by."""
        if _is_tensor(value):
            fn = value.grad_fn
            if fn is not None:
                ports = fn.metadata.get(self.ports_key)
                if ports is None:
                    ports = fn.metadata[self.ports_key] = {}
                _add_name(ports, (direction, path), name)
            elif not value.requires_grad:  # an input without gradient: on its cut
                entered = self._entered.get(value)
                if entered is None:
                    entered = self._entered[value] = {}
                    self._any_entered = True
                _add_name(entered, (direction, path), name)
            else:  # a leaf (a parameter, an input that requires grad): on its node, by the walk
                noted = self._leaf_ports.get(value)
                if noted is None:
                    noted = self._leaf_ports[value] = {}
                _add_name(noted, (direction, path), name)
        elif type(value) is tuple or type(value) is list:
            for i, item in enumerate(value):
                if _is_tensor(item):
                    self._note_port(item, path, direction, f"{name}[{i}]")

    @property
    def current_module(self) -> str:
        """The path the running call's ops are noted under ('' outside every module)."""
        return self._calls.current

    # --- what the mode reports ---

    def saw_call(
        self, func: Callable, args: tuple, kwargs: dict, result: Any, before: Optional[list] = None,
        inputs: Optional[list] = None, module: Optional[str] = None, numbers: Optional[tuple[int, int]] = None,
    ) -> None:
        """Note what a call made: its new nodes' module, cuts and escapes. ``before``: the
        inputs' grad_fns before an in-place call, which gave an input a new one; ``inputs``
        (the tensors among the arguments) and ``module`` (the running call), when known;
        ``numbers``: the thread's next autograd sequence number before and after the call."""
        if inputs is None:
            inputs = _tensors_in(args, kwargs)
        if module is None:
            module = self.current_module
        names = self._names
        for t in inputs:
            if t.is_leaf and t.requires_grad and id(t) not in names and t not in self._stray_leaves:
                self._stray_leaves[t] = module
        if self._frozen_names:
            for t in inputs:
                name = self._frozen_names.get(id(t))
                if name is not None:
                    self.frozen_used.add(name)
        escape = _ESCAPING.get(func)
        if escape is not None and inputs:
            # Gradient would flow but the result is Python or NumPy values (a detached tensor counts:
            # .detach().numpy() is how a NumPy round trip starts).
            source = inputs[0]
            if (source.requires_grad and torch.is_grad_enabled()) or self._reasons.get(source, ("",))[0] == DETACH:
                self.escapes.append((escape, self._names.get(id(source), ""), module))
            return
        outputs = [result] if _is_tensor(result) else _tensors_in((result,))
        if not outputs:
            return
        if func is torch.Tensor.requires_grad_:
            name = self._names.get(id(inputs[0])) if inputs else None
            if name is not None and not outputs[0].requires_grad and id(inputs[0]) not in self._fixed_reasons:
                self.frozen_in_forward.setdefault(name, module)
            return
        detaching = _DETACHING.get(func)
        if func is torch.tensor and not (inputs and inputs[0].requires_grad):
            detaching = None  # a constant from Python values, or a copy of data that had no gradient
        if detaching is not None:
            code, named_text, text = detaching
            name = self._names.get(id(inputs[0])) if inputs else None
            for out in outputs:
                self._reasons[out] = (code, named_text.format(name) if name else text, module)
            return
        if self._any_entered:
            self._pass_on_ports(inputs, outputs, module)
        new_nodes, cut = self._note_new_nodes(outputs, inputs, module, before, numbers)
        if cut:
            self._note_cuts(new_nodes, func, args, kwargs, module)
        for t in outputs:
            if not t.requires_grad:  # (a tensor that requires grad is a floating-point one: neither case)
                self._note_lost_gradient(outputs, inputs, module)
                self._note_integer_results(func, outputs, inputs, module)
                break

    def _note_new_nodes(
        self, outputs: list, inputs: list, module: str, before: Optional[list] = None,
        numbers: Optional[tuple[int, int]] = None,
    ) -> tuple[list[Any], bool]:
        """Note ``module`` on the nodes this call created; return them, first input first,
        and whether any of them has an empty input slot (an input without gradient).

        They are the nodes reachable from the outputs without passing an input's
        node or one noted before (an AccumulateGrad belongs to its parameter).

        ``numbers`` (the thread's next sequence number before and after the call) says
        how many nodes the call made: none, or one (most calls), is known without a walk.
        """
        key = self.key
        if numbers is not None and before is None:
            made = numbers[1] - numbers[0]
            if made == 0:
                return [], False
            if made == 1:
                fn = outputs[0].grad_fn
                if fn is None:
                    fn = next((fn for fn in [t.grad_fn for t in outputs] if fn is not None), None)
                if fn is not None and fn._sequence_nr() == numbers[0]:
                    metadata = fn.metadata
                    if key not in metadata:
                        metadata[key] = (module, ())
                    return [fn], None in [child for child, _ in fn.next_functions]
        # The inputs' nodes are held for the walk: in torch 2.11 (not 2.13) a node's Python object dies
        # with its last reference, and a later one (this call's) could reuse its id.
        held = before if before is not None else [t.grad_fn for t in inputs]
        known = {id(fn) for fn in held if fn is not None}
        stack = [fn for fn in [t.grad_fn for t in reversed(outputs)] if fn is not None]
        new_nodes = []
        cut = False
        note = (module, ())
        accumulates = _ACCUMULATES
        while stack:
            fn = stack.pop()
            if id(fn) in known:
                continue
            accumulate = accumulates.get(type(fn))
            if accumulate is None:
                accumulate = accumulates[type(fn)] = fn.name() == _ACCUMULATE_GRAD
            if accumulate:
                continue
            metadata = fn.metadata
            if key in metadata:
                continue
            known.add(id(fn))
            new_nodes.append(fn)
            metadata[key] = note
            for child, _ in reversed(fn.next_functions):
                if child is None:
                    cut = True
                else:
                    stack.append(child)
        return new_nodes, cut

    def _note_cuts(self, new_nodes: list, func: Callable, args: tuple, kwargs: dict, module: str) -> None:
        """Give each input slot without gradient among the new nodes the reason for it.

        Autograd does not say which tensor an empty slot stood for; the inputs without
        gradient are matched to the slots in order (they are one reason in the common
        case, which needs no matching).
        """
        slots = [(fn, i) for fn in new_nodes for i, (child, _) in enumerate(fn.next_functions) if child is None]
        if not slots:
            return
        ordered = _SLOT_ORDER.get(func, list)(list(args)) + list(kwargs.values())
        tensors = [t for t in _tensors_in(tuple(ordered)) if not t.requires_grad]
        differentiable = [t for t in tensors if t.is_floating_point() or t.is_complex()]
        candidates: list = differentiable if len(differentiable) >= len(slots) or len(tensors) != len(slots) else tensors
        # A number among the operands (x * 1.0001, variance + eps) took a slot as a 0-d tensor:
        # the operands that carry no gradient, numbers among them, when they are one per slot.
        operands = [v for v in _flat(ordered[: len(args)]) if type(v) in _NUMBER_TYPES
                    or (_is_tensor(v) and not v.requires_grad and (v.is_floating_point() or v.is_complex()))]
        if len(operands) == len(slots) and len(operands) > len(differentiable):
            candidates = operands
        reasons = [self._operand_reason(v, module) for v in candidates]
        if self._any_entered:  # inputs without gradient a module call took as arguments: their names
            reasons = [self._with_ports(reason, v) for reason, v in zip(reasons, candidates)]
        hidden = _HIDDEN_INPUTS.get(func)
        if hidden is not None:  # an input the op makes itself comes first among its slots
            reasons.insert(0, (REQUIRES_GRAD_FALSE, hidden, module))
        if not reasons:
            return
        if len(set(reasons)) == 1:
            reasons = reasons * len(slots)
        per_node: dict[int, list[Optional[Reason]]] = {}
        for (fn, _), reason in itertools.zip_longest(slots, reasons[: len(slots)]):
            per_node.setdefault(id(fn), []).append(reason)
        for fn in new_nodes:
            if id(fn) in per_node:
                fn.metadata[self.key] = (fn.metadata[self.key][0], tuple(per_node[id(fn)]))

    def _pass_on_ports(self, inputs: list, outputs: list, module: str) -> None:
        """An input without gradient a module call took as an argument, reshaped or sliced
        (``cos.unsqueeze(1)``, ``mask[:, :, :, :n]``), is still that argument where it is used.

        One made from such an argument with no reason of its own (Llama's 4-d mask, made by
        the model from ``attention_mask``) is kept as made in ``module``: an op deeper down
        that reads it is not where it comes from."""
        for tensor in inputs:
            if not tensor.requires_grad:
                entered = self._entered.get(tensor)
                if entered:
                    inherited = self._inherited_reason(inputs, module) is not None
                    for out in outputs:
                        if not out.requires_grad and out not in self._entered:
                            self._entered[out] = dict(entered)
                            # (An integer or bool one is said to be that where it is cut, and a float made
                            # from it must not inherit those words.)
                            if not inherited and (out.is_floating_point() or out.is_complex()) and out not in self._reasons:
                                self._reasons[out] = self._reason(out, module)
                    return

    def _with_ports(self, reason: Reason, value: Any) -> Reason:
        """``reason`` with the module calls ``value`` entered as an argument or left as an
        output, by its name there."""
        entered = self._entered.get(value) if _is_tensor(value) else None
        if not entered:
            return reason
        return (*reason[:3], port_attrs(entered))

    def leaf_ports(self, tensor: torch.Tensor) -> tuple[tuple[str, str], ...]:
        """The (PORT_ATTR, text) pairs of a leaf that requires grad: the module calls that took
        it as an argument or returned it, by its name there (see _note_port)."""
        noted = self._leaf_ports.get(tensor)
        return port_attrs(noted) if noted else ()

    def _operand_reason(self, value: Any, module: str) -> Reason:
        """Why an operand without gradient carries none: a number (a Python number, or a 0-d
        tensor with no reason of its own) is a constant of its op, with its value."""
        if not _is_tensor(value):
            return CONSTANT, self._constant_text(value, module), module
        reason = self._reason(value, module)
        if value.dim() == 0 and reason[0] == REQUIRES_GRAD_FALSE and not self._names.get(id(value)):
            return CONSTANT, number_text(value), module
        return reason

    def _constant_text(self, value: Any, module: str) -> str:
        """A number as an op shows it: ``variance_epsilon=1e-06`` when the running module
        keeps it under one name (a float other than 0 and ±1, which many settings share),
        else its value."""
        text = number_text(value)
        if type(value) is not float or value in (0.0, 1.0, -1.0):
            return text
        path = module_of_call(module)
        names = self._number_names.get(path)
        if names is None:
            owner = self._module_objects.get(path)
            found: dict[float, list[str]] = {}
            for attribute, held in (vars(owner).items() if owner is not None else ()):
                if type(held) is float and not attribute.startswith("_"):
                    found.setdefault(held, []).append(attribute)
            names = self._number_names[path] = {v: n[0] for v, n in found.items() if len(n) == 1}
        name = names.get(value)
        return f"{name}={text}" if name else text

    def _reason(self, tensor: torch.Tensor, module: str) -> Reason:
        """Why ``tensor`` (an input without gradient) carries none."""
        known = self._reasons.get(tensor)
        if known is not None:
            return known
        named = self._fixed_reasons.get(id(tensor))
        if named is not None:
            return named
        if tensor.is_inference():
            return INFERENCE_MODE, "inference_mode()", module
        name = self._names.get(id(tensor))
        layout = "" if tensor.layout is torch.strided and not tensor.is_nested else layout_name(tensor)
        if not (tensor.is_floating_point() or tensor.is_complex()):
            dtype = " ".join(filter(None, (str(tensor.dtype).replace("torch.", ""), layout)))
            return INTEGER, f"{name} ({dtype})" if name else f"{dtype} tensor", module
        what = f"{layout}, requires_grad=False" if layout else "requires_grad=False"
        return REQUIRES_GRAD_FALSE, f"{name} ({what})" if name else what, module

    def _note_lost_gradient(self, outputs: list, inputs: list, module: str) -> None:
        """Outputs without gradient made from inputs with it (under no_grad) or from cut tensors."""
        lost = [t for t in outputs if not t.requires_grad and (t.is_floating_point() or t.is_complex())]
        if not lost:
            return
        reason: Optional[Reason] = None
        if any(t.requires_grad for t in inputs):
            if torch.is_inference_mode_enabled():
                reason = (INFERENCE_MODE, "inference_mode()", module)
            elif not torch.is_grad_enabled():
                reason = (NO_GRAD_MODE, "no_grad()", module)
        if reason is None:
            reason = self._inherited_reason(inputs, module)
        if reason is None:
            return
        for t in lost:
            self._reasons.setdefault(t, reason)


    def _note_integer_results(self, func: Callable, outputs: list, inputs: list, module: str) -> None:
        """Integer or bool outputs computed from inputs with gradient (``x > 0``, ``argmax()``,
        ``.long()``): the gradient stops there, and whatever reads them later says where.

        Only such a result, and what is computed from it alone, gets the reason: integer
        tensors that never had a gradient (token ids, masks built from them) stay plain inputs.
        """
        results = [t for t in outputs if not (t.is_floating_point() or t.is_complex())]
        if not results or not torch.is_grad_enabled():
            return
        if any(t.requires_grad for t in inputs):
            name = getattr(func, "__name__", "")
            made = f"comparison {_OPERATORS[name]}" if name in _OPERATORS else f"{name.strip('_') or 'an op'}()"
            for t in results:
                dtype = str(t.dtype).replace("torch.", "")
                self._reasons.setdefault(t, (INTEGER_RESULT, f"{dtype} from {made}", module))
            return
        inherited = next((self._reasons[t] for t in inputs if self._reasons.get(t, ("",))[0] == INTEGER_RESULT), None)
        if inherited is not None:
            for t in results:
                self._reasons.setdefault(t, inherited)

    def _inherited_reason(self, inputs: list, module: str) -> Optional[Reason]:
        """The reason an output without gradient inherits from its inputs: a cut made
        earlier (detach, no_grad) first, then a frozen parameter, a buffer, a named input."""
        recorded = next((self._reasons[t] for t in inputs if t in self._reasons), None)
        if recorded is not None:
            return recorded
        fixed = [self._fixed_reasons[id(t)] for t in inputs if id(t) in self._fixed_reasons]
        if fixed:
            return next((r for r in fixed if r[0] == FROZEN), fixed[0])
        name = next((self._names[id(t)] for t in inputs if id(t) in self._names), None)
        return None if name is None else (REQUIRES_GRAD_FALSE, f"from {name} (requires_grad=False)", module)


class ModuleCalls:
    """The path each call of a module is known by, as modules enter and leave.

    A module called again within one call of its parent (a ReLU a block uses three
    times, a cell run at every step, an encoder applied to two inputs) is drawn once
    per call: its later calls are modules of their own, ``path#2``, ``path#3``, so
    that a drawing never joins separate calls into one box with edges looping back
    into it. :func:`record` names the ops of each call by it, and ``watch`` its
    statistics, so that both agree on every name.

    >>> calls = ModuleCalls((ModuleInfo("", "Net"), ModuleInfo("act", "ReLU")))
    >>> calls.enter(""); calls.enter("act"); calls.leave("act"); calls.enter("act")
    ''
    'act'
    'act#2'
    """

    def __init__(self, modules: tuple[ModuleInfo, ...]):
        self.index = {info.path: i for i, info in enumerate(modules)}  # path -> place among the modules
        self.paths = frozenset(self.index)
        # The module calls running, innermost last: (module path, the path of this call).
        self.stack: list[tuple[str, str]] = []
        # (parent's call path, module path) -> calls so far
        self.counts: dict[tuple[str, str], int] = {}
        # The path of each later call -> (module path, its place for sorting).
        self.later_calls: dict[str, tuple[str, tuple]] = {}
        self.called: set[str] = set()  # the modules whose forward ran (by name), in any call

    @property
    def current(self) -> str:
        """The path of the innermost running call ('' outside every module)."""
        return self.stack[-1][1] if self.stack else ""

    def enter(self, name: str) -> str:
        """Module ``name`` starts a call: the path of that call, now the innermost."""
        path = self.call_path(name)
        self.stack.append((name, path))
        self.called.add(name)
        return path

    def leave(self, name: str) -> None:
        """Module ``name`` ends its call: pop back to it (a child whose forward raised popped nothing)."""
        while self.stack:
            if self.stack.pop()[0] == name:
                break

    def restart(self) -> None:
        """Count calls afresh (a new forward pass), keeping the later calls seen so far."""
        self.stack.clear()
        self.counts.clear()

    def call_path(self, name: str) -> str:
        """The path of this call of module ``name``: ``name`` for its first call within the
        running call of its parent, ``name#2``, ``name#3`` for the next ones; under a
        later call of the parent, the parent's path for that call (``encoder#2.conv``).
        The model itself is always ''."""
        if not name:
            return name
        parent, _, last = name.rpartition(".")
        # The running call of the parent, innermost first (most often the innermost call);
        # its first call when none runs (a module called from outside its parent's forward).
        stack = self.stack
        if stack and stack[-1][0] == parent:
            parent_call = stack[-1][1]
        else:
            parent_call = next((called for path, called in reversed(stack) if path == parent), parent)
        calls = self.counts[(parent_call, name)] = self.counts.get((parent_call, name), 0) + 1
        path = f"{parent_call}.{last}" if parent_call else last
        if calls > 1:
            path = f"{path}{CALL_MARK}{calls}"
            while path in self.paths:  # a module of the model already has that name
                path = f"{path}{CALL_MARK}{calls}"
        if path != name and path not in self.later_calls:
            index = self.index
            parent_place = self.later_calls[parent_call][1] if parent_call in self.later_calls else _place(parent, index)
            self.later_calls[path] = (name, parent_place + ((index.get(name, len(index)), calls),))
        return path


class _RecordingMode(TorchFunctionMode):
    def __init__(self, recorder: Recorder):
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: Optional[dict] = None) -> Any:
        kwargs = kwargs or {}
        recorder = self.recorder
        if func in _QUERIES:  # a tensor's shape, dtype, device...: a quarter of a forward pass's calls
            try:
                return func(*args, **kwargs)
            except Exception as error:
                if not _compiling() and threading.get_ident() == recorder._thread:
                    recorder.saw_failure(func, args, kwargs, error)
                raise
        if _compiling() or threading.get_ident() != recorder._thread:
            return func(*args, **kwargs)
        inputs = _tensors_in(args, kwargs)
        module = recorder._calls.current
        # An in-place op (relu_, x += y) gives its input tensor a new grad_fn: the nodes
        # the inputs had before the call are the ones that are not this call's.
        before = None
        in_place = _IN_PLACE.get(func)
        if in_place is None:
            in_place = _IN_PLACE[func] = _in_place(func)
        if in_place or kwargs.get("inplace") is True:
            before = [t.grad_fn for t in inputs]
        values = recorder.nonfinite
        if values is not None:
            inputs_birth = values.before(inputs, module)
        first = _next_node() if _next_node is not None else None
        try:
            result = func(*args, **kwargs)
        except Exception as error:
            recorder.saw_failure(func, args, kwargs, error)
            raise
        numbers = (first, _next_node()) if first is not None else None  # type: ignore[misc]
        recorder.saw_call(func, args, kwargs, result, before, inputs, module, numbers)
        if _is_tensor(result) or type(result) is tuple or type(result) is list:  # not a shape, a number
            recorder._last_result = result
            recorder._last_module = module
        if values is not None:
            values.after(func, args, kwargs, _tensors_in((result,)), inputs_birth, module)
        return result


def _add_name(names: dict[tuple[str, str], str], key: tuple[str, str], name: str) -> None:
    """Add ``name`` to the port ``key`` of ``names``: one tensor given to a call as two
    arguments (``attention(x, x, x)``) enters it as ``query = key = value``.

    >>> names = {}
    >>> for argument in ("query", "key", "value", "key"):
    ...     _add_name(names, ("in", "attn"), argument)
    >>> names
    {('in', 'attn'): 'query = key = value'}
    """
    known = names.get(key)
    if known is None:
        names[key] = name
    elif name not in known.split(_SAME):
        names[key] = known + _SAME + name


# How a port of several names joins them, as a tied weight's names are joined.
_SAME = " = "


class _ByTensor:
    """A dictionary keyed by tensors, by identity, that keeps none of them alive.

    What ``torch.utils.weak.WeakIdKeyDictionary`` does, for the lookups the recorder makes
    on every call of a forward pass: that one builds a Python key object for each lookup
    (a twentieth of a recorded GPT-2 forward). Here a tensor's ``id`` is the key, and a weak
    reference kept beside the value tells whether that id is still the same tensor's.

    >>> notes, t = _ByTensor(), torch.ones(1)
    >>> notes[t] = "a"; notes.setdefault(t, "b"), t in notes, notes.get(torch.ones(1), "none")
    ('a', True, 'none')
    """

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref, Any]] = {}

    def get(self, tensor: torch.Tensor, default: Any = None) -> Any:
        entry = self._entries.get(id(tensor))
        return entry[1] if entry is not None and entry[0]() is tensor else default

    def __contains__(self, tensor: torch.Tensor) -> bool:
        entry = self._entries.get(id(tensor))
        return entry is not None and entry[0]() is tensor

    def __getitem__(self, tensor: torch.Tensor) -> Any:
        entry = self._entries.get(id(tensor))
        if entry is None or entry[0]() is not tensor:
            raise KeyError(tensor)
        return entry[1]

    def __setitem__(self, tensor: torch.Tensor, value: Any) -> None:
        self._entries[id(tensor)] = (weakref.ref(tensor), value)

    def setdefault(self, tensor: torch.Tensor, value: Any) -> Any:
        entry = self._entries.get(id(tensor))
        if entry is not None and entry[0]() is tensor:
            return entry[1]
        self._entries[id(tensor)] = (weakref.ref(tensor), value)
        return value

    def items(self) -> list[tuple[torch.Tensor, Any]]:
        """The (tensor, value) pairs of the tensors still alive."""
        alive = [(ref(), value) for ref, value in self._entries.values()]
        return [(tensor, value) for tensor, value in alive if tensor is not None]


# The signature of each module class's forward, kept across recordings: reading one
# (inspect.signature) cost as much as recording a small model's ops.
_SIGNATURES: "weakref.WeakKeyDictionary[type, Optional[inspect.Signature]]" = weakref.WeakKeyDictionary()


def _forward_signature(module: torch.nn.Module) -> Optional[inspect.Signature]:
    """The signature of ``module.forward`` (None when it cannot be read), kept per class
    unless the module has a ``forward`` of its own (set on the instance). A recorder's stand-in
    (see ``Recorder._watch_calls``) is looked through."""
    forward = module.forward
    while getattr(forward, _STAND_IN, None) is not None:
        forward = getattr(forward, _STAND_IN)
    own = getattr(forward, "__func__", None) is not getattr(type(module), "forward", None)
    if not own and type(module) in _SIGNATURES:
        return _SIGNATURES[type(module)]
    try:
        signature: Optional[inspect.Signature] = inspect.signature(forward)
    except (TypeError, ValueError):
        signature = None
    if not own:
        _SIGNATURES[type(module)] = signature
    return signature


# The attribute of a stand-in forward (see Recorder._watch_calls) that holds the forward it calls.
_STAND_IN = "_graphviz_autograd_forward"
_NOT_SET = object()
# Calls that ask a tensor about itself (its shape, dtype, device, whether it requires grad) and
# return no tensor: nothing to note, and a model makes many (T5: 102 of its 407 calls).
_QUERIES = frozenset(
    [getattr(torch.Tensor, name).__get__ for name in (
        "shape", "dtype", "device", "requires_grad", "ndim", "is_leaf", "layout", "grad_fn", "is_cuda",
        "is_sparse", "is_quantized", "is_meta", "is_nested", "is_cpu") if hasattr(torch.Tensor, name)]
    + [getattr(torch.Tensor, name) for name in (
        "size", "dim", "ndimension", "stride", "numel", "nelement", "is_floating_point", "is_complex",
        "is_contiguous", "element_size", "get_device", "storage_offset", "__len__") if hasattr(torch.Tensor, name)]
)
# Whether a function writes into its first argument (see _in_place), by function: asked of every call.
_IN_PLACE: dict[Callable, bool] = {}
_mode_off = torch._C.DisableTorchFunction
# The sequence number the thread's next autograd node will get: each node made takes one
# (None on a torch that does not tell: then every call's new nodes are walked).
_next_node: Optional[Callable[[], int]] = getattr(torch._C._autograd, "_get_sequence_nr", None)


# Types of the values a call takes and returns that hold no tensor and are no container.
_PLAIN_VALUES = frozenset((
    int, float, bool, complex, str, type(None), slice, type(Ellipsis),
    torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size,
))
_is_tensor = torch.Tensor.__instancecheck__


def _tensors_in(args: tuple, kwargs: Optional[dict] = None) -> list[torch.Tensor]:
    """The tensors among ``args``, the values of ``kwargs`` and the lists and tuples they hold,
    in order: what ``tree_leaves((args, kwargs))`` finds.

    The recorder asks this of every call of the forward pass, where ``tree_leaves`` was
    a third of its cost (T5: 8,000 calls a forward): its generic look-up of each value's
    type is the price of containers a call rarely holds. Calls take tensors, numbers
    and lists of tensors; anything else (a dict, a namedtuple, a list in a list) is
    handed to ``tree_leaves`` whole.
    """
    found: list[torch.Tensor] = []
    add = found.append
    plain = _PLAIN_VALUES
    for values in (args, kwargs.values() if kwargs else ()):
        for value in values:
            if _is_tensor(value):
                add(value)
            elif type(value) in plain:
                continue
            elif type(value) is list or type(value) is tuple:
                for item in value:
                    if _is_tensor(item):
                        add(item)
                    elif type(item) not in plain:
                        return _tree_tensors(args, kwargs)
            else:
                return _tree_tensors(args, kwargs)
    return found


# The Python numbers an op takes as an operand (a bool is a flag more often than an operand).
_NUMBER_TYPES = frozenset((int, float, complex))


def _flat(args: Any) -> list[Any]:
    """The values of ``args`` and of the lists and tuples among them, in order."""
    return [item for value in args for item in (value if type(value) in (list, tuple) else (value,))]


def _tree_tensors(args: tuple, kwargs: Optional[dict]) -> list[torch.Tensor]:
    return [t for t in tree_leaves((args, kwargs or {})) if isinstance(t, torch.Tensor)]


def _in_place(func: Callable) -> bool:
    """Whether ``func`` writes into its first argument: ``relu_``, ``add_``, ``__iadd__``
    (and ``F.relu(x, inplace=True)``, told by its keyword)."""
    name = getattr(func, "__name__", "")
    return (name.endswith("_") and not name.endswith("__")) or name.startswith("__i")


# Inside torch.compile's tracing the recorder does nothing: any Python it ran there
# (thread ids, weak dictionaries) would split the compiled graph. Compiled code
# shows as CompiledFunctionBackward nodes, which :meth:`Recorder.note_unseen` names.
_compiling = torch.compiler.is_compiling
COMPILED_NOTE = (
    "record() could not look inside this torch.compile'd code: its ops show as one CompiledFunctionBackward node."
)


def record(model: Optional[torch.nn.Module] = None, *, nonfinite: bool = False) -> Recorder:
    """Record the forward pass run inside ``with record(model) as rec:``.

    Then ``make_dot(loss, recorder=rec)`` draws modules as clusters and says at each
    input without gradient how it lost it (``detach()``, ``no_grad()``, a frozen
    parameter, a buffer, ...). Without ``model`` only the reasons are recorded.

    When the forward pass raises, ``rec.failure`` is the call that raised
    (:class:`ForwardFailure`), and ``make_dot(rec.failure, recorder=rec)`` (or ``render``,
    ``explore``) draws the graph up to it. ``nonfinite=True`` also reads every call's
    values for NaN and Inf (``rec.nonfinite``; see
    :func:`~graphviz_autograd.checks.nonfinite_origin.find_nonfinite`).

    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(4, 2))
    >>> rec = record(model)
    >>> try:
    ...     with rec:
    ...         model(torch.ones(2, 4))
    ... except RuntimeError:
    ...     pass
    >>> rec.failure.call, rec.failure.module, rec.failure.module_type
    ('F.linear', '1', 'Linear')
    """
    return Recorder(model, nonfinite=nonfinite)


class ForwardFailure:
    """The call that raised in a recorded forward pass (:attr:`Recorder.failure`), and the
    tensors it was given: what :func:`~graphviz_autograd.capture.walking.walk` (and so
    ``make_dot``, ``render``, ``explore``) draws as the graph up to the failure, with the
    failing call as a red node.

    ``call`` names it (``F.linear``, ``Tensor.view``; for an exception raised by Python code
    between calls, what raised it), ``module`` is the module call it ran in ('' at the top
    level) and ``module_type`` its class, ``error`` the exception's type and first line,
    ``where`` the user's source line, ``inputs`` a text per tensor it was given (name, shape,
    dtype). It holds those tensors (and so the graph before them) until :meth:`release`.
    """

    def __init__(self, call: str, module: str, module_type: str, error: str, where: str,
                 inputs: tuple[str, ...], tensors: list[tuple[str, torch.Tensor]]):
        self.call = call
        self.module = module
        self.module_type = module_type
        self.error = error
        self.where = where
        self.inputs = inputs
        self._tensors = tensors

    @property
    def tensors(self) -> list[tuple[str, torch.Tensor]]:
        """The tensors the failing call was given, by name (empty after :meth:`release`)."""
        return list(self._tensors)

    @property
    def has_graph(self) -> bool:
        """Whether any tensor the failing call was given carries a graph (a grad_fn, or requires
        grad): whether anything that ran before it is there to draw."""
        return any(t.grad_fn is not None or t.requires_grad for _, t in self._tensors)

    def release(self) -> None:
        """Let go of the tensors the failing call was given (and so of the graph before them)."""
        self._tensors = []

    def summary(self) -> str:
        """The failure in one sentence.

        >>> ForwardFailure("F.linear", "1", "Linear", "RuntimeError: bad shapes", "net.py:9", ("input: (2, 4)",), []).summary()
        'F.linear in 1 (Linear) raised RuntimeError: bad shapes, at net.py:9, given input: (2, 4).'
        """
        where = f" in {self.module} ({self.module_type})" if self.module else " at the top level"
        at = f", at {self.where}" if self.where else ""
        given = f", given {'; '.join(self.inputs)}" if self.inputs else ""
        return f"{self.call}{where} raised {self.error}{at}{given}."

    def __repr__(self) -> str:
        return f"ForwardFailure({self.summary()!r})"


# The name of the tensors a failure raised by Python code is drawn from.
_LAST_RESULT = "last result"


def _error_text(error: BaseException) -> str:
    """'RuntimeError: <the first line of its message>'."""
    first = first_line(error)
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def _raised_from(error: BaseException, origin: BaseException) -> bool:
    """Whether ``error`` is ``origin`` or was raised while handling it (its cause or context, at any depth)."""
    seen: set[int] = set()
    current: Optional[BaseException] = error
    while current is not None and id(current) not in seen:
        if current is origin:
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _root_error(error: BaseException) -> BaseException:
    """The first exception of the chain that ``error`` was raised from (the user's own)."""
    seen: set[int] = set()
    while (error.__cause__ or error.__context__) is not None and id(error) not in seen:
        seen.add(id(error))
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
    return error


def _error_frame(error: BaseException) -> str:
    """``file:line`` of the deepest frame of ``error``'s traceback outside torch and this package."""
    where = ""
    for frame in traceback.extract_tb(error.__traceback__):
        filename = os.path.abspath(frame.filename)
        if frame.filename.startswith("<") or filename.startswith(LIBRARY_DIRS):
            continue
        where = f"{short_path(frame.filename)}:{frame.lineno}"
    return where


def _tensor_text(tensor: torch.Tensor) -> str:
    """'(2, 8) float32' (and 'requires grad' when it does): the shape as every picture writes it."""
    grad = ", requires grad" if tensor.requires_grad else ""
    return f"{shape_text(tuple(tensor.shape))} {str(tensor.dtype).replace('torch.', '')}{grad}"


class _ModelTensors:
    """A model's modules, parameters and buffers, from one walk over its modules.

    ``record`` asks for them on every forward pass it watches, where asking the model
    (``named_modules``, then ``named_parameters`` and ``named_buffers``, each walking the
    modules again) was a third of recording a small T5 (1,000 modules). ``parameters``
    and ``buffers`` are what ``named_parameters(remove_duplicate=False)`` and
    ``named_buffers(remove_duplicate=False)`` list, ``modules`` what ``named_modules()``
    does, in the same order.

    >>> tensors = _ModelTensors(torch.nn.Sequential(torch.nn.Linear(2, 1)))
    >>> list(tensors.modules), [name for name, _ in tensors.parameters]
    (['', '0'], ['0.weight', '0.bias'])
    """

    def __init__(self, model: torch.nn.Module):
        self.modules: dict[str, torch.nn.Module] = {}
        self.parameters: list[tuple[str, torch.Tensor]] = []
        self.buffers: list[tuple[str, torch.Tensor]] = []
        seen: set[int] = set()
        for path, module in model.named_modules(remove_duplicate=False):
            if id(module) not in seen:
                seen.add(id(module))
                self.modules[path] = module
            prefix = path + "." if path else ""
            self.parameters.extend((prefix + name, p) for name, p in module._parameters.items() if p is not None)
            self.buffers.extend((prefix + name, b) for name, b in module._buffers.items() if b is not None)

    def module_infos(self, counted: bool = True) -> tuple[ModuleInfo, ...]:
        """A :class:`ModuleInfo` per module, each with the parameter count of ``module.parameters()``
        (a tied weight counted once per module holding it), from one pass over every parameter's path;
        with ``counted=False``, each with 0."""
        if not counted:
            return tuple(ModuleInfo(name, type(module).__name__) for name, module in self.modules.items())
        held: dict[str, dict[int, int]] = {name: {} for name in self.modules}  # module -> id(parameter) -> numel
        for name, parameter in self.parameters:
            owner = name
            while True:
                owner = owner.rpartition(".")[0] if "." in owner else ""
                if owner in held:
                    held[owner][id(parameter)] = parameter.numel()
                if not owner:
                    break
        return tuple(ModuleInfo(name, type(module).__name__, sum(held[name].values()))
                     for name, module in self.modules.items())

    def frozen_and_buffers(self) -> dict[int, tuple[str, str, str]]:
        """id -> reason for the model's frozen parameters and its buffers, with their owners."""
        named: dict[int, tuple[str, str, str]] = {}
        for name, param in self.parameters:
            if not param.requires_grad:
                named.setdefault(id(param), (FROZEN, f"frozen {name}", name.rpartition(".")[0]))
        for name, buffer in self.buffers:
            named.setdefault(id(buffer), (BUFFER, f"buffer {name}", name.rpartition(".")[0]))
        return named


def _place(path: str, index: dict[str, int]) -> tuple:
    """Where the first call of module ``path`` sorts: per level of its path, (the place of that
    module in the model's, by ``index``, call 1)."""
    if not path:
        return ()
    parts = path.split(".")
    return tuple((index.get(".".join(parts[: i + 1]), len(index)), 1) for i in range(len(parts)))


def _with_later_calls(
    modules: tuple[ModuleInfo, ...], index: dict[str, int], later: dict[str, tuple[str, tuple]]
) -> tuple[ModuleInfo, ...]:
    """``modules`` (``index``: path -> place among them) with a :class:`ModuleInfo` for each
    later call of one, each right after the calls before it and everything inside them.
    A later call holds no parameters of its own: its ops read those of the first call."""
    if not later:
        return modules
    types = {info.path: info.type_name for info in modules}
    placed = [(_place(info.path, index), info) for info in modules]
    placed.extend((place, ModuleInfo(path, types.get(name, ""), 0)) for path, (name, place) in later.items())
    placed.sort(key=lambda pair: pair[0])
    return tuple(info for _, info in placed)
