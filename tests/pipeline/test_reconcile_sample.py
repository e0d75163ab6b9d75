"""Reconciliation end to end on the sample day: sample_logs/traces plus sample_logs/billing.

The bills (sample_logs/billing.py) come in four format families (OpenAI and Anthropic API exports,
FOCUS 1.2 for Amazon Bedrock, an Azure cost export for Azure OpenAI) and plant three gaps; the traces
add a fourth. Each must come out of `phaselens reconcile --format json` with its cause, and every
other cell must agree. Skipped while sample_logs/traces is empty.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from phaselens.output import Format, render
from phaselens.pipeline.build import workload_rules_sql
from phaselens.pipeline.load import ingest
from phaselens.pipeline.pricing import build_costs
from phaselens.pipeline.reconcile import CAUSES, STATUSES, build_reconciliation, reconcile_rows
from phaselens.pipeline.store import connect
from phaselens.sample_logs.billing import EXPORT_ADAPTERS
from phaselens.sample_logs.simulate import simulate

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_TRACES = ROOT / "sample_logs" / "traces"
SAMPLE_BILLING = ROOT / "sample_logs" / "billing"
SAMPLE_DAY, PREVIOUS_DAY = date(2026, 11, 16), date(2026, 11, 15)
EXPECTED_GAPS = {  # (provider, model) -> the cause its gap cells must carry (sample_logs/billing.py)
    ("openai", "gpt-4o-mini"): "untraced_traffic",                 # the uninstrumented batch-summarizer
    ("openai", "o4-mini"): "price_mismatch",                       # billed 50% above list from 12:00 UTC
    ("anthropic", "claude-sonnet-4"): "time_zone_or_bucket_edge",  # Anthropic reports in Los Angeles days
    ("openai", "gpt-4o"): "missing_cache_tokens",                  # chat spans that record no cache tokens
    ("azure.ai.openai", "gpt-4.1-mini"): "missing_cache_tokens",
}
# billing adapter -> (format family, the provider whose lines it reads)
FAMILIES = {
    "openai_costs": ("OpenAI usage/costs API", "openai"), "openai_usage": ("OpenAI usage/costs API", "openai"),
    "anthropic_cost": ("Anthropic usage and cost report", "anthropic"),
    "anthropic_usage": ("Anthropic usage and cost report", "anthropic"),
    "focus": ("FOCUS", "aws.bedrock"), "azure_cost": ("Azure cost export", "azure.ai.openai"),
}
# Published prices, USD per million tokens (openai.com/api/pricing, anthropic.com pricing, aws.amazon.com/bedrock/
# pricing for the global profile, Azure OpenAI Global deployments), keyed by the simulation's request model.
PUBLISHED = {
    "gpt-4o": {"uncached_input": "2.50", "cache_read": "1.25", "output": "10.00"},
    "o4-mini": {"uncached_input": "1.10", "cache_read": "0.275", "output": "4.40"},
    "gpt-4o-mini": {"uncached_input": "0.15", "cache_read": "0.075", "output": "0.60"},
    "text-embedding-3-small": {"uncached_input": "0.02"},
    "gpt-4.1-mini": {"uncached_input": "0.40", "cache_read": "0.10", "output": "1.60"},
    "claude-sonnet-4-20250514": {"uncached_input": "3", "cache_read": "0.30", "cache_write": "3.75", "output": "15"},
    "global.anthropic.claude-sonnet-4-20250514-v1:0": {
        "uncached_input": "3", "cache_read": "0.30", "cache_write": "3.75", "output": "15"},
}
O4_MINI_RAISE, RAISE_FROM = Decimal("1.5"), datetime(2026, 11, 16, 12)  # the planted price change


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


@pytest.fixture(scope="module")
def truth():
    return simulate(7, 6000)


def _json_rows(con) -> list[dict]:
    """What `phaselens reconcile --format json` prints."""
    return json.loads(render(*reconcile_rows(con), Format.json))


def test_sample_bills_come_in_four_format_families(sample_store):
    loads = sample_store.execute("SELECT file, adapter, status FROM loads WHERE kind = 'billing'").fetchall()
    assert {status for *_, status in loads} == {"loaded"}
    assert {Path(f).name: a for f, a, _ in loads} == EXPORT_ADAPTERS  # each file read as the format it was written in
    adapters = {adapter for _, adapter, _ in loads}
    assert adapters == set(FAMILIES)
    assert len({FAMILIES[a][0] for a in adapters}) == 4
    providers = sample_store.execute("SELECT DISTINCT source, provider FROM raw_billing_lines").fetchall()
    assert set(providers) == {(a, p) for a, (_, p) in FAMILIES.items()}  # each adapter reads one provider
    assert sample_store.execute("SELECT count(*) FROM rejects").fetchone()[0] == 0


def test_traces_and_bills_meet_on_the_same_names(sample_store):
    traced = set(sample_store.execute(
        "SELECT DISTINCT provider, model FROM raw_calls WHERE provider <> 'vllm'").fetchall())
    billed = set(sample_store.execute(
        "SELECT DISTINCT provider, model FROM raw_billing_lines WHERE token_type <> 'other'").fetchall())
    assert traced == {("openai", "gpt-4o"), ("openai", "o4-mini"), ("openai", "text-embedding-3-small"),
                      ("anthropic", "claude-sonnet-4"), ("aws.bedrock", "claude-sonnet-4"),
                      ("azure.ai.openai", "gpt-4.1-mini")}
    assert billed == traced | {("openai", "gpt-4o-mini")}  # the batch job is billed, never traced


def test_each_provider_is_billed_once_at_its_published_price(sample_store, truth):
    """The bills add up to the simulated calls' tokens at the published prices: nothing missing, nothing twice."""
    expected: dict[str, Decimal] = defaultdict(Decimal)
    for c in truth:
        if c.provider == "vllm":
            continue
        tokens = {"uncached_input": c.uncached_input_tokens, "cache_read": c.cache_read_tokens,
                  "cache_write": c.cache_write_tokens, "output": c.output_tokens}
        raise_ = O4_MINI_RAISE if c.model == "o4-mini" and c.started_at >= RAISE_FROM else 1
        for token_type, n in tokens.items():
            if n:
                expected[c.provider] += n * Decimal(PUBLISHED[c.model][token_type]) * raise_ / 1_000_000
    billed = dict(sample_store.execute("SELECT provider, sum(cost_usd) FROM raw_billing_lines GROUP BY provider"
                                       ).fetchall())
    assert set(billed) == set(expected) == {"openai", "anthropic", "aws.bedrock", "azure.ai.openai"}
    for provider, usd in expected.items():
        assert abs(billed[provider] - usd) < Decimal("1e-6"), provider  # the JSON exports round to 1e-9 USD


def test_sample_day_lists_each_planted_gap_with_its_cause(sample_store):
    rows = _json_rows(sample_store)
    assert {r["cause"] for r in rows} <= set(CAUSES) and {r["status"] for r in rows} <= set(STATUSES)
    gaps = [r for r in rows if r["cause"] != "ok"]
    assert {(r["provider"], r["model"], r["cause"]) for r in gaps} == {(*k, v) for k, v in EXPECTED_GAPS.items()}
    untraced_rows = [r for r in rows if r["model"] == "gpt-4o-mini"]
    assert {r["token_type"] for r in untraced_rows} >= {"uncached_input", "output"}
    assert all(r["traced_tokens"] == 0 and r["status"] == "not_traced" for r in untraced_rows)
    price = [r for r in rows if r["model"] == "o4-mini" and r["day"] == SAMPLE_DAY.isoformat()]
    assert {r["cause"] for r in price} == {"price_mismatch"}
    assert all(Decimal(r["billed_usd_per_mtok"]) > Decimal(r["list_usd_per_mtok"]) for r in price)
    edge = {(r["day"], r["token_type"]): r for r in rows
            if (r["provider"], r["model"]) == ("anthropic", "claude-sonnet-4")}
    assert {d for d, _ in edge} == {PREVIOUS_DAY.isoformat(), SAMPLE_DAY.isoformat()}
    assert all(r["cause"] == "time_zone_or_bucket_edge" for r in edge.values())


def test_every_billed_provider_reconciles_apart_from_the_gaps(sample_store):
    rows = _json_rows(sample_store)
    assert {r["provider"] for r in rows} == {"openai", "anthropic", "aws.bedrock", "azure.ai.openai"}
    for r in rows:  # a cell is `ok` unless it belongs to a planted (or the known) gap
        assert r["cause"] in {"ok", EXPECTED_GAPS.get((r["provider"], r["model"]))}, r
    bedrock = [r for r in rows if r["provider"] == "aws.bedrock"]
    assert {r["token_type"] for r in bedrock} == {"uncached_input", "cache_read", "cache_write", "output"}
    for r in bedrock:  # billed hourly in UTC at the list price: every token and cent agrees
        assert r["cause"] == "ok" and r["day"] == SAMPLE_DAY.isoformat()
        assert Decimal(r["billed_tokens"]) == r["traced_tokens"] > 0
        assert Decimal(r["billed_cost_usd"]) == Decimal(r["estimated_cost_usd"])
        assert Decimal(r["billed_usd_per_mtok"]) == Decimal(r["list_usd_per_mtok"])
    azure = {r["token_type"]: r for r in rows if r["provider"] == "azure.ai.openai"}
    assert set(azure) == {"uncached_input", "cache_read", "output"}
    assert azure["output"]["cause"] == "ok"
    assert Decimal(azure["output"]["billed_tokens"]) == azure["output"]["traced_tokens"]
    billed_input = sum(Decimal(azure[t]["billed_tokens"]) for t in ("uncached_input", "cache_read"))
    assert billed_input == sum(azure[t]["traced_tokens"] for t in ("uncached_input", "cache_read"))
    for r in azure.values():  # Azure bills the list price; only the traces' split of the input differs
        assert Decimal(r["billed_usd_per_mtok"]) == Decimal(r["list_usd_per_mtok"])


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
    clouds = ("openai", "anthropic", "aws.bedrock", "azure.ai.openai")
    assert sum(by_provider[p] for p in clouds) == allocated_usd
    bedrock_bill = sample_store.execute(
        "SELECT sum(cost_usd) FROM raw_billing_lines WHERE provider = 'aws.bedrock'").fetchone()[0]
    assert by_provider["aws.bedrock"] == bedrock_bill      # every Bedrock cent lands on a traced inline edit


def test_sample_billing_files_are_what_the_generator_writes(tmp_path, truth):
    from phaselens.sample_logs.billing import write_billing

    written = write_billing(truth, tmp_path)
    assert {f.name for f in SAMPLE_BILLING.iterdir()} == set(written)  # no stale export left behind
    for f in SAMPLE_BILLING.iterdir():
        assert (tmp_path / f.name).read_bytes() == f.read_bytes(), f"{f.name} is stale: run sample_logs/billing.py"
