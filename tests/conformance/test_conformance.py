"""Conformance: spans recorded from real instrumentation packages (tests/conformance/fixtures, made by
`python -m tests.conformance.record`) ingested and built by phaselens, checked against the fake servers' truth.

Every check that does not hold today is listed in KNOWN_GAPS with its reason; it runs as a strict xfail, so a
gap that gets fixed fails the suite until its entry is removed. Checks: see evaluate.CHECKS.
"""

from __future__ import annotations

import pytest

from tests.conformance import evaluate as E
from tests.conformance.known_gaps import KNOWN_GAPS
from tests.summary import add_summary

ENTRIES = E.entries()
CASES = [(e, c) for e in ENTRIES for c in E.CHECKS]


def _param(entry: str, check: str):
    reason = KNOWN_GAPS.get((entry, check))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(entry, check, marks=marks, id=f"{entry}-{check}")


@pytest.mark.skipif(not ENTRIES, reason="no recorded conformance fixtures")
@pytest.mark.parametrize("entry,check", [_param(e, c) for e, c in CASES])
def test_conformance(entry, check):
    ok, detail = E.evaluate(entry)[check]
    assert ok, f"{entry} {check}: {detail}"


def test_known_gaps_name_real_cases():
    unknown = [k for k in KNOWN_GAPS if k not in set(CASES)]
    assert not unknown, f"KNOWN_GAPS entries that are not a case of the suite: {unknown}"


def test_summary_table(request):
    """The conformance table, printed in the run's summary (tests/conftest.py), also when tests run in workers."""
    from tests.conformance.matrix import results_table

    table = results_table()
    add_summary(request.config, "conformance of real instrumentations", table)
    assert all(e in table for e in ENTRIES)


def test_docs_table_matches_suite():
    from pathlib import Path

    from tests.conformance.matrix import render

    doc = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"
    assert doc.read_text() == render(), (
        "docs/conformance.md drifted from the suite; regenerate: python -m tests.conformance.matrix > docs/conformance.md")
