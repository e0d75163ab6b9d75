"""Period reports (pipeline/report.py) over the two-day fixture of tests/fixtures/batch (see make_fixtures.py).

Expected numbers are worked out here from the fixture files themselves (tokens x the fixture prices of $1/M
input and $4/M output, TTFT and end times of each row), never copied from the report's own output.
"""

from __future__ import annotations

import contextlib
import csv
import json
import re
import shutil
import statistics
from collections import defaultdict
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from phaselens.models.config import load_config
from phaselens.models.run import Period, resolve_period
from phaselens.pipeline import report as report_mod
from phaselens.pipeline.build import build
from phaselens.pipeline.errors import PhaselensError
from phaselens.pipeline.load import ingest
from phaselens.pipeline.reconcile import build_reconciliation
from phaselens.pipeline.report import parse_formats, report_period, write_report
from phaselens.pipeline.store import connect

BATCH = Path(__file__).resolve().parent / "fixtures" / "batch"
DAY1, DAY2 = datetime(2026, 11, 16), datetime(2026, 11, 17)
END = datetime(2026, 11, 18)
ALL_FILES = {f"{stem}.{ext}" for stem in ("workloads", "workload_changes", "costs_by_day_phase", "reconciliation")
             for ext in ("csv", "parquet")} | {"report.html", "report.md"}
IN_USD, OUT_USD = Decimal("0.000001"), Decimal("0.000004")
CENT = Decimal("0.01")


def fixture_calls(day: str) -> dict[str, list[dict]]:
    """The fixture's spend-log rows of one day, by the workload in their `feature:` tag."""
    out: dict[str, list[dict]] = defaultdict(list)
    for line in (BATCH / "traces" / f"litellm.{day}.jsonl").read_text().splitlines():
        row = json.loads(line)
        tag = next(t for t in row["request_tags"] if t.startswith("feature:"))
        out[tag.split(":", 1)[1]].append(row)
    return out


def seconds(row: dict, a: str, b: str) -> float:
    parse = lambda t: datetime.fromisoformat(t.replace("Z", "+00:00"))  # noqa: E731
    return (parse(row[b]) - parse(row[a])).total_seconds()


def expected(day: str) -> dict[str, dict]:
    """Per workload: calls, input/output cost (USD), dominant phase of time and of money, TTFT p50 (s)."""
    out = {}
    for name, rows in fixture_calls(day).items():
        ttft = [seconds(r, "startTime", "completionStartTime") for r in rows]
        decode = [seconds(r, "completionStartTime", "endTime") for r in rows]
        cin = sum(r["prompt_tokens"] for r in rows) * IN_USD
        cout = sum(r["completion_tokens"] for r in rows) * OUT_USD
        out[name] = {"calls": len(rows), "input_cost": cin, "output_cost": cout, "cost": cin + cout,
                     "time_phase": "prefill" if sum(ttft) >= sum(decode) else "decode",
                     "money_phase": "prefill" if cin >= cout else "decode", "ttft_p50": statistics.median(ttft)}
    return out


def build_store(path: Path, *, billing: bool = True, reverse: bool = False) -> Path:
    """The fixture days (and bill) loaded, built and reconciled into a store at `path`."""
    con = connect(path)
    try:
        traces = sorted((BATCH / "traces").iterdir(), reverse=reverse)
        bills = sorted((BATCH / "billing").iterdir()) if billing else []
        ingest(con, bills + traces if reverse else traces + bills)
        cfg = load_config(BATCH / "phaselens.toml")
        build(con, cfg)
        if billing and not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'reconciliation'"
                                       ).fetchall()[0][0]:
            build_reconciliation(con, pricebook=cfg.pricebook)  # until the build runs it itself
    finally:
        con.close()
    return path


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    return build_store(tmp_path_factory.mktemp("report") / "store.duckdb")


@pytest.fixture
def con(store_path):
    c = connect(store_path, read_only=True)
    yield c
    c.close()


@pytest.fixture(scope="module")
def day2_report(store_path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("day2")
    c = connect(store_path, read_only=True)
    try:
        write_report(c, DAY2, END, out, "html,md,csv,parquet")
    finally:
        c.close()
    return out


def section(text: str, start: str, end: str | None) -> str:
    i = text.index(start)
    return text[i:text.index(end, i)] if end else text[i:]


def test_every_format_is_written(day2_report):
    assert {p.name for p in day2_report.iterdir()} == ALL_FILES
    for stem in ("workloads", "workload_changes", "costs_by_day_phase", "reconciliation"):
        with (day2_report / f"{stem}.csv").open() as f:
            rows = list(csv.DictReader(f))
        table = pq.read_table(day2_report / f"{stem}.parquet")
        assert table.num_rows == len(rows) and table.column_names == list(rows[0].keys())
    assert (day2_report / "report.html").read_text().startswith("<!doctype html>")


def test_html_is_self_contained(day2_report):
    html = (day2_report / "report.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)
    assert "<script" not in html.lower() and "@import" not in html and "url(" not in html
    assert not re.search(r"<(img|iframe|object|embed|link(?![^>]*href=\"data:))\b", html, re.I)
    assert html.count("<svg") == 3  # phase split, cost deltas, cost over time: inline


def test_answer_lists_each_workload_dominant_phase_and_lever(day2_report, con):
    want = expected("2026-11-17")
    levers = dict(con.execute("SELECT workload, lever FROM workload_stats($s, $u)", {"s": DAY2, "u": END}).fetchall())
    cost_levers = dict(con.execute("SELECT workload, cost_lever FROM workload_stats($s, $u)",
                                   {"s": DAY2, "u": END}).fetchall())
    md = section((day2_report / "report.md").read_text(), "## 1.", "## 2.")
    # names are escaped as Markdown text (tab\_completion)
    lines = {m.group(1).replace("\\_", "_"): m.group(0) for m in re.finditer(r"^- \*\*((?:\w|\\_)+)\*\* .*$", md, re.M)}
    assert set(lines) == set(want)
    for name, w in want.items():
        m = re.search(r"\((\d+) calls, \$([\d.]+)\): time goes to \*\*(\w+) \(\d+%\)\*\*, money to \*\*(\w+) \(\d+%\)\*\*",
                      lines[name])
        assert m, lines[name]
        assert int(m.group(1)) == w["calls"]
        assert Decimal(m.group(2)) == w["cost"].quantize(CENT, rounding=ROUND_HALF_UP)  # money to the cent
        assert (m.group(3), m.group(4)) == (w["time_phase"], w["money_phase"])
        assert lines[name].endswith(f"Lever: {levers[name]} Lever for money: {cost_levers[name]}")
    html = section((day2_report / "report.html").read_text(), 'id="answer"', 'id="changes"')
    for name, w in want.items():
        row = section(html, f"<strong>{name}</strong>", "</tr>")
        phases = re.findall(r'<span class="phase (\w+)">', row)
        assert phases == [w["time_phase"], w["money_phase"]]
        assert levers[name].replace("'", "&#39;") in row
    # answer first, then changes, then detail
    text = (day2_report / "report.html").read_text()
    assert text.index('id="answer"') < text.index('id="changes"') < text.index('id="detail"')


def test_changes_name_the_workloads_that_moved(day2_report):
    before, now = expected("2026-11-16"), expected("2026-11-17")
    md = section((day2_report / "report.md").read_text(), "## 2.", "## 3.")
    moved = {k.replace("\\_", "_"): v for k, v in re.findall(r"^- \*\*((?:\w|\\_)+)\*\*: (.*)$", md, re.M)}
    assert before["summarize"]["time_phase"] != now["summarize"]["time_phase"]  # the fixture's flip
    assert f"time: {before['summarize']['time_phase']} → {now['summarize']['time_phase']}" in moved["summarize"]
    assert f"money: {before['summarize']['money_phase']} → {now['summarize']['money_phase']}" in moved["summarize"]
    assert moved["classify"] == "new this period" and moved["legacy"] == "no calls this period"
    ttft_change = round(100 * (now["chat"]["ttft_p50"] / before["chat"]["ttft_p50"] - 1))
    assert f"TTFT p50 {ttft_change:+d}%" in moved["chat"]
    total = re.search(r"^\| \*\*All workloads\*\* \|(.*)\|$", md, re.M).group(1).split("|")
    prefill_delta = sum(w["input_cost"] for w in now.values()) - sum(w["input_cost"] for w in before.values())
    decode_delta = sum(w["output_cost"] for w in now.values()) - sum(w["output_cost"] for w in before.values())
    def cents(x):
        return f"{'+' if x > 0 else '-'}${abs(x).quantize(CENT, rounding=ROUND_HALF_UP):,.2f}"
    assert total[2].strip() == cents(prefill_delta)
    assert total[5].strip() == cents(decode_delta)


def test_extracts_carry_the_fixture_numbers(day2_report):
    want = expected("2026-11-17")
    with (day2_report / "workloads.csv").open() as f:
        rows = {r["workload"]: r for r in csv.DictReader(f)}
    for name, w in want.items():
        assert int(rows[name]["calls"]) == w["calls"]
        assert Decimal(rows[name]["input_cost_usd"]) == w["input_cost"]
        assert Decimal(rows[name]["output_cost_usd"]) == w["output_cost"]
        assert rows[name]["dominant_cost_phase"] == w["money_phase"]
    with (day2_report / "costs_by_day_phase.csv").open() as f:
        cells = list(csv.DictReader(f))
    by_phase = defaultdict(Decimal)
    for c in cells:
        assert c["day"] == "2026-11-17"
        by_phase[c["phase"]] += Decimal(c["cost_usd"])
    assert by_phase["prefill"] == sum(w["input_cost"] for w in want.values())
    assert by_phase["decode"] == sum(w["output_cost"] for w in want.values())
    changes = pq.read_table(day2_report / "workload_changes.parquet").to_pylist()
    summarize = next(r for r in changes if r["workload"] == "summarize")
    before = expected("2026-11-16")["summarize"]
    assert summarize["prefill_cost_delta_usd"] == want["summarize"]["input_cost"] - before["input_cost"]
    assert summarize["moved"] is True


def test_reconciliation_section_when_billed(day2_report):
    calls = [r for rows in fixture_calls("2026-11-17").values() for r in rows]
    n_in, n_out = sum(r["prompt_tokens"] for r in calls), sum(r["completion_tokens"] for r in calls)
    traced = n_in * IN_USD + n_out * OUT_USD
    billed = round(n_in * 1.25) * IN_USD + round(n_out * 1.25) * OUT_USD  # the fixture bills 25% more on day 2
    md = section((day2_report / "report.md").read_text(), "### Reconciliation", "### Data notes")
    assert "No billing data" not in md
    row = re.search(r"^\| openai \| \$([\d.]+) \| \$([\d.]+) \| \+\$([\d.]+) \|", md, re.M)
    assert row, md
    assert Decimal(row.group(1)) == billed.quantize(CENT, rounding=ROUND_HALF_UP)
    assert Decimal(row.group(2)) == traced.quantize(CENT, rounding=ROUND_HALF_UP)
    assert "untraced traffic" in md
    with (day2_report / "reconciliation.csv").open() as f:
        cells = list(csv.DictReader(f))
    assert {c["token_type"] for c in cells} == {"uncached_input", "output"} and {c["day"] for c in cells} == {"2026-11-17"}


def test_no_billing_data_is_said(store_path, tmp_path):
    copy = tmp_path / "no_bill.duckdb"
    shutil.copyfile(store_path, copy)
    c = connect(copy)
    # what a build without billing leaves: the reconciliation relations empty, every call without an invoice-true cost
    for name in ("reconciliation", "untraced_costs", "allocated_costs"):
        c.execute(f"DELETE FROM {name}")
    assert c.execute("SELECT count(cost_usd_invoice) FROM invoice_costs").fetchone() == (0,)
    files = write_report(c, DAY2, END, tmp_path / "out", ["html", "md", "csv"])
    c.close()
    for name in ("report.html", "report.md"):
        assert "No billing data for this period" in (tmp_path / "out" / name).read_text()
    assert (tmp_path / "out" / "reconciliation.csv").read_text().count("\n") == 1  # the header only
    assert {p.name for p in files} == {"report.html", "report.md", "workloads.csv", "workload_changes.csv",
                                       "costs_by_day_phase.csv", "reconciliation.csv"}


def test_same_data_gives_byte_identical_files(store_path, day2_report, tmp_path):
    c = connect(store_path, read_only=True)
    write_report(c, DAY2, END, tmp_path / "again")
    c.close()
    other = build_store(tmp_path / "rebuilt.duckdb", reverse=True)  # same files, loaded in another order
    c = connect(other, read_only=True)
    write_report(c, DAY2, END, tmp_path / "rebuilt")
    c.close()
    for name in ALL_FILES:
        first = (day2_report / name).read_bytes()
        assert (tmp_path / "again" / name).read_bytes() == first, name
        assert (tmp_path / "rebuilt" / name).read_bytes() == first, name


def test_period_without_calls(con, tmp_path):
    write_report(con, datetime(2026, 12, 1), datetime(2026, 12, 2), tmp_path, "md,html")
    md = (tmp_path / "report.md").read_text()
    assert "No call started in this period. The store holds calls from 2026-11-16 00:01 to 2026-11-17 22:15 UTC." in md
    assert "The previous period has no calls" in md


def test_first_day_has_nothing_to_compare(con, tmp_path):
    write_report(con, DAY1, DAY2, tmp_path, ["md"])
    md = (tmp_path / "report.md").read_text()
    assert "The previous period has no calls, so there is nothing to compare." in md
    assert "**legacy**" in section(md, "## 1.", "## 2.")


def test_report_runs_inside_its_telemetry_operation(con, tmp_path, monkeypatch):
    seen = []

    @contextlib.contextmanager
    def operation(name, **attrs):
        seen.append((name, attrs))
        yield None

    monkeypatch.setattr(report_mod.telemetry, "operation", operation)
    write_report(con, DAY2, END, tmp_path, "md")
    assert seen == [("report", {"period": "2026-11-17", "formats": "md"})]


def test_formats_and_periods_are_checked(con):
    assert parse_formats("md, HTML") == ["html", "md"]
    with pytest.raises(PhaselensError, match="unknown report format pdf"):
        parse_formats("html,pdf")
    assert report_period(con, "latest_day") == Period(DAY2, END)
    assert report_period(con, since=DAY1, until=DAY2) == Period(DAY1, DAY2)
    with pytest.raises(PhaselensError, match="exclude each other"):
        report_period(con, "latest_day", since=DAY1)
    with pytest.raises(PhaselensError, match="not a period"):
        report_period(con, "fortnight")


@pytest.mark.parametrize(("spec", "start", "end", "label"), [
    ("previous_day", "2026-12-01", "2026-12-02", "2026-12-01"),
    ("yesterday", "2026-12-01", "2026-12-02", "2026-12-01"),
    ("previous_week", "2026-11-23", "2026-11-30", "2026-W48"),       # 2026-12-02 is a Wednesday
    ("previous_month", "2026-11-01", "2026-12-01", "2026-11"),
    ("last_24h", "2026-12-01T11:00", "2026-12-02T11:00", "2026-12-01T11-00_to_2026-12-02T11-00"),
    ("last-7d", "2026-11-25T11:00", "2026-12-02T11:00", "2026-11-25T11-00_to_2026-12-02T11-00"),
    ("latest_day", "2026-11-17", "2026-11-18", "2026-11-17"),
    ("latest_week", "2026-11-16", "2026-11-23", "2026-W47"),
    ("2026-11-16", "2026-11-16", "2026-11-17", "2026-11-16"),
    ("2026-W47", "2026-11-16", "2026-11-23", "2026-W47"),
    ("2026-02", "2026-02-01", "2026-03-01", "2026-02"),
    ("2026-11-10..2026-11-17", "2026-11-10", "2026-11-17", "2026-11-10_to_2026-11-16"),
    ("2026-11-16T10:00+01:00..2026-11-16T12:00Z", "2026-11-16T09:00", "2026-11-16T12:00",
     "2026-11-16T09-00_to_2026-11-16T12-00"),
])
def test_period_specs(spec, start, end, label):
    p = resolve_period(spec, datetime(2026, 12, 2, 11, 40), latest=datetime(2026, 11, 17, 22, 15))
    assert (p.start, p.end, p.label) == (datetime.fromisoformat(start), datetime.fromisoformat(end), label)


def test_previous_period_has_the_same_length():
    assert Period(DAY2, END).previous() == Period(DAY1, DAY2)
    march = resolve_period("2026-03", datetime(2026, 4, 1))
    assert march.previous() == Period(datetime(2026, 2, 1), datetime(2026, 3, 1))  # a month before a month
    p = Period(datetime(2026, 11, 16, 9), datetime(2026, 11, 16, 12))
    assert p.previous() == Period(datetime(2026, 11, 16, 6), datetime(2026, 11, 16, 9))


@pytest.mark.parametrize("bad", ["fortnight", "last_0d", "2026-11-16T10:00", "2026-11-17..2026-11-16", ""])
def test_bad_period_specs(bad):
    with pytest.raises(ValueError):
        resolve_period(bad, datetime(2026, 12, 2))


def test_store_must_be_built(tmp_path):
    c = connect(tmp_path / "empty.duckdb")
    with pytest.raises(PhaselensError, match="not been built"):
        write_report(c, DAY1, DAY2, tmp_path / "out", "md")
    c.close()
    assert not (tmp_path / "out").exists()
