"""Bounded fuzz run: seeded mutants of one seed file per adapter, every loader rule checked on each.

The longer run over every seed: `python -m tests.fuzz.run --long` (prints tried/held per adapter).
"""

from __future__ import annotations

import pytest

from phaselens.ingest.registry import adapters

from .harness import SEEDS, run_adapter


def test_every_adapter_has_seeds():
    assert {a.name for a in adapters()} == set(SEEDS)


@pytest.mark.parametrize("adapter", sorted(SEEDS))
def test_mutants_of_each_adapter_are_handled(adapter, tmp_path):
    report = run_adapter(adapter, tmp_path, seeds=SEEDS[adapter][:1])
    assert report.tried >= 15
    assert report.failures == [], "\n".join(report.failures[:20])
    assert report.held == report.tried
