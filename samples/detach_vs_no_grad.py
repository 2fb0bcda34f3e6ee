"""Two ways to keep a tensor out of the gradient: requires_grad=False and .detach().

x never required grad; z did, but forward uses z.detach(). Both reach their op
through an input slot that carries no gradient, drawn as a dashed "no grad" box,
and neither x nor z gets a .grad.
"""

import torch
from torch import nn


class Affine(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.tensor([4.0]))
        self.b = nn.Parameter(torch.tensor([0.5]))

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return self.w * x + self.b * z.detach()


model = Affine()
example_inputs = (
    torch.tensor([1.0], requires_grad=False),
    torch.tensor([2.0], requires_grad=True),
)
