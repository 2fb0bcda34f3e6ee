"""torch.cat joins two branches: one CatBackward0 node with two inputs."""

import torch
from torch import nn


class TwoBranches(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.left = nn.Linear(4, 3)
        self.right = nn.Linear(4, 2)
        self.head = nn.Linear(5, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        joined = torch.cat([self.left(x).tanh(), self.right(x).sigmoid()], dim=1)
        return self.head(joined)


model = TwoBranches()
example_inputs = (torch.randn(2, 4),)
