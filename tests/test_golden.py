"""Golden DOT for every sample and every hard case: the same graph, the same bytes.

Regenerate with ``pytest --update-golden`` and review the diff before committing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from graphviz_autograd.cli.model_file import load_model_file

from .graph_cases import CASES

SAMPLES = sorted((Path(__file__).parent.parent / "samples").glob("*.py"))


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.stem)
def test_sample_graph_matches_golden(sample, autograd_golden):
    loaded = load_model_file(sample)
    autograd_golden.check(loaded.run(), f"sample_{sample.stem}", model=loaded.model)


@pytest.mark.parametrize("name", sorted(CASES))
def test_hard_case_matches_golden(name, autograd_golden):
    case = CASES[name]()
    autograd_golden.check(case.outputs, name, params=case.params, **case.options)


def test_every_sample_has_a_golden_file():
    golden = Path(__file__).parent / "golden"
    missing = [s.stem for s in SAMPLES if not (golden / f"sample_{s.stem}.dot").exists()]
    assert SAMPLES and not missing
