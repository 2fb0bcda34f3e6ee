"""Draw PyTorch autograd graphs with Graphviz."""

from .api import make_dot, render
from .collapse import collapse
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
from .graph import AutogradGraph, Edge, Node
from .walk import walk

__version__ = "0.1.0"

__all__ = [
    "AutogradGraph",
    "Edge",
    "GraphvizAutogradError",
    "GraphvizNotFoundError",
    "InputTypeError",
    "Node",
    "NoGraphError",
    "OptionError",
    "OutputPathError",
    "RenderError",
    "collapse",
    "make_dot",
    "render",
    "to_dot",
    "walk",
]
