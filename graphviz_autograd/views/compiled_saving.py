"""What a torch.compile'd model saves for backward next to what the same model saves eagerly,
module by module: as words (:meth:`SavedComparison.text`) and as an overlay on the compiled
graph (:meth:`SavedComparison.overlay`).

Both graphs count saved bytes one way (:func:`~graphviz_autograd.views.overlays.saved_bytes_by_op`:
activations only; parameters, buffers and inputs without gradient exist anyway). The eager
graph is walked with ``collect_saved=True``; the compiled one is walked with the recorder of
its compiled call, whose regions (:mod:`graphviz_autograd.capture.compiled_regions`) hold the
tensors each region saved. A module is matched by its path: a compiled op's module less its
region's box (``compiled region 0.h.0`` is ``h.0``), an eager op's less its call marks.

>>> from graphviz_autograd.graph.autograd_graph import OP, SAVED, SAVED_BY, Node, Edge
>>> def saving(module, size):
...     return AutogradGraph((Node("n0", OP, "MulBackward0", module=module),
...                           Node("n1", SAVED, "self", (size,), "float32")), (Edge("n0", "n1", SAVED_BY),))
>>> table = compare_saved(saving("fc", 8), saving("compiled region 0.fc", 4))
>>> print(table.text())
module  eager  compiled  change
fc      32 B   16 B      -50%
total   32 B   16 B      -50%
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from ..capture.compiled_regions import REGION_PREFIX, within_region
from ..errors import CompiledCaptureError, InputTypeError
from ..graph.autograd_graph import SAVED, AutogradGraph, module_of_call
from ..graph.descriptions import format_bytes
from .overlays import Overlay, saved_bytes_by_op

OVERLAY_NAME = "saved_vs_eager"


class ModuleSaving(NamedTuple):
    """Bytes one module's ops save for backward, eagerly and compiled (its submodules' not included)."""

    module: str
    eager: int
    compiled: int

    @property
    def change(self) -> str:
        """The compiled bytes against the eager ones: ``-50%``, ``+12%``, ``new`` or ``0%``."""
        if self.eager == 0:
            return "0%" if self.compiled == 0 else "new"
        return f"{(self.compiled - self.eager) * 100 / self.eager:+.0f}%"


class SavedComparison(NamedTuple):
    """Saved bytes per module, eager against compiled (:func:`compare_saved`); ``modules`` in
    the model's order, ``''`` for ops outside any module. ``compiled_graph`` is the graph the
    overlay is drawn on, ``saving_ops`` each of its saving ops' module."""

    modules: tuple[ModuleSaving, ...]
    compiled_graph: AutogradGraph
    saving_ops: tuple[tuple[str, str, int], ...]  # (op id in compiled_graph, module, bytes)

    @property
    def eager_total(self) -> int:
        return sum(m.eager for m in self.modules)

    @property
    def compiled_total(self) -> int:
        return sum(m.compiled for m in self.modules)

    def text(self) -> str:
        """A table of words: module, eager bytes, compiled bytes, change; a total last."""
        total = ModuleSaving("total", self.eager_total, self.compiled_total)
        rows = [("module", "eager", "compiled", "change")]
        rows += [(m.module or "(model)", format_bytes(m.eager), format_bytes(m.compiled), m.change)
                 for m in (*self.modules, total)]
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows)

    def overlay(self) -> Overlay:
        """The compiled graph's saved bytes per op (summed onto module boxes), each module's
        tooltip saying what it saves eagerly; the key holds the totals. Draw it with
        ``make_dot(..., overlays=[comparison.overlay()])`` on the compiled graph."""
        by_module = {m.module: m for m in self.modules}
        values: dict[str, float] = {}
        tooltips: dict[str, str] = {}
        told: set[str] = set()
        for op, module, size in self.saving_ops:
            values[op] = float(size)
            if module not in told:
                told.add(module)
                saving = by_module[module]
                tooltips[op] = (f"{module or 'the model'} saves {format_bytes(saving.compiled)} compiled, "
                                f"{format_bytes(saving.eager)} eager ({saving.change})")
        total = ModuleSaving("total", self.eager_total, self.compiled_total)
        key_line = (f"saved for backward: {format_bytes(total.compiled)} compiled, "
                    f"{format_bytes(total.eager)} eager ({total.change})")
        return Overlay(OVERLAY_NAME, "saved for backward, compiled (eager in tooltips)", values, rollup="sum",
                       unit="B", tooltips=tooltips, key=(([key_line], {"shape": "note"}),))


def compare_saved(eager: AutogradGraph, compiled: AutogradGraph) -> SavedComparison:
    """Saved bytes per module of ``eager`` (walked with ``collect_saved=True``) against
    ``compiled`` (the compiled model walked with the recorder of its call).

    Raises :class:`~graphviz_autograd.errors.CompiledCaptureError` when ``compiled`` holds no
    opened region, and :class:`~graphviz_autograd.errors.InputTypeError` when ``eager`` holds
    no saved tensors. (See the module's docstring for an example.)
    """
    for name, graph in (("eager", eager), ("compiled", compiled)):
        if not isinstance(graph, AutogradGraph):
            raise InputTypeError(f"compare_saved() takes two walked graphs; {name} is a {type(graph).__name__}.")
    if not any(node.module.startswith(REGION_PREFIX) for node in compiled.nodes):
        raise CompiledCaptureError(
            "compare_saved(): the compiled graph holds no opened torch.compile region; run the compiled "
            "model's call inside `with record(model) as rec:` and walk it with recorder=rec."
        )
    if not any(node.kind == SAVED for node in eager.nodes):
        raise InputTypeError(
            "compare_saved(): the eager graph holds no saved tensors; walk it with collect_saved=True "
            "(walk(loss, model, collect_saved=True, recorder=rec))."
        )
    eager_bytes = _bytes_by_module(eager, module_of_call)
    compiled_bytes = _bytes_by_module(compiled, within_region)
    order = {m.path: i for i, m in enumerate(eager.modules)}
    paths = sorted(set(eager_bytes) | set(compiled_bytes), key=lambda path: (order.get(path, len(order)), path))
    modules = tuple(ModuleSaving(path, eager_bytes.get(path, 0), compiled_bytes.get(path, 0)) for path in paths)
    sizes = saved_bytes_by_op(compiled)[0]
    saving_ops = tuple((op, within_region(compiled.node(op).module), size) for op, size in sizes.items())
    return SavedComparison(modules, compiled, saving_ops)


def _bytes_by_module(graph: AutogradGraph, module_path: Callable[[str], str]) -> dict[str, int]:
    sizes = saved_bytes_by_op(graph)[0]
    found: dict[str, int] = {}
    for op, size in sizes.items():
        path = module_path(graph.node(op).module)
        found[path] = found.get(path, 0) + size
    return found
