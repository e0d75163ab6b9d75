"""Data health: loads, source gaps, rejects by reason, timing sources, unpriced models and freshness."""

from __future__ import annotations

import streamlit as st

from phaselens.app import charts, queries
from phaselens.app.ui import context, count, count_col, empty_state, pct_col, table, text_col, text_or_dash, words
from phaselens.models.text import short_path

def when(ts, missing: str = "—") -> str:
    """A UTC time as `Nov 17 00:06`."""
    return missing if ts is None or ts != ts else ts.strftime("%b %d %H:%M")


ctx = context()
st.title("Data health")
fresh = queries.load_freshness(ctx.snapshot)
meta = queries.load_meta(ctx.snapshot)
c = st.columns(4)
c[0].metric("Calls in the store", count(fresh.get("calls")))
c[1].metric("Last call (UTC)", when(fresh.get("last_call_at")), help=str(fresh.get("last_call_at")))
c[2].metric("Last load (UTC)", when(fresh.get("last_load_at")), help=str(fresh.get("last_load_at")))
c[3].metric("Built (UTC)", when(fresh.get("built_at"), "never"), help=str(fresh.get("built_at")))
st.caption(f"Snapshot published {meta.get('published_at', '?')[:19]} UTC from `{meta.get('store', ctx.db)}`; "
           "the dashboard reloads by itself when a batch run publishes a new one.")
if fresh.get("built_at") is None or fresh.get("built_at") != fresh.get("built_at"):
    st.warning(f"The store has not been built: timing estimates, costs and workloads are missing. "
               f"Run `phaselens build --db {ctx.db}`.")

st.subheader("Timing sources")
src = queries.load_timing_sources(ctx.snapshot, ctx.filters)
if src["calls"].fillna(0).sum() == 0:
    empty_state("No calls in the filters.", f"Load traces: `phaselens ingest PATH --db {ctx.db}`.")
else:
    st.altair_chart(charts.bar_chart(src, "timing_source", "calls", "timing source", "calls", value_format=",d"), width="stretch")
    st.caption("measured: server-reported or explicit TTFT; events: first-chunk span events; estimated: the fitted "
               "latency model; none: no usable timing.")

st.subheader("Source gaps")
gaps = queries.load_table(ctx.snapshot, "source_gaps")
if gaps.empty:
    st.caption("No source to check: no calls are loaded, or this snapshot predates source gaps "
               f"(`phaselens build --db {ctx.db}` publishes a new one).")
else:
    lossy = gaps[gaps["gaps"].fillna("") != ""]
    if lossy.empty:
        st.caption(f"All {len(gaps)} source(s) record cache counts, TTFT on streamed calls and the streaming flag.")
    else:
        st.warning(f"{len(lossy)} of {len(gaps)} source(s) lose data at the source; figures built on it are "
                   "estimated, and reconciliation names them where they explain a gap.")
    table(gaps, {
        "source": "Source", "instrumentation": "Instrumentation", "calls": count_col("Calls"),
        "streamed_calls": count_col("Streamed calls"),
        "cache_counts_missing_share": pct_col("No cache counts", help="Share of calls without cache token counts."),
        "ttft_missing_streamed_share": pct_col("No TTFT", help="Share of streamed calls without a first-token time."),
        "streaming_flag_missing_share": pct_col("No stream flag", help="Share of calls that do not say whether they streamed."),
    })
    st.caption("Per instrumentation (OTLP scope name and version, or the adapter for gateway logs and benchmark "
               "exports). `phaselens loads --gaps` lists the same; docs/store.md describes each share.")
    if len(lossy):  # whole sentences below the table, never cut by a column's width
        st.markdown("**What each source loses**")
        st.text("\n".join(f"{r.source} {r.instrumentation}: {r.gaps}" for r in lossy.itertuples()))

st.subheader("Rejects by reason")
rej = queries.load_table(ctx.snapshot, "reject_summary")
if rej.empty:
    st.caption("No record was quarantined.")
else:
    st.altair_chart(charts.bar_chart(rej.assign(reason=rej["reason"].map(words)), "reason", "records", "reason",
                                     "records", "source", "source", value_format=",d"), width="stretch")
    with st.expander("Latest rejects per reason"):
        sample = queries.load_table(ctx.snapshot, "reject_sample")
        sample = sample.assign(reason=sample["reason"].map(words))
        table(sample, {
            "rejected_at": st.column_config.DatetimeColumn("Rejected (UTC)", format="YYYY-MM-DD HH:mm:ss"),
            "source": "Source", "reason": "Reason"})
        if len(sample):  # where and why, whole, below the table (in its order)
            st.text("\n".join(f"{text_or_dash(r.locator)} ({r.reason}): {text_or_dash(r.detail)}"
                               for r in sample.itertuples()))
    st.caption("`phaselens rejects --summary` lists them too, with the offending input.")

st.subheader("Unpriced models")
unpriced = queries.load_table(ctx.snapshot, "unpriced_models")
if unpriced.empty:
    st.caption("Every call has a price.")
else:
    table(unpriced, {
        "provider": "Provider", "model": "Model", "unpriced_calls": count_col("Calls without a price"),
        "calls": count_col("Calls"), "unpriced_input_tokens": count_col("Unpriced input (tokens)"),
        "unpriced_output_tokens": count_col("Unpriced output (tokens)"),
        "first_call_at": st.column_config.DatetimeColumn("First call (UTC)", format="YYYY-MM-DD HH:mm"),
        "last_call_at": st.column_config.DatetimeColumn("Last call (UTC)", format="YYYY-MM-DD HH:mm")})
    st.caption("These calls are counted but left out of every cost: add their prices to the price book "
               "(docs/pricebook.md) and run `phaselens build`.")

st.subheader("Loads")
loads = queries.load_table(ctx.snapshot, "loads")
if loads.empty:
    empty_state("Nothing loaded yet.", f"`phaselens ingest PATH --db {ctx.db}` reads traces and billing exports.")
else:
    shown = loads.assign(file=loads["file"].map(lambda f: short_path(f, 36) if isinstance(f, str) else f))
    table(shown, {
        "finished_at": st.column_config.DatetimeColumn("Finished (UTC)", format="YYYY-MM-DD HH:mm:ss"),
        "file": text_col("File", help="Long paths are cut in the middle; the file name is always whole."),
        "adapter": "Format", "status": "Status", "accepted": count_col("Accepted"),
        "duplicates": count_col("Duplicates"), "rejected": count_col("Rejected"), "skipped": count_col("Skipped")})
    said = shown.assign(path=loads["file"])[loads["message"].fillna("").astype(str).str.strip() != ""]
    if len(said):  # messages whole, below the table, each after its file as the table shows it (unless it names it)
        st.text("\n".join(r.message if str(r.path) in r.message else f"{r.file}: {r.message}"
                           for r in said.itertuples()))
