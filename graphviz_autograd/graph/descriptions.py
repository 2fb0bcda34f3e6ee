"""Plain-word descriptions of nodes, for the tooltips of a drawing.

A label stays short (``MulBackward0``); its tooltip says what the node means: the op
in words, where in the model it was made, the shapes around it. Text only: dot.py
escapes it.

>>> base_op("NativeLayerNormBackward0"), op_meaning("NativeLayerNormBackward0")
('native_layer_norm', 'layer normalisation')
>>> print("\\n".join(describe_op("MulBackward0")))
Gradient of mul: element-wise multiplication.
The trailing 0 is PyTorch's overload index, not a layer number.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from typing import Iterable, Optional, Sequence

from .autograd_graph import (
    ACCUMULATE_GRAD, FAILED, LEAF, MODULE, NO_GRAD, OP, OUTPUT, PARAMETER, PORT_OUT, SAVED, Node, cut_location, op_constants,
    other_names, port_names, saved_attrs,
)

# What common ops do, by the base name their backward node is named after.
OP_MEANINGS = {
    "abs": "absolute value",
    "add": "addition",
    "addcmul": "addition of an element-wise product",
    "addmm": "matrix multiplication plus a bias (a Linear layer: bias + input @ weight.T)",
    "as_strided": "a strided view of a tensor (no data copied)",
    "avg_pool": "average pooling",
    "adaptive_avg_pool": "adaptive average pooling (to a fixed output size)",
    "baddbmm": "batched matrix multiplication plus a tensor",
    "batch_norm": "batch normalisation",
    "binary_cross_entropy": "binary cross-entropy loss",
    "bmm": "batched matrix multiplication",
    "cat": "concatenation of tensors along a dimension",
    "clamp": "clamping values into a range",
    "clone": "a copy of a tensor",
    "convolution": "convolution (a Conv layer)",
    "copy_slices": "an in-place write into part of a tensor",
    "cos": "cosine",
    "cumsum": "cumulative sum",
    "div": "element-wise division",
    "dot": "dot product of two vectors",
    "dropout": "dropout (zeroes random elements while training)",
    "embedding": "embedding look-up (rows of a weight table picked by index)",
    "exp": "exponential",
    "expand": "broadcast to a bigger shape (no data copied)",
    "gather": "gathering values by index",
    "gelu": "GELU activation",
    "index": "indexing with a tensor of indices, x[idx]",
    "index_put": "writing values at given indices",
    "index_select": "picking rows by index",
    "linear": "a Linear layer, input @ weight.T + bias",
    "log": "natural logarithm",
    "log_softmax": "log of softmax (log-probabilities)",
    "masked_fill": "filling masked positions with a value",
    "matmul": "matrix multiplication",
    "max": "maximum",
    "max_pool": "max pooling",
    "mean": "mean over elements",
    "min": "minimum",
    "mm": "matrix multiplication",
    "mse_loss": "mean squared error loss",
    "mul": "element-wise multiplication",
    "mv": "matrix-vector multiplication",
    "native_batch_norm": "batch normalisation",
    "native_dropout": "dropout (zeroes random elements while training)",
    "native_group_norm": "group normalisation",
    "native_layer_norm": "layer normalisation",
    "neg": "negation",
    "nll_loss": "negative log-likelihood loss (after log_softmax: cross-entropy)",
    "norm": "a vector norm",
    "permute": "reordering of dimensions (no data copied)",
    "pow": "power",
    "relu": "ReLU activation (negative values become zero)",
    "repeat": "repeating a tensor along dimensions",
    "reshape": "the same values in a new shape",
    "rsqrt": "reciprocal square root",
    "rsub": "subtraction with the operands swapped",
    "scaled_dot_product": "scaled dot-product attention, softmax(q @ k.T / sqrt(d)) @ v",
    "select": "one index along a dimension, x[i]",
    "sigmoid": "sigmoid activation",
    "silu": "SiLU (swish) activation",
    "sin": "sine",
    "slice": "a slice along a dimension, x[a:b]",
    "softmax": "softmax (scores to probabilities)",
    "sparse_addmm": "a sparse matrix times a dense one, plus a matrix (torch.sparse.mm adds zeros)",
    "split": "splitting into pieces",
    "split_with_sizes": "splitting into pieces of given sizes",
    "sqrt": "square root",
    "squeeze": "dropping a dimension of size 1",
    "stack": "stacking tensors along a new dimension",
    "sub": "subtraction",
    "sum": "sum over elements",
    "t": "transpose of a matrix",
    "tanh": "tanh activation",
    "to_copy": "a conversion to another dtype or device",
    "transpose": "swapping two dimensions (no data copied)",
    "unbind": "splitting into slices along a dimension",
    "unsafe_view": "a reshape made inside another op such as matmul (no data copied)",
    "unsqueeze": "adding a dimension of size 1",
    "view": "the same data in a new shape (no data copied)",
    "where": "choosing values by a condition",
}

# Prefixes of backend-specific ops that mean the same as the op without them.
_BACKEND_PREFIXES = ("cudnn_", "mkldnn_", "miopen_", "native_", "_")

_BACKWARD = re.compile(r"Backward(\d*)$")
_WORD_START = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z0-9])(?=[A-Z][a-z])")
_SPATIAL = re.compile(r"(\d+d)?(_with_indices)?$")  # max_pool2d_with_indices -> max_pool

ACCUMULATE_GRAD_TEXT = "Stores the gradient of a leaf tensor in its .grad."
NO_GRAD_TEXT = "No gradient flows back through this input."
ANONYMOUS_NO_GRAD_TEXT = "A constant, a tensor without requires_grad, or one made under no_grad() or by detach()."
SAVED_NOTES = {
    "freed": "backward() already released its buffer",
    "modified in place": "an in-place op changed it after it was saved; backward() would fail on it",
}


# How a tooltip names a number operand of an op (x * 1.0001), which has no node of its own.
CONSTANT_TEXT = "with the constant"


def constant_lines(constants: Sequence[str], max_chars: int) -> list[str]:
    """The label lines of an op's number operands, each cut to ``max_chars``.

    >>> constant_lines(["variance_epsilon=1e-06"], 40), constant_lines(["1.0001", "2"], 40)
    (['with variance_epsilon=1e-06'], ['with 1.0001, 2'])
    """
    text = "with " + ", ".join(constants)
    return [text if len(text) <= max_chars else text[: max(max_chars - 3, 1)] + "..."]


def base_op(label: str) -> str:
    """The op a backward node's name comes from: ``AddmmBackward0`` -> ``addmm``.

    >>> base_op("MaxPool2DWithIndicesBackward0"), base_op("MyFunctionBackward"), base_op("CopySlices")
    ('max_pool2d_with_indices', 'my_function', 'copy_slices')
    """
    name = _BACKWARD.sub("", label.rpartition("::")[2]) or label
    return _WORD_START.sub("_", name).lower()


def op_meaning(label: str) -> Optional[str]:
    """What the op behind a backward node does, in plain words; None when unknown."""
    name = base_op(label)
    candidates = [name, _SPATIAL.sub("", name)]
    for prefix in _BACKEND_PREFIXES:
        candidates += [c[len(prefix) :] for c in candidates[:2] if c.startswith(prefix)]
    for candidate in candidates:
        if candidate in OP_MEANINGS:
            return OP_MEANINGS[candidate]
    for candidate in candidates:
        for known, meaning in OP_MEANINGS.items():
            if len(known) > 3 and candidate.startswith(known):
                return meaning
    return None


def overload_index(label: str) -> Optional[str]:
    """The digits after ``Backward`` in an op name (``MulBackward0`` -> ``0``), if any."""
    match = _BACKWARD.search(label)
    return match.group(1) if match and match.group(1) else None


def describe_op(label: str) -> list[str]:
    """The lines that explain a backward op node beyond its name, which its label shows."""
    return list(_op_lines(label))


# A big graph names the same few ops thousands of times, and working out the words
# takes a few regular expressions each: done once per op name. A tuple, so that no
# caller can change the cached lines.
@functools.lru_cache(maxsize=4096)
def _op_lines(label: str) -> tuple[str, ...]:
    name = base_op(label)
    meaning = op_meaning(label)
    if meaning is not None:
        lines = [f"Gradient of {name}: {meaning}."]
    else:
        lines = [f"Gradient of {name} (a custom autograd.Function, or an op not described here)."]
    index = overload_index(label)
    if index is not None:
        lines.append(f"The trailing {index} is PyTorch's overload index, not a layer number.")
    return tuple(lines)


def count_text(count: int) -> str:
    """A count as a short number: 768, 12.3k, 7.1M, 1.5B.

    >>> count_text(768), count_text(7_087_872), count_text(124_439_808), count_text(2_000_000)
    ('768', '7.1M', '124.4M', '2M')
    """
    for size, suffix in ((10**9, "B"), (10**6, "M"), (10**3, "k")):
        if count >= size:
            return f"{count / size:.1f}".rstrip("0").rstrip(".") + suffix
    return str(count)


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def module_summary(node: Node) -> dict[str, str]:
    """A module box's attrs as a dict (type, ops, params; repeats, first and last when folded)."""
    return dict(node.attrs)


# What a box says of a tensor without a name, and of an input without gradient whose
# origin is not known.
UNNAMED = "(unnamed)"
NO_GRAD_LABEL = "no grad"


def module_label_lines(node: Node) -> list[str]:
    """The lines under a module box's path: its class (×N when folded), ops and parameters."""
    summary = module_summary(node)
    return module_box_lines(
        summary.get("type", ""), int(summary.get("repeats") or 1), int(summary.get("ops", "0")), int(summary.get("params", "0"))
    )


def module_box_lines(type_name: str, repeats: int, ops: int, params: int) -> list[str]:
    """A module box's class (×N for N alike blocks folded into it), and its ops and parameters.

    >>> module_box_lines("GPT2Block", 4, 27, 7087872)
    ['GPT2Block ×4', '27 ops, 7.1M params']
    """
    counts = plural(ops, "op") + (f", {count_text(params)} params" if params else "")
    return [type_name + (f" \u00d7{repeats}" if repeats > 1 else ""), counts]


def shape_text(shape: Optional[tuple[int, ...]]) -> str:
    """Shapes written as the tutorials show them: ``(1)``, ``(3, 4)``, ``()``."""
    if shape is None:
        return "(shape unknown)"
    return "(" + ", ".join(map(str, shape)) + ")"


def tensor_description(node: Node, show_device: bool = False) -> str:
    """``shape (2, 3), float32``, with the device only when asked (it would make output device-specific).

    >>> tensor_description(Node("n0", "parameter", "w", shape=(2, 3), dtype="float16", device="cpu"), True)
    'shape (2, 3), float16, on cpu'
    """
    parts = [f"shape {shape_text(node.shape)}"]
    if node.dtype:
        parts.append(node.dtype)
    if show_device and node.device:
        parts.append(f"on {node.device}")
    return ", ".join(parts)


# How a tooltip's first line names a tensor node of each kind.
TENSOR_WHAT = {OUTPUT: "output", PARAMETER: "parameter", LEAF: "leaf tensor", SAVED: "saved for backward:"}


def tensor_headline(kind: str, name: str) -> str:
    """The first tooltip line of a tensor node, the only one that holds its name: ``parameter fc.weight``.

    >>> tensor_headline("parameter", "fc.weight"), tensor_headline("output", "")
    ('parameter fc.weight', 'output')
    """
    what = TENSOR_WHAT.get(kind, kind)
    return f"{what} {name}" if name else what


def describe(
    node: Node,
    *,
    show_attrs: bool = False,
    show_device: bool = False,
    inputs: Iterable[str] = (),
    outputs: Iterable[str] = (),
) -> list[str]:
    """The tooltip lines of ``node``: what its short label leaves out.

    ``inputs`` and ``outputs`` are the shapes along its edges, when the walk collected them.

    >>> describe(Node("n3", "accumulate_grad", "AccumulateGrad", module="fc"), inputs=["(2, 4)"])
    ['Stores the gradient of a leaf tensor in its .grad.', 'module: fc', 'inputs: (2, 4)']
    """
    kind = node.kind
    lines: list[str]
    if kind == OP and node.note == FAILED:
        return failed_call_tooltip(node)
    if kind == OP:
        lines = describe_op(node.label)
        lines += [f"{CONSTANT_TEXT} {text}" for text in op_constants(node)]
    elif kind == ACCUMULATE_GRAD:
        lines = [ACCUMULATE_GRAD_TEXT]
    elif kind == NO_GRAD:
        lines = [NO_GRAD_TEXT]
        if node.label:
            cut_in = cut_location(node)
            where = f" in {cut_in}" if cut_in else ""
            lines.append(f"Cut by {node.label}{where}.")
        else:
            lines.append(ANONYMOUS_NO_GRAD_TEXT)
    elif kind == MODULE:
        lines = _describe_module(node)
    else:
        lines = [tensor_headline(kind, node.label), tensor_description(node, show_device)]
        lines += [f"also named {name}" for name in other_names(node)]
        if kind == SAVED and node.note:
            lines.append(f"[{node.note}]: {SAVED_NOTES.get(node.note, node.note)}.")
    if node.module and kind not in (NO_GRAD, MODULE):
        lines.append(f"module: {node.module}")
    if kind in (OP, ACCUMULATE_GRAD):
        inputs, outputs = list(inputs), list(outputs)
        if inputs:
            lines.append("inputs: " + ", ".join(inputs))
        if outputs:
            lines.append("output: " + ", ".join(outputs))
        if show_attrs and saved_attrs(node):
            lines.append("saved: " + "; ".join(f"{k}={v}" for k, v in saved_attrs(node)))
    return lines


# How wide a failed call's label wraps its error text, and how many lines of it it shows.
FAILED_LINE_CHARS = 60
FAILED_ERROR_LINES = 3


def failed_call_lines(node: Node) -> list[str]:
    """The label of a failed call (an op node with ``note="failed"``): the call, its error
    wrapped to a few lines, where it was called and the shape of each tensor it was given.

    >>> node = Node("n0", OP, "F.linear", attrs=(("error", "RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x8 and 16x4)"),
    ...             ("at", "net.py:9"), ("input", "x: (2, 8) float32")), note="failed", module="l2")
    >>> failed_call_lines(node)  # doctest: +NORMALIZE_WHITESPACE
    ['F.linear FAILED', 'RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x8', 'and 16x4)', 'at net.py:9',
     'x: (2, 8) float32']
    """
    attrs = node.attrs
    error = next((value for key, value in attrs if key == "error"), "")
    lines = [f"{node.label} FAILED", *_wrapped(error, FAILED_LINE_CHARS, FAILED_ERROR_LINES)]
    lines += [f"at {value}" for key, value in attrs if key == "at"]
    lines += [_cut(value, FAILED_LINE_CHARS) for key, value in attrs if key == "input"]
    return lines


def failed_call_tooltip(node: Node) -> list[str]:
    """The tooltip of a failed call: what happened, in full."""
    where = f" in {node.module}" if node.module else " at the top level"
    lines = [f"The forward pass stopped here: {node.label}{where} raised an exception."]
    for key, value in node.attrs:
        lines.append(f"{'given' if key == 'input' else key}: {value}")
    return lines


def _wrapped(text: str, width: int, most: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken at spaces; at most ``most`` lines."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    if len(lines) > most:
        lines = lines[:most]
        lines[-1] = _cut(lines[-1] + " ...", width)
    return [_cut(line, width) for line in lines]


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _describe_module(node: Node) -> list[str]:
    summary = module_summary(node)
    type_name = summary.get("type", "")
    ops, params = int(summary.get("ops", "0")), int(summary.get("params", "0"))
    repeats = int(summary.get("repeats", "1"))
    if repeats > 1:
        lines = [
            f"{repeats} consecutive {type_name} modules with the same ops and parameter count, drawn as one box:",
            f"from {summary.get('first', '')} to {summary.get('last', '')}",
            f"each: {plural(ops // repeats, 'op')}, {count_text(params // repeats)} params; "
            f"in all: {plural(ops, 'op')}, {count_text(params)} params",
        ]
    else:
        lines = [f"{node.label} ({type_name}) drawn as one box: {plural(ops, 'op')}, {count_text(params)} params"]
    if node.module:
        lines.append(f"inside: {node.module}")
    return lines


def junction_lines(sources: Sequence[tuple[str, str]], here: int, further: int) -> list[str]:
    """The tooltip lines of a junction that the outputs of ``sources`` (each a node's kind
    and label) run through: ``here`` ops read them from this point, ``further`` from points below.

    >>> junction_lines([("op", "ConvolutionBackward0")], 2, 5)
    ['junction: the output of ConvolutionBackward0 branches here', 'read by 2 ops here and 5 further down']
    >>> junction_lines([("op", "CatBackward0"), ("op", "ReluBackward0"), ("op", "CatBackward0")], 1, 0)
    ['junction: the outputs of 3 nodes (2 CatBackward0, ReluBackward0) branch here', 'each read by 1 op here']
    """
    names = [label or ("no grad" if kind == NO_GRAD else tensor_headline(kind, "")) for kind, label in sources]
    reads = f"read by {plural(here, 'op')} here"
    if further:
        reads += f" and {further} further down"
    if len(names) == 1:
        return [f"junction: the output of {names[0]} branches here", reads]
    counted = Counter(names)
    listed = ", ".join(name if times == 1 else f"{times} {name}" for name, times in counted.items())
    return [f"junction: the outputs of {len(names)} nodes ({listed}) branch here", f"each {reads}"]


def format_bytes(size: int) -> str:
    """'512 B', '1.5 KiB', '3.0 MiB'.

    >>> format_bytes(1536), format_bytes(100)
    ('1.5 KiB', '100 B')
    """
    if size < 1024:
        return f"{size} B"
    amount = float(size)
    for unit in ("KiB", "MiB", "GiB"):
        amount /= 1024
        if amount < 1024 or unit == "GiB":
            break
    return f"{amount:.1f} {unit}"


def format_seconds(seconds: float) -> str:
    """'812.3 ms', '45.0 µs', '1.25 s' (µ, the micro sign, as the explorer page writes it).

    >>> format_seconds(0.8123), format_seconds(4.5e-5), format_seconds(1.25)
    ('812.3 ms', '45.0 µs', '1.25 s')
    """
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.1f} \u00b5s"


def port_name(node: Node, way: str, call: str) -> Optional[str]:
    """The name of what enters (``way`` "in") or leaves ("out") the module call ``call``
    as ``node``'s tensor: the argument or output name a recorder noted (``hidden_states``,
    ``position_embeddings[0]``, ``last_hidden_state``; a leaf's too, a parameter or input
    given as an argument); else a parameter's name, and where it goes when it leaves
    under another name (a tied weight); None when neither is known. The explorer's ports
    and a picture's edges into and out of module boxes are named by it.

    >>> from graphviz_autograd.graph.autograd_graph import ALSO_NAMED, PORT_ATTR
    >>> port_name(Node("n3", OP, "AddBackward0", attrs=((PORT_ATTR, "in\\nh.0\\nhidden_states"),)), "in", "h.0")
    'hidden_states'
    >>> tied = Node("n1", PARAMETER, "transformer.wte.weight", attrs=((ALSO_NAMED, "lm_head.weight"),))
    >>> port_name(tied, "out", "transformer"), port_name(tied, "in", "lm_head")
    ('wte.weight = lm_head.weight', 'transformer.wte.weight')
    """
    if node.attrs:
        name = port_names(node).get((way, call))
        if name is not None:
            return name
    if node.kind != PARAMETER:
        return None
    label = node.label
    prefix = call + "." if call else ""
    if way == PORT_OUT and prefix and label.startswith(prefix):
        elsewhere = [other for other in other_names(node) if not other.startswith(prefix)]
        label = label[len(prefix):]
        if elsewhere:
            return f"{label} = {elsewhere[0]}"
    return label
