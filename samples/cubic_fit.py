"""Fit sin(x) with a + b*x + c*x**2 + d*x**3 and a squared-error loss.

x and the target y are plain data (requires_grad=False): they show as dashed
"no grad" inputs, while a, b, c and d collect gradients.
"""

import math

import torch
from torch import nn


class Cubic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Parameter(torch.zeros(()))
        self.b = nn.Parameter(torch.zeros(()))
        self.c = nn.Parameter(torch.zeros(()))
        self.d = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a + self.b * x + self.c * x**2 + self.d * x**3


model = Cubic()
x = torch.linspace(-math.pi, math.pi, 2000)
example_inputs = (x,)
target = torch.sin(x)


def loss(output: torch.Tensor) -> torch.Tensor:
    return (output - target).pow(2).sum()
