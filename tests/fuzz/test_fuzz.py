"""Bounded fuzz run: seeded mutants of one seed file per adapter, every loader rule checked on each.

The longer run over every seed: `python -m tests.fuzz.run --long` (prints tried/held per adapter).
"""

from __future__ import annotations

import random
from pathlib import Path

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


def test_otlp_mutants_loaded_in_one_run_get_what_each_gets_in_a_run_of_its_own(tmp_path, monkeypatch):
    """A run's small OTLP files are parsed ahead, several in one pass (ingest/otlp.py `ParseAhead`). Every mutant of
    three seeds (JSON Lines, bad records, one document: cut lines and documents, damaged gzip, flipped bytes, bad
    values), loaded in one run, gets the ledger row and stores the rows it gets when each is loaded in a run of its
    own, in the same order."""
    from phaselens.ingest import otlp
    from phaselens.pipeline.load import ingest
    from phaselens.pipeline.store import connect

    from .harness import ROOT
    from .mutate import mutants

    files: list[Path] = []
    contents: set[bytes] = set()
    for s_i, rel in enumerate(SEEDS["otlp_json"][:3]):
        rng = random.Random(f"ahead:{rel}")
        for k, m in enumerate(mutants((ROOT / rel).read_bytes(), rng, cuts=3, flips=2, values=3, gz_cuts=1)):
            if m.data in contents:  # the same bytes again would be `unchanged`, whichever way it is loaded
                continue
            contents.add(m.data)
            files.append(tmp_path / "in" / f"{s_i}.{k:03d}.{m.name.replace('@', '_at_').replace('/', '_')}")
            files[-1].parent.mkdir(exist_ok=True)
            files[-1].write_bytes(m.data)
    used: list[str] = []
    real = otlp._parsed_ahead

    def parsed_ahead(src):
        early = real(src)
        if early is not None:
            used.append(src.path.name)
        return early

    monkeypatch.setattr(otlp, "_parsed_ahead", parsed_ahead)
    alone = connect(tmp_path / "alone.duckdb")
    want = [ingest(alone, [f]).files[0] for f in files]
    assert used == []
    together = connect(tmp_path / "together.duckdb")
    got = ingest(together, files).files
    assert len(files) > 40 and len(used) > len(files) // 2, (len(files), len(used))
    assert {r.status for r in want} >= {"loaded", "partial", "failed"}, {r.status for r in want}

    def outcome(r):
        return (r.file, r.status, r.adapter, r.accepted, r.duplicates, r.rejected, r.skipped, r.replaced, r.message)

    assert [outcome(r) for r in got] == [outcome(r) for r in want]
    for sql in ("SELECT * EXCLUDE (load_id) FROM raw_calls", "SELECT * EXCLUDE (load_id) FROM raw_otlp_spans",
                "SELECT source, locator, reason, detail, raw FROM raw_rejects"):
        assert sorted(together.execute(sql).fetchall(), key=repr) == sorted(alone.execute(sql).fetchall(), key=repr), sql
