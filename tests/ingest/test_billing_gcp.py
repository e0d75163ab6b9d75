"""GCP billing export rows for Vertex AI, JSON Lines and flattened CSV (docs/formats.md#gcp-billing-export-for-vertex-ai)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest

from phaselens.ingest.base import SchemaMismatch, SourceFile
from phaselens.ingest.registry import by_name
from phaselens.models import BillingLine, Reject, Skip
from phaselens.pipeline.load import ingest
from phaselens.pipeline.store import connect

FIXTURES = Path(__file__).parents[1] / "fixtures" / "billing"


def parse(name: str, **options):
    return list(by_name("gcp_billing").parse(SourceFile(FIXTURES / name, options=options)))


def usage_by_sku(records):
    return {r.sku: r for r in records if isinstance(r, BillingLine) and r.charge_category == "usage"}


def test_formats_example_row():
    line = usage_by_sku(parse("gcp_billing.vertex.jsonl"))["7EBE-3B46-F75C"]
    assert (line.provider, line.model, line.token_type) == ("gcp.vertex_ai", "gemini-2.5-flash", "uncached_input")
    # pricing_unit "count" names no block, so usage.amount (tokens) is used, not 1.864
    assert line.quantity_tokens == Decimal(1864000)
    assert (line.cost, line.currency, line.cost_usd) == (Decimal("0.5592"), "USD", Decimal("0.5592"))
    assert (line.period_start, line.period_end) == (datetime(2025, 8, 13, 10), datetime(2025, 8, 13, 11))
    assert (line.account, line.project) == ("01A2B3-C4D5E6-F7A8B9", "support-bot-prod")
    assert '"team": "support"' in line.tags_json and '"app": "chat"' in line.tags_json


def test_sku_qualifiers_decide_the_token_type():
    lines = usage_by_sku(parse("gcp_billing.vertex.jsonl"))
    assert lines["SKU-OUT"].token_type == "output"
    assert lines["SKU-OUT"].quantity_tokens == Decimal("0.212") * 1_000_000  # pricing unit `1M tokens`
    assert (lines["SKU-THINK"].token_type, lines["SKU-THINK"].quantity_tokens) == ("output", Decimal(140000))
    assert (lines["SKU-CACHE"].token_type, lines["SKU-CACHE"].model) == ("cache_read", "gemini-3-flash")
    assert (lines["SKU-STORE"].token_type, lines["SKU-STORE"].quantity_tokens) == ("other", None)
    # Gemini 1.5 was billed per character: no token count is invented
    assert (lines["SKU-15"].token_type, lines["SKU-15"].quantity_tokens) == ("uncached_input", None)


def test_credits_are_their_own_negative_lines():
    records = parse("gcp_billing.vertex.jsonl")
    out = [r for r in records if isinstance(r, BillingLine) and r.sku == "SKU-OUT"]
    credits = sorted(r.cost for r in out if r.charge_category == "credit")
    assert credits == [Decimal("-0.05"), Decimal("-0.02")]
    assert all(r.token_type == "output" and r.quantity_tokens is None for r in out if r.charge_category == "credit")
    assert sum(r.cost for r in out) == Decimal("0.53") - Decimal("0.05") - Decimal("0.02")  # net of credits
    assert len({r.billing_line_id for r in out}) == 3


def test_other_services_are_skipped_and_bad_rows_rejected():
    records = parse("gcp_billing.vertex.jsonl")
    assert [s.kind for s in records if isinstance(s, Skip)] == ["gcp:Compute Engine"]
    assert [(r.reason, r.locator.rsplit(":", 1)[1]) for r in records if isinstance(r, Reject)] == [("bad_timestamp", "9")]


def test_non_usd_rows_use_the_supplied_rate_or_the_exports_own():
    own = usage_by_sku(parse("gcp_billing.vertex.jsonl"))["SKU-EUR"]
    assert (own.cost, own.currency) == (Decimal("0.46"), "EUR")
    assert own.cost_usd == Decimal("0.46") / Decimal("0.92")  # currency_conversion_rate is EUR per USD
    supplied = usage_by_sku(parse("gcp_billing.vertex.jsonl", fx={"EUR": Decimal("1.10")}))["SKU-EUR"]
    assert supplied.cost_usd == Decimal("0.46") * Decimal("1.10")


def test_flattened_csv_headers_dotted_and_underscored():
    dotted = parse("gcp_billing.flat_dotted.csv")
    first = [r for r in dotted if isinstance(r, BillingLine) and r.sku == "7EBE-3B46-F75C"]
    assert sorted((r.charge_category, r.cost) for r in first) == [("credit", Decimal("-0.1")), ("usage", Decimal("0.5592"))]
    usage = [r for r in first if r.charge_category == "usage"][0]
    assert usage.quantity_tokens == Decimal(1864000)  # 1.864 in `1M tokens`
    tax = [r for r in dotted if isinstance(r, BillingLine) and r.charge_category == "tax"]
    assert [(r.token_type, r.cost) for r in tax] == [("other", Decimal("0.05"))]
    assert [s.kind for s in dotted if isinstance(s, Skip)] == ["gcp:Cloud Storage"]
    under = [r for r in parse("gcp_billing.flat_underscore.csv") if isinstance(r, BillingLine)]
    assert sorted((r.charge_category, r.cost, r.quantity_tokens) for r in under) == [
        ("credit", Decimal("-0.07"), None), ("usage", Decimal("0.53"), Decimal(212000)),
    ]


def test_changed_header_raises_schema_mismatch_and_the_load_fails_cleanly(tmp_path):
    with pytest.raises(SchemaMismatch) as e:
        parse("gcp_billing.header_changed.csv")
    assert e.value.missing == ["cost"]
    con = connect(tmp_path / "s.duckdb")
    (f,) = ingest(con, [FIXTURES / "gcp_billing.header_changed.csv"]).files
    assert f.status == "failed" and "cost" in f.message
    assert con.execute("SELECT count(*) FROM billing_lines").fetchone()[0] == 0


def test_load_and_reload(tmp_path):
    con = connect(tmp_path / "s.duckdb")
    (f,) = ingest(con, [FIXTURES / "gcp_billing.vertex.jsonl"]).files
    assert (f.status, f.accepted, f.rejected, f.skipped) == ("loaded", 9, 1, 1)  # 7 usage rows + 2 credits
    (again,) = ingest(con, [FIXTURES / "gcp_billing.vertex.jsonl"], force=True).files
    assert (again.accepted, again.duplicates) == (0, 9)
