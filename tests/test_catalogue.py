"""The mistakes people make in real models, each with what check() must say, and its fixed twin that must pass.

Each case is a buggy model and the same model written as intended. The buggy one
must give exactly the findings listed (severity, code, subject); the twin must
give none. All run recorded and with gradients, as ``graphviz-autograd check``
runs a model file that defines a loss.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
import pytest
import torch
from torch import nn

from graphviz_autograd import check, record


class Case(NamedTuple):
    name: str
    buggy: Callable[[], nn.Module]
    fixed: Callable[[], nn.Module]
    expected: frozenset  # {(severity, code, subject)}


def linear(n_in: int = 4, n_out: int = 4) -> nn.Linear:
    return nn.Linear(n_in, n_out)


class Net(nn.Module):
    """A model whose forward is a function of (self, x), so each case is a few lines."""

    def __init__(self, forward: Callable, **parts):
        super().__init__()
        for name, part in parts.items():
            setattr(self, name, part)
        self._forward = forward

    def forward(self, x):
        return self._forward(self, x)


def plain_list(registered: bool) -> nn.Module:
    layers = nn.ModuleList([linear(), linear()]) if registered else [linear(), linear()]
    return Net(lambda m, x: m.layers[1](m.layers[0](x)), layers=layers)


def plain_dict(registered: bool) -> nn.Module:
    heads = nn.ModuleDict({"a": linear()}) if registered else {"a": linear()}
    return Net(lambda m, x: m.heads["a"](m.fc(x)), fc=linear(), heads=heads)


def parameter_in_forward(fixed: bool) -> nn.Module:
    def forward(m, x):
        scale = m.scale if fixed else nn.Parameter(torch.ones(4))  # a new leaf on every call
        return m.fc(x) * scale

    return Net(forward, fc=linear(), **({"scale": nn.Parameter(torch.ones(4))} if fixed else {}))


def data_use(fixed: bool) -> nn.Module:
    def forward(m, x):
        weight = m.proj.weight if fixed else m.proj.weight.data  # .data: the weight gets no gradient
        return m.fc(x @ weight.T)

    return Net(forward, fc=linear(), proj=nn.Linear(4, 4, bias=False))


def freeze_in_forward(fixed: bool) -> nn.Module:
    def forward(m, x):
        if not fixed:
            m.fc.weight.requires_grad_(False)
        return m.fc(x)

    return Net(forward, fc=linear())


def no_grad_block(fixed: bool) -> nn.Module:
    def forward(m, x):
        if fixed:
            h = m.encoder(x)
        else:
            with torch.no_grad():
                h = m.encoder(x)
        return m.head(h)

    return Net(forward, encoder=linear(), head=linear())


def detached_target(fixed: bool) -> nn.Module:
    # A target built from the model itself and detached on purpose (a bootstrap target).
    def forward(m, x):
        prediction = m.fc(x)
        target = m.fc(2 * x).detach() if not fixed else 2 * x
        return (prediction - target).pow(2)

    return Net(forward, fc=linear())


def frozen_backbone(fixed: bool) -> nn.Module:
    model = Net(lambda m, x: m.head(m.backbone(x)), backbone=linear(), head=linear())
    if not fixed:
        model.backbone.requires_grad_(False)  # fine-tuning the head only, on purpose
    return model


def item_round_trip(fixed: bool) -> nn.Module:
    def forward(m, x):
        gain = m.gate(x).mean() if fixed else m.gate(x).mean().item()  # a float: the gate gets no gradient
        return m.fc(x) * gain

    return Net(forward, fc=linear(), gate=linear())


def numpy_round_trip(fixed: bool) -> nn.Module:
    def forward(m, x):
        h = m.encoder(x)
        if not fixed:
            h = torch.from_numpy(np.tanh(h.detach().numpy()))
        else:
            h = torch.tanh(h)
        return m.head(h)

    return Net(forward, encoder=linear(), head=linear())


def tensor_rebuilt(fixed: bool) -> nn.Module:
    def forward(m, x):
        h = m.encoder(x)
        h = h.clone() if fixed else torch.tensor(h)  # torch.tensor() copies the values, not the history
        return m.head(h)

    return Net(forward, encoder=linear(), head=linear())


def integer_path(fixed: bool) -> nn.Module:
    def forward(m, x):
        scores = m.scorer(x)
        if fixed:
            weights = scores.softmax(-1)
        else:
            weights = (scores > 0).long()  # an integer tensor carries no gradient
        return m.fc(x) * weights

    return Net(forward, fc=linear(), scorer=linear())


def shared_parameter(fixed: bool) -> nn.Module:
    # Used twice on purpose: both uses add to one gradient. Clean either way.
    shared = linear()
    return Net(lambda m, x: m.shared(torch.tanh(m.shared(x))), shared=shared)


def unused_head(fixed: bool) -> nn.Module:
    return Net(lambda m, x: m.body(x), body=linear(), **({} if fixed else {"head": linear(4, 1)}))


def unused_buffer(fixed: bool) -> nn.Module:
    # A buffer is state, not something to train: never using it is no reason to fail.
    model = Net(lambda m, x: m.fc(x), fc=linear())
    if not fixed:
        model.register_buffer("mean", torch.zeros(4))
    return model


def buffer_used(fixed: bool) -> nn.Module:
    model = Net(lambda m, x: m.fc(x - m.mean), fc=linear())
    model.register_buffer("mean", torch.zeros(4))
    if not fixed:
        model.scale = nn.Parameter(torch.ones(4), requires_grad=False)  # meant to train, left frozen
        model._forward = lambda m, x: m.fc(x - m.mean) * m.scale
    return model


def twins(build: Callable[[bool], nn.Module]) -> tuple[Callable[[], nn.Module], Callable[[], nn.Module]]:
    return (lambda: build(False)), (lambda: build(True))


W, E, I = "warning", "error", "info"
CASES = [
    Case("plain list", *twins(plain_list), frozenset({
        (E, "unregistered_leaf", "layers[0].weight"), (E, "unregistered_leaf", "layers[0].bias"),
        (E, "unregistered_leaf", "layers[1].weight"), (E, "unregistered_leaf", "layers[1].bias")})),
    Case("plain dict", *twins(plain_dict), frozenset({
        (E, "unregistered_leaf", "heads['a'].weight"), (E, "unregistered_leaf", "heads['a'].bias")})),
    Case("parameter created in forward", *twins(parameter_in_forward), frozenset({
        (E, "unregistered_leaf", "(unnamed (4))")})),
    Case(".data", *twins(data_use), frozenset({
        (W, "unused_parameter", "proj.weight"), (W, "gradient_cut", "proj.weight.data")})),
    Case("requires_grad_(False) in forward", *twins(freeze_in_forward), frozenset({
        (W, "frozen_parameter", "fc.weight")})),
    Case("no_grad() around part of forward", *twins(no_grad_block), frozenset({
        (W, "unused_parameter", "encoder.weight"), (W, "unused_parameter", "encoder.bias"),
        (W, "gradient_cut", "no_grad()")})),
    Case("detached target, on purpose", *twins(detached_target), frozenset({
        (I, "gradient_cut", "detach()")})),
    Case("frozen backbone, on purpose", *twins(frozen_backbone), frozenset({
        (I, "frozen_parameter", "backbone.weight"), (I, "frozen_parameter", "backbone.bias")})),
    Case(".item() round trip", *twins(item_round_trip), frozenset({
        (W, "unused_parameter", "gate.weight"), (W, "unused_parameter", "gate.bias"),
        (W, "gradient_cut", ".item()")})),
    Case("numpy round trip", *twins(numpy_round_trip), frozenset({
        (W, "unused_parameter", "encoder.weight"), (W, "unused_parameter", "encoder.bias"),
        (W, "gradient_cut", ".numpy()")})),
    Case("torch.tensor(x) rebuilds a tensor", *twins(tensor_rebuilt), frozenset({
        (W, "unused_parameter", "encoder.weight"), (W, "unused_parameter", "encoder.bias"),
        (W, "gradient_cut", "torch.tensor()")})),
    Case("integer-dtype path", *twins(integer_path), frozenset({
        (W, "unused_parameter", "scorer.weight"), (W, "unused_parameter", "scorer.bias"),
        (W, "gradient_cut", "bool from comparison >")})),
    Case("shared parameter used twice", *twins(shared_parameter), frozenset()),
    Case("unused output head", *twins(unused_head), frozenset({
        (W, "unused_parameter", "head.weight"), (W, "unused_parameter", "head.bias")})),
    Case("unused buffer", *twins(unused_buffer), frozenset()),
    Case("a parameter left frozen", *twins(buffer_used), frozenset({
        (I, "frozen_parameter", "scale"), (I, "gradient_cut", "buffer mean")})),
]


def findings_of(model: nn.Module) -> set:
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    with record(model) as rec:
        loss = model(x).pow(2).mean()
    return {(f.severity, f.code, f.subject) for f in check(loss, model, recorder=rec, backward=True, top_memory=0)}


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_buggy_model_gives_its_findings(case):
    torch.manual_seed(0)
    assert findings_of(case.buggy()) == case.expected


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_fixed_twin_gives_none(case):
    torch.manual_seed(0)
    found = findings_of(case.fixed())
    # A buffer in use is told as info; nothing else may show.
    assert {f for f in found if f[2] != "buffer mean"} == set()


def test_every_message_is_one_sentence_naming_its_subject():
    for case in CASES:
        torch.manual_seed(0)
        model = case.buggy()
        with record(model) as rec:
            loss = model(torch.randn(3, 4)).pow(2).mean()
        for finding in check(loss, model, recorder=rec, backward=True, top_memory=0):
            assert "\n" not in finding.message and finding.message.endswith("."), finding
            assert finding.message.count(". ") <= 1, finding  # one sentence, perhaps with a short fix after it
