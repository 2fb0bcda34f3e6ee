"""Module boxes of a recorded model stack in one column, in data-flow order.

``dot`` sets two clusters side by side when the ranks they span overlap at all,
and a block's parameters used to reach up into the ranks of the block before:
each block stepped sideways from the last. Checked on Graphviz's own layout.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
import torch
from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel, GPT2Model

from graphviz_autograd import make_dot, record
from graphviz_autograd.graph.autograd_graph import DATA
from graphviz_autograd.views.stacking import stacking_edges

needs_graphviz = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")


def test_a_parameter_is_kept_below_the_block_that_feeds_its_own():
    # a.x (0) feeds b.op (1); b.w (2) and b.inner.w (3) are b's parameters; c (4) stays put
    links = [(0, 1, (DATA,)), (2, 1, (DATA,)), (3, 1, (DATA,)), (4, 0, (DATA,))]
    boxes = ["a", "b", "b", "b.inner", "a"]
    parent = {"a": "", "b": "", "b.inner": "b"}.__getitem__
    assert stacking_edges(links, boxes, parent) == [(0, 2), (0, 3)]


def test_no_edges_without_sibling_boxes():
    links = [(0, 1, (DATA,)), (2, 1, (DATA,))]
    assert stacking_edges(links, ["", "a", "a"], lambda path: "") == []


def test_an_op_fed_only_from_far_above_is_kept_below_the_output_entering_its_box():
    # Top level: the embedding weight (0) and the last hidden state (1) both feed the head's
    # box; in it, the weight's transpose (2) reads only 0, from far above, and the product (3)
    # reads 1 and 2. 0 runs down a chain (0 -> 4 -> 5 -> 1) to make it far above.
    links = [(0, 4, (DATA,)), (4, 5, (DATA,)), (5, 1, (DATA,)), (0, 2, (DATA,)), (1, 3, (DATA,)), (2, 3, (DATA,))]
    boxes = ["", "", "head", "head", "", ""]
    assert stacking_edges(links, boxes, lambda path: "") == [(1, 2)]
    # An op reading the entering output itself needs nothing, nor one reading an op of its own box.
    direct = [*links[:3], (1, 2, (DATA,)), (2, 3, (DATA,))]
    assert stacking_edges(direct, boxes, lambda path: "") == []


@needs_graphviz
def test_a_tied_output_layer_stays_below_the_blocks():
    # GPT-2's lm_head multiplies by the embedding's weight: its box held the weight's
    # transpose up at the embedding, and stretched over the whole model.
    source, heights = _laid_out(GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=16, n_head=2, n_positions=8, vocab_size=32)))
    head = [heights[n] for n in _members_of_cluster(source, "lm_head")]
    blocks = [heights[n] for n in _members_of_cluster(source, "transformer.h.1") if n in heights]
    assert head and blocks and max(head) < min(blocks)


@needs_graphviz
def test_transformer_blocks_stack_in_one_column():
    source, heights = _laid_out(GPT2Model(GPT2Config(n_layer=4, n_embd=16, n_head=2, n_positions=8, vocab_size=32)))
    spans = []
    for block in range(4):
        prefix = f"h.{block}"
        # every block's ops, parameters included, between the blocks before and after it
        ops = [n for n in _members_of_cluster(source, prefix) if n in heights]
        assert ops, prefix
        spans.append((min(heights[n] for n in ops), max(heights[n] for n in ops)))
    for (low_above, _), (_, high_below) in zip(spans, spans[1:]):
        assert high_below < low_above


@needs_graphviz
def test_boxes_take_at_most_half_again_the_area_of_the_same_graph_without():
    # Stacked boxes cost ranks (a block's parameters start below the block before) and
    # room at each box edge; the stacking edges must not also pull a Linear's weight and
    # bias up side by side (3 tiny BERT layers: 1.66 times the area when they did).
    torch.manual_seed(0)
    config = BertConfig(hidden_size=16, num_hidden_layers=3, num_attention_heads=2, intermediate_size=32,
                        vocab_size=50, max_position_embeddings=16)
    model = BertModel(config)
    with record(model) as rec:
        out = model(torch.arange(6).unsqueeze(0)).last_hidden_state

    def area(clusters: bool) -> float:
        source = make_dot(out, recorder=rec, fold_repeated=False, clusters=clusters).source
        plain = subprocess.run(["dot", "-Tplain"], input=source, capture_output=True, text=True, check=True).stdout
        _, _, width, height = plain.split()[:4]
        return float(width) * float(height)

    assert area(clusters=True) <= 1.5 * area(clusters=False)


def _laid_out(model: torch.nn.Module) -> tuple[str, dict]:
    """The DOT of a recorded GPT-2's full graph, every block drawn, and each node's height in dot's layout."""
    torch.manual_seed(0)
    with record(model) as rec:
        out = model(torch.arange(6).unsqueeze(0))
    source = make_dot(out[0], recorder=rec, fold_repeated=False, depth="full").source
    plain = subprocess.run(["dot", "-Tplain"], input=source, capture_output=True, text=True, check=True).stdout
    return source, {parts[1]: float(parts[3]) for parts in map(str.split, plain.splitlines()) if parts[0] == "node"}


def _members_of_cluster(source: str, path: str) -> list:
    """Node ids inside the cluster whose title starts with ``path`` (its subclusters included)."""
    members, depth, inside = [], 0, None
    lines = source.splitlines()
    for k, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("subgraph cluster_"):
            depth += 1
            title = lines[k + 1]
            if inside is None and f'label="{path} (' in title:
                inside = depth
        elif stripped == "}":
            if inside == depth:
                inside = None
            depth -= 1
        elif inside is not None and stripped.startswith("n") and "[" in stripped and "->" not in stripped:
            members.append(stripped.split()[0])
    return members
