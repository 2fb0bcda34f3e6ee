"""watch() names where the first NaN/Inf of a run is born, forward or backward, and costs a healthy run nothing for it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from graphviz_autograd import watch
from graphviz_autograd.checks import nonfinite_origin


class LogNet(nn.Module):
    """A log whose input goes negative when a batch's first feature does."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.l1, self.l2, self.l3 = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 1)

    def forward(self, x):
        h = torch.relu(self.l2(torch.relu(self.l1(x))))
        return self.l3(torch.log(h + x[:, :1]))


class NormNet(nn.Module):
    """The length of each row: a row of zeros makes sqrt's gradient infinite."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.sqrt((self.fc(x) * (x.abs().sum(-1, keepdim=True) > 0)).pow(2).sum(-1))


def batches(bad_step: int, bad: str, steps: int = 6):
    generator = torch.Generator().manual_seed(1)
    for step in range(steps):
        x = torch.rand(16, 4, generator=generator) + 1
        if step == bad_step:
            if bad == "negative":
                x[:, 0] = -50
            else:
                x[3] = 0
        yield x


def train(model, bad_step, bad, watched=True, every=1, steps=6):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with watch(model, opt, every=every) if watched else _nothing() as w:
        for x in batches(bad_step, bad, steps):
            model(x).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
    return w


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return None


def test_a_nan_born_in_the_forward_pass_is_named_at_its_step():
    model = LogNet()
    w = train(model, 4, "negative")
    (finding,) = [f for f in w.findings() if f.code == "nonfinite_seen"]
    assert (finding.subject, finding.step) == ("torch.log", 4)
    assert finding.message.startswith("NaN/Inf first seen at step 4, born here")
    assert "log of a value \u2264 0: min \u221250" in finding.message
    producer = w.graph().node(finding.nodes[0])
    assert (producer.label, producer.module) == ("LogBackward0", "")
    assert w.to_dict()["nonfinite_origin"]["step"] == 4


def test_looking_changes_nothing_the_run_computes():
    watched, plain = LogNet(), LogNet()
    train(watched, 4, "negative")
    train(plain, 4, "negative", watched=False)
    for a, b in zip(watched.parameters(), plain.parameters()):
        assert torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))


def test_an_inf_born_in_the_backward_pass_is_named():
    w = train(NormNet(), 2, "zeros")
    (finding,) = [f for f in w.findings() if f.code == "nonfinite_seen"]
    assert (finding.subject, finding.step) == ("SqrtBackward0", 2)
    assert "in the backward pass" in finding.message


def test_a_healthy_run_never_runs_a_step_again(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("find_nonfinite ran on a healthy run")

    monkeypatch.setattr(nonfinite_origin, "find_nonfinite", refuse)
    w = train(LogNet(), -1, "negative")
    assert [f for f in w.findings() if f.severity == "error"] == []
    assert w.to_dict()["nonfinite_origin"] is None


def test_a_logged_step_names_it_when_the_nan_is_born_in_its_own_forward_pass():
    w = train(LogNet(), 4, "negative", every=2)
    (finding,) = [f for f in w.findings() if f.code == "nonfinite_seen"]
    assert (finding.subject, finding.step) == ("torch.log", 4)


def test_a_nan_born_between_logged_steps_is_traced_to_the_parameters_it_reached():
    # every=3: step 4 is not logged; its optimizer step writes NaN into the weights, which the
    # forward pass of logged step 6 reads.
    w = train(LogNet(), 4, "negative", every=3, steps=8)
    (finding,) = [f for f in w.findings() if f.code == "nonfinite_seen"]
    assert finding.step == 6 and finding.subject in {name for name, _ in LogNet().named_parameters()}
    assert "an earlier optimizer step (or code outside the forward pass) wrote it" in finding.message
