"""The vision models of the benchmarks, built without needing torchvision.

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

MobileNetV3-small is :class:`MobileNetV3Small` below, written from torchvision's
``mobilenet_v3_small`` (Howard et al., "Searching for MobileNetV3", table 2): a
3x3/2 convolution to 16 channels with hardswish; eleven inverted residual blocks
(a 1x1 expansion unless the block keeps its width, a depthwise kxk convolution,
squeeze-excitation with a hardsigmoid gate in eight of them, a 1x1 projection,
and a residual sum where stride and width allow); a 1x1 convolution to 576
channels, global average pool, and a classifier 576 -> 1024 (hardswish, dropout)
-> 1000. Batch norms use torchvision's eps=0.001. It has 2,542,856 parameters, as
torchvision's has, and the same parameter names.
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
    model, image, field = resnet50_model()
    output = model(image)
    return (getattr(output, field) if field else output), dict(model.named_parameters())


def densenet121() -> tuple[Any, dict]:
    """DenseNet-121 on one random 224x224 image: (logits, named parameters)."""
    model, image = densenet121_model()
    return model(image), dict(model.named_parameters())


def resnet50_model() -> tuple[nn.Module, torch.Tensor, str]:
    """ResNet-50 as :func:`resnet50` builds it, not yet run: (model, image, output attribute).

    The output attribute is '' when ``model(image)`` is the output tensor itself,
    else the field of the model's output to draw (``pooler_output``).
    """
    torch.manual_seed(0)
    models = working_torchvision()
    image = torch.randn(IMAGE_SHAPE)
    if models is not None:
        return models.resnet50(weights=None), image, ""
    from transformers import ResNetConfig, ResNetModel

    return ResNetModel(ResNetConfig()), image, "pooler_output"


def densenet121_model() -> tuple[nn.Module, torch.Tensor]:
    """DenseNet-121 as :func:`densenet121` builds it, not yet run: (model, image)."""
    torch.manual_seed(0)
    models = working_torchvision()
    model = models.densenet121(weights=None) if models is not None else DenseNet121()
    return model, torch.randn(IMAGE_SHAPE)


def mobilenet_v3_small_model() -> tuple[nn.Module, torch.Tensor]:
    """MobileNetV3-small (:class:`MobileNetV3Small`) and one random 224x224 image."""
    torch.manual_seed(0)
    return MobileNetV3Small(), torch.randn(IMAGE_SHAPE)


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


# MobileNetV3-small, torchvision's table: (kernel, expanded width, output width,
# squeeze-excitation, activation, stride) per inverted residual block; input 16 wide.
MOBILENET_V3_SMALL_BLOCKS = (
    (3, 16, 16, True, "RE", 2),
    (3, 72, 24, False, "RE", 2),
    (3, 88, 24, False, "RE", 1),
    (5, 96, 40, True, "HS", 2),
    (5, 240, 40, True, "HS", 1),
    (5, 240, 40, True, "HS", 1),
    (5, 120, 48, True, "HS", 1),
    (5, 144, 48, True, "HS", 1),
    (5, 288, 96, True, "HS", 2),
    (5, 576, 96, True, "HS", 1),
    (5, 576, 96, True, "HS", 1),
)
MOBILENET_V3_SMALL_LAST_CONV = 576
MOBILENET_V3_SMALL_HIDDEN = 1024
MOBILENET_BN_EPS = 0.001


def make_divisible(value: float, divisor: int = 8) -> int:
    """``value`` rounded to a multiple of ``divisor``, never down by more than 10 %, as torchvision rounds widths."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


class ConvNormActivation(nn.Sequential):
    """Convolution without bias, batch norm, then ``activation`` (none when None)."""

    def __init__(self, in_channels: int, out_channels: int, kernel: int, stride: int = 1, groups: int = 1,
                 activation: Optional[type] = None) -> None:
        layers: List[nn.Module] = [
            nn.Conv2d(in_channels, out_channels, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(out_channels, eps=MOBILENET_BN_EPS, momentum=0.01),
        ]
        if activation is not None:
            layers.append(activation(inplace=True))
        super().__init__(*layers)


class SqueezeExcitation(nn.Module):
    """Global average pool, 1x1 down to ``squeeze`` and ReLU, 1x1 back up, hardsigmoid: a gate per channel."""

    def __init__(self, channels: int, squeeze: int) -> None:
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.activation = nn.ReLU()
        self.scale_activation = nn.Hardsigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
        return scale * x


class InvertedResidual(nn.Module):
    """1x1 expansion, depthwise kxk, optional squeeze-excitation, 1x1 projection; plus the input when shapes allow."""

    def __init__(self, in_channels: int, kernel: int, expanded: int, out_channels: int, use_se: bool,
                 activation: str, stride: int) -> None:
        super().__init__()
        act = nn.Hardswish if activation == "HS" else nn.ReLU
        self.use_res_connect = stride == 1 and in_channels == out_channels
        layers: List[nn.Module] = []
        if expanded != in_channels:
            layers.append(ConvNormActivation(in_channels, expanded, 1, activation=act))
        layers.append(ConvNormActivation(expanded, expanded, kernel, stride, groups=expanded, activation=act))
        if use_se:
            layers.append(SqueezeExcitation(expanded, make_divisible(expanded // 4)))
        layers.append(ConvNormActivation(expanded, out_channels, 1))
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return y + x if self.use_res_connect else y


class MobileNetV3Small(nn.Module):
    """MobileNetV3-small for 1000 classes, with torchvision's module and parameter names.

    >>> model = MobileNetV3Small()
    >>> sum(p.numel() for p in model.parameters())
    2542856
    >>> model(torch.randn(1, 3, 64, 64)).shape
    torch.Size([1, 1000])
    """

    def __init__(self, classes: int = 1000, dropout: float = 0.2) -> None:
        super().__init__()
        stem = 16
        layers: List[nn.Module] = [ConvNormActivation(3, stem, 3, stride=2, activation=nn.Hardswish)]
        channels = stem
        for kernel, expanded, out_channels, use_se, activation, stride in MOBILENET_V3_SMALL_BLOCKS:
            layers.append(InvertedResidual(channels, kernel, expanded, out_channels, use_se, activation, stride))
            channels = out_channels
        layers.append(ConvNormActivation(channels, MOBILENET_V3_SMALL_LAST_CONV, 1, activation=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(MOBILENET_V3_SMALL_LAST_CONV, MOBILENET_V3_SMALL_HIDDEN),
            nn.Hardswish(inplace=True),
            nn.Dropout(p=dropout, inplace=True),
            nn.Linear(MOBILENET_V3_SMALL_HIDDEN, classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))
