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
