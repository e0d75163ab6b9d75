"""Reconciliation: billed vs estimated per provider, model, day and token type, coverage, the untraced bucket,
and the reason per gap."""

from __future__ import annotations

import altair as alt
import streamlit as st

from phaselens.app import queries
from phaselens.app.ui import context, count, empty_state, pct, usd

DOLLARS = {c: st.column_config.NumberColumn(c.replace("_cost_usd", " (USD)").replace("_usd", " (USD)").replace("_", " "),
                                            format="dollar")
           for c in ["billed_cost_usd", "estimated_cost_usd", "cost_delta_usd", "untraced_cost_usd", "allocated_cost_usd"]}
CELL_COLUMNS = ["day", "provider", "model", "token_type", "cause", "explanation", "billed_cost_usd", "estimated_cost_usd",
                "cost_delta_usd", "token_coverage", "billed_tokens", "traced_tokens", "status"]

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
                y=alt.Y("usd:Q", title="cost (USD)"), color=alt.Color("kind:N", title=""),
                tooltip=[alt.Tooltip("day:T", title="day (UTC)"), "kind:N", alt.Tooltip("usd:Q", format="$,.2f")],
            ).properties(height=260)
            st.altair_chart(chart, width="stretch")

        st.subheader("Gaps by cause")
        st.dataframe(r["reconciliation_by_cause"], hide_index=True, width="stretch", column_config=DOLLARS)

        st.subheader("Cells, gaps first")
        cells = r["reconciliation_cells"]
        if st.toggle("Only cells with a gap", value=True, key="rec_gaps_only"):
            cells = cells[cells["cause"] != "ok"]
        st.dataframe(cells[[c for c in CELL_COLUMNS if c in cells.columns]], hide_index=True, width="stretch",
                     column_config={
                         "day": st.column_config.DateColumn("day (UTC)"),
                         "explanation": st.column_config.TextColumn("explanation", width="large"),
                         "token_coverage": st.column_config.NumberColumn("token coverage (traced/billed)", format="percent"),
                         "billed_tokens": st.column_config.NumberColumn("billed (tokens)", format="compact"),
                         "traced_tokens": st.column_config.NumberColumn("traced (tokens)", format="compact"),
                         **DOLLARS,
                     })

        st.subheader("Untraced bucket")
        untraced = r["untraced_cells"]
        if len(untraced):
            st.dataframe(untraced, hide_index=True, width="stretch",
                         column_config={"day": st.column_config.DateColumn("day (UTC)"), **DOLLARS})
        else:
            st.caption("Every billed dollar in the filters is allocated to a traced call (to within half a cent per cell).")
