"""The batch-contention evidence of `workloads` (pipeline/sql/workloads.sql): the median ITL of the busiest quarter
of a workload's calls over that of the quietest, and their median concurrency, added up from per-day parts.

The calls come in bursts of 1 to 8 that start together on one model, so a call's concurrency (calls in flight
when it starts) runs from 1 to its burst's size. On `busy` a call's ITL grows with the calls in flight; on
`steady` it does not. The figures are checked against the same quarters computed here in Python from the calls themselves: calls
tied on a boundary concurrency are on that side, medians of ITL are the sketch's (within one bucket, a factor of
10^(1/40)), medians of concurrency exact.
"""

from __future__ import annotations

import statistics
from datetime import date, datetime, timedelta

import pytest

from phaselens.pipeline.build import build, build_workloads
from phaselens.pipeline.store import connect

BUCKET = 10 ** (1 / 40)


def _insert(con, workload: str, model: str, itl_of, day: int = 0) -> None:
    rows = []
    t0 = datetime(2026, 3, 2) + timedelta(days=day)
    for slot in range(120):
        size = 1 + (slot * 5) % 8
        start = t0 + timedelta(minutes=10 * slot)
        for k in range(size):
            itl = itl_of(size, k)
            decode = itl * 399
            rows.append((f"{workload}-{day}-{slot}-{k}", start, start + timedelta(seconds=0.1 + decode), model,
                         workload, itl, decode, 0.1 + decode))
    con.executemany(
        "INSERT INTO raw_calls (call_id, source, operation, status, provider, model, timing_source, started_at, "
        "ended_at, workload_hint, uncached_input_tokens, output_tokens, ttft_s, prefill_s, itl_s, decode_s, e2e_s) "
        "VALUES (?, 'test', 'chat', 'ok', 'vllm', ?, 'measured', ?, ?, ?, 200, 400, 0.1, 0.1, ?, ?, ?)",
        [(c, m, s, e, w, i, d, e2e) for c, s, e, m, w, i, d, e2e in rows],
    )


def _expected(con, workload: str) -> tuple[float, float, float]:
    """The busiest and quietest quarters from the calls: (exact ITL ratio, concurrency high, concurrency low)."""
    calls = sorted(con.execute("SELECT concurrency, itl_s FROM requests WHERE workload = ? AND itl_s IS NOT NULL "
                               "AND concurrency IS NOT NULL", [workload]).fetchall())
    n = len(calls)
    low_max = calls[-(-n // 4) - 1][0]          # the last call of ntile's first quarter: ceil(n / 4) calls
    high_min = calls[n - n // 4][0]             # the first call of its last quarter: floor(n / 4) calls
    low = [c for c in calls if c[0] <= low_max]
    high = [c for c in calls if c[0] >= high_min]
    ratio = statistics.median(i for _, i in high) / statistics.median(i for _, i in low)
    return ratio, statistics.median(c for c, _ in high), statistics.median(c for c, _ in low)


@pytest.fixture
def store(tmp_path):
    con = connect(tmp_path / "s.duckdb")
    _insert(con, "busy", "m-busy", lambda size, k: 0.01 * (k + 1))  # ITL grows with the calls in flight
    _insert(con, "steady", "m-steady", lambda size, k: 0.02 + 0.0001 * (k % 2))
    build(con)
    yield con
    con.close()


def _row(con, workload: str) -> dict:
    cur = con.execute("SELECT * FROM workloads WHERE workload = ?", [workload])
    return dict(zip([d[0] for d in cur.description], cur.fetchone()))


def test_contention_names_the_workload_whose_itl_grows_with_concurrency(store):
    busy, steady = _row(store, "busy"), _row(store, "steady")
    for row in (busy, steady):
        ratio, high, low = _expected(store, row["workload"])
        assert row["concurrency_high"] == high and row["concurrency_low"] == low, row["workload"]
        assert ratio / BUCKET <= row["itl_contention_ratio"] <= ratio * BUCKET, (row["workload"], ratio)
    assert busy["itl_contention_ratio"] > 2 and busy["cause"] == "batch_contention"
    assert "calls in flight" in busy["diagnosis"]
    assert steady["itl_contention_ratio"] < 1.1 and steady["cause"] != "batch_contention"


def test_contention_of_a_period_and_after_a_day_refresh_are_those_of_its_calls(store):
    """A period's figures come from the period's calls; recomputing one day's parts changes nothing else."""
    _insert(store, "busy", "m-busy", lambda size, k: 0.03, day=1)  # a second day, flat ITL
    whole = _row(store, "busy")
    build_workloads(store, [date(2026, 3, 3)])
    refreshed = _row(store, "busy")
    assert refreshed["calls"] == 2 * whole["calls"]
    (period,) = store.execute("SELECT itl_contention_ratio, concurrency_high, concurrency_low FROM "
                              "workload_stats(TIMESTAMP '2026-03-02', TIMESTAMP '2026-03-03') "
                              "WHERE workload = 'busy'").fetchall()
    assert period == (whole["itl_contention_ratio"], whole["concurrency_high"], whole["concurrency_low"])
    build_workloads(store)  # every day again: the same as the refresh
    assert _row(store, "busy") == refreshed
