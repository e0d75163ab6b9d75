"""Screenshot every dashboard page at 1440 px for a person to look at, and list what a browser can measure.

    .venv/bin/python -m tests.browser.screenshot_pages [OUT_DIR]      (default tests/browser/screenshots)

Builds the sample day into a temporary store, starts `phaselens dashboard --headless` on it, opens each page by
its own URL (`/overview`, `/workload`, ...) in headless Chromium at 1440 x 1000, waits for the charts, opens
every expander, and saves the whole page as `OUT_DIR/page-<name>.png`. For each page it prints whether the URL
opened the page (no "Page not found"), tables whose columns do not fit the page width (a horizontal scroll bar
hides columns), chart texts cut with an ellipsis, legend symbols drawn with neither stroke nor fill, table cells
and headers cut at their column's edge, and browser console errors.
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
# chart texts cut with an ellipsis, and legend texts drawn past the chart's box (a legend taller than its chart
# is cut at its foot; axis labels may reach a few pixels over the box's top and are not cut)
CUT_CHART_TEXT = """() => [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].flatMap(c => {
  const box = c.getBoundingClientRect();
  return [...c.querySelectorAll('svg text')].filter(t => {
    if (!t.textContent) return false;
    if (t.textContent.endsWith('…')) return true;
    const r = t.getBoundingClientRect();
    return r.height > 0 && t.closest('.role-legend') && (r.bottom > box.bottom + 1 || r.right > box.right + 1);
  }).map(t => t.textContent);
})"""
# legend symbols a reader cannot see: no stroke and either no fill or a line's shape (a line has no area to fill)
HIDDEN_LEGEND_SYMBOLS = """() => [...document.querySelectorAll('[data-testid="stVegaLiteChart"] svg .role-legend-symbol path')]
  .filter(e => {
    const none = v => !v || v === 'none' || v === 'transparent';
    const line = /^M[-\\d.,e]+L[-\\d.,e]+$/.test(e.getAttribute('d') || '');
    return none(e.getAttribute('stroke')) && (line || none(e.getAttribute('fill')));
  }).map(e => (e.closest('.role-legend')?.querySelector('.role-legend-title text')?.textContent || 'legend')
              + ': ' + (e.parentElement?.parentElement?.querySelector('.role-legend-label text')?.textContent || '?'))"""
# table cells and headers cut at their column's edge. The grid draws on a canvas, so: each column's width from
# the grid lines drawn on it (no element has it); each text (every row: the grid is scrolled through) from its
# accessible table, measured with the grid's font, and cut when the left padding and the text pass the column's
# edge. That table holds figures unformatted, so a figure column (right-aligned) is cut when ink touches its
# left edge instead. A table whose grid has not drawn and painted within 10 s each is named too: it was not
# measured.
CUT_TABLE_CELLS = """async () => {
  const pause = ms => new Promise(r => setTimeout(r, ms));
  const drawn = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(r, 80))));
  const FIGURE = /^-?\\d+(\\.\\d+)?(e[-+]?\\d+)?$/i;
  const ruler = document.createElement('canvas').getContext('2d');
  const out = new Set();
  for (const [i, d] of [...document.querySelectorAll('[data-testid="stDataFrame"]')].entries()) {
    // a grid draws after the script run ends, later on a busy machine: wait up to 10 s for its canvas and rows
    const drawnGrid = () => {
      const c = d.querySelector('canvas[data-testid="data-grid-canvas"]');
      return c && c.clientWidth && d.querySelector('.dvn-scroller') ? c : null;
    };
    for (let t = 0; !drawnGrid() && t < 200; t++) await pause(50);
    const canvas = drawnGrid(), scroller = d.querySelector('.dvn-scroller');
    const shown = () => [...d.querySelectorAll('table[role="grid"] tr')].map(tr => tr.getAttribute('aria-rowindex')).join();
    for (let t = 0; canvas && !shown() && t < 200; t++) await pause(50);
    if (!canvas || !shown()) {  // not measured is not whole: say so rather than pass it
      out.add(`table ${i}: not drawn within 10 s, its cells could not be measured`);
      continue;
    }
    await drawn();
    const css = getComputedStyle(canvas.closest('.stDataFrameGlideDataEditor'));
    const v = name => css.getPropertyValue(name).trim();
    const rgb = hex => [1, 3, 5].map(k => parseInt(hex.slice(k, k + 2), 16));
    const pad = parseFloat(v('--gdg-cell-horizontal-padding')), line = rgb(v('--gdg-border-color')), bg = rgb(v('--gdg-bg-cell'));
    // the canvas can be in place before the grid paints on it (a blank canvas has no lines and no ink to measure)
    const painted = () => {
      if (!canvas.width || !canvas.height) return false;
      const p = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
      for (let o = 0; o < p.length; o += 4) if ([0, 1, 2].some(k => Math.abs(p[o + k] - bg[k]) > 48)) return true;
      return false;
    };
    for (let t = 0; !painted() && t < 100; t++) await pause(100);
    if (!painted()) {
      out.add(`table ${i}: not painted within 10 s, its cells could not be measured`);
      continue;
    }
    await drawn();
    const W = canvas.width, H = canvas.height, ratio = W / canvas.clientWidth;
    const pixels = () => canvas.getContext('2d').getImageData(0, 0, W, H).data;
    const near = (px, o, c, tol) => [0, 1, 2].every(k => Math.abs(px[o + k] - c[k]) <= tol);
    // grid lines: drawn down (across) nearly the whole canvas
    let px = pixels();
    const edges = [0];
    for (let x = 1; x < W - 1; x++) {
      let n = 0;
      for (let y = 0; y < H; y++) n += near(px, 4 * (y * W + x), line, 6);
      if (n >= 0.8 * H) edges.push(x + 1);
    }
    edges.push(W);
    let top = 0;
    while (top < H && [...Array(W).keys()].filter(x => near(px, 4 * (top * W + x), line, 6)).length < 0.8 * W) top++;
    const cols = new Map(), rows = new Map(), inked = new Set();
    const read = () => {
      d.querySelectorAll('table[role="grid"] tr').forEach(tr => rows.set(tr.getAttribute('aria-rowindex'),
        [...tr.children].map(c => [+c.getAttribute('aria-colindex') - 1, c.textContent])));
      px = pixels();
      for (let k = 0; k + 1 < edges.length; k++)
        for (let y = top + 2; y < H - 1; y++)
          for (let x = edges[k] + 1; x < edges[k] + 1 + 2 * ratio; x++)
            if (!near(px, 4 * (y * W + x), bg, 48)) inked.add(k);
    };
    for (let y = 0; ; y += scroller.clientHeight / 2) {
      const before = shown();
      scroller.scrollTop = y;
      for (let t = 0; y > 0 && shown() === before && t < 40; t++) await pause(50);  // its rows follow a scroll late
      await drawn();
      read();
      if (y + scroller.clientHeight >= scroller.scrollHeight) break;
    }
    scroller.scrollTop = 0;
    for (const [r, cells] of rows)
      for (const [c, text] of cells) {
        if (!cols.has(c)) cols.set(c, {header: '', texts: []});
        if (r === '1') cols.get(c).header = text; else cols.get(c).texts.push(text);
      }
    for (const [c, col] of cols) {
      const width = c + 1 < edges.length ? (edges[c + 1] - edges[c]) / ratio : 0;
      const where = `table ${i} column ${JSON.stringify(col.header)}`;
      const figures = col.texts.every(t => t === '' || FIGURE.test(t));
      const needs = (font, texts) => {
        ruler.font = `${font} ${v('--gdg-font-family')}`;
        return texts.map(t => [pad + ruler.measureText(t).width, t]).sort((a, b) => b[0] - a[0])[0] || [0, ''];
      };
      for (const [need, text] of [needs(v('--gdg-header-font-style'), [col.header]),
                                  needs(v('--gdg-base-font-style'), figures ? [] : col.texts)])
        if (need > width) out.add(`${where}: ${JSON.stringify(text)} needs ${Math.ceil(need)} px of ${Math.floor(width)}`);
      if (figures && inked.has(c)) out.add(`${where}: a figure reaches the column's left edge`);
    }
  }
  return [...out];
}"""
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


def open_expanders(page) -> None:
    """Open every closed expander, so the tables inside are drawn and measured too."""
    for summary in page.locator("[data-testid='stExpander'] details:not([open]) > summary").all():
        summary.click()
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
            "hidden_legend_symbols": page.evaluate(HIDDEN_LEGEND_SYMBOLS),
            "cut_table_cells": page.evaluate(CUT_TABLE_CELLS)}


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
                    open_expanders(page)
                    show_all(page)
                    found = inspect_page(page)
                    full_screenshot(page, out / f"page-{path}.png")
                    print(f"/{path}: {'PAGE NOT FOUND' if found['page_not_found'] else 'opens ' + heading}; "
                          f"tables hiding columns: {found['overflowing_tables'] or 'none'}; "
                          f"cut chart texts: {found['cut_chart_text'] or 'none'}; "
                          f"hidden legend symbols: {found['hidden_legend_symbols'] or 'none'}; "
                          f"cut table cells: {found['cut_table_cells'] or 'none'}; console errors: {errors or 'none'}")
                browser.close()
        finally:
            dash.stop()
    print(f"screenshots in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
