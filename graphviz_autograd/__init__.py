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
    "StepProfile": "profiling",
    "check": "diagnose",
    "collapse": "collapse",
    "explore": "explore",
    "make_dot": "api",
    "profile_step": "profiling",
    "record": "record",
    "render": "api",
    "to_dot": "dot",
    "walk": "walk",
}

# Written out, not computed from _HOMES, so that type checkers read it (a test
# keeps the two equal).
__all__ = [
    "AutogradGraph",
    "CheckFailedError",
    "Edge",
    "Finding",
    "ModuleInfo",
    "GraphvizAutogradError",
    "GraphvizNotFoundError",
    "InputTypeError",
    "Node",
    "NoGraphError",
    "OptionError",
    "OutputPathError",
    "Recorder",
    "RenderError",
    "StepProfile",
    "check",
    "collapse",
    "explore",
    "make_dot",
    "profile_step",
    "record",
    "render",
    "to_dot",
    "walk",
]

if TYPE_CHECKING:
    # "import X as X" marks a re-export for type checkers (mypy --strict); at run
    # time __getattr__ below imports each name when it is first read.
    from .api import make_dot as make_dot
    from .api import render as render
    from .collapse import collapse as collapse
    from .diagnose import Finding as Finding
    from .diagnose import check as check
    from .dot import to_dot as to_dot
    from .explore import explore as explore
    from .errors import CheckFailedError as CheckFailedError
    from .errors import GraphvizAutogradError as GraphvizAutogradError
    from .errors import GraphvizNotFoundError as GraphvizNotFoundError
    from .errors import InputTypeError as InputTypeError
    from .errors import NoGraphError as NoGraphError
    from .errors import OptionError as OptionError
    from .errors import OutputPathError as OutputPathError
    from .errors import RenderError as RenderError
    from .graph import AutogradGraph as AutogradGraph
    from .graph import Edge as Edge
    from .graph import ModuleInfo as ModuleInfo
    from .graph import Node as Node
    from .profiling import StepProfile as StepProfile
    from .profiling import profile_step as profile_step
    from .record import Recorder as Recorder
    from .record import record as record
    from .walk import walk as walk


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
    """The package's module type. ``walk``, ``record``, ``collapse``, ``render`` and ``explore`` are
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


for _name in ("walk", "record", "collapse", "render", "explore"):
    setattr(_Package, _name, _function_property(_name))
del _name

sys.modules[__name__].__class__ = _Package
