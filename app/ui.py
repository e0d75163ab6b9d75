"""Shared page pieces: the context the router hands to pages, number formats with units, empty states."""

from __future__ import annotations

import math
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


TABLE_WIDTH_PX = 960  # the page's content width at 1440 px with the sidebar open (978 px drawn)
# the grid's font (Source Sans, 14 px): each character's width in pixels, rounded up; any other character as an em
_GLYPH_PX = {ch: px for px, chars in [
    (3.0, " "), (3.5, "ij',.:;|·"), (4.0, "lI"), (4.5, "ft!()-[]{}"), (5.0, "r/\\"), (6.0, 'sz"*?'), (6.5, "cxJ"),
    (7.0, "0123456789ekvyFLY#$+<=>^_~≤×−"), (7.5, "agESTVXZ"), (8.0, "bdhnopquACPR`"), (8.5, "BKΔ"), (9.0, "DG&"),
    (9.5, "HNOQU"), (10.5, "wM"), (11.0, "W"), (12.0, "m%@—")] for ch in chars}
CELL_PAD_PX = 16  # a cell's padding, both sides
HEADER_PAD_PX = 16  # a header's
SPARE_PX = 8  # more room for a header (its menu button), when the table has it
MIN_TEXT_PX = 110  # the least a text column is given when the texts do not all fit


def text_px(s: str) -> float:
    """How wide `s` is drawn in a table (cell or header), in pixels."""
    return sum(_GLYPH_PX.get(ch, 14.0) for ch in s)


def _figure(v: float, type_config: dict) -> str:
    """A number about as the table shows it (its format and the decimals of its step)."""
    step = type_config.get("step") or 1
    decimals = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    fmt = type_config.get("format")
    if fmt == USD_FORMAT:
        return ("-" if v < 0 else "") + f"${abs(v):,.2f}"
    if fmt == PCT_FORMAT or type_config.get("type") == "progress":
        return f"{v * 100:,.{max(0, decimals - 2)}f}%"
    return f"{v:,.{decimals}f}"


def _moment(fmt: str) -> str:
    """A date format (`YYYY-MM-DD HH:mm`) written out with sample digits."""
    for token, sample in [("YYYY", "2000"), ("MMM", "Nov"), ("MM", "00"), ("DD", "00"), ("HH", "00"), ("mm", "00"),
                          ("ss", "00")]:
        fmt = fmt.replace(token, sample)
    return fmt


def _fit_widths(shown: pd.DataFrame, config: dict) -> None:
    """Give each column the width its header and its widest value take, so that at 1440 px every text is shown
    whole and every column fits the page (no column hidden behind a horizontal scroll). When they do not all fit,
    figures keep their width and the longest texts share what is left, cut: a page writes long free text out
    below its table instead, and the browser test fails on any text cut on the sample day."""
    need, spare, texts = {}, {}, []
    for c, conf in config.items():
        type_config = conf.get("type_config") or {}
        kind = type_config.get("type")
        values = shown[c].dropna() if len(shown) else pd.Series([], dtype=object)
        if kind in ("number", "progress"):
            cells = [_figure(float(v), type_config) for v in values]
        elif kind in ("date", "datetime"):
            cells = [_moment(type_config.get("format") or ("YYYY-MM-DD" if kind == "date" else "YYYY-MM-DD HH:mm:ss"))]
        else:
            cells = [str(v) for v in values] or [MISSING]
            texts.append(c)
        header = text_px(conf.get("label") or c) + HEADER_PAD_PX
        need[c] = math.ceil(max([header, *(text_px(v) + CELL_PAD_PX for v in cells)]))
        spare[c] = max(0, math.ceil(header + SPARE_PX - need[c])) + 2  # and the grid line, rounding
    room = TABLE_WIDTH_PX - sum(need.values())
    share = min(1.0, max(0.0, room / (sum(spare.values()) or 1)))
    width = {c: need[c] + int(spare[c] * share) for c in need}
    over = -room
    if over > 0 and texts:  # figures keep their width; only the longest texts are cut
        cap, rest = max(sum(need[c] for c in texts) - over, MIN_TEXT_PX * len(texts)), sorted(texts, key=need.get)
        for i, c in enumerate(rest):  # water-filling: short texts whole, the long ones share what is left
            fair = cap / (len(rest) - i)
            if need[c] <= fair:
                cap -= need[c]
                continue
            for long in rest[i:]:
                width[long] = max(MIN_TEXT_PX, int(fair))
            break
    for c, w in width.items():
        config[c]["width"] = w


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
