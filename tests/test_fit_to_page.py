"""The default drawing of a recorded graph: whole when it fits a page, else the largest
module summary that does, with a note; ``depth="full"`` for every node; a graph without
module info drawn whole, as torchviz draws it (graphviz_autograd.views.page_fit.fit_to_page)."""

from __future__ import annotations


import pytest
import torch
from click.testing import CliRunner
from torch import nn

from graphviz_autograd import make_dot, record, to_dot, walk
from graphviz_autograd.cli.commands import main
from graphviz_autograd.views.collapsing import collapse, fold_to_representative
from graphviz_autograd.errors import OptionError
from graphviz_autograd.graph.autograd_graph import MODULE
from graphviz_autograd.options import DrawOptions
from graphviz_autograd.views.page_fit import PAGE_NODES, fit_to_page

from .module_graphs import gpt2_like
from .test_cli import needs_dot

GROUPS, PER_GROUP = 6, 10

MODEL_FILE = f"""
import torch
from torch import nn

def block(width):
    return nn.Sequential(nn.Linear(width, width + 1), nn.Tanh())

# {GROUPS} groups of {PER_GROUP} blocks, each a different width: nothing folds.
model = nn.Sequential(*[nn.Sequential(*[block(4 + g * {PER_GROUP} + i) for i in range({PER_GROUP})]) for g in range({GROUPS})])
example_inputs = (torch.randn(2, 4),)
"""


def unlike_blocks() -> nn.Module:
    """Sixty small blocks of different widths in six groups: over 400 nodes, none alike."""
    namespace: dict = {}
    exec(MODEL_FILE, namespace)
    return namespace["model"]


@pytest.fixture(scope="module")
def recorded():
    model = unlike_blocks()
    with record(model) as rec:
        out = model(torch.randn(2, 4)).sum()
    return out, rec


def test_a_graph_too_big_for_a_page_is_drawn_as_the_largest_summary_that_fits(recorded, capsys):
    out, rec = recorded
    dot = make_dot(out, recorder=rec)
    boxes = [n for n in dot.drawn.nodes if n.kind == MODULE]
    assert len(boxes) == GROUPS  # depth 1 would be 60 boxes in a column: taller than a page
    note = capsys.readouterr().err
    assert "is too big for a page; drawn with each module at depth 0 as one box" in note
    assert "depth='full' (--depth full) draws every node" in note and "explore()" in note
    assert "subgraph cluster_notes" in dot.source and "depth='full'" in dot.source  # the note is in the picture


def test_depth_full_or_none_draws_every_node(recorded, capsys):
    out, rec = recorded
    whole = walk(out, rec.model, recorder=rec)
    assert len(whole.nodes) > PAGE_NODES
    for depth in ("full", None):
        dot = make_dot(out, recorder=rec, depth=depth)
        assert len(dot.drawn.nodes) == len(whole.nodes)
        assert "ranksep=0.2" in dot.source  # too long for a page: its ranks set closer
        assert "cluster_notes" not in dot.source
    assert capsys.readouterr().err == ""


def test_a_graph_without_module_info_is_drawn_whole_as_before(recorded, capsys):
    out, _ = recorded
    dot = make_dot(out)
    assert dot.source == make_dot(out, depth="full").source
    assert dot.source.count("AddmmBackward0") == GROUPS * PER_GROUP
    assert "cluster_notes" not in dot.source and capsys.readouterr().err == ""


def test_a_recorded_graph_that_fits_is_drawn_whole_without_compact_spacing(capsys):
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    with record(model) as rec:
        out = model(torch.randn(2, 4)).sum()
    dot = make_dot(out, recorder=rec)
    assert dot.source == make_dot(out, recorder=rec, depth="full").source
    # Boxed drawings set ranks 0.4 in apart; only a drawing too tall for a page gets closer ones.
    assert "ranksep=0.4" in dot.source and "ranksep=0.2" not in dot.source
    assert capsys.readouterr().err == ""


def test_the_decision_is_made_after_folding():
    graph = gpt2_like(blocks=48)
    assert fit_to_page(graph).depth is None  # 48 alike blocks drawn once: a page
    unfolded = fit_to_page(graph, fold_repeated=False)
    assert unfolded.depth is not None and "too big for a page" in unfolded.note


def test_a_summary_is_what_depth_n_draws():
    graph = gpt2_like(blocks=48)
    fitted = fit_to_page(graph, fold_repeated=False)
    assert fitted.graph == collapse(graph, fitted.depth, False)
    assert fit_to_page(graph, depth=2).graph == collapse(fold_to_representative(graph, 2), 2)
    assert fit_to_page(graph, depth=2).note == ""  # asked for: nothing to say


def test_dot_over_its_budget_counts_as_not_fitting_and_the_smallest_summary_is_drawn():
    graph = gpt2_like(blocks=12)
    fitted = fit_to_page(graph, layout_budget=1e-9)
    assert fitted.depth == 0 and "does not fit a page either" in fitted.note
    assert "Graphviz dot would take about" in fitted.note
    assert fit_to_page(graph, layout_budget=1e-9, layout="fixed").depth is None  # no dot to wait for


def test_to_dot_draws_what_make_dot_draws(recorded, capsys):
    out, rec = recorded
    graph = walk(out, rec.model, recorder=rec)
    assert to_dot(graph) == make_dot(graph).source
    assert "at depth 0" in to_dot(graph)


@pytest.mark.parametrize("depth", ["fit", "full", None, 0, 3])
def test_draw_options_take_every_depth(depth):
    assert DrawOptions(depth=depth).depth == depth


@pytest.mark.parametrize("depth", ["deep", -1, True, 1.5])
def test_a_bad_depth_is_one_sentence_naming_the_choices(depth):
    with pytest.raises(OptionError, match=r"depth must be a whole number of 0 or more .* 'fit' .* 'full'"):
        DrawOptions(depth=depth)


@needs_dot
def test_the_command_line_draws_the_same_summary_and_full_on_request(tmp_path):
    model = tmp_path / "blocks.py"
    model.write_text(MODEL_FILE)
    result = CliRunner().invoke(main, ["render", str(model), "-o", str(tmp_path / "a.svg"), "-q"])
    assert result.exit_code == 0, result.output
    assert "note: This graph of" in result.stderr and "at depth 0 as one box" in result.stderr
    svg = (tmp_path / "a.svg").read_text()
    assert svg.count("drawn as one box") == GROUPS and "AddmmBackward0" not in svg

    result = CliRunner().invoke(main, ["render", str(model), "-o", str(tmp_path / "b.dot"), "-q", "--depth", "full"])
    assert result.exit_code == 0, result.output
    assert "note:" not in result.stderr
    assert (tmp_path / "b.dot").read_text().count("AddmmBackward0") == GROUPS * PER_GROUP

    result = CliRunner().invoke(main, ["render", str(model), "-o", "-", "-q", "--depth", "deep"])
    assert result.exit_code == 2 and "'deep' is not a depth" in result.output


def test_command_line_depth_one_keeps_its_meaning(tmp_path):
    model = tmp_path / "blocks.py"
    model.write_text(MODEL_FILE)
    result = CliRunner().invoke(main, ["render", str(model), "-o", str(tmp_path / "a.dot"), "-q", "--depth", "1"])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "a.dot").read_text()
    assert "note:" not in result.stderr and "AddmmBackward0" not in text  # every block a box, as asked
    assert text.count("drawn as one box") == GROUPS * PER_GROUP


class Stage(nn.Module):
    """One residual quantizer: a projection, a straight-through rounding and two losses."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.out = nn.Linear(8, 8)

    def forward(self, x):
        z = self.proj(x)
        q = z + (self.out(z) - z).detach()
        return q, ((z - q.detach()) ** 2).mean(), ((q - z.detach()) ** 2).mean(), z


class ParallelBranches(nn.Module):
    """N stages in a column, each one's output masked into three running sums, as DAC's
    residual quantizers: dot draws the N branches side by side, wider than a page."""

    def __init__(self, n):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
        self.quantizers = nn.ModuleList(Stage() for _ in range(n))

    def forward(self, x):
        residual, total, loss_a, loss_b, latents = self.encoder(x), 0, 0, 0, []
        for i, stage in enumerate(self.quantizers):
            q, a, b, z = stage(residual)
            mask = torch.full((x.shape[0],), i) < len(self.quantizers)
            total = total + q * mask[:, None]
            residual = residual - q
            loss_a = loss_a + a * mask
            loss_b = loss_b + b * mask
            latents.append(z)
        return total.sum() + loss_a.sum() + loss_b.sum() + torch.cat(latents, 1).sum()


@needs_dot
def test_parallel_branches_drawn_over_a_page_carry_the_note_saying_how_to_see_the_rest(capsys):
    import re
    import subprocess

    from graphviz_autograd.views.page_fit import PAGE_LONG_SIDE

    model = ParallelBranches(12)
    with record(model) as rec:
        out = model(torch.randn(2, 8))
    dot = make_dot(out, recorder=rec)
    svg = subprocess.run(["dot", "-Tsvg"], input=dot.source.encode(), capture_output=True, check=True).stdout
    width, height = (float(v) for v in re.search(rb'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg).groups())
    if max(width, height) <= PAGE_LONG_SIDE:
        return  # drawn within a page: nothing to say
    words = re.sub(r"(\\[lnr]|\s)+", " ", dot.source)  # the note as the picture shows it, lines joined
    assert "too big for a page" in words, (width, height)
    assert "depth=N another level" in words and "explore()" in words


class NormedAttention(nn.Module):
    """Queries, keys and values projected side by side, the queries and keys each through a
    layer norm of their own on a view of the attention's (as Nemotron's audio encoder does):
    parallel branches in boxes nested in the attention's."""

    def __init__(self, width=16, heads=2):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(width, width) for _ in range(3))
        self.q_norm, self.k_norm = nn.LayerNorm(width // heads), nn.LayerNorm(width // heads)
        self.o_proj = nn.Linear(width, width)

    def forward(self, x):
        b, t, w = x.shape
        heads = lambda y: y.view(b, t, self.heads, w // self.heads)  # noqa: E731
        q = self.q_norm(heads(self.q_proj(x))).transpose(1, 2)
        k = self.k_norm(heads(self.k_proj(x))).transpose(1, 2)
        v = heads(self.v_proj(x)).transpose(1, 2)
        y = torch.softmax(q @ k.transpose(-1, -2), -1) @ v
        return self.o_proj(y.transpose(1, 2).reshape(b, t, w))


class NormedLayer(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.attn = NormedAttention(width)

    def forward(self, x):
        return x + self.attn(self.norm(x))


@needs_dot
def test_the_breadth_estimate_sees_parallel_branches_in_nested_boxes_side_by_side():
    # dot draws the three projections level, and each norm's box beside the projection above
    # it (its parameters share that projection's last rank): an estimate that ranked the
    # values low and started each norm's box at its first op said a fifth less than dot drew.
    import re
    import subprocess

    from graphviz_autograd.views.page_fit import picture_size

    model = nn.Sequential(NormedLayer())
    with record(model) as rec:
        out = model(torch.randn(2, 3, 16)).sum()
    dot = make_dot(out, recorder=rec, depth="full")
    view = dot.prepared
    svg = subprocess.run(["dot", "-Tsvg"], input=dot.source.encode(), capture_output=True, check=True).stdout
    width = float(re.search(rb'<svg width="([\d.]+)pt"', svg).group(1))
    estimate = picture_size(view.graph, view.options.direction, view.compact, view.options.clusters)[0]
    assert width <= estimate <= 1.25 * width, (estimate, width)
