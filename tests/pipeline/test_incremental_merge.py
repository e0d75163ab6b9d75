"""Incremental build = full build when a load replaces stored calls: spans of a call stored earlier arrive in a
later file (docs/ingest.md, "Across files, chunks and flushes"), so the call's row changes, or its call id is retired
because the later span started first. The build recomputes the replaced rows' old days and drops a retired call's
built rows."""

from __future__ import annotations

from phaselens.models.config import load_config
from phaselens.pipeline.build import build
from phaselens.pipeline.load import ingest
from phaselens.pipeline.store import connect
from tests.ingest.test_otlp_merge import MS, SDK, LLMETRY, T0, _recorded_pair_lines, batch, llmetry_attrs, sdk_attrs, \
    span, write
from tests.pipeline.test_incremental import CONFIGS, _diff, _snapshot

BUILT_PER_CALL = ("call_attribution", "call_timing", "call_costs", "call_workload")


def _incremental_then_full(con, cfg, first, second):
    ingest(con, [first])
    assert build(con, cfg).full
    ingest(con, [second])
    incr = build(con, cfg)
    assert not incr.full, incr.reason
    snap = _snapshot(con)
    build(con, cfg, full=True)
    return incr, snap, _snapshot(con)


def test_recorded_pair_over_two_files_builds_incrementally_to_the_full_build(tmp_path):
    """The SDK's spans first (twelve calls stored and built), then the instrumentation's, which started earlier:
    the twelve calls are re-named by the instrumentation's spans and the SDK-named ones leave every built table."""
    inst, sdk = _recorded_pair_lines()
    con = connect(tmp_path / "s.duckdb")
    cfg = load_config(CONFIGS["demo"])
    _, incr, full = _incremental_then_full(con, cfg, write(tmp_path, "sdk.jsonl", *sdk),
                                           write(tmp_path, "inst.jsonl", *inst))
    assert not _diff(incr, full), "\n".join(_diff(incr, full))
    retired = [r[0] for r in con.execute("SELECT call_id FROM raw_calls_replaced WHERE retired").fetchall()]
    assert len(retired) == 12
    for t in BUILT_PER_CALL:
        assert con.execute(f"SELECT count(*) FROM {t} WHERE call_id IN (SELECT unnest(?))", [retired]).fetchone()[0] == 0
        assert con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == 12, t
    con.close()


def test_a_call_moved_to_the_day_before_leaves_its_old_day(tmp_path):
    """The SDK's own span starts just after midnight and is stored on that day; the instrumentation span around it,
    which started before midnight, arrives later: the call moves to the day before, and the day it left is rebuilt
    (its per-day tables too), as a full build gives. Other calls on both days keep those days' tables non-empty."""
    midnight_ms = ((T0 // (86_400_000 * MS)) + 1) * 86_400_000 - T0 // MS
    model = "claude-3-5-haiku-20241022"
    others = [span(f"o{k + 3}{i}", f"s{k + 3}{i}", midnight_ms + k * 3_600_000 + i * 50, midnight_ms + k * 3_600_000 + i * 50 + 900,
                   sdk_attrs(100 + i, 20 + i, ttft=0.2, stream=True, model=model))
              for k in (-3, 2) for i in range(6)]
    sdk_span = span("e1", "x1", midnight_ms + 100, midnight_ms + 1400, sdk_attrs(500, 80, ttft=0.3, stream=True))
    inst_span = span("d1", "i1", midnight_ms - 500, midnight_ms + 1450, llmetry_attrs(500, 80), name="anthropic.chat")
    con = connect(tmp_path / "s.duckdb")
    cfg = load_config(None)
    incr, a, b = _incremental_then_full(con, cfg, write(tmp_path, "sdk.jsonl", batch(SDK, sdk_span, *others)),
                                        write(tmp_path, "inst.jsonl", batch(LLMETRY, inst_span)))
    days = sorted({c[0] for c in con.execute("SELECT CAST(started_at AS DATE) FROM raw_calls").fetchall()})
    assert len(days) == 2 and set(days) <= set(incr.days_rebuilt)
    assert not _diff(a, b), "\n".join(_diff(a, b))
    moved = con.execute("SELECT CAST(started_at AS DATE), output_tokens FROM requests WHERE span_id = ?",
                        ["i1".ljust(16, "0")]).fetchall()
    assert moved == [(days[0], 80)]
    assert con.execute("SELECT count(*) FROM call_attribution WHERE call_id IN "
                       "(SELECT call_id FROM raw_calls_replaced WHERE retired)").fetchone()[0] == 0
    con.close()
