"""record() leaves torch.compile alone: the same compiled graph and value with and without recording; recorded, the region opens."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from graphviz_autograd import record, walk


def compiled_ops(recording: bool):
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1))
    compiled = torch.compile(model, backend="aot_eager")  # no C compiler needed
    x = torch.randn(2, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if recording:
            with record(model) as rec:
                out = compiled(x).sum()
            graph = walk(out, model, recorder=rec)
        else:
            out = compiled(x).sum()
            graph = walk(out, model)
    labels = [(n.kind, n.label) for n in graph.nodes]
    notes = [str(w.message) for w in caught if "graphviz-autograd" in str(w.message)]
    return labels, dict(counters["graph_break"]), notes, out.item()


def test_recording_does_not_split_or_change_the_compiled_graph():
    from graphviz_autograd.capture.compiled_regions import _missing_capability

    if _missing_capability():
        pytest.skip(_missing_capability())
    try:
        plain, plain_breaks, plain_notes, plain_value = compiled_ops(False)
    except Exception as error:  # no working torch.compile here
        pytest.skip(f"torch.compile is unavailable: {type(error).__name__}: {error}")
    recorded, breaks, notes, value = compiled_ops(True)
    # One compiled region either way: opaque unrecorded, its backward ops when recorded.
    assert plain.count(("op", "CompiledFunctionBackward")) == 1
    assert ("op", "CompiledFunctionBackward") not in recorded and ("op", "aten.tanh_backward") in recorded
    assert breaks == plain_breaks == {}
    assert value == plain_value
    assert plain_notes == notes == []


def test_a_torch_without_the_compile_steps_keeps_the_region_opaque_and_says_which(monkeypatch):
    from graphviz_autograd.capture import compiled_regions

    missing = "this torch has no AOTAutograd partition step to watch, so compiled regions stay one node."
    monkeypatch.setattr(compiled_regions, "_missing_capability", lambda: missing)
    torch._dynamo.reset()
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    compiled = torch.compile(model, backend="aot_eager")
    with record(model) as rec:
        out = compiled(torch.randn(2, 4)).sum()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = walk(out, model, recorder=rec)
    assert [n.label for n in graph.nodes if n.label.startswith("Compiled")] == ["CompiledFunctionBackward"]
    assert rec.compiled.regions == [] and rec.compiled.missing == missing
    (note,) = [str(w.message) for w in caught if "graphviz-autograd" in str(w.message)]
    assert note.endswith("This" + missing[len("this"):])
    with pytest.raises(compiled_regions.CompiledCaptureError, match="partition step"):
        rec.compiled.require()
