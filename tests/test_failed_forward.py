"""The graph of a forward pass that raised: what ran, and the failing call as a red node."""

from __future__ import annotations

import gc
import shutil
import textwrap
import weakref
import xml.etree.ElementTree as ET

import pytest
import torch
from click.testing import CliRunner
from torch import nn

from graphviz_autograd import check, explore, make_dot, record, render, walk
from graphviz_autograd.cli.commands import main
from graphviz_autograd.graph.autograd_graph import FAILED, OP

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")


class Mismatch(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(4, 8)
        self.l2 = nn.Linear(16, 4)  # takes 16 features; l1 gives 8

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


def failed_run(model, *inputs):
    rec = record(model)
    with pytest.raises(Exception) as raised:
        with rec:
            model(*inputs)
    return rec, raised.value


def test_the_failing_call_is_kept_with_its_module_error_and_inputs():
    rec, error = failed_run(Mismatch(), torch.randn(2, 4))
    failure = rec.failure
    assert (failure.call, failure.module, failure.module_type) == ("F.linear", "l2", "Linear")
    assert failure.error == f"RuntimeError: {str(error).splitlines()[0]}"
    assert failure.where.endswith(f"test_failed_forward.py:{Mismatch.forward.__code__.co_firstlineno + 1}")
    assert "l2.weight: (4, 16) float32, requires grad" in failure.inputs
    assert any(text.startswith("argument 0: (2, 8)") for text in failure.inputs)


def test_walk_draws_what_ran_up_to_the_failing_call():
    model = Mismatch()
    rec, _ = failed_run(model, torch.randn(2, 4))
    graph = walk(rec.failure, model, recorder=rec)
    failed = graph.nodes[0]
    assert (failed.id, failed.kind, failed.note, failed.module) == ("n0", OP, FAILED, "l2")
    feeding = sorted(graph.node(e.source).label for e in graph.edges if e.target == "n0")
    assert feeding == ["ReluBackward0", "l2.bias", "l2.weight"]
    assert {n.label for n in graph.nodes} >= {"AddmmBackward0", "l1.weight", "l1.bias"}
    assert not any(n.kind == "output" for n in graph.nodes)


def test_make_dot_draws_the_failing_call_red_with_its_error():
    rec, _ = failed_run(Mismatch(), torch.randn(2, 4))
    source = make_dot(rec.failure, recorder=rec).source
    line = next(line for line in source.splitlines() if line.strip().startswith("n0 ["))
    assert "color=red" in line and "F.linear FAILED" in line and "mat1 and mat2 shapes" in line
    assert "subgraph cluster" in source  # the modules as boxes, as for any recorded graph


def test_a_failure_caught_inside_the_forward_is_not_kept():
    class Careful(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            try:
                x = x.view(7)
            except RuntimeError:
                pass
            return self.fc(x)

    model = Careful()
    with record(model) as rec:
        model(torch.ones(2, 3))
    assert rec.failure is None


def test_an_error_raised_by_python_code_draws_up_to_the_last_call():
    class Checks(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            h = torch.tanh(self.fc(x))
            if h.shape[-1] != 5:
                raise ValueError("expected 5 features")
            return h

    model = Checks()
    rec, _ = failed_run(model, torch.ones(2, 3))
    assert rec.failure.call == "ValueError raised by Python code"
    assert rec.failure.error == "ValueError: expected 5 features"
    graph = walk(rec.failure, model, recorder=rec)
    assert [graph.node(e.source).label for e in graph.edges if e.target == "n0"] == ["TanhBackward0"]


def test_the_model_is_left_as_it_was_and_release_lets_go_of_the_graph():
    model = Mismatch()
    hooks = (len(model._forward_hooks), len(model._forward_pre_hooks))
    rec, error = failed_run(model, torch.randn(2, 4))
    del error
    assert (len(model._forward_hooks), len(model._forward_pre_hooks)) == hooks
    assert not torch.overrides._get_current_function_mode_stack()
    held = weakref.ref(rec.failure.tensors[0][1])
    rec.failure.release()
    gc.collect()
    assert held() is None


def test_check_and_explore_name_the_failure():
    model = Mismatch()
    rec, _ = failed_run(model, torch.randn(2, 4))
    findings = check(rec.failure, model, recorder=rec)
    assert findings[0].code == "forward_failed" and findings[0].nodes == ("n0",)
    assert "The forward pass stopped at F.linear in l2" in findings[0].message
    page = explore(rec.failure, recorder=rec)
    assert [f["code"] for f in page.data["findings"]] == ["forward_failed"]


@needs_dot
def test_render_writes_a_picture_of_the_failure(tmp_path):
    rec, _ = failed_run(Mismatch(), torch.randn(2, 4))
    path = render(rec.failure, tmp_path / "failed.svg", recorder=rec)
    svg = ET.parse(path).getroot()
    texts = " ".join(t.text or "" for t in svg.iter("{http://www.w3.org/2000/svg}text"))
    assert "F.linear FAILED" in texts


def test_a_shape_mismatch_inside_a_transformers_block():
    transformers = pytest.importorskip("transformers")
    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=16))
    model.transformer.h[1].mlp.c_proj.weight = nn.Parameter(torch.randn(7, 32))
    rec, _ = failed_run(model, torch.arange(8).unsqueeze(0))
    failure = rec.failure
    assert (failure.call, failure.module, failure.module_type) == ("torch.addmm", "transformer.h.1.mlp.c_proj", "Conv1D")
    graph = walk(failure, model, recorder=rec)
    # Everything the first block and the second block's attention made is there.
    modules = {n.module for n in graph.nodes}
    assert {"transformer.h.0.attn.c_attn", "transformer.h.1.attn.c_proj", "transformer.h.1.mlp.c_fc"} <= modules
    # Too big for a page: drawn as a module summary, where the box of the failing call is red
    # and a note says what failed.
    source = make_dot(failure, recorder=rec).source
    assert "The forward pass stopped at torch.addmm in transformer.h.1.mlp.c_proj" in source
    # The red box is the failing call's module or the box that holds it at the depth drawn.
    (box,) = [line for line in source.splitlines() if "color=red" in line and "shape=note" not in line]
    label = box.split('label="', 1)[1].split("\\n", 1)[0]
    assert "transformer.h.1.mlp.c_proj".startswith(label) and label.startswith("transformer.h.1")


# --- the command line ---------------------------------------------------------------

MISMATCH_FILE = """
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = nn.Linear(4, 8)
            self.l2 = nn.Linear(16, 4)

        def forward(self, x):
            return self.l2(torch.relu(self.l1(x)))

    model = Net()
    example_inputs = (torch.randn(2, 4),)
"""


@pytest.fixture
def mismatch_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "net.py"
    path.write_text(textwrap.dedent(MISMATCH_FILE), encoding="utf-8")
    return path


@needs_dot
def test_cli_render_exits_1_and_draws_the_failure_beside_the_output(mismatch_file, tmp_path):
    result = CliRunner().invoke(main, ["render", "net.py", "-o", "out.svg", "-q"])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "mat1 and mat2 shapes cannot be multiplied" in result.stderr
    assert "is drawn in out.failed.svg" in result.stderr and "F.linear in l2 (Linear)" in result.stderr
    assert not (tmp_path / "out.svg").exists()
    assert "F.linear FAILED" in (tmp_path / "out.failed.svg").read_text(encoding="utf-8")


@needs_dot
def test_cli_check_exits_1_and_says_where_the_picture_is(mismatch_file, tmp_path):
    result = CliRunner().invoke(main, ["check", "net.py", "-q"])
    assert result.exit_code == 1
    assert "is drawn in net.failed.svg" in result.stderr
    assert (tmp_path / "net.failed.svg").exists()


def test_cli_render_of_a_page_draws_the_failure_as_a_page(mismatch_file, tmp_path):
    result = CliRunner().invoke(main, ["render", "net.py", "-o", "out.html", "-q", "--layout", "fixed"])
    assert result.exit_code == 1
    assert "is drawn in out.failed.html" in result.stderr
    assert "forward_failed" in (tmp_path / "out.failed.html").read_text(encoding="utf-8")
