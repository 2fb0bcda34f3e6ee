"""Findings: each case yields exactly the findings it should, and they land on the right nodes."""

from __future__ import annotations

import math
import re

import pytest
import torch
from torch import nn

from graphviz_autograd import AutogradGraph, Edge, Finding, Node, OptionError, check, make_dot, record, walk
from graphviz_autograd.checks.diagnosis import gradient_norms, saved_bytes_by_module
from graphviz_autograd.graph.autograd_graph import ACCUMULATE_GRAD, CUT, LEAF, NO_GRAD, OP, OUTPUT, PARAMETER, SAVED, SAVED_BY, ModuleInfo


def summary(findings, with_info=True):
    return {(f.severity, f.code, f.subject) for f in findings if with_info or f.severity != "info"}


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)
        self.pooler = nn.Linear(4, 1)

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


def test_unused_head_is_a_warning_per_parameter():
    model = Backbone()
    loss = model(torch.randn(3, 4)).sum()
    assert summary(check(loss, model, top_memory=0)) == {
        ("warning", "unused_parameter", "pooler.weight"),
        ("warning", "unused_parameter", "pooler.bias"),
    }
    finding = check(loss, model, top_memory=0)[0]
    assert finding.nodes == () and "pooler (Linear)" in finding.message


class ListWeights(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.weights = [torch.ones(2, requires_grad=True)]  # not registered: the optimizer never sees it

    def forward(self, x):
        return self.fc(x) * self.weights[0]


def test_weight_in_a_plain_list_is_an_unregistered_leaf_error():
    model = ListWeights()
    x = torch.randn(1, 2)
    exam = check(model(x).sum(), model, inputs=(x,), top_memory=0)
    assert summary(exam) == {("error", "unregistered_leaf", "weights[0]")}
    (finding,) = exam
    kinds = {exam.graph.node(i).kind for i in finding.nodes}
    assert kinds == {PARAMETER, ACCUMULATE_GRAD}
    assert exam.graph.node(finding.nodes[0]).label == "weights[0]"
    assert "nn.Parameter" in finding.message and "ParameterList" in finding.message


def test_an_anonymous_leaf_is_flagged_only_when_params_are_given():
    w = nn.Parameter(torch.ones(2))
    stray = torch.ones(3, 2, requires_grad=True)
    loss = (stray @ w).sum()
    assert summary(check(loss, params={"w": w}, top_memory=0)) == {("error", "unregistered_leaf", "(unnamed (3, 2))")}
    assert check(loss, top_memory=0) == []


def test_a_leaf_made_in_forward_is_placed_in_the_module_that_first_used_it():
    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return self.fc(x) * nn.Parameter(torch.ones(4))  # a new leaf on every call

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Inner()

        def forward(self, x):
            return self.block(x).sum()

    model = Outer()
    with record(model) as rec:
        loss = model(torch.ones(2, 4))
    (finding,) = [f for f in check(loss, model, recorder=rec) if f.code == "unregistered_leaf"]
    assert finding.subject == "(unnamed (4))"
    assert "first used in the forward of block," in finding.message
    assert "make it an nn.Parameter of block in its __init__" in finding.message
    # The drawing puts it in that module's box too.
    graph = walk(loss, model, recorder=rec)
    assert [n.module for n in graph.nodes if n.kind == "leaf"] == ["block"]
    # Without a recorder nobody saw where it was made.
    (plain,) = [f for f in check(loss, model) if f.code == "unregistered_leaf"]
    assert "made in forward, or kept where the model's attributes do not reach" in plain.message


def test_an_input_that_requires_grad_is_not_a_stray_weight():
    model = nn.Linear(2, 1)
    x = torch.ones(1, 2, requires_grad=True)
    assert check(model(x).sum(), model, inputs={"x": x}, top_memory=0) == []


def test_frozen_backbone_is_info_not_unused():
    model = Backbone()
    model.body.requires_grad_(False)
    model.pooler.requires_grad_(False)
    loss = model(torch.randn(3, 4)).sum()
    assert summary(check(loss, model, top_memory=0)) == {
        ("info", "frozen_parameter", "body.weight"),
        ("info", "frozen_parameter", "body.bias"),
        ("info", "frozen_parameter", "pooler.weight"),
        ("info", "frozen_parameter", "pooler.bias"),
    }


def recorded_graph(*cuts: tuple[str, str, str]) -> AutogradGraph:
    """A loss over MulBackward0(fc.weight, cut, cut, ...), each cut a no_grad node (note, label, module)."""
    nodes = [
        Node("n0", OUTPUT, "loss", shape=()),
        Node("n1", OP, "MulBackward0", module="fc"),
        Node("n2", ACCUMULATE_GRAD, "AccumulateGrad", module="fc"),
        Node("n3", PARAMETER, "fc.weight", shape=(2,), module="fc"),
    ]
    edges = [Edge("n1", "n0"), Edge("n2", "n1"), Edge("n3", "n2")]
    for i, (note, text, module) in enumerate(cuts, start=4):
        nodes.append(Node(f"n{i}", NO_GRAD, text, note=note, module=module))
        edges.append(Edge(f"n{i}", "n1", CUT))
    return AutogradGraph(tuple(nodes), tuple(edges), params_given=True, modules=(ModuleInfo("", "Net"),))


class Frozen(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2, bias=False)
        self.backbone = nn.Linear(2, 2)
        self.backbone.requires_grad_(False)


def test_recorded_frozen_cut_lists_only_the_frozen_parameters_used():
    graph = recorded_graph(("frozen", "frozen backbone.weight", "backbone"))
    findings = check(graph, Frozen())
    assert summary(findings) == {("info", "frozen_parameter", "backbone.weight")}
    assert findings[0].nodes == ("n4",) and "the forward uses it" in findings[0].message


def test_detach_in_the_middle_is_a_warning_on_its_node():
    graph = recorded_graph(
        ("detach", "detach()", "encoder"),
        ("buffer", "buffer bn.running_mean", "bn"),
        ("integer", "int64 tensor", ""),
        ("integer", "int64 tensor", ""),
    )
    findings = check(graph)
    assert [(f.severity, f.code, f.subject, f.nodes) for f in findings] == [
        ("warning", "gradient_cut", "detach()", ("n4",)),
        ("info", "gradient_cut", "buffer bn.running_mean", ("n5",)),
    ]  # integer inputs are expected: no finding
    assert "in encoder" in findings[0].message


def test_an_integer_result_is_a_cut_and_a_mask_beside_the_gradient_only_info():
    class Gated(nn.Module):
        def __init__(self, soft):
            super().__init__()
            self.fc, self.scorer, self.soft = nn.Linear(3, 3), nn.Linear(3, 3), soft

        def forward(self, x):
            if self.soft:  # a mask of h itself: h, and both layers, still get a gradient through the product
                h = self.scorer(self.fc(x))
                return h * (h > 0)
            return self.fc(x) * (self.scorer(x) > 0).long()

    def findings(soft):
        model = Gated(soft)
        with record(model) as rec:
            loss = model(torch.ones(2, 3)).sum()
        return [f for f in check(loss, model, recorder=rec) if f.code == "gradient_cut"]

    (cut,) = findings(soft=False)
    assert (cut.severity, cut.subject) == ("warning", "bool from comparison >")
    assert cut.message.startswith("bool from comparison >: an integer or bool result carries no gradient")
    assert "compute it in floating point" in cut.message and cut.message.count(". ") == 0
    (mask,) = findings(soft=True)
    assert mask.severity == "info" and "fine for a target, a mask or a stop-gradient" in mask.message


def test_cuts_without_a_reason_are_not_findings():
    x = torch.ones(2)
    w = nn.Parameter(torch.ones(2))
    assert check((w * x.detach()).sum(), params={"w": w}, top_memory=0) == []


def test_nan_input_gives_a_non_finite_gradient_error():
    model = nn.Linear(2, 1)
    x = torch.tensor([[1.0, float("nan")]])
    findings = check(model(x).sum(), model, backward=True, top_memory=0)
    assert summary(findings) == {("error", "grad_nonfinite", "weight")}
    assert "1 of 2" in findings[0].message
    assert model.weight.grad is None  # backward=True leaves .grad alone


def test_weight_multiplied_by_zero_has_a_zero_gradient():
    a = nn.Parameter(torch.ones(2))
    b = nn.Parameter(torch.ones(2))
    loss = (a * 0).sum() + (b * 2).sum()
    exam = check(loss, params={"a": a, "b": b}, backward=True, top_memory=0)
    assert summary(exam) == {("warning", "grad_zero", "a")}
    assert {exam.graph.node(i).kind for i in exam[0].nodes} == {PARAMETER, ACCUMULATE_GRAD}


def test_dead_relu_zeroes_the_first_layer_after_backward():
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    with torch.no_grad():
        model[0].bias.fill_(-100.0)
    model(torch.randn(4, 2)).sum().backward()
    assert summary(check(model=model)) == {
        ("warning", "grad_zero", "0.weight"),
        ("warning", "grad_zero", "0.bias"),
        ("warning", "grad_zero", "2.weight"),  # its input is all zero
    }


def test_gradient_norm_far_from_its_peers_is_an_outlier():
    params = {name: nn.Parameter(torch.ones(4)) for name in "abcd"}
    for name, scale in zip("abcd", (1.0, 2.0, 0.5, 1e-4)):
        params[name].grad = torch.full((4,), scale)
    findings = check(params=params)
    assert summary(findings) == {("warning", "grad_norm_outlier", "d")}
    assert "below" in findings[0].message
    assert check(params=params, outlier_decades=7) == []


@pytest.mark.parametrize("dtype, small, severity", [
    (torch.float32, 1e-8, "info"),  # 8 decades below: float32 rounding, no vanishing gradient
    (torch.float64, 1e-8, "warning"),  # float64 holds 15 digits: 8 decades below is an outlier
])
def test_a_gradient_zero_but_for_rounding_is_info_not_a_vanishing_warning(dtype, small, severity):
    params = {name: nn.Parameter(torch.ones(4, dtype=dtype)) for name in "abcd"}
    for name, scale in zip("abcd", (1.0, 2.0, 0.5, small)):
        params[name].grad = torch.full((4,), scale, dtype=dtype)
    (finding,) = check(params=params)
    assert (finding.severity, finding.subject) == (severity, "d")
    if severity == "info":
        assert finding.code == "grad_zero" and "rounding" in finding.message
    else:
        assert finding.code == "grad_norm_outlier"


def test_a_key_bias_before_a_softmax_gets_no_vanishing_warning():
    torch.manual_seed(0)
    query, key = nn.Linear(8, 8), nn.Linear(8, 8)
    x = torch.randn(5, 8)
    scores = query(x) @ key(x).T  # key.bias adds one number per query to all its scores
    loss = (torch.softmax(scores, -1) * torch.randn(5, 5)).sum()
    model = nn.ModuleDict({"query": query, "key": key})
    findings = [f for f in check(loss, model, backward=True) if f.code in ("grad_zero", "grad_norm_outlier")]
    assert summary(findings) == {("info", "grad_zero", "key.bias")}


class FeatureEncoder(nn.Module):
    """As Wav2Vec2's feature encoder: gradient checkpointing needs a leaf that requires grad,
    so its forward makes a view of its input require grad."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(1, 2, 3)

    def forward(self, input_values):
        hidden = input_values[:, None]
        hidden.requires_grad = True
        return self.conv(hidden).sum()


def test_a_view_of_an_input_that_the_forward_made_require_grad_is_that_input():
    model = FeatureEncoder()
    with record(model) as rec:
        loss = model(torch.randn(1, 10))
    assert summary(check(loss, model, recorder=rec, backward=True), with_info=False) == set()
    graph = walk(loss, model, recorder=rec)
    assert [(n.kind, n.label, n.module) for n in graph.nodes if n.kind in ("leaf", "parameter") and "(view)" in n.label] \
        == [("parameter", "input_values (view)", "")]


def test_a_view_of_a_parameter_made_to_require_grad_is_still_a_stray_leaf():
    class Detour(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(4))

        def forward(self, x):
            with torch.no_grad():
                view = self.weight[:]  # gradient through it never reaches the weight
            view.requires_grad = True
            return (x * view).sum()

    model = Detour()
    with record(model) as rec:
        loss = model(torch.ones(4))
    assert ("error", "unregistered_leaf", "(unnamed (4))") in summary(check(loss, model, recorder=rec))


def test_missing_gradient_is_an_error_when_used_and_a_warning_otherwise():
    a = nn.Parameter(torch.ones(2))
    b = nn.Parameter(torch.ones(2))
    loss = (a * b).sum()
    loss.backward()
    a.grad = None
    assert summary(check(loss, params={"a": a, "b": b}, top_memory=0)) == {("error", "grad_missing", "a")}
    assert summary(check(params={"a": a, "b": b})) == {("warning", "grad_missing", "a")}


def test_tied_weights_are_used_when_any_name_reaches():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(5, 3)
            self.decoder = nn.Linear(3, 5, bias=False)
            self.decoder.weight = self.embed.weight

        def forward(self, h):
            return self.decoder(h)

    model = Tied()
    assert check(model(torch.randn(2, 3)).sum(), model, top_memory=0) == []


def test_clean_model_has_no_errors_or_warnings_before_and_after_backward():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    loss = model(torch.randn(5, 4)).pow(2).mean()
    assert summary(check(loss, model, backward=True), with_info=False) == set()
    loss.backward()
    assert summary(check(model=model), with_info=False) == set()


def test_saved_memory_per_module_leaves_out_parameters():
    nodes = (
        Node("n0", OUTPUT, "loss", shape=()),
        Node("n1", OP, "MmBackward0", module="enc"),
        Node("n2", SAVED, "self", shape=(10, 10), dtype="float32"),
        Node("n3", SAVED, "mat2", shape=(10, 10), dtype="float32", attrs=(("tensor", "enc.weight"),)),
        Node("n4", OP, "MulBackward0", module="head"),
        Node("n5", SAVED, "other", shape=(4,), dtype="float16"),
        Node("n6", SAVED, "self", note="freed"),
    )
    edges = (
        Edge("n1", "n0"), Edge("n4", "n1"), Edge("n1", "n2", SAVED_BY), Edge("n1", "n3", SAVED_BY),
        Edge("n4", "n5", SAVED_BY), Edge("n4", "n2", SAVED_BY), Edge("n4", "n6", SAVED_BY),
    )
    graph = AutogradGraph(nodes, edges)
    assert saved_bytes_by_module(graph) == {"enc": (400, 1, ("n1",)), "head": (8, 1, ("n4",))}
    findings = check(graph)
    assert [(f.code, f.subject, f.nodes) for f in findings] == [("saved_memory", "enc", ("n1",)), ("saved_memory", "head", ("n4",))]
    assert "400 B" in findings[0].message and "98%" in findings[0].message
    assert [f.subject for f in check(graph, top_memory=1)] == ["enc"]


def test_real_walk_counts_activations_not_weights():
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    x = torch.randn(5, 4)
    graph = walk(model(x).sum(), dict(model.named_parameters(), x=x), collect_saved=True)
    # Saved: ReLU's result (5, 3) and the second Linear's input (5, 3); x and the weights are named.
    assert sum(b for b, _, _ in saved_bytes_by_module(graph).values()) == 2 * 5 * 3 * 4


def test_option_errors_say_what_to_do():
    with pytest.raises(OptionError, match="backward"):
        check(model=nn.Linear(2, 2))
    model = nn.Linear(2, 2)
    out = model(torch.ones(1, 2))
    with pytest.raises(OptionError, match="scalar"):
        check(out, model, backward=True)
    with pytest.raises(OptionError, match="without parameter names"):
        check(walk(out), model)
    with pytest.raises(OptionError, match="needs outputs"):
        check()


def test_gradient_norms_by_name():
    w = nn.Parameter(torch.ones(2))
    v = nn.Parameter(torch.ones(2))
    (w * torch.tensor([3.0, 4.0])).sum().backward()
    assert gradient_norms({"w": w, "v": v}) == {"w": 5.0}
    w.grad[0] = math.inf
    assert math.isnan(gradient_norms({"w": w})["w"])


def test_finding_to_dict_is_json_ready():
    finding = Finding("error", "unregistered_leaf", "m", ("n1", "n2"), "w")
    assert finding.to_dict() == {"severity": "error", "code": "unregistered_leaf", "message": "m", "nodes": ["n1", "n2"], "subject": "w"}


# --- on the picture ----------------------------------------------------------------


def marked(source: str, colour: str) -> set[str]:
    """Ids of the nodes whose border (not fill) has this colour."""
    node_lines = [line for line in source.splitlines() if line.startswith("\tn") and "->" not in line]
    return {line.split()[0] for line in node_lines if re.search(rf"(?<![a-z])color={colour}\b", line)}


def test_make_dot_diagnose_marks_the_right_nodes(graphviz_svg):
    model = ListWeights()
    a = nn.Parameter(torch.ones(2))
    x = torch.ones(1, 2)
    loss = model(x).sum() + (a * 0).sum()
    loss.backward()
    params = dict(model.named_parameters(), a=a)
    graph = walk(loss, params)
    source = make_dot(graph, params, diagnose=True).source
    leaf = next(n for n in graph.nodes if n.kind == LEAF)
    leaf_acc = next(e.target for e in graph.edges if e.source == leaf.id)
    a_node = next(n for n in graph.nodes if n.label == "a")
    a_acc = next(e.target for e in graph.edges if e.source == a_node.id)
    assert marked(source, "red") == {leaf.id, leaf_acc}
    assert marked(source, "orange") == {a_node.id, a_acc}
    assert "error: unregistered leaf (1)" in source and "warning: grad zero (1)" in source
    # The key of the severities is one small table: its title over a cell per finding, in its colour.
    notes = [line for line in source.splitlines() if line.strip().startswith("note")]
    assert len(notes) == 1 and "<TABLE" in notes[0] and notes[0].count(">findings<") == 1
    assert '<FONT COLOR="red"' in notes[0] and '<FONT COLOR="orange"' in notes[0]
    drawn = graphviz_svg(source)
    assert "(unnamed)" in drawn[leaf.id].lines[0] and "nn.Parameter" in drawn[leaf.id].tooltip
    # Without diagnose, the same graph draws as before.
    assert make_dot(graph, params).source == make_dot(graph, params, diagnose=[]).source


def test_make_dot_lists_findings_without_nodes_in_a_note(graphviz_svg):
    model = Backbone()
    source = make_dot(model(torch.randn(1, 4)).sum(), model, diagnose=True).source
    assert "not in the graph:" in source and "pooler.weight" in source
    graphviz_svg(source)


def test_grad_colors_fill_parameters_by_norm_with_a_key(graphviz_svg):
    params = {name: nn.Parameter(torch.ones(2)) for name in "abc"}
    loss = (params["a"] * 1e-3).sum() + (params["b"] * 10).sum() + (params["c"] * 0).sum()
    loss.backward()
    graph = walk(loss, params)
    source = make_dot(graph, params, grad_colors=params).source
    fill = {n.label: line for n in graph.nodes for line in source.splitlines() if line.startswith(f"\t{n.id} [")}
    assert "/blues9/1" in fill["a"] and "/blues9/8" in fill["b"]  # 14.1 on a scale from 1e-3 to 1e2 and "filled,dashed" in fill["c"]
    assert "grad norm 0" in source
    graphviz_svg(source)


def test_plain_tensors_without_grad_among_params_are_not_frozen_weights():
    w = nn.Parameter(torch.ones(2))
    frozen = nn.Parameter(torch.ones(2), requires_grad=False)
    x = torch.ones(2)
    findings = check((w * x * frozen).sum(), params={"w": w, "x": x, "frozen": frozen}, top_memory=0)
    assert summary(findings) == {("info", "frozen_parameter", "frozen")}


# --- with a real recorded forward pass -----------------------------------------------


class RecordedNet(nn.Module):
    """A frozen backbone, a detach() inside the encoder, a no_grad gate, an unused head."""

    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(3, 3)
        self.encoder = nn.Linear(3, 3)
        self.gate = nn.Linear(3, 3)
        self.unused_head = nn.Linear(3, 1)
        self.backbone.requires_grad_(False)

    def forward(self, x):
        h = self.encoder(self.backbone(x)).detach()
        with torch.no_grad():
            mask = self.gate(x).sigmoid()
        return (self.gate(x) * mask + h).sum()


def test_findings_from_a_recorded_forward_pass():
    from graphviz_autograd import record

    model = RecordedNet()
    with record(model) as rec:
        loss = model(torch.ones(2, 3))
    findings = check(loss, model, recorder=rec, top_memory=0)
    assert summary(findings) == {
        ("info", "frozen_parameter", "backbone.weight"),  # used, though its output is detached later
        ("info", "frozen_parameter", "backbone.bias"),
        ("warning", "gradient_cut", "detach()"),  # at the top level: it strands the encoder
        ("info", "gradient_cut", "no_grad()"),  # in gate, which learns along the other path
        ("warning", "unused_parameter", "encoder.weight"),
        ("warning", "unused_parameter", "encoder.bias"),
        ("warning", "unused_parameter", "unused_head.weight"),
        ("warning", "unused_parameter", "unused_head.bias"),
    }
    messages = {f.subject: f.message for f in findings}
    assert "at the top level" in messages["detach()"] and "no_grad" in messages["no_grad()"]


def test_make_dot_lists_the_memory_saved_for_backward_in_a_note():
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    loss = model(torch.randn(3, 4)).sum()
    source = make_dot(loss, model, show_saved=True, diagnose=True).source
    note = next(line for line in source.splitlines() if "memory saved for backward:" in line)
    assert "saves" in note and "B for backward" in note
    assert "memory saved for backward" not in make_dot(loss, model, diagnose=True).source  # nothing collected


def test_check_takes_a_module_as_params_beside_a_model_as_it_takes_its_parameters():
    body, head = nn.Linear(2, 2), nn.Linear(2, 1)
    loss = head(body(torch.ones(1, 2))).sum()
    as_dict = check(loss, model=body, params=dict(head.named_parameters()))
    assert check(loss, model=body, params=head) == as_dict
    assert {f.code for f in as_dict} >= {"unregistered_leaf"}  # head's weights are not the model's


# --- no false alarm, one finding per cause ------------------------------------------------


def test_a_view_of_an_input_made_to_require_grad_is_no_stray_weight_without_a_recorder():
    model = FeatureEncoder()
    loss = model(torch.randn(1, 10))
    assert summary(check(loss, model, backward=True), with_info=False) == set()


def test_a_deliberate_detach_stays_info_beside_an_unused_module_elsewhere():
    class Quantised(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(3, 3)
            self.quantiser = Straight()
            self.pooler = nn.Linear(3, 3)  # never called

        def forward(self, x):
            return self.quantiser(self.encoder(x)).sum()

    class Straight(nn.Module):
        def forward(self, x):  # straight-through: the rounding is cut, x still gets its gradient
            return x + (x.round() - x).detach()

    model = Quantised()
    with record(model) as rec:
        loss = model(torch.ones(2, 3))
    findings = check(loss, model, recorder=rec, top_memory=0)
    assert summary(findings) == {
        ("info", "gradient_cut", "detach()"),
        ("warning", "unused_parameter", "pooler.weight"),
        ("warning", "unused_parameter", "pooler.bias"),
    }
    assert "in other modules" in next(f for f in findings if f.code == "gradient_cut").message


def test_vanishing_gradients_through_twenty_sigmoid_layers_are_one_finding_naming_the_span():
    torch.manual_seed(0)
    layers = []
    for _ in range(20):
        layers += [nn.Linear(16, 16), nn.Sigmoid()]
    model = nn.Sequential(*layers, nn.Linear(16, 1))
    loss = model(torch.randn(32, 16)).pow(2).mean()
    findings = [f for f in check(loss, model, backward=True) if f.severity != "info"]
    assert [(f.code, f.severity) for f in findings] == [("grad_norm_span", "warning")]
    (span,) = findings
    assert span.subject.startswith("0 to ") and "shrinks toward the input" in span.message
    first, last = span.subject.split(" to ")
    assert int(last) >= 10  # a run of layers next to the input, not one
    assert len(span.nodes) >= 2 * 2 * 5  # the parameters of the layers it names, and their AccumulateGrad


def test_a_healthy_deep_net_gets_no_span_finding():
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [nn.Linear(16, 16), nn.LayerNorm(16), nn.GELU()]
    model = nn.Sequential(*layers, nn.Linear(16, 1))
    loss = model(torch.randn(32, 16)).pow(2).mean()
    assert summary(check(loss, model, backward=True), with_info=False) == set()


class LayerScaled(nn.Module):
    """ConvNeXt's shape: a stem, blocks whose output is scaled by 1e-5 before the residual sum, a head."""

    def __init__(self, blocks: int = 6, scale: float = 1e-5):
        super().__init__()
        self.stem = nn.Linear(8, 16)
        self.blocks = nn.ModuleList(Block(scale) for _ in range(blocks))
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        h = self.stem(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


class Block(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.norm = nn.LayerNorm(16)
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 16)
        self.gamma = nn.Parameter(torch.full((16,), scale))

    def forward(self, x):
        return x + self.gamma * self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


def test_stem_and_head_of_a_layer_scale_model_are_not_exploding():
    torch.manual_seed(0)
    model = LayerScaled()
    loss = model(torch.randn(32, 8)).pow(2).mean()
    assert summary(check(loss, model, backward=True), with_info=False) == set()
    # One block's gradient far from the same parameter of the other blocks is named, and not the head's.
    with torch.no_grad():
        model.blocks[3].gamma.fill_(1e3)
    loss = model(torch.randn(32, 8)).pow(2).mean()
    outliers = {f.subject for f in check(loss, model, backward=True) if f.code == "grad_norm_outlier"}
    assert "blocks.3.fc2.weight" in outliers and not outliers & {"stem.weight", "head.weight"}


@pytest.mark.parametrize("name", ["ConvNext", "PoolFormer", "SwiftFormer"])
def test_untouched_layer_scale_models_of_transformers_get_no_outlier(name):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    sizes = [16, 32, 64, 128]
    config = getattr(transformers, f"{name}Config")(
        depths=[1, 1, 2, 1], num_labels=4, **({"embed_dims": sizes} if name == "SwiftFormer" else {"hidden_sizes": sizes}))
    model = getattr(transformers, f"{name}ForImageClassification")(config)
    loss = model(pixel_values=torch.randn(2, 3, 64, 64), labels=torch.tensor([0, 1])).loss
    findings = check(loss, model, backward=True, top_memory=0)
    assert [f.subject for f in findings if f.code == "grad_norm_outlier"] == []
    # SwiftFormer's w_g goes through a softmax over one element, whose gradient is exactly zero: a true finding.
    assert {f.code for f in findings if f.severity != "info"} <= {"grad_zero"}
