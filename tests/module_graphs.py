"""Hand-built graphs with module info, as a recorded forward pass would give them.

Ids are ``n0, n1, ...`` in the order nodes are added, which is the order a walk
from the output would meet them in these chains.
"""

from __future__ import annotations

from typing import Optional

from graphviz_autograd.graph.autograd_graph import (
    ACCUMULATE_GRAD,
    CUT,
    DATA,
    NO_GRAD,
    OP,
    OUTPUT,
    PARAMETER,
    AutogradGraph,
    Edge,
    ModuleInfo,
    Node,
    Shape,
)

HIDDEN = 768
BLOCK_PARAMS = 7_087_872


class GraphBuilder:
    """Adds nodes with fresh ids and edges between them."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.edges: list[Edge] = []

    def node(self, kind: str, label: str = "", module: str = "", **fields) -> str:
        node_id = f"n{len(self.nodes)}"
        self.nodes.append(Node(node_id, kind, label, module=module, **fields))
        return node_id

    def edge(self, source: str, target: str, kind: str = DATA, shape: Optional[Shape] = None, dtype=None) -> None:
        self.edges.append(Edge(source, target, kind, shape, dtype))

    def linear(self, consumer: str, module: str, name: str, shape: Shape) -> str:
        """An addmm in ``module`` feeding ``consumer``, with its weight behind an AccumulateGrad."""
        op = self.node(OP, "AddmmBackward0", module)
        self.edge(op, consumer, shape=shape)
        grad = self.node(ACCUMULATE_GRAD, "AccumulateGrad", module)
        self.edge(grad, op)
        weight = self.node(PARAMETER, f"{module}.{name}", module, shape=(HIDDEN, HIDDEN), dtype="float32")
        self.edge(weight, grad)
        return op

    def graph(self, modules: tuple[ModuleInfo, ...]) -> AutogradGraph:
        return AutogradGraph(tuple(self.nodes), tuple(self.edges), params_given=True, modules=modules)


def gpt2_like(blocks: int = 12, odd_block: Optional[int] = None, detach_in: Optional[int] = None) -> AutogradGraph:
    """A GPT-2 shaped graph: embeddings, ``blocks`` transformer blocks, a final norm and a head.

    Block ``odd_block`` (if given) has a GELU where the others have a ReLU;
    block ``detach_in`` (if given) takes a detached tensor into its attention,
    drawn as a no-grad input named ``detach()``.
    """
    shape = (1, 16, HIDDEN)
    b = GraphBuilder()
    out = b.node(OUTPUT, "logits", shape=(1, 16, 50257))
    b.linear(out, "lm_head", "weight", (1, 16, 50257))
    consumer = b.nodes[-3].id  # the head's addmm
    norm = b.node(OP, "NativeLayerNormBackward0", "transformer.ln_f")
    b.edge(norm, consumer, shape=shape)
    consumers = [norm]  # what the output of the block below feeds: the next block's residual and attention
    for i in reversed(range(blocks)):
        block = f"transformer.h.{i}"
        residual = b.node(OP, "AddBackward0", block)
        for consumer in consumers:
            b.edge(residual, consumer, shape=shape)
        act = b.node(OP, "GeluBackward0" if i == odd_block else "ReluBackward0", f"{block}.mlp")
        b.edge(act, residual, shape=shape)
        fc = b.linear(act, f"{block}.mlp", "weight", shape)
        attn = b.linear(fc, f"{block}.attn", "weight", shape)
        if i == detach_in:
            cut = b.node(NO_GRAD, "detach()", f"{block}.attn")
        else:
            cut = b.node(NO_GRAD, "", "")
        b.edge(cut, attn, kind=CUT)
        consumers = [residual, attn]
    embed = b.node(OP, "AddBackward0", "transformer")
    for consumer in consumers:
        b.edge(embed, consumer, shape=shape)
    for table in ("wte", "wpe"):
        lookup = b.node(OP, "EmbeddingBackward0", f"transformer.{table}")
        b.edge(lookup, embed, shape=shape)
        grad = b.node(ACCUMULATE_GRAD, "AccumulateGrad", f"transformer.{table}")
        b.edge(grad, lookup)
        weight = b.node(PARAMETER, f"transformer.{table}.weight", f"transformer.{table}", shape=(1024, HIDDEN))
        b.edge(weight, grad)
    modules = [ModuleInfo("", "GPT2LMHeadModel", 124_439_808), ModuleInfo("transformer", "GPT2Model", 124_439_808)]
    modules += [ModuleInfo("transformer.wte", "Embedding", 38_597_376), ModuleInfo("transformer.wpe", "Embedding", 786_432)]
    modules += [ModuleInfo("transformer.drop", "Dropout"), ModuleInfo("transformer.h", "ModuleList", blocks * BLOCK_PARAMS)]
    for i in range(blocks):
        block = f"transformer.h.{i}"
        modules += [
            ModuleInfo(block, "GPT2Block", BLOCK_PARAMS),
            ModuleInfo(f"{block}.attn", "GPT2Attention", 2_362_368),
            ModuleInfo(f"{block}.mlp", "GPT2MLP", 4_722_432),
        ]
    modules += [ModuleInfo("transformer.ln_f", "LayerNorm", 1536), ModuleInfo("lm_head", "Linear", 38_597_376)]
    return b.graph(tuple(modules))
