"""Reconciliation: billed vs estimated per provider, model, day and token type, coverage, the untraced bucket,
and the reason per gap."""

from __future__ import annotations

import altair as alt
import streamlit as st

from phaselens.app import queries
from phaselens.app.ui import (context, count, count_col, empty_state, pct, pct_col, table, text_col, untraced_table, usd,
                             usd_col, words)

MONEY = {"billed_cost_usd": usd_col("Billed (USD)"), "estimated_cost_usd": usd_col("Estimated (USD)"),
         "cost_delta_usd": usd_col("Gap (USD)", help="Billed − estimated.")}

ctx = context()
st.title("Reconciliation")
st.caption("Billed (invoice) against estimated (traces × list price) at the grain provider × model × UTC day × token "
           "type. Workload and team filters do not apply here: a bill knows neither.")
if not queries.has_relation(ctx.snapshot, "reconciliation"):
    billing = queries.load_table(ctx.snapshot, "billing_daily")
    if len(billing):
        empty_state(f"{count(billing['lines'].sum())} billing lines are loaded but not reconciled yet.",
                    f"Run `phaselens build --db {ctx.db}` to reconcile them with the traces.")
    else:
        empty_state("No billing data yet, so costs elsewhere are estimates at list price.",
                    "Load a provider's billing export (OpenAI costs/usage, Anthropic cost report, AWS CUR, GCP billing, "
                    f"Azure cost export or FOCUS): `phaselens ingest BILLING_FILES --db {ctx.db}`, then "
                    f"`phaselens build --db {ctx.db}`.")
else:
    r = queries.load_reconciliation(ctx.snapshot, ctx.filters)
    s = r["reconciliation_summary"].iloc[0]
    if not s["cells"]:
        empty_state("No reconciliation cell matches the filters.", "Widen the period or clear the provider/model filter.")
    else:
        c = st.columns(5)
        c[0].metric("Billed (USD)", usd(s["billed_cost_usd"]))
        c[1].metric("Estimated from traces (USD)", usd(s["estimated_cost_usd"]))
        c[2].metric("Billed − estimated (USD)", usd(s["cost_delta_usd"]))
        c[3].metric("Coverage (estimated / billed)", pct(s["cost_coverage"]))
        c[4].metric("Untraced bucket (USD)", usd(s["untraced_cost_usd"]),
                    help="Billed cost no traced call explains; allocated + untraced = billed, exactly.")
        st.caption(f"{count(s['gap_cells'])} of {count(s['cells'])} cells have a gap. "
                   f"Allocated to calls: {usd(s['allocated_cost_usd'])}.")

        daily = r["reconciliation_daily"]
        if len(daily):
            st.subheader("Billed vs estimated per day")
            chart = alt.Chart(daily).mark_bar().encode(
                x=alt.X("yearmonthdate(day):O", title="day (UTC)", axis=alt.Axis(labelAngle=0, format="%Y-%m-%d")),
                xOffset=alt.XOffset("kind:N"),
                y=alt.Y("usd:Q", title="cost (USD)"),
                color=alt.Color("kind:N", title="", legend=alt.Legend(orient="bottom", labelLimit=0)),
                tooltip=[alt.Tooltip("day:T", title="day (UTC)"), "kind:N", alt.Tooltip("usd:Q", format="$,.2f")],
            ).properties(height=260)
            st.altair_chart(chart, width="stretch")

        st.subheader("Gaps by cause")
        by_cause = r["reconciliation_by_cause"]
        table(by_cause.assign(cause=by_cause["cause"].map(words)),
              {"cause": "Cause", "cells": count_col("Cells"), **MONEY})

        st.subheader("Cells, gaps first")
        cells = r["reconciliation_cells"]
        if st.toggle("Only cells with a gap", value=True, key="rec_gaps_only"):
            cells = cells[cells["cause"] != "ok"]
        cells = cells.assign(**{c: cells[c].map(words) for c in ("token_type", "cause", "status")})
        table(cells, {
            "day": st.column_config.DateColumn("Day (UTC)"), "provider": "Provider", "model": "Model",
            "token_type": "Token type", "cause": "Cause", **MONEY,
            "token_coverage": pct_col("Coverage", help="Token coverage: traced tokens over billed tokens."),
        })
        why = cells[cells["explanation"].fillna("").astype(str).str.strip() != ""]
        if len(why):
            with st.expander(f"Why, cell by cell ({count(len(why))} explanations)", expanded=True):
                # whole sentences, never cut by a column's width; provider and model names are text
                st.text("\n".join(f"{r.day:%Y-%m-%d} {r.provider}/{r.model} {r.token_type}: {r.explanation}"
                                   for r in why.itertuples()))

        st.subheader("Untraced bucket")
        untraced = r["untraced_cells"]
        if len(untraced):
            untraced_table(untraced)
        else:
            st.caption("Every billed dollar in the filters is allocated to a traced call (to within half a cent per cell).")
