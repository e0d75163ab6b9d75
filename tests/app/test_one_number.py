"""One figure is one number everywhere: the headline figures of every workload, read off each surface.

For one period (the sample day, 2026-11-16) the test reads calls, cost (the headline: invoice-true where billed,
else estimated), the prefill shares of time and money, and TTFT/ITL p50/p95 per workload from

- the dashboard under AppTest: the Overview table's values and the Workload detail page's metrics;
- `phaselens workloads --format json`;
- `phaselens explain NAME --format json` and the sentences of `phaselens explain NAME`;
- the report's JSON (`report.json`) and CSV (`workloads.csv`) for the same period,

and the bill against the traces (billed and estimated USD, cells with a gap) from `phaselens reconcile --format
json`, the dashboard's Reconciliation page and the report's JSON,

and finds them equal: counts and money exactly, shares to float summation noise (1e-12 relative; the report's
files round floats to 6 decimals, so against them to 1e-6), percentiles exactly (one sketch method everywhere), and
every displayed figure equal to the others' value shown in the same format.
"""

from __future__ import annotations

import csv
import json
import math
import re
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from phaselens.app.ui import count, millis, pct, seconds, usd
from phaselens.models.text import md_text
from phaselens.cli import app as cli
from phaselens.pipeline.read_model import HEADLINE_FIELDS, PERCENTILE_ERROR
from tests.app.test_pages import assert_clean, money, nearest_rank, render, store_rows

DAY = "2026-11-16"
SINCE, UNTIL = "2026-11-16T00:00:00", "2026-11-17T00:00:00"
MONEY = ("cost_usd_best", "input_cost_usd_best", "output_cost_usd_best")
SHARES = ("prefill_time_share", "prefill_cost_share")
PERCENTILES = ("ttft_p50_s", "ttft_p95_s", "itl_p50_s", "itl_p95_s")
runner = CliRunner()


def run_cli(*args: str) -> str:
    result = runner.invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def same(field: str, a, b, rel: float = 1e-12) -> bool:
    """Equal as the field's kind demands: counts and money exactly, floats to `rel`, both missing counts as equal."""
    if a is None or b is None or (isinstance(a, float) and math.isnan(a)) or (isinstance(b, float) and math.isnan(b)):
        return (a is None or a != a) and (b is None or b != b)
    if field == "calls":
        return int(a) == int(b)
    if field in MONEY:
        return Decimal(str(a)) == Decimal(str(b))
    return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=rel)


def assert_same(surface: str, got: dict, want: dict, rel: float = 1e-12, fields=HEADLINE_FIELDS) -> None:
    wrong = {f: (got.get(f), want.get(f)) for f in fields if not same(f, got.get(f), want.get(f), rel)}
    assert not wrong, f"{surface} differs from `workloads --format json` for {want['workload']}: {wrong}"


@pytest.fixture(scope="module")
def surfaces(sample_db, tmp_path_factory):
    """The CLI's and the report's figures for the sample day, by workload."""
    db = str(sample_db)
    workloads = {r["workload"]: r for r in json.loads(run_cli("workloads", "--db", db, "--since", SINCE, "--until",
                                                                   UNTIL, "--format", "json"))}
    explained = {name: json.loads(run_cli("explain", name, "--db", db, "--since", SINCE, "--until", UNTIL,
                                          "--format", "json")) for name in workloads}
    sentences = {name: run_cli("explain", name, "--db", db, "--since", SINCE, "--until", UNTIL) for name in workloads}
    out = tmp_path_factory.mktemp("report")
    run_cli("report", "--db", db, "--period", DAY, "--out", str(out), "--format", "json,csv")
    report = json.loads((out / "report.json").read_text())
    with (out / "workloads.csv").open() as f:
        report_csv = {r["workload"]: r for r in csv.DictReader(f)}
    reconcile = json.loads(run_cli("reconcile", "--db", db, "--since", SINCE, "--until", UNTIL, "--format", "json"))
    return {"reconcile": reconcile, "workloads": workloads, "explain": explained, "sentences": sentences, "report": report,
            "report_workloads": {r["workload"]: r for r in report["workloads"]}, "report_csv": report_csv}


def test_the_sample_day_has_the_workloads_and_billing_this_test_needs(surfaces):
    wl = surfaces["workloads"]
    assert len(wl) >= 4
    assert any(r["invoice_calls"] for r in wl.values()), "some calls are billed: the headline is invoice-true there"
    assert any(r["invoice_calls"] < r["calls"] for r in wl.values()), "some are not: estimated there"
    assert any(Decimal(r["cost_usd_best"]) != Decimal(r["cost_usd"]) for r in wl.values())


def test_cli_explain_and_report_give_the_same_figures(surfaces):
    for name, want in surfaces["workloads"].items():
        assert_same("explain --format json", surfaces["explain"][name], want)
        assert_same("report.json", surfaces["report_workloads"][name], want, rel=1e-6)
        row = {k: (v if v != "" else None) for k, v in surfaces["report_csv"][name].items()}
        assert_same("workloads.csv", row, want, rel=1e-6)


def test_report_totals_are_the_sum_of_its_workloads(surfaces):
    rep, wl = surfaces["report"], surfaces["workloads"].values()
    assert rep["calls"] == sum(r["calls"] for r in wl)
    assert Decimal(rep["totals"]["total"]) == sum(Decimal(r["cost_usd_best"]) for r in wl)
    assert Decimal(rep["totals"]["prefill"]) == sum(Decimal(r["input_cost_usd_best"]) for r in wl)


def test_explain_sentences_state_the_same_figures(surfaces):
    for name, r in surfaces["workloads"].items():
        text = surfaces["sentences"][name]
        assert re.search(rf"^{re.escape(name)}: {r['calls']:,} calls", text), text
        assert f"{money(r['cost_usd_best'])} (invoice-true where billed, else estimated)" in text
        assert f"{100 * r['prefill_time_share']:.0f}% prefill" in text
        assert f"{100 * r['prefill_cost_share']:.0f}%, prefill side" in text
        if r["ttft_p50_s"] is not None:
            # the units and decimals of the diagnosis beside them and of the dashboard
            assert f"TTFT p50 {r['ttft_p50_s']:.3f} s, p95 {r['ttft_p95_s']:.3f} s" in text
            assert f"ITL p50 {1000 * r['itl_p50_s']:.1f} ms/token, p95 {1000 * r['itl_p95_s']:.1f} ms" in text


def test_dashboard_shows_the_same_figures(sample_db, surfaces, monkeypatch):
    wl = surfaces["workloads"]
    at = render(sample_db, "overview", monkeypatch, {"from": [DAY], "to": [DAY]})
    assert_clean(at)
    table = at.dataframe[0].value.set_index("workload")
    assert set(table.index) == set(wl)
    for name, want in wl.items():
        got = table.loc[name].to_dict()
        # the table shows ITL in milliseconds, in a column named for its unit
        got["itl_p50_s"] = None if got["itl_p50_ms"] != got["itl_p50_ms"] else got["itl_p50_ms"] / 1000
        assert_same("the Overview table", got, want,
                    fields=("calls", "prefill_time_share", "prefill_cost_share", "ttft_p95_s", "itl_p50_s"), rel=1e-12)
        assert got["cost_usd_best"] == float(Decimal(want["cost_usd_best"]))
    shown = {m.label: m.value for m in at.metric}
    assert shown["Calls"] == count(sum(r["calls"] for r in wl.values())) == count(surfaces["report"]["calls"])
    assert shown["Cost (USD)"] == usd(Decimal(surfaces["report"]["totals"]["total"]))

    for name, want in wl.items():
        at = render(sample_db, "workload", monkeypatch, {"from": [DAY], "to": [DAY], "detail": [name]})
        assert_clean(at)
        shown = {m.label: m.value for m in at.metric}
        expected = {
            "Calls": count(want["calls"]), "Cost (USD)": usd(Decimal(want["cost_usd_best"])),
            "Prefill share of time": pct(want["prefill_time_share"]),
            "Prefill share of cost": pct(want["prefill_cost_share"]),
            "TTFT p50": seconds(want["ttft_p50_s"]), "TTFT p95": seconds(want["ttft_p95_s"]),
            "ITL p50": millis(want["itl_p50_s"]), "ITL p95": millis(want["itl_p95_s"]),
        }
        assert {k: shown.get(k) for k in expected} == expected, name


def test_the_one_percentile_is_within_its_bound_of_exact(sample_db, surfaces):
    """The sketch every surface shows is within 2.9% of the exact nearest-rank value of the calls themselves."""
    start, end = datetime.fromisoformat(SINCE), datetime.fromisoformat(UNTIL)
    for name, r in surfaces["workloads"].items():
        for metric in ("ttft_s", "itl_s"):
            values = [v for (v,) in store_rows(
                Path(sample_db), f"SELECT {metric} FROM requests WHERE workload = ? AND {metric} IS NOT NULL "
                "AND started_at >= ? AND started_at < ?", [name, start, end])]
            for p in (0.5, 0.95):
                shown = r[f"{metric.removesuffix('_s')}_p{round(100 * p)}_s"]
                if not values:
                    assert shown is None
                    continue
                exact = nearest_rank(values, p)
                assert abs(shown - exact) <= PERCENTILE_ERROR * exact + 1e-12, (name, metric, p, shown, exact)


def test_reconciliation_is_the_same_bill_everywhere(sample_db, surfaces, monkeypatch):
    cells = surfaces["reconcile"]
    assert cells, "the sample day has billing"
    billed = sum(Decimal(c["billed_cost_usd"] or 0) for c in cells)
    estimated = sum(Decimal(c["estimated_cost_usd"] or 0) for c in cells)
    gaps = sum(c["cause"] != "ok" for c in cells)
    rec = surfaces["report"]["reconciliation"]
    assert sum(Decimal(p["billed"] or 0) for p in rec["providers"]) == billed
    assert sum(Decimal(p["estimated"] or 0) for p in rec["providers"]) == estimated
    assert rec["gap_count"] == sum(c["status"] != "ok" for c in cells)
    at = render(sample_db, "reconciliation", monkeypatch, {"from": [DAY], "to": [DAY]})
    assert_clean(at)
    shown = {m.label: m.value for m in at.metric}
    assert shown["Billed (USD)"] == usd(billed)
    assert shown["Estimated from traces (USD)"] == usd(estimated)
    assert any(f"{count(gaps)} of {count(len(cells))} cells have a gap" in c.value for c in at.caption)


def lever_lines(at) -> dict[str, str]:
    """The Overview's per-workload lines (`NAME · time: PHASE — LEVER`, then money), by workload."""
    lines: dict[str, str] = {}
    for t in at.text:
        first = t.value.split("\n")[0]
        if " · time: " in first:
            lines[first.split(" · time: ")[0]] = t.value
    return lines


def stats_over(db: Path, where: str) -> dict[str, dict]:
    """`workload_stats` (the store's rules, pipeline/sql/workloads.sql) over only the store's calls that match
    `where`: the store's relations are copied into a scratch database with `requests` narrowed, the period macros
    over the copies, and the rules' macros created there."""
    from phaselens.pipeline.store import sql_text

    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{db}' AS store (READ_ONLY)")
        con.execute(f"CREATE TABLE narrowed AS SELECT * FROM store.requests WHERE {where}")
        con.execute("CREATE TABLE all_invoice_costs AS SELECT * FROM store.invoice_costs")
        for name in ("build_settings", "caching_by_workload"):
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM store.{name}")
        # the period macros the rules read, over the copies (a call's start decides its period, as in the store)
        for macro, table in (("requests_in", "narrowed"), ("invoice_costs_in", "all_invoice_costs"),
                             ("invoice_shares_in", "all_invoice_costs")):
            con.execute(f"CREATE MACRO {macro}(since, until, unstarted) AS TABLE SELECT * FROM {table} "
                        "WHERE store.pl_started_in(started_at, since, until, unstarted)")
        con.execute(sql_text("sketch_macros") + sql_text("text_macros") + sql_text("workload_rules") + sql_text("workloads"))
        res = con.execute("SELECT * FROM workload_stats(NULL, NULL)")
        cols = [d[0] for d in res.description]
        return {r[0]: dict(zip(cols, r, strict=True)) for r in res.fetchall()}
    finally:
        con.close()


def test_levers_follow_the_filters(sample_db, surfaces, monkeypatch):
    """Under the period alone the Overview gives each workload the diagnosis and levers `phaselens workloads`
    gives for that period; narrowed to one provider, where the agent workload's time turns prefill-dominated,
    its line names prefill and a prefill lever: the rules over exactly the filtered calls."""
    at = render(sample_db, "overview", monkeypatch, {"from": [DAY], "to": [DAY]})
    assert_clean(at)
    lines = lever_lines(at)
    for name, r in surfaces["workloads"].items():
        assert lines[name] == (f"{name} · time: {r['dominant_latency_phase']} — {r['latency_lever']}\n"
                               f"{name} · money: {r['dominant_cost_phase']} — {r['cost_lever']}")
    assert surfaces["workloads"]["agent"]["dominant_latency_phase"] == "decode"

    at = render(sample_db, "overview", monkeypatch, {"provider": ["openai"]})
    assert_clean(at)
    narrowed = lever_lines(at)
    want = stats_over(Path(sample_db), "provider = 'openai'")
    assert set(narrowed) == set(want)
    assert want["agent"]["dominant_latency_phase"] == "prefill"
    for name, r in want.items():
        assert narrowed[name] == (f"{name} · time: {r['dominant_latency_phase']} — {r['latency_lever']}\n"
                                  f"{name} · money: {r['dominant_cost_phase']} — {r['cost_lever']}")
    assert narrowed["agent"] != lines["agent"]
    assert any("diagnoses and levers are of the filtered calls" in c.value for c in at.caption)

    at = render(sample_db, "workload", monkeypatch, {"provider": ["openai"], "detail": ["agent"]})
    assert_clean(at)
    assert f"Time: {want['agent']['latency_diagnosis']}" in [t.value for t in at.text]
    assert f"Lever for time: {md_text(want['agent']['latency_lever'])}" in [s.value for s in at.success]
