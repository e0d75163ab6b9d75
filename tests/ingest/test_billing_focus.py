"""FOCUS exports (docs/formats.md#focus), including the real FOCUS 1.0 sample with its quirks."""

from __future__ import annotations

import csv
import os
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

from phaselens.ingest.base import SchemaMismatch, SourceFile
from phaselens.ingest.registry import by_name
from phaselens.models import BillingLine, Reject
from phaselens.pipeline.load import ingest
from phaselens.pipeline.store import connect

FIXTURES = Path(__file__).parents[1] / "fixtures" / "billing"
ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("PHASELENS_SHARED") or ROOT.parent / "shared")
REAL_SAMPLE = SHARED / "data" / "focus_sample_1.0" / "focus_sample.csv"
needs_real_sample = pytest.mark.skipif(
    not REAL_SAMPLE.exists(), reason=f"{REAL_SAMPLE} not found (set PHASELENS_SHARED or put shared/ beside the repo)"
)


def parse(name: str):
    return list(by_name("focus").parse(SourceFile(FIXTURES / name)))


def by_line(records):
    return {int(r.source_locator.rsplit(":", 1)[1]): r for r in records if isinstance(r, BillingLine)}


def test_bedrock_token_rows_from_the_formats_example():
    lines = by_line(parse("focus.llm_tokens.csv"))
    got = {n: (lines[n].provider, lines[n].token_type, lines[n].model, lines[n].quantity_tokens, lines[n].cost)
           for n in (2, 3, 4)}
    assert got == {
        2: ("aws.bedrock", "uncached_input", "claude-sonnet-4", Decimal(328000), Decimal("0.984")),
        3: ("aws.bedrock", "output", "claude-sonnet-4", Decimal(212) * 1000, Decimal("3.18")),  # PricingQuantity x 1000 Tokens
        4: ("aws.bedrock", "cache_read", "claude-sonnet-4", Decimal(1536000), Decimal("0.4608")),
    }
    assert (lines[2].account, lines[2].project, lines[2].charge_category) == ("123456789012", "123456789012", "usage")


def test_azure_openai_and_marketplace_rows():
    lines = by_line(parse("focus.llm_tokens.csv"))
    aoai = lines[5]
    assert (aoai.provider, aoai.token_type, aoai.model, aoai.quantity_tokens) == ("azure.ai.openai", "output", "gpt-4o", Decimal(212000))
    assert aoai.tags_json == '{"deployment": "global", "env": "prod", "org": "trey"}'  # " org" and "org" agree: one key
    market = lines[6]
    assert (market.provider, market.token_type, market.quantity_tokens) == ("azure.ai.inference", "uncached_input", Decimal(3000))


def test_cloud_rows_corrections_credits_and_rejects():
    records = parse("focus.llm_tokens.csv")
    lines = by_line(records)
    ec2 = lines[7]
    assert (ec2.provider, ec2.token_type, ec2.model, ec2.quantity_tokens) == ("aws", "other", None, None)
    assert '"org": "trey"' in ec2.tags_json and '" org"' not in ec2.tags_json
    assert lines[7].billing_line_id != lines[8].billing_line_id  # two identical rows, two lines
    assert (lines[9].charge_category, lines[9].cost) == ("usage_correction", Decimal("-1.10"))
    assert (lines[10].provider, lines[10].charge_category, lines[10].cost) == ("aws.bedrock", "credit", Decimal("-2.00"))
    assert (lines[12].provider, lines[12].token_type) == ("oracle", "other")
    assert [(r.reason, r.locator.rsplit(":", 1)[1]) for r in records if isinstance(r, Reject)] == [("bad_number", "11")]


def test_parquet_export_gives_the_same_lines_as_the_csv():
    csv_lines = [r for r in parse("focus.llm_tokens.csv") if isinstance(r, BillingLine)]
    pq_lines = [r for r in parse("focus.llm_tokens.parquet") if isinstance(r, BillingLine)]
    assert [r.billing_line_id for r in pq_lines] == [r.billing_line_id for r in csv_lines]
    assert [(r.cost, r.quantity_tokens, r.period_start) for r in pq_lines] == [
        (r.cost, r.quantity_tokens, r.period_start) for r in csv_lines]


def test_changed_header_raises_schema_mismatch_naming_the_column():
    with pytest.raises(SchemaMismatch) as e:
        parse("focus.header_changed.csv")
    assert e.value.missing == ["BilledCost"]


def _csv_totals(path: Path) -> tuple[int, dict[str, Decimal]]:
    """Row count and BilledCost per ProviderName, read with the csv module alone."""
    totals: dict[str, Decimal] = defaultdict(Decimal)
    n = 0
    with open(path, newline="", encoding="utf-8-sig") as f:
        for row in csv.DictReader(f):
            n += 1
            totals[row["ProviderName"]] += Decimal(row["BilledCost"])
    return n, dict(totals)


@needs_real_sample
def test_real_focus_sample_loads_whole_with_provider_totals_to_the_cent(tmp_path):
    rows, expected = _csv_totals(REAL_SAMPLE)
    con = connect(tmp_path / "s.duckdb")
    (f,) = ingest(con, [REAL_SAMPLE]).files
    assert (f.status, f.adapter, f.accepted, f.rejected, f.skipped, f.duplicates) == ("loaded", "focus", rows, 0, 0, 0)
    got = dict(con.execute("SELECT provider, sum(cost) FROM billing_lines GROUP BY provider").fetchall())
    # non-LLM cloud rows keep the cloud's own name, lower-cased
    assert got == {name.lower(): total for name, total in expected.items()}
    assert {k: v.quantize(Decimal("0.01")) for k, v in got.items()} == {
        k.lower(): v.quantize(Decimal("0.01")) for k, v in expected.items()}
    kinds = con.execute("SELECT DISTINCT token_type, model FROM billing_lines").fetchall()
    assert kinds == [("other", None)]  # the sample has no LLM token rows
    negatives = con.execute("SELECT count(*) FROM billing_lines WHERE cost < 0").fetchone()[0]
    assert negatives == sum(1 for r in csv.DictReader(open(REAL_SAMPLE, newline="")) if r["BilledCost"].startswith("-"))


@needs_real_sample
def test_real_focus_sample_reload_changes_nothing(tmp_path):
    con = connect(tmp_path / "s.duckdb")
    ingest(con, [REAL_SAMPLE])
    before = con.execute("SELECT count(*), sum(cost), min(billing_line_id), max(billing_line_id) FROM billing_lines").fetchone()
    (same,) = ingest(con, [REAL_SAMPLE]).files
    assert same.status == "unchanged"
    (forced,) = ingest(con, [REAL_SAMPLE], force=True).files
    assert (forced.status, forced.accepted, forced.duplicates) == ("loaded", 0, before[0])
    assert con.execute("SELECT count(*), sum(cost), min(billing_line_id), max(billing_line_id) FROM billing_lines").fetchone() == before


def test_a_focus_file_with_changed_columns_fails_and_leaves_the_store_untouched(tmp_path):
    con = connect(tmp_path / "s.duckdb")
    ingest(con, [FIXTURES / "focus.llm_tokens.csv"])
    before = con.execute("SELECT count(*), sum(cost) FROM billing_lines").fetchone()
    rejects_before = con.execute("SELECT count(*) FROM rejects").fetchone()
    (f,) = ingest(con, [FIXTURES / "focus.header_changed.csv"]).files
    assert f.status == "failed" and "BilledCost" in f.message
    assert con.execute("SELECT count(*), sum(cost) FROM billing_lines").fetchone() == before
    assert con.execute("SELECT count(*) FROM rejects").fetchone() == rejects_before
    assert con.execute("SELECT status FROM loads WHERE file LIKE '%header_changed%'").fetchall() == [("failed",)]


# ---- FOCUS 1.3: ServiceProviderName / HostProviderName and the SkuPriceDetails token properties ------------
# focus13.ai_prompt_caching_{a,b}.csv and focus13.draft_token_type.csv are the FOCUS specification's own
# example datasets, unchanged (FinOps-Open-Cost-and-Usage-Spec/FOCUS_Spec, specification/data/ai_prompt_caching/
# ai_prompt_caching_a.csv and _b.csv, and specification/data/ai_billing/foundation_model_via_csp_marketplace.csv);
# see tests/fixtures/billing/README.md.


def _types(name: str) -> list[tuple]:
    return [(r.token_type, r.model, r.quantity_tokens, r.cost) for r in parse(name) if isinstance(r, BillingLine)]


def test_focus_13_scenario_a_cache_writes_metered_apart():
    """Spec scenario A: 0.5 M uncached, 2 M cache write, 8 M cache read, 1.5 M output; input side $11.40."""
    assert _types("focus13.ai_prompt_caching_a.csv") == [
        ("uncached_input", "solora-reasoning-pro", Decimal(500000), Decimal("1.5")),
        ("cache_write", "solora-reasoning-pro", Decimal(2000000), Decimal("7.5")),
        ("cache_read", "solora-reasoning-pro", Decimal(8000000), Decimal("2.4")),
        ("output", "solora-reasoning-pro", Decimal(1500000), Decimal("22.5")),
    ]
    lines = [r for r in parse("focus13.ai_prompt_caching_a.csv") if isinstance(r, BillingLine)]
    assert {r.provider for r in lines} == {"solora ai"}  # ServiceProviderName, as ProviderName was read before
    assert sum(r.cost for r in lines if r.token_type != "output") == Decimal("11.40")
    assert '"focus_token_cache_action": "Write"' in lines[1].tags_json


def test_focus_13_scenario_b_input_meter_without_cache_action_and_token_hours_storage():
    """Spec scenario B: no cache-write meter (writes billed on the input meter), storage in token-hours."""
    got = _types("focus13.ai_prompt_caching_b.csv")
    assert [g[0] for g in got] == ["uncached_input", "cache_read", "output", "other"]
    assert got[0][2] == Decimal(2500000)  # uncached input and the tokens that populated the cache, one meter
    storage = got[3]
    assert (storage[1], storage[2], storage[3]) == (None, None, Decimal("6.0"))  # token-hours are not tokens


def test_focus_draft_token_type_property():
    """The earlier draft's single `TokenType` property (`CacheRead`, `CacheWrite`) maps the same way."""
    assert [(t, q) for t, _, q, _ in _types("focus13.draft_token_type.csv")] == [
        ("cache_read", Decimal(50000000)), ("cache_write", Decimal(15000000))]


def test_focus_13_token_properties_decide_over_names_and_bad_values_fall_back():
    lines = by_line(parse("focus13.token_properties.csv"))
    assert lines[2].token_type == "cache_write"  # meter `Meter 4711`: only the properties say so
    assert lines[3].token_type == "cache_read"  # meter says `Input Tokens`, TokenCacheAction says Read
    assert lines[4].token_type == "output" and "focus_token_unknown" in lines[4].tags_json  # `Sideways`
    assert (lines[5].token_type, lines[5].model) == ("cache_read", None)  # details not JSON: the meter decides
    vendor_on_cloud = lines[6]
    assert (vendor_on_cloud.provider, vendor_on_cloud.model, vendor_on_cloud.token_type) == (
        "aws.bedrock", "claude-sonnet-4-5", "uncached_input")
    assert lines[7].token_type == "other"  # TokenCacheAction `Other`
    assert lines[8].token_type == "output"  # reasoning metered apart carries TokenDirection Output


def test_focus_13_file_without_provider_name_loads(tmp_path):
    con = connect(tmp_path / "s.duckdb")
    (f,) = ingest(con, [FIXTURES / "focus13.ai_prompt_caching_a.csv"]).files
    assert (f.status, f.adapter, f.accepted, f.rejected) == ("loaded", "focus", 4, 0)
    got = con.execute("SELECT token_type, sum(quantity_tokens) FROM billing_lines GROUP BY 1 ORDER BY 1").fetchall()
    assert got == [("cache_read", Decimal(8000000)), ("cache_write", Decimal(2000000)),
                   ("output", Decimal(1500000)), ("uncached_input", Decimal(500000))]


@pytest.mark.parametrize("shape", ["struct", "map"])
def test_focus_13_parquet_sku_price_details_as_struct_or_map(shape):
    """Scenario A's rows as Parquet with meters that name nothing: only SkuPriceDetails, a STRUCT or a MAP
    column rather than a JSON string, tells the token type."""
    got = [(r.token_type, r.model, r.quantity_tokens) for r in parse(f"focus13.opaque_meters.{shape}.parquet")
           if isinstance(r, BillingLine)]
    assert got == [("uncached_input", "solora-reasoning-pro", Decimal(500000)),
                   ("cache_write", "solora-reasoning-pro", Decimal(2000000)),
                   ("cache_read", "solora-reasoning-pro", Decimal(8000000)),
                   ("output", "solora-reasoning-pro", Decimal(1500000))]
