"""The benchmark's own DenseNet-121 has torchvision's size and a densely connected graph."""

from collections import Counter

import torch

from benchmarks.models import DENSENET121_BLOCKS, DenseNet121
from graphviz_autograd import walk
from graphviz_autograd.graph.autograd_graph import OP

# torchvision.models.densenet121: its published parameter count.
TORCHVISION_DENSENET121_PARAMETERS = 7_978_856


def test_densenet121_has_torchvision_parameter_count():
    model = DenseNet121()
    assert sum(p.numel() for p in model.parameters()) == TORCHVISION_DENSENET121_PARAMETERS
    # 120 convolutions, 121 batch norms (weight and bias), one linear layer (weight and bias).
    assert len(list(model.parameters())) == 120 + 2 * 121 + 2


def test_densenet121_walks_into_a_graph_of_concatenations():
    torch.manual_seed(0)
    model = DenseNet121()
    logits = model(torch.randn(1, 3, 64, 64))
    assert logits.shape == (1, 1000)

    graph = walk(logits, dict(model.named_parameters()))

    ops = Counter(node.label for node in graph.nodes if node.kind == OP)
    # One torch.cat per dense layer (all earlier feature maps) and one per block.
    assert ops["CatBackward0"] == sum(DENSENET121_BLOCKS) + len(DENSENET121_BLOCKS)
    cat_ids = {node.id for node in graph.nodes if node.label == "CatBackward0"}
    inputs_per_cat = Counter(edge.target for edge in graph.edges if edge.target in cat_ids)
    # In a block of n layers, layer k concatenates the block's input and the k - 1
    # layers before it; the block ends by concatenating its input and all n outputs.
    expected = [k for layers in DENSENET121_BLOCKS for k in range(1, layers + 2)]
    assert sorted(inputs_per_cat.values()) == sorted(expected)
    # Dense connectivity: some op (the input of the 24-layer block) feeds every
    # layer of that block and the block's concatenation.
    feeds_cat = Counter(edge.source for edge in graph.edges if edge.target in cat_ids)
    assert max(feeds_cat.values()) == max(DENSENET121_BLOCKS) + 1
