"""The optional C loops of the walk and the DOT writer (``_speedups.c``).

``ACCELERATED`` is the compiled module when it was built and may be used, else
None; walk.py and dot.py then run the same loops in Python, and give the same
graph and the same bytes either way. Set ``GRAPHVIZ_AUTOGRAD_PURE_PYTHON=1`` to
use the Python loops although the module was built.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from types import ModuleType
from typing import Optional

PURE_PYTHON_VARIABLE = "GRAPHVIZ_AUTOGRAD_PURE_PYTHON"


def _load() -> Optional[ModuleType]:
    if os.environ.get(PURE_PYTHON_VARIABLE, "") not in ("", "0"):
        return None
    try:
        from . import _speedups
    except ImportError:  # built without a C compiler: the Python loops
        return None
    return _speedups


ACCELERATED: Optional[ModuleType] = _load()

# The edge lists (graph.Columns.links) the C loops read: a list of link tuples, and
# the C walk's own ``Links``, which keeps its links without a tuple each.
C_LINK_TYPES: tuple = (list,) if ACCELERATED is None else (list, ACCELERATED.Links)

if ACCELERATED is not None:
    Sequence.register(ACCELERATED.Links)
