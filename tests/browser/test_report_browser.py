"""The HTML report in headless Chromium, opened from disk: no request besides the file itself, no console error,
every section and inline chart drawn. Screenshots go to tests/browser/screenshots/ for a person to look at:
report.png (the sample day, with its bill) and report-changes.png (the second fixture day, with changes)."""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

import pytest

from phaselens.models.config import load_config
from phaselens.pipeline.reconcile import build_reconciliation
from phaselens.pipeline.report import write_report
from phaselens.pipeline.store import connect
from tests.app.stores import SAMPLE_LOGS, build_sample_store, sample_inputs
from tests.test_report import build_store

pytestmark = pytest.mark.browser

from tests.browser.conftest import CHROMIUM, SHOTS  # noqa: E402
SECTIONS = ("1. The answer: which phase dominates, and the lever", "2. Changes against the previous period", "3. Detail")

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed at /usr/bin/chromium (`./dev.sh test` installs it as root)",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")


def open_report(browser, html: Path, shot: Path) -> tuple[list[str], list[str], object]:
    """Open `html` from disk; return every request URL, every console/page error, and the page."""
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.goto(html.as_uri(), wait_until="load")
    page.wait_for_timeout(300)
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(shot), full_page=True)
    return requests, errors, page


def check_page(page, charts: int) -> None:
    for heading in SECTIONS:
        assert page.get_by_role("heading", name=heading).count() == 1, heading
    boxes = [svg.bounding_box() for svg in page.locator("svg.chart").all()]
    assert len(boxes) == charts and all(b and b["width"] > 300 and b["height"] > 40 for b in boxes), boxes


def test_sample_day_report_opens_offline(browser, tmp_path):
    if not sample_inputs():
        pytest.skip("sample_logs/traces is empty: generate it with `python -m phaselens.sample_logs.generate`")
    db = tmp_path / "report.duckdb"
    shutil.copyfile(build_sample_store(tmp_path / "sample"), db)
    con = connect(db)
    try:
        if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'reconciliation'").fetchall()[0][0]:
            build_reconciliation(con, pricebook=load_config(SAMPLE_LOGS / "phaselens.toml").pricebook)
        write_report(con, datetime(2026, 11, 16), datetime(2026, 11, 17), tmp_path / "out", "html")
    finally:
        con.close()
    html = tmp_path / "out" / "report.html"
    requests, errors, page = open_report(browser, html, SHOTS / "report.png")
    assert requests == [html.as_uri()]
    assert errors == []
    check_page(page, charts=2)  # no previous day in the sample: no change chart
    assert page.get_by_role("heading", name="Reconciliation against the bill").count() == 1
    assert "No billing data" not in page.inner_text("body")


def test_report_with_changes_opens_offline(browser, tmp_path):
    db = build_store(tmp_path / "fixture.duckdb")
    con = connect(db, read_only=True)
    try:
        write_report(con, datetime(2026, 11, 17), datetime(2026, 11, 18), tmp_path / "out", "html,csv")
    finally:
        con.close()
    html = tmp_path / "out" / "report.html"
    requests, errors, page = open_report(browser, html, SHOTS / "report-changes.png")
    assert requests == [html.as_uri()]
    assert errors == []
    check_page(page, charts=3)
    moved = page.locator("ul.moved").inner_text()
    assert "summarize: time: prefill → decode" in moved
