"""Incremental publish: a snapshot that computes only the changed days equals one that computes every day, copies
the other days from the previous snapshot, falls back to a full publish when that snapshot is not of the store
as it stood, and never shows a reader a half-written snapshot."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import date, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from phaselens.cli import app

from phaselens.pipeline.publish import COPIED_RELATIONS, PARTITIONED, current_snapshot, publish, store_basis
from phaselens.pipeline.store import connect



def insert_calls(con, rows):
    """rows: (call_id, workload_hint, provider, model, team, started_at, ttft_s, e2e_s, output_tokens, uncached_input)."""
    cols = ["call_id", "workload_hint", "provider", "model", "team", "started_at", "ttft_s", "e2e_s", "output_tokens",
            "uncached_input_tokens"]
    con.register("new_calls", pa.table({c: [r[i] for r in rows] for i, c in enumerate(cols)}))
    con.execute(
        "INSERT INTO raw_calls BY NAME SELECT *, 'test' AS source, ttft_s AS prefill_s, e2e_s - ttft_s AS decode_s, "
        "CASE WHEN ttft_s IS NULL THEN 'none' ELSE 'measured' END AS timing_source, 'ok' AS status FROM new_calls"
    )
    con.unregister("new_calls")

NULLS = "NULL, NULL, NULL, NULL, NULL, NULL"
# columns that say when a snapshot or a load was written, not what the calls hold (None: the whole table)
VOLATILE = {"freshness": {"published_at"}, "published_meta": None}
SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"


def calls(prefix: str, start: datetime, n: int, step_min: int = 7):
    rows = []
    for i in range(n):
        ttft = None if i % 6 == 0 else 0.03 * (1 + (i * 41) % 90)
        rows.append((f"{prefix}{i}", ["chat", "agent", "edit"][i % 3], "openai" if i % 2 else "anthropic",
                     "gpt-4o" if i % 2 else "claude-sonnet-4", "red" if i % 5 else "blue",
                     start + timedelta(minutes=step_min * i), ttft, (ttft or 0.4) + 0.02 * (i % 30 + 1),
                     1 + (i * 7) % 300, 50 + 11 * i))
    return rows


# Load A: two days. Load B: a new day, late calls for the first day, and calls without a start time.
LOAD_A = calls("a", datetime(2026, 3, 1, 0, 3), 400)  # 2026-03-01 .. 03-02
LOAD_B = (calls("b", datetime(2026, 3, 3, 0, 1), 150)
          + calls("late", datetime(2026, 3, 1, 5, 0), 40, step_min=3)
          + [(f"nostart{i}", "chat", "openai", "gpt-4o", "red", None, 0.2, 0.9, 20, 100) for i in range(3)])
DAYS_B = {date(2026, 3, 3), date(2026, 3, 1)}


def snapshot_rows(path, volatile=None, float_digits: int | None = None) -> dict[str, list[tuple]]:
    """Every table of a snapshot, rows sorted, without the columns that only say when it was written; with
    `float_digits`, floats to that many significant digits (a build's float sums depend on row order)."""
    volatile = VOLATILE if volatile is None else volatile
    out = {}
    with duckdb.connect(str(path), read_only=True) as s:
        for (name,) in s.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall():
            if name in volatile and volatile[name] is None:
                continue
            cols = [c[0] for c in s.execute(f'DESCRIBE "{name}"').fetchall() if c[0] not in volatile.get(name, ())]
            select = ", ".join(f'"{c}"' for c in cols)
            rows = s.execute(f'SELECT {select} FROM "{name}" ORDER BY ALL').fetchall()
            if float_digits is not None:
                rows = [tuple(float(f"{v:.{float_digits}g}") if isinstance(v, float) else v for v in r) for r in rows]
                rows.sort(key=repr)
            out[name] = rows
    return out


def meta(path) -> dict[str, str]:
    with duckdb.connect(str(path), read_only=True) as s:
        return dict(s.execute("SELECT key, value FROM published_meta").fetchall())


@pytest.fixture
def stores(tmp_path):
    """Store `full` holds loads A and B, published once; store `incr` is published after A, then after B with
    B's days."""
    full_db, incr_db = tmp_path / "full.duckdb", tmp_path / "incr.duckdb"
    full, incr = connect(full_db), connect(incr_db)
    insert_calls(full, LOAD_A + LOAD_B)
    publish(full, full_db)
    insert_calls(incr, LOAD_A)
    publish(incr, incr_db)
    yield full_db, full, incr_db, incr
    full.close()
    incr.close()


def test_incremental_after_b_equals_full_after_a_and_b(stores):
    full_db, _, incr_db, incr = stores
    basis = store_basis(incr)
    insert_calls(incr, LOAD_B)
    path = publish(incr, incr_db, days=DAYS_B, since=basis)
    assert meta(path)["computed_days"] == "2026-03-01,2026-03-03"
    assert meta(current_snapshot(full_db))["computed_days"] == "all"
    want, got = snapshot_rows(current_snapshot(full_db)), snapshot_rows(path)
    assert set(got) == set(want)
    for name in PARTITIONED:
        assert want[name], f"{name} has rows"
    for name in want:
        assert got[name] == want[name], name
    with duckdb.connect(str(path), read_only=True) as s:
        assert s.execute(f"SELECT calls FROM totals({NULLS})").fetchone()[0] == len(LOAD_A) + len(LOAD_B)


def test_days_not_given_are_copied_from_the_previous_snapshot(stores):
    _, _, incr_db, incr = stores
    basis = store_basis(incr)
    # a change to 2026-03-02 that the publish is not told about stays invisible; the day it is told about shows
    incr.execute("UPDATE raw_calls SET output_tokens = output_tokens + 1000 WHERE call_id IN ('a300', 'a10')")
    path = publish(incr, incr_db, days={date(2026, 3, 1)}, since=basis)
    with duckdb.connect(str(path), read_only=True) as s:
        by_day = dict(s.execute(
            "SELECT CAST(hour AS DATE), sum(output_tokens)::BIGINT FROM rollup_hourly GROUP BY 1").fetchall())
    store = dict(incr.execute(
        "SELECT CAST(started_at AS DATE), sum(output_tokens)::BIGINT FROM requests GROUP BY 1").fetchall())
    assert by_day[date(2026, 3, 1)] == store[date(2026, 3, 1)]
    assert by_day[date(2026, 3, 2)] == store[date(2026, 3, 2)] - 1000


def test_a_snapshot_of_another_basis_gives_a_full_publish(stores):
    _, _, incr_db, incr = stores
    stale = store_basis(incr)
    insert_calls(incr, calls("x", datetime(2026, 3, 2, 9, 0), 5))
    publish(incr, incr_db)  # the current snapshot is now of a newer basis than `stale`
    insert_calls(incr, LOAD_B)
    path = publish(incr, incr_db, days=DAYS_B, since=stale)
    assert meta(path)["computed_days"] == "all"
    assert meta(path)["basis"] == store_basis(incr)


READER = """
import sys, time, duckdb
from pathlib import Path
from phaselens.pipeline.publish import current_snapshot
db, stop = sys.argv[1], Path(sys.argv[2])
seen = []
while not stop.exists():
    path = current_snapshot(db)
    try:
        s = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        if path.exists():
            raise
        continue  # two publishes went by between reading the pointer and opening its file: read the pointer again
    with s:
        calls = s.execute("SELECT calls FROM totals(NULL, NULL, NULL, NULL, NULL, NULL)").fetchone()[0]
        fresh = s.execute("SELECT calls FROM freshness").fetchone()[0]
        sample = s.execute("SELECT count(DISTINCT workload) FROM call_sample").fetchone()[0]
    seen.append(f"{calls}:{fresh}:{sample}")
    print(seen[-1], flush=True)
    time.sleep(0.01)
"""


def test_a_reader_during_incremental_publishes_sees_the_old_or_the_new_snapshot(stores, tmp_path):
    _, _, incr_db, incr = stores
    stop = tmp_path / "stop"
    reader = subprocess.Popen([sys.executable, "-c", READER, str(incr_db), str(stop)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        totals = [len(LOAD_A)]
        first = reader.stdout.readline()  # the reader has read the first snapshot
        for k in range(4):
            basis = store_basis(incr)
            batch = calls(f"r{k}-", datetime(2026, 3, 4 + k, 1, 0), 60)
            insert_calls(incr, batch)
            publish(incr, incr_db, days={date(2026, 3, 4 + k)}, since=basis)
            totals.append(totals[-1] + len(batch))
            time.sleep(0.3)
    finally:
        stop.touch()
        out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    seen = [tuple(int(x) for x in line.split(":")) for line in [first, *out.split()]]
    assert seen[0][0] == totals[0]
    # each read saw one whole snapshot: the totals, the freshness row and the sample agree with one publish
    assert {calls for calls, _, _ in seen} <= set(totals)
    assert all(calls == fresh and sample == 3 for calls, fresh, sample in seen)
    assert seen[-1][0] == totals[-1]


def test_cli_ingest_then_build_publish_the_store_a_single_load_publishes(tmp_path):
    """`phaselens ingest` then `build` on the sample day's files one by one give the snapshot of loading them at
    once; the second ingest's publish computes only the days its calls fall on."""
    files = [str(SAMPLE / "traces" / "editor-tab.jsonl.gz"), str(SAMPLE / "traces" / "editor-inline.jsonl.gz"),
             str(SAMPLE / "billing" / "openai_costs.json")]
    runner = CliRunner()

    def cli(*args):
        r = runner.invoke(app, list(args))
        assert r.exit_code == 0, r.output
        return current_snapshot(db)

    db = tmp_path / "once.duckdb"
    cli("ingest", *files, "--db", str(db))
    once = cli("build", "--db", str(db))
    db = tmp_path / "steps.duckdb"
    cli("ingest", files[0], "--db", str(db))
    cli("build", "--db", str(db))
    second = cli("ingest", files[1], "--db", str(db))
    with duckdb.connect(str(tmp_path / "once.duckdb"), read_only=True) as c:
        inline_days = sorted(str(r[0]) for r in c.execute(
            "SELECT DISTINCT CAST(started_at AS DATE) FROM raw_calls WHERE source_locator LIKE '%editor-inline%'"
            " AND started_at IS NOT NULL").fetchall())
    assert inline_days and meta(second)["computed_days"] == ",".join(inline_days)
    cli("ingest", files[2], "--db", str(db))
    steps = cli("build", "--db", str(db))
    # the ledger, reject times and build times differ between the two stores; what the calls say must not. The
    # build's own relations (workloads, fits, caching, reconciliation) are copied as the build left them: whether
    # two builds agree is the build's test, not the snapshot's
    copied = {name: None for name in (*COPIED_RELATIONS, "workloads")}
    volatile = {**VOLATILE, **copied, "loads": None, "freshness": {"published_at", "last_load_at", "built_at", "loaded_files"},
                "reject_summary": {"first_rejected_at", "last_rejected_at"}, "reject_sample": {"rejected_at"}}
    want, got = snapshot_rows(once, volatile, 12), snapshot_rows(steps, volatile, 12)
    assert set(got) == set(want)
    for name in want:
        assert got[name] == want[name], name
