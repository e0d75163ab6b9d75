"""Reconciliation end to end on the sample day: sample_logs/traces plus sample_logs/billing.

The bills (sample_logs/billing.py) plant three gaps; the traces add a fourth, and each must come out of
`phaselens reconcile --format json` with its cause. Skipped while sample_logs/traces is empty.
"""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from phaselens.output import Format, render
from phaselens.pipeline.build import workload_rules_sql
from phaselens.pipeline.load import ingest
from phaselens.pipeline.pricing import build_costs
from phaselens.pipeline.reconcile import CAUSES, STATUSES, build_reconciliation, reconcile_rows
from phaselens.pipeline.store import connect

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_TRACES = ROOT / "sample_logs" / "traces"
SAMPLE_BILLING = ROOT / "sample_logs" / "billing"
SAMPLE_DAY, PREVIOUS_DAY = date(2026, 11, 16), date(2026, 11, 15)
EXPECTED_GAPS = {  # model -> the cause its gap cells must carry (sample_logs/billing.py)
    "gpt-4o-mini": "untraced_traffic",            # the uninstrumented batch-summarizer
    "o4-mini": "price_mismatch",                  # billed 50% above list from 12:00 UTC
    "claude-sonnet-4": "time_zone_or_bucket_edge",  # Anthropic reports in Los Angeles days
    "gpt-4o": "missing_cache_tokens",             # chat spans that record no cache tokens
    "gpt-4.1-mini": "missing_cache_tokens",
}


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory):
    if not SAMPLE_TRACES.is_dir() or not any(SAMPLE_TRACES.iterdir()):
        pytest.skip("sample_logs/traces is empty: run `python -m phaselens.sample_logs.generate --seed 7 "
                    "--calls 6000 --out sample_logs/traces` first")
    con = connect(tmp_path_factory.mktemp("sample") / "sample.duckdb")
    result = ingest(con, [SAMPLE_TRACES, SAMPLE_BILLING])
    assert not result.failed, [f.message for f in result.failed]
    sql, params = workload_rules_sql([])                  # what the build makes before this stage
    con.execute(sql, params)
    build_costs(con, None)
    build_reconciliation(con)
    yield con
    con.close()


def _json_rows(con) -> list[dict]:
    """What `phaselens reconcile --format json` prints."""
    return json.loads(render(*reconcile_rows(con), Format.json))


def test_sample_day_lists_each_planted_gap_with_its_cause(sample_store):
    rows = _json_rows(sample_store)
    assert {r["cause"] for r in rows} <= set(CAUSES) and {r["status"] for r in rows} <= set(STATUSES)
    gaps = [r for r in rows if r["cause"] != "ok"]
    assert {(r["model"], r["cause"]) for r in gaps} == set(EXPECTED_GAPS.items())
    untraced_rows = [r for r in rows if r["model"] == "gpt-4o-mini"]
    assert {r["token_type"] for r in untraced_rows} >= {"uncached_input", "output"}
    assert all(r["traced_tokens"] == 0 and r["status"] == "not_traced" for r in untraced_rows)
    price = [r for r in rows if r["model"] == "o4-mini" and r["day"] == SAMPLE_DAY.isoformat()]
    assert {r["cause"] for r in price} == {"price_mismatch"}
    assert all(Decimal(r["billed_usd_per_mtok"]) > Decimal(r["list_usd_per_mtok"]) for r in price)
    edge = {(r["day"], r["token_type"]): r for r in rows if r["model"] == "claude-sonnet-4"}
    assert {d for d, _ in edge} == {PREVIOUS_DAY.isoformat(), SAMPLE_DAY.isoformat()}
    assert all(r["cause"] == "time_zone_or_bucket_edge" for r in edge.values())


def test_sample_edge_moves_the_early_utc_hours_to_the_previous_day(sample_store):
    """The Los Angeles buckets start at 08:00 UTC: the previous day holds exactly the calls of 00:00-08:00 UTC."""
    early = sample_store.execute(
        "SELECT sum(output_tokens), sum(uncached_input_tokens) FROM raw_calls WHERE provider = 'anthropic' "
        "AND started_at < TIMESTAMP '2026-11-16 08:00:00'").fetchone()
    billed = {t: b for t, b in sample_store.execute(
        "SELECT token_type, billed_tokens FROM reconciliation WHERE provider = 'anthropic' AND day = ?",
        [PREVIOUS_DAY]).fetchall()}
    assert (billed["output"], billed["uncached_input"]) == early
    list_prices = {t: p for t, p in sample_store.execute(
        "SELECT token_type, list_usd_per_mtok FROM reconciliation WHERE model = 'o4-mini' AND day = ?",
        [SAMPLE_DAY]).fetchall()}
    assert list_prices == {"uncached_input": Decimal("1.1"), "cache_read": Decimal("0.275"),   # OpenAI's list
                           "output": Decimal("4.4")}


def test_sample_day_allocation_conserves_the_bill(sample_store):
    billed, allocated_usd, untraced_usd = sample_store.execute(
        "SELECT (SELECT sum(cost_usd) FROM raw_billing_lines), (SELECT sum(allocated_cost_usd) FROM allocated_costs), "
        "(SELECT sum(untraced_cost_usd) FROM untraced_costs)").fetchone()
    assert allocated_usd + untraced_usd == billed
    batch = sample_store.execute(
        "SELECT sum(cost_usd) FROM raw_billing_lines WHERE model = 'gpt-4o-mini'").fetchone()[0]
    assert sample_store.execute("SELECT sum(untraced_cost_usd) FROM untraced_costs WHERE model = 'gpt-4o-mini'"
                                ).fetchone()[0] == batch > 0
    by_provider = dict(sample_store.execute(
        "SELECT provider, sum(cost_usd_invoice) FROM invoice_costs GROUP BY provider").fetchall())
    assert by_provider["vllm"] is None                     # self-hosted: no token bill to share out
    assert by_provider["openai"] + by_provider["anthropic"] == allocated_usd


def test_sample_billing_files_are_what_the_generator_writes(tmp_path):
    from phaselens.sample_logs.billing import write_billing
    from phaselens.sample_logs.simulate import simulate

    write_billing(simulate(7, 6000), tmp_path)
    for f in SAMPLE_BILLING.iterdir():
        assert (tmp_path / f.name).read_bytes() == f.read_bytes(), f"{f.name} is stale: run sample_logs/billing.py"
