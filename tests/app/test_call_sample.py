"""The snapshot's call sample picks, per workload, the 100 latest calls, the 50 with the longest TTFT and the 50 most
expensive, ties to the smaller call_id, over every day: the SQL's two steps (each day's candidates, then the picks
over them) are checked against those rules written out in Python, on calls with many ties, missing values, a NaN
TTFT and calls without a start time."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from decimal import Decimal

import duckdb
import pyarrow as pa

from phaselens.pipeline.store import sql_text

COLUMNS = ("call_id", "trace_id", "started_at", "workload", "provider", "model", "team", "project", "status",
           "streaming", "input_tokens", "cache_read_tokens", "output_tokens", "ttft_s", "itl_s", "e2e_s", "queue_s",
           "timing_source", "cost_usd", "priced", "source", "source_locator")


def _call(i: int, started, workload: str, ttft, cost) -> dict:
    return {
        "call_id": f"c{(i * 7919) % 1501:05d}", "trace_id": None, "started_at": started, "workload": workload,
        "provider": "openai", "model": "gpt-4o", "team": None, "project": None, "status": "ok", "streaming": None,
        "input_tokens": 100, "cache_read_tokens": None, "output_tokens": 10, "ttft_s": ttft, "itl_s": None,
        "e2e_s": 1.0, "queue_s": None, "timing_source": "measured", "cost_usd": cost, "priced": cost is not None,
        "source": "test", "source_locator": "test",
    }


def _calls() -> list[dict]:
    start = datetime(2026, 5, 1)
    rows = [
        # three days, two workloads; starts, TTFTs and costs drawn from small sets so that ties are common, also at
        # each day's cut-off
        _call(i, None if i % 97 == 0 else start + timedelta(days=i % 3, minutes=(i * 7) % 180),
              "chat" if i % 2 else "agent", None if i % 5 == 0 else 0.1 * ((i * 13) % 17),
              None if i % 7 == 0 else Decimal((i * 31) % 23) / Decimal(1000))
        for i in range(1500)
    ]
    # a NaN TTFT (first, as ORDER BY ... DESC puts it) on a call no other rule picks
    rows.append(_call(1500, start, "chat", math.nan, None))
    return rows


def _top(rows: list[dict], key: str, n: int) -> list[str]:
    """The call_ids of the n rows with the largest `key` (NaN above every number, as SQL's ORDER BY ... DESC puts
    it), ties to the smaller call_id: a stable sort by call_id, then by value in reverse (which keeps ties in order)."""
    have = sorted((r for r in rows if r[key] is not None), key=lambda r: r["call_id"])
    have.sort(key=lambda r: (isinstance(r[key], float) and math.isnan(r[key]), r[key]), reverse=True)
    return [r["call_id"] for r in have[:n]]


def _expected(rows: list[dict]) -> dict[str, str]:
    """call_id -> picked_as, by the documented rules over every day."""
    out: dict[str, str] = {}
    for workload in {r["workload"] for r in rows}:
        mine = [r for r in rows if r["workload"] == workload]
        for call_id in _top(mine, "started_at", 100):
            out[call_id] = "latest"
        for call_id in _top(mine, "cost_usd", 50):
            out[call_id] = "most expensive"
        for call_id in _top(mine, "ttft_s", 50):
            out[call_id] = "slowest TTFT"
    return out


def _expected_days(rows: list[dict]) -> set[str]:
    """The candidates: the same picks within each UTC day (calls without a start are a day of their own)."""
    out: set[str] = set()
    for day, workload in {(r["started_at"] and r["started_at"].date(), r["workload"]) for r in rows}:
        mine = [r for r in rows if (r["started_at"] and r["started_at"].date()) == day and r["workload"] == workload]
        out |= {*_top(mine, "started_at", 100), *_top(mine, "cost_usd", 50), *_top(mine, "ttft_s", 50)}
    return out


def test_the_sample_keeps_the_documented_picks():
    rows = _calls()
    con = duckdb.connect()
    con.execute("ATTACH ':memory:' AS published")
    con.register("arrow_calls", pa.Table.from_pylist(rows))
    select = ", ".join("CAST(cost_usd AS DECIMAL(38, 12)) AS cost_usd" if c == "cost_usd" else c for c in COLUMNS)
    con.execute(f"CREATE TEMP TABLE _pl_calls AS SELECT {select} FROM arrow_calls")
    con.execute(sql_text("rollup_sample"))
    # the days' candidates as publish assembles them, then the picks over them
    con.execute("CREATE TABLE published.call_sample_days AS SELECT * FROM _pl_part_call_sample_days")
    con.execute(sql_text("rollup_sample_final"))
    got = dict(con.execute("SELECT call_id, picked_as FROM published.call_sample").fetchall())
    expected = _expected(rows)
    assert len(expected) > 300 and set(expected.values()) == {"latest", "most expensive", "slowest TTFT"}
    assert got == expected
    # each day's candidates are that day's own picks (the NULL day: the calls without a start)
    days = {r[0] for r in con.execute("SELECT call_id FROM published.call_sample_days").fetchall()}
    assert days == _expected_days(rows)
    assert "c01087" in days  # the NaN TTFT (call 1500)
