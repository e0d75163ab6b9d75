"""Shared page pieces: the context the router hands to pages, number formats with units, empty states."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from pathlib import Path

import streamlit as st

from phaselens.app.queries import Filters
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
    return x is None or (isinstance(x, float) and math.isnan(x))


def usd(x, digits: int = 2) -> str:
    """Money as `$1,234.56` (USD); a dash when unknown."""
    if _missing(x):
        return "—"
    v = Decimal(str(x)) if not isinstance(x, Decimal) else x
    sign = "−" if v < 0 else ""
    if 0 < abs(v) < Decimal("0.01") and digits <= 2:
        return f"{sign}${abs(float(v)):,.4f}"
    return f"{sign}${abs(float(v)):,.{digits}f}"


def pct(x) -> str:
    """A share as a percentage; a dash when unknown."""
    return "—" if _missing(x) else f"{100 * float(x):.0f}%"


def seconds(x) -> str:
    """A duration with its unit: ms below one second, s above; a dash when unknown."""
    if _missing(x):
        return "—"
    x = float(x)
    return f"{1000 * x:,.1f} ms" if abs(x) < 1 else f"{x:,.2f} s"


def count(x) -> str:
    """An integer count with thousands separators; a dash when unknown."""
    return "—" if _missing(x) else f"{int(x):,}"


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
