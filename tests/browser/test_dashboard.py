"""The real dashboard (`phaselens dashboard --headless`) in headless Chromium: every page opens without a
Streamlit exception or a browser console error, a shared link reopens its filters, the running dashboard answers
while a batch run writes its store and shows the new calls afterwards by itself, and each page is saved as a
screenshot under tests/browser/screenshots/ for a person to look at."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

import duckdb
import pytest

from tests.app.stores import SAMPLE_CONFIG_ARGS, build_empty_store, build_sample_store, sample_inputs
from tests.app.test_live import holds_open, new_calls_file

pytestmark = pytest.mark.browser

from tests.browser.conftest import CHROMIUM, SHOTS  # noqa: E402
PHASELENS = Path(sys.executable).with_name("phaselens")
# page title in the sidebar navigation -> heading the page shows
NAV = {"Overview": "Overview", "Workload detail": "Workload detail", "Latency": "Latency", "Cost": "Cost",
       "Reconciliation": "Reconciliation", "Caching lever": "Caching lever", "Data health": "Data health"}
READY_S = 60
STREAMLIT_PROBE = re.compile(r"/[a-z_]+/_stcore/(health|host-config)$")

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed at /usr/bin/chromium (`./dev.sh test` installs it as root)",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Dashboard:
    """`phaselens dashboard --headless` on a store, as a user starts it; stopped by `stop()`."""

    def __init__(self, db: Path, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://localhost:{self.port}"
        self.log = log
        self.proc = subprocess.Popen(
            [str(PHASELENS), "dashboard", "--db", str(db), "--port", str(self.port), "--headless"],
            stdout=log.open("w"), stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,  # its own process group: stop() ends streamlit, the command's child, too
        )
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the dashboard exited: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"the dashboard did not answer within {READY_S} s: {log.read_text()[-2000:]}")

    def stop(self) -> None:
        """End the command and the streamlit server it started (the whole process group)."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=15)
                break
            except subprocess.TimeoutExpired:
                continue


class Watched:
    """A page whose console errors, uncaught errors and failed requests are collected."""

    def __init__(self, browser) -> None:
        self.page = browser.new_page(viewport={"width": 1440, "height": 1000})
        self.problems: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("requestfailed", lambda r: self.problems.append(f"request failed: {r.url} ({r.failure})"))
        self.page.on("response", self._response)

    def _console(self, m) -> None:
        if m.type != "error":
            return
        if not m.text.startswith("Failed to load resource"):  # failed loads are judged by their response below
            self.problems.append(f"console {m.type}: {m.text}")

    def _response(self, r) -> None:
        # Streamlit's frontend opened on a page's own URL (/overview) first probes /overview/_stcore/health and
        # /overview/_stcore/host-config to find the server's base path: those 404s are its own, not a defect
        if r.status >= 400 and not STREAMLIT_PROBE.search(r.url):
            self.problems.append(f"HTTP {r.status}: {r.url}")

    def settle(self, heading: str) -> None:
        """Wait until the script run has finished and `heading` is shown, then for charts to draw."""
        page = self.page
        page.get_by_role("heading", name=heading).first.wait_for(timeout=READY_S * 1000)
        page.wait_for_function(
            "() => { const a = document.querySelector('[data-testid=\"stApp\"]');"
            " return a && a.getAttribute('data-test-script-state') === 'notRunning'; }", timeout=READY_S * 1000)
        for chart in page.locator("[data-testid='stVegaLiteChart']").all():
            chart.locator("canvas, svg").first.wait_for(timeout=READY_S * 1000)
        page.wait_for_timeout(300)

    def check(self, where: str) -> None:
        exceptions = self.page.locator("[data-testid='stException']")
        assert exceptions.count() == 0, f"{where}: {exceptions.first.inner_text()}"
        assert not self.problems, f"{where}: {self.problems}"
        assert self.page.get_by_text("Page not found").count() == 0, f"{where}: Page not found"


def screenshot(page, path: Path) -> None:
    """The whole page: Streamlit scrolls inside its main block, so grow the viewport to the content first."""
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": 1440, "height": min(max(1000, height + 40), 8000)})
    page.wait_for_timeout(500)
    page.screenshot(path=str(path))
    page.set_viewport_size({"width": 1440, "height": 1000})


def visit_every_page(browser, dashboard: Dashboard, prefix: str) -> Watched:
    """Open the dashboard, then each page through the sidebar navigation, checking and screenshotting each."""
    SHOTS.mkdir(exist_ok=True)
    w = Watched(browser)
    w.page.goto(dashboard.url)
    for nav, heading in NAV.items():
        w.page.locator("[data-testid='stSidebarNav']").get_by_role("link", name=nav).click()
        w.settle(heading)
        w.check(f"{prefix} {nav}")
        screenshot(w.page, SHOTS / f"{prefix}-{nav.lower().replace(' ', '_')}.png")
    return w


def test_every_page_on_the_sample_day(browser, tmp_path_factory):
    if not sample_inputs():
        pytest.skip("sample_logs/traces is empty: generate it with `python -m phaselens.sample_logs.generate`")
    folder = tmp_path_factory.mktemp("browser-sample")
    db = build_sample_store(folder)
    dash = Dashboard(db, folder / "dashboard.log")
    try:
        w = visit_every_page(browser, dash, "sample")
        # a filter set in the sidebar lands in the URL, and that URL reopens the same view in a new page
        w.page.locator("[data-testid='stSidebarNav']").get_by_role("link", name="Overview").click()
        w.settle("Overview")
        with duckdb.connect(str(db), read_only=True) as con:
            chosen = con.execute("SELECT workload FROM requests GROUP BY 1 ORDER BY count(*) LIMIT 1").fetchone()[0]
        box = w.page.locator("[data-testid='stMultiSelect']").filter(has_text="Workload")
        box.locator("input").click()
        w.page.get_by_role("option", name=chosen, exact=True).click()
        w.page.keyboard.press("Escape")
        w.page.wait_for_url(re.compile(r"workload="), timeout=READY_S * 1000)
        w.settle("Overview")
        calls_filtered = w.page.locator("[data-testid='stMetric']").filter(has_text="Calls").first.inner_text()
        shared = Watched(browser)
        shared.page.goto(w.page.url)
        shared.settle("Overview")
        assert chosen in shared.page.locator("[data-testid='stMultiSelect']").filter(has_text="Workload").inner_text()
        assert shared.page.locator("[data-testid='stMetric']").filter(has_text="Calls").first.inner_text() == calls_filtered
        shared.check("shared link")
        w.check("after filtering")
    finally:
        dash.stop()


def test_every_page_opens_by_its_url_and_shows_every_column_at_1440_px(browser, tmp_path_factory):
    """`/overview`, `/latency`, ... each open their page (never "Page not found"), no table hides columns
    behind a horizontal scroll bar at 1440 px, no table cell or header is cut at its column's edge (every row,
    expanders opened), no chart label or legend entry is cut with an ellipsis (Vega's label limit) and no
    legend symbol is drawn invisible; each page is saved as screenshots/page-<name>.png."""
    from tests.browser.screenshot_pages import URL_PAGES, full_screenshot, inspect_page, open_expanders, show_all

    if not sample_inputs():
        pytest.skip("sample_logs/traces is empty: generate it with `python -m phaselens.sample_logs.generate`")
    folder = tmp_path_factory.mktemp("browser-urls")
    db = build_sample_store(folder)
    dash = Dashboard(db, folder / "dashboard.log")
    SHOTS.mkdir(exist_ok=True)
    try:
        w = Watched(browser)
        found = {}
        for path, heading in URL_PAGES.items():
            w.page.goto(f"{dash.url}/{path}")
            w.settle(heading)
            open_expanders(w.page)
            show_all(w.page)
            found[path] = inspect_page(w.page)
            w.check(f"/{path}")
            full_screenshot(w.page, SHOTS / f"page-{path}.png")
        with duckdb.connect(str(db), read_only=True) as con:  # each workload's call sample has its own names
            workloads = [r[0] for r in con.execute("SELECT workload FROM workloads ORDER BY 1").fetchall()]
        for name in workloads:
            w.page.goto(f"{dash.url}/workload?detail={quote(name)}")
            w.settle("Workload detail")
            open_expanders(w.page)
            show_all(w.page)
            found[f"workload {name}"] = inspect_page(w.page)
            w.check(f"/workload?detail={name}")
        assert {p: f for p, f in found.items()
                if f["page_not_found"] or f["overflowing_tables"] or f["cut_chart_text"] or f["hidden_legend_symbols"]
                or f["cut_table_cells"]} == {}
    finally:
        dash.stop()


CUT_TABLE_APP = """
import pandas as pd
import streamlit as st

st.title("Cut cells")
rows = 40
st.dataframe(pd.DataFrame({
    "model": ["gpt-4o"] * (rows - 1) + ["anthropic/claude-sonnet-4"],
    "cost": [1234567.89] + [1.5] * (rows - 1),
    "whole": ["fine"] * rows,
    "n": list(range(rows)),
}), hide_index=True, width="content", column_config={
    "model": st.column_config.TextColumn("Model", width=120),
    "cost": st.column_config.NumberColumn("Cost", format="dollar", width=60),
    "whole": st.column_config.TextColumn("Whole", width=120),
    "n": st.column_config.NumberColumn("A header longer than its column", width=70),
})
"""


def test_the_cut_cell_check_finds_cut_texts_figures_and_headers(browser, tmp_path):
    """The check above is not vacuous: in a table with a long name in its last row (seen only by scrolling the
    grid), a figure wider than its column and a header longer than its column, it names those three columns
    and not the one shown whole."""
    from tests.browser.screenshot_pages import inspect_page

    script = tmp_path / "cut.py"
    script.write_text(CUT_TABLE_APP)
    port = free_port()
    log = tmp_path / "streamlit.log"
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("streamlit")), "run", str(script), "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
        stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        w = Watched(browser)
        deadline = time.monotonic() + READY_S
        while True:
            try:
                w.page.goto(f"http://127.0.0.1:{port}")
                break
            except sync_api.Error:
                assert time.monotonic() < deadline, log.read_text()[-2000:]
                time.sleep(0.5)
        w.settle("Cut cells")
        w.page.locator("[data-testid='stDataFrame']").first.wait_for(timeout=READY_S * 1000)
        cut = inspect_page(w.page)["cut_table_cells"]
        named = {re.search(r'column "([^"]*)"', c).group(1) for c in cut}
        assert named == {"Model", "Cost", "A header longer than its column"}, cut
        assert any("anthropic/claude-sonnet-4" in c for c in cut), cut
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)


def test_every_page_on_an_empty_store(browser, tmp_path):
    db = build_empty_store(tmp_path)
    dash = Dashboard(db, tmp_path / "dashboard.log")
    try:
        w = visit_every_page(browser, dash, "empty")
        w.page.locator("[data-testid='stSidebarNav']").get_by_role("link", name="Overview").click()
        w.settle("Overview")
        assert "phaselens ingest" in w.page.locator("[data-testid='stAlert']").first.inner_text()
    finally:
        dash.stop()


def metric_value(page, label: str) -> str:
    """The value shown by the metric labelled `label`."""
    text = page.locator("[data-testid='stMetric']").filter(has_text=label).first.inner_text()
    return text.strip().splitlines()[-1].strip()


def test_the_running_dashboard_answers_during_a_batch_run_and_refreshes_after(browser, tmp_path_factory):
    if not sample_inputs():
        pytest.skip("sample_logs/traces is empty: generate it with `python -m phaselens.sample_logs.generate`")
    folder = tmp_path_factory.mktemp("browser-live")
    db = build_sample_store(folder)
    with duckdb.connect(str(db), read_only=True) as con:
        before = con.execute("SELECT count(*) FROM requests").fetchone()[0]
    dash = Dashboard(db, folder / "dashboard.log")
    try:
        w = Watched(browser)
        w.page.goto(dash.url)
        w.settle("Overview")
        assert metric_value(w.page, "Calls") == f"{before:,}"
        traces = new_calls_file(folder / "more-agent.jsonl")
        batch = [  # each publishes a snapshot when it ends
            [str(PHASELENS), "ingest", str(traces), "--db", str(db)],
            [str(PHASELENS), "build", "--db", str(db), *SAMPLE_CONFIG_ARGS],
        ]
        shown_while_writing = []
        for argv in batch:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            while proc.poll() is None:
                if not holds_open(proc.pid, db):
                    time.sleep(0.02)
                    continue
                for nav in ("Data health", "Overview"):
                    w.page.locator("[data-testid='stSidebarNav']").get_by_role("link", name=nav).click()
                    w.settle(nav)
                shown = metric_value(w.page, "Calls")
                if holds_open(proc.pid, db):
                    shown_while_writing.append(shown)
            out = proc.stdout.read()
            assert proc.returncode == 0, f"{argv[1:3]} failed while the dashboard was open:\n{out[-3000:]}"
        assert shown_while_writing, "the dashboard should have answered while the store was being written"
        w.check("during the batch run")
        with duckdb.connect(str(db), read_only=True) as con:
            after = con.execute("SELECT count(*) FROM requests").fetchone()[0]
        assert after > before
        assert set(shown_while_writing) <= {f"{before:,}", f"{after:,}"}, "only published states are shown"
        # no reload, no restart: the dashboard notices the new snapshot and reruns by itself
        w.page.wait_for_function(
            "(want) => [...document.querySelectorAll('[data-testid=\"stMetric\"]')].some(m => m.innerText.includes(want))",
            arg=f"{after:,}", timeout=READY_S * 1000)
        w.settle("Overview")
        assert metric_value(w.page, "Calls") == f"{after:,}"
        w.check("after the batch run")
        screenshot(w.page, SHOTS / "live-overview-after-batch.png")
    finally:
        dash.stop()
