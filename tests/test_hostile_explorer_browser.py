"""The explorer page under hostile input, in headless Chromium (see test_explore_browser.py
for how the browser is found): names Graphviz and UTF-8 cannot take, a fragment that
does not decode, searches that would stop the page, and the search on a small GPT-2.
"""

from __future__ import annotations

import time

import pytest
import torch

from graphviz_autograd import explore, record

from .explore_models import tiny_gpt2
from .test_explore_browser import Page, browser  # noqa: F401  (the browser fixture)
from .test_hostile_explorer import BAD_NAMES, SHOWN, chain

LONG_A = "a" * 10_000  # with (a+)+$, a backtracking regex never ends on it


class _Named(torch.nn.Module):
    """One Linear per name, applied one after another, each a ModuleDict key. Each is
    one wider than the one before, so that none are alike and fold into one box."""

    def __init__(self, names):
        super().__init__()
        self.names = list(names)
        self.blocks = torch.nn.ModuleDict({name: torch.nn.Linear(2 + i, 3 + i) for i, name in enumerate(self.names)})

    def forward(self, x):
        for name in self.names:
            x = self.blocks[name](x)
        return x.sum()


def page_of(model, path, **options):
    with record(model) as recorder:
        out = model(torch.ones(1, 2))
    return explore(out, recorder=recorder, **options).save(path)


@pytest.fixture(scope="module")
def hostile_file(tmp_path_factory):
    names = [*BAD_NAMES.values(), "a" * 28, LONG_A, "x`${y", "fc"]
    return page_of(_Named(names), tmp_path_factory.mktemp("hostile") / "names.html")


@pytest.fixture
def hostile(browser, hostile_file):  # noqa: F811
    with Page(browser, hostile_file) as page:
        yield page


def test_names_graphviz_or_utf8_cannot_take_are_drawn_escaped(hostile):
    # A ModuleDict is looked through: its modules are boxes of the top level.
    shown = hostile.page.locator("g.node.kind-box text.name").all_text_contents()
    for case in BAD_NAMES:
        assert "blocks." + SHOWN[case] in shown
    hostile.box(SHOWN["surrogate"]).click()
    assert hostile.crumbs()[-1] == "blocks." + SHOWN["surrogate"]
    assert hostile.page.locator("#level-note").text_content().startswith("blocks." + SHOWN["surrogate"] + " (Linear)")
    assert hostile.errors == []


def test_a_fragment_that_does_not_decode_opens_the_top_level(browser, hostile_file):  # noqa: F811
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        page.goto(hostile_file.as_uri() + "#%E0%A4%A")
        page.wait_for_selector("body[data-ready]")
        assert errors == []
        assert page.locator("#breadcrumb span[aria-current]").text_content() == "_Named"
        assert page.locator("g.node.kind-box").count() == len(BAD_NAMES) + 4
    finally:
        page.close()


def test_a_backtracking_pattern_never_stops_the_page(hostile):
    # As typed, a query is text: found nowhere, at once.
    hostile.search("(a+)+$")
    assert hostile.page.locator("#hits-title").text_content() == "0 hits"
    # Asked for as an expression, it runs in a worker and is stopped.
    hostile.page.fill("#search", "/(a+)+$/")
    started = time.monotonic()
    hostile.page.wait_for_function(
        "() => document.getElementById('hits-section').getAttribute('data-query') === '/(a+)+$/'", timeout=10_000)
    assert time.monotonic() - started < 8
    title = hostile.page.locator("#hits-title").text_content()
    assert "the expression ran over 1.5 s and was stopped" in title, title
    # The page answered all along, and still does.
    assert hostile.page.evaluate("1 + 1") == 2
    hostile.search(r"/\.a{28}$/")
    assert hostile.page.locator("#hits button").first.text_content().startswith("blocks." + "a" * 28)
    assert hostile.errors == []


def test_a_huge_query_is_not_run_and_the_hits_before_it_are_gone(hostile):
    hostile.search("fc")
    assert hostile.page.locator("#hits li").count() > 0
    huge = "(" * 25_000 + ")" * 25_000
    hostile.page.fill("#search", huge)
    assert hostile.page.locator("#hits li").count() == 0  # at once, before the search runs
    hostile.page.keyboard.press("Enter")
    assert hostile.page.locator("#hits li").count() == 0
    assert "not searched: 50,000 characters" in hostile.page.locator("#hits-title").text_content()
    assert hostile.errors == []


def test_a_query_that_is_no_valid_expression_is_found_as_text(hostile):
    hostile.search("`${")
    assert hostile.page.locator("#hits button").first.text_content().startswith("blocks.x`${y")
    hostile.search("/`${(/")  # asked for as an expression, and not one: as text
    assert hostile.page.locator("#hits-title").text_content() == "0 hits (as text: not a valid regular expression)"


# --- search on a small GPT-2 ---------------------------------------------------------------


@pytest.fixture(scope="module")
def small_gpt2_file(tmp_path_factory):
    logits, recorder = tiny_gpt2(2)
    return explore(logits, recorder=recorder).save(tmp_path_factory.mktemp("gpt2") / "gpt2.html")


@pytest.fixture
def small_gpt2(browser, small_gpt2_file):  # noqa: F811
    with Page(browser, small_gpt2_file) as page:
        yield page


def test_a_hit_opens_zoomed_to_readable_text_and_centred(small_gpt2):
    small_gpt2.search("Softmax")
    small_gpt2.page.locator("#hits button").first.click()
    assert small_gpt2.crumbs()[-1] == "attn"
    hit = small_gpt2.page.locator("g.node.hit")
    text = hit.locator("text").first.bounding_box()
    assert text["height"] >= 12  # 10-point text drawn at 12 pixels or more
    box = hit.locator("rect").bounding_box()
    canvas = small_gpt2.page.locator("#canvas").bounding_box()
    assert abs(box["x"] + box["width"] / 2 - (canvas["x"] + canvas["width"] / 2)) < 4
    assert abs(box["y"] + box["height"] / 2 - (canvas["y"] + canvas["height"] / 2)) < 4


def test_hits_of_an_earlier_search_are_marked_after_moving_on(small_gpt2):
    small_gpt2.search("attn")
    section = small_gpt2.page.locator("#hits-section")
    small_gpt2.page.locator("#hits button").first.click()
    assert "stale" not in (section.get_attribute("class") or "")
    assert small_gpt2.page.locator("#hits button[aria-current]").count() == 1
    small_gpt2.page.locator("#breadcrumb button").first.click()
    assert "stale" in section.get_attribute("class")
    assert "earlier search" in small_gpt2.page.locator("#hits-title").text_content()
    small_gpt2.search("mlp")
    assert "stale" not in (section.get_attribute("class") or "")


# --- big levels ------------------------------------------------------------------------


def test_a_long_chain_opens_as_parts(browser, tmp_path):  # noqa: F811
    path = explore(chain(3_000)).save(tmp_path / "chain.html")
    with Page(browser, path) as page:
        boxes = page.page.locator("g.node.kind-box").all_text_contents()
        assert any("Part \u00d7" in text for text in boxes) or len(boxes) > 1
        page.page.locator("g.node.kind-box").first.click()
        assert page.crumbs()[-1].startswith("(part ")
        assert page.page.locator("g.node.kind-op").count() > 100
        # Hundreds of ops one below the other: shown from the top at a size that reads.
        assert "shown from its top" in page.page.locator("#level-note").text_content()
        seen = page.page.evaluate("""() => {
            const canvas = document.getElementById('canvas').getBoundingClientRect();
            return Array.from(document.querySelectorAll('g.node.kind-op text'), (t) => t.getBoundingClientRect())
              .filter((r) => r.bottom > canvas.top && r.top < canvas.bottom && r.right > canvas.left && r.left < canvas.right)
              .map((r) => r.height); }""")
        assert len(seen) >= 3 and min(seen) >= 12
        assert page.errors == []


def test_a_level_laid_out_without_dot_says_so(browser, tmp_path):  # noqa: F811
    path = page_of(_Named(["fc"]), tmp_path / "fixed.html", layout="fixed")
    with Page(browser, path) as page:
        assert "Laid out by the fixed layered layout" in page.page.locator("#level-note").text_content()
        page.box("blocks.fc").click()
        assert "Laid out by the fixed layered layout" in page.page.locator("#level-note").text_content()
        assert page.page.locator("g.node.kind-op").count() >= 2
        assert page.errors == []


def test_a_control_character_and_the_text_of_its_escape_look_different(browser, tmp_path):  # noqa: F811
    # The character \x01 is shown as the four characters \x01; those four, written as a name
    # of their own, show their backslash doubled, as Python's repr writes it: never alike.
    path = page_of(_Named(["a\x01b", "a\\x01b"]), tmp_path / "escapes.html")
    with Page(browser, path) as page:
        shown = page.page.locator("g.node.kind-box text.name").all_text_contents()
        assert "blocks.a\\x01b" in shown and "blocks.a\\\\x01b" in shown
        assert page.errors == []
