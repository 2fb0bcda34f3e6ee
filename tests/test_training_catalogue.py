"""The catalogue of training runs (tests/training_runs.py): every healthy run gives no
warning and no error, and every broken run is named by the right rule, layer and first
step, with nothing else but the consequences its row lists.

``python -m tests.training_runs`` prints the table with precision and recall."""

from __future__ import annotations

import functools

import pytest

from .training_runs import BROKEN, CATALOGUE, HEALTHY, Outcome, run, table


@functools.lru_cache(maxsize=None)
def outcome(name: str) -> Outcome:
    return run(next(entry for entry in CATALOGUE if entry.name == name))


def test_the_catalogue_holds_ten_healthy_and_ten_broken_runs_of_distinct_names():
    assert len(HEALTHY) >= 10 and len(BROKEN) >= 10
    assert len({entry.name for entry in CATALOGUE}) == len(CATALOGUE)
    assert all(entry.expected is None for entry in HEALTHY) and all(entry.expected is not None for entry in BROKEN)
    # Every rule that names a broken run is one of the rules, once at least.
    assert {entry.expected.code for entry in BROKEN if entry.expected} >= {
        "grad_zero", "dead_units", "grad_norm_span", "grad_norm_trend", "nonfinite_seen", "frozen_parameter",
        "grad_missing", "update_ratio", "unused_parameter", "saturated",
    }


@pytest.mark.parametrize("name", [entry.name for entry in HEALTHY])
def test_a_healthy_run_gives_no_warning_and_no_error(name):
    found = outcome(name)
    assert [(f.code, f.subject, f.message) for f in found.alarms] == []


@pytest.mark.parametrize("name", [entry.name for entry in BROKEN])
def test_a_broken_run_is_named_by_its_rule_layer_and_first_step(name):
    found = outcome(name)
    expected = found.run.expected
    assert expected is not None
    match = found.match()
    assert match is not None, (
        f"{name}: expected {expected} (step {found.expected_step()}); found "
        + "; ".join(f"{f.code} {f.subject} step {f.step}" for f in found.findings)
    )
    assert match.severity in ("error", "warning")
    assert [(f.code, f.subject, f.message) for f in found.false_alarms()] == []


def test_the_table_says_what_each_run_expected_and_found_with_precision_and_recall():
    names = ["mlp_adam", "dead_from_init"]
    text = table([outcome(name) for name in names])
    assert "| mlp_adam | none | none | - |" in text
    assert "| dead_from_init | grad_zero on fc1 from step 0 | grad_zero fc1.weight | 0 |" in text
    assert text.splitlines()[-1].startswith("precision 1.00 (1 expected findings and 0 listed consequences among 1 warnings")
    assert "recall 1.00 (1 of 1 expected" in text
