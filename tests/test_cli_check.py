"""graphviz-autograd check: the report, its JSON, its exit status; render --diagnose."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphviz_autograd.cli.commands import findings_table, main
from graphviz_autograd.checks.diagnosis import Finding

REPO = Path(__file__).resolve().parent.parent

STRAY = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.head = nn.Linear(2, 1)
        self.weights = [torch.ones(2, requires_grad=True)]

    def forward(self, x):
        return self.fc(x) * self.weights[0]

model = Net()
example_inputs = (torch.ones(3, 2),)

def loss(output):
    return output.sum()
"""

NAN = """
import torch
from torch import nn

model = nn.Linear(2, 1)
example_inputs = (torch.tensor([[1.0, float("nan")]]),)

def loss(output):
    return output.sum()
"""

FINDING_KEYS = {"severity", "code", "message", "nodes", "subject"}


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def model_file(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "net.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def test_clean_sample_exits_0_with_a_summary():
    result = invoke("check", REPO / "samples" / "mnist_cnn.py", "-q")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[-1] == "5 findings: 0 errors, 0 warnings, 5 info"
    # recorded, so saved memory is told per module, largest first
    assert [line.split()[2] for line in lines[1:-1]] == ["-", "conv2", "fc1", "fc2", "conv2_drop"]
    assert "\x1b[" not in result.output  # not a terminal: plain text


def test_error_finding_exits_1_with_an_aligned_table(tmp_path):
    result = invoke("check", model_file(tmp_path, STRAY), "-q", "--top-memory", "0")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0].split() == ["severity", "code", "subject", "message"]
    rows = [line.split()[:3] for line in lines[1:-1]]
    assert rows == [
        ["error", "unregistered_leaf", "weights[0]"],
        ["warning", "unused_parameter", "head.weight"],
        ["warning", "unused_parameter", "head.bias"],
    ]
    column = lines[0].index("message")  # every message starts in the same column
    assert all(line[column - 2 : column] == "  " and line[column] != " " for line in lines[1:-1])
    assert lines[-1] == "3 findings: 1 error, 2 warnings, 0 info"


def test_json_schema_and_gradients_from_the_loss(tmp_path):
    result = invoke("check", model_file(tmp_path, NAN), "--json", "-q", "--top-memory", "0")
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert set(report) == {"findings", "summary"}
    assert report["summary"] == {"error": 1, "warning": 0, "info": 0}
    (finding,) = report["findings"]
    assert set(finding) == FINDING_KEYS
    assert (finding["severity"], finding["code"], finding["subject"]) == ("error", "grad_nonfinite", "weight")
    assert finding["nodes"] and all(isinstance(n, str) for n in finding["nodes"])


def test_bad_input_is_one_line_and_exit_1(tmp_path):
    result = invoke("check", tmp_path / "missing.py", "-q")
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "does not exist" in result.output
    assert "Traceback" not in result.output


def test_table_colours_severities_only_when_asked():
    findings = [Finding("error", "grad_nonfinite", "w: NaN", ("n1",), "w"), Finding("info", "saved_memory", "m", (), "")]
    plain = findings_table(findings)
    coloured = findings_table(findings, color=True)
    assert "\x1b[" not in plain and "\x1b[31m" in coloured
    assert [line.split() for line in plain.splitlines()][1] == ["error", "grad_nonfinite", "w", "w:", "NaN"]
    assert findings_table([]) == "no findings\n"


@pytest.mark.skipif(shutil.which("dot") is None, reason="needs the Graphviz dot executable")
def test_render_diagnose_marks_the_stray_weight(tmp_path):
    out = tmp_path / "net.dot"
    result = invoke("render", model_file(tmp_path, STRAY), "--diagnose", "-o", out, "-q")
    assert result.exit_code == 0, result.output
    source = out.read_text()
    red = [line for line in source.splitlines() if line.startswith("\tn") and "color=red" in line and "->" not in line]
    assert len(red) == 2 and any("weights[0]" in line for line in red)
    assert "pooler" not in source and "head.weight" in source  # listed in the note
    done = subprocess.run(["dot", "-Tsvg"], input=source.encode(), capture_output=True)
    assert done.returncode == 0 and not done.stderr
    plain = tmp_path / "plain.dot"
    invoke("render", model_file(tmp_path, STRAY), "-o", plain, "-q")
    assert "color=red" not in plain.read_text()
