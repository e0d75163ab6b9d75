"""Plain-words explanation of one workload: where its time and money go, why, and what to do."""

from __future__ import annotations

import duckdb

from .errors import PhaselensError


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def _s(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


def _usd(x) -> str:
    return "n/a" if x is None else f"${float(x):,.2f}"


def workload_row(con: duckdb.DuckDBPyConnection, workload: str, since=None, until=None) -> dict:
    """The `workload_stats` row of one workload; raises with the known names when it does not exist."""
    cur = con.execute("SELECT * FROM workload_stats($since, $until)", {"since": since, "until": until})
    cols = [d[0] for d in cur.description]
    rows = [dict(zip(cols, r)) for r in cur.fetchall()]
    for r in rows:
        if r["workload"] == workload:
            return r
    names = ", ".join(r["workload"] for r in rows) or "none (load traces and run `phaselens build`)"
    raise PhaselensError(f"no workload named {workload!r} in this period", f"known workloads: {names}")


def explain(con: duckdb.DuckDBPyConnection, workload: str, since=None, until=None) -> str:
    """A few sentences on `workload`: calls, time split, money split, dominant phases, cause and lever."""
    r = workload_row(con, workload, since, until)
    lines = [
        f"{r['workload']}: {r['calls']:,} calls ({r['error_calls']:,} errors) on {r['models']}; "
        f"shape {str(r['shape_class']).replace('_', ' ')} (median {int(r['input_tokens_p50'] or 0):,} input, "
        f"{int(r['output_tokens_p50'] or 0):,} output tokens).",
        f"Time: {_pct(r['prefill_time_share'])} prefill (TTFT p50 {_s(r['ttft_p50_s'])}, p95 {_s(r['ttft_p95_s'])}) vs "
        f"{_pct(r['decode_time_share'])} decode (ITL p50 {_s(r['itl_p50_s'])}/token, p95 {_s(r['itl_p95_s'])}); "
        f"e2e p50 {_s(r['e2e_p50_s'])}. Dominant phase for time: {r['dominant_latency_phase'] or 'unknown'}.",
        f"Money: {_usd(r['input_cost_usd'])} on input ({_pct(r['prefill_cost_share'])}, prefill side) vs "
        f"{_usd(r['output_cost_usd'])} on output ({_pct(r['decode_cost_share'])}, decode side). "
        f"Dominant phase for money: {r['dominant_cost_phase'] or 'unknown'}.",
        f"Why (time): {r['latency_diagnosis']}",
        f"Lever (time): {r['latency_lever']}",
        f"Why (money): {r['cost_diagnosis']}",
        f"Lever (money): {r['cost_lever']}",
    ]
    notes = []
    if r["estimated_calls"]:
        notes.append(f"{r['estimated_calls']:,} of the calls had no TTFT and their split is estimated by the latency model")
    if r["unpriced_calls"]:
        notes.append(f"{r['unpriced_calls']:,} calls have no known price and are left out of the money split")
    if notes:
        lines.append("Note: " + "; ".join(notes) + ".")
    return "\n".join(lines)
