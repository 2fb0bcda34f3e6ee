"""Every architecture of the zoo (``tests/zoo.py``): recorded without a trace on the model,
drawn within a page by default, browsable in an explorer page, clean for check(), and
the same structure in two runs.

Each model is built and recorded once per test process (``_recorded``); the tests
read that one forward pass. The zoo is marked ``zoo``: ``pytest -m "not zoo"`` leaves it out.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import re
import shutil
import subprocess
import warnings
from typing import Any, NamedTuple

import pytest
import torch

from graphviz_autograd import Recorder, check, explore, find_nonfinite, make_dot, record, walk
from graphviz_autograd.explorer.pages import Explorer
from graphviz_autograd.views.page_fit import PAGE_LONG_SIDE, picture_size
from graphviz_autograd.testing.structure import structure_text

from .test_explore_browser import Page, browser  # noqa: F401  (browser: a fixture used below)
from .zoo import KINDS, ZOO, build, forward, loss_of

pytestmark = pytest.mark.zoo

NAMES = sorted(ZOO)
# One of each for the real browser: a decoder, an encoder-decoder, a vision model, a mixture of experts.
IN_THE_BROWSER = ["gpt2", "t5", "vit", "mixtral"]
# Graphviz draws a little bigger than picture_size guesses (its breadth is a floor): how much is allowed.
DRAWN_OVER_GUESS = 1.1


class Recorded(NamedTuple):
    model: torch.nn.Module
    twin: torch.nn.Module  # a copy made before the recorded forward, run without a recorder
    inputs: dict[str, Any]
    recorder: Recorder
    loss: torch.Tensor


@functools.lru_cache(maxsize=None)
def _recorded(name: str) -> Recorded:
    model, inputs = build(name)
    twin = copy.deepcopy(model)
    with record(model) as rec:
        outputs = forward(model, inputs)
    return Recorded(model, twin, inputs, rec, loss_of(outputs))


@functools.lru_cache(maxsize=None)
def _page(name: str) -> Explorer:
    recorded = _recorded(name)
    return explore(recorded.loss, recorder=recorded.recorder)


@pytest.fixture(scope="module", params=NAMES)
def name(request: pytest.FixtureRequest) -> str:
    """Each model of the zoo. A module-scoped parameter: pytest runs the tests of one model
    one after the other, so that under xdist a model is mostly built in one worker."""
    return request.param


def _state(model: torch.nn.Module) -> dict[str, Any]:
    """Everything of a model that recording must leave as it was."""
    hooks = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
             "_state_dict_hooks", "_load_state_dict_pre_hooks")
    return {
        "tensors": {name: t.detach().clone() for name, t in [*model.named_parameters(), *model.named_buffers()]},
        "requires_grad": {name: p.requires_grad for name, p in model.named_parameters()},
        "grads": {name: p.grad for name, p in model.named_parameters() if p.grad is not None},
        "training": {name: m.training for name, m in model.named_modules()},
        "hooks": {name: [len(getattr(m, h)) for h in hooks] for name, m in model.named_modules()},
        "devices": {t.device for t in model.parameters()},
    }


def test_the_zoo_covers_every_kind_of_model():
    assert len(ZOO) >= 25
    assert {animal.kind for animal in ZOO.values()} == set(KINDS)


def test_recording_leaves_the_model_as_it_was(name):
    recorded = _recorded(name)
    torch.manual_seed(0)
    forward(recorded.twin, recorded.inputs)  # the same forward, unrecorded: batch norms count it alike
    after, expected = _state(recorded.model), _state(recorded.twin)
    assert after["tensors"].keys() == expected["tensors"].keys()
    changed = [key for key, t in after["tensors"].items() if not torch.equal(t, expected["tensors"][key])]
    assert changed == []
    for part in ("requires_grad", "grads", "training", "hooks", "devices"):
        assert after[part] == expected[part], part
    assert torch.is_grad_enabled()


def test_the_default_picture_fits_a_page_and_graphviz_draws_it(name):
    recorded = _recorded(name)
    with contextlib.redirect_stderr(io.StringIO()) as said:
        dot = make_dot(recorded.loss, recorder=recorded.recorder)
    assert "does not fit a page either" not in said.getvalue()
    view = dot.prepared  # the graph as drawn, and how close its ranks are set
    guess = picture_size(view.graph, view.options.direction, view.compact, view.options.clusters)
    assert max(guess) <= PAGE_LONG_SIDE
    if shutil.which("dot") is None:
        pytest.skip("Graphviz 'dot' is not installed")
    done = subprocess.run(["dot", "-Tsvg"], input=dot.source.encode("utf-8"), capture_output=True, timeout=60)
    assert done.returncode == 0 and not done.stderr, done.stderr.decode("utf-8", "replace")
    size = re.search(rb'<svg width="([\d.]+)pt" height="([\d.]+)pt"', done.stdout)
    assert size is not None
    assert max(float(size.group(1)), float(size.group(2))) <= PAGE_LONG_SIDE * DRAWN_OVER_GUESS


def test_the_explorer_page_builds(name):
    recorded, page = _recorded(name), _page(name)
    levels = {level["path"] for level in page.data["levels"]}
    assert "" in levels and len(levels) > 1  # the model, and modules inside it
    assert levels <= {module.path for module in recorded.recorder.modules}  # later calls too: 'layer#2'
    assert all(t["layout"]["nodes"] for t in page.data["templates"])  # Graphviz laid out every view
    html = page.html()
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert page.title == type(recorded.model).__name__


@pytest.mark.parametrize("name", IN_THE_BROWSER)
def test_the_explorer_page_opens_in_a_browser_without_an_error(name, browser, tmp_path):  # noqa: F811
    path = tmp_path / f"{name}.html"
    _page(name).save(path)
    with Page(browser, path) as page:
        assert page.errors == []
        assert page.page.locator("g.node").count() > 0
        assert all(url.startswith("file:") or url.startswith("data:") for url in page.requests)


def test_check_finds_nothing_wrong_with_the_clean_model(name):
    recorded = _recorded(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        findings = check(recorded.loss, recorded.model, recorder=recorded.recorder, backward=True)
    assert [(f.severity, f.code, f.message) for f in findings if f.severity != "info"] == []
    assert all(p.grad is None for p in recorded.model.parameters())  # backward=True leaves .grad alone


def test_every_value_of_a_clean_training_step_is_finite(name):
    # No false alarm: masks of -inf and the like that a model makes on purpose are not blamed.
    model, inputs = build(name)
    assert list(find_nonfinite(model, inputs, loss=loss_of)) == []


def test_the_input_wav2vec2_makes_require_grad_is_named_as_a_view_of_it():
    recorded = _recorded("wav2vec2")
    graph = walk(recorded.loss, recorded.model, recorder=recorded.recorder)
    views = [(n.kind, n.label, n.shape) for n in graph.nodes if n.label.endswith("(view)")]
    assert views == [("parameter", "input_values (view)", (1, 1, 4000))]


def test_the_structure_is_the_same_in_two_runs(name):
    recorded = _recorded(name)
    first = structure_text(walk(recorded.loss, recorded.model, recorder=recorded.recorder))
    with record(recorded.model) as rec:
        outputs = forward(recorded.model, recorded.inputs)
    second = structure_text(walk(loss_of(outputs), recorded.model, recorder=rec))
    assert second == first


def test_the_zoo_benchmark_prints_its_table():
    from .test_benchmarks_smoke import run_module

    if shutil.which("dot") is None:
        pytest.skip("Graphviz 'dot' is not installed: the time to the picture includes it")
    done = run_module("benchmarks.zoo", "--only", "resnet", "--repeat", "1")
    assert done.returncode == 0, done.stderr
    header, _rule, row = [line for line in done.stdout.splitlines() if line.startswith("|")]
    cells = dict(zip([c.strip() for c in header.strip("|").split("|")], [c.strip() for c in row.strip("|").split("|")]))
    assert cells["model"] == "resnet"
    assert float(cells["ours ms"]) > 0 and float(cells["dot ms"]) > 0
    assert cells["findings E/W/I"].startswith("0/0/")
    assert int(cells["nodes"]) >= int(cells["drawn"]) > 0


def test_the_zoo_benchmark_prints_the_recorders_cost():
    from .test_benchmarks_smoke import ROOT, run_module

    pytest.importorskip("torchviz")
    if shutil.which("dot") is None:
        pytest.skip("Graphviz 'dot' is not installed")
    # This checkout against itself, as --before takes another's root.
    done = run_module("benchmarks.zoo", "--recorder", "--before", str(ROOT), "--only", "resnet", "--repeat", "1")
    assert done.returncode == 0, done.stderr
    header, _rule, row = [line for line in done.stdout.splitlines() if line.startswith("|")]
    cells = dict(zip([c.strip() for c in header.strip("|").split("|")], [c.strip() for c in row.strip("|").split("|")]))
    assert cells["model"] == "resnet"
    forward, recorded = float(cells["forward ms"]), float(cells["recorded ms now"])
    ratio = float(cells["rec/fwd now"])  # of the times before they were rounded to 0.1 ms
    assert forward > 0 and abs(ratio - recorded / forward) <= 0.1 * ratio + 0.05
    assert float(cells["ours/tv before"]) > 0 and float(cells["ours/tv now"]) > 0
