"""Shared billing pieces: units, numbers, dates, tags, line ids, and which adapter claims which file."""

from __future__ import annotations

import shutil
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest

from phaselens.ingest.base import SourceFile
from phaselens.ingest.billing_lines import LineMaker
from phaselens.ingest.registry import adapters, detect
from phaselens.ingest.values import RecordError, column_key, parse_decimal, parse_tags, parse_timestamp, unit_multiplier

FIXTURES = Path(__file__).parents[1] / "fixtures" / "billing"
BILLING_ADAPTERS = {
    "openai_usage", "openai_costs", "anthropic_usage", "anthropic_cost", "aws_cur", "gcp_billing", "azure_cost", "focus",
}
# fixture file -> the adapter that must claim it (the test knows the answer from the name; sniff must not)
EXPECTED = {
    "openai_usage.page.json": "openai_usage",
    "openai_usage.pages.jsonl": "openai_usage",
    "openai_usage.spec_examples.jsonl": "openai_usage",
    "openai_costs.pages.json": "openai_costs",
    "anthropic_usage.nested.json": "anthropic_usage",
    "anthropic_usage.flattened.jsonl": "anthropic_usage",
    "anthropic_cost.json": "anthropic_cost",
    "aws_cur.bedrock.csv": "aws_cur",
    "aws_cur.bedrock.parquet": "aws_cur",
    "aws_cur.no_unit.csv": "aws_cur",
    "aws_cur.legacy_cur1.csv": "aws_cur",
    "aws_cur.header_changed.csv": "aws_cur",
    "aws_cur.ragged.csv": "aws_cur",
    "gcp_billing.vertex.jsonl": "gcp_billing",
    "gcp_billing.flat_dotted.csv": "gcp_billing",
    "gcp_billing.flat_underscore.csv": "gcp_billing",
    "gcp_billing.header_changed.csv": "gcp_billing",
    "azure_cost.mca.csv": "azure_cost",
    "azure_cost.ea.csv": "azure_cost",
    "azure_cost.header_changed.csv": "azure_cost",
    "focus.llm_tokens.csv": "focus",
    "focus.llm_tokens.parquet": "focus",
    "focus13.ai_prompt_caching_a.csv": "focus",
    "focus13.ai_prompt_caching_b.csv": "focus",
    "focus13.draft_token_type.csv": "focus",
    "focus13.token_properties.csv": "focus",
    "focus13.opaque_meters.struct.parquet": "focus",
    "focus13.opaque_meters.map.parquet": "focus",
    "focus.header_changed.csv": "focus",
}


def billing_adapters():
    return [a for a in adapters() if a.name in BILLING_ADAPTERS]


def test_every_billing_adapter_is_registered_between_the_spans_and_the_gateways():
    found = {a.name: a for a in billing_adapters()}
    assert set(found) == BILLING_ADAPTERS
    assert all(a.kind == "billing" for a in found.values())
    order = [a.name for a in adapters()]
    billing = [i for i, name in enumerate(order) if name in BILLING_ADAPTERS]
    assert billing == list(range(billing[0], billing[0] + len(billing)))  # one block
    assert order.index("otlp_json") < billing[0] and billing[-1] < order.index("litellm")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_exactly_the_right_billing_adapter_claims_each_fixture(name):
    src = SourceFile(FIXTURES / name)
    claimed = [a.name for a in billing_adapters() if a.sniff(src)]
    assert claimed == [EXPECTED[name]]


def test_every_fixture_is_covered_by_the_claim_table():
    files = {p.name for p in FIXTURES.iterdir() if p.is_file() and p.suffix != ".md"}
    assert files == set(EXPECTED)


@pytest.mark.parametrize("path", sorted((FIXTURES / "not_billing").iterdir()), ids=lambda p: p.name)
def test_no_billing_adapter_claims_traces_or_gateway_logs(path):
    src = SourceFile(path)
    assert [a.name for a in billing_adapters() if a.sniff(src)] == []


def test_detection_reads_content_not_the_file_name(tmp_path):
    misleading = tmp_path / "focus_export.csv"
    shutil.copy(FIXTURES / "aws_cur.bedrock.csv", misleading)
    assert detect(SourceFile(misleading)).name == "aws_cur"
    no_suffix = tmp_path / "openai_costs"
    shutil.copy(FIXTURES / "anthropic_cost.json", no_suffix)
    assert detect(SourceFile(no_suffix)).name == "anthropic_cost"


def test_gzip_compressed_export_is_detected_and_read(tmp_path):
    import gzip

    gz = tmp_path / "cur.csv.gz"
    gz.write_bytes(gzip.compress((FIXTURES / "aws_cur.no_unit.csv").read_bytes()))
    src = SourceFile(gz)
    adapter = detect(src)
    assert adapter.name == "aws_cur"
    assert len([r for r in adapter.parse(src) if type(r).__name__ == "BillingLine"]) == 2


@pytest.mark.parametrize(
    "unit, expected",
    [
        ("1K", (Decimal(1000), True)),
        ("1 K", (Decimal(1000), True)),
        ("1M", (Decimal(1_000_000), True)),
        ("1K tokens", (Decimal(1000), True)),
        ("1000 Tokens", (Decimal(1000), True)),
        ("1000_tokens", (Decimal(1000), True)),
        ("tokens", (Decimal(1), True)),
        ("1 million tokens", (Decimal(1_000_000), True)),
        ("count", (Decimal(1), True)),
        ("characters", (Decimal(1), False)),
        ("GB-Mo", None),
        (None, None),
    ],
)
def test_unit_multiplier_reads_block_sizes(unit, expected):
    assert unit_multiplier(unit) == expected


@pytest.mark.parametrize(
    "value, expected",
    [
        (1755043200, datetime(2025, 8, 13)),
        ("1755043200", datetime(2025, 8, 13)),
        ("2025-08-13T00:00:00Z", datetime(2025, 8, 13)),
        ("2025-08-14T00:00:00+00:00", datetime(2025, 8, 14)),
        ("2025-08-13T12:30:00+02:00", datetime(2025, 8, 13, 10, 30)),
        ("2025-08-13 10:00:00 UTC", datetime(2025, 8, 13, 10)),
        ("2024-09-18 22:00:00", datetime(2024, 9, 18, 22)),
        ("08/13/2025", datetime(2025, 8, 13)),
        ("8/3/2025 2:15 PM", datetime(2025, 8, 3, 14, 15)),
        ("2025-08-13T00:00:00.0000000Z", datetime(2025, 8, 13)),
    ],
)
def test_parse_timestamp_gives_naive_utc(value, expected):
    got = parse_timestamp(value, "t")
    assert got == expected and got.tzinfo is None


@pytest.mark.parametrize("value, reason", [("13/08/2025", "bad_timestamp"), ("soon", "bad_timestamp"),
                                           ("", "missing_field"), ("NULL", "missing_field")])
def test_parse_timestamp_rejects_with_a_reason(value, reason):
    with pytest.raises(RecordError) as e:
        parse_timestamp(value, "t")
    assert e.value.reason == reason


def test_parse_decimal_is_exact_for_floats_and_strings():
    assert parse_decimal(0.1152, "x") == Decimal("0.1152")
    assert parse_decimal("98.40", "x") == Decimal("98.40")
    assert parse_decimal(Decimal("1.5"), "x") == Decimal("1.5")
    assert parse_decimal("NULL", "x", required=False) is None
    for bad in ("n/a", True, "NaN"):
        with pytest.raises(RecordError) as e:
            parse_decimal(bad, "x")
        assert e.value.reason == "bad_number"


def test_column_key_ignores_case_and_separators():
    assert column_key("costInBillingCurrency") == column_key("CostInBillingCurrency") == column_key("cost_in_billing_currency")
    assert column_key("service.description") == column_key("service_description")
    assert column_key("lineItem/UsageType") == column_key("line_item_usage_type")
    assert column_key("meterName") != column_key("meterId")


def test_parse_tags_strips_keys_and_accepts_the_shapes_exports_use():
    assert parse_tags('{" org": "trey", "env": "prod"}') == {"org": "trey", "env": "prod"}
    assert parse_tags('"team": "eu","env": "prod"') == {"team": "eu", "env": "prod"}
    assert parse_tags([{"key": "team", "value": "support"}]) == {"team": "support"}
    assert parse_tags([("user_team", "support")]) == {"user_team": "support"}
    assert parse_tags('{" org": "a", "org": "b"}') == {" org": "a", "org": "b"}  # disagreeing: both kept
    assert parse_tags("NULL") == {}


def _line(maker: LineMaker, where: str = "2", **over):
    fields = dict(period_start=datetime(2025, 8, 13), period_end=datetime(2025, 8, 14), provider="openai",
                  token_type="output", cost=Decimal("1.25"), currency="usd", quantity_tokens=Decimal(1000))
    fields.update(over)
    return maker.line(where, **fields)


def test_line_ids_are_stable_across_loads_and_locators_but_not_across_content(tmp_path):
    a = LineMaker(SourceFile(tmp_path / "a.json"), "test")
    b = LineMaker(SourceFile(tmp_path / "elsewhere" / "b.json"), "test")
    first = [_line(a, "1"), _line(a, "7")]  # two otherwise identical lines in one file
    again = [_line(b, "3"), _line(b, "9")]  # the same export loaded again from another path
    assert first[0].billing_line_id != first[1].billing_line_id
    assert [x.billing_line_id for x in first] == [x.billing_line_id for x in again]
    c = LineMaker(SourceFile(tmp_path / "c.json"), "test")
    assert _line(c, cost=Decimal("1.26")).billing_line_id != first[0].billing_line_id
    assert _line(c, token_type="cache_read").billing_line_id != first[0].billing_line_id
    assert _line(c, period_start=datetime(2025, 8, 12)).billing_line_id != first[0].billing_line_id
    # the same value spelled differently is the same line
    d = LineMaker(SourceFile(tmp_path / "d.json"), "test")
    assert _line(d, cost=Decimal("1.2500")).billing_line_id == first[0].billing_line_id


def test_currency_is_upper_cased_and_never_assumed_to_be_usd(tmp_path):
    maker = LineMaker(SourceFile(tmp_path / "x.csv"), "test")
    usd = _line(maker)
    assert (usd.currency, usd.cost_usd) == ("USD", Decimal("1.25"))
    eur = _line(maker, currency="eur")
    assert (eur.currency, eur.cost_usd) == ("EUR", None)
    fx = LineMaker(SourceFile(tmp_path / "x.csv", options={"fx": {"eur": "1.08"}}), "test")
    assert _line(fx, currency="EUR").cost_usd == Decimal("1.25") * Decimal("1.08")


def test_a_period_that_ends_before_it_starts_is_rejected(tmp_path):
    maker = LineMaker(SourceFile(tmp_path / "x.csv"), "test")
    with pytest.raises(RecordError) as e:
        _line(maker, period_start=datetime(2025, 8, 14), period_end=datetime(2025, 8, 13))
    assert e.value.reason == "end_before_start"


@pytest.mark.parametrize("fixture", ["focus.header_changed.csv", "aws_cur.header_changed.csv",
                                     "azure_cost.header_changed.csv", "gcp_billing.header_changed.csv"])
def test_a_changed_header_points_to_the_formats_section_listing_the_columns(fixture):
    from phaselens.ingest.base import SchemaMismatch

    src = SourceFile(FIXTURES / fixture)
    (adapter,) = [a for a in billing_adapters() if a.name == EXPECTED[fixture]]
    with pytest.raises(SchemaMismatch) as e:
        list(adapter.parse(src))
    assert "docs/formats.md#" in str(e.value) and "lists the columns read" in str(e.value)
