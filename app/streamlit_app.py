"""The phaselens dashboard (router): `phaselens dashboard --db FILE`.

Finds the store's current published snapshot, draws the shared filters (kept in the URL so a view can be
shared as a link), hands both to the page `st.navigation` picks, and reruns by itself when a batch run
publishes a new snapshot.
"""

from __future__ import annotations

import os
import sys
from datetime import date
from pathlib import Path

import pandas as pd
import streamlit as st

from phaselens.app import queries
from phaselens.app.queries import Filters
from phaselens.app.ui import Context, empty_state, set_context
from phaselens.models import resolve_db
from phaselens.models.text import md_text
from phaselens.pipeline.publish import current_snapshot

# URL parameter -> (Filters field, label). Dates are `from` / `to` (UTC days, inclusive).
LIST_FILTERS: dict[str, tuple[str, str]] = {
    "provider": ("providers", "Provider"),
    "model": ("models", "Model"),
    "workload": ("workloads", "Workload"),
    "team": ("teams", "Team"),
}
WATCH_EVERY_S = 5
# URL parameters a page reads itself; any other parameter is named in a notice
PAGE_PARAMS = {"detail", "slo"}
NOTICES_KEY = "_url_notices"

def _home() -> None:
    """The root URL opens the Overview at /overview, keeping the link's parameters."""
    st.switch_page(PAGES[0], query_params={k: st.query_params.get_all(k) for k in st.query_params.keys()})


PAGES = [
    st.Page("app_pages/overview.py", title="Overview", icon=":material/dashboard:", url_path="overview"),
    st.Page("app_pages/workload.py", title="Workload detail", icon=":material/troubleshoot:", url_path="workload"),
    st.Page("app_pages/latency.py", title="Latency", icon=":material/timer:", url_path="latency"),
    st.Page("app_pages/cost.py", title="Cost", icon=":material/payments:", url_path="cost"),
    st.Page("app_pages/reconciliation.py", title="Reconciliation", icon=":material/receipt_long:",
            url_path="reconciliation"),
    st.Page("app_pages/caching.py", title="Caching lever", icon=":material/cached:", url_path="caching"),
    st.Page("app_pages/health.py", title="Data health", icon=":material/health_and_safety:", url_path="health"),
]


def store_path() -> Path:
    """`--db FILE` after the script's `--`, else PHASELENS_DB, else ./phaselens.duckdb."""
    args = sys.argv[1:]
    if "--db" in args and args.index("--db") + 1 < len(args):
        return Path(args[args.index("--db") + 1])
    return resolve_db(Path(os.environ["PHASELENS_DB"]) if os.environ.get("PHASELENS_DB") else None)


def _parse_day(text: str | None, notices: list[str] | None = None, param: str = "") -> date | None:
    try:
        return date.fromisoformat(text) if text else None
    except ValueError:
        if notices is not None:
            notices.append(f"`{param}={md_text(text)}` is not a date (YYYY-MM-DD): the period starts from the data's "
                           f"{'first' if param == 'from' else 'last'} day instead.")
        return None


def add_url_notice(text: str) -> None:
    """Name a URL parameter the view could not follow (shown above every page for this session)."""
    notices = st.session_state.setdefault(NOTICES_KEY, [])
    if text not in notices:
        notices.append(text)


def _init_from_url(options: dict[str, list[str]], first: date | None, last: date | None) -> None:
    """Seed the filter widgets from the URL once per session (a shared link opens on its view); every parameter
    that cannot be followed is named in a notice, never dropped silently."""
    if st.session_state.get("_filters_seeded"):
        return
    qp = st.query_params
    notices: list[str] = []
    for param, (field, label) in LIST_FILTERS.items():
        wanted = qp.get_all(param)
        st.session_state[f"f_{field}"] = [v for v in wanted if v in options[field]]
        for v in wanted:
            if v not in options[field]:
                notices.append(f"`{param}={md_text(v)}`: no {label.lower()} of that name in the data, so that "
                               "filter was left out.")
    asked_from, asked_to = qp.get("from"), qp.get("to")
    start, end = _parse_day(asked_from, notices, "from") or first, _parse_day(asked_to, notices, "to") or last
    if first and last and start and end:
        lo, hi = max(first, min(start, last)), min(last, max(end, first))
        for param, asked, got in (("from", start, lo), ("to", end, hi)):
            if asked != got and qp.get(param):
                notices.append(f"`{param}={asked.isoformat()}` is outside the data ({first.isoformat()} to "
                               f"{last.isoformat()}): the period {'starts' if param == 'from' else 'ends'} on "
                               f"{got.isoformat()} instead.")
        if lo > hi:
            notices.append(f"`from` is after `to`: the period runs from {hi.isoformat()} to {lo.isoformat()}.")
        st.session_state["f_period"] = (min(lo, hi), max(lo, hi))
    elif (asked_from or asked_to) and not (first and last):
        notices.append("The link names a period, but the store has no dated data yet.")
    for param in qp.keys():
        if param not in LIST_FILTERS and param not in ("from", "to") and param not in PAGE_PARAMS:
            notices.append(f"`{md_text(param)}` is not a parameter the dashboard reads, so it was ignored "
                           "(it reads provider, model, workload, team, from, to, detail and slo).")
    for n in notices:
        add_url_notice(n)
    st.session_state["_filters_seeded"] = True


def show_url_notices() -> None:
    """The URL parameters this session could not follow, in one visible notice."""
    notices = st.session_state.get(NOTICES_KEY) or []
    if notices:
        st.warning("This link asked for something the dashboard could not show:\n\n" +
                   "\n".join(f"- {n}" for n in notices))


def _write_url(f: Filters) -> None:
    """Keep the URL equal to the filters, so copying it shares the view."""
    wanted: dict[str, list[str]] = {param: list(getattr(f, field)) for param, (field, _) in LIST_FILTERS.items()}
    wanted["from"] = [f.start.isoformat()] if f.start else []
    wanted["to"] = [f.end.isoformat()] if f.end else []
    for param, values in wanted.items():
        if st.query_params.get_all(param) != values:
            if values:
                st.query_params[param] = values
            elif param in st.query_params:
                del st.query_params[param]


def _follow_data_range(first: date | None, last: date | None) -> None:
    """When new data widens the days on record, a period that showed everything keeps showing everything."""
    before = st.session_state.get("_data_days")
    st.session_state["_data_days"] = (first, last)
    if not (first and last):
        st.session_state.pop("f_period", None)
        return
    period = st.session_state.get("f_period")
    if period is None or (before and tuple(period) == tuple(before)):
        st.session_state["f_period"] = (first, last)
    else:  # keep the chosen days, inside what the data now covers
        lo, hi = (tuple(period) * 2)[:2]
        lo, hi = max(first, min(lo, last)), min(last, max(hi, first))
        st.session_state["f_period"] = (min(lo, hi), max(lo, hi))


def render_filters(snapshot: str) -> tuple[Filters, date | None, date | None]:
    """The shared sidebar filters (period, provider, model, workload, team); returns them and the data's days."""
    dims = queries.load_dimensions(snapshot)
    fresh = queries.load_freshness(snapshot)
    first = fresh.get("first_call_at")
    last = fresh.get("last_call_at")
    first = first.date() if hasattr(first, "date") and first == first else None
    last = last.date() if hasattr(last, "date") and last == last else None
    # the period spans every day with data, billing days without calls included: the period shown is the rows used
    billing = queries.load_table(snapshot, "billing_daily")
    if len(billing) and "day" in billing.columns:
        days = [d.date() if hasattr(d, "date") else d for d in pd.to_datetime(billing["day"]).dropna()]
        if days:
            first = min([first, min(days)]) if first else min(days)
            last = max([last, max(days)]) if last else max(days)
    options = {field: dims.loc[dims["dimension"] == param, "value"].tolist() for param, (field, _) in LIST_FILTERS.items()}
    _init_from_url(options, first, last)
    _follow_data_range(first, last)
    with st.sidebar:
        st.subheader("Filters")
        start = end = None
        if first and last:
            st.session_state.setdefault("f_period", (first, last))
            period = st.date_input("Period (UTC days)", min_value=first, max_value=last, key="f_period")
            if isinstance(period, (tuple, list)) and len(period) == 2:
                start, end = period
            elif isinstance(period, (tuple, list)) and len(period) == 1:
                start = end = period[0]
        values = {}
        for param, (field, label) in LIST_FILTERS.items():
            st.session_state[f"f_{field}"] = [v for v in st.session_state.get(f"f_{field}", []) if v in options[field]]
            values[field] = tuple(st.multiselect(label, options[field], key=f"f_{field}", placeholder="all"))
    if (start, end) == (first, last):  # the whole range is no filter: billing days beyond the calls stay in
        start = end = None
    f = Filters(start=start, end=end, **values)
    _write_url(f)
    return f, first, last


def render_freshness(snapshot: str) -> None:
    """Sidebar footer: how current the data is."""
    fresh = queries.load_freshness(snapshot)
    meta = queries.load_meta(snapshot)
    built = fresh.get("built_at")
    built = "never" if built is None or pd.isna(built) else str(built)[:19]
    with st.sidebar:
        st.caption(f"{int(fresh.get('calls') or 0):,} calls · published {meta.get('published_at', '?')[:19]} UTC · built {built}")


@st.fragment(run_every=WATCH_EVERY_S)
def watch_snapshot(db: Path, shown: str) -> None:
    """Rerun the whole app when a batch run has published a newer snapshot than the one shown."""
    now = current_snapshot(db)
    if now is not None and str(now) != shown:
        st.rerun(scope="app")


def main() -> None:
    """Route to the page, after resolving the snapshot and drawing the shared filters."""
    st.set_page_config(page_title="phaselens", page_icon="📊", layout="wide")
    db = store_path()
    nav = st.navigation([st.Page(_home, title="phaselens", url_path="home", default=True, visibility="hidden"), *PAGES])
    snapshot, reason = queries.resolve_snapshot(db)
    if snapshot is None:
        st.title("phaselens")
        if reason == "no_store":
            empty_state(f"There is no store at `{db}` yet.",
                        f"Load data with `phaselens ingest PATH --db {db}` and `phaselens build --db {db}`, "
                        "or run `phaselens demo` for the sample day.")
        else:
            empty_state("A batch run is writing the store and no snapshot has been published yet.",
                        f"The dashboard shows the data when `phaselens ingest`/`build` ends ({reason}).")
            watch_snapshot(db, "")
        st.stop()
    snap = str(snapshot)
    if not queries.format_ok(snap):
        empty_state("The published snapshot was written by another phaselens version.",
                    f"Publish it again with `phaselens build --db {db}`.")
        st.stop()
    filters, first, last = render_filters(snap)
    render_freshness(snap)
    show_url_notices()
    set_context(Context(db=db, snapshot=snap, filters=filters, bin=queries.time_bin(filters, first, last),
                        first_day=first, last_day=last))
    watch_snapshot(db, snap)
    nav.run()


main()
