"""Publishing: the snapshot's rollups equal the store's views, the pointer swaps atomically, old snapshots go,
and readers never need the store itself."""

from __future__ import annotations

import math
import subprocess
import sys
from datetime import datetime, timedelta
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest

from phaselens.pipeline.publish import POINTER, current_snapshot, publish, publish_store, published_dir
from phaselens.pipeline.store import connect

HALF_BUCKET = 10 ** (1 / 80)  # a log bucket is 10^(1/40) wide; its centre is within this factor of any value in it
NULLS = "NULL, NULL, NULL, NULL, NULL, NULL"


def insert_calls(con, rows):
    """rows: (call_id, workload_hint, provider, model, team, started_at, ttft_s, e2e_s, output_tokens, uncached_input)."""
    cols = ["call_id", "workload_hint", "provider", "model", "team", "started_at", "ttft_s", "e2e_s", "output_tokens",
            "uncached_input_tokens"]
    table = pa.table({c: [r[i] for r in rows] for i, c in enumerate(cols)})
    con.register("new_calls", table)
    con.execute(
        "INSERT INTO raw_calls BY NAME SELECT *, 'test' AS source, ttft_s AS prefill_s, e2e_s - ttft_s AS decode_s, "
        "CASE WHEN output_tokens > 1 THEN (e2e_s - ttft_s) / (output_tokens - 1) END AS itl_s, "
        "CASE WHEN ttft_s IS NULL THEN 'none' ELSE 'measured' END AS timing_source, 'ok' AS status FROM new_calls"
    )
    con.unregister("new_calls")


@pytest.fixture
def synthetic(tmp_path):
    """A store of 600 hand-made calls over two days, two workloads, two models and two teams; published."""
    db = tmp_path / "syn.duckdb"
    con = connect(db)
    t0 = datetime(2026, 3, 1, 22, 0)
    rows = []
    for i in range(600):
        ttft = None if i % 7 == 0 else 0.02 * (1 + (i * 37) % 100)  # 0.02 .. 2.0 s, 1 in 7 without TTFT
        rows.append((f"c{i}", "chat" if i % 3 else "agent", "openai" if i % 2 else "anthropic",
                     "gpt-4o" if i % 2 else "claude-sonnet-4", "red" if i % 5 else "blue",
                     t0 + timedelta(minutes=5 * i), ttft, (ttft or 0.5) + 0.01 * (i % 50 + 2), 1 + i % 400,
                     100 + 13 * i))
    insert_calls(con, rows)
    yield db, con, rows
    con.close()


def snap(db):
    return duckdb.connect(str(current_snapshot(db)), read_only=True)


def test_rollup_totals_equal_the_requests_view(synthetic):
    db, con, rows = synthetic
    publish(con, db)
    with snap(db) as s:
        got = s.execute(f"SELECT calls, input_tokens, output_tokens FROM totals({NULLS})").fetchone()
        by = dict(s.execute(f"SELECT series, calls FROM cost_by({NULLS}, 'team')").fetchall())
    assert got == (600, sum(r[9] for r in rows), sum(r[8] for r in rows))
    assert by == {"red": sum(1 for r in rows if r[4] == "red"), "blue": sum(1 for r in rows if r[4] == "blue")}


def test_filters_select_the_same_calls_as_sql_on_the_store(synthetic):
    db, con, rows = synthetic
    publish(con, db)
    since, until = datetime(2026, 3, 2), datetime(2026, 3, 3)
    expected = sum(1 for r in rows if since <= r[5] < until and r[2] == "openai" and r[4] == "red")
    with snap(db) as s:
        got = s.execute("SELECT calls FROM totals(?, ?, ['openai'], NULL, NULL, ['red'])", [since, until]).fetchone()[0]
    assert got == expected > 0


@pytest.mark.parametrize("p", [0.5, 0.9, 0.95, 0.99])
def test_percentiles_from_histograms_are_within_half_a_bucket(synthetic, p):
    db, con, rows = synthetic
    publish(con, db)
    ttft = sorted(r[6] for r in rows if r[6] is not None and r[1] == "chat")
    exact = ttft[math.ceil(p * len(ttft)) - 1]
    col = {0.5: "p50", 0.9: "p90", 0.95: "p95", 0.99: "p99"}[p]
    with snap(db) as s:
        got = s.execute(f"SELECT {col} FROM hist_percentiles(NULL, NULL, NULL, NULL, ['chat'], NULL, 'all', 'all') "
                        "WHERE metric = 'ttft_s'").fetchone()[0]
    assert exact / HALF_BUCKET <= got <= exact * HALF_BUCKET


def test_money_sums_are_exact_decimals(synthetic):
    db, con, _ = synthetic
    # stand-in costs as the build would leave them: one exact DECIMAL per call
    con.execute("INSERT INTO call_attribution (call_id, started_at, input_cost_usd, output_cost_usd, cost_usd, priced) "
                "SELECT call_id, started_at, 0.000000000001 * (row_number() OVER (ORDER BY call_id)), 0.1, "
                "0.000000000001 * (row_number() OVER (ORDER BY call_id)) + 0.1, true FROM raw_calls")
    publish(con, db)
    expected = Decimal(sum(range(1, 601))) * Decimal("1e-12") + Decimal("60")
    with snap(db) as s:
        assert s.execute(f"SELECT cost_usd FROM totals({NULLS})").fetchone()[0] == expected


def test_pointer_moves_and_only_current_and_previous_remain(synthetic):
    db, con, _ = synthetic
    first = publish(con, db)
    second = publish(con, db)
    third = publish(con, db)
    folder = published_dir(db)
    assert (folder / POINTER).read_text().strip() == third.name
    assert current_snapshot(db) == third
    assert sorted(p.name for p in folder.glob("*.duckdb")) == sorted([second.name, third.name])
    assert not first.exists()


def test_a_reader_of_the_previous_snapshot_keeps_reading(synthetic):
    db, con, rows = synthetic
    publish(con, db)
    reader = snap(db)
    insert_calls(con, [("late", "chat", "openai", "gpt-4o", "red", datetime(2026, 3, 4), 0.1, 0.5, 10, 10)])
    publish(con, db)
    publish(con, db)  # the snapshot `reader` holds is now older than the previous one and is deleted
    assert reader.execute(f"SELECT calls FROM totals({NULLS})").fetchone()[0] == len(rows)
    reader.close()
    with snap(db) as s:
        assert s.execute(f"SELECT calls FROM totals({NULLS})").fetchone()[0] == len(rows) + 1


def test_snapshots_open_while_another_process_writes_the_store(synthetic):
    db, con, rows = synthetic
    publish(con, db)
    # this process holds the store open for writing; a separate process can read the snapshot but not the store
    code = (
        "import sys, duckdb\n"
        "from phaselens.pipeline.publish import current_snapshot\n"
        "s = duckdb.connect(str(current_snapshot(sys.argv[1])), read_only=True)\n"
        "print(s.execute('SELECT calls FROM totals(NULL, NULL, NULL, NULL, NULL, NULL)').fetchone()[0])\n"
        "try:\n    duckdb.connect(sys.argv[1], read_only=True)\n    print('store-open')\n"
        "except duckdb.IOException:\n    print('store-locked')\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(len(rows)), "store-locked"]


def test_publish_store_reads_a_closed_store_read_only(synthetic):
    db, con, rows = synthetic
    con.close()
    before = db.stat().st_mtime_ns
    path = publish_store(db)
    assert current_snapshot(db) == path
    assert db.stat().st_mtime_ns == before
    with snap(db) as s:
        assert s.execute(f"SELECT calls FROM totals({NULLS})").fetchone()[0] == len(rows)


def test_an_empty_store_publishes_empty_relations(tmp_path):
    db = tmp_path / "empty.duckdb"
    con = connect(db)
    publish(con, db)
    con.close()
    with snap(db) as s:
        assert s.execute(f"SELECT calls, cost_usd FROM totals({NULLS})").fetchone() == (0, 0)
        assert s.execute(f"SELECT count(*) FROM workload_phases({NULLS})").fetchone()[0] == 0
        assert s.execute("SELECT count(*) FROM workloads").fetchone()[0] == 0
