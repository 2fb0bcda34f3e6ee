"""The modules of a recorded graph as a tree: the one place that says which module a path
belongs to, which module holds which, and in what order.

A node's ``module`` path may name a module that is not listed (a function called from a
module's forward records the module's path with more after it); it belongs to the
nearest listed module at or above it. ``look_through`` names module types that are
listed but stand for no level of their own (``ModuleList`` runs nothing: the explorer
shows its children in its parent's level).

Summaries (``collapse``), the folding of repeated blocks, the clusters of the DOT
writer, the boxes of the fixed layout, the page-size estimate and the explorer's
levels all read modules through one :class:`ModuleTree`.

>>> from graphviz_autograd.graph.autograd_graph import ModuleInfo
>>> tree = ModuleTree((ModuleInfo("", "Net"), ModuleInfo("h", "ModuleList"), ModuleInfo("h.0", "Block")))
>>> tree.listed("h.0.attn.fn"), tree.parent("h.0"), tree.children[""], tree.chain("h.0.x")
('h.0', 'h', ['h'], ['h.0', 'h'])
>>> ModuleTree(tree.modules, look_through={"ModuleList"}).parent("h.0")
''
"""

from __future__ import annotations

from typing import AbstractSet, Iterable, Sequence

from .autograd_graph import ModuleInfo


class ModuleTree:
    """``modules`` (as a recorded graph lists them, in definition order) as a tree.

    ``info`` maps a path to its module, ``order`` to its place in ``modules``;
    ``children`` maps a listed path ('' for the model) to the paths of the modules
    directly inside it, in order.
    """

    __slots__ = ("modules", "info", "order", "children", "look_through", "_listed")

    def __init__(self, modules: Sequence[ModuleInfo], look_through: AbstractSet[str] = frozenset()):
        self.modules = tuple(modules)
        self.info = {m.path: m for m in self.modules}
        self.order = {m.path: i for i, m in enumerate(self.modules)}
        self.look_through = frozenset(look_through)
        self._listed: dict[str, str] = {}
        self.children: dict[str, list[str]] = {}
        for m in self.modules:
            if m.path and not self._looked_through(m.path):
                self.children.setdefault(self.parent(m.path), []).append(m.path)

    @classmethod
    def of(cls, modules: Sequence[ModuleInfo]) -> "ModuleTree":
        """``ModuleTree(modules)``, one for every caller given the same tuple: a summary keeps
        its graph's modules, so the page fit's summaries, their estimates and the DOT writer
        read one tree, not one each (six to eight per ``make_dot``). The trees of the last
        few tuples are kept, each with its tuple, so an id is never taken for another's.

        >>> tree = ModuleTree.of((ModuleInfo("", "Net"), ModuleInfo("h", "Block")))
        >>> ModuleTree.of(tree.modules) is tree
        True
        """
        if not isinstance(modules, tuple):
            return cls(modules)
        known = _RECENT_TREES.get(id(modules))
        if known is not None and known[0] is modules:
            return known[1]
        tree = cls(modules)
        if len(_RECENT_TREES) >= _RECENT_TREES_KEPT:
            _RECENT_TREES.clear()
        _RECENT_TREES[id(modules)] = (modules, tree)
        return tree

    def _looked_through(self, path: str) -> bool:
        return self.info[path].type_name in self.look_through

    def listed(self, path: str) -> str:
        """The nearest listed module at or above ``path`` ('' when none is: the model itself)."""
        found = self._listed.get(path)
        if found is None:
            found = path
            while found and (found not in self.info or self._looked_through(found)):
                found = found.rpartition(".")[0]
            self._listed[path] = found
        return found

    def parent(self, path: str) -> str:
        """The nearest listed module strictly above ``path`` ('' for a top-level module)."""
        return self.listed(path.rpartition(".")[0]) if path else ""

    def chain(self, path: str) -> list[str]:
        """The listed modules holding ``path``, innermost first, the model ('') left out."""
        found = []
        at = self.listed(path)
        while at:
            found.append(at)
            at = self.parent(at)
        return found

    def holding(self, paths: Iterable[str]) -> set[str]:
        """The listed modules that hold any of ``paths``, directly or further down ('' left out)."""
        used: set[str] = set()
        for path in paths:
            at = self.listed(path)
            while at and at not in used:
                used.add(at)
                at = self.parent(at)
        return used


# ModuleTree.of: id of a tuple of modules -> that tuple and its tree.
_RECENT_TREES: dict[int, tuple[tuple[ModuleInfo, ...], ModuleTree]] = {}
_RECENT_TREES_KEPT = 8
