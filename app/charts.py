"""Altair chart builders; every axis title carries its unit and every time axis says UTC."""

from __future__ import annotations

import altair as alt
import pandas as pd

PHASE_COLORS = alt.Scale(domain=["prefill", "decode", "queue"], range=["#4c78a8", "#f58518", "#9d9d9d"])
TIME_AXIS = alt.X("t:T", title="time (UTC)")
HEIGHT = 280
# legends beside the chart, with whole labels: a workload or model name is never cut (and the plot keeps its height)
LEGEND = alt.Legend(orient="right", labelLimit=0, titleLimit=0)


def phase_map_chart(df: pd.DataFrame) -> alt.Chart:
    """Workloads placed by median input tokens (x) against median output tokens (y), log scales; size = cost
    (USD), colour = the phase that dominates their time."""
    data = df.dropna(subset=["input_tokens_p50", "output_tokens_p50"]).copy()
    data = data[data["input_tokens_p50"] > 0]
    # a log axis has no 0: workloads without output (embeddings) sit on its floor of 1 token
    data["output_tokens_p50"] = data["output_tokens_p50"].clip(lower=1)
    data["cost_usd"] = data["cost_usd_best"].astype(float)  # the headline cost
    data["dominant_latency_phase"] = data["dominant_latency_phase"].fillna("no timing")
    base = alt.Chart(data)
    points = base.mark_circle(opacity=0.75, stroke="black", strokeWidth=0.5).encode(
        x=alt.X("input_tokens_p50:Q", scale=alt.Scale(type="log"), title="median input tokens per call (tokens, log)"),
        y=alt.Y("output_tokens_p50:Q", scale=alt.Scale(type="log"), title="median output tokens per call (tokens, log)"),
        size=alt.Size("cost_usd:Q", title="cost (USD)", scale=alt.Scale(range=[60, 2000]), legend=alt.Legend(tickCount=3)),
        color=alt.Color("dominant_latency_phase:N", title="dominant phase (time)",
                        scale=alt.Scale(domain=["prefill", "decode", "no timing"], range=["#4c78a8", "#f58518", "#bbbbbb"])),
        tooltip=[
            alt.Tooltip("workload:N"), alt.Tooltip("calls:Q", format=","),
            alt.Tooltip("input_tokens_p50:Q", title="median input (tokens)", format=",.0f"),
            alt.Tooltip("output_tokens_p50:Q", title="median output (tokens)", format=",.0f"),
            alt.Tooltip("cost_usd:Q", title="cost (USD)", format="$,.2f"),
            alt.Tooltip("dominant_latency_phase:N", title="dominant phase (time)"),
            alt.Tooltip("dominant_cost_phase:N", title="dominant phase (money)"),
        ],
    )
    labels = base.mark_text(align="left", dx=10, fontSize=11).encode(
        x="input_tokens_p50:Q", y="output_tokens_p50:Q", text="workload:N"
    )
    return (points + labels).properties(height=360)


# a solid and a dashed line in the legend for p50 and p95: on a line chart with points, the stroke symbols alone did
# not show (only the labels did); a transparent fill, a size and full opacity make them show
DASH_LEGEND = alt.Legend(symbolType="stroke", symbolStrokeWidth=2, symbolStrokeColor="gray",
                         symbolFillColor="transparent", symbolSize=400, symbolOpacity=1)


def percentile_lines_chart(df: pd.DataFrame, title: str, series_title: str, scale: float = 1.0) -> alt.Chart:
    """p50 (solid) and p95 (dashed) of each series over time on a log axis; `title` names the y axis with its unit
    and `scale` converts the seconds of `p50`/`p95` to it (1000 for milliseconds)."""
    if scale != 1.0:
        df = df.assign(p50=df["p50"] * scale, p95=df["p95"] * scale)
    return alt.Chart(df).transform_fold(["p50", "p95"], as_=["percentile", "value"]).mark_line(point=True).encode(
        x=TIME_AXIS,
        y=alt.Y("value:Q", title=title, scale=alt.Scale(type="log")),
        color=alt.Color("series:N", title=series_title, legend=LEGEND),
        strokeDash=alt.StrokeDash("percentile:N", title="percentile", scale=alt.Scale(domain=["p50", "p95"], range=[[1, 0], [5, 3]]),
                                  legend=DASH_LEGEND),
        tooltip=[alt.Tooltip("t:T", title="time (UTC)"), "series:N", "percentile:N",
                 alt.Tooltip("value:Q", title=title, format=",.3f"), alt.Tooltip("calls:Q", format=",")],
    ).properties(height=legend_height(df["series"].nunique() + 2, titles=2))


def legend_height(entries: int, titles: int = 1) -> int:
    """A chart height that holds a right-hand legend of `entries` rows under `titles` titles whole (a legend taller
    than its chart is cut at the chart's foot)."""
    return max(HEIGHT, 26 * entries + 34 * titles + 40)


def stacked_area_chart(df: pd.DataFrame, value: str, category: str, y_title: str, color_title: str,
                       colors: alt.Scale | None = None, value_format: str = ",.2f") -> alt.Chart:
    """Stacked bars over time of `value` split by `category`; `y_title` carries the unit (`value_format` is the
    tooltip's d3 format: `$,.2f` for money)."""
    color = (alt.Color(f"{category}:N", title=color_title, scale=colors, legend=LEGEND) if colors
             else alt.Color(f"{category}:N", title=color_title, legend=LEGEND))
    return alt.Chart(df).mark_bar().encode(
        x=TIME_AXIS,
        y=alt.Y(f"{value}:Q", title=y_title, stack="zero"),
        color=color,
        tooltip=[alt.Tooltip("t:T", title="time (UTC)"), f"{category}:N", alt.Tooltip(f"{value}:Q", title=y_title, format=value_format)],
    ).properties(height=HEIGHT)


def histogram_chart(df: pd.DataFrame, x_title: str) -> alt.Chart:
    """Calls per log bucket: bars from each bucket's lower to upper bound on a log axis."""
    data = df[df["lower_value"] > 0]
    return alt.Chart(data).mark_bar().encode(
        x=alt.X("lower_value:Q", scale=alt.Scale(type="log"), title=x_title),
        x2="upper_value:Q",
        y=alt.Y("calls:Q", title="calls"),
        y2=alt.datum(0),
        tooltip=[alt.Tooltip("lower_value:Q", title="from", format=",.3~f"),
                 alt.Tooltip("upper_value:Q", title="to", format=",.3~f"), alt.Tooltip("calls:Q", format=",")],
    ).properties(height=220)


def bar_chart(df: pd.DataFrame, category: str, value: str, category_title: str, value_title: str,
              color: str | None = None, color_title: str = "", grouped: bool = False,
              value_format: str = ",.2~f", percent: bool = False) -> alt.Chart:
    """Horizontal bars of `value` per `category` (sorted by value); `color` stacks them, or sets them side by side
    when `grouped`. `percent` shows a 0–1 share on a 0–100% axis; `value_format` is the d3 format of the tooltip
    (`$,.2f` for money). Category labels are never cut."""
    x_axis = alt.Axis(format="%") if percent else alt.Undefined
    enc = {
        "y": alt.Y(f"{category}:N", title=category_title, sort="-x", axis=alt.Axis(labelLimit=0)),
        "x": alt.X(f"{value}:Q", title=value_title, stack=None if grouped else "zero", axis=x_axis,
                   scale=alt.Scale(domain=[0, 1]) if percent else alt.Undefined),
        "tooltip": [alt.Tooltip(f"{category}:N", title=category_title),
                    alt.Tooltip(f"{value}:Q", title=value_title, format=".1%" if percent else value_format)],
    }
    if color:
        enc["color"] = alt.Color(f"{color}:N", title=color_title, legend=LEGEND)
        enc["tooltip"].append(alt.Tooltip(f"{color}:N", title=color_title))
        if grouped:
            enc["yOffset"] = alt.YOffset(f"{color}:N")
    step = 14 if grouped else 26
    return alt.Chart(df).mark_bar().encode(**enc).properties(height=alt.Step(step))


def slo_chart(df: pd.DataFrame, unit: str = "s") -> alt.Chart:
    """Observed percentile per time bin (points red when breached) against the SLO threshold (rule), in `unit`
    (`s`, or `ms` for inter-token latency; `observed_s` and `max_s` are seconds)."""
    k = 1000.0 if unit == "ms" else 1.0
    base = alt.Chart(df.assign(observed=df["observed_s"] * k, limit=df["max_s"] * k))
    line = base.mark_line(point=alt.OverlayMarkDef(size=40)).encode(
        x=TIME_AXIS, y=alt.Y("observed:Q", title=f"observed percentile ({unit})"),
        color=alt.Color("slo:N", title="SLO", legend=LEGEND),
    )
    breaches = base.transform_filter("datum.breached").mark_point(color="red", size=90, filled=True).encode(
        x="t:T", y="observed:Q",
        tooltip=[alt.Tooltip("t:T", title="time (UTC)"), alt.Tooltip("slo:N", title="SLO"),
                 alt.Tooltip("observed:Q", title=f"observed ({unit})", format=",.3f"),
                 alt.Tooltip("limit:Q", title=f"limit ({unit})", format=",.3f")],
    )
    rule = base.mark_rule(strokeDash=[4, 4]).encode(y="limit:Q", color=alt.Color("slo:N"))
    return (line + rule + breaches).properties(height=HEIGHT)
