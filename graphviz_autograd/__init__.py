"""Draw PyTorch autograd graphs with Graphviz.

The public names are imported the first time they are read, so that importing the
package (as pytest does at start-up, to load the ``autograd_golden`` plugin) does
not import torch: a test session that never draws a graph does not pay for torch,
nor fail when torch is broken.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Each public name, and the module of this package that defines it.
_HOMES = {
    "AutogradGraph": "graph",
    "CheckFailedError": "errors",
    "Edge": "graph",
    "Finding": "diagnose",
    "ModuleInfo": "graph",
    "GraphvizAutogradError": "errors",
    "GraphvizNotFoundError": "errors",
    "InputTypeError": "errors",
    "Node": "graph",
    "NoGraphError": "errors",
    "OptionError": "errors",
    "OutputPathError": "errors",
    "Recorder": "record",
    "RenderError": "errors",
    "check": "diagnose",
    "collapse": "collapse",
    "make_dot": "api",
    "record": "record",
    "render": "api",
    "to_dot": "dot",
    "walk": "walk",
}

__all__ = list(_HOMES)

if TYPE_CHECKING:
    from .api import make_dot, render
    from .collapse import collapse
    from .diagnose import Finding, check
    from .dot import to_dot
    from .errors import (
        CheckFailedError,
        GraphvizAutogradError,
        GraphvizNotFoundError,
        InputTypeError,
        NoGraphError,
        OptionError,
        OutputPathError,
        RenderError,
    )
    from .graph import AutogradGraph, Edge, ModuleInfo, Node
    from .record import Recorder, record
    from .walk import walk


def _public(name: str) -> Any:
    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = _public(name)
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))


class _Package(types.ModuleType):
    """The package's module type. ``walk``, ``record``, ``collapse`` and ``render`` are
    both functions of the API and modules of the package, and importing one of those
    modules sets the package attribute of its name to the module: read through the
    properties below they stay the functions. Assigning anything but a module (as
    ``unittest.mock.patch`` does) replaces the function until it is deleted."""


def _function_property(name: str) -> property:
    slot = f"_{name}_function"

    def get(package: types.ModuleType) -> Any:
        function = package.__dict__.get(slot)
        if function is None:
            function = package.__dict__[slot] = _public(name)
        return function

    def set_function(package: types.ModuleType, value: Any) -> None:
        if not isinstance(value, types.ModuleType):  # a module is the import system's doing
            package.__dict__[slot] = value

    def delete(package: types.ModuleType) -> None:
        package.__dict__.pop(slot, None)

    return property(get, set_function, delete, doc=f"The function ``graphviz_autograd.{_HOMES[name]}.{name}``.")


for _name in ("walk", "record", "collapse", "render"):
    setattr(_Package, _name, _function_property(_name))
del _name

sys.modules[__name__].__class__ = _Package
