"""Every table on every page reads as a finance person would read it: no raw column name as a header, no
`None`/`nan` shown in a cell or a figure, money in dollars and cents, counts with thousands separators, and
columns that fit the page at 1440 px with every header and text whole.

Runs each page under AppTest on the sample day (and the workload page once per workload, the what-if panel
with a target picked, the latency page with an SLO from a link) and inspects what Streamlit was asked to draw:
the table's column configuration (labels, formats, hidden columns) and its cells.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from phaselens.app import ui
from tests.app.stores import PAGES
from tests.app.test_pages import assert_clean, render, store_rows

SNAKE = re.compile(r"^[a-z0-9]+(_[a-z0-9]+)+$")
MISSING_WORDS = re.compile(r"(?<![\w`])(None|nan|NaN|NaT|<NA>)(?![\w`])")
# the column formats a page may use: money to the cent, counts with separators, percentages with one decimal
ALLOWED_NUMBER_FORMATS = {ui.USD_FORMAT, ui.COUNT_FORMAT, ui.PCT_FORMAT, ui.SECONDS_FORMAT, ui.MS_FORMAT, ui.TOKENS_FORMAT}


def shown_columns(d) -> list[tuple[str, str, dict]]:
    """(column, header shown, its configuration) for each column of table `d` that the page shows."""
    cfg = json.loads(d.proto.columns) if d.proto.columns else {}
    order = list(d.proto.column_order)
    out = []
    for c in d.value.columns:
        conf = cfg.get(f"col:{c}", cfg.get(str(c))) or {}
        if conf.get("hidden") or (order and str(c) not in order):
            continue
        out.append((str(c), conf.get("label") or str(c), conf))
    return out


def problems(at, where: str) -> list[str]:
    """Every legibility defect in the tables, metrics and texts of one rendered page."""
    out = []
    for i, d in enumerate(at.dataframe):
        df: pd.DataFrame = d.value
        for col, header, conf in shown_columns(d):
            if SNAKE.match(header):
                out.append(f"{where} table {i}: raw column name {header!r} as a header")
            cells = df[col]
            if cells.isna().any() and not d.proto.placeholder:
                out.append(f"{where} table {i} column {header!r}: a missing value shows as None")
            text = cells.dropna().astype(str)
            bad = text[text.isin(["None", "nan", "NaN", "NaT", "<NA>"])]
            if len(bad):
                out.append(f"{where} table {i} column {header!r}: cell {bad.iloc[0]!r}")
            kind = (conf.get("type_config") or {}).get("type")
            if pd.api.types.is_numeric_dtype(cells) and not pd.api.types.is_bool_dtype(cells):
                fmt = (conf.get("type_config") or {}).get("format")
                if kind not in ("number", "progress") or fmt not in ALLOWED_NUMBER_FORMATS:
                    out.append(f"{where} table {i} column {header!r}: numbers without a page format ({kind}, {fmt})")
    for m in at.metric:
        if MISSING_WORDS.search(str(m.value)) or MISSING_WORDS.search(m.help or ""):
            out.append(f"{where} metric {m.label!r}: {m.value!r} / help {m.help!r}")
    for kind in ("markdown", "caption", "info", "warning", "success", "text", "subheader"):
        for e in getattr(at, kind):
            if MISSING_WORDS.search(str(e.value)):
                out.append(f"{where} {kind}: {str(e.value)[:200]!r}")
    return out


def cut_columns(at, where: str) -> list[str]:
    """Columns of the tables the page helper sized (ui.table) that do not fit the page at 1440 px or are
    narrower than their header or their longest text (the browser test measures the drawn grid; this checks
    the widths asked for, on every page and workload)."""
    out = []
    for i, d in enumerate(at.dataframe):
        cols = shown_columns(d)
        widths = [conf.get("width") for _, _, conf in cols]
        if not cols or not all(isinstance(w, int) for w in widths):
            continue
        if sum(widths) > ui.TABLE_WIDTH_PX:
            out.append(f"{where} table {i}: {sum(widths)} px of columns in {ui.TABLE_WIDTH_PX} px")
        for col, header, conf in cols:
            kind = (conf.get("type_config") or {}).get("type")
            need = ui.text_px(header) + ui.HEADER_PAD_PX
            if kind not in ("number", "progress", "date", "datetime"):
                need = max([need, *(ui.text_px(str(v)) + ui.CELL_PAD_PX for v in d.value[col].dropna())])
            if conf["width"] < need:
                out.append(f"{where} table {i} column {header!r}: {conf['width']} px of the {need:.0f} px it takes")
    return out


@pytest.mark.parametrize("page", PAGES)
def test_every_page_is_legible(sample_db, page, monkeypatch):
    at = render(sample_db, page, monkeypatch)
    assert_clean(at)
    assert problems(at, page) == []
    assert cut_columns(at, page) == []


def test_every_workload_detail_is_legible(sample_db, monkeypatch):
    found = []
    for (name,) in store_rows(sample_db, "SELECT workload FROM workloads ORDER BY 1"):
        at = render(sample_db, "workload", monkeypatch, {"detail": [name]})
        assert_clean(at)
        assert at.selectbox(key="detail_workload").value == name
        found += problems(at, f"workload {name}") + cut_columns(at, f"workload {name}")
    assert found == []


def test_whatif_panel_and_slo_link_are_legible(sample_db, monkeypatch):
    (name,) = store_rows(sample_db, "SELECT workload FROM workloads ORDER BY calls DESC LIMIT 1")[0]
    at = render(sample_db, "workload", monkeypatch, {"detail": [name]})
    targets = at.multiselect(key="whatif_targets")
    if targets.options:
        targets.set_value(targets.options[:2]).run()
        assert_clean(at)
    found = problems(at, "what-if")
    at = render(sample_db, "latency", monkeypatch, {"slo": [f"{name}|ttft_p95_s|0.2"]})
    assert_clean(at)
    found += problems(at, "latency with an SLO link")
    assert found == []


def test_table_widths_keep_texts_whole_and_cut_only_what_cannot_fit():
    shown = pd.DataFrame({"model": ["openai/text-embedding-3-small", "vllm/x"], "cost": [1234.5, 2.0]})
    config = {"model": dict(ui.text_col("Provider/model")), "cost": dict(ui.usd_col("Cost (USD)"))}
    ui._fit_widths(shown, config)
    assert config["model"]["width"] >= ui.text_px("openai/text-embedding-3-small") + ui.CELL_PAD_PX
    assert config["cost"]["width"] >= ui.text_px("Cost (USD)") + ui.HEADER_PAD_PX
    assert config["cost"]["width"] >= ui.text_px("$1,234.50") + ui.CELL_PAD_PX
    assert sum(c["width"] for c in config.values()) <= ui.TABLE_WIDTH_PX
    # a text no page holds: the figure keeps its width, the text takes what is left (a page writes it out below)
    shown = shown.assign(model=["a sentence far too long for any column " * 5, "short"])
    config = {"model": dict(ui.text_col("Note")), "cost": dict(ui.usd_col("Cost (USD)"))}
    ui._fit_widths(shown, config)
    assert config["cost"]["width"] >= ui.text_px("Cost (USD)") + ui.HEADER_PAD_PX
    assert config["model"]["width"] + config["cost"]["width"] <= ui.TABLE_WIDTH_PX


def test_the_check_finds_raw_headers_and_none_cells(sample_db, monkeypatch):
    """The check above is not vacuous: a raw table as the pages once drew it fails it."""
    import streamlit as st  # noqa: F401

    from streamlit.testing.v1 import AppTest

    def page():
        import pandas as pd
        import streamlit as st

        st.dataframe(pd.DataFrame({"invoice_calls": [1234, None], "note": [None, "x"]}), hide_index=True)

    at = AppTest.from_function(page).run()
    found = problems(at, "raw")
    assert any("raw column name 'invoice_calls'" in p for p in found)
    assert any("shows as None" in p for p in found)
    assert any("numbers without a page format" in p for p in found)


def _notice(at) -> str:
    return " ".join(w.value for w in at.warning if "This link asked for" in w.value)


def test_bad_url_parameters_are_named_in_a_visible_notice(sample_db, monkeypatch):
    (first,) = store_rows(sample_db, "SELECT min(CAST(started_at AS DATE)) FROM requests")[0]
    at = render(sample_db, "overview", monkeypatch, {
        "provider": ["no-such-provider"], "to": ["1999-01-01"], "from": ["not-a-day"], "colour": ["red"]})
    assert_clean(at)
    notice = _notice(at)
    assert "provider=no\\-such\\-provider" in notice and "no provider of that name" in notice
    assert "to=1999-01-01" in notice and "outside the data" in notice
    assert "from=not\\-a\\-day" in notice and "is not a date" in notice
    assert "colour" in notice and "not a parameter the dashboard reads" in notice
    # a link that asks for what the data has shows no notice
    at = render(sample_db, "overview", monkeypatch, {"from": [first.isoformat()]})
    assert _notice(at) == ""


def test_bad_detail_and_slo_parameters_are_named(sample_db, monkeypatch):
    at = render(sample_db, "workload", monkeypatch, {"detail": ["nope"]})
    assert_clean(at)
    assert any("workload `nope`" in w.value for w in at.warning)
    at = render(sample_db, "latency", monkeypatch, {"slo": ["chat|ttft_p99_s|0.1"]})
    assert_clean(at)
    assert any("slo=chat|ttft\\_p99\\_s|0\\.1" in w.value or "ttft" in w.value and "not shown" in w.value
               for w in at.warning)


def test_the_period_shown_spans_every_row_the_pages_use(sample_db, monkeypatch):
    """Billing days without calls are inside the period picker's range, so the picker shows what charts draw."""
    (call_first, call_last), = store_rows(sample_db, "SELECT min(started_at)::DATE, max(started_at)::DATE FROM requests")
    (bill_first, bill_last), = store_rows(
        sample_db, "SELECT min(CAST(period_start AS DATE)), max(CAST(period_start AS DATE)) FROM billing_lines")
    at = render(sample_db, "reconciliation", monkeypatch)
    assert_clean(at)
    shown = at.date_input(key="f_period").value
    assert shown[0] == min(d for d in (call_first, bill_first) if d is not None)
    assert shown[1] == max(d for d in (call_last, bill_last) if d is not None)
