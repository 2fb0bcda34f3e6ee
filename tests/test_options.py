"""Drawing options are checked once, in one place, and mean the same to every entry point."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from graphviz_autograd import OptionError, make_dot, render, to_dot
from graphviz_autograd.api import lay_out
from graphviz_autograd.options import DrawOptions, draw_options
from graphviz_autograd.views.prepared import prepare

from .module_graphs import gpt2_like


def test_to_dot_collapses_to_a_depth_as_make_dot_does():
    graph = gpt2_like(blocks=3)
    assert to_dot(graph, depth=1) == make_dot(graph, depth=1).source
    assert to_dot(graph, depth=1, fold_repeated=False) == make_dot(graph, depth=1, fold_repeated=False).source
    assert to_dot(graph, depth=1) != to_dot(graph)


def test_one_options_object_draws_what_the_keywords_draw():
    graph = gpt2_like(blocks=2)
    options = DrawOptions(direction="LR", show_shapes=True, legend=True, clusters=False)
    keywords = dict(direction="LR", show_shapes=True, legend=True, clusters=False)
    assert to_dot(graph, options) == to_dot(graph, **keywords) == make_dot(graph, **keywords).source
    assert to_dot(graph, options, direction="TB") == to_dot(graph, **dict(keywords, direction="TB"))
    assert lay_out(prepare(graph, options)).lines == lay_out(prepare(graph, **keywords)).lines


@pytest.mark.parametrize(
    "bad, named",
    [
        (dict(direction="up"), "direction"),
        (dict(layout="spring"), "layout"),
        (dict(depth=-1), "depth"),
        (dict(max_attr_chars=0), "max_attr_chars"),
        (dict(clusters="yes"), "clusters"),
        (dict(fold_repeated=1), "fold_repeated"),
        (dict(layout_budget=0), "layout_budget"),
        (dict(theme={"opp": "red"}), "theme"),
    ],
)
def test_a_bad_option_is_refused_before_the_graph_is_walked(bad, named):
    class Exploding(torch.Tensor):
        @property
        def grad_fn(self):  # reading the graph would mean the option was checked too late
            raise AssertionError("walked before the options were checked")

    with pytest.raises(OptionError, match=named):
        make_dot(torch.ones(1).as_subclass(Exploding), **bad)
    with pytest.raises(OptionError, match=named):
        DrawOptions(**bad)


def test_an_unknown_option_names_itself_and_the_known_ones():
    with pytest.raises(OptionError, match="unknown drawing option 'colour'.*show_attrs"):
        to_dot(gpt2_like(blocks=1), colour="red")
    with pytest.raises(OptionError, match="'colour'"):
        draw_options(colour="red")


def test_options_cannot_change_under_a_drawing(tmp_path):
    options = DrawOptions()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.direction = "LR"  # type: ignore[misc]
    x = torch.ones(2, requires_grad=True)
    out = render((x * 2).sum(), tmp_path / "g.dot", direction="LR")
    assert "rankdir=LR" in out.read_text()


# A value of the wrong type for each field: every field is checked, each once.
WRONG = {
    "show_attrs": "yes", "show_saved": 1, "max_attr_chars": 2.5, "direction": "up", "show_no_grad": None,
    "show_device": "no", "theme": 3, "legend": 3, "clusters": "yes", "show_shapes": 0, "split_shared": [],
    "depth": "deep", "fold_repeated": 1, "layout": "spring", "layout_budget": "10", "junctions": "on",
    "expand_limit": -1,
}


def test_every_field_is_checked_with_a_sentence_naming_it():
    fields = [field.name for field in dataclasses.fields(DrawOptions)]
    assert sorted(WRONG) == sorted(fields), "give each new field a wrong value here"
    for name, value in WRONG.items():
        with pytest.raises(OptionError, match=name) as raised:
            DrawOptions(**{name: value})
        message = str(raised.value)
        assert message.endswith(".") and (repr(value) in message or type(value).__name__ in message)
        with pytest.raises(OptionError, match=name):
            DrawOptions().replace(**{name: value})


def test_options_hold_nothing_derived_from_a_graph():
    # How close a long graph's ranks are set is the prepared view's to say.
    assert "compact" not in {field.name for field in dataclasses.fields(DrawOptions)}
    long_chain = gpt2_like(blocks=12)
    assert prepare(long_chain, fold_repeated=False, depth="full").compact is True
    assert prepare(gpt2_like(blocks=1)).compact is False


def test_the_command_line_spells_each_flag_as_the_api_keyword_and_keeps_the_old_spelling_hidden():
    from click.testing import CliRunner

    from graphviz_autograd.cli.commands import main

    shown = CliRunner().invoke(main, ["render", "--help"]).output
    for keyword in ("show_no_grad", "fold_repeated", "clusters", "show_shapes", "junctions", "split_shared",
                    "show_device", "max_attr_chars", "show_attrs", "show_saved", "expand_limit", "layout_budget"):
        assert "--" + keyword.replace("_", "-") in shown, keyword
    for old in ("--hide-no-grad", "--no-fold ", "--shapes "):
        assert old not in shown, old
