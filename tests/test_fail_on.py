"""A check that can fail a CI run: fail_on in the API, --fail-on on the command line, the pytest fixture."""

from __future__ import annotations

import textwrap

import pytest
import torch
from click.testing import CliRunner
from torch import nn

from graphviz_autograd import CheckFailedError, OptionError, check
from graphviz_autograd.cli.commands import main


class UnusedHead(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Linear(2, 2)
        self.head = nn.Linear(2, 1)

    def forward(self, x):
        return self.body(x)


def test_fail_on_warning_raises_a_named_error_listing_the_findings():
    model = UnusedHead()
    loss = model(torch.randn(3, 2)).sum()
    assert [f.code for f in check(loss, model, fail_on="error", top_memory=0)] == ["unused_parameter"] * 2
    with pytest.raises(CheckFailedError) as raised:
        check(loss, model, backward=True, fail_on="warning")
    assert isinstance(raised.value, AssertionError)
    assert [f.subject for f in raised.value.findings] == ["head.weight", "head.bias"]
    assert "2 findings at or above 'warning'" in str(raised.value) and "head.weight" in str(raised.value)
    with pytest.raises(OptionError, match="fail_on must be one of"):
        check(loss, model, fail_on="warnings")


def test_fail_on_info_fails_on_anything():
    model = nn.Linear(2, 1)
    loss = model(torch.randn(3, 2)).sum()
    assert check(loss, model, fail_on="info", top_memory=0) == []
    with pytest.raises(CheckFailedError):
        check(loss, model, fail_on="info")  # the memory report is info


MODEL_FILE = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(2, 2)
        self.head = nn.Linear(2, 1)

    def forward(self, x):
        return self.body(x)

model = Net()
example_inputs = (torch.randn(3, 2),)
"""


def test_cli_fail_on_sets_the_exit_status(tmp_path):
    path = tmp_path / "net.py"
    path.write_text(textwrap.dedent(MODEL_FILE))

    def status(*options):
        return CliRunner().invoke(main, ["check", str(path), "-q", *options]).exit_code

    assert status() == 0  # warnings only: the default fails on errors
    assert status("--fail-on", "error") == 0
    assert status("--fail-on", "warning") == 1
    assert status("--fail-on", "info", "--top-memory", "0") == 1
    assert status("--fail-on", "fatal") == 2  # a usage error


TEST_FILE = """
import torch
from torch import nn
from graphviz_autograd import record

def test_clean(autograd_check):
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh(), nn.Linear(2, 1))
    with record(model) as rec:
        loss = model(torch.randn(3, 2)).pow(2).mean()
    assert autograd_check(loss, model, recorder=rec) == []

def test_unused_head(autograd_check):
    model = nn.ModuleDict({"body": nn.Linear(2, 2), "head": nn.Linear(2, 1)})
    loss = model["body"](torch.randn(3, 2)).sum()
    autograd_check(loss, model)

def test_unused_head_tolerated(autograd_check):
    model = nn.ModuleDict({"body": nn.Linear(2, 2), "head": nn.Linear(2, 1)})
    loss = model["body"](torch.randn(3, 2)).sum()
    assert len(autograd_check(loss, model, fail_on="error")) == 2
"""


def test_pytest_fixture_fails_a_test_whose_parameters_do_not_learn(pytester):
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_model=TEST_FILE)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-q")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_unused_head*", "*warning unused_parameter head.weight*"])
    assert "Traceback" not in result.stdout.str()
