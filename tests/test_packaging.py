"""The release files: a pure-Python wheel, an sdist of the package alone, and
metadata a package index shows as it is meant."""

from __future__ import annotations

import email
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What the build reads; copied so that building leaves nothing in the checkout.
SOURCES = ["pyproject.toml", "LICENSE", "MANIFEST.in", "README.md", "docs/package-index.md", "graphviz_autograd"]
# A Markdown link or image whose target is not an absolute URL.
RELATIVE_LINK = re.compile(r"!?\[[^\]]*\]\((?!https?://)[^)]*\)")
CODE_BLOCK = re.compile(r"```.*?```", re.DOTALL)


def relative_links(markdown: str) -> list[str]:
    return RELATIVE_LINK.findall(CODE_BLOCK.sub("", markdown))


def _setuptools_at_least(major: int) -> bool:
    try:
        import setuptools
    except ImportError:
        return False
    return int(setuptools.__version__.split(".")[0]) >= major


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("build", reason="the build package is not installed")
    if not _setuptools_at_least(77):
        pytest.skip("building without isolation needs setuptools 77 or later")
    source = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_wheel_is_pure_python(dist):
    (wheel,) = dist.glob("*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "graphviz_autograd/py.typed" in names and "graphviz_autograd/testing/structure.py" in names and "graphviz_autograd/explorer/web/explorer.js" in names
    assert not [n for n in names if n.endswith((".c", ".so", ".pyd"))]
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_metadata_license_classifiers_and_index_page(dist):
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_bytes(archive.read(name))
    assert metadata["License-Expression"] == "MIT"
    assert metadata["Requires-Python"] == ">=3.10"
    classifiers = metadata.get_all("Classifier")
    assert "Programming Language :: Python :: 3.10" in classifiers
    assert "Typing :: Typed" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # the SPDX expression says it
    page = metadata.get_payload()
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert "autograd_golden" in page
    assert relative_links(page) == []


def test_the_sdist_holds_the_package_and_no_tests(dist):
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = [n.split("/", 1)[1] for n in archive.getnames() if "/" in n]
    assert "LICENSE" in names and "pyproject.toml" in names and "graphviz_autograd/testing/pytest_plugin.py" in names
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "samples/"))]


def test_the_readme_s_relative_links_point_at_files_of_the_repository():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [re.search(r"\(([^)#]*)", link).group(1) for link in relative_links(readme)]
    missing = [t for t in targets if t and not (ROOT / t).exists()]
    assert targets and missing == []
