"""Screenshot every dashboard page at 1440 px for a person to look at, and list what a browser can measure.

    .venv/bin/python -m tests.browser.screenshot_pages [OUT_DIR]      (default tests/browser/screenshots)

Builds the sample day into a temporary store, starts `phaselens dashboard --headless` on it, opens each page by
its own URL (`/overview`, `/workload`, ...) in headless Chromium at 1440 x 1000, waits for the charts, and saves
the whole page as `OUT_DIR/page-<name>.png`. For each page it prints whether the URL opened the page (no "Page
not found"), tables whose columns do not fit the page width (a horizontal scroll bar hides columns), chart
texts cut with an ellipsis, legend symbols drawn with neither stroke nor fill, and browser console errors.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

WIDTH = 1440
URL_PAGES = {"overview": "Overview", "workload": "Workload detail", "latency": "Latency", "cost": "Cost",
             "reconciliation": "Reconciliation", "caching": "Caching lever", "health": "Data health"}

# tables whose grid scrolls sideways (columns hidden at this width)
OVERFLOWING_TABLES = """() => [...document.querySelectorAll('[data-testid="stDataFrame"]')].map((d, i) => {
  const s = d.querySelector('.dvn-scroller');
  return s && s.scrollWidth > s.clientWidth + 2 ? `table ${i}: ${s.scrollWidth} px of columns in ${s.clientWidth} px` : null;
}).filter(Boolean)"""
# chart texts (axis labels, legend entries) that vega cut with an ellipsis
CUT_CHART_TEXT = """() => [...document.querySelectorAll('[data-testid="stVegaLiteChart"] svg text')]
  .map(t => t.textContent).filter(t => t.endsWith('…'))"""
# legend symbols a reader cannot see: no stroke and either no fill or a line's shape (a line has no area to fill)
HIDDEN_LEGEND_SYMBOLS = """() => [...document.querySelectorAll('[data-testid="stVegaLiteChart"] svg .role-legend-symbol path')]
  .filter(e => {
    const none = v => !v || v === 'none' || v === 'transparent';
    const line = /^M[-\\d.,e]+L[-\\d.,e]+$/.test(e.getAttribute('d') || '');
    return none(e.getAttribute('stroke')) && (line || none(e.getAttribute('fill')));
  }).map(e => (e.closest('.role-legend')?.querySelector('.role-legend-title text')?.textContent || 'legend')
              + ': ' + (e.parentElement?.parentElement?.querySelector('.role-legend-label text')?.textContent || '?'))"""
PAGE_HEIGHT = """() => Math.max(...[...document.querySelectorAll('[data-testid="stMain"], [data-testid="stMain"] *')]
  .slice(0, 400).map(e => e.scrollHeight))"""


def settle(page, heading: str, timeout_ms: int = 60_000) -> None:
    """Wait for the script run to end with `heading` shown and every chart drawn."""
    page.get_by_role("heading", name=heading).first.wait_for(timeout=timeout_ms)
    page.wait_for_function(
        "() => { const a = document.querySelector('[data-testid=\"stApp\"]');"
        " return a && a.getAttribute('data-test-script-state') === 'notRunning'; }", timeout=timeout_ms)
    for chart in page.locator("[data-testid='stVegaLiteChart']").all():
        chart.locator("canvas, svg").first.wait_for(timeout=timeout_ms)
    page.wait_for_timeout(500)


def show_all(page) -> None:
    """Grow the viewport to the whole page at WIDTH (Streamlit scrolls inside its main block and draws tables
    only once they are in view)."""
    height = page.evaluate(PAGE_HEIGHT)
    page.set_viewport_size({"width": WIDTH, "height": min(max(1000, height + 60), 12000)})
    page.wait_for_timeout(1000)


def full_screenshot(page, path: Path) -> None:
    """The whole page at WIDTH as one PNG."""
    show_all(page)
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size({"width": WIDTH, "height": 1000})


def inspect_page(page) -> dict:
    """What a browser can measure of a settled page."""
    return {"page_not_found": page.get_by_text("Page not found").count() > 0,
            "overflowing_tables": page.evaluate(OVERFLOWING_TABLES),
            "cut_chart_text": page.evaluate(CUT_CHART_TEXT),
            "hidden_legend_symbols": page.evaluate(HIDDEN_LEGEND_SYMBOLS)}


def main(argv: list[str]) -> int:
    from playwright.sync_api import sync_playwright

    from tests.app.stores import build_sample_store
    from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
    from tests.browser.test_dashboard import Dashboard

    out = Path(argv[0]) if argv else Path(__file__).resolve().parent / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = build_sample_store(Path(tmp))
        dash = Dashboard(db, Path(tmp) / "dashboard.log")
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
                errors: list[str] = []
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                for path, heading in URL_PAGES.items():
                    errors.clear()
                    page.goto(f"{dash.url}/{path}")
                    settle(page, heading)
                    show_all(page)
                    found = inspect_page(page)
                    full_screenshot(page, out / f"page-{path}.png")
                    print(f"/{path}: {'PAGE NOT FOUND' if found['page_not_found'] else 'opens ' + heading}; "
                          f"tables hiding columns: {found['overflowing_tables'] or 'none'}; "
                          f"cut chart texts: {found['cut_chart_text'] or 'none'}; "
                          f"hidden legend symbols: {found['hidden_legend_symbols'] or 'none'}; console errors: {errors or 'none'}")
                browser.close()
        finally:
            dash.stop()
    print(f"screenshots in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
