"""Runs of identical blocks drawn once, in a frame that says how many it stands for."""

from __future__ import annotations

import re

import pytest
import torch
from transformers import GPT2Config, GPT2Model

from graphviz_autograd import make_dot, record, walk
from graphviz_autograd.views.collapsing import fold_to_representative


@pytest.fixture(scope="module")
def gpt2_graph():
    torch.manual_seed(0)
    model = GPT2Model(GPT2Config(n_layer=5, n_embd=16, n_head=2, n_positions=8, vocab_size=32))
    with record(model) as rec:
        out = model(torch.arange(6).unsqueeze(0)).last_hidden_state
    return walk(out, model, recorder=rec)


def op_modules(source: str) -> set:
    return set(re.findall(r"module: (h\.\d+)", source))


def test_full_graph_draws_one_block_framed_with_its_count(gpt2_graph):
    source = make_dot(gpt2_graph).source
    assert op_modules(source) == {"h.0"}
    assert "h.0 (GPT2Block ×5: h.0 … h.4)" in source
    assert "h.4.attn" not in source


def test_no_fold_keeps_every_copy(gpt2_graph):
    source = make_dot(gpt2_graph, fold_repeated=False).source
    assert op_modules(source) == {f"h.{i}" for i in range(5)}
    assert "×5" not in source


def test_deeper_summary_expands_one_representative(gpt2_graph):
    source = make_dot(gpt2_graph, depth=2).source
    assert "GPT2Block ×5: h.0 … h.4" in source  # the frame
    assert "h.0.attn" in source and "h.3.attn" not in source  # one block's parts as boxes
    shallow = make_dot(gpt2_graph, depth=1).source
    assert "repeats: 5" in shallow or "×5" in shallow  # at the blocks' own depth: one folded box


def test_the_representative_keeps_the_edges_in_and_out(gpt2_graph):
    folded = fold_to_representative(gpt2_graph)
    ids = {n.id for n in folded.nodes}
    assert all(e.source in ids and e.target in ids for e in folded.edges)
    # the final layer norm is fed from the representative block
    ln_f = [n.id for n in folded.nodes if n.module == "ln_f"]
    block = {n.id for n in folded.nodes if n.module.startswith("h.0")}
    assert any(e.source in block and e.target in ln_f for e in folded.edges)
    # still one connected drawing from the input side to the output
    assert len(folded.nodes) < len(gpt2_graph.nodes) / 3


def test_blocks_that_differ_are_not_folded(gpt2_graph):
    graph = gpt2_graph
    # a graph whose blocks differ in a parameter count: no run to fold
    modules = tuple(m._replace(parameters=m.parameters + i) if re.fullmatch(r"h\.\d", m.path) else m
                    for i, m in enumerate(graph.modules))
    changed = type(graph)(graph.nodes, graph.edges, graph.params_given, modules)
    assert len(fold_to_representative(changed).nodes) == len(graph.nodes)


def residual_blocks(add_outside: bool):
    """Three alike blocks of two ops each; between blocks, an add that is recorded
    outside them (module '') when ``add_outside``, as a residual ``+=`` can be."""
    from graphviz_autograd.graph.autograd_graph import OP, OUTPUT, AutogradGraph, Edge, ModuleInfo, Node

    nodes = [Node("n0", OUTPUT, "y")]
    edges = []
    below = "n0"
    for block in (2, 1, 0):
        add = Node(f"n{len(nodes)}", OP, "AddBackward0", module="" if add_outside else f"h.{block}")
        nodes.append(add)
        edges.append(Edge(add.id, below))
        relu = Node(f"n{len(nodes)}", OP, "ReluBackward0", module=f"h.{block}")
        nodes.append(relu)
        edges.append(Edge(relu.id, add.id))
        mm = Node(f"n{len(nodes)}", OP, "MmBackward0", module=f"h.{block}")
        nodes.append(mm)
        edges.append(Edge(mm.id, relu.id))
        edges.append(Edge(mm.id, add.id))
        if below != "n0":
            edges.append(Edge(relu.id, below))  # the block also feeds the next one directly
        below = mm.id
    modules = (ModuleInfo("", "Net"), ModuleInfo("h", "Sequential"), *(ModuleInfo(f"h.{i}", "Block") for i in range(3)))
    return AutogradGraph(tuple(nodes), tuple(edges), modules=modules)


def test_blocks_joined_by_an_add_outside_them_are_not_folded_into_a_cycle():
    folded = fold_to_representative(residual_blocks(add_outside=False))
    assert len(folded.nodes) < len(residual_blocks(add_outside=False).nodes)  # alike blocks fold
    outside = residual_blocks(add_outside=True)
    assert fold_to_representative(outside) == outside  # folding would feed block 0 from itself


class TwoReluBlock(torch.nn.Module):
    """A residual block whose activations are alike modules declared side by side, or,
    with ``shared``, one module applied twice (as torchvision's blocks apply ``self.relu``)."""

    def __init__(self, shared: bool):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
        self.relu1 = torch.nn.ReLU()
        self.relu2 = self.relu1 if shared else torch.nn.ReLU()

    def forward(self, x):
        return self.relu2(self.fc2(self.relu1(self.fc1(x))) + x)


def drawn_edges(source: str) -> list[tuple[str, str]]:
    return re.findall(r"^\t(\w+) -> (\w+)", source, re.MULTILINE)


def has_cycle(edges: list[tuple[str, str]]) -> bool:
    targets: dict[str, list[str]] = {}
    for source, target in edges:
        targets.setdefault(source, []).append(target)
    state: dict[str, int] = {}  # 1 on the path being followed, 2 done
    for start in list(targets):
        pending = [(start, iter(targets.get(start, ())))]
        if state.get(start):
            continue
        state[start] = 1
        while pending:
            node, children = pending[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                pending.pop()
            elif state.get(child) == 1:
                return True
            elif not state.get(child):
                state[child] = 1
                pending.append((child, iter(targets.get(child, ()))))
    return False


def test_has_cycle_finds_a_loop():
    assert has_cycle([("a", "b"), ("b", "c"), ("c", "a")])
    assert not has_cycle([("a", "b"), ("a", "c"), ("b", "c")])


@pytest.mark.parametrize("shared", [False, True], ids=["alike-modules", "one-module-twice"])
def test_no_summary_of_a_block_with_two_activations_draws_a_loop(shared):
    torch.manual_seed(0)
    model = torch.nn.Sequential(TwoReluBlock(shared), TwoReluBlock(shared))
    with record(model) as rec:
        out = model(torch.ones(1, 3)).sum()
    graph = walk(out, model, recorder=rec)
    for depth in (0, 1, 2, "full"):
        for fold in (True, False):
            source = make_dot(graph, depth=depth, fold_repeated=fold).source
            assert not has_cycle(drawn_edges(source)), (depth, fold)
    # Two activation boxes per block, not one box the block's path runs through twice.
    summary = make_dot(graph, depth=1, fold_repeated=False).source
    second = "0.relu1#2" if shared else "0.relu2"
    assert re.search(r'label="0\.relu1\\n', summary) and re.search(rf'label="{re.escape(second)}\\n', summary)


def test_a_cell_called_at_every_step_folds_into_one_box_with_its_parameters_once():
    from .test_layout import recorded_steps

    graph = recorded_steps(5)
    source = make_dot(graph, depth=0).source
    assert not has_cycle(drawn_edges(source))
    labels = re.findall(r'label="([^"]*)"', source)
    cell = next(label for label in labels if label.startswith("cell"))
    # RNNCell(3, 4): 4x3 + 4x4 weights and two biases of 4
    assert cell == "cell \u2026 cell#5\\nRNNCell \u00d75\\n" + cell.rsplit("\\n", 1)[1]
    assert cell.endswith(" 36 params")


class SharedLayer(torch.nn.Module):
    """One layer applied four times, its weights shared (as ALBERT applies its layer)."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Tanh())

    def forward(self, x):
        for _ in range(4):
            x = self.layer(x)
        return x.sum()


def test_a_layer_applied_again_and_again_is_drawn_once_with_its_weights():
    torch.manual_seed(0)
    model = SharedLayer()
    with record(model) as rec:
        out = model(torch.ones(1, 3))
    source = make_dot(walk(out, model, recorder=rec), depth="full").source
    assert "Sequential \u00d74: layer \u2026 layer#4" in source
    assert len(re.findall(r'label="layer\.0\.weight\\n', source)) == 1
    assert len(re.findall(r"label=AddmmBackward0", source)) == 1
    assert not has_cycle(drawn_edges(source))
