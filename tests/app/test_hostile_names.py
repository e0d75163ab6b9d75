"""Names are text: a workload named with Markdown, HTML and a spreadsheet formula shows as typed on every
dashboard page, in the Markdown, HTML and CSV reports and in `workloads --format csv`."""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
from datetime import datetime, timedelta

import pytest

from phaselens.models.text import csv_cell, md_text
from phaselens.pipeline.build import build
from phaselens.pipeline.load import ingest
from phaselens.pipeline.publish import publish
from phaselens.pipeline.report import write_report
from phaselens.pipeline.store import connect
from tests.app.stores import PAGES, sample_config, sample_inputs
from tests.app.test_pages import render

HOST = "http://127.0.0.1:9"
HOSTILE = f'=HYPERLINK("{HOST}/f")![x]({HOST}/x.png)<img src="{HOST}/y.png">**bold**'
# markup that Markdown would interpret: the same characters escaped with a backslash are literal text
RAW_MARKUP = re.compile(r"(?<!\\)!(?<!\\)\[x|(?<!\\)<img|(?<!\\)\*(?<!\\)\*bold")


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory):
    """The sample day with its chat workload renamed to HOSTILE by a workload rule."""
    if not sample_inputs():
        pytest.skip("sample_logs/traces is empty")
    cfg = sample_config()
    assert cfg.workloads and cfg.workloads[0].name == "chat"
    cfg.workloads[0] = cfg.workloads[0].model_copy(update={"name": HOSTILE})
    path = tmp_path_factory.mktemp("hostile") / "hostile.duckdb"
    con = connect(path)
    try:
        ingest(con, [str(p) for p in sample_inputs()])
        build(con, cfg)
        publish(con, path, cfg)
        assert con.execute("SELECT count(*) FROM workloads WHERE workload = ?", [HOSTILE]).fetchone()[0] == 1
    finally:
        con.close()
    return path


def test_helpers_neutralise():
    assert csv_cell("=1+1") == "'=1+1" and csv_cell("-2") == "'-2" and csv_cell("\tx") == "'\tx"
    assert csv_cell(-2.5) == -2.5 and csv_cell("chat") == "chat"
    assert not RAW_MARKUP.search(md_text(HOSTILE)) and RAW_MARKUP.search(HOSTILE)


def _markdown_bodies(at) -> list[str]:
    out = []
    for kind in ("markdown", "caption", "info", "warning", "success", "error", "title", "header", "subheader"):
        out += [str(e.value) for e in getattr(at, kind)]
    return out


@pytest.mark.parametrize("page", PAGES)
def test_every_page_shows_the_name_as_text(hostile_db, monkeypatch, page):
    at = render(hostile_db, page, monkeypatch, {"detail": [HOSTILE]} if page == "workload" else None)
    assert not at.exception, at.exception
    for body in _markdown_bodies(at):
        assert not RAW_MARKUP.search(body), (page, body)
    if page == "overview":
        assert any(HOSTILE in t.value for t in at.text)


def test_reports_escape_the_name(hostile_db, tmp_path):
    con = connect(hostile_db)
    try:
        first, last = con.execute("SELECT min(started_at), max(started_at) FROM requests").fetchone()
        start = datetime(first.year, first.month, first.day)
        files = write_report(con, start, last + timedelta(seconds=1), tmp_path, ["html", "md", "csv"])
    finally:
        con.close()
    md = (tmp_path / "report.md").read_text()
    assert md_text(HOSTILE) in md
    assert not RAW_MARKUP.search(md)
    html = (tmp_path / "report.html").read_text()
    assert "<img" not in html and "&lt;img src=" in html and "Content-Security-Policy" in html
    workloads_csv = next(f for f in files if f.name.startswith("workloads") and f.suffix == ".csv")
    rows = list(csv.DictReader(io.StringIO(workloads_csv.read_text())))
    names = [r["workload"] for r in rows]
    assert "'" + HOSTILE in names and HOSTILE not in names
    assert all(not n.startswith(("=", "+", "-", "@", "\t", "\r")) for n in names)


def test_workloads_csv_neutralises_formulas_and_keeps_numbers(hostile_db):
    out = subprocess.run([sys.executable, "-m", "phaselens", "workloads", "--db", str(hostile_db), "--format", "csv"],
                         check=True, capture_output=True, text=True).stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    hostile = [r for r in rows if r["workload"] == "'" + HOSTILE]
    assert len(hostile) == 1
    float(hostile[0]["cost_usd"])  # numeric columns stay numbers
    for r in rows:
        for v in r.values():
            assert not (v or "x").startswith(("=", "+", "@", "\t", "\r")), v
            if v.startswith("-"):
                float(v)  # only negative numbers may begin with '-'
