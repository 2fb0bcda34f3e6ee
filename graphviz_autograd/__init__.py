"""Draw PyTorch autograd graphs with Graphviz."""

from .api import make_dot, render
from .collapse import collapse
from .diagnose import Finding, check
from .dot import to_dot
from .errors import (
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

__version__ = "0.1.0"

__all__ = [
    "AutogradGraph",
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
    "check",
    "collapse",
    "make_dot",
    "record",
    "render",
    "to_dot",
    "walk",
]
