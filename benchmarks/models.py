"""The two vision models of the benchmark, built without needing torchvision.

torchvision is used when it imports and works: ``resnet50(weights=None)`` and
``densenet121(weights=None)``. A torchvision wheel built for another torch can
install fine and still fail at import (its C extension does not load), so any
exception on import counts as "not there". Without it:

- ResNet-50 is ``transformers.ResNetModel`` built from the default
  ``ResNetConfig``: depths (3, 4, 6, 3), bottleneck blocks with the stride on
  the 3x3 convolution, widths 256 to 2048, random weights, nothing downloaded.
  It has 23,508,032 parameters, torchvision's 25,557,032 less the 1000-way
  classifier (2,049,000), which ``ResNetModel`` does not have. The benchmark
  walks from its ``pooler_output`` (1, 2048, 1, 1), the pooled features.
- DenseNet-121 is :class:`DenseNet121` below, written from the architecture
  (Huang et al., "Densely Connected Convolutional Networks"): a 7x7/2
  convolution, batch norm, ReLU and 3x3/2 max pool; four dense blocks of 6, 12,
  24 and 16 layers with growth rate 32, each layer BN-ReLU-Conv1x1 to 128
  channels then BN-ReLU-Conv3x3 to 32, on the concatenation of every feature map
  before it in its block; between blocks a transition BN-ReLU-Conv1x1 halving the
  channels and a 2x2 average pool; then batch norm, ReLU, global average pool and
  a 1000-way linear layer. It has 7,978,856 parameters, as torchvision's
  ``densenet121`` has, and its parameters have the same names.

Every dense layer concatenates all earlier feature maps of its block with
``torch.cat``, and each block ends with one more concatenation, as in
torchvision: 58 layers and 4 blocks, so the graph has 62 ``CatBackward0`` nodes,
and the input of the 24-layer block feeds 25 of them. On one 224x224 image the
walk finds 1,282 nodes and 1,816 edges.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from types import ModuleType
from typing import Any, List, Optional

import torch
from torch import nn
from torch.nn import functional as F

IMAGE_SHAPE = (1, 3, 224, 224)

DENSENET121_BLOCKS = (6, 12, 24, 16)
GROWTH_RATE = 32
BOTTLENECK_FACTOR = 4  # a dense layer's 1x1 convolution widens to 4 * growth rate
STEM_CHANNELS = 64


@functools.lru_cache(maxsize=None)
def working_torchvision() -> Optional[ModuleType]:
    """``torchvision.models`` when torchvision imports, else None (missing or broken)."""
    try:
        import torchvision.models
    except Exception:  # a wheel built for another torch raises RuntimeError, not ImportError
        return None
    return torchvision.models


def resnet50_source() -> str:
    """Where :func:`resnet50` takes the model from, as the benchmark table says it."""
    return "torchvision" if working_torchvision() is not None else "transformers ResNetModel"


def densenet121_source() -> str:
    """Where :func:`densenet121` takes the model from, as the benchmark table says it."""
    return "torchvision" if working_torchvision() is not None else "benchmarks/models.py"


def resnet50() -> tuple[Any, dict]:
    """ResNet-50 on one random 224x224 image: (output, named parameters)."""
    torch.manual_seed(0)
    models = working_torchvision()
    image = torch.randn(IMAGE_SHAPE)
    if models is not None:
        model = models.resnet50(weights=None)
        return model(image), dict(model.named_parameters())
    from transformers import ResNetConfig, ResNetModel

    model = ResNetModel(ResNetConfig())
    return model(image).pooler_output, dict(model.named_parameters())


def densenet121() -> tuple[Any, dict]:
    """DenseNet-121 on one random 224x224 image: (logits, named parameters)."""
    torch.manual_seed(0)
    models = working_torchvision()
    model = models.densenet121(weights=None) if models is not None else DenseNet121()
    return model(torch.randn(IMAGE_SHAPE)), dict(model.named_parameters())


class DenseLayer(nn.Module):
    """BN-ReLU-Conv1x1-BN-ReLU-Conv3x3 on the concatenation of all earlier feature maps."""

    def __init__(self, in_channels: int, growth_rate: int = GROWTH_RATE) -> None:
        super().__init__()
        width = BOTTLENECK_FACTOR * growth_rate
        self.norm1 = nn.BatchNorm2d(in_channels)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(in_channels, width, kernel_size=1, bias=False)
        self.norm2 = nn.BatchNorm2d(width)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(width, growth_rate, kernel_size=3, padding=1, bias=False)

    def forward(self, features: List[torch.Tensor]) -> torch.Tensor:
        x = torch.cat(features, 1)
        x = self.conv1(self.relu1(self.norm1(x)))
        return self.conv2(self.relu2(self.norm2(x)))


class DenseBlock(nn.Module):
    """``layers`` dense layers; each adds ``growth_rate`` channels to what it sees."""

    def __init__(self, layers: int, in_channels: int, growth_rate: int = GROWTH_RATE) -> None:
        super().__init__()
        for index in range(layers):
            self.add_module(f"denselayer{index + 1}", DenseLayer(in_channels + index * growth_rate, growth_rate))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.children():
            features.append(layer(features))
        return torch.cat(features, 1)


class Transition(nn.Sequential):
    """BN-ReLU-Conv1x1 to ``out_channels``, then a 2x2 average pool."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__(
            OrderedDict(
                norm=nn.BatchNorm2d(in_channels),
                relu=nn.ReLU(inplace=True),
                conv=nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=False),
                pool=nn.AvgPool2d(kernel_size=2, stride=2),
            )
        )


class DenseNet121(nn.Module):
    """DenseNet-121 for 1000 classes, with torchvision's module and parameter names.

    >>> model = DenseNet121()
    >>> sum(p.numel() for p in model.parameters())
    7978856
    >>> model(torch.randn(1, 3, 64, 64)).shape
    torch.Size([1, 1000])
    """

    def __init__(self, blocks: tuple[int, ...] = DENSENET121_BLOCKS, growth_rate: int = GROWTH_RATE, classes: int = 1000) -> None:
        super().__init__()
        self.features = nn.Sequential(
            OrderedDict(
                conv0=nn.Conv2d(3, STEM_CHANNELS, kernel_size=7, stride=2, padding=3, bias=False),
                norm0=nn.BatchNorm2d(STEM_CHANNELS),
                relu0=nn.ReLU(inplace=True),
                pool0=nn.MaxPool2d(kernel_size=3, stride=2, padding=1),
            )
        )
        channels = STEM_CHANNELS
        for index, layers in enumerate(blocks, start=1):
            self.features.add_module(f"denseblock{index}", DenseBlock(layers, channels, growth_rate))
            channels += layers * growth_rate
            if index < len(blocks):
                self.features.add_module(f"transition{index}", Transition(channels, channels // 2))
                channels //= 2
        self.features.add_module("norm5", nn.BatchNorm2d(channels))
        self.classifier = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.features(x), inplace=True)
        x = F.adaptive_avg_pool2d(x, (1, 1))
        return self.classifier(torch.flatten(x, 1))
