"""Name tensors a model holds outside its registered parameters and buffers.

A beginner keeps layers in a plain list (``self.layers = [nn.Linear(4, 4)]``) or
weights in a plain dict; PyTorch does not register them, so ``named_parameters()``
never lists them and the optimizer never sees them. They still feed the graph, and
a drawing or a finding should name them as the code that holds them does:
``layers[0].weight``, ``heads['a'].bias``, ``weights[1]``.

>>> import torch
>>> from torch import nn
>>> class Net(nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.fc = nn.Linear(2, 2)
...         self.layers = [nn.Linear(2, 1, bias=False)]
...         self.scales = {"a": torch.ones(1, requires_grad=True)}
>>> list(unregistered_tensors(Net()))
['layers[0].weight', "scales['a']"]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

import torch

# Containers longer than this are data (a list of token ids, a cache), not layers: not searched.
MAX_CONTAINER_ITEMS = 10_000


def unregistered_tensors(model: torch.nn.Module, registered: Optional[set[int]] = None) -> dict[str, torch.Tensor]:
    """Tensors reachable from ``model``'s attributes that are none of its parameters or buffers, by attribute path.

    The search follows public attributes of every module (registered or not)
    through lists, tuples and dicts, and the parameters and buffers of modules
    that are not registered. A tensor reachable by several paths keeps the first,
    in definition order. No recursion: any nesting depth, and cycles, are fine.
    ``registered``: the ids of the model's parameters and buffers, when the caller has them.
    """
    if registered is None:
        registered = {id(t) for _, t in model.named_parameters(remove_duplicate=False)}
        registered.update(id(t) for _, t in model.named_buffers(remove_duplicate=False))
    found: dict[str, torch.Tensor] = {}
    found_ids: set[int] = set()
    seen: set[int] = set()
    kinds = _KINDS
    stack: list[tuple[str, Any, bool]] = [("", model, True)]  # (path, value, registered module)
    while stack:
        path, value, is_registered = stack.pop()
        kind = kinds.get(type(value)) or _kind(type(value))
        if kind is _TENSOR:
            if id(value) not in registered and id(value) not in found_ids:
                found[path] = value
                found_ids.add(id(value))
            continue
        if id(value) in seen:
            continue
        seen.add(id(value))
        items: list[tuple[str, Any, bool]] = []
        prefix = path + "." if path else ""
        if kind is _MODULE:
            if not is_registered:  # its own parameters and buffers are unknown to the model
                for name, tensor in (*value._parameters.items(), *value._buffers.items()):
                    if tensor is not None:
                        items.append((prefix + name, tensor, False))
            for name, child in value._modules.items():
                if child is not None:
                    items.append((prefix + name, child, is_registered))
            # A module holds dozens of private attributes and plain settings: each told apart by
            # its name and then its type, looked up once per type (over a thousand modules, this
            # loop was most of record's set-up).
            for name, held in vars(value).items():
                if name[0] != "_" and (kinds.get(type(held)) or _kind(type(held))) is not _NOTHING:
                    items.append((prefix + name, held, False))
        elif kind is _MAPPING:
            if len(value) <= MAX_CONTAINER_ITEMS:
                items = [(f"{path}[{key!r}]", v, False) for key, v in value.items()
                         if (kinds.get(type(v)) or _kind(type(v))) is not _NOTHING]
        elif kind is _SEQUENCE:
            if len(value) <= MAX_CONTAINER_ITEMS:
                items = [(f"{path}[{i}]", v, False) for i, v in enumerate(value)
                         if (kinds.get(type(v)) or _kind(type(v))) is not _NOTHING]
        stack.extend(reversed(items))
    return found


# What a value is to the search, by its type: told once per type (a model's modules hold a few
# dozen types between them), before any isinstance check (an ABC's, such as Mapping's, is slow).
_NOTHING, _TENSOR, _MODULE, _MAPPING, _SEQUENCE = "nothing", "tensor", "module", "mapping", "sequence"
_KINDS: dict[type, str] = {t: _NOTHING for t in (bool, int, float, str, bytes, type(None))}


def _kind(kind_of: type) -> str:
    if issubclass(kind_of, torch.Tensor):
        kind = _TENSOR
    elif issubclass(kind_of, torch.nn.Module):
        kind = _MODULE
    elif issubclass(kind_of, Mapping):
        kind = _MAPPING
    elif issubclass(kind_of, (list, tuple)):
        kind = _SEQUENCE
    else:
        kind = _NOTHING
    if len(_KINDS) < 10_000:  # (types made on the fly, one per object, are not kept without end)
        _KINDS[kind_of] = kind
    return kind
