"""Latency: TTFT and ITL percentiles over time by model or provider, and the SLOs per workload with breaches."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from phaselens.app import charts, queries
from phaselens.app.ui import (context, count, count_col, in_ms, md_text, ms_col, no_calls, number_col, pct_col, table,
                             words)
from phaselens.pipeline.read_model import PERCENTILE_METHOD

SLO_METRICS = {"ttft_p95_s": "TTFT p95", "ttft_p50_s": "TTFT p50", "itl_p95_s": "ITL p95", "itl_p50_s": "ITL p50",
               "e2e_p95_s": "e2e p95", "e2e_p50_s": "e2e p50"}
GROUPS = {"model": "provider/model", "provider": "provider", "workload": "workload", "team": "team"}


def url_slos() -> tuple[list[tuple[str, str, float]], list[str]]:
    """SLOs added in the dashboard, kept in the URL as `slo=workload|metric|max_s`, and the ones that could not
    be read."""
    out, bad = [], []
    for item in st.query_params.get_all("slo"):
        parts = item.split("|")
        try:
            if len(parts) == 3 and parts[1] in SLO_METRICS and float(parts[2]) > 0:
                out.append((parts[0], parts[1], float(parts[2])))
                continue
        except ValueError:
            pass
        bad.append(item)
    return out, bad


ctx = context()
st.title("Latency")
if not no_calls(ctx):
    group = st.radio("Series", list(GROUPS), format_func=GROUPS.get, horizontal=True, key="latency_group")
    pc = queries.load_percentiles(ctx.snapshot, ctx.filters, ctx.bin, group)
    st.caption(f"p50 (solid) and p95 (dashed) per {ctx.bin} (UTC); percentiles: {PERCENTILE_METHOD}.")
    # TTFT in seconds and ITL in milliseconds, each on its own axis
    for metric, name, unit, scale in [("ttft_s", "TTFT", "s", 1.0), ("itl_s", "ITL", "ms per token", 1000.0)]:
        d = pc[pc["metric"] == metric]
        st.subheader(f"{name} over time")
        if d.empty:
            st.info(f"No call in the filters has {name} timing. Streamed traces with a first-token time or server "
                    "timings give it; `phaselens build` estimates it for the others (see the fits below).")
            continue
        st.altair_chart(charts.percentile_lines_chart(d, f"{name} ({unit}, log)", GROUPS[group], scale),
                        width="stretch")

    st.subheader("SLOs")
    configured = queries.load_table(ctx.snapshot, "slos")
    configured_slos = [tuple(r) for r in configured[["workload", "metric", "max_s"]].itertuples(index=False)] \
        if len(configured) else []
    linked, unreadable = url_slos()
    for item in unreadable:
        st.warning(f"The link's `slo={md_text(item)}` is not `workload|metric|max_s` with a metric among "
                   f"{', '.join(SLO_METRICS)} and a limit in seconds above 0, so it is not shown.")
    slos = configured_slos + [s for s in linked if s not in configured_slos]
    workloads = queries.load_dimensions(ctx.snapshot).query("dimension == 'workload'")["value"].tolist()
    with st.expander("Add an SLO (kept in the link)", expanded=not slos):
        c = st.columns([3, 2, 2, 1])
        w = c[0].selectbox("Workload", workloads, key="slo_workload")
        m = c[1].selectbox("Metric", list(SLO_METRICS), format_func=SLO_METRICS.get, key="slo_metric")
        limit_ms = c[2].number_input("Limit (ms)", min_value=1.0, value=100.0, step=10.0, key="slo_limit_ms")
        if c[3].button("Add", key="slo_add") and w:
            st.query_params["slo"] = [*st.query_params.get_all("slo"), f"{w}|{m}|{limit_ms / 1000:g}"]
            st.rerun()
        st.caption("Configured SLOs come from `[[slos]]` in the configuration file of the last build "
                   "(e.g. `workload = \"tab_completion\"`, `metric = \"ttft_p95_s\"`, `max_s = 0.1`).")
    if not slos:
        st.info("No SLO yet: add one above, or configure them for every viewer in the configuration file.")
    else:
        status = queries.load_slo_status(ctx.snapshot, ctx.filters, ctx.bin, tuple(slos))
        rows = []
        for w, m, x in slos:
            mine = status[(status.workload == w) & (status.slo_metric == m) & (status.max_s == x)]
            rows.append({"workload": w, "objective": f"{SLO_METRICS[m]} ≤ {1000 * x:g} ms", "bins": len(mine),
                         "breached bins": int(mine["breached"].sum()),
                         "source": "configuration" if (w, m, x) in configured_slos else "this link"})
        summary = pd.DataFrame(rows)
        table(summary, {"workload": "Workload", "objective": "Objective", "bins": count_col(f"{ctx.bin.capitalize()}s"),
                        "breached bins": count_col(f"Breached {ctx.bin}s"), "source": "Source"})
        breaches = int(status["breached"].sum()) if len(status) else 0
        st.caption(f"{count(breaches)} breached {ctx.bin}s out of {count(len(status))} evaluated (UTC bins with calls).")
        if len(status):
            status = status.assign(slo=status["workload"] + " " + status["slo_metric"].map(SLO_METRICS))
            # seconds (TTFT, e2e) and milliseconds (ITL) each on their own axis
            itl = status["slo_metric"].str.startswith("itl")
            for part, unit in [(status[~itl], "s"), (status[itl], "ms")]:
                if len(part):
                    st.altair_chart(charts.slo_chart(part, unit), width="stretch")

    st.subheader("How timing was split")
    src = queries.load_timing_sources(ctx.snapshot, ctx.filters)
    st.caption("measured = server or explicit TTFT; events = first-chunk span events; estimated = the fitted latency "
               "model; none = no timing. " + ", ".join(f"{r.timing_source}: {count(r.calls)}" for r in src.itertuples()))
    fits = queries.load_table(ctx.snapshot, "latency_fits")
    if len(fits):
        st.markdown("**Fitted latency models** (per provider/model; they estimate the split where traces lack it)")
        fits = in_ms(fits, "ttft_intercept_s")
        fits["decode_ms_per_token"] = pd.to_numeric(fits["decode_s_per_output_token"], errors="coerce") * 1000
        fits["provider_model"] = fits["provider"] + "/" + fits["model"]
        fits["ttft_ms_per_1k"] = pd.to_numeric(fits["ttft_s_per_uncached_token"], errors="coerce") * 1e6
        # one provider/model column, as wide as its longest name; short figure labels, their meaning in the help
        table(fits.assign(method=fits["method"].map(words)), {
            "provider_model": "Provider/model", "method": "Method",
            "n_fit": count_col("Calls", help="Calls the model was fitted on; more were held out to test it."),
            "ttft_intercept_ms": ms_col("TTFT base (ms)", help="Prefill time of an empty prompt."),
            "ttft_ms_per_1k": ms_col("TTFT per 1k (ms)", help="TTFT added per 1,000 uncached input tokens."),
            "decode_ms_per_token": ms_col("Decode per token (ms)"),
            "holdout_mape_ttft": pct_col("Error TTFT", help="Mean absolute percentage error on held-out calls."),
            "holdout_mape_decode": pct_col("Error decode", help="Mean absolute percentage error on held-out calls."),
        })
        notes = fits[fits["note"].fillna("").astype(str).str.strip() != ""]
        if len(notes):
            st.text("\n".join(f"{r.provider_model}: {r.note}" for r in notes.itertuples()))
    else:
        st.caption("No latency fits published yet: `phaselens build` fits them.")
