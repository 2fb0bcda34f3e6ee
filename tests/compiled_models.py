"""Small models for the torch.compile tests and benchmark: a 2-layer GPT-2 from a config, a
hand-written ResNet (torchvision is not needed), and a model with a graph break."""

from __future__ import annotations

import torch
from torch import nn


class BasicBlock(nn.Module):
    """A ResNet basic block: two 3x3 convolutions with batch norm, and the shortcut added."""

    def __init__(self, channels_in: int, channels: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.downsample = None
        if stride != 1 or channels_in != channels:
            self.downsample = nn.Sequential(nn.Conv2d(channels_in, channels, 1, stride, bias=False), nn.BatchNorm2d(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + shortcut)


class SmallResNet(nn.Module):
    """A stem, two stages of one basic block each, pooling and a classifier."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.layer1 = nn.Sequential(BasicBlock(8, 8))
        self.layer2 = nn.Sequential(BasicBlock(8, 16, stride=2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.pool(x), 1))


class BreakingModel(nn.Module):
    """Two linear layers with a ``print`` between them: Dynamo compiles two regions."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
        self.second = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.first(x)
        print("between the regions")  # a graph break
        return self.second(hidden)


def gpt2():
    """A 2-layer GPT-2 language model (no weights downloaded) and a batch of token ids."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128, n_positions=32)
    model = GPT2LMHeadModel(config)
    return model, torch.randint(0, 128, (2, 16))


def resnet():
    torch.manual_seed(0)
    return SmallResNet(), torch.randn(2, 3, 16, 16)


def breaking():
    torch.manual_seed(0)
    return BreakingModel(), torch.randn(2, 4)


def loss_of(output) -> torch.Tensor:
    """A scalar from a model's output (a tensor, or transformers' output with ``logits``)."""
    logits = output.logits if hasattr(output, "logits") else output
    return logits.float().pow(2).mean()
