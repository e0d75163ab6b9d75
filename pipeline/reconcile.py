"""Billing reconciliation and invoice-true allocation: the bill against the traces, and the bill down to calls.

`build_reconciliation` is a build stage; it runs after `call_costs` and `call_workload` exist and leaves:

- `reconciliation`: per (provider, model, UTC day, token type) billed vs traced tokens and money, coverage,
  a status, the likely `cause` of a gap (`CAUSES`) and an explanation citing the numbers
  (`pipeline/sql/reconciliation.sql`; columns documented in docs/reconciliation.md);
- `allocated_costs` / `untraced_costs` / view `invoice_costs`: each cell's billed USD shared out to its
  calls in proportion to their tokens of the same type, exactly to 1e-12 USD, and what no call explains
  (`pipeline/sql/allocation.sql`).

Tolerances are `ReconcileSettings`. Where no priced call shows a cell's list price (traffic no trace
holds), the price book or genai-prices gives it (`list_prices_table`), so an untraced cell can still be
told apart from a price change.
"""

from __future__ import annotations

from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa

from phaselens.models.pricebook import PriceBook
from phaselens.models.reconcile import ReconcileSettings

from .errors import StoreError
from .pricing import UNIT_PRICE, price_rows
from .store import relation_exists, sql_text, transaction

CAUSES: tuple[str, ...] = (
    "ok",
    "untraced_traffic",  # billed more than traced at the list price: traffic with no traces
    "price_mismatch",  # tokens agree, money does not: the billed unit price differs from the list price
    "missing_cache_tokens",  # input agrees in total, but traces count cached tokens as uncached input
    "time_zone_or_bucket_edge",  # a gap matched by the opposite gap on the neighbouring day
    "unbilled_traffic",  # traced more than billed: calls no bill line covers
    "unconverted_currency",  # non-USD lines without a conversion rate: the billed USD is incomplete
    "not_recorded_by_source",  # the instrumentation loses these counts (source_gaps): cache tokens, output off by one
)
STATUSES: tuple[str, ...] = (
    "ok", "not_traced", "not_billed", "billed_above_traced", "traced_above_billed", "cost_differs", "cost_unknown",
)
# price_table columns that are reconciliation token types (cache_write is the 5-minute write)
LIST_PRICE_TOKEN_TYPES: tuple[str, ...] = ("uncached_input", "cache_read", "cache_write", "output")
LIST_PRICES_SCHEMA = pa.schema(
    [("provider", pa.string()), ("model", pa.string()), ("day", pa.date32()), ("token_type", pa.string()),
     ("usd_per_token", UNIT_PRICE)]
)
REQUIRED_TABLES = ("call_costs", "call_workload")
TEMP_TABLES = ("rc_line_days", "rc_billed", "rc_call_cells")
CELL_TABLES = ("reconciliation_traced", "reconciliation_sources")
"""The traced side of the cells, per (provider, model, UTC day[, token type]): kept by the build, so an incremental
build reads a neighbour day's cells from them instead of recounting its calls."""


def _settings_table(con: duckdb.DuckDBPyConnection, settings: ReconcileSettings) -> None:
    values = settings.model_dump()
    values["min_gap_usd"] = float(values["min_gap_usd"])  # compared with DOUBLE gap ratios only
    cols = ", ".join(f"${k} AS {k}" for k in values)
    con.execute(f"CREATE OR REPLACE TABLE reconcile_settings AS SELECT {cols}", values)


def _billed_keys(con: duckdb.DuckDBPyConnection, days: str | None = None) -> list[tuple[str, str, str | None, date]]:
    """(provider, model, a raw model name, UTC day) of every day a token billing line with a model touches (only
    the days in the `dkey` column of the relation `days`, when given)."""
    only = f"WHERE CAST(d AS DATE) IN (SELECT dkey FROM {days})" if days else ""
    return con.execute(
        f"""
        SELECT provider, model, min(model_raw), CAST(d AS DATE)
        FROM (SELECT provider, model, model_raw, unnest(generate_series(CAST(CAST(period_start AS DATE) AS TIMESTAMP),
                                                                         period_end, INTERVAL 1 DAY)) AS d
              FROM raw_billing_lines WHERE model IS NOT NULL AND token_type <> 'other')
        {only}
        GROUP BY provider, model, CAST(d AS DATE)
        ORDER BY ALL
        """
    ).fetchall()


def list_prices_table(con: duckdb.DuckDBPyConnection, pricebook: PriceBook | None = None,
                      days: str | None = None) -> pa.Table:
    """USD per token of each billed (provider, model, UTC day, token type): the price book, else genai-prices.
    `days`: a relation whose `dkey` column names the only days to look up (an incremental build's)."""
    book = pricebook or PriceBook()
    rows: list[dict[str, Any]] = []
    for provider, model, model_raw, day in _billed_keys(con, days):
        # the raw name first: some catalogues (Bedrock) know a model only by its full id
        candidates = [r for r in price_rows(book, provider, model, model_raw, day)
                      if r["window_start_s"] == 0 and r["tier_start_input_tokens"] == 0]
        if not candidates:
            continue
        prices = candidates[0]
        for token_type in LIST_PRICE_TOKEN_TYPES:
            if prices.get(token_type) is not None:
                rows.append({"provider": provider, "model": model, "day": day, "token_type": token_type,
                             "usd_per_token": prices[token_type]})
    return pa.Table.from_pylist(rows, schema=LIST_PRICES_SCHEMA)


def build_reconciliation(
    con: duckdb.DuckDBPyConnection, settings: ReconcileSettings | None = None, pricebook: PriceBook | None = None,
    list_price_days: str | None = None, allocate_days: str | None = None, keep_days: str | None = None,
) -> None:
    """Rebuild `reconciliation`, `allocated_costs`, `untraced_costs` and `invoice_costs` (USD, exact DECIMAL).

    `list_price_days`: look list prices up for these days only (a relation with a `dkey` column); the cells of
    other days then lack them, so an incremental build keeps only the cells of those days' neighbours.
    `allocate_days`: share out the billed money of these days' cells only (a relation with a `dkey` column);
    `untraced_costs` of other days then counts nothing allocated.
    `keep_days`: days (a relation with a `dkey` column) whose traced side (`CELL_TABLES`) is read from the store's
    tables (`main`) instead of from `raw_calls`, which then holds no call of those days."""
    missing = [t for t in REQUIRED_TABLES if not relation_exists(con, t)]
    if missing:
        raise StoreError(f"reconciliation needs {', '.join(missing)}, which the store lacks",
                         "run `phaselens build` (it prices the calls and assigns workloads first)")
    settings = settings or ReconcileSettings()
    con.register("reconcile_list_prices", list_prices_table(con, pricebook, list_price_days))
    try:
        with transaction(con):  # inside `phaselens build`, the build's transaction covers this stage
            _settings_table(con, settings)
            con.execute(sql_text("reconciliation_cells"))
            if keep_days:
                for t in CELL_TABLES:
                    con.execute(f"INSERT INTO {t} BY NAME SELECT * FROM main.{t} WHERE day IN (SELECT dkey FROM {keep_days})")
            con.execute(sql_text("reconciliation"))
            if allocate_days:
                con.execute(f"DELETE FROM rc_call_cells WHERE day NOT IN (SELECT dkey FROM {allocate_days})")
            con.execute(sql_text("allocation"))
            for name in TEMP_TABLES:
                con.execute(f"DROP TABLE IF EXISTS {name}")
    finally:
        con.unregister("reconcile_list_prices")


def _utc(value: date | datetime | None) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.combine(value, time(0))


def reconcile_rows(
    con: duckdb.DuckDBPyConnection, since: date | datetime | None = None, until: date | datetime | None = None,
) -> tuple[list[str], list[tuple]]:
    """The `reconciliation` rows whose UTC day overlaps [since, until), ordered by provider, model, day, token type."""
    if not relation_exists(con, "reconciliation"):
        raise StoreError("the store has no reconciliation yet", "run `phaselens build` after ingesting billing exports")
    from .read_model import RECONCILIATION_SQL

    cur = con.execute(RECONCILIATION_SQL, {"since": _utc(since), "until": _utc(until)})
    return [d[0] for d in cur.description], cur.fetchall()


TABLE_COLUMNS = ("provider", "model", "day", "token_type", "billed_tokens", "traced_tokens", "billed_cost_usd",
                 "estimated_cost_usd", "token_coverage", "status", "cause")
"""The columns `phaselens reconcile --format table` shows (json and csv carry every column)."""
