"""Graphs PyTorch users actually hit: each one walks and draws, or fails with NoGraphError.

Every DOT drawn here also goes through Graphviz, which must accept it.
"""

from __future__ import annotations

import re
import warnings

import pytest
import torch
from torch import nn

from graphviz_autograd import NoGraphError, make_dot, walk
from graphviz_autograd.graph.autograd_graph import ACCUMULATE_GRAD, CUT, LEAF, NO_GRAD, OP, OUTPUT, PARAMETER, SAVED


def kinds_and_labels(graph):
    return [(n.kind, n.label) for n in graph.nodes]


def ops(graph):
    return [n.label for n in graph.nodes if n.kind == OP]


def shown(nodes):
    """The text lines of every drawn node, as a set of tuples."""
    return {tuple(n.lines) for n in nodes.values()}


def drawn(graphviz_svg, outputs, params=None, **options):
    """The DOT of ``outputs`` and its nodes as Graphviz drew them (node count checked)."""
    source = make_dot(outputs, params, **options).source
    nodes = graphviz_svg(source)
    assert len(nodes) == len(re.findall(r"^\tn\d+ \[", source, re.MULTILINE))
    return source, nodes


# --- nothing to draw -------------------------------------------------------------


def test_output_without_grad_fn_raises_no_graph_error_that_says_why_and_what_to_do():
    with pytest.raises(NoGraphError, match=r"no autograd graph.*torch\.no_grad\(\).*Call it on the loss"):
        walk(torch.ones(3))


def test_output_computed_under_no_grad_raises_no_graph_error():
    w = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        y = (w * 2).sum()
    with pytest.raises(NoGraphError, match="requires_grad=False and no grad_fn"):
        make_dot(y, {"w": w})


def test_output_of_integer_dtype_names_the_dtype():
    with pytest.raises(NoGraphError, match="its dtype is int64"):
        walk(torch.arange(3))


def test_output_from_inference_mode_says_so():
    with torch.inference_mode():
        y = torch.ones(2) * 2
    with pytest.raises(NoGraphError, match=r"inference_mode\(\)"):
        walk(y)


def test_several_outputs_without_graph_are_each_named():
    with pytest.raises(NoGraphError, match=r"none of the 2 output tensors.*logits: .*loss: "):
        walk({"logits": torch.ones(2), "loss": torch.zeros(())})


def test_container_without_tensors_says_what_it_got():
    with pytest.raises(NoGraphError, match="an empty list"):
        walk([])
    with pytest.raises(NoGraphError, match="a dict that holds no tensor"):
        walk({"a": 1, "b": "text"})


def test_outputs_without_graph_are_skipped_beside_one_that_has_one():
    w = torch.ones(2, requires_grad=True)
    graph = walk({"detached": w.detach() * 2, "y": w * 2}, {"w": w})
    assert [n.label for n in graph.nodes if n.kind == OUTPUT] == ["y"]


# --- leaves, views, freed buffers ------------------------------------------------


def test_leaf_output_is_an_output_node_fed_by_its_parameter(graphviz_svg):
    w = torch.ones(3, requires_grad=True)
    graph = walk(w, {"w": w})
    assert kinds_and_labels(graph) == [(OUTPUT, ""), (PARAMETER, "w")]
    assert [(e.source, e.target) for e in graph.edges] == [("n1", "n0")]
    _, nodes = drawn(graphviz_svg, w, {"w": w})
    assert nodes["n0"].lines == ["(3)"]
    assert nodes["n1"].lines == ["w", "(3)"]


def test_unnamed_leaf_output_is_fed_by_a_leaf_node():
    w = torch.ones(3, requires_grad=True)
    assert kinds_and_labels(walk(w)) == [(OUTPUT, ""), (LEAF, "")]


def test_view_of_a_leaf_walks_through_the_view_op_to_the_leaf(graphviz_svg):
    w = torch.ones(3, requires_grad=True)
    view = w.view(3, 1)[0]
    graph = walk(view, {"w": w})
    assert ops(graph) == ["SelectBackward0", "ViewBackward0"]
    assert [n.label for n in graph.nodes if n.kind == PARAMETER] == ["w"]
    assert graph.nodes[0].shape == (1,)
    drawn(graphviz_svg, view, {"w": w})


def test_in_place_write_into_a_view_shows_copy_slices(graphviz_svg):
    w = torch.ones(3, requires_grad=True)
    y = w * 1
    y[0].mul_(2)  # autograd rebases y's history onto CopySlices
    graph = walk(y.sum(), {"w": w})
    assert "CopySlices" in ops(graph)
    drawn(graphviz_svg, y.sum(), {"w": w}, show_attrs=True, show_saved=True)


def test_graph_freed_by_backward_draws_freed_buffers_instead_of_raising(graphviz_svg):
    x = torch.randn(3, requires_grad=True)
    loss = (x.exp() * x).sum()
    loss.backward()
    source, nodes = drawn(graphviz_svg, loss, {"x": x}, show_attrs=True, show_saved=True)
    saved = [n for n in walk(loss, {"x": x}, collect_saved=True).nodes if n.kind == SAVED]
    assert saved and all(n.note == "freed" for n in saved)
    assert nodes[saved[0].id].lines[-1] == "[freed]"
    exp_node = next(n for n in nodes.values() if n.lines[0] == "ExpBackward0")
    assert "result: [freed]" in exp_node.lines


def test_saved_tensor_modified_in_place_is_named_so_not_called_freed(graphviz_svg):
    x = torch.randn(3, requires_grad=True)
    y = (x * 1).exp()  # ExpBackward0 saves its result, y
    y.add_(1)  # which backward() would now refuse
    graph = walk(y.sum(), collect_saved=True)
    exp = next(n for n in graph.nodes if n.label == "ExpBackward0")
    assert dict(exp.attrs) == {"result": "[modified in place]"}
    assert [n.note for n in graph.nodes if n.kind == SAVED and n.label == "result"] == ["modified in place"]
    _, nodes = drawn(graphviz_svg, y.sum(), show_attrs=True, show_saved=True)
    assert ("result", "[modified in place]") in shown(nodes)


class _Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor):
        ctx.save_for_backward(x)
        ctx.factor = factor
        return x * factor

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * ctx.factor, None


def test_custom_function_after_backward_shows_its_saved_tensors_freed(graphviz_svg):
    x = torch.randn(2, requires_grad=True)
    y = _Scale.apply(x, 3.0).sum()
    y.backward()
    graph = walk(y, collect_saved=True)
    scale = next(n for n in graph.nodes if n.label == "_ScaleBackward")
    assert dict(scale.attrs) == {"saved_tensors": "[freed]", "factor": "3.0"}
    _, nodes = drawn(graphviz_svg, y, show_attrs=True, show_saved=True)
    assert "saved_tensors: [freed]" in next(n.lines for n in nodes.values() if n.lines[0] == "_ScaleBackward")


def test_custom_function_before_backward_draws_its_saved_tensor():
    x = torch.randn(2, requires_grad=True)
    y = _Scale.apply(x, 3.0).sum()
    graph = walk(y, collect_saved=True)
    scale = next(n for n in graph.nodes if n.label == "_ScaleBackward")
    assert dict(scale.attrs) == {"saved_tensors": "[saved tensors]", "factor": "3.0"}
    assert [(n.label, n.shape) for n in graph.nodes if n.kind == SAVED] == [("saved_tensors[0]", (2,))]


def test_walking_twice_gives_the_same_dot_before_and_after_backward():
    x = torch.randn(3, requires_grad=True)
    loss = (x * x).sum()
    before = make_dot(loss, {"x": x}).source
    loss.backward()
    assert make_dot(loss, {"x": x}).source == before


# --- dtypes, layouts, devices ----------------------------------------------------


def test_zero_dim_tensors_show_an_empty_shape(graphviz_svg):
    scale = torch.tensor(2.0, requires_grad=True)
    out = scale * 3
    graph = walk(out, {"scale": scale})
    (parameter,) = [n for n in graph.nodes if n.kind == "parameter"]
    assert graph.nodes[0].shape == () and parameter.shape == ()
    _, nodes = drawn(graphviz_svg, out, {"scale": scale})
    assert nodes["n0"].lines == ["()"]
    assert nodes[parameter.id].lines == ["scale", "()"]


def test_complex_tensors_show_their_dtype(graphviz_svg):
    z = torch.randn(3, dtype=torch.complex64, requires_grad=True)
    out = (z * z).sum()
    _, nodes = drawn(graphviz_svg, out, {"z": z}, show_saved=True)
    assert nodes["n0"].lines == ["() complex64"]
    assert ("z", "(3) complex64") in shown(nodes)
    assert ("other", "(3) complex64") in shown(nodes)  # z, saved by z * z


def test_real_loss_of_complex_parameters(graphviz_svg):
    z = torch.randn(3, dtype=torch.complex64, requires_grad=True)
    out = (z * z).abs().sum()
    _, nodes = drawn(graphviz_svg, out, {"z": z})
    assert nodes["n0"].lines == ["()"]
    assert "AbsBackward0" in ops(walk(out, {"z": z}))


def test_sparse_leaf_draws_with_its_dense_shape(graphviz_svg):
    s = torch.randn(3, 3).to_sparse().requires_grad_()
    out = torch.sparse.sum(s * 2)
    _, nodes = drawn(graphviz_svg, out, {"s": s}, show_attrs=True, show_saved=True)
    assert ("s", "(3, 3) float32 sparse_coo") in shown(nodes)  # the layout is said


def test_sparse_output(graphviz_svg):
    s = torch.randn(2, 4).to_sparse().requires_grad_()
    out = s * 2
    assert out.is_sparse
    _, nodes = drawn(graphviz_svg, out, {"s": s})
    assert nodes["n0"].lines == ["(2, 4) float32 sparse_coo"]


def test_strided_nested_tensor_output_has_unknown_shape(graphviz_svg):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "nested tensors are a prototype"
        nt = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)], requires_grad=True)
    out = nt * 2
    _, nodes = drawn(graphviz_svg, out, {"nt": nt}, show_attrs=True, show_saved=True)
    assert nodes["n0"].lines == ["(shape unknown) float32 nested"]
    assert ("nt", "(shape unknown) float32 nested") in shown(nodes)


def test_jagged_nested_tensor_with_a_symbolic_dimension_has_unknown_shape(graphviz_svg):
    nt = torch.nested.nested_tensor(
        [torch.randn(2, 3), torch.randn(4, 3)], layout=torch.jagged, requires_grad=True
    )
    out = {"features": (nt.sin() * nt).cos(), "total": nt.values().sum()}
    graph = walk(out, {"nt": nt}, collect_saved=True)
    outputs = [(n.label, n.shape) for n in graph.nodes if n.kind == OUTPUT]
    assert outputs == [("features", None), ("total", ())]
    drawn(graphviz_svg, out, {"nt": nt}, show_attrs=True, show_saved=True)


def test_meta_tensors_walk_without_data_and_show_the_device_only_when_asked(graphviz_svg):
    model = nn.Linear(3, 2).to("meta")
    out = model(torch.randn(4, 3, device="meta")).sum()
    plain = make_dot(out, model, show_attrs=True, show_saved=True).source
    assert "meta" not in plain
    _, nodes = drawn(graphviz_svg, out, model, show_attrs=True, show_saved=True, show_device=True)
    assert nodes["n0"].lines == ["() meta"]
    assert ("weight", "(2, 3) meta") in shown(nodes) and ("bias", "(2) meta") in shown(nodes)


def test_the_same_model_on_another_device_draws_the_same_dot():
    # What a golden file compares: CPU here, meta standing in for CUDA.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    on_cpu = make_dot(model(torch.randn(2, 3)).sum(), model, show_attrs=True, show_saved=True).source
    model.to("meta")
    on_meta = make_dot(model(torch.randn(2, 3, device="meta")).sum(), model, show_attrs=True, show_saved=True).source
    assert on_meta == on_cpu


def test_device_is_not_in_the_dot_unless_asked():
    w = torch.ones(2, requires_grad=True)
    assert "cpu" not in make_dot((w * 2).sum(), {"w": w}).source
    assert "(2) cpu" in make_dot((w * 2).sum(), {"w": w}, show_device=True).source


# --- forward passes that mix no_grad ---------------------------------------------


class _HalfFrozen(nn.Module):
    """A forward with a torch.no_grad() block whose result feeds the trained part."""

    def __init__(self):
        super().__init__()
        self.frozen = nn.Linear(3, 3)
        self.head = nn.Linear(3, 1)
        self.skip = nn.Linear(3, 1)

    def forward(self, x):
        with torch.no_grad():
            features = self.frozen(x).relu()
        return self.head(features) + self.skip(x)


def test_no_grad_block_appears_as_a_dashed_no_grad_input_of_the_op_that_consumed_it(graphviz_svg):
    torch.manual_seed(0)
    model = _HalfFrozen()
    out = model(torch.randn(2, 3)).sum()
    graph = walk(out, model)
    names = [n.label for n in graph.nodes if n.kind == PARAMETER]
    assert sorted(names) == ["head.bias", "head.weight", "skip.bias", "skip.weight"]
    addmm = [n.id for n in graph.nodes if n.label == "AddmmBackward0"]
    cuts = [e for e in graph.edges if e.kind == CUT]
    # head's matrix product got `features` (no grad) and skip's got `x` (an input): both cut
    assert sorted(e.target for e in cuts) == sorted(addmm)
    assert all(graph.node(e.source).kind == NO_GRAD for e in cuts)

    source, nodes = drawn(graphviz_svg, out, model)
    for edge in cuts:
        assert f"\t{edge.source} -> {edge.target} [color=gray40 style=dashed]\n" in source
        assert nodes[edge.source].lines == ["no grad"]
    hidden = make_dot(out, model, show_no_grad=False).source
    assert "no grad" not in hidden and "dashed" not in hidden


def test_accumulate_grad_sits_between_each_parameter_and_its_consumer():
    model = nn.Linear(2, 1)
    graph = walk(model(torch.randn(1, 2)).sum(), model)
    for param in (n for n in graph.nodes if n.kind == PARAMETER):
        (edge,) = [e for e in graph.edges if e.source == param.id]
        assert graph.node(edge.target).kind == ACCUMULATE_GRAD
