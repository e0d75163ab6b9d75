"""Billing reconciliation and invoice-true allocation (pipeline/reconcile.py and its SQL).

Hand-made stores use a fictional provider `acme` whose list prices come from a price book written below,
so every expected number is worked out by hand from those prices. The property test checks the
allocation invariant (allocated + untraced = billed, exactly) against sums taken straight from the
billing lines, and each call's share against the exact rational share computed with `Fraction`.
The sample day end to end is in test_reconcile_sample.py.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from datetime import date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaselens.models.pricebook import ModelPrice, PriceBook
from phaselens.pipeline.build import workload_rules_sql
from phaselens.pipeline.errors import StoreError
from phaselens.pipeline.load import ingest
from phaselens.pipeline.pricing import build_costs
from phaselens.pipeline.reconcile import ReconcileSettings, build_reconciliation, reconcile_rows
from phaselens.pipeline.store import connect

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "reconcile"
SAMPLE_BILLING = ROOT / "sample_logs" / "billing"
PICO = Decimal("1e-12")
D1, D2, D3 = date(2026, 3, 2), date(2026, 3, 3), date(2026, 3, 4)

# acme/m1 list prices, USD per million tokens: the only prices the hand-made cases use.
ACME = {"uncached_input": Decimal("2"), "cache_read": Decimal("0.5"), "cache_write": Decimal("2.5"),
        "output": Decimal("8")}
BOOK = PriceBook(prices=[ModelPrice(provider="acme", input=ACME["uncached_input"], cache_read=ACME["cache_read"],
                                    cache_write=ACME["cache_write"], output=ACME["output"])])
TOKEN_FIELDS = {"uncached_input": "uncached_input_tokens", "cache_read": "cache_read_tokens",
                "cache_write": "cache_write_tokens", "output": "output_tokens"}


def usd(tokens: int, token_type: str) -> Decimal:
    """acme's list cost of `tokens`, by hand."""
    return Decimal(tokens) * ACME[token_type] / Decimal(1_000_000)


# --- building stores -----------------------------------------------------------------------------------
def call(n: int, day: date, hour: int = 12, model: str | None = "m1", provider: str = "acme", **tokens) -> dict:
    return {"call_id": f"c{n:05d}", "source": "test", "operation": "chat", "status": "ok", "provider": provider,
            "model": model, "model_raw": model, "timing_source": "none",
            "started_at": datetime.combine(day, datetime.min.time()) + timedelta(hours=hour),
            **{TOKEN_FIELDS[k]: v for k, v in tokens.items()}}


def line(day: date, token_type: str, tokens: int | None, cost: Decimal | str, *, model: str | None = "m1",
         provider: str = "acme", category: str = "usage", start: datetime | None = None,
         end: datetime | None = None, currency: str = "USD", converted: bool = True) -> dict:
    start = start or datetime.combine(day, datetime.min.time())
    cost = Decimal(cost)
    return {"period_start": start, "period_end": end or start + timedelta(days=1), "provider": provider,
            "model": model, "token_type": token_type,
            "quantity_tokens": None if tokens is None else Decimal(tokens), "cost": cost, "currency": currency,
            "cost_usd": cost if converted else None, "charge_category": category, "source": "test"}


CALL_COLUMNS = tuple(call(0, D1, **dict.fromkeys(TOKEN_FIELDS, 0)))
LINE_COLUMNS = ("billing_line_id", *line(D1, "output", 0, 0))


def insert(con, calls: list[dict], lines: list[dict], *, replace: bool = True) -> None:
    """Put these rows in raw_calls and raw_billing_lines (emptied first unless `replace` is false)."""
    for table, columns, rows in (("raw_calls", CALL_COLUMNS, calls),
                                 ("raw_billing_lines", LINE_COLUMNS,
                                  [{**ln, "billing_line_id": f"b{i}"} for i, ln in enumerate(lines)])):
        if replace:
            con.execute(f"DELETE FROM {table}")
        if rows:
            con.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                            [[r.get(c) for c in columns] for r in rows])


def prerequisites(con, book: PriceBook | None = BOOK) -> None:
    """What the build has made before the reconciliation stage: workloads and call costs."""
    sql, params = workload_rules_sql([])
    con.execute(sql, params)
    build_costs(con, book)


def reconciled(calls: list[dict], lines: list[dict], settings_: ReconcileSettings | None = None):
    con = connect(":memory:")
    insert(con, calls, lines)
    prerequisites(con)
    build_reconciliation(con, settings_, BOOK)
    return con


def cells(con) -> dict[tuple, dict]:
    cols, rows = reconcile_rows(con)
    return {(r[cols.index("model")], r[cols.index("day")], r[cols.index("token_type")]): dict(zip(cols, r))
            for r in rows}


def allocated(con) -> dict[str, Decimal]:
    return dict(con.execute("SELECT call_id, sum(allocated_cost_usd) FROM allocated_costs GROUP BY call_id").fetchall())


def untraced(con) -> dict[tuple, Decimal]:
    return {(m, d, t): u for m, d, t, u in
            con.execute("SELECT model, day, token_type, untraced_cost_usd FROM untraced_costs").fetchall()}


# --- causes, one hand-made case each ----------------------------------------------------------------------
def test_matching_bill_and_traces_are_ok_and_allocate_everything():
    calls = [call(i, D1, uncached_input=100_000, output=10_000) for i in range(10)]
    lines = [line(D1, "uncached_input", 1_000_000, usd(1_000_000, "uncached_input")),   # $2.00
             line(D1, "output", 100_000, usd(100_000, "output"))]                          # $0.80
    con = reconciled(calls, lines)
    got = cells(con)
    for t in ("uncached_input", "output"):
        assert (got[("m1", D1, t)]["status"], got[("m1", D1, t)]["cause"]) == ("ok", "ok")
        assert got[("m1", D1, t)]["token_delta"] == 0 and got[("m1", D1, t)]["cost_delta_usd"] == 0
    assert got[("m1", D1, "uncached_input")]["list_usd_per_mtok"] == Decimal("2")
    assert "agree" in got[("m1", D1, "output")]["explanation"]
    assert set(allocated(con).values()) == {Decimal("0.2") + Decimal("0.08")}  # $2.80 over ten equal calls
    assert set(untraced(con).values()) == {0}


def test_billed_above_traced_at_list_price_is_untraced_traffic():
    calls = [call(i, D1, uncached_input=250_000) for i in range(4)]                 # 1.0 M traced
    con = reconciled(calls, [line(D1, "uncached_input", 1_500_000, "3.00")])        # 1.5 M billed at $2/M
    row = cells(con)[("m1", D1, "uncached_input")]
    assert (row["status"], row["cause"]) == ("billed_above_traced", "untraced_traffic")
    assert row["token_delta"] == 500_000 and row["token_coverage"] == pytest.approx(2 / 3)
    assert row["billed_usd_per_mtok"] == row["list_usd_per_mtok"] == Decimal("2")
    assert "500.0 k tokens more than traced" in row["explanation"] and "$2.00/M" in row["explanation"]
    # the calls carry what their 1.0 M of the 1.5 M billed tokens cost; the other third stays untraced
    assert set(allocated(con).values()) == {Decimal("0.5")}
    assert untraced(con)[("m1", D1, "uncached_input")] == Decimal("1.00")


def test_untraced_cell_without_calls_still_compares_against_the_price_book():
    con = reconciled([call(1, D1, output=1000)], [line(D1, "output", 1000, "0.008"),
                                                  line(D1, "cache_read", 2_000_000, "1.00")])
    row = cells(con)[("m1", D1, "cache_read")]
    assert (row["status"], row["cause"], row["traced_tokens"]) == ("not_traced", "untraced_traffic", 0)
    assert row["list_usd_per_mtok"] == ACME["cache_read"]                          # from the book: no call shows it
    assert "$0.5/M against a list price of $0.5/M" in row["explanation"]
    assert untraced(con)[("m1", D1, "cache_read")] == Decimal("1.00")


def test_same_tokens_different_money_is_a_price_mismatch_citing_both_prices():
    calls = [call(i, D1, output=200_000) for i in range(5)]                         # 1.0 M output, $8.00 at list
    con = reconciled(calls, [line(D1, "output", 1_000_000, "12.00")])               # billed $12/M
    row = cells(con)[("m1", D1, "output")]
    assert (row["status"], row["cause"]) == ("cost_differs", "price_mismatch")
    assert row["cost_delta_usd"] == Decimal("4.00") and row["estimated_cost_usd"] == Decimal("8")
    assert "$12.00/M against the list $8.00/M (+50.0%)" in row["explanation"]
    assert set(allocated(con).values()) == {Decimal("2.40")}                        # invoice-true: $12 / 5
    assert untraced(con)[("m1", D1, "output")] == 0


def test_cached_tokens_counted_as_uncached_are_missing_cache_tokens():
    # traces report every input token as uncached; the bill splits 400 k uncached + 600 k cache read
    calls = [call(i, D1, uncached_input=500_000, output=1000) for i in range(2)]
    lines = [line(D1, "uncached_input", 400_000, usd(400_000, "uncached_input")),
             line(D1, "cache_read", 600_000, usd(600_000, "cache_read")),
             line(D1, "output", 2000, usd(2000, "output"))]
    got = cells(reconciled(calls, lines))
    assert got[("m1", D1, "uncached_input")]["cause"] == "missing_cache_tokens"
    assert got[("m1", D1, "uncached_input")]["status"] == "traced_above_billed"
    assert got[("m1", D1, "cache_read")]["cause"] == "missing_cache_tokens"
    assert got[("m1", D1, "cache_read")]["status"] == "not_traced"
    assert got[("m1", D1, "output")]["cause"] == "ok"
    assert "600.0 k more cache tokens" in got[("m1", D1, "uncached_input")]["explanation"]


def test_opposite_gaps_on_neighbouring_days_are_a_bucket_edge():
    calls = [call(1, D1, uncached_input=900_000), call(2, D2, uncached_input=1_100_000)]
    lines = [line(D1, "uncached_input", 1_000_000, "2.00"), line(D2, "uncached_input", 1_000_000, "2.00")]
    got = cells(reconciled(calls, lines))
    assert got[("m1", D1, "uncached_input")]["cause"] == "time_zone_or_bucket_edge"
    assert got[("m1", D1, "uncached_input")]["status"] == "billed_above_traced"
    assert got[("m1", D2, "uncached_input")]["cause"] == "time_zone_or_bucket_edge"
    assert f"while {D1} show(s) 100.0 k the other way" in got[("m1", D2, "uncached_input")]["explanation"]
    # a gap with no opposite neighbour is not an edge
    alone = cells(reconciled(calls[:1], lines[:1]))
    assert alone[("m1", D1, "uncached_input")]["cause"] == "untraced_traffic"


def test_traced_without_bill_is_unbilled_traffic():
    calls = [call(1, D1, output=5000), call(2, D1, model="m2", output=7000), call(3, D2, output=9000)]
    lines = [line(D1, "output", 5000, usd(5000, "output")), line(D2, "output", 4000, usd(4000, "output"))]
    got = cells(reconciled(calls, lines))
    no_bill, short_bill = got[("m2", D1, "output")], got[("m1", D2, "output")]
    assert (no_bill["status"], no_bill["cause"], no_bill["billed_cost_usd"]) == ("not_billed", "unbilled_traffic", None)
    assert (short_bill["status"], short_bill["cause"]) == ("traced_above_billed", "unbilled_traffic")


def test_non_usd_line_without_rate_is_unconverted_currency():
    lines = [line(D1, "output", 1_000_000, "7.50", currency="EUR", converted=False)]
    row = cells(reconciled([call(1, D1, output=1_000_000)], lines))[("m1", D1, "output")]
    assert (row["status"], row["cause"], row["billed_cost_usd"]) == ("cost_unknown", "unconverted_currency", None)
    assert "--fx EUR=RATE" in row["explanation"]


def test_tolerances_are_settings():
    calls = [call(1, D1, uncached_input=970_000)]
    lines = [line(D1, "uncached_input", 1_000_000, "2.00")]                         # 3% more billed
    assert cells(reconciled(calls, lines))[("m1", D1, "uncached_input")]["cause"] == "untraced_traffic"
    loose = ReconcileSettings(token_tolerance=0.05, cost_tolerance=0.05)
    assert cells(reconciled(calls, lines, loose))[("m1", D1, "uncached_input")]["cause"] == "ok"


def test_non_token_charges_stay_untraced_and_other_clouds_stay_out():
    lines = [line(D1, "output", 1000, usd(1000, "output")),
             line(D1, "other", None, "0.25", model=None),                           # web search calls
             line(D1, "other", None, "40.00", model=None, provider="aws")]          # a VM on another cloud
    con = reconciled([call(1, D1, output=1000)], lines)
    got = cells(con)
    assert got[(None, D1, "other")]["cause"] == "untraced_traffic"
    assert "non-token charges" in got[(None, D1, "other")]["explanation"]
    assert con.execute("SELECT count(*) FROM reconciliation WHERE provider = 'aws'").fetchone()[0] == 0


def test_long_lines_spread_by_overlap_and_daily_buckets_go_to_their_main_day():
    start = datetime(2026, 3, 2, 12)                                                 # 12 h on D1, 24 h on D2
    lines = [line(D1, "output", 3_000_000, "3", start=start, end=start + timedelta(hours=36)),
             line(D3, "output", 500, "0.004", start=datetime(2026, 3, 4, 8))]    # 16 h on D3, 8 h on the next day
    got = cells(reconciled([call(1, D1, output=10)], lines))
    assert (got[("m1", D1, "output")]["billed_cost_usd"], got[("m1", D1, "output")]["billed_tokens"]) == (1, 1_000_000)
    assert (got[("m1", D2, "output")]["billed_cost_usd"], got[("m1", D2, "output")]["billed_tokens"]) == (2, 2_000_000)
    assert got[("m1", D3, "output")]["billed_cost_usd"] == Decimal("0.004")
    assert ("m1", D3 + timedelta(days=1), "output") not in got


def test_cost_report_alone_reconciles_money_and_usage_report_adds_tokens(tmp_path):
    """docs/formats.md#anthropic-cost-report: "98.40" cents = $0.984 = 328,000 uncached input tokens × $3 per million (Claude Sonnet 4)."""
    con = connect(tmp_path / "s.duckdb")
    ingest(con, [FIXTURES / "anthropic_cost.formats_example.json"])
    # the calls record their cache counts (zero), so cache reads they lack are traffic no trace holds
    calls = [{**call(i, date(2025, 8, 13), provider="anthropic", model="claude-sonnet-4", uncached_input=82_000,
                     cache_read=0, cache_write=0),
              "model_raw": "claude-sonnet-4-20250514"} for i in range(4)]
    insert(con, calls, [], replace=False)
    prerequisites(con, None)                                                       # genai-prices: $3 / M input
    build_reconciliation(con)
    row = cells(con)[("claude-sonnet-4", date(2025, 8, 13), "uncached_input")]
    assert row["billed_tokens"] is None and row["billed_cost_usd"] == Decimal("0.984")
    assert (row["estimated_cost_usd"], row["cause"]) == (Decimal("0.984"), "ok")
    assert "the bill gives no token counts" in row["explanation"]
    ingest(con, [FIXTURES / "anthropic_usage.formats_example.json"])                # adds the token counts
    build_reconciliation(con)
    got = cells(con)
    assert got[("claude-sonnet-4", date(2025, 8, 13), "uncached_input")]["billed_tokens"] == 328_000
    assert got[("claude-sonnet-4", date(2025, 8, 13), "uncached_input")]["cause"] == "ok"
    # the usage report bills 1.536 M cache-read tokens that no trace shows, and no money line prices them
    read = got[("claude-sonnet-4", date(2025, 8, 13), "cache_read")]
    assert (read["billed_tokens"], read["billed_cost_usd"], read["cause"]) == (1_536_000, None, "untraced_traffic")
    assert "no money line prices them; $0.3/M at list price" in read["explanation"]
    con.close()


def test_store_without_bills_reconciles_to_nothing_and_says_what_to_run():
    con = connect(":memory:")
    with pytest.raises(StoreError, match="phaselens build"):
        build_reconciliation(con)                                                   # no call_costs yet
    insert(con, [call(1, D1, output=10)], [])
    prerequisites(con)
    with pytest.raises(StoreError, match="no reconciliation"):
        reconcile_rows(con)
    build_reconciliation(con, None, BOOK)
    assert reconcile_rows(con)[1] == []
    assert con.execute("SELECT cost_usd_invoice FROM invoice_costs").fetchall() == [(None,)]


def test_reconcile_rows_filters_days_by_overlap():
    calls = [call(1, D1, output=10), call(2, D2, output=10), call(3, D3, output=10)]
    lines = [line(d, "output", 10, "0.00008") for d in (D1, D2, D3)]
    con = reconciled(calls, lines)
    cols, rows = reconcile_rows(con, since=datetime(2026, 3, 2, 12), until=date(2026, 3, 4))
    assert [r[cols.index("day")] for r in rows] == [D1, D2]
    assert set(cols) >= {"billed_tokens", "traced_tokens", "token_delta", "cost_delta_usd", "token_coverage",
                         "cost_coverage", "status", "cause", "explanation"}


# --- the allocation invariant, for random calls and bills -------------------------------------------------
PROVIDERS, MODELS, DAYS = ("acme", "beta"), ("m1", "m2", None), (D1, D2, D3)
TYPES = ("uncached_input", "cache_read", "cache_write", "output")
token_counts = st.one_of(st.just(0), st.integers(1, 3_000_000))
calls_st = st.lists(st.tuples(st.sampled_from(PROVIDERS), st.sampled_from(MODELS), st.sampled_from(DAYS),
                              st.integers(0, 23), st.fixed_dictionaries({t: token_counts for t in TYPES})),
                    max_size=25)
money = st.decimals(min_value=Decimal("-5"), max_value=Decimal("900"), places=12, allow_nan=False,
                    allow_infinity=False)
lines_st = st.lists(st.tuples(st.sampled_from(PROVIDERS), st.sampled_from(MODELS), st.sampled_from(DAYS),
                              st.sampled_from(TYPES + ("other",)), st.sampled_from(("day", "hour", "span")),
                              st.integers(0, 23), money, st.one_of(st.none(), st.integers(0, 5_000_000)),
                              st.sampled_from(("usage", "usage", "credit", "usage_quantity"))),
                    max_size=25)


@cache
def _property_store():
    return connect(":memory:")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls_st, lines_st)
def test_allocated_plus_untraced_equals_billed_exactly(call_specs, line_specs):
    calls = [call(i, day, hour, model=model, provider=provider, **tokens)
             for i, (provider, model, day, hour, tokens) in enumerate(call_specs)]
    lines, spread_keys = [], set()
    for provider, model, day, token_type, period, hour, cost, qty, category in line_specs:
        start = datetime.combine(day, datetime.min.time())
        end = start + timedelta(days=1)
        if period == "hour":
            start, end = start + timedelta(hours=hour), start + timedelta(hours=hour + 1)
        elif period == "span":
            start = start + timedelta(hours=hour)
            end = start + timedelta(days=2)
            spread_keys.add((provider, model, token_type))
        if category == "usage_quantity":
            cost = Decimal(0)
        lines.append(line(day, token_type, qty, cost, model=model, provider=provider, category=category,
                          start=start, end=end))
    con = _property_store()
    insert(con, calls, lines)
    prerequisites(con)
    build_reconciliation(con, None, BOOK)

    # billed per cell, straight from the lines (lines of a day or less sit on the day they start)
    scope = {ln["provider"] for ln in lines if ln["token_type"] != "other"} | {c["provider"] for c in calls}
    money_lines = [ln for ln in lines if ln["provider"] in scope and ln["charge_category"] != "usage_quantity"]
    expected_cell: dict[tuple, Decimal] = defaultdict(Decimal)
    expected_key: dict[tuple, Decimal] = defaultdict(Decimal)
    for ln in money_lines:
        key = (ln["provider"], ln["model"], ln["token_type"])
        expected_key[key] += ln["cost_usd"]
        if key not in spread_keys:
            expected_cell[(*key[:2], ln["period_start"].date(), key[2])] += ln["cost_usd"]

    rows = con.execute("SELECT provider, model, day, token_type, billed_cost_usd, allocated_cost_usd, "
                       "untraced_cost_usd, billed_tokens, traced_tokens FROM untraced_costs").fetchall()
    shares = con.execute("SELECT provider, model, day, token_type, call_id, tokens, allocated_cost_usd "
                         "FROM allocated_costs").fetchall()
    alloc_by_cell: dict[tuple, list] = defaultdict(list)
    for provider, model, day, token_type, call_id, tokens, amount in shares:
        alloc_by_cell[(provider, model, day, token_type)].append((call_id, tokens, amount))

    got_key: dict[tuple, Decimal] = defaultdict(Decimal)
    for provider, model, day, token_type, billed, _, untraced_usd, billed_tokens, traced_tokens in rows:
        cell = (provider, model, day, token_type)
        got_key[(provider, model, token_type)] += billed
        if (provider, model, token_type) not in spread_keys:
            assert billed == expected_cell[cell]
        parts = alloc_by_cell.pop(cell, [])
        assert sum((a for _, _, a in parts), Decimal(0)) + untraced_usd == billed   # the invariant, exactly
        if not parts:
            assert untraced_usd == billed                                   # a bill no call explains stays whole
            continue
        denominator = max(int(traced_tokens), -(-Fraction(billed_tokens or 0) // 1))
        for _, tokens, amount in parts:
            exact = Fraction(billed) * tokens / denominator
            assert abs(Fraction(amount) - exact) < Fraction(PICO)              # within one picodollar of its share
        # the calls get their tokens' part of the bill, rounded once: only billed tokens no call sent stay untraced
        explained = Fraction(billed) * int(traced_tokens) / denominator
        assert abs(Fraction(billed - untraced_usd) - explained) <= Fraction(PICO) / 2
    assert not alloc_by_cell                                                # nothing allocated outside a bill
    assert dict(got_key) == {k: v for k, v in expected_key.items()}         # spreading keeps every dollar
    invoice = con.execute("SELECT count(*) FROM invoice_costs WHERE cost_usd_invoice IS DISTINCT FROM "
                          "coalesce(input_cost_usd_invoice, 0) + coalesce(output_cost_usd_invoice, 0) "
                          "AND cost_usd_invoice IS NOT NULL").fetchone()[0]
    assert invoice == 0


# --- loading again changes nothing ----------------------------------------------------------------------
def test_loading_the_same_export_twice_changes_nothing(tmp_path):
    con = connect(tmp_path / "s.duckdb")
    insert(con, [call(1, date(2026, 11, 16), provider="openai", model="o4-mini", uncached_input=50_000)], [])
    ingest(con, [SAMPLE_BILLING])
    prerequisites(con, None)
    build_reconciliation(con)
    before = con.execute("SELECT * FROM reconciliation").fetchall()
    assert before and con.execute("SELECT count(*) FROM untraced_costs").fetchone()[0] > 0
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in SAMPLE_BILLING.iterdir():
        shutil.copy(f, copy / f"again-{f.name}")
    ingest(con, [SAMPLE_BILLING])                     # same bytes: not read again
    ingest(con, [SAMPLE_BILLING], force=True)         # read again: every line a duplicate
    ingest(con, [copy])                               # the same exports under other names
    build_reconciliation(con)
    assert con.execute("SELECT * FROM reconciliation").fetchall() == before
    con.close()
