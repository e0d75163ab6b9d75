"""Shared page pieces: the context the router hands to pages, number formats with units, empty states."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pandas as pd
import streamlit as st

from phaselens.app.queries import Filters
from phaselens.models import text
from phaselens.models.text import md_text  # noqa: F401  (names shown as text on every page)

CONTEXT_KEY = "_phaselens_context"


@dataclass(frozen=True)
class Context:
    """What every page needs: the store, its current snapshot, the shared filters and the time bin."""

    db: Path
    snapshot: str
    filters: Filters
    bin: str
    first_day: date | None
    last_day: date | None


def set_context(ctx: Context) -> None:
    """Hand the context to the page the router runs next (per session)."""
    st.session_state[CONTEXT_KEY] = ctx


def context() -> Context:
    """The context the router set for this run; stops the page with a message when there is none."""
    ctx = st.session_state.get(CONTEXT_KEY)
    if ctx is None:
        st.info("Open the dashboard through `phaselens dashboard`; this page needs its router.")
        st.stop()
    return ctx


def _missing(x) -> bool:
    if x is None:
        return True
    try:
        return bool(x != x)  # NaN, NaT and pandas' NA compare unequal to themselves
    except (TypeError, ValueError):
        return False


# One way to show each kind of figure, in headlines (the functions, those of models/text.py with a dash for a
# missing value, so a page, a diagnosis beside it and the reports write a figure alike) and in tables (the column
# formats):
# money in US dollars to the cent with thousands separators; counts and tokens with thousands separators;
# shares as percentages with one decimal; time to first token, end-to-end and queue time in seconds (3 decimals);
# inter-token latency in milliseconds (1 decimal). A missing value is a dash. Exact figures, to the micro-dollar,
# are in `phaselens ... --format json` and the report's CSV files.
USD_FORMAT = "dollar"
COUNT_FORMAT = "localized"
PCT_FORMAT = "percent"
SECONDS_FORMAT = MS_FORMAT = TOKENS_FORMAT = "localized"
MISSING = "—"


def usd(x) -> str:
    """Money to the cent, `$1,234.56` (USD, rounded half up); a dash when unknown."""
    return MISSING if _missing(x) else text.usd(x)


def pct(x) -> str:
    """A share (0–1) as a percentage with one decimal, `61.3%`; a dash when unknown."""
    return MISSING if _missing(x) else text.pct(x, decimals=1)


def seconds(x) -> str:
    """A duration in seconds, `0.546 s` (TTFT, end-to-end, queue); a dash when unknown."""
    return MISSING if _missing(x) else text.secs(x)


def millis(x) -> str:
    """A duration given in seconds, shown in milliseconds, `14.5 ms` (inter-token latency); a dash when unknown."""
    return MISSING if _missing(x) else text.ms(x)


def count(x) -> str:
    """An integer count with thousands separators; a dash when unknown."""
    return MISSING if _missing(x) else text.num(x)


def text_or_dash(x) -> str:
    """A text value, or a dash when unknown."""
    return MISSING if _missing(x) or x == "" else str(x)


# table columns, one per kind of figure (see above)
def usd_col(label: str, help: str | None = None, width=None):
    return st.column_config.NumberColumn(label, format=USD_FORMAT, help=help, width=width)


def count_col(label: str, help: str | None = None, width=None):
    return st.column_config.NumberColumn(label, format=COUNT_FORMAT, step=1, help=help, width=width)


def pct_col(label: str, help: str | None = None, bar: bool = False, width=None):
    if bar:
        return st.column_config.ProgressColumn(label, format=PCT_FORMAT, step=0.001, min_value=0, max_value=1, help=help,
                                                width=width)
    return st.column_config.NumberColumn(label, format=PCT_FORMAT, step=0.001, help=help, width=width)


def seconds_col(label: str, help: str | None = None, width=None):
    return st.column_config.NumberColumn(label, format=SECONDS_FORMAT, step=0.001, help=help, width=width)


def ms_col(label: str, help: str | None = None, width=None):
    """A column of milliseconds: convert its seconds with `in_ms` first."""
    return st.column_config.NumberColumn(label, format=MS_FORMAT, step=0.1, help=help, width=width)


def number_col(label: str, step: float, help: str | None = None, width=None):
    """A plain number (no unit) with thousands separators and the decimals of `step`."""
    return st.column_config.NumberColumn(label, format=COUNT_FORMAT, step=step, help=help, width=width)


def text_col(label: str, help: str | None = None, width=None):
    return st.column_config.TextColumn(label, help=help, width=width)


def in_ms(df: pd.DataFrame, *columns: str) -> pd.DataFrame:
    """A copy of `df` with the named seconds columns in milliseconds, each renamed for its unit (`itl_p50_s` ->
    `itl_p50_ms`; a name without `_s` gets `_ms` added)."""
    out = df.copy()
    for c in columns:
        if c in out.columns:
            out[ms_name(c)] = pd.to_numeric(out[c], errors="coerce").astype(float) * 1000
    return out


def ms_name(column: str) -> str:
    """The name `in_ms` gives a seconds column converted to milliseconds."""
    return (column.removesuffix("_s") if column.endswith("_s") else column) + "_ms"


TABLE_WIDTH_PX = 960  # the page's content width at 1440 px with the sidebar open
CHAR_PX = 7.2


def _fit_widths(shown: pd.DataFrame, config: dict) -> None:
    """Give each column a width so that every column fits the page at 1440 px (no column hidden behind a
    horizontal scroll): figures take what their header or widest value needs; text columns share the rest."""
    want, text = {}, []
    for c, conf in config.items():
        values = shown[c].dropna().astype(str) if len(shown) else pd.Series([], dtype=str)
        longest = int(values.str.len().max()) if len(values) else 1
        kind = (conf.get("type_config") or {}).get("type")
        header = len(conf.get("label") or c) + (2 if conf.get("help") else 0)
        if kind in ("number", "progress"):
            longest = min(longest, 10)
        elif kind in ("date", "datetime"):
            longest = 10 if kind == "date" else 19
        else:
            text.append(c)
        want[c] = int(max(header, longest) * CHAR_PX + 24)
    over = sum(want.values()) - TABLE_WIDTH_PX
    if over > 0 and text:  # figures keep their width (Streamlit sizes them); only the longest texts are cut
        room = max(sum(want[c] for c in text) - over, 110 * len(text))
        cap, rest = room, sorted(text, key=want.get)
        for i, c in enumerate(rest):  # water-filling: short texts whole, the long ones share what is left
            share = cap / (len(rest) - i)
            if want[c] <= share:
                cap -= want[c]
                continue
            for long in rest[i:]:
                config[long]["width"] = max(110, int(share))
            break


def table(df: pd.DataFrame, columns: dict, **kwargs) -> None:
    """Show `df`'s listed columns only, in the listed order, each with its label and format (a text label is a
    text column), sized to fit the page; missing values as a dash. Money columns are converted to floats for
    display (sums stay exact in the store and in JSON/CSV output)."""
    keep = [c for c in columns if c in df.columns]
    shown = df[keep].copy()
    config = {}
    for c in keep:
        spec = columns[c]
        config[c] = dict(text_col(spec) if isinstance(spec, str) else spec)
        kind = (config[c].get("type_config") or {}).get("type")
        if kind in ("number", "progress"):
            shown[c] = pd.to_numeric(shown[c], errors="coerce").astype(float)
    _fit_widths(shown, config)
    kwargs.setdefault("hide_index", True)
    kwargs.setdefault("width", "stretch")
    st.dataframe(shown, column_config=config, placeholder=MISSING, **kwargs)


def empty_state(what: str, how: str) -> None:
    """Say what is missing and the command that provides it."""
    st.info(f"{what}\n\n{how}")


def no_calls(ctx: Context) -> bool:
    """Show the no-calls empty state (what to load and how) when the filters select no call; True if shown."""
    from phaselens.app.queries import load_totals

    if load_totals(ctx.snapshot, ctx.filters)["calls"] > 0:
        return False
    if ctx.filters.active():
        empty_state("No calls match the filters.", "Widen the period or clear a filter in the sidebar.")
    else:
        empty_state(
            "The store has no model calls yet.",
            f"Load traces and build: `phaselens ingest PATH --db {ctx.db}` then `phaselens build --db {ctx.db}` "
            "(OTLP JSON traces, gateway logs from Langfuse/Helicone/LiteLLM, or benchmark results), "
            "or try the sample day with `phaselens demo`.",
        )
    return True


def words(v):
    """A code value (`cache_read`, `missing_cache_tokens`) as words (`cache read`); other values unchanged."""
    return v.replace("_", " ") if isinstance(v, str) else v


def untraced_table(cells: pd.DataFrame) -> None:
    """The untraced bucket per provider, model, UTC day and token type (Cost and Reconciliation pages)."""
    shown = cells.assign(**{c: cells[c].map(words) for c in ("token_type", "cause") if c in cells.columns})
    table(shown, {
        "day": st.column_config.DateColumn("Day (UTC)"), "provider": "Provider", "model": "Model",
        "token_type": "Token type", "billed_cost_usd": usd_col("Billed (USD)"),
        "allocated_cost_usd": usd_col("Allocated (USD)", help="Allocated to traced calls by their tokens."),
        "untraced_cost_usd": usd_col("Untraced (USD)"),
        "cause": "Cause",
    })
