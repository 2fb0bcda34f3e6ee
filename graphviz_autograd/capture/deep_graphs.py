"""Keep a walked deep graph from crashing the process when it is freed.

Reading ``grad_fn.next_functions`` gives every node a Python wrapper, and in recent
PyTorch a node that has one is freed through it: freeing the head of a chain frees
the next node from inside its own destructor, and so on down the chain. A chain of
some 30,000 wrapped nodes overflows an 8 MiB C stack and the process dies with a
segmentation fault (without wrappers, PyTorch frees chains iteratively).

So after walking a big graph we keep our references to its wrappers and let them go
one at a time, roots first, once nobody else holds them: each node is then freed
when its consumers are already gone and its inputs are still held by us, so no free
cascades more than one node deep. The check runs after each garbage collection and
at the start of each walk; until then a graph whose outputs were dropped stays in
memory.
"""

from __future__ import annotations

import gc
import sys
import threading
from typing import Any, Collection

# Below this many wrapped nodes the cascade cannot reach the stack's limit.
DEEP_GRAPH_NODES = 10_000

_held: list["_HeldGraph"] = []
# The ids of the wrappers held, each by one _HeldGraph alone: a wrapper held twice (a
# graph counted, then walked) would show a reference too many to each, and neither
# would ever let it go.
_held_ids: set[int] = set()
_lock = threading.Lock()
_installed = False


class _HeldGraph:
    """The wrappers of one walk, in walk order (every node after one of its consumers)."""

    def __init__(self, wrappers: list[Any]):
        self.wrappers = wrappers
        self.first = 0  # index of the first wrapper still held

    def free_unreferenced(self) -> bool:
        """Drop every wrapper only we hold; True when none is left."""
        wrappers = self.wrappers
        # A wrapper only this list refers to shows a count of 2: the list and the argument.
        if sys.getrefcount(wrappers[self.first]) > 2:
            return False  # the first root is still in use: nothing below it can be freed safely yet
        changed = True
        while changed:  # a node freed late can release inputs met earlier in walk order
            changed = False
            for i in range(self.first, len(wrappers)):
                if wrappers[i] is not None and sys.getrefcount(wrappers[i]) == 2:
                    _held_ids.discard(id(wrappers[i]))
                    wrappers[i] = None
                    changed = True
            while self.first < len(wrappers) and wrappers[self.first] is None:
                self.first += 1
            if self.first == len(wrappers):
                return True
        return False


def hold(wrappers: Collection[Any]) -> None:
    """Take over references to a deep graph's wrappers, in walk order, until they can be freed safely."""
    global _installed
    if len(wrappers) < DEEP_GRAPH_NODES:
        return  # checked before copying: most graphs are small
    with _lock:
        new = [wrapper for wrapper in wrappers if id(wrapper) not in _held_ids]
        if new:
            _held_ids.update(map(id, new))
            _held.append(_HeldGraph(new))
        if not _installed:
            gc.callbacks.append(_after_collection)
            _installed = True


def release_unreferenced() -> None:
    """Free what no one else holds any more, one node at a time."""
    if not _held or not _lock.acquire(blocking=False):
        return  # another thread is sweeping
    try:
        _held[:] = [graph for graph in _held if not graph.free_unreferenced()]
    finally:
        _lock.release()


def held_count() -> int:
    """How many walked graphs are still held (for tests and diagnostics)."""
    return len(_held)


def _after_collection(phase: str, info: dict) -> None:
    if phase == "stop":
        release_unreferenced()
