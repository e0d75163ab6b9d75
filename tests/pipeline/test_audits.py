"""Build audits (pipeline/audits.py, pipeline/sql/audits/*.sql): each returns the rows that break an invariant.

The store is the two-day fixture of tests/fixtures/batch (LiteLLM spend logs and an OpenAI bill that is 25%
above the traces on the second day, so allocation leaves untraced dollars). Each audit is shown to hold on
the built store and to name the rows of a defect written into it; a build whose relation SQL is broken stops
with the offending rows named and leaves the previous store as it was.
"""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path

import pytest

import phaselens.pipeline.build as build_mod
import phaselens.pipeline.store as store_mod
from phaselens.models.config import load_config
from phaselens.pipeline.audits import AuditError, audit_names, audit_rows, run_audits
from phaselens.pipeline.build import build
from phaselens.pipeline.load import ingest
from phaselens.pipeline.store import connect

BATCH = Path(__file__).resolve().parents[1] / "fixtures" / "batch"
AUDITS = {"allocation_conserved", "allocation_one_share_per_call", "call_attribution_once",
          "calls_priced_or_flagged", "no_negative_tokens_or_durations", "shares_within_unit_range"}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """The fixture store, ingested and built once per module."""
    path = tmp_path_factory.mktemp("audits") / "store.duckdb"
    con = connect(path)
    ingest(con, [str(BATCH / "traces"), str(BATCH / "billing")])
    build(con, load_config(BATCH / "phaselens.toml"))
    con.close()
    return path


@pytest.fixture
def built(pristine, tmp_path):
    """A copy of the built store for one test to damage."""
    path = tmp_path / "store.duckdb"
    shutil.copy(pristine, path)
    con = connect(path)
    yield con
    con.close()


def offending(con, name: str) -> list[dict]:
    columns, rows, total = audit_rows(con, name)
    assert total == len(rows) or len(rows) == 5
    return [dict(zip(columns, r)) for r in rows]


def test_every_audit_holds_on_a_built_store_with_billing(built):
    assert set(audit_names()) == AUDITS
    for name in AUDITS:
        assert offending(built, name) == [], name
    # the fixture exercises allocation: money was allocated to calls and some stays untraced
    allocated, untraced = built.execute(
        "SELECT (SELECT sum(allocated_cost_usd) FROM allocated_costs), (SELECT sum(untraced_cost_usd) FROM untraced_costs)"
    ).fetchone()
    assert allocated > 0 and untraced > 0


def test_allocation_audit_names_the_provider_and_day_one_picodollar_off(built):
    call_id, day = built.execute("SELECT call_id, day FROM allocated_costs ORDER BY call_id LIMIT 1").fetchone()
    built.execute("UPDATE allocated_costs SET allocated_cost_usd = allocated_cost_usd + 0.000000000001 "
                  "WHERE call_id = ? AND token_type = 'output'", [call_id])
    rows = offending(built, "allocation_conserved")
    assert [(r["provider"], r["day"]) for r in rows] == [("openai", day)]
    assert rows[0]["allocated_usd"] + rows[0]["untraced_usd"] - rows[0]["invoice_usd"] == Decimal("1e-12")


def test_allocation_audit_catches_a_dropped_billing_cell(built):
    # a billed cell lost from the reconciliation no longer matches the export's money lines
    built.execute("DELETE FROM untraced_costs WHERE token_type = 'output'")
    built.execute("DELETE FROM allocated_costs WHERE token_type = 'output'")
    built.execute("DELETE FROM reconciliation WHERE token_type = 'output'")
    rows = offending(built, "allocation_conserved")
    assert [(r["provider"], r["day"]) for r in rows] == [("openai", None)]
    assert rows[0]["invoice_usd"] > rows[0]["allocated_usd"]


def test_allocation_audit_catches_a_share_counted_twice(built):
    built.execute("INSERT INTO allocated_costs SELECT * FROM allocated_costs ORDER BY call_id LIMIT 1")
    (first,) = built.execute("SELECT min(call_id) FROM allocated_costs").fetchone()
    assert [r["call_id"] for r in offending(built, "allocation_one_share_per_call")] == [first]


def test_an_incremental_build_checks_the_shares_of_the_days_it_allocated_again(built):
    """`audit_touched` runs the one-share audit over the re-allocated days' shares: a share counted twice on such
    a day stops the build; the same defect on a day the build left alone is not its rows (a full build, or an
    incremental build that re-allocated every day, checks all of them)."""
    from phaselens.pipeline.incremental import audit_touched

    # a second share of nothing: the money still adds up, so only the one-share audit sees it
    built.execute("INSERT INTO allocated_costs SELECT * REPLACE (0 AS allocated_cost_usd) FROM allocated_costs "
                  "ORDER BY call_id LIMIT 1")
    (day,) = built.execute("SELECT day FROM allocated_costs ORDER BY call_id LIMIT 1").fetchone()
    (other,) = built.execute("SELECT max(day) FROM allocated_costs WHERE day <> ?", [day]).fetchone()
    assert other is not None
    with pytest.raises(AuditError, match="allocation_one_share_per_call"):
        audit_touched(built, [], [day])
    with pytest.raises(AuditError, match="allocation_one_share_per_call"):
        audit_touched(built, [], None)
    audit_touched(built, [], [other])
    assert not built.execute("SELECT count(*) FROM duckdb_schemas() WHERE schema_name = 'phaselens_audit'").fetchone()[0]


def test_negative_tokens_and_durations_are_named_by_call_and_column(built):
    a, b = [r[0] for r in built.execute("SELECT call_id FROM raw_calls ORDER BY call_id LIMIT 2").fetchall()]
    built.execute("UPDATE raw_calls SET output_tokens = -3 WHERE call_id = ?", [a])
    built.execute("UPDATE call_attribution SET decode_s = -0.5 WHERE call_id = ?", [b])
    rows = offending(built, "no_negative_tokens_or_durations")
    assert {(r["relation"], r["call_id"], r["column"], r["value"]) for r in rows} == {
        ("raw_calls", a, "output_tokens", -3.0), ("call_attribution", b, "decode_s", -0.5)}


def test_a_call_neither_priced_nor_flagged_is_named(built):
    a, b = [r[0] for r in built.execute("SELECT call_id FROM call_attribution ORDER BY call_id LIMIT 2").fetchall()]
    built.execute("UPDATE call_attribution SET priced = NULL WHERE call_id = ?", [a])
    built.execute("UPDATE call_attribution SET priced = false WHERE call_id = ?", [b])  # costs stay set
    rows = offending(built, "calls_priced_or_flagged")
    assert [(r["call_id"], r["problem"]) for r in rows] == [(a, "priced_flag_missing"), (b, "unpriced_with_cost")]


def test_missing_and_duplicated_calls_are_named(built):
    a, b = [r[0] for r in built.execute("SELECT call_id FROM call_attribution ORDER BY call_id LIMIT 2").fetchall()]
    built.execute("DELETE FROM call_attribution WHERE call_id = ?", [a])
    built.execute("INSERT INTO call_attribution SELECT * FROM call_attribution WHERE call_id = ?", [b])
    rows = offending(built, "call_attribution_once")
    assert [(r["call_id"], r["rows_in_call_attribution"], r["problem"]) for r in rows] == [
        (a, 0, "missing"), (b, 2, "duplicated")]


def test_an_incremental_build_checks_the_calls_of_the_days_it_rebuilt(built):
    """`audit_touched` runs the per-call audits over the calls that started on the rebuilt days: a call attributed
    twice on such a day stops the build; the same defect on a day the build left alone is not its rows."""
    from phaselens.pipeline.incremental import audit_touched

    call_id, started = built.execute("SELECT call_id, started_at FROM raw_calls ORDER BY call_id LIMIT 1").fetchone()
    day = started.date()
    (other,) = built.execute("SELECT max(CAST(started_at AS DATE)) FROM raw_calls WHERE CAST(started_at AS DATE) <> ?",
                             [day]).fetchone()
    assert other is not None
    built.execute("INSERT INTO call_attribution SELECT * FROM call_attribution WHERE call_id = ?", [call_id])
    with pytest.raises(AuditError, match="call_attribution_once") as err:
        audit_touched(built, [day], [])
    assert call_id in str(err.value)
    audit_touched(built, [other], [])


def test_a_share_outside_zero_to_one_is_named(built):
    (workload,) = built.execute("SELECT min(workload) FROM workloads").fetchone()
    # workloads is a table the build writes: damage one share in place
    built.execute("UPDATE workloads SET prefill_cost_share = 1.25 WHERE workload = $w", {"w": workload})
    assert offending(built, "shares_within_unit_range") == [
        {"workload": workload, "share": "prefill_cost_share", "value": 1.25}]


def test_run_audits_raises_with_the_audit_and_rows_named(built):
    run_audits(built)  # holds
    (call_id,) = built.execute("SELECT min(call_id) FROM call_attribution").fetchone()
    built.execute("INSERT INTO call_attribution SELECT * FROM call_attribution WHERE call_id = ?", [call_id])
    with pytest.raises(AuditError) as err:
        run_audits(built)
    assert err.value.audit == "call_attribution_once"
    assert call_id in str(err.value) and "duplicated" in str(err.value)


def test_a_broken_relation_stops_the_build_and_keeps_the_previous_store(built, monkeypatch):
    before = built.execute("SELECT count(*), count(DISTINCT call_id) FROM call_attribution").fetchone()
    built_at = built.execute("SELECT value FROM phaselens_meta WHERE key = 'built_at'").fetchone()
    (doubled,) = built.execute("SELECT min(call_id) FROM raw_calls").fetchone()
    real = store_mod.sql_text

    def broken(name: str) -> str:
        text = real(name)
        if name == "call_attribution":  # the relation gains a second row for one call
            text = text.rstrip().rstrip(";")
            text = (f"{text};\nINSERT INTO call_attribution SELECT * FROM call_attribution "
                    f"WHERE call_id = '{doubled}';")
        return text

    monkeypatch.setattr(store_mod, "sql_text", broken)
    monkeypatch.setattr(build_mod, "sql_text", broken, raising=False)
    with pytest.raises(AuditError) as err:  # full: an incremental build with nothing new would not rerun it
        build(built, load_config(BATCH / "phaselens.toml"), full=True)
    message = str(err.value)
    assert "call_attribution_once" in message and doubled in message and "rows_in_call_attribution=2" in message
    assert built.execute("SELECT count(*), count(DISTINCT call_id) FROM call_attribution").fetchone() == before
    assert built.execute("SELECT value FROM phaselens_meta WHERE key = 'built_at'").fetchone() == built_at
