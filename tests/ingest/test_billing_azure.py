"""Azure Cost Management exports, EA (PascalCase) and MCA (camelCase) (docs/formats.md#azure-cost-management-export)."""

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
    return list(by_name("azure_cost").parse(SourceFile(FIXTURES / name, options=options)))


def by_line(records):
    return {int(r.source_locator.rsplit(":", 1)[1]): r for r in records if isinstance(r, BillingLine)}


def test_mca_formats_example_row():
    line = by_line(parse("azure_cost.mca.csv"))[2]
    assert (line.provider, line.model, line.model_raw, line.token_type) == (
        "azure.ai.openai", "gpt-4o", "gpt-4o-0806", "uncached_input")
    assert line.quantity_tokens == Decimal("1864.0") * 1000  # `1K` blocks
    assert (line.cost, line.currency, line.cost_usd) == (Decimal("4.66"), "USD", Decimal("4.66"))
    assert (line.period_start, line.period_end) == (datetime(2025, 8, 13), datetime(2025, 8, 14))  # MM/dd/yyyy
    assert (line.account, line.project) == ("0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0", "rg-support")
    assert '"team": "support"' in line.tags_json and '"deployment": "global"' in line.tags_json


def test_meter_vocabulary_and_unit_blocks():
    lines = by_line(parse("azure_cost.mca.csv"))
    got = {n: (lines[n].token_type, lines[n].model, lines[n].quantity_tokens) for n in (3, 4, 5, 6, 7, 10)}
    assert got == {
        3: ("output", "gpt-4o", Decimal(212000)),
        4: ("cache_read", "gpt-5-codex", Decimal(1536000)),  # ccchd
        5: ("uncached_input", "gpt-5.1", Decimal(750000)),  # 0.75 x 1M
        6: ("cache_write", "gpt-5.6-sol", Decimal(200000)),  # Cd Wr, 0.2 x 1M
        7: ("uncached_input", "text-embedding-3-large", Decimal(500000)),
        10: ("uncached_input", "gpt-4o-mini", Decimal(1000000)),  # Batch meter
    }
    assert '"tier": "batch"' in lines[10].tags_json


def test_refunds_non_openai_meters_and_bad_dates():
    records = parse("azure_cost.mca.csv")
    lines = by_line(records)
    assert (lines[9].charge_category, lines[9].cost, lines[9].quantity_tokens) == ("refund", Decimal("-0.25"), None)
    assert [(s.kind, s.locator.rsplit(":", 1)[1]) for s in records if isinstance(s, Skip)] == [("azure:Virtual Machines", "8")]
    assert [(r.reason, r.locator.rsplit(":", 1)[1]) for r in records if isinstance(r, Reject)] == [("bad_timestamp", "11")]


def test_cost_in_usd_is_used_for_a_non_usd_billing_currency():
    line = by_line(parse("azure_cost.mca.csv"))[10]
    assert (line.cost, line.currency, line.cost_usd) == (Decimal("0.069"), "EUR", Decimal("0.0745"))


def test_ea_pascal_case_iso_dates_and_spaced_units():
    lines = by_line(parse("azure_cost.ea.csv"))
    first = lines[2]
    assert (first.model, first.token_type, first.quantity_tokens) == ("gpt-4.1", "uncached_input", Decimal(2000000))  # `1 K`
    assert (first.period_start, first.period_end) == (datetime(2025, 8, 13), datetime(2025, 8, 14))
    assert lines[3].period_start == datetime(2025, 8, 13)  # ISO with time and Z
    assert (lines[3].model, lines[3].quantity_tokens) == ("o4-mini", Decimal(300000))
    assert (lines[4].model, lines[4].token_type, lines[4].quantity_tokens) == ("gpt-5.4-mini", "cache_read", Decimal(2500000))
    assert (first.account, first.project) == ("sub-ea-1", "rg-eu")
    assert '"env": "prod"' in first.tags_json and '"team": "eu"' in first.tags_json  # tags without braces


def test_non_usd_without_a_rate_keeps_cost_usd_empty_and_a_rate_converts():
    plain = by_line(parse("azure_cost.ea.csv"))[2]
    assert (plain.currency, plain.cost, plain.cost_usd) == ("EUR", Decimal("3.70"), None)
    converted = by_line(parse("azure_cost.ea.csv", fx={"EUR": Decimal("1.08")}))[2]
    assert converted.cost_usd == Decimal("3.70") * Decimal("1.08")
    assert converted.billing_line_id == plain.billing_line_id  # the rate is not part of the line


def test_ea_and_mca_casings_read_the_same_meter_the_same_way(tmp_path):
    mca = (FIXTURES / "azure_cost.mca.csv").read_text().splitlines()
    header = mca[0].split(",")
    pascal = ",".join(h[0].upper() + h[1:] for h in header)
    upper = ",".join(h.upper() for h in header)
    for i, head in enumerate((pascal, upper)):
        path = tmp_path / f"cased{i}.csv"
        path.write_text("\n".join([head, mca[1]]) + "\n")
        (line,) = [r for r in by_name("azure_cost").parse(SourceFile(path)) if isinstance(r, BillingLine)]
        assert (line.model, line.quantity_tokens, line.cost) == ("gpt-4o", Decimal(1864000), Decimal("4.66"))


def test_changed_header_raises_schema_mismatch_naming_the_column(tmp_path):
    with pytest.raises(SchemaMismatch) as e:
        parse("azure_cost.header_changed.csv")
    assert e.value.missing == ["quantity"]
    con = connect(tmp_path / "s.duckdb")
    (f,) = ingest(con, [FIXTURES / "azure_cost.header_changed.csv"]).files
    assert f.status == "failed" and "quantity" in f.message
    assert con.execute("SELECT count(*) FROM billing_lines").fetchone()[0] == 0


def test_load_reports_non_usd_lines_without_usd_and_reload_is_a_no_op(tmp_path):
    con = connect(tmp_path / "s.duckdb")
    (f,) = ingest(con, [FIXTURES / "azure_cost.ea.csv"]).files
    assert (f.status, f.accepted) == ("loaded", 3)
    assert con.execute("SELECT count(*) FROM billing_lines WHERE cost_usd IS NULL").fetchone()[0] == 3
    (again,) = ingest(con, [FIXTURES / "azure_cost.ea.csv"], force=True).files
    assert (again.accepted, again.duplicates) == (0, 3)
