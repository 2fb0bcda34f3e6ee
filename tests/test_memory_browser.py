"""The explorer's memory strip in a real browser: a profiled step's bytes alive over time, and
the modules whose saved tensors are alive at the moment chosen on it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from graphviz_autograd import explore, profile_step
from graphviz_autograd.checks.memory import KINDS

from .test_explore_browser import Page, browser  # noqa: F401  (the browser fixture)


class Block(nn.Module):
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.up = nn.Linear(width, hidden)
        self.down = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.tanh(self.up(x)))


class Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(64, 512), Block(64, 64), Block(64, 64)])
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> tuple[Path, object]:
    torch.manual_seed(0)
    x, labels = torch.randn(256, 64), torch.randint(0, 10, (256,))
    profile = profile_step(Stack(), x, loss=lambda out: nn.functional.cross_entropy(out, labels), steps=1)
    page = explore(profile.graph, overlays=profile.overlays(), memory=profile.memory)
    return page.save(tmp_path_factory.mktemp("memory") / "memory.html"), profile.memory


def test_the_strip_draws_the_step_by_kind_with_axes_and_the_peak(browser, profiled):  # noqa: F811
    path, memory = profiled
    with Page(browser, path) as page:
        strip = page.page.locator("#memory-strip")
        assert page.page.locator("#memory").is_visible()
        assert sorted(strip.locator("polygon").evaluate_all("ps => ps.map(p => p.getAttribute('class'))")) == \
            sorted(f"kind-{kind}" for kind in KINDS)
        texts = strip.locator("text").all_text_contents()
        assert any(t.startswith("peak ") and "backward" in t for t in texts)
        assert {"forward", "backward"} <= set(texts)
        assert any(t.endswith(" s") or t.endswith(" ms") for t in texts)  # the time axis
        assert any(t.endswith("MiB") or t.endswith("KiB") for t in texts)  # the bytes axis
        assert page.page.locator("#memory-key").text_content().startswith("parameters")
        assert page.errors == []


def test_choosing_a_moment_marks_the_modules_whose_saved_tensors_are_alive_then(browser, profiled):  # noqa: F811
    path, memory = profiled
    with Page(browser, path) as page:
        strip = page.page.locator("#memory-strip")
        assert page.page.locator("g.memory-alive").count() == 0
        # A click at the end of the forward (just left of where the backward begins): every
        # block's saved tensors wait for backward then.
        backward = strip.locator("line.phase").nth(1).bounding_box()
        box = strip.locator("circle.peak").bounding_box()
        page.page.mouse.click(backward["x"] - 3, backward["y"] + backward["height"] / 2)
        moment = page.page.locator("#memory-moment").text_content()
        assert moment.startswith("at ") and "saved for backward" in moment
        page.page.evaluate("window.explorer.open(window.explorer.levelByPath.get('blocks.0'))")
        page.page.evaluate("window.explorer.open(0)")
        marked = page.page.locator("g.node.kind-box.memory-alive").all_text_contents()
        assert any("blocks.0" in text for text in marked), marked
        assert strip.locator("line.moment").count() == 1
        # Dragged to the very start, before anything was saved: nothing is marked.
        strip_box = strip.bounding_box()
        page.page.mouse.move(box["x"], box["y"])
        page.page.mouse.down()
        page.page.mouse.move(strip_box["x"] + 30, strip_box["y"] + 60, steps=5)
        page.page.mouse.up()
        assert page.page.locator("g.memory-alive").count() == 0
        assert "0 modules" in page.page.locator("#memory-moment").text_content()
        assert page.errors == []


def test_a_page_without_memory_has_no_strip(browser, tmp_path):  # noqa: F811
    x = torch.ones(2, requires_grad=True)
    path = explore((x * x).sum()).save(tmp_path / "plain.html")
    with Page(browser, path) as page:
        assert page.page.locator("#memory").is_hidden()
        assert page.errors == []



def test_the_strip_holds_each_value_until_the_next_point_and_reads_the_point_in_force(browser, profiled):  # noqa: F811
    # Bytes alive change at an allocation or a free and hold until the next: drawn as slopes
    # between points, one large allocation looked like a ramp over a third of the forward.
    path, memory = profiled
    points = memory.timeline
    with Page(browser, path) as page:
        outline = page.page.locator("#memory-strip polygon.kind-temporaries").get_attribute("points")
        xy = [tuple(map(float, pair.split(","))) for pair in outline.split()]
        n = len(points)
        assert len(xy) == 4 * n - 2
        top = xy[:2 * n - 1]
        # Each point's value runs flat to the next point's time, then steps.
        assert all(top[2 * i][1] == top[2 * i + 1][1] and top[2 * i + 1][0] == top[2 * i + 2][0] for i in range(n - 1))
        # A moment between two points reads the earlier one, the value in force then.
        i = next(i for i in range(1, n - 1) if points[i][1] != points[i + 1][1] and points[i + 1][0] > points[i][0])
        between = points[i][0] + 0.75 * (points[i + 1][0] - points[i][0])  # nearer the next point

        def alive_at(t):
            page.page.evaluate(f"window.explorer.chooseMoment({t})")
            return page.page.locator("#memory-moment").text_content().split(": ", 1)[1].split(" alive")[0]

        assert alive_at(between) == alive_at(points[i][0]) != alive_at(points[i + 1][0])
        assert page.errors == []
