"""Period reports: a self-contained HTML page, a Markdown digest, a JSON document, and CSV/Parquet extracts.

Every figure comes from the read model (pipeline/read_model.py): money is the headline cost (invoice-true where
billed, else estimated) and percentiles are the log-histogram sketch, the numbers the dashboard and the CLI show.

Each report leads with the answer (per workload: the phase that dominates time and money, and the lever),
then the changes against the previous period of the same length (dominant phases that changed, cost deltas
by phase, TTFT/ITL moves), then the detail (workloads, cost by day and phase, reconciliation, data notes).

Output is deterministic: rows are sorted on full keys, numbers have fixed formats (floats rounded to 6
decimals in the extracts), and the only time stated is derived from the data, so the same store gives
byte-identical files. The HTML has no script and no external reference; its charts are inline SVG.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import jinja2
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from phaselens.models.run import REPORT_FORMATS, Period, resolve_period
from phaselens.models.text import csv_cell, md_text, ms, num, pct, secs, usd

from . import telemetry
from .errors import PhaselensError, StoreError
from .read_model import (
    CALLS_WITH_HEADLINE_COST, COST_HEADLINE, PERCENTILE_METHOD, RECONCILIATION_PERIOD, WORKLOADS_SQL, workload_rows,
)
from .store import relation_exists

# A workload "moved" when a number changed by at least this share (and money by at least MOVE_MIN_USD).
MOVE_MIN_CHANGE = 0.10
MOVE_MIN_USD = Decimal("0.01")
# Latency columns compared between the periods: column -> label.
LATENCY_MOVES = {"ttft_p50_s": "TTFT p50", "ttft_p95_s": "TTFT p95", "itl_p50_s": "ITL p50", "itl_p95_s": "ITL p95"}
# Reconciliation columns the extract keeps, in order (those the store has).
RECONCILIATION_COLUMNS = (
    "provider", "model", "day", "token_type", "billed_tokens", "traced_tokens", "billed_cost_usd",
    "estimated_cost_usd", "cost_delta_usd", "token_coverage", "cost_coverage", "status", "cause", "explanation",
)
GAP_ROWS = 10
FLOAT_DECIMALS = 6
_MONEY = pa.decimal128(38, 12)
# Columns of `workload_changes` (the changes extract) and their types.
CHANGE_COLUMNS: dict[str, pa.DataType] = {
    "workload": pa.string(), "status": pa.string(), "calls_previous": pa.int64(), "calls": pa.int64(),
    **{f"{c}{s}": pa.string() for c in ("dominant_latency_phase", "dominant_cost_phase") for s in ("_previous", "")},
    **{f"{k}{s}": _MONEY for k in ("prefill_cost", "decode_cost", "cost") for s in ("_usd_previous", "_usd", "_delta_usd")},
    **{f"{c}{s}": pa.float64() for c in LATENCY_MOVES for s in ("_previous", "", "_change")},
    "moved": pa.bool_(), "reasons": pa.string(),
}

# Money here is the read model's headline (invoice-true where billed, else estimated; pipeline/read_model.py).
COSTS_BY_DAY_PHASE_SQL = f"""
SELECT CAST(date_trunc('day', started_at) AS DATE) AS day, workload, provider, model, phase,
       sum(tokens)::BIGINT AS tokens, sum(cost_usd_best) AS cost_usd_best, sum(cost_usd) AS cost_usd
FROM (SELECT started_at, workload, provider, model, 'prefill' AS phase, input_tokens AS tokens,
             input_cost_usd_best AS cost_usd_best, input_cost_usd AS cost_usd
      FROM {CALLS_WITH_HEADLINE_COST} WHERE started_at >= $s AND started_at < $u
      UNION ALL
      SELECT started_at, workload, provider, model, 'decode', output_tokens, output_cost_usd_best, output_cost_usd
      FROM {CALLS_WITH_HEADLINE_COST} WHERE started_at >= $s AND started_at < $u)
GROUP BY ALL ORDER BY day, workload, provider, model, phase DESC
"""
COST_BUCKETS_SQL = f"""
WITH c AS (SELECT time_bucket($step, started_at, $s) AS t, sum(input_cost_usd_best) AS prefill,
                  sum(output_cost_usd_best) AS decode
           FROM {CALLS_WITH_HEADLINE_COST} WHERE started_at >= $s AND started_at < $u GROUP BY 1)
SELECT b.t AS bucket, coalesce(c.prefill, 0) AS prefill, coalesce(c.decode, 0) AS decode
FROM (SELECT unnest(generate_series($s, $u - INTERVAL 1 MICROSECOND, $step)) AS t) b LEFT JOIN c USING (t)
ORDER BY b.t
"""
DAYS_SQL = f"""
SELECT CAST(date_trunc('day', started_at) AS DATE) AS day, count(*) AS calls, sum(input_cost_usd_best) AS prefill,
       sum(output_cost_usd_best) AS decode, sum(cost_usd_best) AS total
FROM {CALLS_WITH_HEADLINE_COST} WHERE started_at >= $s AND started_at < $u GROUP BY 1 ORDER BY 1
"""
NOTES_SQL = """
SELECT count(*), count(*) FILTER (WHERE timing_source = 'estimated'), count(*) FILTER (WHERE NOT priced),
       count(*) FILTER (WHERE status = 'error'), count(*) FILTER (WHERE ttft_s IS NULL AND decode_s IS NULL)
FROM requests WHERE started_at >= $s AND started_at < $u
"""


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: dict | None = None) -> list[dict[str, Any]]:
    cur = con.execute(sql, params or {})
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def _workloads(con: duckdb.DuckDBPyConnection, p: Period) -> list[dict[str, Any]]:
    return workload_rows(con, p.start, p.end)


def _rel(before: Any, now: Any) -> float | None:
    """Relative change (now - before) / before, or None when it is undefined."""
    if before is None or now is None or before == 0:
        return None
    return float(now - before) / float(before)


def _delta(before: Any, now: Any) -> Any:
    return None if before is None and now is None else (now or 0) - (before or 0)


def workload_changes(current: list[dict], previous: list[dict]) -> list[dict[str, Any]]:
    """Per workload of either period: both periods' phases, costs by phase (USD) and latencies (s), and why it moved."""
    cur, prev = {r["workload"]: r for r in current}, {r["workload"]: r for r in previous}
    out = []
    for name in sorted(cur.keys() | prev.keys()):
        c, p = cur.get(name, {}), prev.get(name, {})
        row: dict[str, Any] = {"workload": name, "status": "new" if not p else "gone" if not c else "both",
                               "calls_previous": p.get("calls", 0), "calls": c.get("calls", 0)}
        reasons = {"new": ["new this period"], "gone": ["no calls this period"]}.get(row["status"], [])
        for col, what in (("dominant_latency_phase", "time"), ("dominant_cost_phase", "money")):
            row[f"{col}_previous"], row[col] = p.get(col), c.get(col)
            if p.get(col) and c.get(col) and p[col] != c[col]:
                reasons.append(f"{what}: {p[col]} → {c[col]}")
        for phase, col in (("prefill", "input_cost_usd_best"), ("decode", "output_cost_usd_best"),
                           ("total", "cost_usd_best")):
            key = "cost_usd" if phase == "total" else f"{phase}_cost_usd"
            row[f"{key}_previous"], row[key] = p.get(col), c.get(col)
            row[key.replace("_usd", "_delta_usd")] = _delta(p.get(col), c.get(col))
        change = _rel(row["cost_usd_previous"], row["cost_usd"])
        if row["status"] == "both" and change is not None and abs(change) >= MOVE_MIN_CHANGE \
                and abs(row["cost_delta_usd"]) >= MOVE_MIN_USD:
            reasons.append(f"cost {100 * change:+.0f}%")
        for col, label in LATENCY_MOVES.items():
            row[f"{col}_previous"], row[col] = p.get(col), c.get(col)
            change = _rel(p.get(col), c.get(col))
            row[f"{col}_change"] = change
            if change is not None and abs(change) >= MOVE_MIN_CHANGE:
                reasons.append(f"{label} {100 * change:+.0f}%")
        row["moved"], row["reasons"] = bool(reasons), "; ".join(reasons)
        out.append(row)
    return out


def _totals(rows: list[dict]) -> dict[str, Decimal]:
    return {k: sum((r[c] or Decimal(0) for r in rows), Decimal(0)) for k, c in
            (("prefill", "input_cost_usd_best"), ("decode", "output_cost_usd_best"), ("total", "cost_usd_best"))}


def _bucket(p: Period) -> tuple[timedelta, str, str]:
    """Chart bucket of a period: (size, label format, name)."""
    if p.hours <= 24:
        return timedelta(hours=1), "%H:00", "hour"
    return (timedelta(days=1), "%m-%d", "day") if p.hours <= 92 * 24 else (timedelta(days=7), "%Y-%m-%d", "week")


RECONCILIATION_WHERE = RECONCILIATION_PERIOD


def _reconciliation(con: duckdb.DuckDBPyConnection, p: Period) -> dict[str, Any] | None:
    """The period's reconciliation cells, per-provider summary, gaps and invoice-true cost; None without billing data."""
    if not relation_exists(con, "reconciliation"):
        return None
    have = {r[0] for r in con.execute("SELECT column_name FROM (DESCRIBE reconciliation)").fetchall()}
    args = {"since": p.start, "until": p.end}
    table = _arrow(con, f"SELECT {', '.join(c for c in RECONCILIATION_COLUMNS if c in have)} FROM reconciliation "
                        f"WHERE {RECONCILIATION_WHERE} ORDER BY provider, model NULLS LAST, day, token_type", args)
    if not table.num_rows:
        return None
    providers = _rows(con, f"""
        SELECT provider, sum(billed_cost_usd) AS billed, sum(estimated_cost_usd) AS estimated,
               sum(billed_cost_usd) - sum(estimated_cost_usd) AS delta, count(*) AS cells,
               count(*) FILTER (WHERE status <> 'ok') AS gaps
        FROM reconciliation WHERE {RECONCILIATION_WHERE} GROUP BY provider ORDER BY provider""", args)
    gaps = sorted((r for r in table.to_pylist() if r.get("status") != "ok"),
                  key=lambda r: (-abs(r.get("cost_delta_usd") or 0), r["provider"], r["model"] or "", r["day"],
                                 r["token_type"]))
    invoice = []
    if relation_exists(con, "invoice_costs"):
        invoice = _rows(con, """
            SELECT r.workload, sum(r.cost_usd) AS estimated, sum(i.cost_usd_invoice) AS invoice
            FROM requests r LEFT JOIN invoice_costs i USING (call_id)
            WHERE r.started_at >= $since AND r.started_at < $until GROUP BY r.workload
            ORDER BY invoice DESC NULLS LAST, r.workload""", args)
    untraced = None
    if relation_exists(con, "untraced_costs"):
        untraced = con.execute(f"SELECT sum(untraced_cost_usd) FROM untraced_costs WHERE {RECONCILIATION_WHERE}",
                               args).fetchall()[0][0]
    return {"table": table, "providers": providers, "gaps": gaps[:GAP_ROWS], "gap_count": len(gaps),
            "invoice": invoice, "untraced": untraced}


def note_lines(n: dict[str, int]) -> list[str]:
    """Plain sentences on what the numbers leave out: estimated timing, untimed, unpriced and failed calls."""
    lines = [
        (n["estimated"], f"{n['estimated']:,} of {n['calls']:,} calls have no TTFT in their traces; "
                         "their prefill/decode split is estimated by the latency model."),
        (n["untimed"], f"{n['untimed']:,} calls have no timing at all and are left out of the time split."),
        (n["unpriced"], f"{n['unpriced']:,} calls have no known price and are left out of the money split "
                        "(add their model to the price book)."),
        (n["errors"], f"{n['errors']:,} calls ended in an error."),
    ]
    kept = [text for count, text in lines if count]
    return kept or (["Every call in the period is measured, priced and successful."] if n["calls"] else [])


METHOD_NOTE = (f"Cost is {COST_HEADLINE} (list or price-book price); percentiles are a {PERCENTILE_METHOD}, "
               "the same figures the dashboard and `phaselens workloads` show.")


def gather(con: duckdb.DuckDBPyConnection, period: Period) -> dict[str, Any]:
    """Everything a report shows for `period` (money in USD, times in seconds), read from the built store."""
    if not relation_exists(con, "workloads"):
        raise StoreError("the store has not been built yet", "run `phaselens build` after `phaselens ingest`")
    previous = period.previous()
    current, before = _workloads(con, period), _workloads(con, previous)
    step, fmt, bucket_name = _bucket(period)
    buckets = [{"label": r["bucket"].strftime(fmt), "prefill": float(r["prefill"]), "decode": float(r["decode"])}
               for r in _rows(con, COST_BUCKETS_SQL, {"s": period.start, "u": period.end, "step": step})]
    calls, estimated, unpriced, errors, untimed = con.execute(
        NOTES_SQL, {"s": period.start, "u": period.end}).fetchall()[0]
    first, last = con.execute("SELECT min(started_at), max(started_at) FROM requests").fetchall()[0]
    return {
        "period": period, "previous": previous, "workloads": current, "previous_workloads": before,
        "changes": workload_changes(current, before), "totals": _totals(current), "previous_totals": _totals(before),
        "buckets": buckets, "bucket_size": bucket_name, "days": _rows(con, DAYS_SQL, {"s": period.start, "u": period.end}),
        "notes": note_lines({"calls": calls, "estimated": estimated, "unpriced": unpriced, "errors": errors,
                             "untimed": untimed}) + [METHOD_NOTE],
        "cost_basis": COST_HEADLINE, "percentile_method": PERCENTILE_METHOD,
        "calls": calls, "store_first": first, "store_last": last,
        "period_last": max((r["last_call_at"] for r in current), default=None),
        "reconciliation": _reconciliation(con, period),
    }


# ---------------------------------------------------------------- formatting


def md_cell(x: Any) -> str:
    """Text safe inside a Markdown table cell: shown as typed (no markup), pipes and newlines escaped."""
    return md_text(x)


@cache
def _env(autoescape: bool) -> jinja2.Environment:
    folder = Path(str(resources.files("phaselens.pipeline").joinpath("report_templates")))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(folder), autoescape=autoescape, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters.update(usd=usd, pct=pct, secs=secs, ms=ms, num=num, md=md_cell, text=md_text,
                       phase=lambda p: p or "n/a", name=lambda s: str(s or "n/a").replace("_", " "))
    env.globals.update(usd=usd, pct=pct, secs=secs, ms=ms, move_min=MOVE_MIN_CHANGE)
    return env


def render_html(data: dict[str, Any], extract_formats: Iterable[str] = ()) -> str:
    """The self-contained HTML report (inline CSS and SVG, no script, no external reference)."""
    return _env(True).get_template("report.html.j2").render(
        **data, chart=_chart_scales(data), extract_formats=list(extract_formats))


def render_markdown(data: dict[str, Any]) -> str:
    """The Markdown report, for chat and e-mail."""
    return _env(False).get_template("report.md.j2").render(**data)


def _chart_scales(data: dict[str, Any]) -> dict[str, float]:
    deltas = [abs(float(r[k] or 0)) for r in data["changes"] for k in ("prefill_cost_delta_usd", "decode_cost_delta_usd")]
    totals = [b["prefill"] + b["decode"] for b in data["buckets"]]
    return {"delta_max": max(deltas, default=0.0) or 1.0, "bucket_max": max(totals, default=0.0) or 1.0}


# ---------------------------------------------------------------- extracts


def _rounded(table: pa.Table) -> pa.Table:
    """Floats rounded to FLOAT_DECIMALS, so summation order cannot change the bytes written."""
    cols = [pc.round(c, FLOAT_DECIMALS) if pa.types.is_floating(c.type) else c for c in table.columns]
    return pa.Table.from_arrays(cols, names=table.column_names)


def _changes_table(changes: list[dict]) -> pa.Table:
    return _rounded(pa.Table.from_pylist(changes, schema=pa.schema(list(CHANGE_COLUMNS.items()))))


def _arrow(con: duckdb.DuckDBPyConnection, sql: str, params: dict) -> pa.Table:
    cur = con.cursor()  # its own result: a result the caller left open on `con` does not get in the way
    try:
        return cur.sql(sql, params=params).to_arrow_table()
    finally:
        cur.close()


def extracts(con: duckdb.DuckDBPyConnection, data: dict[str, Any]) -> dict[str, pa.Table]:
    """The extract tables by file stem: workloads, workload_changes, costs_by_day_phase, reconciliation."""
    p: Period = data["period"]
    args = {"s": p.start, "u": p.end}
    out = {
        "workloads": _arrow(con, WORKLOADS_SQL, {"since": p.start, "until": p.end}),
        "workload_changes": _changes_table(data["changes"]),
        "costs_by_day_phase": _arrow(con, COSTS_BY_DAY_PHASE_SQL, args),
    }
    recon = data["reconciliation"]
    out["reconciliation"] = recon["table"] if recon is not None else pa.table(
        {c: pa.array([], pa.string()) for c in RECONCILIATION_COLUMNS})
    return {k: _rounded(v) for k, v in out.items()}


def _json_value(v: Any) -> Any:
    """JSON form of a report value: floats rounded like the extracts, money and times as the CLI writes them."""
    if isinstance(v, float):
        return None if v != v or v in (float("inf"), float("-inf")) else round(v, FLOAT_DECIMALS)
    if isinstance(v, dict):
        return {k: _json_value(x) for k, x in v.items() if k != "table"}
    if isinstance(v, list | tuple):
        return [_json_value(x) for x in v]
    if isinstance(v, Period):
        return {"start": v.start.isoformat(), "end": v.end.isoformat(), "label": v.label}
    from phaselens.output import plain_tree

    return plain_tree(v)


def render_json(data: dict[str, Any]) -> str:
    """The report as one JSON document: period, cost basis, totals, per-workload figures and levers, changes."""
    keys = ("period", "previous", "cost_basis", "percentile_method", "calls", "totals", "previous_totals",
            "workloads", "changes", "days", "notes", "reconciliation")
    return json.dumps({k: _json_value(data[k]) for k in keys}, indent=2, sort_keys=False) + "\n"


def _csv_value(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        text = f"{v:.{FLOAT_DECIMALS}f}".rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, datetime):
        return v.isoformat(sep=" ")
    return str(v)


def csv_text(table: pa.Table) -> str:
    """A table as CSV: header, then one line per row; floats fixed-point, money exact, times ISO (UTC)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(table.column_names)
    for row in table.to_pylist():
        w.writerow([csv_cell(_csv_value(v)) if isinstance(v, str) else _csv_value(v) for v in row.values()])
    return buf.getvalue()


# ---------------------------------------------------------------- writing


def _write(path: Path, content: str | bytes) -> Path:
    """Write via a temporary file and rename, so a reader never sees half a report."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(content.encode() if isinstance(content, str) else content)
    os.replace(tmp, path)
    return path


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue().to_pybytes()


def parse_formats(formats: str | Iterable[str]) -> list[str]:
    """`html,md` or ["html", "md"] as a checked list in the fixed order html, md, json, csv, parquet."""
    items = [f.strip().lower() for f in (formats.split(",") if isinstance(formats, str) else formats) if f.strip()]
    unknown = [f for f in items if f not in REPORT_FORMATS]
    if unknown or not items:
        raise PhaselensError(f"unknown report format {', '.join(unknown) or '(none)'}",
                             f"use a comma-separated list of {', '.join(REPORT_FORMATS)}")
    return [f for f in REPORT_FORMATS if f in items]


def write_report(
    con: duckdb.DuckDBPyConnection, period_start: datetime, period_end: datetime, out_dir: Path | str,
    formats: str | Iterable[str] = REPORT_FORMATS,
) -> list[Path]:
    """Write the report of calls started in [period_start, period_end) (naive UTC) to `out_dir`; returns the files."""
    fmts = parse_formats(formats)
    period = Period(period_start, period_end)
    if period_end <= period_start:
        raise PhaselensError("the report period is empty", "give an end after the start")
    with telemetry.operation("report", period=period.label, formats=",".join(fmts)) as span:
        data = gather(con, period)
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        if "html" in fmts:
            extract_formats = [f for f in fmts if f in ("csv", "parquet")]
            written.append(_write(out / "report.html", render_html(data, extract_formats)))
        if "md" in fmts:
            written.append(_write(out / "report.md", render_markdown(data)))
        if "json" in fmts:
            written.append(_write(out / "report.json", render_json(data)))
        if "csv" in fmts or "parquet" in fmts:
            for stem, table in extracts(con, data).items():
                if "csv" in fmts:
                    written.append(_write(out / f"{stem}.csv", csv_text(table)))
                if "parquet" in fmts:
                    written.append(_write(out / f"{stem}.parquet", _parquet_bytes(table)))
        if span is not None:
            span.set_attributes({"files": len(written), "calls": data["calls"]})
        return sorted(written)


def report_period(
    con: duckdb.DuckDBPyConnection, period: str | None = None, since: datetime | None = None,
    until: datetime | None = None, now: datetime | None = None,
) -> Period:
    """The Period of `--period SPEC` or of `--since/--until` (an open end is the store's first/last call)."""
    if period is not None and (since is not None or until is not None):
        raise PhaselensError("--period and --since/--until exclude each other", "give one or the other")
    first, last = con.execute("SELECT min(started_at), max(started_at) FROM raw_calls").fetchall()[0]
    if period is None and since is None and until is None:
        period = "latest_day"
    if period is not None:
        try:
            return resolve_period(period, now or datetime.now(UTC).replace(tzinfo=None), latest=last)
        except ValueError as e:
            raise PhaselensError(str(e), "see `phaselens report --help` for the period forms") from None
    start = since or first
    end = until or (last + timedelta(microseconds=1) if last else None)
    if start is None or end is None or end <= start:
        raise PhaselensError("the report period is empty", "load calls first, or give --since before --until")
    return Period(start, end)
