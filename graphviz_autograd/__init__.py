"""Draw PyTorch autograd graphs with Graphviz.

The public names are imported the first time they are read, so that importing the
package (as pytest does at start-up, to load the ``autograd_golden`` plugin) does
not import torch: a test session that never draws a graph does not pay for torch,
nor fail when torch is broken.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Each public name, and the module of this package that defines it.
_HOMES = {
    "AutogradGraph": "graph.autograd_graph",
    "CheckFailedError": "errors",
    "Edge": "graph.autograd_graph",
    "Finding": "checks.diagnosis",
    "Findings": "checks.diagnosis",
    "ModuleInfo": "graph.autograd_graph",
    "GraphvizAutogradError": "errors",
    "GraphvizNotFoundError": "errors",
    "InputTypeError": "errors",
    "Node": "graph.autograd_graph",
    "NoGraphError": "errors",
    "OptionError": "errors",
    "OutputPathError": "errors",
    "Overlay": "views.overlays",
    "Recorder": "capture.recording",
    "RenderError": "errors",
    "StepProfile": "checks.profiling",
    "check": "checks.diagnosis",
    "collapse": "views.collapsing",
    "compare_saved": "views.compiled_saving",
    "diff": "views.diffing",
    "explore": "explorer.pages",
    "find_nonfinite": "checks.nonfinite_origin",
    "ForwardFailure": "capture.recording",
    "NonfiniteFindings": "checks.nonfinite_origin",
    "make_dot": "api",
    "profile_step": "checks.profiling",
    "record": "capture.recording",
    "render": "api",
    "to_dot": "drawing.dot_writer",
    "walk": "capture.walking",
    "watch": "training.watching",
    "Watcher": "training.watching",
}

# Written out, not computed from _HOMES, so that type checkers read it (a test
# keeps the two equal).
__all__ = [
    "AutogradGraph",
    "CheckFailedError",
    "Edge",
    "Finding",
    "Findings",
    "ModuleInfo",
    "GraphvizAutogradError",
    "GraphvizNotFoundError",
    "InputTypeError",
    "Node",
    "NoGraphError",
    "OptionError",
    "OutputPathError",
    "Overlay",
    "Recorder",
    "RenderError",
    "StepProfile",
    "check",
    "collapse",
    "compare_saved",
    "diff",
    "explore",
    "find_nonfinite",
    "ForwardFailure",
    "NonfiniteFindings",
    "make_dot",
    "profile_step",
    "record",
    "render",
    "to_dot",
    "walk",
    "watch",
    "Watcher",
]

if TYPE_CHECKING:
    # "import X as X" marks a re-export for type checkers (mypy --strict); at run
    # time __getattr__ below imports each name when it is first read.
    from .api import make_dot as make_dot
    from .api import render as render
    from .views.collapsing import collapse as collapse
    from .views.compiled_saving import compare_saved as compare_saved
    from .views.diffing import diff as diff
    from .checks.diagnosis import Finding as Finding
    from .checks.diagnosis import Findings as Findings
    from .checks.diagnosis import check as check
    from .drawing.dot_writer import to_dot as to_dot
    from .explorer.pages import explore as explore
    from .checks.nonfinite_origin import NonfiniteFindings as NonfiniteFindings
    from .checks.nonfinite_origin import find_nonfinite as find_nonfinite
    from .capture.recording import ForwardFailure as ForwardFailure
    from .errors import CheckFailedError as CheckFailedError
    from .errors import GraphvizAutogradError as GraphvizAutogradError
    from .errors import GraphvizNotFoundError as GraphvizNotFoundError
    from .errors import InputTypeError as InputTypeError
    from .errors import NoGraphError as NoGraphError
    from .errors import OptionError as OptionError
    from .errors import OutputPathError as OutputPathError
    from .views.overlays import Overlay as Overlay
    from .errors import RenderError as RenderError
    from .graph.autograd_graph import AutogradGraph as AutogradGraph
    from .graph.autograd_graph import Edge as Edge
    from .graph.autograd_graph import ModuleInfo as ModuleInfo
    from .graph.autograd_graph import Node as Node
    from .capture.recording import Recorder as Recorder
    from .capture.recording import record as record
    from .capture.walking import walk as walk
    from .checks.profiling import StepProfile as StepProfile
    from .checks.profiling import profile_step as profile_step
    from .training.watching import Watcher as Watcher
    from .training.watching import watch as watch


def _public(name: str) -> Any:
    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = _public(name)
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
