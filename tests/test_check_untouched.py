"""check() on models as their authors wrote them: what a zoo of every transformers model type
found wrong with the rules, each with a healthy case that stays quiet and a broken one it
still names (benchmarks/breadth.py is the run that found them)."""

from __future__ import annotations

import torch
from torch import nn

from graphviz_autograd import check, record


def severities(model: nn.Module, *inputs: torch.Tensor) -> dict[tuple[str, str], str]:
    with record(model) as rec:
        loss = model(*inputs)
    return {(f.code, f.subject): f.severity for f in check(loss, model, recorder=rec, backward=True)}


class ZeroStart(nn.Module):
    """A decoder whose first input is zeros made in forward with requires_grad (MaskFormer's)."""

    def __init__(self, start: str = "zeros") -> None:
        super().__init__()
        self.decoder = nn.Linear(4, 4)
        self.start = start

    def forward(self, queries: torch.Tensor) -> torch.Tensor:
        if self.start == "zeros":
            first = torch.zeros_like(queries, requires_grad=True)
        else:  # a weight made anew on every call: it never trains
            first = torch.randn(queries.shape, requires_grad=True)
        return self.decoder(first + queries).pow(2).sum()


def test_a_start_of_zeros_made_in_forward_is_a_warning_not_an_error():
    found = severities(ZeroStart("zeros"), torch.randn(2, 4))
    leaves = {key: severity for key, severity in found.items() if key[0] == "unregistered_leaf"}
    assert leaves and set(leaves.values()) == {"warning"}


def test_a_random_weight_made_in_forward_is_still_an_error():
    found = severities(ZeroStart("random"), torch.randn(2, 4))
    assert "error" in {severity for (code, _), severity in found.items() if code == "unregistered_leaf"}


class DetachedTarget(nn.Module):
    """A stop-gradient on purpose at the top level, and a tower that this forward never runs."""

    def __init__(self, cut_inside: bool = False) -> None:
        super().__init__()
        self.encoder = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)
        self.vision = nn.Linear(4, 4)  # given no image, it does not run
        self.cut_inside = cut_inside

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.encoder(x)
        if self.cut_inside:  # the encoder cut off: its weights get no gradient
            return self.head(features.detach()).sum()
        target = features.detach()  # a target, on purpose
        return (self.head(features) - target.sum(-1, keepdim=True)).pow(2).sum()


def test_a_cut_on_purpose_stays_info_beside_a_module_that_never_ran():
    found = severities(DetachedTarget(), torch.randn(2, 4))
    cuts = {severity for (code, _), severity in found.items() if code == "gradient_cut"}
    assert cuts == {"info"}
    assert found[("unused_parameter", "vision.weight")] == "warning"


def test_a_cut_that_strands_a_module_that_ran_is_still_a_warning():
    found = severities(DetachedTarget(cut_inside=True), torch.randn(2, 4))
    assert "warning" in {severity for (code, _), severity in found.items() if code == "gradient_cut"}
