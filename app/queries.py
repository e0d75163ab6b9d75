"""Named reads of the published snapshot: one cached `load_*` function per relation or read macro.

The SQL of each read macro comes from the read model (pipeline/read_model.py), the module the CLI and the reports
read their figures through too, with the same percentile method and cost headline.

Every function takes the snapshot path first, so the cache is keyed by it: when a batch run publishes a new
snapshot the next rerun reads the new file, without a restart. Connections are read-only; SQL only names
relations and macros of the snapshot (pipeline/sql/rollup_macros.sql) and binds values as parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from pathlib import Path

import duckdb
import pandas as pd
import streamlit as st

from phaselens.pipeline.errors import StoreError
from phaselens.pipeline.publish import FORMAT_VERSION, current_snapshot, publish_store
from phaselens.pipeline.read_model import snapshot_sql

TTL_S = 600


@dataclass(frozen=True)
class Filters:
    """The shared filters: a UTC date range (inclusive days) and value lists (empty = all)."""

    start: date | None = None
    end: date | None = None
    providers: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    workloads: tuple[str, ...] = ()
    teams: tuple[str, ...] = ()

    def params(self) -> dict:
        """The macro arguments: since/until as UTC timestamps ([since, until)), lists or NULL for all."""
        return {
            "since": datetime.combine(self.start, time()) if self.start else None,
            "until": datetime.combine(self.end + timedelta(days=1), time()) if self.end else None,
            "providers": list(self.providers) or None,
            "models": list(self.models) or None,
            "workloads": list(self.workloads) or None,
            "teams": list(self.teams) or None,
        }

    def active(self) -> bool:
        """Whether any filter narrows the data."""
        return any([self.start, self.end, self.providers, self.models, self.workloads, self.teams])


def time_bin(filters: Filters, first: date | None, last: date | None) -> str:
    """`hour` when the selected period spans at most three days, else `day`."""
    start, end = filters.start or first, filters.end or last
    if start is None or end is None:
        return "hour"
    return "hour" if (end - start).days < 3 else "day"


def resolve_snapshot(db: Path) -> tuple[Path | None, str | None]:
    """The current snapshot of store `db` and, when there is none, the reason to show (None = ok).

    A store published by nothing yet (made before publishing existed) is published once here, read-only;
    if a batch run holds the store, the reason says to wait for it.
    """
    snap = current_snapshot(db)
    if snap is not None:
        return snap, None
    if not db.exists():
        return None, "no_store"
    try:
        return publish_store(db), None
    except StoreError as e:  # a batch run holds the store: it publishes when it ends
        return None, e.message


@st.cache_resource(max_entries=4, show_spinner=False)
def _database(snapshot: str) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(snapshot, read_only=True)


def _query(snapshot: str, sql: str, params: dict | list | None = None) -> pd.DataFrame:
    cur = _database(snapshot).cursor()  # one cursor per read: sessions run in their own threads
    try:
        return cur.execute(sql, params or {}).df()
    finally:
        cur.close()


def _with_filters(f: Filters, **extra) -> dict:
    return {**f.params(), **extra}


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_meta(snapshot: str) -> dict[str, str]:
    """The snapshot's meta rows (format_version, store, published_at, relations)."""
    df = _query(snapshot, "SELECT key, value FROM published_meta")
    return dict(zip(df["key"], df["value"], strict=True))


def has_relation(snapshot: str, name: str) -> bool:
    """Whether the snapshot holds relation `name` (optional ones exist once the build has made them)."""
    return name in load_meta(snapshot).get("relations", "").split(",")


def format_ok(snapshot: str) -> bool:
    """Whether the snapshot was written in the format this dashboard reads."""
    return load_meta(snapshot).get("format_version") == str(FORMAT_VERSION)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_dimensions(snapshot: str) -> pd.DataFrame:
    """Filter values per dimension (provider, model, workload, team) with their calls."""
    return _query(snapshot, "SELECT dimension, value, calls FROM dimensions")


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_freshness(snapshot: str) -> dict:
    """One row: calls, first/last call, last load, build and publish times (UTC)."""
    df = _query(snapshot, "SELECT * FROM freshness")
    return df.iloc[0].to_dict() if len(df) else {}


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_totals(snapshot: str, f: Filters) -> dict:
    """Calls, costs (USD), phase shares and TTFT/ITL/e2e p50/p95 (s) of everything the filters select."""
    df = _query(snapshot, snapshot_sql("totals"), _with_filters(f))
    return df.iloc[0].to_dict()


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_workload_phases(snapshot: str, f: Filters) -> pd.DataFrame:
    """Per workload: phase shares of time and money, dominant phases, median tokens, percentiles, lever."""
    return _query(snapshot, snapshot_sql("workload_phases"), _with_filters(f))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_percentiles(snapshot: str, f: Filters, bin_: str, group: str) -> pd.DataFrame:
    """p50/p90/p95/p99 per time bin, series and metric (seconds or tokens) from merged histograms."""
    sql = snapshot_sql("hist_percentiles")
    return _query(snapshot, sql, _with_filters(f, bin=bin_, grp=group))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_distribution(snapshot: str, f: Filters, metric: str) -> pd.DataFrame:
    """Calls per log bucket of one metric, with the bucket bounds (seconds or tokens)."""
    sql = snapshot_sql("hist_distribution")
    return _query(snapshot, sql, _with_filters(f, metric=metric))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_cost_over_time(snapshot: str, f: Filters, bin_: str, group: str) -> pd.DataFrame:
    """USD per time bin and series by token bucket, estimated and invoice-true."""
    sql = snapshot_sql("cost_over_time")
    return _query(snapshot, sql, _with_filters(f, bin=bin_, grp=group))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_time_split(snapshot: str, f: Filters, bin_: str) -> pd.DataFrame:
    """Seconds per time bin in queue, prefill and decode."""
    sql = snapshot_sql("time_split_over_time")
    return _query(snapshot, sql, _with_filters(f, bin=bin_))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_cost_by(snapshot: str, f: Filters, group: str) -> pd.DataFrame:
    """USD by team, project, workload, provider or model: estimated and invoice-true, input vs output."""
    sql = snapshot_sql("cost_by")
    return _query(snapshot, sql, _with_filters(f, grp=group))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_timing_sources(snapshot: str, f: Filters) -> pd.DataFrame:
    """Calls per timing source (measured, events, estimated, none)."""
    return _query(snapshot, snapshot_sql("timing_sources"), _with_filters(f))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_sample_calls(snapshot: str, f: Filters) -> pd.DataFrame:
    """The bounded call sample that passes the filters, latest first."""
    return _query(snapshot, snapshot_sql("sample_calls"), _with_filters(f))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_workload_latency(snapshot: str, f: Filters, bin_: str) -> pd.DataFrame:
    """TTFT/ITL/e2e p50 and p95 (s) per time bin and workload."""
    sql = snapshot_sql("workload_latency")
    return _query(snapshot, sql, _with_filters(f, bin=bin_))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_slo_status(snapshot: str, f: Filters, bin_: str, slos: tuple[tuple[str, str, float], ...]) -> pd.DataFrame:
    """Each SLO against its workload's observed percentile (s) per time bin, with `breached`."""
    if not slos:
        return pd.DataFrame(columns=["workload", "slo_metric", "max_s", "t", "observed_s", "calls", "breached"])
    items = [{"workload": w, "metric": m, "max_s": float(x)} for w, m, x in slos]
    sql = snapshot_sql("slo_status")
    return _query(snapshot, sql, _with_filters(f, bin=bin_, slos=items))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_table(snapshot: str, name: str, order_by: str = "") -> pd.DataFrame:
    """A whole published relation (small by construction), or an empty frame when the snapshot lacks it."""
    if not has_relation(snapshot, name) or not name.replace("_", "").isalnum():
        return pd.DataFrame()
    order = f" ORDER BY {order_by}" if order_by and order_by.replace("_", "").replace(" ", "").isalnum() else ""
    return _query(snapshot, f"SELECT * FROM {name}{order}")


BILLING_ARGS = "$since, $until, $providers, $models"


def _billing_filters(f: Filters) -> dict:
    p = f.params()
    return {k: p[k] for k in ("since", "until", "providers", "models")}


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_reconciliation(snapshot: str, f: Filters) -> dict[str, pd.DataFrame]:
    """Reconciliation under the period/provider/model filters: summary, per cause, per day, cells, untraced."""
    params = _billing_filters(f)
    return {
        name: _query(snapshot, f"SELECT * FROM {name}({BILLING_ARGS})", params)
        for name in ("reconciliation_summary", "reconciliation_by_cause", "reconciliation_daily",
                     "reconciliation_cells", "untraced_cells")
    }


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_caching(snapshot: str, level: str, lifetime_s: int | None) -> pd.DataFrame:
    """`caching_opportunity` rows of one level (`workload` or `model`) at one cache lifetime (s; None = unlimited)."""
    sql = ("SELECT * FROM caching_opportunity WHERE level = $level "
           "AND coalesce(lifetime_s, -1) = coalesce(CAST($life AS BIGINT), -1) ORDER BY usd_saved DESC NULLS LAST, workload")
    return _query(snapshot, sql, {"level": level, "life": lifetime_s})


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_caching_totals(snapshot: str, lifetime_s: int | None, workloads: tuple[str, ...]) -> dict:
    """Input USD now, USD saved at the measured reuse, and workloads with reuse, at one lifetime (s)."""
    df = _query(snapshot, "SELECT * FROM caching_totals($life, $w)", {"life": lifetime_s, "w": list(workloads) or None})
    return df.iloc[0].to_dict()


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_caching_lifetimes(snapshot: str) -> list[int | None]:
    """The cache lifetimes (s; None = unlimited) the build measured, shortest first."""
    from phaselens.pipeline.caching import published_lifetimes

    cur = _database(snapshot).cursor()
    try:
        return published_lifetimes(cur)
    finally:
        cur.close()


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_what_if(snapshot: str, workload: str, hit_rate: float | None, lifetime_s: int | None) -> dict:
    """Dollars (USD) and TTFT (s per call) a prompt cache would save for `workload` at `hit_rate` (share of input
    tokens read from cache; None = the measured reuse) and `lifetime_s`, from the snapshot's caching rows."""
    from phaselens.pipeline.caching import what_if

    cur = _database(snapshot).cursor()
    try:
        return what_if(cur, workload, hit_rate, lifetime_s)
    finally:
        cur.close()


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_whatif_targets(snapshot: str) -> list[str]:
    """`provider/model` pairs the what-if can move a workload to: those with a latency model, then priced ones."""
    df = _query(snapshot, (
        "SELECT provider || '/' || model AS target FROM latency_fits WHERE kind = 'generation' AND method <> 'none' "
        "UNION SELECT DISTINCT provider || '/' || model FROM whatif_calls WHERE provider IS NOT NULL AND model IS NOT "
        "NULL ORDER BY 1"
    ))
    return df["target"].tolist()


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_whatif(snapshot: str, workload: str, targets: tuple[str, ...], f: Filters) -> dict:
    """The routing what-if of `workload` over the filters' period: the same function `phaselens whatif` runs."""
    from phaselens.pipeline.whatif import Target, snapshot_inputs, whatif

    cur = _database(snapshot).cursor()
    try:
        settings, book, slos = snapshot_inputs(cur)
        p = f.params()
        return whatif(cur, workload, [Target.parse(t) for t in targets], p["since"], p["until"],
                      settings=settings, slos=slos, pricebook=book)
    finally:
        cur.close()
