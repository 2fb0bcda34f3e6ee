"""h = w * x + b: the smallest graph, three leaves and two ops.

Every leaf requires grad, so the picture shows three light-blue leaves, each
behind the AccumulateGrad node that stores its .grad.
"""

import torch
from torch import nn


class Affine(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.tensor([4.0]))
        self.b = nn.Parameter(torch.tensor([0.5]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w * x + self.b


model = Affine()
example_inputs = (torch.tensor([1.0], requires_grad=True),)
