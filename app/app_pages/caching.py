"""Caching lever: prefix reuse, achieved vs possible cache hits, and a what-if in dollars and TTFT saved."""

from __future__ import annotations

import streamlit as st

from phaselens.app import charts, queries
from phaselens.app.ui import (context, count, count_col, empty_state, md_text, pct, pct_col, seconds, seconds_col, table,
                             usd, usd_col)
from phaselens.pipeline.errors import PhaselensError

SHARES = {"reuse_share": "reusable (possible)", "achieved_share": "read from cache (achieved)"}


def lifetime_label(x: int | None) -> str:
    """A cache lifetime in words."""
    return "unlimited" if x is None else (f"{x // 60} min" if x % 60 == 0 and x < 3600 else f"{x / 3600:g} h" if x % 3600 == 0 else f"{x} s")


ctx = context()
st.title("Caching lever")
st.caption("The same repo or system prompt resent on every request is paid for and prefilled again each time. "
           "Reusable = input tokens repeating a prefix another call of the same model sent within the cache lifetime.")
if not queries.has_relation(ctx.snapshot, "caching_opportunity"):
    empty_state("No caching analysis published yet.",
                "It needs prefix hashes (computed at ingest from the leading prompt blocks, or `hash_ids` in "
                f"Mooncake-style traces) or reported cache reads: ingest such traces and run `phaselens build --db {ctx.db}`.")
else:
    lifetimes = queries.load_caching_lifetimes(ctx.snapshot)
    if not lifetimes:
        empty_state("The caching analysis found no calls to measure.",
                    f"Ingest traces with prompt prefix hashes and run `phaselens build --db {ctx.db}`.")
        st.stop()
    life = st.segmented_control("Cache lifetime", lifetimes, format_func=lifetime_label, default=lifetimes[0],
                                key="cache_lifetime") or lifetimes[0]
    rows = queries.load_caching(ctx.snapshot, "workload", life)
    if ctx.filters.workloads:
        rows = rows[rows["workload"].isin(ctx.filters.workloads)]
    st.caption("Over the whole store (the period, provider, model and team filters do not apply); "
               "dollars at each model's cache-read and cache-write prices.")
    tot = queries.load_caching_totals(ctx.snapshot, life, ctx.filters.workloads)
    c = st.columns(3)
    c[0].metric("Input now (USD)", usd(tot["usd_now"]))
    c[1].metric("Saved with a cache (USD)", usd(tot["usd_saved"]),
                help="At the measured reuse; negative where cache-write premiums exceed the read discount.")
    c[2].metric("Workloads with reuse", f"{count(tot['workloads_with_reuse'])} of {count(tot['workloads'])}")

    st.subheader("Achieved vs possible cache hits")
    shares = rows.dropna(subset=["reuse_share", "achieved_share"], how="all")
    if shares.empty:
        st.info("No workload has prefix hashes or reported cache reads at this lifetime.")
    else:
        long = shares.melt(id_vars=["workload"], value_vars=list(SHARES), var_name="measure", value_name="share")
        long["measure"] = long["measure"].map(SHARES)
        st.altair_chart(charts.bar_chart(long.dropna(), "workload", "share", "workload", "share of input tokens (%)",
                                         "measure", "measure", grouped=True, percent=True), width="stretch")
    table(rows, {
        "workload": "Workload", "calls": count_col("Calls"),
        "reuse_share": pct_col("Possible", help="Reusable: input tokens repeating a prefix sent within the lifetime."),
        "achieved_share": pct_col("Achieved", help="Input tokens the provider reported as read from its cache."),
        "usd_now": usd_col("Input now (USD)"), "usd_with_cache": usd_col("With cache (USD)"),
        "usd_saved": usd_col("Saved (USD)"), "ttft_saved_p50_s": seconds_col("TTFT saved p50 (s)"),
    })
    notes = rows.dropna(subset=["note"])
    notes = notes[notes["note"].astype(str).str.strip() != ""]
    if len(notes):
        st.markdown("**Per workload, in words**")
        # one wrapped line per workload, so a long note (why achieved is above possible comes last) is read whole;
        # names and notes are escaped, never read as Markdown
        for r in notes.itertuples():
            st.caption(f"**{md_text(r.workload)}**: {md_text(r.note)}")

    st.subheader("What if")
    names = rows["workload"].dropna().tolist()
    if names:
        c = st.columns(3)
        w = c[0].selectbox("Workload", names, key="whatif_workload")
        life_w = c[1].selectbox("Cache lifetime", lifetimes, format_func=lifetime_label, key="whatif_lifetime")
        measured = c[2].toggle("Use the measured reuse", value=False, key="whatif_measured")
        # start from the hit rate the workload already achieves, so the slider shows what more caching would add
        achieved = rows.loc[rows["workload"] == w, "achieved_share"].dropna()
        start = min(100, int(round(float(achieved.iloc[0]) * 100))) if len(achieved) else 50
        picked = None if measured else st.slider("Cache hit rate (% of input tokens read from cache)", 0, 100, start,
                                                 key=f"whatif_rate_{w}")
        # the slider at today's (rounded) rate is today's exact rate: no change, not the rounding's few cents
        today = picked is not None and len(achieved) > 0 and picked == start
        rate = None if picked is None else float(achieved.iloc[0]) if today else picked / 100
        if len(achieved):
            st.caption(f"Today {pct(achieved.iloc[0])} of this workload's input tokens are read from cache; a lower "
                       "rate shows what losing the cache would cost, a higher one what more caching would save "
                       "(both against today's cost, by the same model).")
        try:
            result = queries.load_what_if(ctx.snapshot, w, rate, life_w)
        except PhaselensError as e:
            st.info(f"{md_text(e.message)}. {md_text(e.fix)}")
        else:
            c = st.columns(4)
            c[0].metric("Saved (USD)", usd(result.get("usd_saved")),
                        help="Today's input cost less the cost at the picked rate; negative: more than today.")
            c[1].metric("TTFT saved per call (mean)", seconds(result.get("ttft_saved_s_mean")))
            c[2].metric("Hit rate", pct(result.get("hit_rate")))
            c[3].metric("Tokens read from cache", count(result.get("hit_tokens")))
            if today:
                st.caption("No change: this is today's cache hit rate. Move the slider to see what more caching would "
                           "save or what losing the cache would cost.")
            if result.get("note"):
                st.caption(result["note"])
