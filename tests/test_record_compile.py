"""record() leaves torch.compile alone: the same compiled graph with and without recording, and one note."""

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
    try:
        plain, plain_breaks, plain_notes, plain_value = compiled_ops(False)
    except Exception as error:  # no working torch.compile here
        pytest.skip(f"torch.compile is unavailable: {type(error).__name__}: {error}")
    recorded, breaks, notes, value = compiled_ops(True)
    # One compiled region either way; Dynamo may order the region's inputs differently
    # when modules have hooks, so the nodes are compared as a whole.
    assert sorted(recorded) == sorted(plain) and plain.count(("op", "CompiledFunctionBackward")) == 1
    assert breaks == plain_breaks == {}
    assert value == plain_value
    assert plain_notes == [] and len(notes) == 1 and "torch.compile" in notes[0]
