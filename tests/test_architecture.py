"""The table of docs/architecture.md is the package: one row per module, listed from the
bottom up, each with the modules of the package it imports. These tests hold the table
to the code, so the picture a newcomer reads cannot drift from the imports:

- every module of the package has a row, and every row names a module that exists;
- a row's imports are exactly the modules its code imports;
- a module imports only modules listed above it (imports run one way, no cycle);
- a module takes only public names from the others.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "graphviz_autograd"
TABLE = ROOT / "docs" / "architecture.md"

_ROW = re.compile(r"^\|\s*([^|]*?)\s*\|\s*`([\w/]+\.py)`\s*\|[^|]*\|\s*([^|]*?)\s*\|\s*$")


def table_rows() -> list[tuple[str, str, set[str]]]:
    """(stage, module as a dotted name, its imports as dotted names) for each row, in order."""
    rows = []
    stage = ""
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        found = _ROW.match(line)
        if found:
            named, path, imports = found.groups()
            stage = named or stage  # a stage is named on its first row
            module = path[: -len(".py")].replace("/", ".")
            listed = {name.strip(" `") for name in imports.split(",") if name.strip(" `—-")}
            rows.append((stage, module, listed))
    return rows


ROWS = table_rows()
# Bottom to top: a module may import the modules before it, never one after it.
MODULES = [module for _, module, _ in ROWS]
STAGE = {module: stage for stage, module, _ in ROWS}


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts)


def package_imports(module: str) -> list[tuple[str, list[str], int]]:
    """(imported module as a dotted name, names taken from it, line) for each import of
    this package in ``module``; a folder's ``__init__`` counts as the folder."""
    path = PACKAGE.joinpath(*module.split(".")).with_suffix(".py")
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    folder = module.split(".")[:-1]
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = folder[: len(folder) - (node.level - 1)] if node.level > 1 else folder
            target = base + (node.module.split(".") if node.module else [])
        elif (node.module or "").startswith("graphviz_autograd."):
            target = node.module.split(".")[1:]
        else:
            continue
        if node.module is None:  # from . import x: x is a module, or a name of the folder
            for alias in node.names:
                name = ".".join(target + [alias.name])
                is_module = PACKAGE.joinpath(*name.split(".")).with_suffix(".py").is_file()
                found.append((name if is_module else ".".join(target) or "__init__", [] if is_module else [alias.name], node.lineno))
        else:
            found.append((".".join(target), [alias.name for alias in node.names], node.lineno))
    return found


def test_every_module_of_the_package_has_a_row_and_every_row_a_module():
    modules = {_module_name(path) for path in PACKAGE.rglob("*.py")}
    modules = {m for m in modules if not m.endswith("__init__") or m == "__init__"}
    assert len(MODULES) == len(set(MODULES)), "a module has two rows in docs/architecture.md"
    assert sorted(modules - set(MODULES)) == [], "give each new module a row in docs/architecture.md"
    assert sorted(set(MODULES) - modules) == [], "docs/architecture.md names modules that do not exist"


def test_folder_inits_hold_no_code():
    # A folder's __init__.py says what the stage is; the code lives in named modules.
    for init in PACKAGE.glob("*/__init__.py"):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        body = [node for node in tree.body if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
        assert body == [], f"{init.relative_to(ROOT)} holds code"


@pytest.mark.parametrize("module", MODULES)
def test_a_row_lists_exactly_the_modules_its_code_imports(module):
    (listed,) = [imports for _, name, imports in ROWS if name == module]
    imported = {name for name, _, _ in package_imports(module)}
    assert imported == listed, (
        f"docs/architecture.md lists {sorted(listed)} for {module}; its code imports {sorted(imported)}"
    )


@pytest.mark.parametrize("module", MODULES)
def test_a_module_imports_only_modules_above_it_in_the_table(module):
    below = set(MODULES[: MODULES.index(module)]) | {"__init__"}
    upward = [(name, line) for name, _, line in package_imports(module) if name not in below]
    assert not upward, f"{module} imports {upward}, which are not above it in docs/architecture.md"


@pytest.mark.parametrize("module", MODULES)
def test_a_module_takes_only_public_names_from_the_others(module):
    private = [
        (source, name, line)
        for source, names, line in package_imports(module)
        for name in names
        if name.startswith("_") and name != "__version__"
    ]
    assert not private, f"{module} takes private names {private}"


def test_stages_are_folders_and_run_in_the_order_of_the_pipeline():
    # Each folder is one stage, and its modules sit together in the table.
    order = []
    for module in MODULES:
        folder = module.split(".")[0] if "." in module else ""
        if folder and folder not in order:
            order.append(folder)
        if folder:
            assert STAGE[module] == STAGE[next(m for m in MODULES if m.startswith(folder + "."))], module
    for folder in order:
        rows = [i for i, m in enumerate(MODULES) if m.startswith(folder + ".")]
        assert rows == list(range(rows[0], rows[-1] + 1)), f"the modules of {folder}/ are not together in the table"


# --- the picture ---------------------------------------------------------------------

PICTURE = ROOT / "docs" / "architecture.dot"


def picture_source() -> str:
    """The DOT of docs/architecture.svg, made from the table: a box per stage listing its
    modules, and an arrow from a stage to each stage that imports it directly and not
    only through another (the imports' transitive reduction), so the picture reads as
    the pipeline, top to bottom."""
    stages: dict[str, list[str]] = {}
    for stage, module, _ in ROWS:
        stages.setdefault(stage, []).append(module)
    uses: dict[str, set[str]] = {stage: set() for stage in stages}  # stage -> the stages it imports
    for stage, _, imports in ROWS:
        for imported in imports - {"__init__"}:  # the package's version, read by the command line
            target = STAGE.get(imported)
            if target and target != stage:
                uses[stage].add(target)

    def reaches(start: str, goal: str, skip: str) -> bool:
        seen, todo = set(), [s for s in uses[start] if s != skip]
        while todo:
            stage = todo.pop()
            if stage == goal:
                return True
            if stage not in seen:
                seen.add(stage)
                todo.extend(uses[stage])
        return False

    lines = [
        "digraph architecture {",
        "\tgraph [fontname=Helvetica nodesep=0.3 rankdir=TB ranksep=0.3]",
        '\tnode [fillcolor="#f2f5fa" fontname=Helvetica fontsize=10 shape=box style="rounded,filled"]',
        "\tedge [arrowsize=0.7 color=gray35]",
    ]
    for stage, modules in stages.items():
        names = "\\l".join(module.rpartition(".")[2] + ".py" for module in modules)
        lines.append(f'\t"{stage}" [label="{stage}\\n\\n{names}\\l"]')
    order = list(stages)
    for stage in order:
        for used in sorted(uses[stage], key=order.index):
            if not reaches(stage, used, skip=used):
                lines.append(f'\t"{used}" -> "{stage}"')
    lines.append("}")
    return "\n".join(lines) + "\n"


def test_the_picture_is_drawn_from_the_table():
    assert PICTURE.read_text(encoding="utf-8") == picture_source(), (
        "docs/architecture.dot is out of date: python -m tests.test_architecture rewrites it and its SVG"
    )


if __name__ == "__main__":
    import subprocess

    PICTURE.write_text(picture_source(), encoding="utf-8")
    subprocess.run(["dot", "-Tsvg", str(PICTURE), "-o", str(PICTURE.with_suffix(".svg"))], check=True)
