"""AWS CUR 2.0 rows for Amazon Bedrock, CSV and Parquet (docs/formats.md#aws-cur-20-for-bedrock)."""

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


def parse(name: str):
    return list(by_name("aws_cur").parse(SourceFile(FIXTURES / name)))


def by_line(records):
    """Lines keyed by the CSV line number of their row."""
    return {int(r.source_locator.rsplit(":", 1)[1]): r for r in records if isinstance(r, BillingLine)}


def test_token_rows_of_the_formats_example():
    lines = by_line(parse("aws_cur.bedrock.csv"))
    # 1K-token units: 328 -> 328,000 tokens; 1,536 -> 1,536,000; 212 -> 212,000
    assert [(lines[n].token_type, lines[n].quantity_tokens, lines[n].cost) for n in (2, 3, 4)] == [
        ("uncached_input", Decimal(328000), Decimal("0.984")),
        ("cache_read", Decimal(1536000), Decimal("0.4608")),
        ("output", Decimal(212000), Decimal("3.18")),
    ]
    first = lines[2]
    assert (first.provider, first.model, first.account) == ("aws.bedrock", "claude-sonnet-4", "123456789012")
    assert (first.period_start, first.period_end) == (datetime(2025, 8, 13, 10), datetime(2025, 8, 13, 11))
    assert first.sku == "USE1-Claude4Sonnet-input-tokens-cross-region-global"
    assert '"user_team": "support"' in first.tags_json and "assumed-role/SupportBot" in first.tags_json


def test_model_and_token_type_from_usage_types_without_an_arn():
    lines = by_line(parse("aws_cur.bedrock.csv"))
    assert (lines[5].token_type, lines[5].model, lines[5].quantity_tokens) == ("cache_write", "claude-sonnet-4-6", Decimal(42000))
    assert (lines[6].token_type, lines[6].model) == ("cache_write", "claude-opus-4-8")  # -mantle- usage type
    assert lines[6].quantity_tokens == Decimal(10000)
    # pricing_unit `tokens`: the amount already counts tokens
    assert (lines[7].model, lines[7].quantity_tokens) == ("nova-2.0-lite", Decimal(5000))
    # provisioned throughput: Bedrock money, but not a token charge; an opaque ARN names no model
    assert (lines[8].token_type, lines[8].model, lines[8].quantity_tokens) == ("other", None, None)


def test_credits_and_refunds_are_negative_and_carry_no_tokens():
    lines = by_line(parse("aws_cur.bedrock.csv"))
    credit, refund = lines[9], lines[10]
    assert (credit.charge_category, credit.cost, credit.quantity_tokens) == ("credit", Decimal("-0.50"), None)
    assert (refund.charge_category, refund.cost, refund.quantity_tokens) == ("refund", Decimal("-0.03"), None)
    assert credit.token_type == "output" and refund.token_type == "uncached_input"


def test_other_products_are_skipped_and_bad_rows_rejected():
    records = parse("aws_cur.bedrock.csv")
    assert [(s.kind, s.locator.rsplit(":", 1)[1]) for s in records if isinstance(s, Skip)] == [("aws:AmazonS3", "11")]
    rejects = [(r.reason, r.locator.rsplit(":", 1)[1]) for r in records if isinstance(r, Reject)]
    assert rejects == [("bad_number", "12"), ("bad_timestamp", "13")]
    assert len(records) == 12  # every data row is a line, a skip or a reject


def test_rows_with_the_wrong_number_of_fields_are_rejected_and_reading_goes_on():
    records = parse("aws_cur.ragged.csv")
    assert [(r.reason, r.locator.rsplit(":", 1)[1]) for r in records if isinstance(r, Reject)] == [
        ("malformed_row", "3"), ("malformed_row", "5")]
    lines = [r for r in records if isinstance(r, BillingLine)]
    assert [(r.token_type, r.quantity_tokens) for r in lines] == [("output", Decimal(2000)), ("uncached_input", Decimal(4000))]


def test_missing_pricing_unit_uses_the_1k_token_unit_and_identical_rows_stay_apart():
    lines = [r for r in parse("aws_cur.no_unit.csv") if isinstance(r, BillingLine)]
    assert [r.quantity_tokens for r in lines] == [Decimal("17330"), Decimal("17330")]
    assert lines[0].model == "nova-lite" and lines[0].currency == "USD"
    assert lines[0].billing_line_id != lines[1].billing_line_id


def test_parquet_with_typed_columns_and_a_tag_map():
    records = parse("aws_cur.bedrock.parquet")
    lines = [r for r in records if isinstance(r, BillingLine)]
    assert [(r.token_type, r.quantity_tokens, r.cost) for r in lines] == [
        ("uncached_input", Decimal(328000), Decimal("0.984")), ("output", Decimal(212000), Decimal("3.18")),
    ]
    assert lines[0].period_start == datetime(2025, 8, 13, 10) and lines[0].tags_json is not None
    assert '"user_team": "support"' in lines[0].tags_json
    assert [s.kind for s in records if isinstance(s, Skip)] == ["aws:AWSLambda"]


def test_legacy_cur_column_names():
    (line,) = [r for r in parse("aws_cur.legacy_cur1.csv") if isinstance(r, BillingLine)]
    assert (line.quantity_tokens, line.cost, line.model) == (Decimal(2500), Decimal("0.0075"), "claude-sonnet-4")
    assert '"user:team": "support"' in line.tags_json


def test_changed_header_raises_schema_mismatch_naming_the_column():
    with pytest.raises(SchemaMismatch) as e:
        parse("aws_cur.header_changed.csv")
    assert e.value.missing == ["line_item_unblended_cost"]


def test_changed_header_fails_the_load_and_leaves_the_store_untouched(tmp_path):
    con = connect(tmp_path / "s.duckdb")
    ingest(con, [FIXTURES / "aws_cur.no_unit.csv"])
    before = con.execute("SELECT count(*), sum(cost) FROM billing_lines").fetchone()
    res = ingest(con, [FIXTURES / "aws_cur.header_changed.csv"])
    (f,) = res.files
    assert f.status == "failed" and "line_item_unblended_cost" in f.message
    assert con.execute("SELECT count(*), sum(cost) FROM billing_lines").fetchone() == before
    assert con.execute("SELECT count(*) FROM rejects").fetchone()[0] == 0


def test_reloading_the_export_changes_nothing(tmp_path):
    con = connect(tmp_path / "s.duckdb")
    first = ingest(con, [FIXTURES / "aws_cur.bedrock.csv"]).files[0]
    assert (first.accepted, first.rejected, first.skipped) == (9, 2, 1)
    lines = con.execute("SELECT count(*), sum(cost) FROM billing_lines").fetchone()
    again = ingest(con, [FIXTURES / "aws_cur.bedrock.csv"], force=True).files[0]
    assert (again.accepted, again.duplicates) == (0, 9)
    assert con.execute("SELECT count(*), sum(cost) FROM billing_lines").fetchone() == lines
