"""Where a NaN or an infinity is born: every call of a forward pass, every node of a backward pass.

A value that is not finite spreads: one ``log`` of a negative number makes a NaN that
every op after it carries, and the first module whose output anyone looks at is seldom
the one that made it. This module watches values op by op and tells the two apart:

- the **producer** of a forward call is a call whose tensor inputs are all finite and
  whose output is not (``log`` of a value <= 0, ``exp`` past the dtype's range, a
  division by zero, a matmul that overflows float16); a **source** is a tensor that
  enters non-finite from outside the calls watched (an input batch holding NaN, a
  parameter an earlier step wrote NaN into);
- the producer of a backward pass is a node whose incoming gradient is finite and whose
  outgoing gradient is not (``sqrt`` at 0, a division by a zero variance);
- a **carrier** only passes on what it got.

:class:`ForwardValues` is told of each call by the forward recorder
(:class:`~graphviz_autograd.capture.recording.Recorder`, made with ``nonfinite=True``);
:class:`BackwardValues` hooks the nodes of a graph before ``backward()``. Both keep
plain records (names, numbers, texts and autograd sequence numbers), never a tensor,
so that the nodes they name are found again in a walked graph by sequence number.

>>> import torch
>>> values = BackwardValues([])
>>> values.producers, values.carriers
([], [])
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any, Callable, NamedTuple, Optional, Sequence

import torch
from torch.utils.weak import WeakIdKeyDictionary

# At most this many producers are kept per backward pass: the first is the one that
# matters, the count of the others says how widespread the problem is.
MAX_KEPT = 20

# Where a call comes from: the innermost frame outside torch and this package.
LIBRARY_DIRS = (
    os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
)


class Producer(NamedTuple):
    """Where non-finite values were born, as plain data.

    ``phase`` is ``"forward"``, ``"backward"`` or ``"source"`` (a tensor that entered the
    forward pass non-finite); ``op`` the call (``torch.log``) or node (``SqrtBackward0``);
    ``module`` the module call it ran in ('' for the top level, or unknown in backward);
    ``where`` the user's source line (``file.py:12``, forward only); ``nan`` and ``inf``
    count the non-finite elements it made; ``why`` says what made them in words;
    ``sequence_nr`` is the autograd sequence number of the node that stands for it in
    the graph (-1 when none does: a call whose output carries no gradient); ``name`` the
    tensor's name for a source.
    """

    phase: str
    op: str
    module: str
    where: str
    nan: int
    inf: int
    why: str
    sequence_nr: int = -1
    name: str = ""

    def counts_text(self) -> str:
        """'3 NaN and 1 Inf', '4 NaN', '2 Inf'."""
        parts = [f"{self.nan} NaN" if self.nan else "", f"{self.inf} Inf" if self.inf else ""]
        return " and ".join(p for p in parts if p) or "NaN/Inf"


def user_frame() -> str:
    """``file:line`` of the innermost frame of the running stack outside torch and this package."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith("<") and not os.path.abspath(filename).startswith(LIBRARY_DIRS):
            return f"{short_path(filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


def short_path(filename: str) -> str:
    """A path relative to the working folder when it lies inside it, else as it is."""
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive
        return filename
    return filename if relative.startswith("..") else relative


def _values(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``'s values, out of the graph: a sparse tensor's stored ones."""
    values = tensor.detach()
    return values.coalesce().values() if values.is_sparse else values


def all_finite(tensor: torch.Tensor) -> bool:
    """Whether every element of ``tensor`` is finite (True for integer and bool tensors, and for
    tensors whose values cannot be read: meta, or a layout ``isfinite`` does not take)."""
    if not (tensor.is_floating_point() or tensor.is_complex()) or tensor.is_meta:
        return True
    try:
        values = _values(tensor)
        # A sum is NaN or infinite when any element is: one reduction, no tensor of flags as
        # large as the values (a fifth of the time on GPT-2's logits). A sum that overflows
        # from finite values is only a suspicion, which the element-wise test settles.
        if bool(torch.isfinite(values.sum())):
            return True
        return bool(torch.isfinite(values).all())
    except (RuntimeError, TypeError, NotImplementedError):
        return True


def nonfinite_counts(tensor: torch.Tensor) -> tuple[int, int]:
    """(NaN elements, infinite elements) of ``tensor``."""
    try:
        values = _values(tensor)
        return int(torch.isnan(values).sum()), int(torch.isinf(values).sum())
    except (RuntimeError, TypeError, NotImplementedError):
        return 0, 0


def _finite_range(tensor: torch.Tensor) -> Optional[tuple[float, float, float]]:
    """(min, max, smallest magnitude) of ``tensor``'s finite values; None when it has none."""
    try:
        values = _values(tensor)
        if values.is_complex():
            values = values.abs()
        values = values[torch.isfinite(values)].double() if values.numel() else values.double()
        if values.numel() == 0:
            return None
        return float(values.min()), float(values.max()), float(values.abs().min())
    except (RuntimeError, TypeError, NotImplementedError):
        return None


def _number(value: float) -> str:
    return f"{value:.3g}".replace("-", "\u2212")


def _range_text(tensor: torch.Tensor) -> str:
    found = _finite_range(tensor)
    if found is None:
        return "no finite values"
    low, high, _ = found
    return f"min {_number(low)}, max {_number(high)}"


# --- forward: what made the values of one call ---------------------------------------

# Calls by the name autograd and torch give them: what a value outside their domain makes.
_LOGS = {"log", "log_", "log2", "log2_", "log10", "log10_"}
_LOG1P = {"log1p", "log1p_"}
_SQRTS = {"sqrt", "sqrt_"}
_RSQRTS = {"rsqrt", "rsqrt_"}
_DIVISIONS = {"div", "div_", "true_divide", "true_divide_", "divide", "divide_", "__truediv__", "__itruediv__",
              "floor_divide", "__floordiv__", "fmod", "remainder", "__mod__"}
_REVERSE_DIVISIONS = {"__rtruediv__", "reciprocal", "reciprocal_", "__rfloordiv__"}
_EXPS = {"exp", "exp_", "expm1", "expm1_", "exp2", "exp2_", "cosh", "sinh"}
_POWERS = {"pow", "pow_", "__pow__", "__ipow__", "float_power"}
_UNIT_DOMAIN = {"acos", "acos_", "asin", "asin_", "arccos", "arcsin"}
_ATANH = {"atanh", "atanh_", "arctanh"}
_NORMALISATIONS = {"layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm", "normalize"}


def forward_cause(name: str, inputs: Sequence[Any], outputs: Sequence[torch.Tensor]) -> str:
    """Why a call named ``name`` made non-finite values from finite ``inputs`` (its tensors and
    numbers in order), in words with the numbers that show it.

    >>> forward_cause("log", [torch.tensor([-0.31, 2.0])], [torch.tensor([float("nan"), 0.69])])
    'log of a value \u2264 0: min \u22120.31'
    """
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    first = tensors[0] if tensors else None
    base = name.strip("_").rstrip("_") if name.startswith("__") else name.rstrip("_")
    if first is not None:
        found = _finite_range(first)
        low = found[0] if found else math.nan
        if name in _LOGS:
            return f"{base} of a value \u2264 0: min {_number(low)}"
        if name in _LOG1P:
            return f"log1p of a value \u2264 \u22121: min {_number(low)}"
        if name in _SQRTS:
            return f"sqrt of a negative value: min {_number(low)}"
        if name in _RSQRTS:
            return f"rsqrt of a value \u2264 0: min {_number(low)}"
        if name in _UNIT_DOMAIN:
            return f"{base} of a value outside [\u22121, 1]: {_range_text(first)}"
        if name in _ATANH:
            return f"atanh of a value outside (\u22121, 1): {_range_text(first)}"
        if name in _EXPS:
            limit = math.log(torch.finfo(first.dtype).max) if first.is_floating_point() else math.nan
            return f"{base} overflows {_dtype(first)} above {_number(limit)}: max {_number(found[1] if found else math.nan)}"
        if name in _REVERSE_DIVISIONS:
            return f"division by zero: the divisor's smallest |value| is {_number(found[2] if found else math.nan)}"
    if name in _DIVISIONS:
        divisor = inputs[1] if len(inputs) > 1 else None
        if isinstance(divisor, torch.Tensor):
            found = _finite_range(divisor)
            return f"division by zero: the divisor's smallest |value| is {_number(found[2] if found else math.nan)}"
        if isinstance(divisor, (int, float)):
            return f"division by {divisor!r}"
    if name in _POWERS and first is not None:
        exponent = inputs[1] if len(inputs) > 1 else None
        found = _finite_range(first)
        if found is not None and found[0] < 0 and isinstance(exponent, float) and not exponent.is_integer():
            return f"a negative value to the power {exponent:g}: min {_number(found[0])}"
        if found is not None and found[2] == 0 and isinstance(exponent, (int, float)) and exponent < 0:
            return f"0 to the power {exponent:g}"
    if name in _NORMALISATIONS:
        numbers = [v for v in (*inputs,) if isinstance(v, float)]
        eps = f" (eps = {numbers[-1]:g})" if numbers else ""
        return f"{name} of values that do not vary, so it divides by a deviation of 0{eps}: {_range_text(first) if first is not None else ''}"
    made_inf = any(nonfinite_counts(t)[1] for t in outputs)
    floating = [t for t in tensors if t.is_floating_point()]
    if made_inf and floating:
        dtype = outputs[0].dtype if outputs and outputs[0].is_floating_point() else floating[0].dtype
        largest = max((_finite_range(t) or (0.0, 0.0, 0.0))[1:2][0] for t in floating)
        smallest = min((_finite_range(t) or (0.0, 0.0, 0.0))[0] for t in floating)
        magnitude = max(abs(largest), abs(smallest))
        return (f"overflow: the result exceeds {_dtype_name(dtype)}'s largest value {_number(torch.finfo(dtype).max)} "
                f"(inputs' largest |value| {_number(magnitude)})")
    ranges = "; ".join(f"input {i}: {_range_text(t)}" for i, t in enumerate(tensors[:3]))
    return f"NaN from finite inputs ({ranges})" if ranges else "NaN from finite inputs"


def _dtype(tensor: torch.Tensor) -> str:
    return _dtype_name(tensor.dtype)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


class ForwardValues:
    """What the calls of one recorded forward pass made: where each NaN and Inf was born, and
    which calls carried it on (see the module's docstring). The recorder calls :meth:`before`
    and :meth:`after` around each call; ``name_of`` names a tensor the model knows (a
    parameter, a buffer, an input), '' for any other.

    Each non-finite tensor remembers its **birth**: the index in :attr:`births` of the producer
    or source its values came from (the earliest, when a call mixes several). A birth whose
    values never reach the pass's output is no fault: an attention mask of ``-inf`` that a
    softmax takes in is one. :meth:`origin_of` tells which birth an output carries.
    """

    def __init__(self, name_of: Callable[[torch.Tensor], str]):
        self.name_of = name_of
        self.births: list[Producer] = []  # producers and sources, in the order they were seen
        # Sequence numbers of the nodes of calls that passed NaN/Inf on, with the birth they carried.
        self.carriers: dict[int, int] = {}
        self.calls = 0
        # tensor -> -1 when it was finite when last seen, else the index of its values' birth
        self._birth: WeakIdKeyDictionary = WeakIdKeyDictionary()

    @property
    def producers(self) -> list[Producer]:
        """The calls that made NaN/Inf from finite inputs, in order."""
        return [b for b in self.births if b.phase == "forward"]

    @property
    def sources(self) -> list[Producer]:
        """The tensors that entered the pass holding NaN/Inf, in order."""
        return [b for b in self.births if b.phase == "source"]

    def origin_of(self, tensor: torch.Tensor) -> Optional[int]:
        """The index in :attr:`births` of where ``tensor``'s NaN/Inf was born; None when it is finite."""
        birth = self._birth.get(tensor)
        if birth is None:
            birth = -1 if all_finite(tensor) else self._note_source(tensor, "")
        return None if birth < 0 else birth

    def _remember(self, tensor: torch.Tensor, birth: int) -> None:
        try:
            self._birth[tensor] = birth
        except TypeError:  # a tensor subclass that cannot be weakly referenced
            pass

    def before(self, inputs: list[torch.Tensor], module: str) -> int:
        """-1 when every tensor input of the call about to run is finite, else the earliest birth
        among them; read before the call (an in-place call writes over its input). A tensor that
        no watched call made and that is not finite is a source, noted once."""
        earliest = -1
        known = self._birth
        for tensor in inputs:
            birth = known.get(tensor)
            if birth is None:
                birth = -1 if all_finite(tensor) else self._note_source(tensor, module)
                self._remember(tensor, birth)
            if birth >= 0 and (earliest < 0 or birth < earliest):
                earliest = birth
        return earliest

    def after(self, func: Callable, args: tuple, kwargs: dict, outputs: list[torch.Tensor], inputs_birth: int,
              module: str) -> None:
        """Note what the call made: each output's finiteness and birth, the call a producer (from
        finite inputs) or a carrier."""
        self.calls += 1
        bad = [tensor for tensor in outputs if not all_finite(tensor)]
        for tensor in outputs:
            self._remember(tensor, -1)
        if not bad:
            return
        numbers = [fn._sequence_nr() for fn in (t.grad_fn for t in bad) if fn is not None]
        if inputs_birth >= 0:
            birth = inputs_birth
            for number in numbers:
                self.carriers.setdefault(number, birth)
        else:
            nan = inf = 0
            for tensor in bad:
                n, i = nonfinite_counts(tensor)
                nan, inf = nan + n, inf + i
            name = getattr(func, "__name__", "call")
            values = [v for v in (*args, *kwargs.values())]
            birth = len(self.births)
            made = _computing_node(bad[0].grad_fn, values)
            self.births.append(Producer(
                "forward", call_name(func), module, user_frame(), nan, inf, forward_cause(name, values, bad),
                made._sequence_nr() if made is not None else -1,
            ))
        for tensor in bad:
            self._remember(tensor, birth)

    def _note_source(self, tensor: torch.Tensor, module: str) -> int:
        nan, inf = nonfinite_counts(tensor)
        name = self.name_of(tensor)
        what = "an input" if not name else name
        self.births.append(Producer(
            "source", "", module, user_frame(), nan, inf,
            f"{what} of shape {tuple(tensor.shape)} already holds {nan} NaN and {inf} Inf before any op uses it"
            .replace(" 0 NaN and", "").replace(" and 0 Inf", ""),
            -1, name,
        ))
        return len(self.births) - 1


# Nodes that only reshape what their one input computed: a call made of several ops
# (``x @ w`` on a batch: a view, ``mm``, ``_unsafe_view``) ends in one of them.
_RESHAPING_NODES = frozenset({
    "UnsafeViewBackward0", "ViewBackward0", "ReshapeAliasBackward0", "ExpandBackward0", "TransposeBackward0",
    "PermuteBackward0", "SqueezeBackward0", "SqueezeBackward1", "UnsqueezeBackward0", "AliasBackward0",
    "CloneBackward0", "ToCopyBackward0",
})


def _computing_node(fn: Any, inputs: Sequence[Any]) -> Any:
    """The node of a call's output that computed it: ``fn`` itself, or, when ``fn`` only
    reshapes, the node it reshapes, if the same call made it (it is no input's node), so
    that a NaN born in a batched matmul is placed at ``BmmBackward0``, not at the view after it.

    >>> x = torch.ones(2, 3, 4, requires_grad=True)
    >>> w = torch.ones(4, 5, requires_grad=True)
    >>> _computing_node((x @ w).grad_fn, [x, w]).name()
    'MmBackward0'
    """
    held = [t.grad_fn for t in inputs if isinstance(t, torch.Tensor)]  # (an id is unique only while its object lives)
    known = {id(node) for node in held if node is not None}
    while fn is not None and fn.name() in _RESHAPING_NODES:
        children = [child for child, _ in fn.next_functions if child is not None]
        if len(children) != 1 or id(children[0]) in known or not children[0].next_functions:
            break  # the input itself, or a leaf's AccumulateGrad (which has no inputs)
        fn = children[0]
    return fn


def call_name(func: Callable) -> str:
    """How a message names a call: ``torch.log``, ``Tensor.view``, ``F.linear``, ``Tensor.__truediv__``.

    >>> call_name(torch.log), call_name(torch.Tensor.view), call_name(torch.nn.functional.softmax)
    ('torch.log', 'Tensor.view', 'F.softmax')
    """
    name = getattr(func, "__name__", None) or type(func).__name__
    qualified = getattr(func, "__qualname__", "") or ""
    module = getattr(func, "__module__", "") or ""
    if qualified.startswith(("Tensor.", "TensorBase.", "_TensorBase.")) or module == "torch._tensor":
        return f"Tensor.{name}"
    if module in ("torch.nn.functional", "torch._C._nn") or module.startswith("torch.nn.functional"):
        return f"F.{name}"
    if module.startswith("torch._C._linalg") or module == "torch.linalg":
        return f"torch.linalg.{name}"
    if type(getattr(func, "__self__", None)).__name__ in ("TensorBase", "_TensorBase"):  # a method of the C base class
        return f"Tensor.{name}"
    return f"torch.{name}"


# --- backward: which node's gradient went non-finite -------------------------------

# Backward nodes whose derivative is infinite at a point of their input, and that point in words.
_BACKWARD_CAUSES = {
    "SqrtBackward0": "the derivative of sqrt, 1/(2\u00b7sqrt(x)), is infinite where x is 0",
    "RsqrtBackward0": "the derivative of rsqrt is infinite where x is 0",
    "LogBackward0": "the derivative of log, 1/x, is infinite where x is 0",
    "Log2Backward0": "the derivative of log2 is infinite where x is 0",
    "Log10Backward0": "the derivative of log10 is infinite where x is 0",
    "ReciprocalBackward0": "the derivative of 1/x is infinite where x is 0",
    "DivBackward0": "the gradient of a division by a value near 0 (such as a zero variance)",
    "PowBackward0": "the derivative of x**p with p < 1 is infinite where x is 0",
    "PowBackward1": "the derivative of a power is not finite at this base or exponent",
    "AcosBackward0": "the derivative of acos is infinite where |x| is 1",
    "AsinBackward0": "the derivative of asin is infinite where |x| is 1",
    "NormBackward1": "the derivative of a norm is NaN where the norm is 0",
    "LinalgVectorNormBackward0": "the derivative of a norm is NaN where the norm is 0",
    "StdBackward0": "the derivative of std is infinite where the std is 0",
    "VarBackward0": "the derivative of var is not finite here",
}


def backward_cause(fn: Any) -> str:
    """What made a backward node's gradient non-finite, with what it saved for backward."""
    name = fn.name()
    known = _BACKWARD_CAUSES.get(name, "")
    saved = []
    for attribute in sorted(dir(fn)):
        if not attribute.startswith("_saved_"):
            continue
        try:
            value = getattr(fn, attribute)
        except RuntimeError:  # freed, or cannot be read
            continue
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel():
            found = _finite_range(value)
            if found is not None:
                saved.append(f"{attribute[len('_saved_'):]}: smallest |value| {_number(found[2])}, "
                             f"{_range_text(value)}")
    detail = f" (saved {'; '.join(saved[:3])})" if saved else ""
    if known:
        return known + detail
    return f"the gradient entering it is finite and the gradient it passes on is not{detail}"


class BackwardValues:
    """Hooks every node reachable from ``roots`` (grad_fns) so that the backward pass that
    runs next says which node first turned a finite gradient into a non-finite one.

    Call :meth:`remove` after the backward pass (the hooks would run again on a later one)."""

    def __init__(self, roots: Sequence[Any]):
        self.producers: list[Producer] = []
        self.carriers: list[int] = []  # sequence numbers, in the order backward ran them
        self.produced = 0
        self._handles: list[Any] = []
        seen: dict[int, Any] = {}  # id -> the node's wrapper, held: an id is only unique while its object lives
        stack = [fn for fn in roots if fn is not None]
        while stack:
            fn = stack.pop()
            if id(fn) in seen:
                continue
            seen[id(fn)] = fn
            try:
                self._handles.append(fn.register_hook(self._hook(fn)))
            except (RuntimeError, AttributeError):  # a node that takes no hooks
                pass
            stack.extend(child for child, _ in fn.next_functions if child is not None)

    def _hook(self, fn: Any) -> Callable:
        def on_gradient(grad_inputs: tuple, grad_outputs: tuple) -> None:
            outgoing = [g for g in grad_inputs if isinstance(g, torch.Tensor)]
            if all(all_finite(g) for g in outgoing):
                return
            # Only now is the incoming gradient read: most nodes pass finite gradients on.
            incoming = all(all_finite(g) for g in grad_outputs if isinstance(g, torch.Tensor))
            number = fn._sequence_nr()
            if not incoming:
                self.carriers.append(number)
                return
            self.produced += 1
            if len(self.producers) >= MAX_KEPT:
                return
            nan = inf = 0
            for g in outgoing:
                n, i = nonfinite_counts(g)
                nan, inf = nan + n, inf + i
            self.producers.append(Producer("backward", fn.name(), "", "", nan, inf, backward_cause(fn), number))

        return on_gradient

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []


__all__ = [
    "BackwardValues",
    "ForwardValues",
    "LIBRARY_DIRS",
    "MAX_KEPT",
    "Producer",
    "all_finite",
    "backward_cause",
    "call_name",
    "forward_cause",
    "nonfinite_counts",
    "short_path",
    "user_frame",
]
