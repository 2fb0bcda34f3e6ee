"""The forward recorder: cut reasons, module attribution, and that it leaves no trace."""

from __future__ import annotations

import collections
import copy
import gc
import threading
import weakref
from pathlib import Path

import pytest
import torch
from torch import nn

from graphviz_autograd import InputTypeError, make_dot, record, walk
from graphviz_autograd.graph.autograd_graph import CONSTANT_ATTR, NO_GRAD, OP

from graphviz_autograd.cli.model_file import load_model_file

SAMPLES = Path(__file__).parent.parent / "samples"


def load_sample(name):
    return load_model_file(SAMPLES / f"{name}.py")


def cuts(graph):
    """(label, reason code, module) of each input without gradient, in walk order."""
    return [(n.label, n.note, n.module) for n in graph.nodes if n.kind == NO_GRAD]


def op_modules(graph):
    return [(n.label, n.module) for n in graph.nodes if n.kind == OP]


def recorded(model, *inputs):
    with record(model) as rec:
        out = model(*inputs)
    return walk(out, model, recorder=rec)


def test_requires_grad_false_and_detach_are_told_apart_by_name():
    sample = load_sample("detach_vs_no_grad")
    graph = recorded(sample.model, *sample.example_inputs)
    assert cuts(graph) == [("x (requires_grad=False)", "requires_grad_false", ""), ("z.detach()", "detach", "")]


class Encoder(nn.Module):
    def __init__(self, how: str):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.how = how

    def forward(self, x):
        h = self.fc(x)
        if self.how == "detach":
            cut = h.detach()
        elif self.how == "data":
            cut = h.data
        elif self.how == "no_grad":
            with torch.no_grad():
                cut = h * 2
        elif self.how == "inference_mode":
            with torch.inference_mode():
                cut = h * 2
            cut = cut.clone()
        return h + (cut * 3).exp()  # the cut travels through two more ops before it is used


@pytest.mark.parametrize(
    "how, label",
    [("detach", "detach()"), ("data", ".data"), ("no_grad", "no_grad()"), ("inference_mode", "inference_mode()")],
)
def test_a_cut_inside_a_module_is_named_where_it_happened(how, label):
    model = nn.Sequential(nn.Identity(), Encoder(how))
    graph = recorded(model, torch.ones(2, 3))
    assert cuts(graph) == [
        (label, how, "1"),
        ("input (requires_grad=False)", "requires_grad_false", "1.fc"),
    ]


class Frozen(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.head = nn.Linear(4, 2)
        self.register_buffer("scale", torch.full((2,), 2.0))
        self.backbone.requires_grad_(False)

    def forward(self, x):
        return self.head(self.backbone(x)) * self.scale


def test_frozen_submodule_and_buffer():
    graph = recorded(Frozen(), torch.ones(1, 4))
    assert cuts(graph) == [
        ("buffer scale", "buffer", ""),
        ("frozen backbone.0.weight", "frozen", "backbone.0"),
    ]


def test_frozen_weight_and_bias_of_one_linear_get_their_own_slots():
    lin = nn.Linear(3, 2)
    lin.weight.requires_grad_(False)
    lin.bias.requires_grad_(False)
    x = torch.ones(1, 3, requires_grad=True)
    with record(lin) as rec:
        out = lin(x)
    graph = walk(out, lin, recorder=rec)
    assert sorted(cuts(graph)) == [("frozen bias", "frozen", ""), ("frozen weight", "frozen", "")]
    addmm = next(n for n in graph.nodes if n.label == "AddmmBackward0")
    first_slot = next(e.source for e in graph.edges if e.target == addmm.id)
    assert graph.node(first_slot).label == "frozen bias"  # addmm takes the bias first


def test_integer_input():
    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(3))

        def forward(self, mask):
            return self.w * mask

    graph = recorded(Masked(), torch.tensor([1, 0, 1]))
    assert cuts(graph) == [("mask (int64)", "integer", "")]


class Gated(nn.Module):
    """fc(x) times a gate computed from scorer(x) in one of several ways."""

    def __init__(self, gate):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.scorer = nn.Linear(3, 3)
        self.gate = gate

    def forward(self, x, ids=None):
        scores = self.scorer(x)
        return self.fc(x) * self.gate(scores, ids)


@pytest.mark.parametrize(
    "gate, label",
    [
        (lambda s, ids: s > 0, "bool from comparison >"),
        (lambda s, ids: (s <= 0).long(), "bool from comparison <="),  # the cast after keeps the first cut
        (lambda s, ids: s.argmax(-1, keepdim=True), "int64 from argmax()"),
        (lambda s, ids: s.long(), "int64 from long()"),
        (lambda s, ids: torch.round(s).to(torch.int32), "int32 from to()"),
    ],
)
def test_an_integer_result_of_a_tensor_with_gradient_is_a_cut_named_by_its_op(gate, label):
    graph = recorded(Gated(gate), torch.ones(2, 3))
    assert cuts(graph) == [(label, "integer_result", ""), ("x (requires_grad=False)", "requires_grad_false", "fc")]


def test_integers_that_never_had_a_gradient_stay_plain_inputs():
    # Token ids and a mask built from them: no gradient was lost, so nothing is a cut.
    graph = recorded(Gated(lambda s, ids: (ids > 0).long()), torch.ones(2, 3), torch.tensor([[1], [0]]))
    assert ("int64 tensor", "integer", "") in cuts(graph)
    assert "integer_result" not in {note for _, note, _ in cuts(graph)}
    # Under no_grad the gradient is off anyway; the integer result is not what cut it.
    def under_no_grad(scores, ids):
        with torch.no_grad():
            return scores > 0

    assert "integer_result" not in {note for _, note, _ in cuts(recorded(Gated(under_no_grad), torch.ones(2, 3)))}


def test_a_tensor_computed_from_a_plain_input_says_so():
    class Square(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(3))

        def forward(self, x):
            return self.w * x**2 + x

    graph = recorded(Square(), torch.ones(3))
    assert cuts(graph) == [("x (requires_grad=False)", "requires_grad_false", ""), ("from x (requires_grad=False)", "requires_grad_false", "")]


def test_without_a_recorder_cuts_stay_anonymous():
    sample = load_sample("detach_vs_no_grad")
    graph = walk(sample.model(*sample.example_inputs), sample.model)
    assert cuts(graph) == [("", "", ""), ("", "", "")]
    assert graph.modules == ()


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(2, 2)

    def forward(self, x):
        return torch.tanh(self.inner(x)) + x


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.shared = nn.Linear(2, 2)

    def forward(self, x):
        for block in self.blocks:
            x = self.shared(block(x))
        return x.sum()


def test_each_op_belongs_to_the_innermost_module_that_ran_it():
    graph = recorded(Stack(), torch.ones(1, 2, requires_grad=True))
    assert sorted(op_modules(graph)) == sorted([
        ("SumBackward0", ""),
        ("AddmmBackward0", "shared#2"),  # the second call of the shared layer: a module of its own
        ("AddBackward0", "blocks.1"),
        ("TanhBackward0", "blocks.1"),
        ("AddmmBackward0", "blocks.1.inner"),
        ("AddmmBackward0", "shared"),
        ("AddBackward0", "blocks.0"),
        ("TanhBackward0", "blocks.0"),
        ("AddmmBackward0", "blocks.0.inner"),
        ("TBackward0", "blocks.0.inner"),
        ("TBackward0", "shared"),
        ("TBackward0", "shared#2"),  # each call of the shared layer transposes its weight anew
        ("TBackward0", "blocks.1.inner"),
    ])
    owners = {n.label: n.module for n in graph.nodes if n.kind == "parameter"}
    assert owners == {
        "blocks.0.inner.weight": "blocks.0.inner",
        "blocks.0.inner.bias": "blocks.0.inner",
        "blocks.1.inner.weight": "blocks.1.inner",
        "blocks.1.inner.bias": "blocks.1.inner",
        "shared.weight": "shared",
        "shared.bias": "shared",
        "x": "",  # the input that requires grad, named by the forward's argument
    }
    accumulate_owners = {
        graph.node(e.target).module for e in graph.edges if graph.node(e.source).kind == "parameter"
    }
    assert accumulate_owners == set(owners.values())
    assert [(m.path, m.type_name, m.parameters) for m in graph.modules] == [
        ("", "Stack", 18),
        ("blocks", "ModuleList", 12),
        ("blocks.0", "Block", 6),
        ("blocks.0.inner", "Linear", 6),
        ("blocks.1", "Block", 6),
        ("blocks.1.inner", "Linear", 6),
        ("shared", "Linear", 6),
        ("shared#2", "Linear", 0),  # its parameters stay with the first call
    ]


def test_ops_outside_the_recorded_forward_are_not_claimed():
    model = nn.Sequential(nn.Linear(2, 2))
    x = torch.ones(1, 2, requires_grad=True)
    before = (x * 2).exp()  # made before recording
    with record(model) as rec:
        out = model(before)
    graph = walk(out * 3, recorder=rec)  # and after
    assert sorted(op_modules(graph)) == [
        ("AddmmBackward0", "0"),
        ("ExpBackward0", ""),
        ("MulBackward0", ""),
        ("MulBackward0", ""),
        ("TBackward0", "0"),
    ]
    with record(model) as other:
        again = model(before)
    assert all(module == "" for _, module in op_modules(walk(again, recorder=rec)))
    assert ("AddmmBackward0", "0") in op_modules(walk(again, recorder=other))


def model_state(model):
    """Everything of a model that recording must leave as it was."""
    return {
        "training": [m.training for m in model.modules()],
        "parameters": [(n, p, p.data.clone(), p.requires_grad, p.device, p.grad) for n, p in model.named_parameters()],
        "buffers": [(n, b, b.clone()) for n, b in model.named_buffers()],
        "hooks": [
            (len(m._forward_hooks), len(m._forward_pre_hooks), len(m._forward_hooks_always_called))
            for m in model.modules()
        ],
        # Each module's own attributes (a forward set on the instance among them), by name and identity.
        "attributes": [{name: id(value) for name, value in vars(m).items()} for m in model.modules()],
    }


def assert_same_state(before, after):
    assert after["training"] == before["training"] and after["hooks"] == before["hooks"]
    assert after["attributes"] == before["attributes"]
    for (n1, p1, d1, *rest1), (n2, p2, d2, *rest2) in zip(before["parameters"], after["parameters"], strict=True):
        assert n1 == n2 and p1 is p2 and torch.equal(d1, d2) and rest1 == rest2
    for (n1, b1, c1), (n2, b2, c2) in zip(before["buffers"], after["buffers"], strict=True):
        assert n1 == n2 and b1 is b2 and torch.equal(c1, c2)


class Failing(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(3, 3), nn.Dropout())
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x):
        self.inner(x)
        with torch.no_grad():
            raise ValueError("boom in forward")


@pytest.mark.parametrize("model_class", [Frozen, Failing])
@pytest.mark.parametrize("training", [True, False])
def test_recording_leaves_model_and_torch_state_as_they_were(model_class, training):
    model = model_class().train(training)
    x = torch.randn(4, 4 if model_class is Frozen else 3)
    before = model_state(model)
    grad_mode, modes = torch.is_grad_enabled(), torch._C._len_torch_function_stack()
    with record(model) as rec:
        if model_class is Failing:
            with pytest.raises(ValueError, match="boom"):
                model(x)
        else:
            model(x)
        assert torch._C._len_torch_function_stack() == modes + 1
    assert torch._C._len_torch_function_stack() == modes
    assert torch.is_grad_enabled() == grad_mode
    assert_same_state(before, model_state(model))
    out = model(x) if model_class is Frozen else model.inner(x)
    assert rec.notes(out.grad_fn) is None  # nothing is recorded any more


def test_a_forward_another_library_set_on_a_module_is_called_while_recording_and_kept_after():
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    calls = []
    original = model[0].forward

    def wrapped(x):  # as a library that offloads or casts a layer sets it
        calls.append(x.shape)
        return original(x) * 2

    model[0].forward = wrapped
    with record(model) as rec:
        out = model(torch.ones(1, 3)).sum()
    assert calls == [torch.Size([1, 3])] and vars(model[0])["forward"] is wrapped
    assert ("MulBackward0", "0") in op_modules(walk(out, recorder=rec))
    assert "forward" not in vars(model[1]) and "forward" not in vars(model)


def test_what_a_module_forward_hook_does_counts_as_part_of_its_call():
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
    model[0].register_forward_hook(lambda module, args, out: out.tanh())
    with record(model) as rec:
        out = model(torch.ones(1, 3)).sum()
    assert ("TanhBackward0", "0") in op_modules(walk(out, recorder=rec))
    assert len(model[0]._forward_hooks) == 1 and not model[1]._forward_hooks


def test_a_deep_copy_of_the_model_made_while_recording_runs_its_own_weights():
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    with record(model):
        copied = copy.deepcopy(model)
        with torch.no_grad():
            copied[0].weight.zero_()
            copied[0].bias.fill_(1.0)
        assert copied(torch.ones(1, 3)).tolist() == [[1.0, 1.0]]
    assert all("forward" not in vars(m) for m in (*model.modules(), *copied.modules()))
    assert copied(torch.ones(1, 3)).tolist() == [[1.0, 1.0]]


def test_recorders_nested_on_one_model_both_see_every_module_call():
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1))
    with record(model) as outer:
        with record(model) as inner:
            out = model(torch.ones(1, 3)).sum()
    for rec in (outer, inner):
        assert {module for _, module in op_modules(walk(out, recorder=rec))} == {"0", "1", "2", ""}
    assert all("forward" not in vars(m) for m in model.modules())


def test_a_forward_that_raises_leaves_no_module_open_for_the_next_recording():
    model = Failing()
    with pytest.raises(ValueError):
        with record(model):
            model(torch.ones(1, 3))
    with record(model) as rec:
        out = model.inner[0](torch.ones(1, 3))
    assert op_modules(walk(out, recorder=rec))[0] == ("AddmmBackward0", "inner.0")


def test_grad_mode_set_inside_the_forward_is_not_undone_or_changed_by_recording():
    with torch.no_grad():
        with record() as rec:
            y = torch.ones(2, requires_grad=True) * 2
        assert not torch.is_grad_enabled()
    assert y.grad_fn is None and rec.modules == ()


def test_the_recorder_keeps_no_tensor_or_graph_alive():
    model = nn.Linear(3, 3)
    with record(model) as rec:
        out = model(torch.ones(1, 3)).sum()
    ref = weakref.ref(out)
    graph = walk(out, recorder=rec)
    del out
    gc.collect()
    assert ref() is None
    assert graph.modules and rec.modules


def test_one_recorder_records_once_and_rejects_a_non_module():
    rec = record()
    with rec:
        pass
    with pytest.raises(RuntimeError, match="already recording"):
        with rec:
            with rec:
                pass
    with pytest.raises(InputTypeError, match="nn.Module"):
        record("model.py")


def test_another_thread_is_not_recorded():
    model = nn.Linear(2, 2)
    results = {}

    def other():
        results["out"] = model(torch.ones(1, 2))

    with record(model) as rec:
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        mine = model(torch.ones(1, 2))
    assert op_modules(walk(mine, recorder=rec))[0] == ("AddmmBackward0", "")
    assert rec.notes(results["out"].grad_fn) is None


def test_make_dot_with_a_recorder_labels_the_cuts():
    sample = load_sample("detach_vs_no_grad")
    with record(sample.model) as rec:
        out = sample.model(*sample.example_inputs)
    source = make_dot(out, recorder=rec).source
    assert 'label="z.detach()"' in source and 'label="x (requires_grad=False)"' in source
    assert 'label="w\\n(1)"' in source  # the recorder's model names the parameters


def test_edge_shapes_follow_the_tensor_along_each_edge():
    lin = nn.Linear(3, 2)
    out = lin(torch.ones(5, 3, dtype=torch.float32)).double().sum()
    graph = walk(out, lin, collect_shapes=True)
    by_label = {(graph.node(e.source).label, graph.node(e.target).label): (e.shape, e.dtype) for e in graph.edges}
    assert by_label[("AddmmBackward0", "ToCopyBackward0")] == ((5, 2), "float32")
    assert by_label[("ToCopyBackward0", "SumBackward0")] == ((5, 2), "float64")
    assert by_label[("SumBackward0", "")] == ((), "float64")
    assert by_label[("weight", "AccumulateGrad")] == ((2, 3), "float32")
    assert by_label[("TBackward0", "AddmmBackward0")] == ((3, 2), "float32")
    assert all(e.shape is None for e in walk(out, lin).edges)


def test_in_place_ops_belong_to_the_module_that_ran_them():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 3)
            self.act = torch.nn.ReLU(inplace=True)

        def forward(self, x):
            y = self.act(self.fc(x))
            y += x  # a residual written in place
            return y.relu_()

    model = torch.nn.Sequential(Block(), Block())
    with record(model) as rec:
        out = model(torch.randn(2, 3)).sum()
    graph = walk(out, model, recorder=rec)
    modules = {(n.label, n.module) for n in graph.nodes if n.kind == "op" and n.label != "SumBackward0"}
    assert ("ReluBackward0", "0.act") in modules and ("ReluBackward0", "1.act") in modules
    assert ("AddBackward0", "0") in modules and ("AddBackward0", "1") in modules
    assert all(module for _, module in modules), modules


class Bottleneck(nn.Module):
    """torchvision's Bottleneck pattern: one ReLU module applied after each convolution and after the add."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Linear(2, 2), nn.Linear(2, 2)
        self.relu = nn.ReLU()

    def forward(self, x):
        out = self.relu(self.conv1(x))
        out = self.relu(self.conv2(out))
        return self.relu(out + x)


class Siamese(nn.Module):
    """One encoder (with a child) applied to two inputs."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
        self.head = nn.Linear(2, 1)

    def forward(self, a, b):
        return self.head(self.encoder(a) - self.encoder(b)).sum()


def test_each_call_of_a_module_called_again_is_a_module_of_its_own():
    graph = recorded(nn.Sequential(Bottleneck()), torch.ones(1, 2))
    relus = [n.module for n in graph.nodes if n.label == "ReluBackward0"]
    assert sorted(relus) == ["0.relu", "0.relu#2", "0.relu#3"]
    # Each later call comes right after the calls before it, with the module's class and no parameters.
    assert [(m.path, m.type_name, m.parameters) for m in graph.modules] == [
        ("", "Sequential", 12),
        ("0", "Bottleneck", 12),
        ("0.conv1", "Linear", 6),
        ("0.conv2", "Linear", 6),
        ("0.relu", "ReLU", 0),
        ("0.relu#2", "ReLU", 0),
        ("0.relu#3", "ReLU", 0),
    ]


def test_a_later_call_of_a_parent_holds_the_calls_of_its_children():
    model = Siamese()
    graph = recorded(model, torch.ones(1, 2), torch.ones(1, 2))
    assert {n.module for n in graph.nodes if n.kind == OP} == {
        "", "encoder.0", "encoder.1", "encoder#2.0", "encoder#2.1", "head",
    }
    paths = [m.path for m in graph.modules]
    assert paths == ["", "encoder", "encoder.0", "encoder.1", "encoder#2", "encoder#2.0", "encoder#2.1", "head"]
    # The shared weights belong to the first call: the second reads them from there.
    owners = {n.label: n.module for n in graph.nodes if n.kind == "parameter"}
    assert owners["encoder.0.weight"] == "encoder.0"
    weight = next(n.id for n in graph.nodes if n.label == "encoder.0.weight")
    accumulate = next(e.target for e in graph.edges if e.source == weight)
    readers = {graph.node(e.target).module for e in graph.edges if e.source == accumulate}
    assert readers == {"encoder.0", "encoder#2.0"}


def test_modules_called_once_keep_their_paths():
    model = Stack()
    with record(model) as rec:
        model(torch.ones(1, 2))
    # Stack calls its shared layer twice: 'shared#2' is added, and nothing else changes.
    assert [m.path for m in rec.modules if "#" in m.path] == ["shared#2"]
    assert tuple(m for m in rec.modules if "#" not in m.path) == tuple(
        (path, type(module).__name__, sum(p.numel() for p in module.parameters()))
        for path, module in model.named_modules()
    )


def test_a_graph_walked_while_recording_knows_the_later_calls_so_far():
    model = nn.Sequential(Bottleneck())
    with record(model) as rec:
        out = model(torch.ones(1, 2))
        inside = walk(out, model, recorder=rec)
        model(torch.ones(1, 2))  # a second pass: its calls come after the first's
    assert {m.path for m in inside.modules} >= {"0.relu", "0.relu#2", "0.relu#3"}
    assert "0#2.relu#3" not in {m.path for m in inside.modules}
    assert [m.path for m in rec.modules][-4:] == ["0#2.conv2", "0#2.relu", "0#2.relu#2", "0#2.relu#3"]


class NamedLikeACall(nn.Module):
    def __init__(self):
        super().__init__()
        self.acts = nn.ModuleDict({"a": nn.Tanh(), "a#2": nn.Tanh()})

    def forward(self, x):
        return self.acts["a#2"](self.acts["a"](self.acts["a"](x))).sum()


def test_a_later_call_never_takes_the_name_of_a_module_of_the_model():
    graph = recorded(NamedLikeACall(), torch.ones(1, 2, requires_grad=True))
    paths = [m.path for m in graph.modules]
    assert len(paths) == len(set(paths))
    ops = sorted(n.module for n in graph.nodes if n.label == "TanhBackward0")
    assert ops == ["acts.a", "acts.a#2", "acts.a#2#2"]  # the second call of 'a', and the module 'a#2'


def test_the_tensors_of_a_call_are_those_tree_leaves_finds_in_the_same_order():
    from torch.utils._pytree import tree_leaves

    from graphviz_autograd.capture.recording import _tensors_in

    a, b, c = torch.ones(1), torch.nn.Parameter(torch.ones(2)), torch.ones(3)
    Pair = collections.namedtuple("Pair", "x y")
    calls = [
        ((a, 2, None), {}),
        ((a, [b, c], torch.float32, torch.Size([1])), {"dim": 0, "out": c}),
        (([a, (b,)],), {}),  # a tuple in a list: handed to tree_leaves
        ((Pair(a, b), {"k": c}), {"alpha": 1.5}),
        ((slice(0, 1), ..., "mean", True), {"weight": b}),
        ((), {}),
    ]
    for args, kwargs in calls:
        expected = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        found = _tensors_in(args, kwargs)
        assert [id(t) for t in found] == [id(t) for t in expected]


def test_each_module_counts_the_parameters_it_holds_a_tied_weight_once():
    shared = nn.Linear(3, 3)
    model = nn.ModuleDict({"a": nn.Sequential(shared, nn.Linear(3, 2)), "b": shared, "head": nn.Linear(2, 3)})
    model["tied"] = nn.Linear(2, 3, bias=False)
    model["tied"].weight = model["head"].weight
    expected = {name: sum(p.numel() for p in module.parameters()) for name, module in model.named_modules()}
    assert {info.path: info.parameters for info in record(model).modules} == expected


# --- numbers an op takes: part of the op, with the recorder's word for them ---


class _ScaledNorm(nn.Module):
    """RMSNorm by hand, as Llama writes it: ``variance + eps`` with eps kept on the module."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(4))
        self.variance_epsilon = 1e-5

    def forward(self, x: torch.Tensor, frozen: torch.Tensor) -> torch.Tensor:
        variance = x.pow(2).mean(-1, keepdim=True)
        y = x * torch.rsqrt(variance + self.variance_epsilon) * self.weight
        return (y * 0.5 + frozen.detach() * 2).sum()


def test_a_recorded_number_is_part_of_its_op_named_by_its_module_and_a_detach_beside_it_keeps_its_box():
    from graphviz_autograd.graph.autograd_graph import op_constants

    model = _ScaledNorm()
    x = torch.randn(2, 4, requires_grad=True)
    with record(model) as rec:
        out = model(x, torch.randn(2, 4, requires_grad=True))
    graph = walk(out, model, recorder=rec)
    constants = sorted((n.label, tuple(op_constants(n))) for n in graph.nodes if op_constants(n))
    # AddBackward0 saves no operand: only the recorder tells its eps from a tensor cut off.
    assert ("AddBackward0", ("variance_epsilon=1e-05",)) in constants
    assert ("MulBackward0", ("0.5",)) in constants
    cuts = [(n.label, n.note) for n in graph.nodes if n.kind == "no_grad"]
    assert cuts == [("frozen.detach()", "detach")]  # the 0.5, the 2 and the eps are no boxes; the detach is
    source = make_dot(out, params=dict(model.named_parameters()), recorder=rec).source
    assert "with variance_epsilon=1e-05" in source and "frozen.detach()" in source


def test_a_llama_layers_rmsnorm_shows_eps_in_its_op():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=16, rms_norm_eps=1e-5,
    )
    model = transformers.LlamaForCausalLM(config)
    with record(model) as rec:
        out = model(torch.randint(0, 32, (1, 4))).logits
    graph = walk(out, model, recorder=rec)
    norms = {n.module: n for n in graph.nodes if n.label == "AddBackward0" and n.module.endswith("layernorm")}
    assert set(norms) == {"model.layers.0.input_layernorm", "model.layers.0.post_attention_layernorm"}
    assert all(n.attrs == ((CONSTANT_ATTR, "variance_epsilon=1e-05"),) for n in norms.values())
    # No input without gradient is left in a norm: eps was its only one.
    cut_into = {e.target for e in graph.edges if e.kind == "no_grad"}
    assert not [n for n in norms.values() if n.id in cut_into]


def test_the_recording_names_the_models_tensors_for_the_walk_without_keeping_one_the_model_let_go_of():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(2, 2)
            self.layers = [torch.nn.Linear(2, 2)]  # unregistered: named by attribute path
            self.cache = [torch.ones(2)]

        def forward(self, x):
            return self.layers[0](self.fc(x)) + self.cache[0]

    model = Net()
    with record(model) as rec:
        out = model(torch.ones(2)).sum()
    dropped = weakref.ref(model.cache[0])
    model.cache.clear()
    assert dropped() is None
    labels = {n.label for n in walk(out, model, recorder=rec).nodes}
    assert {"fc.weight", "layers[0].weight"} <= labels
