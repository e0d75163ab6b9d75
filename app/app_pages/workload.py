"""Workload detail: distributions, the time and cost split over time, the diagnosis and the calls behind it."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import streamlit as st

from phaselens.app import charts, queries
from phaselens.app.ui import (context, count, count_col, empty_state, in_ms, md_text, millis, ms_col, no_calls, pct,
                             seconds, seconds_col, table, text_col, text_or_dash, usd, usd_col, words)
from phaselens.pipeline.read_model import COST_HEADLINE, PERCENTILE_METHOD, SCOPE_NOTE

COST_BUCKETS = {"uncached_input_usd": "uncached input", "cache_read_usd": "cache read",
                "cache_write_usd": "cache write", "output_usd": "output"}



def whatif_panel(ctx, name: str, f) -> None:
    """Move this workload to other models: predicted TTFT, ITL, cost and goodput beside today's (docs/whatif.md)."""
    from phaselens.pipeline.errors import PhaselensError
    from phaselens.pipeline.whatif import result_rows

    st.subheader("Routing what-if")
    if not queries.has_relation(ctx.snapshot, "whatif_calls"):
        empty_state("No what-if replay set in this snapshot yet.", f"Run `phaselens build --db {ctx.db}` to make it.")
        return
    options = queries.load_whatif_targets(ctx.snapshot)
    picked = st.multiselect("Move it to", options, key="whatif_targets",
                            help="Each target's calls are replayed through its fitted latency model and its prices.")
    if not picked:
        st.caption("Pick one or more provider/model pairs to see this workload's predicted TTFT, ITL, cost and "
                   "goodput there, beside what it got. The period filter applies.")
        return
    try:
        result = queries.load_whatif(ctx.snapshot, name, tuple(picked), replace(f, workloads=()))
    except PhaselensError as e:
        st.warning(f"{md_text(e.message)}. {md_text(e.fix)}")
        return
    _, rows = result_rows(result)
    table = pd.DataFrame([{
        "option": r[0], "TTFT p50": seconds(r[1]), "TTFT p95": seconds(r[2]), "ITL p50": millis(r[3]),
        "ITL p95": millis(r[4]), "e2e p95": seconds(r[6]), "cost per day": usd(r[7]), "goodput": pct(r[8]),
        "$ per 1,000 good calls": usd(None if r[9] is None else 1000 * r[9]), "Δ cost per day": usd(r[10]),
        "latency basis": text_or_dash(r[13]),
    } for r in rows])
    st.dataframe(table, hide_index=True, width="stretch")
    slo_text = ", ".join(f"{s['metric']} ≤ {seconds(s['max_s'])}" for s in result["slos"]) or "no SLO configured"
    st.caption(f"{count(result['calls'])} calls over {result['days']} day(s) replayed; goodput = share of calls "
               f"meeting each SLO per call ({slo_text}).")
    for t in result["targets"]:
        b = t["basis"]
        with st.expander(f"{md_text(t['target'])}: basis and assumptions" + (" (warnings)" if t["warnings"] else "")):
            if b.get("latency_model"):
                st.text(f"Latency model: {b['latency_model']} fitted on {count(b['fit_calls'])} calls; held-out "
                        f"error TTFT {pct(b['holdout_mape_ttft'])}, decode {pct(b['holdout_mape_decode'])}. "
                        f"Spread: {b['spread']}.")
            st.text(f"Caching: {t['caching']}.")
            st.text(f"Tokenizer ratio applied: {t['token_ratio']['applied']} "
                    f"({', '.join(t['token_ratio']['source_families'])} -> {t['token_ratio']['target_family']}).")
            for w in t["warnings"]:
                st.warning(w)


ctx = context()
st.title("Workload detail")
if not no_calls(ctx):
    wl = queries.load_workload_phases(ctx.snapshot, ctx.filters)
    names = wl["workload"].tolist()
    wanted = st.query_params.get("detail")
    if wanted and wanted not in names and not st.session_state.get("detail_workload"):
        st.warning(f"The link asked for workload `{md_text(wanted)}`, which is not in the filtered data; showing "
                   f"`{md_text(names[0])}` instead.")
    if st.session_state.get("detail_workload") not in names:
        st.session_state["detail_workload"] = wanted if wanted in names else names[0]
    name = st.selectbox("Workload", names, key="detail_workload")
    st.query_params["detail"] = name
    f = replace(ctx.filters, workloads=(name,))
    row = wl.set_index("workload").loc[name]

    # the workload's headline figures, the same numbers `phaselens workloads`, `explain` and the reports give
    c = st.columns(4)
    c[0].metric("Calls", count(row["calls"]))
    c[1].metric("Cost (USD)", usd(row["cost_usd_best"]), help=f"{COST_HEADLINE.capitalize()}.")
    c[2].metric("Prefill share of time", pct(row["prefill_time_share"]),
                help=f"Dominant phase (time): {text_or_dash(row['dominant_latency_phase'])}.")
    c[3].metric("Prefill share of cost", pct(row["prefill_cost_share"]),
                help=f"Dominant phase (money): {text_or_dash(row['dominant_cost_phase'])}.")
    c = st.columns(4)
    c[0].metric("TTFT p50", seconds(row["ttft_p50_s"]), help=f"Percentiles: {PERCENTILE_METHOD}.")
    c[1].metric("TTFT p95", seconds(row["ttft_p95_s"]))
    c[2].metric("ITL p50", millis(row["itl_p50_s"]))
    c[3].metric("ITL p95", millis(row["itl_p95_s"]))

    st.subheader("Diagnosis")
    if isinstance(row["diagnosis"], str):
        st.text(f"Time: {row['diagnosis']}")
        st.success(f"Lever for time: {md_text(row['lever'])}")
        if isinstance(row.get("cost_diagnosis"), str):
            st.text(f"Money: {row['cost_diagnosis']}")
            st.success(f"Lever for money: {md_text(row['cost_lever'])}")
        st.caption(f"Shape: {words(text_or_dash(row['shape_class']))}; cause: {words(text_or_dash(row['cause']))}. "
                   f"Median {count(row['input_tokens_p50'])} input "
                   f"and {count(row['output_tokens_p50'])} output tokens per call. "
                   + (f"The diagnosis is of the filtered calls ({SCOPE_NOTE})." if ctx.filters.active()
                      else "The diagnosis is of every call in the store."))
    else:
        empty_state("No diagnosis for this workload yet.", f"Run `phaselens build --db {ctx.db}` to derive it.")

    whatif_panel(ctx, name, f)

    st.subheader("Latency distributions")
    c = st.columns(2)
    for col, metric, title in [(c[0], "ttft_s", "TTFT (s, log)"), (c[1], "itl_s", "ITL (ms per output token, log)")]:
        d = queries.load_distribution(ctx.snapshot, f, metric)
        if metric == "itl_s":
            d = d.assign(lower_value=d["lower_value"] * 1000, upper_value=d["upper_value"] * 1000)
        with col:
            st.markdown(f"**{title.split(' (')[0]}**")
            if d.empty:
                st.info(f"No call of this workload has {metric.removesuffix('_s').upper()} timing.")
            else:
                st.altair_chart(charts.histogram_chart(d, title), width="stretch")

    st.subheader("Time split over time")
    ts = queries.load_time_split(ctx.snapshot, f, ctx.bin)
    if ts.empty or ts["seconds"].fillna(0).sum() == 0:
        st.info("No call of this workload has both phases timed.")
    else:
        st.altair_chart(charts.stacked_area_chart(ts, "seconds", "phase", f"call time per {ctx.bin} (s)", "phase",
                                                  charts.PHASE_COLORS), width="stretch")
        st.caption("Queue = waiting in the server queue (where the server reports it); prefill = the rest of the time "
                   "to the first token; decode = generating the remaining tokens.")

    st.subheader("Cost split over time")
    co = queries.load_cost_over_time(ctx.snapshot, f, ctx.bin, "all")
    long = co.melt(id_vars=["t"], value_vars=list(COST_BUCKETS), var_name="bucket", value_name="usd")
    long["bucket"] = long["bucket"].map(COST_BUCKETS)
    if long["usd"].fillna(0).sum() == 0:
        st.info("No priced call in this workload: add its model to the price book (see Data health).")
    else:
        st.altair_chart(charts.stacked_area_chart(long, "usd", "bucket", f"cost per {ctx.bin} (USD)",
                                                  "token bucket", value_format="$,.2f"), width="stretch")
        st.caption("Estimated cost: list or price-book prices times each bucket's tokens.")

    st.subheader("Calls behind it (sample)")
    sample = queries.load_sample_calls(ctx.snapshot, f)
    st.caption("A bounded sample per workload: the latest calls, the slowest to first token and the most expensive. "
               "No prompt or completion text is stored.")
    show = in_ms(sample, "itl_s").assign(model=sample["provider"] + "/" + sample["model"])
    # token counts under short labels, so the provider/model column has the width of its longest name
    table(show, {
        "started_at": st.column_config.DatetimeColumn("Started (UTC)", format="YYYY-MM-DD HH:mm:ss"),
        "picked_as": text_col("Picked as", help="Why this call is in the sample: latest, slowest to first token "
                                                "or most expensive."),
        "model": "Provider/model",
        "input_tokens": count_col("Input", help="Input tokens."),
        "output_tokens": count_col("Output", help="Output tokens."),
        "cache_read_tokens": count_col("Cached", help="Input tokens read from the provider's cache."),
        "ttft_s": seconds_col("TTFT (s)"), "itl_ms": ms_col("ITL (ms)"), "e2e_s": seconds_col("e2e (s)"),
        "cost_usd": usd_col("Cost (USD)"),
    })
    with st.expander("Where each call came from"):
        table(sample, {"started_at": st.column_config.DatetimeColumn("Started (UTC)", format="YYYY-MM-DD HH:mm:ss"),
                       "status": "Status", "team": "Team", "timing_source": "Timing", "source": "Source",
                       "call_id": "Call id"})
        if len(sample):  # file paths are long: each written out whole below the table, in a box that scrolls
            with st.container(height=240):
                st.text("\n".join(f"{r.call_id} from {text_or_dash(r.source_locator)}" for r in sample.itertuples()))
