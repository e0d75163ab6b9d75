"""Cost: money by phase over time and by team, project and workload; invoice-true where billing is reconciled,
estimated elsewhere, and always labelled which."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from phaselens.app import charts, queries
from phaselens.app.ui import context, count, count_col, no_calls, table, untraced_table, usd, usd_col

COST_BUCKETS = {"uncached_input_usd": "uncached input (prefill)", "cache_read_usd": "cache read (prefill)",
                "cache_write_usd": "cache write (prefill)", "output_usd": "output (decode)"}
BEST_SIDES = {"input_usd_best": "input (prefill)", "output_usd_best": "output (decode)"}
GROUPS = {"team": "Team", "project": "Project", "workload": "Workload", "model": "Provider/model"}

ctx = context()
st.title("Cost")
if not no_calls(ctx):
    t = queries.load_totals(ctx.snapshot, ctx.filters)
    invoice = t["invoice_calls"] > 0
    if invoice:
        label = "invoice-true where billed, else estimated"
        st.success(
            f"**Invoice-true** for {count(t['invoice_calls'])} of {count(t['calls'])} calls: billed cost from reconciled "
            f"billing, allocated to calls by their tokens of each type ({usd(t['cost_usd_invoice'])}). **Estimated** for the "
            f"other {count(t['calls'] - t['invoice_calls'])} calls, which no bill covers (list, price-book or GPU-hour "
            f"cost: {usd(t['cost_usd_estimated_unbilled'])}).")
    else:
        label = "estimated"
        st.warning("**Estimated**: list or price-book prices times tokens (GPU-hours for self-hosted models). No "
                   f"reconciled billing covers these calls; load billing exports with `phaselens ingest BILLING_FILES "
                   f"--db {ctx.db}` and `phaselens build`.")
    c = st.columns(4)
    c[0].metric("Cost (USD)", usd(t["cost_usd_best"]), help=label.capitalize() + ".")
    c[1].metric("Input / prefill (USD)", usd(t["input_cost_usd_best"]))
    c[2].metric("Output / decode (USD)", usd(t["output_cost_usd_best"]))
    c[3].metric("Estimated at list price (USD)", usd(t["cost_usd"]),
                help="Every priced call at its list, price-book or GPU-hour cost, billed or not.")
    if t["unpriced_calls"]:
        st.caption(f"{count(t['unpriced_calls'])} calls without a known price are in no estimate (Data health).")

    st.subheader("Cost by phase over time")
    co = queries.load_cost_over_time(ctx.snapshot, ctx.filters, ctx.bin, "all")
    buckets = BEST_SIDES if invoice else COST_BUCKETS
    long = co.melt(id_vars=["t"], value_vars=list(buckets), var_name="bucket", value_name="usd")
    long["bucket"] = long["bucket"].map(buckets)
    st.altair_chart(charts.stacked_area_chart(long, "usd", "bucket", f"cost per {ctx.bin} (USD)", "phase / bucket",
                                              value_format="$,.2f"), width="stretch")
    st.caption(f"Cost {label}.")

    st.subheader("By team, project and workload")
    group = st.radio("Group by", list(GROUPS), format_func=GROUPS.get, horizontal=True, key="cost_group")
    by = queries.load_cost_by(ctx.snapshot, ctx.filters, group)
    shown = by.copy()
    money_cols = [c for c in shown.columns if "usd" in c]
    for col in money_cols:
        shown[col] = pd.to_numeric(shown[col], errors="coerce").astype(float)
    bars = shown.melt(id_vars=["series"], value_vars=["input_cost_usd_best", "output_cost_usd_best"],
                      var_name="side", value_name="usd")
    bars["side"] = bars["side"].map(lambda s: "input (prefill)" if s.startswith("input") else "output (decode)")
    st.altair_chart(charts.bar_chart(bars, "series", "usd", GROUPS[group], "cost (USD)", "side", "phase",
                                     value_format="$,.2f"), width="stretch")
    st.caption(f"Cost {label}; the estimate at list price for comparison.")
    table(shown, {
        "series": GROUPS[group], "calls": count_col("Calls"), "cost_usd_best": usd_col("Cost (USD)"),
        "input_cost_usd_best": usd_col("Input (USD)", help="Input side: the prefill phase."),
        "output_cost_usd_best": usd_col("Output (USD)", help="Output side: the decode phase."),
        "invoice_calls": count_col("Billed calls", help="Calls whose cost is invoice-true (reconciled billing)."),
        "cost_usd_invoice": usd_col("Invoice-true (USD)"),
        "cost_usd": usd_col("List price (USD)", help="Every priced call at its list, price-book or GPU-hour cost."),
    })

    if queries.has_relation(ctx.snapshot, "reconciliation"):
        rec = queries.load_reconciliation(ctx.snapshot, ctx.filters)
        st.subheader("Untraced bucket")
        st.metric("Billed but not explained by any traced call (USD)",
                  usd(rec["reconciliation_summary"].iloc[0]["untraced_cost_usd"]))
        st.caption("Kept apart, never allocated to a team or workload; per cell below, and each cell's cause on the "
                   "Reconciliation page. Period, provider and model filters apply.")
        untraced_table(rec["untraced_cells"])
