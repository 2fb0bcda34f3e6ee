"""The README's Python examples run as written, from the repository root."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
# Blocks that define tests belong in a user's own suite; the plugin's tests cover them.
BLOCKS = [
    block
    for block in re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.DOTALL)
    if "def test_" not in block
]


def test_readme_has_python_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index, tmp_path, monkeypatch):
    block = BLOCKS[index]
    monkeypatch.chdir(ROOT)
    # Files the example writes go to a temporary folder, not the checkout.
    for written in ("mnist_cnn.pdf", "model.html", "run.html"):
        block = block.replace(f'"{written}"', repr(os.fspath(tmp_path / written)))
    namespace: dict = {}
    exec(compile(block, f"README.md block {index}", "exec"), namespace)
    if "render(" in block:
        assert (tmp_path / "mnist_cnn.pdf").read_bytes().startswith(b"%PDF")
    for page in ("model.html", "run.html"):
        if f'.save("{page}")' in BLOCKS[index]:
            assert (tmp_path / page).read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
