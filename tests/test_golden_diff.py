"""A golden test that fails leads its message with what changed, in the words of diff(),
and leaves a picture of the diff beside the obtained file."""

from __future__ import annotations

import shutil

import pytest

from graphviz_autograd.testing.pytest_plugin import dot_graph, graph_diff
from graphviz_autograd.testing.structure import structure_graph, structure_text

from . import diff_models as models
from .test_plugin import run
from .test_plugin_goldens import MLP_GOLDEN, mlp_project  # noqa: F401 (a fixture)

SAID = "*the model: TanhBackward0 where ReluBackward0 was"


@pytest.mark.parametrize("kind", ["structure", "drawing"])
def test_a_failed_golden_leads_with_the_diff_and_draws_it(mlp_project, monkeypatch, kind):  # noqa: F811
    if kind == "drawing":
        mlp_project.makeini("[pytest]\nautograd_golden_kind = drawing\n")
    run(mlp_project, "--update-golden").assert_outcomes(passed=1)
    monkeypatch.setenv("MLP_ACT", "tanh")
    result = run(mlp_project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*What changed:", SAID, "*The diff is drawn in *mlp.obtained.diff.*", "*differs from*"])
    folder = (mlp_project.path / MLP_GOLDEN).parent
    picture = folder / ("mlp.obtained.diff.svg" if shutil.which("dot") else "mlp.obtained.diff.gv")
    assert picture.is_file()
    if picture.suffix == ".svg":
        assert b"TanhBackward0" in picture.read_bytes() and b"stroke-dasharray" in picture.read_bytes()
    # Passing again takes the picture away with the obtained file.
    monkeypatch.delenv("MLP_ACT")
    run(mlp_project).assert_outcomes(passed=1)
    assert not picture.exists()


def test_a_structure_text_reads_back_as_the_graph_it_was_written_from():
    graph = models.resnet_graph(models.resnet())
    text = structure_text(graph)
    assert structure_text(structure_graph(text)) == text
    assert graph_diff(text, text) is not None and graph_diff(text, text).equal  # type: ignore[union-attr]


def test_a_drawing_reads_back_with_its_modules_and_kinds():
    from graphviz_autograd.drawing.dot_writer import to_dot

    old, new = models.resnet_graph(models.resnet()), models.resnet_graph(models.resnet(blocks=3))
    read = dot_graph(to_dot(old, depth="full", fold_repeated=False))
    assert {m.path for m in read.modules} >= {"layers", "layers.0", "layers.1", "stem"}
    assert {n.kind for n in read.nodes} >= {"op", "parameter", "output"}
    found = graph_diff(to_dot(old, depth="full", fold_repeated=False), to_dot(new, depth="full", fold_repeated=False), drawing=True)
    assert found is not None and found.sentences[0].startswith("layers.2: a Block added")


def test_the_numbers_an_op_takes_are_in_its_structure_line_and_read_back():
    import torch

    from graphviz_autograd import record, walk

    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.eps = 1e-05
            self.w = torch.nn.Parameter(torch.ones(3))

        def forward(self, x):
            return ((self.w * x + self.eps) * 0.5).sum()

    model = Scale()
    with record(model) as rec:
        loss = model(torch.ones(3))
    text = structure_text(walk(loss, model, recorder=rec))
    assert "with=eps=1e-05" in text.replace('"', "") and "with=0.5" in text
    assert structure_text(structure_graph(text)) == text
    # A changed number is a changed line.
    model.eps = 1e-06
    with record(model) as rec:
        loss = model(torch.ones(3))
    assert structure_text(walk(loss, model, recorder=rec)) != text
