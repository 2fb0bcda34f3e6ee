"""Walks and renders running in several threads at once."""

from __future__ import annotations

import gc
import importlib
import re
import shutil
import threading
import xml.etree.ElementTree as ET

import pytest
import torch
from torch import nn

import graphviz_autograd
from graphviz_autograd import make_dot, walk

walk_module = importlib.import_module("graphviz_autograd.capture.walking")

_SVG = "{http://www.w3.org/2000/svg}"


def run_together(*jobs):
    """Run each job in its own thread, started at the same moment; re-raise any failure."""
    start = threading.Barrier(len(jobs))
    errors = []

    def run(job):
        try:
            start.wait(timeout=30)
            job()
        except BaseException as error:  # noqa: BLE001 - handed to the test thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    if errors:
        raise errors[0]


def chain(length: int, name: str):
    """A loss at the end of ``length`` ops on one parameter: a deep graph, quick to build."""
    w = torch.ones(3, requires_grad=True)
    y = w
    for _ in range(length):
        y = y * 1.0
    return y.sum(), {name: w}


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")
def test_two_threads_rendering_different_graphs_write_the_right_files(tmp_path):
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    conv = nn.Conv2d(1, 2, 3)
    cases = {
        "mlp": (mlp(torch.randn(3, 4)).sum(), mlp),
        "conv": (conv(torch.randn(1, 1, 5, 5)).mean(), conv),
        "chain": chain(300, "w"),
    }
    expected = {name: make_dot(out, params).source for name, (out, params) in cases.items()}
    assert len(set(expected.values())) == len(expected)

    for round_ in range(3):
        jobs = []
        for name, (out, params) in cases.items():
            for suffix in ("dot", "svg"):
                path = tmp_path / f"{name}-{round_}.{suffix}"
                jobs.append(lambda out=out, params=params, path=path: graphviz_autograd.render(out, path, params))
        run_together(*jobs)

        for name, source in expected.items():
            assert (tmp_path / f"{name}-{round_}.dot").read_text(encoding="utf-8") == source
            svg = ET.parse(tmp_path / f"{name}-{round_}.svg").getroot()
            titles = {g.find(_SVG + "title").text for g in svg.iter(_SVG + "g") if g.get("class") == "node"}
            assert titles == set(re.findall(r"^\t(n\d+) \[", source, re.MULTILINE))
    assert not list(tmp_path.glob(".*.tmp"))


def test_concurrent_walks_leave_the_garbage_collector_on():
    assert gc.isenabled()
    size = len(walk(*chain(3000, "w")).nodes)
    graphs = []
    jobs = [lambda name=name: graphs.append(walk(*chain(3000, name))) for name in ("a", "b", "c", "d")]
    for _ in range(5):
        run_together(*jobs)
        assert gc.isenabled()
    assert sorted(g.nodes[-1].label for g in graphs) == sorted("abcd" * 5)
    assert all(len(g.nodes) == size for g in graphs)


def test_concurrent_walks_leave_a_disabled_collector_off():
    gc.disable()
    try:
        run_together(*[lambda: walk(*chain(500, "w")) for _ in range(3)])
        assert not gc.isenabled()
    finally:
        gc.enable()


class _RecordingGc:
    """Stands in for the gc module; can run a hook at the moment a walk reads its state."""

    def __init__(self):
        self.enabled = True
        self.on_isenabled = None

    def isenabled(self):
        state = self.enabled
        if self.on_isenabled is not None:
            hook, self.on_isenabled = self.on_isenabled, None
            hook()
        return state

    def disable(self):
        self.enabled = False

    def enable(self):
        self.enabled = True


def test_collector_comes_back_when_a_walk_ends_just_as_another_starts(monkeypatch):
    # The interleaving that a thread switch can produce, played out in order: the
    # first walk ends right after the second one looked at the collector's state.
    fake = _RecordingGc()
    monkeypatch.setattr(walk_module, "gc", fake)
    first = second = walk_module._gc_paused  # one pause shared by every walk
    first.__enter__()
    ended = []
    fake.on_isenabled = lambda: ended.append(first.__exit__(None, None, None))
    second.__enter__()
    if not ended:
        first.__exit__(None, None, None)
    assert not fake.enabled  # the second walk still runs: still paused
    second.__exit__(None, None, None)
    assert fake.enabled


def test_threads_drawing_while_the_kept_node_texts_are_emptied(monkeypatch):
    """Node texts are kept across drawings (dot._written); with room for only a few,
    each thread's drawings empty them under the others' feet, and every drawing
    must still come out as it does alone."""
    dot_module = importlib.import_module("graphviz_autograd.drawing.dot_writer")
    from graphviz_autograd import to_dot

    torch.manual_seed(0)
    graphs = []
    for width in (3, 5, 7, 9):
        model = nn.Sequential(nn.Linear(4, width), nn.Tanh(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 2))
        graphs.append(walk(model(torch.randn(2, 4)).sum(), model))
    alone = [to_dot(graph) for graph in graphs]
    monkeypatch.setattr(dot_module, "_WRITTEN_KEPT", 3)
    dot_module.forget_written_attrs()
    results = {i: [] for i in range(len(graphs))}

    def draw(i):
        def job():
            for _ in range(200):
                results[i].append(to_dot(graphs[i]))

        return job

    run_together(*(draw(i) for i in range(len(graphs))))
    for i, drawn in results.items():
        assert drawn and all(text == alone[i] for text in drawn)
    dot_module.forget_written_attrs()
