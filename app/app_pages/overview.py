"""Overview: totals under the filters, and per workload the dominant phase for time and money with its lever."""

from __future__ import annotations

import streamlit as st

from phaselens.app import charts, queries
from phaselens.app.ui import (context, count, count_col, in_ms, millis, ms_col, no_calls, pct, pct_col, seconds,
                             seconds_col, table, text_col, usd, usd_col)
from phaselens.pipeline.read_model import COST_HEADLINE, PERCENTILE_METHOD, SCOPE_NOTE

ctx = context()
st.title("Overview")
st.caption("Where LLM time and money go: the prefill phase (prompt → first token) vs the decode phase (each further token).")
if not no_calls(ctx):
    t = queries.load_totals(ctx.snapshot, ctx.filters)
    c = st.columns(4)
    c[0].metric("Calls", count(t["calls"]), help="Model calls in the period and filters.")
    c[1].metric("Cost (USD)", usd(t["cost_usd_best"]),
                help=f"{COST_HEADLINE.capitalize()} (estimate at list/price-book prices: {usd(t['cost_usd'])}); "
                     f"{count(t['unpriced_calls'])} calls have no known price and are not in it.")
    c[2].metric("Prefill share of time", pct(t["prefill_time_share"]),
                help=f"Time to first token over call time, on {count(t['split_calls'])} calls with both phases timed.")
    c[3].metric("Prefill share of cost", pct(t["prefill_cost_share"]), help="Input-side (prefill) USD over total USD.")
    st.caption(f"Cost: {COST_HEADLINE} ({count(t['invoice_calls'])} of {count(t['calls'])} calls billed). "
               f"Percentiles: {PERCENTILE_METHOD}.")
    c = st.columns(4)
    c[0].metric("TTFT p50", seconds(t["ttft_p50_s"]), help=f"Time to first token, median ({PERCENTILE_METHOD}).")
    c[1].metric("TTFT p95", seconds(t["ttft_p95_s"]))
    c[2].metric("ITL p50", millis(t["itl_p50_s"]), help="Inter-token latency per output token after the first.")
    c[3].metric("ITL p95", millis(t["itl_p95_s"]))
    if t["unpriced_calls"]:
        st.warning(f"{count(t['unpriced_calls'])} calls have no known price and are left out of the cost "
                   "(see Data health → unpriced models).")

    wl = queries.load_workload_phases(ctx.snapshot, ctx.filters)
    st.subheader("Phase map")
    st.caption("Each workload placed by its median input against output tokens per call (log scales), "
               "sized by cost (USD), coloured by the phase that dominates its time; no output (embeddings) sits at 1 token.")
    if wl["input_tokens_p50"].notna().any():
        st.altair_chart(charts.phase_map_chart(wl), width="stretch")
    else:
        st.info("No workload has token counts to place on the map.")

    st.subheader("Per workload: the dominant phase and its lever")
    if ctx.filters.active():
        st.caption(f"Shares, dominant phases, diagnoses and levers are of the filtered calls ({SCOPE_NOTE}).")
    for r in wl.itertuples():
        missing = f"No diagnosis yet: run phaselens build --db {ctx.db}."
        time_lever = r.lever if isinstance(r.lever, str) else missing
        cost_lever = r.cost_lever if isinstance(r.cost_lever, str) else missing
        time_phase = r.dominant_latency_phase if isinstance(r.dominant_latency_phase, str) else "no timing"
        money_phase = r.dominant_cost_phase if isinstance(r.dominant_cost_phase, str) else "no price"
        # names and levers are shown as text: a workload name is never read as Markdown or HTML
        st.text(f"{r.workload} · time: {time_phase} — {time_lever}\n"
                f"{r.workload} · money: {money_phase} — {cost_lever}")
    shown = in_ms(wl, "itl_p50_s").assign(
        shape_class=wl["shape_class"].map(lambda v: v.replace("_", " ") if isinstance(v, str) else v))
    table(shown, {
        "workload": "Workload",
        "calls": count_col("Calls"),
        "cost_usd_best": usd_col("Cost (USD)", help=COST_HEADLINE.capitalize()),
        "dominant_latency_phase": text_col("Dominant: time", help="The phase that dominates the time."),
        "dominant_cost_phase": text_col("Dominant: money", help="The phase that dominates the money."),
        "prefill_time_share": pct_col("Prefill: time", help="Prefill share of the time of calls with both phases timed."),
        "prefill_cost_share": pct_col("Prefill: cost", help="Input-side (prefill) share of the cost."),
        "ttft_p95_s": seconds_col("TTFT p95 (s)"),
        "itl_p50_ms": ms_col("ITL p50 (ms)"),
    })
