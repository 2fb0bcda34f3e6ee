"""The walk: structure, names, errors, and that nothing of the user's is kept."""

from __future__ import annotations

import gc
import weakref
from collections import Counter

import pytest
import torch
from torch import nn

from graphviz_autograd import InputTypeError, NoGraphError, to_dot, walk
from graphviz_autograd.capture import deep_graphs
from graphviz_autograd.graph.autograd_graph import ACCUMULATE_GRAD, ALSO_NAMED, AutogradGraph, CUT, LEAF, NO_GRAD, OP, OUTPUT, PARAMETER, SAVED, SAVED_BY, op_constants

from .graph_cases import CASES


def labels(graph, kind=OP):
    return Counter(n.label for n in graph.nodes_of_kind(kind))


def edges_into(graph, node_id):
    return [e for e in graph.edges if e.target == node_id]


def test_ids_follow_walk_order_and_every_edge_joins_known_nodes():
    graph = walk(CASES["multiple_outputs"]().outputs)
    assert [n.id for n in graph.nodes] == [f"n{i}" for i in range(len(graph.nodes))]
    ids = {n.id for n in graph.nodes}
    assert all(e.source in ids and e.target in ids for e in graph.edges)


def test_tutorial_affine_graph_has_three_leaves_two_ops():
    x, w, b = (torch.tensor([v], requires_grad=True) for v in (1.0, 4.0, 0.5))
    graph = walk(w * x + b, {"x": x, "w": w, "b": b})
    assert labels(graph) == Counter({"AddBackward0": 1, "MulBackward0": 1})
    assert sorted(n.label for n in graph.nodes_of_kind(PARAMETER)) == ["b", "w", "x"]
    assert len(list(graph.nodes_of_kind(ACCUMULATE_GRAD))) == 3
    assert [n.shape for n in graph.nodes_of_kind(OUTPUT)] == [(1,)]


def test_diamond_shares_one_node():
    graph = walk(CASES["diamond"]().outputs)
    assert labels(graph)["MulBackward0"] == 1
    mul = next(n for n in graph.nodes if n.label == "MulBackward0")
    consumers = {graph.node(e.target).label for e in graph.edges if e.source == mul.id}
    assert consumers == {"SinBackward0", "CosBackward0"}


def test_same_input_used_twice_draws_two_edges():
    x = torch.randn(2, requires_grad=True)
    graph = walk(x * x)
    mul = next(graph.nodes_of_kind(OP))
    assert len(edges_into(graph, mul.id)) == 2
    assert len(list(graph.nodes_of_kind(ACCUMULATE_GRAD))) == 1


def test_every_none_slot_of_a_tensor_becomes_its_own_no_grad_input_and_a_number_joins_its_op():
    x = torch.randn(3, requires_grad=True)
    constant = torch.randn(3)
    detached = torch.randn(3, requires_grad=True).detach()
    with torch.no_grad():
        made_without_grad = torch.randn(3) * 2
    y = x * constant + x * detached + x * made_without_grad + x * 2 + x * torch.tensor(0.5)
    graph = walk(y)
    cuts = list(graph.nodes_of_kind(NO_GRAD))
    assert len(cuts) == 3  # the tensors; the numbers 2 and 0.5 are no inputs of their own
    for cut in cuts:
        (edge,) = [e for e in graph.edges if e.source == cut.id]
        assert edge.kind == CUT and graph.node(edge.target).label == "MulBackward0"
    muls = [n for n in graph.nodes if n.label == "MulBackward0"]
    assert sorted(tuple(op_constants(n)) for n in muls) == [(), (), (), ("0.5",), ("2",)]
    assert all(not [e for e in graph.edges if e.target == n.id and e.kind == CUT] for n in muls if op_constants(n))


def test_a_number_beside_a_detached_tensor_joins_its_op_while_the_tensor_keeps_its_box():
    x = torch.randn(3, requires_grad=True)
    detached = torch.randn(3, requires_grad=True).detach()
    graph = walk((x * 1.0001) * detached)
    (cut,) = graph.nodes_of_kind(NO_GRAD)
    (edge,) = [e for e in graph.edges if e.source == cut.id]
    assert edge.kind == CUT
    assert [op_constants(n) for n in graph.nodes if n.label == "MulBackward0"] == [[], ["1.0001"]]
    assert "with 1.0001" in to_dot(graph) and "no grad" in to_dot(graph)


def test_a_number_the_op_did_not_save_keeps_its_box_without_a_recorder():
    # AddBackward0 keeps no operand: x + 1e-6 and x + a cut-off tensor look alike to the walk.
    x = torch.randn(3, requires_grad=True)
    graph = walk(x + 1e-6)
    assert len(list(graph.nodes_of_kind(NO_GRAD))) == 1


def test_multiple_outputs_are_named_by_key_and_share_the_graph():
    graph = walk(CASES["multiple_outputs"]().outputs)
    assert [n.label for n in graph.nodes_of_kind(OUTPUT)] == ["logits", "extra.first"]
    relu = [n for n in graph.nodes if n.label == "ReluBackward0"]
    assert len(relu) == 1


def test_nested_names_cover_lists_tuples_and_odd_keys():
    x = torch.randn(1, requires_grad=True)
    graph = walk({"a": [x * 1, (x * 2, "skip me")], 3: x * 3, "not an id": x * 4})
    assert [n.label for n in graph.nodes_of_kind(OUTPUT)] == ["a[0]", "a[1][0]", "[3]", "['not an id']"]


def test_model_output_dict_like_is_walked_by_key():
    transformers = pytest.importorskip("transformers")
    output = transformers.modeling_outputs.BaseModelOutput(last_hidden_state=torch.randn(2, requires_grad=True) * 2)
    graph = walk(output)
    assert [n.label for n in graph.nodes_of_kind(OUTPUT)] == ["last_hidden_state"]


def test_outputs_without_graph_beside_ones_with_are_skipped():
    x = torch.randn(2, requires_grad=True)
    graph = walk({"loss": (x * 2).sum(), "count": torch.tensor(3), "frozen": torch.ones(2)})
    assert [n.label for n in graph.nodes_of_kind(OUTPUT)] == ["loss"]


def test_leaf_output_is_fed_by_its_leaf_node():
    graph = walk(CASES["leaf_output"]().outputs, None)
    first = next(graph.nodes_of_kind(OUTPUT))
    (edge,) = edges_into(graph, first.id)
    assert graph.node(edge.source).kind == LEAF
    # The same leaf also feeds AccumulateGrad for the second output: one node for it.
    assert len(list(graph.nodes_of_kind(LEAF))) == 1


def test_params_as_module_names_parameters_and_flags_strays():
    graph = walk(CASES["unnamed_leaf"]().outputs, CASES["unnamed_leaf"]().params)
    case = CASES["unnamed_leaf"]()
    graph = walk(case.outputs, case.params)
    assert {n.label for n in graph.nodes_of_kind(PARAMETER)} == {"0.weight", "0.bias", "2.weight", "2.bias"}
    assert [n.shape for n in graph.nodes_of_kind(LEAF)] == [(2,)]
    assert graph.params_given


def test_params_as_named_parameters_iterator():
    model = nn.Linear(2, 1)
    graph = walk(model(torch.randn(1, 2)).sum(), model.named_parameters())
    assert {n.label for n in graph.nodes_of_kind(PARAMETER)} == {"weight", "bias"}


def test_tied_weights_take_the_first_name():
    model = nn.Module()
    model.embed = nn.Embedding(5, 3)
    model.head = nn.Linear(3, 5, bias=False)
    model.head.weight = model.embed.weight
    out = model.head(model.embed(torch.tensor([1, 2])))
    graph = walk(out.sum(), model)
    assert [n.label for n in graph.nodes_of_kind(PARAMETER)] == ["embed.weight"]


def test_without_params_leaves_are_unnamed_but_not_flagged():
    graph = walk(CASES["diamond"]().outputs)
    assert not graph.params_given
    assert [n.label for n in graph.nodes_of_kind(LEAF)] == [""]


@pytest.mark.parametrize(
    "params, message",
    [
        ("weights", "params must be a dict"),
        (torch.ones(1), "params must be a dict"),
        ({"w": 3.0}, "params['w'] is a float, not a tensor"),
        ([1, 2], "params must be a dict"),
    ],
)
def test_bad_params_say_what_to_pass(params, message):
    x = torch.randn(1, requires_grad=True)
    with pytest.raises(InputTypeError, match=message.replace("[", r"\[").replace("]", r"\]")) as info:
        walk(x * 2, params)
    assert "named_parameters" in str(info.value)
    assert isinstance(info.value, TypeError)


def test_custom_function_node_is_named_by_its_class():
    graph = walk(CASES["custom_function"]().outputs)
    assert "ScaledSquareBackward" in labels(graph)


def test_custom_function_saved_tensor_and_ctx_attributes():
    case = CASES["custom_function_saved"]()
    graph = walk(case.outputs, case.params, collect_saved=True)
    node = next(n for n in graph.nodes if n.label == "ScaledSquareBackward")
    assert dict(node.attrs) == {"saved_tensors": "[saved tensors]", "scale": "0.5"}
    (saved,) = graph.nodes_of_kind(SAVED)
    assert saved.label == "saved_tensors[0]" and saved.shape == (3,)
    assert any(e.kind == SAVED_BY and e.source == node.id and e.target == saved.id for e in graph.edges)


def test_in_place_on_a_slice_shows_copy_slices_and_as_strided():
    graph = walk(CASES["inplace_and_views"]().outputs)
    found = labels(graph)
    assert found["CopySlices"] >= 1 and found["AsStridedBackward0"] >= 1


def test_double_backward_draws_the_gradients_graph():
    graph = walk(CASES["double_backward"]().outputs)
    # d/dx x**3 = 3 x**2: the gradient's graph goes back through PowBackward0 to x.
    assert labels(graph)["PowBackward0"] == 1
    assert len(list(graph.nodes_of_kind(LEAF))) == 1


def test_checkpoint_graphs_walk_and_backward_still_works():
    case = CASES["checkpointed"]()
    graph = walk(case.outputs, case.params, collect_saved=True)
    assert "CheckpointFunctionBackward" in labels(graph)
    # Reading saved values must not break the user's own backward afterwards.
    (case.outputs["non_reentrant"] + case.outputs["reentrant"]).backward()
    assert all(p.grad is not None for p in case.params.parameters())


def test_saved_values_after_backward_read_as_freed():
    case = CASES["after_backward"]()
    graph = walk(case.outputs, case.params, collect_saved=True)
    pow_node = next(n for n in graph.nodes if n.label == "PowBackward0")
    assert dict(pow_node.attrs) == {"exponent": "2", "self": "[freed]"}
    assert {n.note for n in graph.nodes_of_kind(SAVED)} == {"freed"}


def test_saved_values_before_backward_have_shapes():
    case = CASES["saved_attrs"]()
    graph = walk(case.outputs, case.params, collect_saved=True)
    shapes = {n.label: n.shape for n in graph.nodes_of_kind(SAVED)}
    assert shapes["result"] == (2, 8)  # ReluBackward0 saves its output


def test_a_tensor_saved_by_two_ops_is_one_node():
    x = torch.randn(3, requires_grad=True)
    y = x.exp()  # ExpBackward0 saves its result, y
    z = (y * y).sum()  # MulBackward0 saves y twice, as self and other
    graph = walk(z, collect_saved=True)
    assert len(list(graph.nodes_of_kind(SAVED))) == 2  # y seen by Mul (once) and Exp's own result


def test_meta_tensors_walk_without_data():
    case = CASES["meta_tensors"]()
    graph = walk(case.outputs, case.params)
    assert {n.device for n in graph.nodes_of_kind(PARAMETER)} == {"meta"}


def test_dtypes_are_recorded():
    case = CASES["dtypes"]()
    graph = walk(case.outputs, case.params)
    assert {n.label: n.dtype for n in graph.nodes_of_kind(PARAMETER)} == {"w": "float64", "c": "complex64"}


def test_a_million_op_chain_walks_without_recursion_and_frees_without_crashing():
    # Far past both Python's recursion limit (torchviz stops near 1,000 ops) and the C
    # stack's (freeing 60,000 wrapped nodes recursively crashes; see deep_graphs).
    ops = 1_000_000
    x = torch.ones(1, requires_grad=True)
    marker = torch.randn(1)
    marker_ref = weakref.ref(marker)
    y = x * marker  # MulBackward0 saves marker: it lives exactly as long as the graph
    del marker
    for _ in range(ops):
        y = y * 1.0
    graph = walk(y)
    # output + the ops + marker's input + AccumulateGrad + leaf (each 1.0 is part of its op);
    # read from the columns, since building a million Node records would take most of the test's time
    contents, links = graph.columns(fill_ids=False).contents, graph.columns(fill_ids=False).links
    assert len(contents) == 1 + (ops + 1) + 1 + 2
    assert sum(1 for content in contents if content[0] == OP) == ops + 1
    assert len(links) == len(contents) - 1  # a chain: one edge into each node but the output
    dot = to_dot(graph)
    assert dot.count("\n") == len(contents) + len(links) + 4  # braces, graph and node defaults
    del dot
    assert gc.isenabled()
    # Freeing a deep graph whose nodes have Python wrappers recurses in PyTorch and
    # overflows the C stack; deep_graphs frees it node by node instead.
    del y
    gc.collect()
    assert marker_ref() is None and deep_graphs.held_count() == 0


def test_walk_keeps_no_reference_to_user_tensors():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    x = torch.randn(2, 3, requires_grad=True)
    hidden = model[1](model[0](x))
    loss = model[2](hidden).sum()
    refs = [weakref.ref(t) for t in (x, hidden, loss, model[0].weight)]
    graph = walk({"loss": loss}, model, collect_saved=True)
    del model, x, hidden, loss
    gc.collect()
    assert [r() for r in refs] == [None] * 4
    assert len(graph.nodes) > 5  # the plain data outlives the tensors


@pytest.mark.parametrize(
    "outputs, expected",
    [
        (torch.ones(2), "requires_grad=False and no grad_fn"),
        (torch.ones(2, dtype=torch.long), "dtype is int64"),
        ([], "got an empty list"),
        ({"a": 1}, "a dict that holds no tensor"),
        (3.5, "got a value of type float"),
    ],
)
def test_no_graph_is_a_clear_error(outputs, expected):
    with pytest.raises(NoGraphError, match=expected) as info:
        walk(outputs)
    assert str(info.value).startswith("Nothing to draw") and "Call it on the loss" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_no_graph_under_no_grad_and_inference_mode():
    model = nn.Linear(2, 1)
    with torch.no_grad():
        out = model(torch.randn(1, 2))
    with pytest.raises(NoGraphError, match="torch.no_grad"):
        walk(out)
    with torch.inference_mode():
        out = model(torch.randn(1, 2))
    with pytest.raises(NoGraphError, match="inference_mode"):
        walk(out)


def test_no_graph_with_several_outputs_names_each():
    with pytest.raises(NoGraphError, match=r"none of the 2 output tensors.*a: .*b: ") as info:
        walk({"a": torch.ones(1), "b": torch.zeros(1, dtype=torch.int32)})
    assert "int32" in str(info.value)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_walk_without_copying_to_host(monkeypatch):
    model = nn.Linear(4, 2).cuda()
    out = model(torch.randn(3, 4, device="cuda")).sum()

    def no_host_copy(*args, **kwargs):
        raise AssertionError("the walk copied a tensor to the host")

    monkeypatch.setattr(torch.Tensor, "cpu", no_host_copy)
    monkeypatch.setattr(torch.Tensor, "item", no_host_copy)
    monkeypatch.setattr(torch.Tensor, "tolist", no_host_copy)
    graph = walk(out, model, collect_saved=True)
    assert {n.device for n in graph.nodes_of_kind(PARAMETER)} == {"cuda:0"}
    assert all(n.device == "cuda:0" for n in graph.nodes_of_kind(SAVED))



# A case built with a recorder is walked with it too.
_REPEATED_READS_WALKS = [(name, mode) for name in sorted(CASES) for mode in ("plain", "saved and shapes", "recorded")
                         if mode != "recorded" or name.startswith(("recorded_", "gpt2_"))]


@pytest.mark.parametrize("name, mode", _REPEATED_READS_WALKS)
def test_a_walked_graph_knows_its_repeated_reads_as_counting_them_finds(name, mode):
    # The split of shared parameters and the junctions skip counting each node's reads
    # on the walk's word: a wrong word would leave a shared weight or a fan-in undrawn.
    built = CASES[name]()
    recorder = built.options.get("recorder") if mode == "recorded" else None
    assert recorder is not None or mode != "recorded"
    kwargs = dict(collect_saved=True, collect_shapes=True) if mode == "saved and shapes" else {}
    graph = walk(built.outputs, built.params, recorder=recorder, **kwargs)
    sources = [edge.source for edge in graph.edges]
    counted = len(sources) - len(set(sources))
    assert graph.repeated_reads() == counted
    assert AutogradGraph(graph.nodes, graph.edges).repeated_reads() == counted


def test_a_deep_chain_and_a_weight_read_at_every_step_know_their_repeated_reads():
    x = torch.ones(3, requires_grad=True)
    w = torch.ones(3, requires_grad=True)
    y = x
    for _ in range(3_000):
        y = y * w
    graph = walk({"y": y, "again": y, "x": x}, {"x": x, "w": w})
    sources = [edge.source for edge in graph.edges]
    # w's AccumulateGrad read 3,000 times, y's op by two outputs, x by its AccumulateGrad and an output.
    assert graph.repeated_reads() == len(sources) - len(set(sources)) == 2_999 + 1 + 1


def test_a_walked_graph_whose_outputs_are_read_once_each_is_drawn_without_counting_reads(monkeypatch):
    x = torch.ones(3, requires_grad=True)
    y = x
    for _ in range(50):
        y = (y * 2).sin()
    graph = walk(y, {"x": x})
    expected = to_dot(AutogradGraph(graph.nodes, graph.edges, params_given=True))  # counts its reads

    def counted(self):
        raise AssertionError("a walked chain counted the reads of its nodes")

    monkeypatch.setattr(AutogradGraph, "source_reads", counted)
    monkeypatch.setattr(AutogradGraph, "_count_repeated_reads", counted)
    assert to_dot(graph) == expected


class _TiedModel(nn.Module):
    """An embedding whose weight the output layer reads again, as GPT-2's lm_head does."""

    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(5, 3)
        self.lm_head = nn.Linear(3, 5, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.wte(ids))


def test_a_tied_weight_shows_every_name_it_goes_by():
    model = _TiedModel()
    out = model(torch.tensor([[1, 2]])).sum()
    graph = walk(out, model)
    (tied,) = [n for n in graph.nodes if n.kind == PARAMETER]
    assert tied.label == "wte.weight" and tied.attrs == ((ALSO_NAMED, "lm_head.weight"),)
    source = to_dot(graph)
    assert "wte.weight\\n= lm_head.weight\\n(5, 3)" in source and "also named lm_head.weight" in source
    # Named by a dict of named_parameters(), which drops the second name, it has one name only.
    (single,) = [n for n in walk(out, dict(model.named_parameters())).nodes if n.kind == PARAMETER]
    assert single.attrs == ()
