"""The explorer page of a watched run: a step axis over the overlays measured at each
logged step, each module's and parameter's statistics over the steps in its details,
and a page kept up to date while training runs."""

from __future__ import annotations

import contextlib

import pytest
import torch

from graphviz_autograd import OptionError, make_dot, watch

from .test_explore_browser import Page, chromium_path
from .test_watch import Net, train


@contextlib.contextmanager
def opened_page(path):
    """The page at ``path`` open in Chromium (the test is skipped where there is none)."""
    if chromium_path() is None:
        pytest.skip("no Chromium on this machine")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium_path())
        try:
            yield Page(browser, path)
        finally:
            browser.close()


def test_each_statistic_is_an_overlay_over_the_steps_keyed_by_the_graph():
    w = train(Net(), 12, {"every": 3})
    overlays = {o.name: o for o in w.overlays_over_steps()}
    assert {"grad_norm", "activation_std"} <= set(overlays)
    grad = overlays["grad_norm"]
    assert grad.steps == tuple(w.steps) == (0, 3, 6, 9)
    ids = {node.id for node in w.graph().nodes}
    assert grad.series and set(grad.series) <= ids
    assert all(len(series) == len(grad.steps) for series in grad.series.values())
    last = w.overlay("grad_norm")
    assert {k: v for k, v in grad.values.items()} == dict(last.values)  # a static drawing shows the last step
    assert "grad norm" in make_dot(w.graph(), overlays=[grad], depth="full").source


def test_the_page_data_holds_the_steps_the_stepped_values_and_the_timeline():
    w = train(Net(), 12, {"every": 3})
    data = w.page().data
    assert data["steps"] == [0, 3, 6, 9]
    stepped = [o for o in data["overlays"] if o["stepped"]]
    assert stepped and all(isinstance(v, list) and len(v) == 4 for v in data["metrics"][stepped[0]["name"]].values())
    assert not next(o for o in data["overlays"] if o["name"] == "saved_bytes")["stepped"]
    timeline = data["timeline"]
    assert timeline["steps"] == [0, 3, 6, 9] and "fc1.weight" in timeline["statistics"]["grad_norm"]
    assert len(timeline["histograms"]["grad"]["fc1.weight"][0]) == len(timeline["histogram_edges"]) - 1


def test_the_page_is_rewritten_while_training_runs(tmp_path):
    target = tmp_path / "run.html"
    seen = []
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with watch(model, optimizer=opt, every=2, page=target, page_every=2) as w:
        for step in range(12):
            model(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
            if target.exists():
                seen.append((step, target.read_text().count('"steps"')))
    assert seen and seen[0][0] < 11  # written during training, not only at the end
    assert w.steps == [0, 2, 4, 6, 8, 10]
    with pytest.raises(OptionError, match="page_every"):
        watch(model, page=target, page_every=0)


def test_the_step_slider_recolours_the_page_and_the_details_show_each_statistic_over_the_steps(tmp_path):
    w = train(Net(), 16, {"every": 2})
    path = w.save(tmp_path / "run.html")
    with opened_page(path) as page:
        assert page.page.locator("#step-value").text_content() == "14"  # the last logged step
        assert page.page.locator("#metric").input_value() != ""  # opened coloured by a statistic
        page.page.select_option("#metric", "grad_norm")
        fills = page.page.locator("g.node rect").evaluate_all("rects => rects.map(r => r.style.fill)")
        page.page.keyboard.press("[")  # one logged step back
        assert page.page.locator("#step-value").text_content() == "12"
        page.page.locator("#step").fill("0")
        assert page.page.locator("#step-value").text_content() == "0"
        assert page.page.locator("g.node rect").evaluate_all("rects => rects.map(r => r.style.fill)") != fills
        page.box("fc1").click()
        assert page.page.locator("#details svg.sparkline").count() >= 5  # activation and gradient statistics
        assert page.page.locator("#details svg.histograms").count() >= 1
        assert "Over 8 logged steps" in page.page.locator("#details").text_content()
        assert page.errors == []


def test_the_details_follow_the_step_slider_and_the_histograms_have_axes(tmp_path):
    w = train(Net(), 16, {"every": 2})
    path = w.save(tmp_path / "run.html")
    with opened_page(path) as page:
        details = page.page.locator("#details")
        page.box("fc1").click()  # opened at the last step, 14
        titles_late = details.locator("svg.sparkline title").all_text_contents()
        assert any(t.endswith("at step 14") for t in titles_late)
        facts_late = details.locator("dl.facts").first.text_content()
        page.page.locator("#step").fill("0")
        assert page.page.locator("#step-value").text_content() == "0"
        titles_early = details.locator("svg.sparkline title").all_text_contents()
        assert titles_early and not any("at step 14" in t for t in titles_early)
        assert any(t.endswith("at step 0") for t in titles_early)
        assert details.locator("dl.facts").first.text_content() != facts_late  # the numbers of step 0
        # The chosen step is marked on the step axis of each line and histogram.
        assert set(details.locator("text.axis-label.now").all_text_contents()) <= {"0"}
        histogram = details.locator("svg.histograms").first
        box = histogram.bounding_box()
        assert box["width"] >= 250 and box["height"] >= 120  # large enough to read
        labels = histogram.locator("text.axis-label").all_text_contents()
        assert {"1e-8", "1e0", "1e4"} <= set(labels) and {"0", "14"} <= set(labels)  # magnitude up, steps across
        page.page.keyboard.press("]")  # a parameter's details follow the step as well
        page.page.locator("#step").fill("3")
        page.search("fc1.weight")
        page.page.locator("#hits li button, #hits button").first.click()
        assert "fc1.weight" in details.text_content()
        page.page.locator("#step").fill("5")
        assert any(t.endswith("at step 10") for t in details.locator("svg.sparkline title").all_text_contents())
        assert page.errors == []


def test_a_step_between_histograms_shows_the_latest_one_before_it(tmp_path):
    w = train(Net(), 25, {"every": 1})  # histograms at steps 0, 10 and 20
    path = w.save(tmp_path / "run.html")
    with opened_page(path) as page:
        page.box("fc1").click()
        page.page.locator("#step").fill("13")
        histogram = page.page.locator("#details svg.histograms").first
        title = histogram.locator(":scope > title").text_content()
        assert "the histogram of step 10 outlined" in title
        # Each histogram's columns span the steps up to the next one: ten steps wide, the last to the end.
        widths = histogram.evaluate("svg => [...svg.querySelectorAll('rect:not(.now)')].map(r => +r.getAttribute('width'))")
        step = min(widths) / 5
        assert sorted({round(width / step) for width in widths}) == [5, 10]
        outline = histogram.locator("rect.now")
        assert outline.count() == 1 and round(float(outline.get_attribute("width")) / step) == 10
        assert page.errors == []


class _Small(torch.nn.Module):
    """Outputs of about -0.0005: a line whose values take nine characters at three digits."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 1e-3 - 5e-4


def test_the_lines_values_are_written_whole_beside_their_axis(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), _Small(), torch.nn.Linear(8, 1))
    w = train(model, 6, {"every": 1})
    path = w.save(tmp_path / "run.html")
    with opened_page(path) as page:
        page.box("_Small").click()
        line = page.page.locator("#details svg.sparkline").first
        labels = line.locator("text.axis-label").all_text_contents()
        assert any("e-4" in label for label in labels)  # -0.000512 as -5.12e-4
        # No label runs past the line's left edge (a fixed margin cut off "-0.000512").
        lefts = line.evaluate("svg => [...svg.querySelectorAll('text.axis-label')].map(t => t.getBBox().x)")
        assert lefts and min(lefts) >= 0
        assert page.errors == []


def test_with_several_ranks_the_page_offers_a_choice_of_rank(tmp_path):
    from graphviz_autograd import explore

    # Two runs on different data stand for two ranks (watch(ranks='each') gathers them so).
    w = train(Net(), 8, {"every": 2})
    other = train(Net(), 8, {"every": 2}, seed=1)
    timeline = w.timeline()
    timeline["ranks"] = [
        {key: record[key] for key in ("statistics", "histograms")} for record in (w.timeline(), other.timeline())
    ]
    path = explore(w.graph(), overlays=w.overlays_over_steps(), timeline=timeline, title="two ranks").save(tmp_path / "ranks.html")
    norms = [record["statistics"]["output_grad_norm"]["fc1"] for record in timeline["ranks"]]
    with opened_page(path) as page:
        details = page.page.locator("#details")
        page.box("fc1").click()
        assert page.page.locator("#rank option").all_text_contents() == ["all 2", "0", "1"]
        assert details.locator("svg.sparkline path.other-rank").count() >= 5  # every rank's line

        def grad_line_title() -> str:
            index = details.locator(".timeline-name").all_text_contents().index("output grad norm")
            return details.locator("svg.sparkline").nth(index).locator("title").text_content()

        both = grad_line_title()
        titles = []
        for rank in (1, 0):
            page.page.select_option("#rank", str(rank))
            assert details.locator("svg.sparkline path.other-rank").count() == 0
            titles.append(grad_line_title())
        assert len({both, *titles}) == 3  # each rank's own range, and both ranks' together
        # Both ranks' range is the span of each rank's.
        ranges = [float(x) for t in titles for x in t.split("; ")[0].removeprefix("from ").split(" to ")]
        together = [float(x) for x in both.split("; ")[0].removeprefix("from ").split(" to ")]
        assert together == pytest.approx([min(ranges), max(ranges)], rel=1e-2)
        assert max(norms[0] + norms[1]) == pytest.approx(max(ranges), rel=1e-2)
        assert page.errors == []
