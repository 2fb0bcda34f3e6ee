"""Where a NaN or an infinity is born: find_nonfinite() on broken models and their healthy twins."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from graphviz_autograd import make_dot, record
from graphviz_autograd.capture.nonfinite_values import BackwardValues, call_name, forward_cause
from graphviz_autograd.checks.diagnosis import NONFINITE_FORWARD
from graphviz_autograd.checks.nonfinite_origin import NonfiniteFindings, find_nonfinite

from .nonfinite_models import CASES, LogNet, log_of_negative, nan_learning_rate


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_producer_is_named_by_code_op_module_and_cause(case):
    model, inputs, loss, optimizer = case.build(True)
    found = find_nonfinite(model, inputs, loss=loss, optimizer=optimizer)
    assert isinstance(found, NonfiniteFindings)
    first = found[0]
    assert (first.severity, first.code, first.subject) == ("error", case.code, case.subject), first.message
    assert case.words in first.message
    if case.module is not None and first.nodes:
        # On the graph, the finding points at the node of the producer, in its module.
        assert found.graph is not None
        assert found.graph.node(first.nodes[0]).module == case.module
    if case.module is not None and case.code != "nonfinite_forward" or case.subject == "torch.log":
        assert first.nodes, "the producer is on the graph"


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_healthy_twin_gives_no_finding(case):
    model, inputs, loss, optimizer = case.build(False)
    assert list(find_nonfinite(model, inputs, loss=loss, optimizer=optimizer)) == []


def test_the_op_that_made_the_nan_is_blamed_not_the_module_after_it():
    model, inputs, loss, _ = log_of_negative(True)
    found = find_nonfinite(model, inputs, loss=loss)
    assert [f.code for f in found] == [NONFINITE_FORWARD]
    graph = found.graph
    producer = graph.node(found[0].nodes[0])
    assert (producer.label, producer.module) == ("LogBackward0", "")
    carried = {graph.node(node_id).label for node_id in found.carriers}
    # l3's matmul, the ReLU after it, l4 and the loss only carried the NaN on.
    assert {"AddmmBackward0", "ReluBackward0", "PowBackward0", "MeanBackward0"} <= carried
    assert {graph.node(node_id).module for node_id in found.carriers} >= {"l3", "l4"}
    assert producer.id not in found.carriers
    assert "tests/nonfinite_models.py:" in found[0].message  # the user's line


class BatchedProjection(nn.Module):
    """A batch of sequences times a weight matrix with ``@``: torch runs it as a view, ``mm``
    and a view back, and the overflow happens in the ``mm``."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.full((8, 8), 1e20))

    def forward(self, x):
        return (x @ self.weight).sum()


def test_a_nan_born_in_a_batched_matmul_is_placed_at_its_mm_not_at_the_view_after_it():
    found = find_nonfinite(BatchedProjection(), torch.full((2, 5, 8), 1e20), loss=lambda out: out)
    producer = found.graph.node(found[0].nodes[0])
    assert producer.label == "MmBackward0"
    assert "matmul" in found[0].message


def test_the_overlay_draws_the_producer_red_and_the_carriers_orange():
    model, inputs, loss, _ = log_of_negative(True)
    found = find_nonfinite(model, inputs, loss=loss)
    source = make_dot(found.graph, overlays=[found.overlay()]).source
    producer = found[0].nodes[0]
    line = next(line for line in source.splitlines() if line.strip().startswith(f"{producer} ["))
    assert "color=red" in line and "LogBackward0" in line
    carrier = found.carriers[0]
    carrier_line = next(line for line in source.splitlines() if line.strip().startswith(f"{carrier} ["))
    assert "color=orange" in carrier_line
    assert "NaN/Inf born here" in source and "NaN/Inf carried on" in source


def test_the_step_leaves_the_model_its_gradients_and_the_optimizer_as_they_were():
    model, inputs, loss, _ = nan_learning_rate(False)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    model(inputs).sum().backward()
    optimizer.step()
    before = copy.deepcopy(model.state_dict())
    grads = {name: p.grad for name, p in model.named_parameters()}
    state = copy.deepcopy(optimizer.state_dict())
    find_nonfinite(model, inputs, loss=loss, optimizer=optimizer)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(p.grad is grads[name] for name, p in model.named_parameters())
    assert str(optimizer.state_dict()) == str(state)


def test_an_optimizer_step_that_makes_nan_from_finite_gradients_is_named():
    model, inputs, loss, _ = nan_learning_rate(False)
    optimizer = torch.optim.SGD(model.parameters(), lr=float("inf"))  # finite gradients times inf
    found = find_nonfinite(model, inputs, loss=loss, optimizer=optimizer)
    assert [f.code for f in found] == ["nonfinite_step"]
    assert "lr=inf" in found[0].message


def test_a_parameter_that_already_holds_nan_is_the_source():
    model = LogNet(1.0)
    with torch.no_grad():
        model.l2.weight[0, 0] = float("nan")
    found = find_nonfinite(model, torch.ones(2, 4), loss=lambda out: out.sum())
    assert found[0].subject == "l2.weight"
    assert "an earlier optimizer step (or code outside the forward pass) wrote it" in found[0].message


def test_gpt2_a_layer_norm_without_eps_on_constant_values():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=16, layer_norm_epsilon=0.0)
    model = transformers.GPT2LMHeadModel(config)
    with torch.no_grad():
        model.transformer.wte.weight.zero_()
        model.transformer.wpe.weight.zero_()
    ids = torch.arange(8).unsqueeze(0)
    found = find_nonfinite(model, {"input_ids": ids, "labels": ids}, loss=lambda out: out.loss)
    assert (found[0].code, found[0].subject) == (NONFINITE_FORWARD, "F.layer_norm")
    node = found.graph.node(found[0].nodes[0])
    assert (node.label, node.module) == ("NativeLayerNormBackward0", "transformer.h.0.ln_1")
    assert "eps = 0" in found[0].message


def test_backward_hooks_are_removed():
    w = torch.ones(3, requires_grad=True)
    out = torch.sqrt(w * 0).sum()
    values = BackwardValues([out.grad_fn])
    out.backward(retain_graph=True)
    assert values.producers and values.producers[0].op == "SqrtBackward0"
    values.remove()
    count = len(values.producers)
    out.backward()
    assert len(values.producers) == count


def test_words_of_causes_and_calls():
    assert call_name(torch.exp) == "torch.exp" and call_name(torch.Tensor.__truediv__) == "Tensor.__truediv__"
    nan = torch.tensor([float("nan")])
    assert forward_cause("sqrt", [torch.tensor([-2.0, 1.0])], [nan]) == "sqrt of a negative value: min \u22122"
    assert forward_cause("div", [torch.ones(2), torch.tensor([0.0, 3.0])], [nan]).startswith("division by zero")
    assert "0 to the power -1" == forward_cause("pow", [torch.zeros(1), -1.0], [torch.tensor([float("inf")])])


def test_record_with_nonfinite_keeps_no_tensor():
    import weakref

    model = LogNet(-0.5)
    x = torch.ones(2, 4)
    with record(model, nonfinite=True) as rec:
        out = model(x)
    assert rec.nonfinite is not None and rec.nonfinite.producers
    ref = weakref.ref(out)
    del out
    assert ref() is None


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="nn.Module"):
        find_nonfinite("model")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="step"):
        find_nonfinite(nn.Linear(2, 2), torch.ones(1, 2), step=lambda: None)


def test_the_benchmark_table_of_broken_models_runs():
    from benchmarks.nonfinite import cases_table

    rows = cases_table()
    named = [row for row in rows if row.startswith("| ") and not row.startswith("| broken")]
    assert len(named) == len(CASES)
    assert all(f"| {case.code}: {case.subject} |" in row for case, row in zip(CASES, named))
    assert rows[-1].strip().endswith("(tests/test_nonfinite.py holds it to that).")


def test_an_inf_the_model_makes_on_purpose_is_no_finding():
    from .nonfinite_models import MaskedAttention

    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(0))
    assert list(find_nonfinite(MaskedAttention(False), x, loss=lambda out: out.pow(2).mean())) == []


def test_the_producer_is_the_one_whose_nan_reaches_the_loss():
    from .nonfinite_models import MaskedAttention

    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(0))
    found = find_nonfinite(MaskedAttention(True), x, loss=lambda out: out.pow(2).mean())
    assert [(f.code, f.subject) for f in found] == [(NONFINITE_FORWARD, "torch.log")]
    labels = {found.graph.node(node_id).label for node_id in found.carriers}
    assert "MaskedFillBackward0" not in labels and "SoftmaxBackward0" not in labels
