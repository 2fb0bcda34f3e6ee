"""Broken models for the search of where NaN and Inf are born, each with a healthy twin.

Each case builds ``(model, inputs, loss, optimizer)``; ``broken=False`` builds its twin,
the same code on values that stay finite. ``expected`` is what the search must name:
the finding's code and subject, and the module it must be placed in ('' the top level).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import torch
from torch import nn


class Case(NamedTuple):
    name: str
    build: Callable[[bool], tuple[nn.Module, Any, Optional[Callable], Optional[torch.optim.Optimizer]]]
    code: str
    subject: str
    module: Optional[str]  # where the producer is, as the finding says it ('' the top level; None: not placed)
    words: str  # what the message must say of the cause


class LogNet(nn.Module):
    """Four layers with a functional log between the second and the third: the log makes the NaN."""

    def __init__(self, shift: float):
        super().__init__()
        torch.manual_seed(0)
        self.l1, self.l2, self.l3, self.l4 = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 1)
        self.shift = shift

    def forward(self, x):
        h = torch.relu(self.l2(torch.relu(self.l1(x))))
        h = torch.log(h + self.shift)  # shift < 0 reaches values below 0
        return self.l4(torch.relu(self.l3(h)))


class Norm(nn.Module):
    """The length of each row: sqrt is finite at 0, its derivative is not."""

    def forward(self, x):
        return torch.sqrt((x * x).sum(-1))


class NormNet(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 4)
        self.norm = Norm()

    def forward(self, x):
        return self.norm(self.fc(x) * (x.abs().sum(-1, keepdim=True) > 0))


class Standardize(nn.Module):
    """(x - mean) / std by hand, with no epsilon."""

    def forward(self, x):
        return (x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True)


class StandardizeNet(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 6)
        self.std = Standardize()
        self.head = nn.Linear(6, 1)

    def forward(self, x):
        return self.head(self.std(self.fc(x) * 0 + x.sum(-1, keepdim=True)))


class ExpNet(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 4)
        self.scale = scale

    def forward(self, x):
        return torch.exp(self.fc(x) * self.scale).sum(-1)


class Attention(nn.Module):
    """Scores q @ k^T without the 1/sqrt(d) scale: in float16 they overflow at large inputs."""

    def __init__(self):
        super().__init__()
        self.q, self.k = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        scores = self.q(x) @ self.k(x).transpose(-1, -2)
        return torch.softmax(scores, -1) @ x


class HalfNet(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.attention = Attention()
        self.out = nn.Linear(8, 1)

    def forward(self, x):
        return self.out(self.attention(x))


def _mse(output):
    return output.float().pow(2).mean()


def log_of_negative(broken: bool):
    return LogNet(-0.5 if broken else 1.0), torch.ones(3, 4), _mse, None


def sqrt_at_zero(broken: bool):
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    if broken:
        x[1] = 0  # a row the norm is 0 at
    return NormNet(), x, _mse, None


def zero_variance(broken: bool):
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    model = StandardizeNet()
    if not broken:
        model.forward = lambda x: model.head(model.std(model.fc(x)))  # type: ignore[method-assign]
    return model, x, _mse, None


def exp_overflow(broken: bool):
    return ExpNet(1000.0 if broken else 1.0), torch.ones(2, 4), _mse, None


def half_softmax_overflow(broken: bool):
    model = HalfNet().half()
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(0)).half() * (300 if broken else 1)
    return model, x, _mse, None


def nan_in_batch(broken: bool):
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    if broken:
        x[2, 1] = float("nan")
    return LogNet(1.0), x, _mse, None


def nan_learning_rate(broken: bool):
    model = LogNet(1.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=float("nan") if broken else 0.1)
    return model, torch.ones(3, 4), _mse, optimizer


CASES = (
    Case("log of a negative", log_of_negative, "nonfinite_forward", "torch.log", "", "log of a value \u2264 0"),
    Case("sqrt at 0, in backward", sqrt_at_zero, "nonfinite_backward", "SqrtBackward0", "norm", "sqrt"),
    Case("division by a zero variance", zero_variance, "nonfinite_forward", "Tensor.div", "std",
         "division by zero"),
    Case("exp overflow", exp_overflow, "nonfinite_forward", "torch.exp", "", "exp overflows float32"),
    Case("float16 attention overflow", half_softmax_overflow, "nonfinite_forward", "Tensor.matmul", "attention",
         "overflow"),
    Case("NaN in the input batch", nan_in_batch, "nonfinite_forward", "x", "", "1 NaN"),
    Case("NaN learning rate", nan_learning_rate, "nonfinite_step", "param group 0: lr", None, "lr=nan"),
)


class MaskedAttention(nn.Module):
    """Scores masked with -inf before a softmax, as causal attention does: Inf on purpose,
    which the softmax takes in. With ``log_after``, a log of a negative value later makes a
    NaN of its own, which is the one that reaches the loss."""

    def __init__(self, log_after: bool):
        super().__init__()
        torch.manual_seed(0)
        self.q, self.out = nn.Linear(8, 8), nn.Linear(8, 1)
        self.log_after = log_after

    def forward(self, x):
        scores = self.q(x) @ x.transpose(-1, -2)
        mask = torch.ones(x.shape[-2], x.shape[-2], dtype=torch.bool).triu(1)
        weights = torch.softmax(scores.masked_fill(mask, float("-inf")), -1)
        h = weights @ x
        if self.log_after:
            h = torch.log(h - 10)
        return self.out(h)
