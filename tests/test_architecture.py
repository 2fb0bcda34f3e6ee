"""Imports run one way: each module of the package imports only modules below it,
and only their public names (see docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "graphviz_autograd"

# Bottom to top. A module may import the modules before it, never one after it.
LAYERS = [
    "errors",
    "graph",
    "style",
    "describe",
    "collapse",
    "views",
    "stacking",
    "junctions",
    "structure",
    "options",
    "page",
    "attribute_names",
    "naming",
    "record",
    "deep_graphs",
    "walk",
    "diagnose",
    "profiling",
    "dot",
    "layout",
    "render",
    "budget",
    "notebook",
    "explore",
    "api",
    "model_file",
    "cli",
    "pytest_checks",
    "pytest_plugin",
    "__main__",
]


def package_imports(module: str) -> list[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for each import of this package in ``module``."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(), filename=f"{module}.py")
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module is None:  # from . import x
                found.extend((alias.name, [], node.lineno) for alias in node.names)
            else:
                found.append((node.module.split(".")[0], [alias.name for alias in node.names], node.lineno))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("graphviz_autograd."):
            found.append((node.module.split(".")[1], [alias.name for alias in node.names], node.lineno))
    return found


def test_every_module_of_the_package_has_a_place_in_the_layers():
    modules = {path.stem for path in PACKAGE.glob("*.py")} - {"__init__"}
    assert modules == set(LAYERS), "place new modules in LAYERS (and in docs/architecture.md)"


@pytest.mark.parametrize("module", LAYERS)
def test_a_module_imports_only_modules_below_it(module):
    below = set(LAYERS[: LAYERS.index(module)]) | {"__version__"}
    upward = [(name, line) for name, _, line in package_imports(module) if name not in below]
    assert not upward, f"{module}.py imports {upward}, which are not below it"


@pytest.mark.parametrize("module", LAYERS)
def test_a_module_takes_only_public_names_from_the_others(module):
    private = [
        (source, name, line)
        for source, names, line in package_imports(module)
        for name in names
        if name.startswith("_") and name != "__version__"
    ]
    assert not private, f"{module}.py takes private names {private}"
