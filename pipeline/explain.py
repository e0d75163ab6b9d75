"""Plain-words explanation of one workload: where its time and money go, why, and what to do.

Its figures are the read model's (pipeline/read_model.py): the same numbers `phaselens workloads`, the reports and
the dashboard show for the same period.
"""

from __future__ import annotations

import duckdb

from phaselens.models.text import ms, pct, secs, usd

from .read_model import COST_HEADLINE, workload_row


def explain(con: duckdb.DuckDBPyConnection, workload: str, since=None, until=None) -> str:
    """A few sentences on `workload`: calls, time split, money split, dominant phases, cause and lever."""
    return "\n".join(explain_lines(workload_row(con, workload, since, until)))


def explain_data(con: duckdb.DuckDBPyConnection, workload: str, since=None, until=None) -> dict:
    """The workload's read-model row (every `workload_stats` column) with the sentences under `explanation`."""
    r = workload_row(con, workload, since, until)
    return {**r, "cost_basis": COST_HEADLINE, "explanation": explain_lines(r)}


def explain_lines(r: dict) -> list[str]:
    """The sentences of `explain` for one read-model workload row."""
    lines = [
        f"{r['workload']}: {r['calls']:,} calls ({r['error_calls']:,} errors) on {r['models']}; "
        f"shape {str(r['shape_class']).replace('_', ' ')} (median {round(r['input_tokens_p50'] or 0):,} input, "
        f"{round(r['output_tokens_p50'] or 0):,} output tokens).",
        f"Time: {pct(r['prefill_time_share'])} prefill (TTFT p50 {secs(r['ttft_p50_s'])}, p95 {secs(r['ttft_p95_s'])}) vs "
        f"{pct(r['decode_time_share'])} decode (ITL p50 {ms(r['itl_p50_s'])}/token, p95 {ms(r['itl_p95_s'])}); "
        f"e2e p50 {secs(r['e2e_p50_s'])}. Dominant phase for time: {r['dominant_latency_phase'] or 'unknown'}.",
        f"Money: {usd(r['cost_usd_best'])} ({COST_HEADLINE}): {usd(r['input_cost_usd_best'])} on input "
        f"({pct(r['prefill_cost_share'])}, prefill side) vs "
        f"{usd(r['output_cost_usd_best'])} on output ({pct(r['decode_cost_share'])}, decode side). "
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
    return lines
