"""The explorer page in a real browser: headless Chromium driven by Playwright.

Playwright's own browser download cannot work everywhere, so the system Chromium
(Debian's ``chromium`` package) is launched. Without it these tests skip, except
under CI (the CI environment variable set), where a missing browser fails them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from graphviz_autograd import explore
from graphviz_autograd.checks.diagnosis import Finding

from .explore_models import HOSTILE, hostile_graph, tiny_dense_block, tiny_gpt2

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str | None:
    for candidate in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def _unavailable(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run the browser tests (.ci/run installs chromium and playwright).")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed")
    executable = chromium_path()
    if executable is None:
        _unavailable("no Chromium found at /usr/bin/chromium or on PATH")
    if shutil.which("dot") is None:
        _unavailable("Graphviz 'dot' is not installed")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class Page:
    """A page opened from disk, with what it logged and requested."""

    def __init__(self, browser, path: Path, at_top: bool = True):
        self.url = path.as_uri()
        self.page = browser.new_page(viewport={"width": 1280, "height": 800})
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda message: message.type in ("error", "warning") and self.errors.append(message.text))
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.goto(self.url)
        self.page.wait_for_selector("body[data-ready]")
        if at_top:  # a page may open past a top level one module fills (see test_page_opens_past_...)
            self.page.evaluate("window.explorer.open(0)")

    def __enter__(self) -> "Page":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.page.close()

    def box(self, text: str):
        return self.page.locator("g.node", has_text=text).first

    def search(self, query: str) -> None:
        """Type ``query`` into the search box and wait for its hits (search runs once typing pauses)."""
        self.page.fill("#search", query)
        self.page.wait_for_function(
            "(q) => document.getElementById('hits-section').getAttribute('data-query') === q", arg=query)

    def crumbs(self) -> list[str]:
        return self.page.locator("#breadcrumb button, #breadcrumb span[aria-current]").all_text_contents()


@pytest.fixture(scope="module")
def gpt2_file(tmp_path_factory) -> Path:
    logits, recorder = tiny_gpt2(4)
    return explore(logits, recorder=recorder).save(tmp_path_factory.mktemp("explore") / "gpt2.html")


@pytest.fixture
def gpt2(browser, gpt2_file):
    with Page(browser, gpt2_file) as page:
        yield page


def test_page_loads_offline_with_no_error(gpt2):
    assert gpt2.errors == []
    assert gpt2.requests == [gpt2.url]
    assert gpt2.crumbs() == ["GPT2LMHeadModel"]
    assert gpt2.page.locator("g.node.kind-box").count() == 2


def test_page_opens_past_a_top_level_one_module_fills_and_goes_back_up(browser, gpt2_file):
    # GPT-2's top level is transformer (nearly every op), lm_head and the output: the page
    # opens inside transformer, says why, and Backspace goes back to the top.
    with Page(browser, gpt2_file, at_top=False) as page:
        assert page.crumbs() == ["GPT2LMHeadModel", "transformer"]
        assert "Opened here, since it holds nearly all" in page.page.locator("#level-note").text_content()
        assert "GPT2Block \u00d74" in page.box("GPT2Block").text_content()
        page.page.locator("#canvas").click(position={"x": 5, "y": 5})
        page.page.keyboard.press("Backspace")
        assert page.crumbs() == ["GPT2LMHeadModel"]
        assert page.page.locator("g.node.kind-box").count() == 2
        assert page.errors == []


def test_ports_show_what_enters_and_leaves_by_name(browser, gpt2_file):
    with Page(browser, gpt2_file, at_top=False) as page:  # transformer's level
        leaving = page.page.locator("g.node.kind-out text").all_text_contents()
        assert "last_hidden_state" in leaving and "wte.weight = lm_head.weight" in leaving
        page.box("GPT2Block").click()
        assert "hidden_states" in page.page.locator("g.node.kind-in text").all_text_contents()
        assert page.errors == []


def test_folded_block_opens_one_representative(gpt2):
    gpt2.box("transformer").click()
    assert gpt2.crumbs() == ["GPT2LMHeadModel", "transformer"]
    block = gpt2.box("GPT2Block")
    assert "GPT2Block \u00d74" in block.text_content()
    block.click()
    assert gpt2.crumbs() == ["GPT2LMHeadModel", "transformer", "h.0"]
    note = gpt2.page.locator("#level-note").text_content()
    assert "one of 4 alike GPT2Block" in note and "transformer.h.3" in note
    inside = gpt2.page.locator("g.node.kind-box text.name").all_text_contents()
    assert {"ln_1", "attn", "ln_2", "mlp"} <= set(inside)
    # Another of the run, through the level's chooser: same drawing, its own names.
    gpt2.page.select_option("#level-note select", label="transformer.h.2")
    assert gpt2.crumbs()[-1] == "h.2"
    assert gpt2.errors == []


def test_search_jumps_into_the_right_layer(gpt2):
    gpt2.search("c_attn")
    hits = gpt2.page.locator("#hits button")
    texts = hits.all_text_contents()
    assert any(t.startswith("transformer.h.2.attn.c_attn") for t in texts)
    assert "4 hits" not in gpt2.page.locator("#hits-title").text_content()  # the modules and their parameters
    hits.filter(has_text="transformer.h.2.attn.c_attn.weight").first.click()
    assert gpt2.crumbs() == ["GPT2LMHeadModel", "transformer", "h.2", "attn", "c_attn"]
    highlighted = gpt2.page.locator("g.node.hit")
    assert highlighted.count() == 1 and highlighted.text_content().startswith("weight")
    # A regular expression (asked for with slashes), and a module hit: its parent opens with the box highlighted.
    gpt2.search(r"/h\.3\.mlp$/")
    gpt2.page.locator("#hits button").first.click()
    assert gpt2.crumbs() == ["GPT2LMHeadModel", "transformer", "h.3"]
    assert gpt2.page.locator("g.node.hit text.name").text_content() == "mlp"


def test_breadcrumb_and_keys_go_back_up(gpt2):
    gpt2.box("transformer").click()
    gpt2.box("GPT2Block").click()
    gpt2.box("attn").click()
    gpt2.page.locator("#breadcrumb button", has_text="transformer").click()
    assert gpt2.crumbs() == ["GPT2LMHeadModel", "transformer"]
    gpt2.box("GPT2Block").click()
    gpt2.page.keyboard.press("Escape")
    assert gpt2.crumbs() == ["GPT2LMHeadModel", "transformer"]
    gpt2.page.keyboard.press("Backspace")
    assert gpt2.crumbs() == ["GPT2LMHeadModel"]


def test_details_panel_and_tracing(gpt2):
    gpt2.search(r"/h\.1\.attn\.c_attn$/")
    gpt2.page.locator("#hits button").first.click()
    gpt2.box("c_attn").click()
    gpt2.box("AddmmBackward0").click()
    details = gpt2.page.locator("#details").text_content()
    assert "matrix multiplication plus a bias" in details
    assert "transformer.h.1.attn.c_attn" in details
    assert "saved for backward" in details
    # What feeds it: its weight and bias, and every parameter before it in the model.
    assert "transformer.h.1.attn.c_attn.weight" in details and "transformer.h.2" not in details
    assert gpt2.page.locator("g.node.up").count() >= 2 and gpt2.page.locator("g.node.down").count() >= 1


def test_module_table_sorts_and_opens(gpt2):
    gpt2.page.click("#table-button")
    rows = gpt2.page.locator("#table-rows tr")
    assert rows.count() > 20
    gpt2.page.locator("#table-columns button", has_text="ops").click()
    first = rows.first.locator("td").all_text_contents()
    assert first[0] == "GPT2LMHeadModel"  # the most ops: the whole model
    rows.filter(has_text="transformer.h.3.mlp").first.click()
    assert gpt2.crumbs()[-1] == "mlp" and gpt2.page.locator("#table").is_hidden()


def test_hostile_names_show_as_text_and_run_nothing(browser, tmp_path):
    path = explore(hostile_graph()).save(tmp_path / "hostile.html")
    with Page(browser, path) as page:
        assert page.page.evaluate("window.__pwned") is None
        box = page.page.locator("g.node.kind-box text.name")
        assert box.text_content() == HOSTILE
        assert page.page.locator("img").count() == 0
        page.page.locator("g.node.kind-box").click()
        assert page.crumbs()[-1] == HOSTILE
        page.search("onerror")
        page.page.locator("#hits button").first.click()
        assert page.page.evaluate("window.__pwned") is None
        assert page.page.locator("img, b, i").count() == 0
        assert page.errors == []
        assert page.page.title() == "Net&<i> · backward graph"


def test_a_finding_deep_inside_shows_on_every_level_above(browser, gpt2_file, tmp_path):
    logits, recorder = tiny_gpt2(4)
    from graphviz_autograd import walk

    graph = walk(logits, recorder=recorder, collect_shapes=True, collect_saved=True)
    deep = next(n for n in graph.nodes if n.module == "transformer.h.2.mlp.c_fc" and n.kind == "op")
    finding = Finding("warning", "gradient_cut", "detach() cuts the gradient here", (deep.id,), "detach")
    with Page(browser, explore(graph, diagnose=[finding]).save(tmp_path / "finding.html")) as page:
        assert page.box("transformer").locator("g.badge.warning").count() == 1
        assert page.box("lm_head").locator("g.badge").count() == 0
        page.box("transformer").click()
        assert page.box("GPT2Block").locator("g.badge.warning").count() == 1
        page.page.select_option("#metric", "saved_bytes")
        assert "saved for backward" in page.page.locator("#legend").text_content()
        assert page.errors == []


def test_expand_all_opens_every_module_of_the_level_and_collapses_back(gpt2):
    button = gpt2.page.locator("#expand")
    assert button.get_attribute("aria-disabled") == "false"
    button.click()
    assert button.text_content() == "Collapse" and gpt2.page.url.endswith("#&expanded")
    assert gpt2.page.locator("g.node.kind-box").count() == 0
    clusters = gpt2.page.locator("g.cluster > text").all_text_contents()
    assert "h.0 \u2026 h.3  GPT2Block \u00d74" in clusters and "lm_head  Linear" in clusters
    ops = gpt2.page.locator("g.node.kind-op text.name").all_text_contents()
    assert "AddmmBackward0" in ops and "TanhBackward0" in ops  # the MLP's gelu, from inside a block
    # Details and tracing work on the expanded drawing: an op inside the folded block.
    gpt2.page.locator("g.node", has_text="TanhBackward0").first.click()
    details = gpt2.page.locator("#details").text_content()
    assert "transformer.h.0.mlp" in details and "and its 3 matches in the other blocks" in (
        gpt2.page.locator("g.node.selected title").text_content())
    assert gpt2.page.locator("g.node.up").count() > 10 and gpt2.page.locator("g.node.down").count() > 3
    assert gpt2.page.locator("g.cluster.up").count() >= 1
    # The key goes back to one box per module, and again into the expanded view.
    gpt2.page.locator("#canvas").click(position={"x": 5, "y": 5})
    gpt2.page.keyboard.press("e")
    assert gpt2.page.locator("g.node.kind-box").count() == 2 and gpt2.page.locator("g.cluster").count() == 0
    assert button.text_content() == "Expand all"
    gpt2.page.keyboard.press("e")
    assert gpt2.page.locator("g.cluster").count() == len(clusters)
    # Opening a module leaves the expanded view; a level without modules has nothing to expand.
    gpt2.page.keyboard.press("e")
    gpt2.box("lm_head").click()
    assert button.get_attribute("aria-disabled") == "true" and "Nothing to expand" in button.get_attribute("title")
    assert gpt2.errors == []


def test_expand_all_is_refused_above_the_node_limit(browser, tmp_path):
    logits, recorder = tiny_gpt2(2)
    with Page(browser, explore(logits, recorder=recorder, expand_limit=60).save(tmp_path / "limited.html")) as page:
        button = page.page.locator("#expand")
        assert button.get_attribute("aria-disabled") == "true"
        assert "Too big to expand all" in button.get_attribute("title") and "Open a module" in button.get_attribute("title")
        assert not button.is_enabled()
        button.click(force=True)
        page.page.keyboard.press("e")
        assert page.page.locator("g.cluster").count() == 0 and page.page.locator("g.node.kind-box").count() == 2
        assert "Too big" in page.page.locator("#level-note").text_content()
        # A small module inside still expands.
        page.box("transformer").click()
        page.box("GPT2Block").click()
        page.box("attn").click()
        assert page.page.locator("#expand").get_attribute("aria-disabled") == "false"
        assert page.errors == []


def test_fan_in_through_junctions_draws_each_edge_whole_and_traces_along_the_bus(browser, tmp_path):
    out, recorder = tiny_dense_block(7)
    explored = explore(out, recorder=recorder)
    path = explored.save(tmp_path / "dense.html")
    data = explored.data
    template = data["templates"][next(lv for lv in data["levels"] if lv["path"] == "1")["template"]]
    with Page(browser, path) as page:
        page.page.goto(path.as_uri() + "#1")
        page.page.reload()
        page.page.wait_for_selector("body[data-ready]")
        assert page.crumbs()[-1] == "1"
        edges = page.page.locator("g.edge")
        assert edges.count() == len(template["edges"])
        # One path and one arrowhead per edge, however many junctions it runs through.
        paths = page.page.locator("g.edge path").evaluate_all("ps => ps.map(p => p.getAttribute('d'))")
        assert len(paths) == len(template["edges"]) and all(d.startswith("M") and "C" in d for d in paths)
        assert page.page.locator("g.edge polygon").count() == len(template["edges"])
        longest = max(len(route) for route in template["layout"]["routes"])
        assert max(d.count("C") for d in paths) >= longest  # a read down the trunk is drawn along all of it
        # Expanded, a concatenation traces up along the bus: more edges light than the boxed level has.
        page.page.keyboard.press("e")
        page.page.locator("g.node", has_text="CatBackward0").last.click()
        assert page.page.locator("g.edge.up").count() > len(template["edges"])
        assert page.errors == []



def test_the_colour_menu_lists_the_overlays_a_static_drawing_colours_by(browser, tmp_path):
    # A measured step (a profile) is one more overlay: listed, rolled up as a sum onto a
    # folded block, and shown in the module table, with no code of its own on the page.
    from graphviz_autograd import Overlay, walk

    logits, recorder = tiny_gpt2(4)
    graph = walk(logits, recorder=recorder, collect_shapes=True, collect_saved=True)
    ops = [n.id for n in graph.nodes if n.kind == "op" and n.module.startswith("transformer.h.")]
    timing = Overlay("backward_time", "backward time", dict.fromkeys(ops, 1e-3), rollup="sum", unit="s")
    with Page(browser, explore(graph, overlays=[timing]).save(tmp_path / "timed.html")) as page:
        options = page.page.locator("#metric option").all_text_contents()
        assert options == ["nothing", "saved for backward (sum)", "backward time (sum)"]
        page.page.select_option("#metric", "backward_time")
        legend = page.page.locator("#legend").text_content()
        assert "backward time" in legend and "summed over a module" in legend
        page.page.click("#table-button")
        header = page.page.locator("#table-columns").text_content()
        assert "backward time" in header
        transformer_row = page.page.locator("#table-rows tr", has_text="GPT2Model").first.text_content()
        total = len(ops) * 1e-3  # every op of the blocks is inside the transformer
        assert (f"{total:.2f} s" if total >= 1 else f"{total * 1e3:.2f} ms") in transformer_row
        assert page.errors == []
