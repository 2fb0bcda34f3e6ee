"""A model file that calls sys.exit(): one line naming the file and line, exit status 1, never a silent 0."""

from __future__ import annotations

import textwrap

import pytest
from click.testing import CliRunner

from graphviz_autograd.cli.commands import main

AT_IMPORT = """
import sys
import torch
from torch import nn

model = nn.Linear(2, 1)
example_inputs = (torch.ones(1, 2),)
sys.exit({code})
"""

IN_FORWARD = """
import sys
import torch
from torch import nn

class Net(nn.Module):
    def forward(self, x):
        sys.exit({code})

model = Net()
example_inputs = (torch.ones(1, 2),)
"""


@pytest.mark.parametrize("command", ["render", "check"])
@pytest.mark.parametrize("source, line, code", [(AT_IMPORT, 8, 0), (IN_FORWARD, 8, 3)])
def test_sys_exit_is_an_error_naming_file_and_line(tmp_path, command, source, line, code):
    path = tmp_path / "net.py"
    path.write_text(textwrap.dedent(source.format(code=code)))
    out = tmp_path / "net.dot"
    args = [command, str(path), "-q"] + (["-o", str(out)] if command == "render" else [])
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert result.output.count("\n") == 1
    assert result.output.startswith(f"Error: {path}:{line}: ") and f"sys.exit({code})" in result.output
    assert not out.exists()
