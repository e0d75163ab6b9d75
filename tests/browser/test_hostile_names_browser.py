"""Names are text in a real browser: a workload named with Markdown (an image), HTML (an img tag) and a
spreadsheet formula shows as typed on every dashboard page and in the HTML report, and the browser makes no
request to the host the name points at (Playwright's request log, and a local listener that counts hits)."""

from __future__ import annotations

import http.server
import threading
from datetime import datetime, timedelta
from urllib.parse import quote

import pytest

from phaselens.pipeline.build import build
from phaselens.pipeline.load import ingest
from phaselens.pipeline.publish import publish
from phaselens.pipeline.report import write_report
from phaselens.pipeline.store import connect
from tests.app.stores import sample_config, sample_inputs
from tests.app.test_hostile_names import RAW_MARKUP
from tests.browser.conftest import CHROMIUM

pytestmark = pytest.mark.browser

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed at /usr/bin/chromium", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")

from tests.browser.screenshot_pages import URL_PAGES  # noqa: E402
from tests.browser.test_dashboard import Dashboard, Watched, free_port  # noqa: E402


class Listener:
    """A local HTTP server that counts every request it gets (the host a hostile name points at)."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        hits = self.hits

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (the standard library's name)
                hits.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.port = free_port()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def listener():
    lis = Listener()
    yield lis
    lis.stop()


@pytest.fixture(scope="module")
def hostile(listener, tmp_path_factory):
    """The sample day with its chat workload renamed to a hostile name pointing at the listener."""
    if not sample_inputs():
        pytest.skip("sample_logs/traces is empty")
    host = f"http://127.0.0.1:{listener.port}"
    name = f'=HYPERLINK("{host}/f")![x]({host}/x.png)<img src="{host}/y.png">**bold**'
    cfg = sample_config()
    assert cfg.workloads and cfg.workloads[0].name == "chat"
    cfg.workloads[0] = cfg.workloads[0].model_copy(update={"name": name})
    folder = tmp_path_factory.mktemp("hostile-browser")
    db = folder / "hostile.duckdb"
    con = connect(db)
    try:
        ingest(con, [str(p) for p in sample_inputs()])
        build(con, cfg)
        publish(con, db, cfg)
        first, last = con.execute("SELECT min(started_at), max(started_at) FROM requests").fetchone()
        reports = folder / "report"
        write_report(con, datetime(first.year, first.month, first.day), last + timedelta(seconds=1), reports,
                     ["html", "md", "csv"])
    finally:
        con.close()
    return {"db": db, "name": name, "host": host, "reports": reports, "folder": folder}


def _requests_to(w: Watched, host: str) -> list[str]:
    return [u for u in w.requests if u.startswith(host)]


def test_every_page_shows_the_hostile_name_as_text_and_fetches_nothing(browser, listener, hostile):
    dash = Dashboard(hostile["db"], hostile["folder"] / "dashboard.log")
    try:
        w = Watched(browser)
        w.requests = []
        w.page.on("request", lambda r: w.requests.append(r.url))
        literal = {}
        for path, heading in URL_PAGES.items():
            query = "?detail=" + quote(hostile["name"]) if path == "workload" else ""
            w.page.goto(f"{dash.url}/{path}{query}")
            w.settle(heading)
            w.check(path)
            text = w.page.locator("[data-testid='stMain']").inner_text()
            literal[path] = "![x](" in text or "<img src=" in text
            # no image element anywhere on the page points at the hostile host
            imgs = w.page.evaluate("(h) => [...document.querySelectorAll('img')].map(i => i.src).filter(s => s.startsWith(h))",
                                   hostile["host"])
            assert imgs == [], (path, imgs)
        w.page.wait_for_timeout(1000)
        assert _requests_to(w, hostile["host"]) == []
        assert listener.hits == []
        # the name is written out, as typed, on the pages that list workloads in text (the others show it in
        # widgets and tables, which draw text only)
        assert literal["overview"] and literal["caching"], literal
    finally:
        dash.stop()


def test_the_html_report_shows_the_name_as_text_and_fetches_nothing(browser, listener, hostile):
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto((hostile["reports"] / "report.html").as_uri())
    page.wait_for_timeout(1000)
    text = page.locator("body").inner_text()
    assert "<img src=" in text and "![x](" in text and '=HYPERLINK("' in text
    assert [u for u in requests if u.startswith(hostile["host"])] == []
    assert listener.hits == []
    md = (hostile["reports"] / "report.md").read_text()
    # every Markdown and HTML character of the name is escaped, so a Markdown viewer shows it as typed
    assert "![x](" not in md and "<img src=" not in md and not RAW_MARKUP.search(md)
