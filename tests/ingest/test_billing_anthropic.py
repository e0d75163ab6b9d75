"""Anthropic Admin API usage report and cost report (docs/formats.md#anthropic-usage-report, docs/formats.md#anthropic-cost-report)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from pathlib import Path

from phaselens.ingest.base import SourceFile
from phaselens.ingest.registry import by_name
from phaselens.models import BillingLine, Reject
from phaselens.pipeline.load import ingest
from phaselens.pipeline.store import connect

FIXTURES = Path(__file__).parents[1] / "fixtures" / "billing"


def parse(name: str, adapter: str):
    return list(by_name(adapter).parse(SourceFile(FIXTURES / name)))


def by_result(records, locator_suffix: str):
    return {r.sku: r for r in records if isinstance(r, BillingLine) and r.source_locator.endswith(locator_suffix)}


def test_nested_cache_creation_usage_report():
    records = parse("anthropic_usage.nested.json", "anthropic_usage")
    first = by_result(records, "1#data[0].results[0]")
    assert {sku: (r.token_type, r.quantity_tokens) for sku, r in first.items()} == {
        "uncached_input_tokens": ("uncached_input", Decimal(328000)),
        "cache_read_input_tokens": ("cache_read", Decimal(1536000)),
        "cache_creation.ephemeral_5m_input_tokens": ("cache_write", Decimal(42000)),
        "output_tokens": ("output", Decimal(212000)),
    }
    line = first["output_tokens"]
    assert (line.model, line.model_raw) == ("claude-sonnet-4", "claude-sonnet-4-20250514")
    assert line.project == "wrkspc_01JwQvzr7rXLA5AGx3HKfFUJ" and line.provider == "anthropic"
    assert line.cost == 0 and line.charge_category == "usage_quantity"
    assert (line.period_start, line.period_end) == (datetime(2025, 8, 13), datetime(2025, 8, 14))
    assert '"web_search_requests": 3' in line.tags_json


def test_null_grouping_fields_and_the_one_hour_cache():
    records = parse("anthropic_usage.nested.json", "anthropic_usage")
    second = by_result(records, "1#data[0].results[1]")
    assert second["cache_creation.ephemeral_1h_input_tokens"].quantity_tokens == Decimal(9000)
    assert "cache_creation.ephemeral_5m_input_tokens" not in second  # zero: no line
    assert all(r.model is None and r.project is None for r in second.values())
    rejects = [r for r in records if isinstance(r, Reject)]
    assert [(r.reason, r.locator.rsplit("#", 1)[1]) for r in rejects] == [("negative_tokens", "data[1].results[0]")]


def test_flattened_cache_creation_fields_read_like_the_nested_ones():
    records = parse("anthropic_usage.flattened.jsonl", "anthropic_usage")
    first = by_result(records, "1#data[0].results[0]")
    assert first["cache_creation.ephemeral_5m_input_tokens"].quantity_tokens == Decimal(42000)
    assert first["cache_creation.ephemeral_1h_input_tokens"].quantity_tokens == Decimal(8000)
    assert first["cache_creation.ephemeral_1h_input_tokens"].token_type == "cache_write"
    assert first["cache_creation.ephemeral_5m_input_tokens"].billing_line_id != first["cache_creation.ephemeral_1h_input_tokens"].billing_line_id
    second = by_result(records, "2#data[0].results[0]")
    assert {k: r.quantity_tokens for k, r in second.items()} == {"uncached_input_tokens": 100, "output_tokens": 50}
    assert second["output_tokens"].period_start == datetime(2025, 8, 14)


def test_cost_report_amounts_are_cents():
    records = parse("anthropic_cost.json", "anthropic_cost")
    lines = [r for r in records if isinstance(r, BillingLine)]
    got = {r.description: (r.token_type, r.cost) for r in lines}
    assert got == {
        "Claude Sonnet 4 Usage - Input Tokens": ("uncached_input", Decimal("0.984")),  # "98.40" cents
        "Claude Sonnet 4 Usage - Output Tokens": ("output", Decimal("3.18")),
        "Claude Sonnet 4 Usage - Cache Read": ("cache_read", Decimal("0.4608")),
        "Claude Sonnet 4 Usage - Cache Write 5m": ("cache_write", Decimal("0.1575")),
        "Claude Opus Usage - Cache Write 1h": ("cache_write", Decimal("0.125")),  # a JSON number, still cents
        "Web Search Usage": ("other", Decimal("1.2378912")),
        "Code Execution Usage": ("other", Decimal("0.05")),
    }
    assert all(r.currency == "USD" and r.cost_usd == r.cost for r in lines)
    assert [r.reason for r in records if isinstance(r, Reject)] == ["bad_number"]


def test_cost_and_usage_load_and_reload_is_a_no_op(tmp_path):
    con = connect(tmp_path / "s.duckdb")
    files = [FIXTURES / "anthropic_cost.json", FIXTURES / "anthropic_usage.nested.json"]
    first = ingest(con, files)
    assert [(f.adapter, f.accepted) for f in first.files] == [("anthropic_cost", 7), ("anthropic_usage", 7)]
    before = con.execute("SELECT count(*), sum(cost) FROM billing_lines").fetchone()
    again = ingest(con, files, force=True)
    assert [(f.accepted, f.duplicates) for f in again.files] == [(0, 7), (0, 7)]
    assert con.execute("SELECT count(*), sum(cost) FROM billing_lines").fetchone() == before
    assert before[1] == Decimal("0.984") + Decimal("3.18") + Decimal("0.4608") + Decimal("0.1575") + Decimal(
        "0.125") + Decimal("1.2378912") + Decimal("0.05")
