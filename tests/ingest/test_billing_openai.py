"""OpenAI Usage API and Costs API pages (docs/formats.md#openai-usage-api, docs/formats.md#openai-costs-api)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest

from phaselens.ingest.base import SourceFile
from phaselens.ingest.billing_openai import parse_line_item
from phaselens.ingest.registry import by_name
from phaselens.models import BillingLine, Reject, Skip
from phaselens.pipeline.load import ingest
from phaselens.pipeline.store import connect

FIXTURES = Path(__file__).parents[1] / "fixtures" / "billing"


def parse(name: str, adapter: str):
    return list(by_name(adapter).parse(SourceFile(FIXTURES / name)))


def lines_of(records, result: int | None = None):
    out = [r for r in records if isinstance(r, BillingLine)]
    if result is not None:
        out = [r for r in out if r.source_locator.endswith(f"results[{result}]")]
    return {r.token_type: r for r in out}


def test_usage_page_becomes_one_line_per_token_bucket_without_money():
    records = parse("openai_usage.page.json", "openai_usage")
    first = lines_of(records, 0)
    # the formats.md example: 328,000 uncached + 1,536,000 cached = 1,864,000 input; no cache writes
    assert {t: r.quantity_tokens for t, r in first.items()} == {
        "uncached_input": Decimal(328000), "cache_read": Decimal(1536000), "output": Decimal(212000),
    }
    for line in first.values():
        assert line.cost == 0 and line.cost_usd == 0 and line.charge_category == "usage_quantity"
        assert (line.model, line.model_raw) == ("gpt-4o-mini", "gpt-4o-mini-2024-07-18")
        assert line.project == "proj_7Qm2xR" and line.provider == "openai"
        assert (line.period_start, line.period_end) == (datetime(2025, 8, 13), datetime(2025, 8, 14))


def test_usage_without_the_uncached_field_subtracts_cached_and_cache_write():
    second = lines_of(parse("openai_usage.page.json", "openai_usage"), 1)
    # input_tokens 5000 includes 1000 cached and 500 cache-write tokens
    assert second["uncached_input"].quantity_tokens == Decimal(3500)
    assert second["cache_read"].quantity_tokens == Decimal(1000)
    assert second["cache_write"].quantity_tokens == Decimal(500)
    assert second["output"].quantity_tokens == Decimal(700)
    assert second["output"].project is None and second["output"].model == "gpt-4.1"


def test_usage_bad_results_are_rejected_and_idle_results_skipped():
    records = parse("openai_usage.page.json", "openai_usage")
    skips = [r for r in records if isinstance(r, Skip)]
    rejects = {r.locator.rsplit("#", 1)[1]: r.reason for r in records if isinstance(r, Reject)}
    assert [s.locator.rsplit("#", 1)[1] for s in skips] == ["data[0].results[2]"]
    assert rejects == {"data[0].results[3]": "bad_number", "data[0].results[4]": "negative_tokens"}
    assert len([r for r in records if isinstance(r, BillingLine)]) == 3 + 4


def test_usage_json_lines_pages_and_a_broken_line():
    records = parse("openai_usage.pages.jsonl", "openai_usage")
    lines = [r for r in records if isinstance(r, BillingLine)]
    assert len(lines) == 5
    assert {r.period_start for r in lines} == {datetime(2025, 8, 13), datetime(2025, 8, 14)}
    assert sum(r.quantity_tokens for r in lines if r.token_type == "uncached_input") == Decimal(1800)
    rejects = [r for r in records if isinstance(r, Reject)]
    assert [(r.reason, r.locator.rsplit(":", 1)[1]) for r in rejects] == [("malformed_json", "3")]


def test_costs_amounts_as_number_or_string_and_lowercase_currency():
    lines = [r for r in parse("openai_costs.pages.json", "openai_costs") if isinstance(r, BillingLine)]
    by_sku = {r.sku: r for r in lines}
    cached = by_sku["gpt-4o-mini-2024-07-18, cached input"]
    assert (cached.cost, cached.currency, cached.cost_usd) == (Decimal("0.1152"), "USD", Decimal("0.1152"))
    assert cached.token_type == "cache_read" and cached.quantity_tokens == Decimal(1536000)
    uncached = by_sku["gpt-4o-mini-2024-07-18, input"]
    assert uncached.cost == Decimal("0.0492") and uncached.token_type == "uncached_input"
    assert uncached.quantity_tokens == Decimal(328) * 1000  # quantity_unit 1000_tokens
    assert by_sku["gpt-4o-mini-2024-07-18, output"].quantity_tokens is None  # no quantity given
    # hand sum of the ten valid amounts in the fixture
    expected = sum(Decimal(x) for x in ("0.1152", "0.0492", "0.1272", "1.5", "2.40", "0.03", "0.25", "0.06", "0.01", "3.0"))
    assert sum(r.cost for r in lines) == expected


def test_costs_line_item_prefixes_and_non_token_items():
    lines = [r for r in parse("openai_costs.pages.json", "openai_costs") if isinstance(r, BillingLine)]
    by_sku = {r.sku: r for r in lines}
    ft = by_sku["ft-gpt-4o-2024-08-06, input"]
    assert (ft.model, ft.token_type) == ("gpt-4o", "uncached_input") and '"fine_tuned": true' in ft.tags_json
    prio = by_sku["priority | gpt-5.6-sol, output, long context"]
    assert (prio.model, prio.token_type) == ("gpt-5.6-sol", "output") and '"service_tier": "priority"' in prio.tags_json
    audio = by_sku["gpt-audio-mini-2025-12-15 audio, input"]
    assert (audio.model, audio.token_type) == ("gpt-audio-mini", "uncached_input")
    for sku in ("web search tool calls", "whisper-1, audio", "Vector storage"):
        assert by_sku[sku].token_type == "other"
    unnamed = [r for r in lines if r.sku is None]
    assert [(r.token_type, r.cost) for r in unnamed] == [("other", Decimal("3.0"))]


def test_costs_bad_amount_is_rejected_and_the_rest_loads():
    records = parse("openai_costs.pages.json", "openai_costs")
    rejects = [r for r in records if isinstance(r, Reject)]
    assert [(r.reason, r.locator.rsplit(":", 1)[1]) for r in rejects] == [("bad_number", "[1]#data[0].results[6]")]


@pytest.mark.parametrize(
    "item, token_type, model",
    [
        ("gpt-4o-mini-2024-07-18, cached input", "cache_read", "gpt-4o-mini-2024-07-18"),
        ("gpt-4o-mini-2024-07-18, input", "uncached_input", "gpt-4o-mini-2024-07-18"),
        ("gpt-4o-mini-2024-07-18, output", "output", "gpt-4o-mini-2024-07-18"),
        ("o3, cached input, batch", "cache_read", "o3"),
        ("priority | gpt-5.6-sol, output, long context", "output", "gpt-5.6-sol"),
        ("web search tool calls", "other", None),
        (None, "other", None),
    ],
)
def test_parse_line_item(item, token_type, model):
    got_type, got_model, _ = parse_line_item(item)
    assert (got_type, got_model) == (token_type, model)


def test_usage_and_costs_load_into_the_store_without_double_counting_money(tmp_path):
    con = connect(tmp_path / "s.duckdb")
    res = ingest(con, [FIXTURES / "openai_usage.page.json", FIXTURES / "openai_costs.pages.json"])
    assert [(f.adapter, f.status, f.accepted, f.rejected, f.skipped) for f in res.files] == [
        ("openai_usage", "loaded", 7, 2, 1), ("openai_costs", "loaded", 10, 1, 0),
    ]
    total, tokens = con.execute(
        "SELECT sum(cost), sum(quantity_tokens) FILTER (WHERE charge_category = 'usage_quantity') FROM billing_lines"
    ).fetchone()
    assert total == Decimal("7.5416")
    assert tokens == 328000 + 1536000 + 212000 + 3500 + 1000 + 500 + 700


def test_usage_spec_examples_map_cache_writes_to_cache_write():
    """The two completions-usage examples of openai/openai-openapi `openapi.yaml` (the endpoint's response
    example and the `UsageCompletionsResult` schema example), whose `input_tokens` include cached and
    cache-write tokens and whose `input_uncached_tokens` excludes both."""
    records = parse("openai_usage.spec_examples.jsonl", "openai_usage")
    assert not [r for r in records if isinstance(r, Reject)]
    by_bucket: dict[str, dict[str, Decimal]] = {}
    for r in records:
        if isinstance(r, BillingLine):
            by_bucket.setdefault(r.source_locator.split(":")[-1].split("#")[0], {})[r.token_type] = r.quantity_tokens
    assert by_bucket == {
        "1": {"uncached_input": Decimal(500), "cache_read": Decimal(400), "cache_write": Decimal(100), "output": Decimal(500)},
        "2": {"uncached_input": Decimal(3000), "cache_read": Decimal(1800), "cache_write": Decimal(200), "output": Decimal(1000)},
    }
    # disjoint buckets: they add up to the spec's inclusive input_tokens (1000 and 5000)
    assert [sum(v for t, v in b.items() if t != "output") for b in by_bucket.values()] == [Decimal(1000), Decimal(5000)]


def test_cache_write_usage_reaches_the_store_as_its_own_token_type(tmp_path):
    con = connect(tmp_path / "s.duckdb")
    (f,) = ingest(con, [FIXTURES / "openai_usage.spec_examples.jsonl"]).files
    assert (f.status, f.adapter, f.rejected) == ("loaded", "openai_usage", 0)
    got = con.execute(
        "SELECT sum(quantity_tokens) FROM billing_lines WHERE token_type = 'cache_write' AND sku = 'input_cache_write_tokens'"
    ).fetchone()[0]
    assert got == Decimal(300)
