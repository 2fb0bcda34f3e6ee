"""y = x @ w + b, reduced with .sum() into a scalar loss."""

import torch
from torch import nn


class MatmulAdd(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.tensor([[5.0, 6.0], [7.0, 8.0]]))
        self.b = nn.Parameter(torch.tensor([[9.0, 10.0]]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(x, self.w) + self.b


model = MatmulAdd()
example_inputs = (torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True),)


def loss(output: torch.Tensor) -> torch.Tensor:
    return output.sum()
