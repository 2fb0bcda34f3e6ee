"""Fixtures shared by the test modules."""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET
from typing import Callable

import pytest

pytest_plugins = ["pytester"]

_SVG = "{http://www.w3.org/2000/svg}"
_XLINK_TITLE = "{http://www.w3.org/1999/xlink}title"


class DrawnNode:
    """A node as Graphviz drew it in SVG: its text lines and tooltip."""

    def __init__(self, lines: list[str], tooltip: str | None):
        self.lines = lines
        self.tooltip = tooltip


@pytest.fixture
def graphviz_svg() -> Callable[[str], dict[str, DrawnNode]]:
    """Draw DOT with ``dot -Tsvg`` and return its nodes by id, as Graphviz shows them.

    Fails the test when Graphviz rejects the DOT or warns about it. Graphviz writes a
    run of spaces as a space and no-break spaces; they are read back as spaces.
    """
    dot = shutil.which("dot")
    if dot is None:
        pytest.skip("Graphviz 'dot' is not installed")

    def draw(source: str) -> dict[str, DrawnNode]:
        done = subprocess.run([dot, "-Tsvg"], input=source.encode("utf-8"), capture_output=True, timeout=120)
        assert done.returncode == 0 and not done.stderr, done.stderr.decode("utf-8", "replace")
        root = ET.fromstring(done.stdout)
        nodes = {}
        for group in root.iter(_SVG + "g"):
            if group.get("class") != "node":
                continue
            node_id = group.find(_SVG + "title").text
            lines = [(t.text or "").replace("\xa0", " ") for t in group.iter(_SVG + "text")]
            link = group.find(".//" + _SVG + "a")
            tooltip = None if link is None else link.get(_XLINK_TITLE)
            if tooltip is not None:
                tooltip = tooltip.replace("\xa0", " ")
            nodes[node_id] = DrawnNode(lines, tooltip)
        return nodes

    return draw
