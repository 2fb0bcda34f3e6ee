"""Names for the tensors a user hands over: outputs by their place in a nesting,
parameters by the names a model or a dict gives them.

>>> import torch
>>> [name for name, _ in named_tensors({"logits": torch.ones(1), "past": (torch.ones(1),)})]
['logits', 'past[0]']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Iterable, Iterator, Optional, Union

import torch

from .attribute_names import unregistered_tensors
from ..errors import InputTypeError

# What ``params`` may be: a dict of name to tensor, a module, or (name, tensor) pairs.
Params = Union[None, Mapping, torch.nn.Module, Iterable]

_is_tensor = torch.Tensor.__instancecheck__


def named_tensors(outputs: Any, prefix: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    """Yield (name, tensor) for each tensor in a nesting, in order, without recursion.

    Names are paths from ``prefix``: ``[0]``, ``logits``, ``batch.mask``, ``x['a b']``.
    """
    stack: list[tuple[str, Any]] = [(prefix, outputs)]
    seen_containers: set[int] = set()
    while stack:
        name, value = stack.pop()
        if isinstance(value, torch.Tensor):
            yield name, value
            continue
        if isinstance(value, (str, bytes)) or id(value) in seen_containers:
            continue
        if isinstance(value, Mapping):
            items = [(_join_key(name, key), v) for key, v in value.items()]
        elif isinstance(value, tuple) and hasattr(value, "_fields"):  # namedtuple
            items = [(_join_key(name, key), getattr(value, key)) for key in value._fields]
        elif isinstance(value, (tuple, list)):
            items = [(f"{name}[{i}]", v) for i, v in enumerate(value)]
        else:
            continue
        seen_containers.add(id(value))
        stack.extend(reversed(items))


def _join_key(prefix: str, key: Any) -> str:
    text = str(key)
    if not (isinstance(key, str) and key.isidentifier()):
        return f"{prefix}[{key!r}]"
    return f"{prefix}.{text}" if prefix else text


def parameter_names(params: Params, aliases: Optional[dict[int, list[str]]] = None) -> dict[int, str]:
    """Map id(tensor) -> name. The caller keeps the tensors alive during the walk.

    A tensor under several names (tied weights: GPT-2's ``transformer.wte.weight`` is
    ``lm_head.weight``) is known by its first; ``aliases``, when given, gets its other
    names (id -> names in order), as far as ``params`` holds them (a model does;
    ``dict(model.named_parameters())`` has dropped them).

    >>> w = torch.ones(1); aliases = {}
    >>> list(parameter_names([("wte.weight", w), ("lm_head.weight", w)], aliases).values()), list(aliases.values())
    (['wte.weight'], [['lm_head.weight']])
    """
    if params is None:
        return {}
    if isinstance(params, dict) and all(map(_is_tensor, params.values())) and (
        aliases is None or len(set(map(id, params.values()))) == len(params)  # else: a tensor under two keys
    ):
        # The common case, in C-level passes; reversed so that the first name of a
        # tied weight wins, as below.
        return dict(zip(map(id, reversed(params.values())), map(str, reversed(params.keys()))))
    if isinstance(params, torch.nn.Module):
        pairs: Iterable[Any] = [
            *params.named_parameters(remove_duplicate=False),
            *params.named_buffers(remove_duplicate=False),
            # Tensors kept in plain lists, dicts or unregistered modules, named by attribute path.
            *unregistered_tensors(params).items(),
        ]
    elif isinstance(params, Mapping):
        pairs = params.items()
    elif isinstance(params, (str, bytes, torch.Tensor)) or not hasattr(params, "__iter__"):
        raise InputTypeError(_params_message(params))
    else:
        pairs = params
    names: dict[int, str] = {}
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise InputTypeError(_params_message(params))
        name, tensor = pair
        if not isinstance(tensor, torch.Tensor):
            raise InputTypeError(
                f"params[{name!r}] is a {type(tensor).__name__}, not a tensor. "
                "Pass params as dict(model.named_parameters()) or the model itself."
            )
        first = names.setdefault(id(tensor), str(name))  # the first name of a tied weight wins
        if aliases is not None and first != name and str(name) not in aliases.get(id(tensor), ()):
            aliases.setdefault(id(tensor), []).append(str(name))
    return names


def view_name(tensor: torch.Tensor, names: Mapping[int, str]) -> Optional[str]:
    """``'x (view)'`` for a leaf tensor that is a view of the tensor named ``x`` in ``names``
    (id -> name) that carries no gradient; None for any other.

    Such a leaf is data, not a weight: a forward that sets ``requires_grad`` on a view of
    its input (Wav2Vec2's feature encoder does, so that gradient checkpointing works)
    makes one, and it is that input, seen through the view. A view of a tensor that
    requires grad is no such thing: gradient through it never reaches that tensor.

    >>> x = torch.ones(2, 3)
    >>> v = x[:, None]
    >>> v.requires_grad = True
    >>> view_name(v, {id(x): "x"}), view_name(x, {id(x): "x"})
    ('x (view)', None)
    """
    base = tensor._base
    if base is None or base.requires_grad:
        return None
    name = names.get(id(base))
    return None if name is None else f"{name} (view)"


def _params_message(params: Any) -> str:
    return (
        f"params must be a dict of name to tensor, an nn.Module or (name, tensor) pairs; "
        f"got {type(params).__name__}. Pass dict(model.named_parameters()) or the model itself."
    )


def layout_name(t: torch.Tensor) -> str:
    """'sparse_coo', 'sparse_csr', 'nested', 'mkldnn'...; 'strided' for a plain tensor."""
    if t.is_nested:
        return "nested"
    return str(t.layout).replace("torch.", "")


def number_text(value: Any) -> str:
    """How a number operand of an op is written: a Python number, or a 0-d tensor's value
    when it is in host memory (``'0-d tensor'`` on a device, which would have to be read back).

    >>> number_text(1e-06), number_text(2), number_text(torch.tensor(0.125)), number_text(True)
    ('1e-06', '2', '0.125', 'True')
    """
    if isinstance(value, torch.Tensor):
        if value.device.type != "cpu" or value.is_meta:
            return "0-d tensor"
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:.6g}"
