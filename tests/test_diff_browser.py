"""The explorer page of a diff in a real browser: coloured by change from the start, the
changes listed to step through, opened at the first (Chromium, as test_explore_browser)."""

from __future__ import annotations

from torch import nn

from graphviz_autograd import diff, explore

from . import diff_models as models
from .test_explore_browser import Page, browser  # noqa: F401 (a fixture)


def test_a_diff_page_opens_at_the_changes_with_a_list_to_step_through(browser, tmp_path):  # noqa: F811
    found = diff(models.resnet_graph(models.resnet()), models.resnet_graph(models.resnet(act=nn.GELU, blocks=3)))
    path = explore(found.merged, overlays=[found.overlay()], title="diff").save(tmp_path / "diff.html")
    with Page(browser, path, at_top=False) as page:  # where the page opens is what is tested
        assert page.errors == []
        assert page.page.eval_on_selector("#metric", "select => select.value") == "diff"
        entries = page.page.locator("#hits button").all_text_contents()
        # Each block's GELU where its ReLU was (two), and the third block, added whole (one).
        assert len(entries) == 3 and page.page.text_content("#hits-title").startswith("3 changes")
        assert any(entry.startswith("layers.2") for entry in entries)
        # It opened at the first change, coloured by its state.
        assert page.page.evaluate("location.hash") != ""
        assert page.page.locator("g.node.diff-changed").count() >= 1
        # A changed node's details say what it was.
        page.page.locator("#hits button", has_text="GeluBackward0").first.click()
        assert "changed: op ReluBackward0 -> GeluBackward0" in page.page.text_content("#details")
        # Stepping to the block added shows it in the added colour.
        page.page.locator("#hits button", has_text="layers.2").click()
        assert page.page.locator("g.node.diff-added").count() >= 1
        assert page.errors == []
