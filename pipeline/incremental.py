"""Build state and the plan of an incremental build (docs/operations.md, "What a run recomputes").

`build_state` (one row) holds the hash of everything a build's answers depend on besides the raw rows (the
configuration without `[run]`, the latency profiles' bytes, the build SQL and the package version) and when
the last build ended; `build_loads` holds, per raw source (`raw_calls`, `raw_billing_lines`), the ledger
load ids whose rows that build already saw: the high-water mark; `build_source_gaps` what `source_gaps` said
then (reconciliation reads it). A build compares them with the store:

- no state yet, another hash, or `full=True`: a full build (every table re-derived from every raw row);
- otherwise the rows of loads not yet built name the touched UTC days (a call's day is the UTC date it
  started; a call spanning midnight touches every day it runs in), widened by what depends on them (see
  `affected_days`), and only those days are recomputed.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from datetime import date, timedelta
from importlib import metadata, resources

import duckdb

from phaselens.models.config import Config

BUILD_STATE_DDL = """
CREATE TABLE IF NOT EXISTS build_state (
  config_hash VARCHAR,        -- sha256 of the configuration (without [run], [spark]), profiles, build SQL and version
  built_at TIMESTAMP,         -- UTC, when the last build committed
  full_build BOOLEAN,         -- whether the last build re-derived everything
  days_rebuilt BIGINT         -- UTC days the last build recomputed
);
CREATE TABLE IF NOT EXISTS build_loads (
  source VARCHAR,             -- raw_calls | raw_billing_lines
  load_id VARCHAR,            -- a ledger load id whose rows a build has seen
  built_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS build_source_gaps (
  source VARCHAR,             -- source_gaps as of the last build: what reconciliation read of it
  instrumentation VARCHAR,
  gap_kinds VARCHAR
);
"""

SOURCES = ("raw_calls", "raw_billing_lines")
SOURCE_GAPS_VIEW = "CREATE OR REPLACE VIEW source_gaps AS\n"
LIVE_GAP_PARTS = "source_gap_parts(NULL, NULL, true)"


def source_gaps_sql(parts: str = "main.source_gap_days") -> str:
    """The query of the `source_gaps` view (pipeline/sql/source_gaps.sql) over the per-day counts in `parts`
    instead of those of every call now loaded: the build reads the gaps from the counts it keeps."""
    from .store import sql_text

    text = sql_text("source_gaps")
    body = text[text.index(SOURCE_GAPS_VIEW) + len(SOURCE_GAPS_VIEW):].strip().rstrip(";")
    assert body.count(LIVE_GAP_PARTS) == 1, "source_gaps.sql: the view reads the counts of every call once"
    return body.replace(LIVE_GAP_PARTS, parts)


def gap_kinds_sql() -> str:
    """What reconciliation reads of `source_gaps` (the gaps it names per cell); kept in `build_source_gaps`."""
    return f"SELECT source, instrumentation, CAST(gap_kinds AS VARCHAR) FROM ({source_gaps_sql()})"

CALL_DAY_SQL = "CAST(started_at AS DATE)"
"""The partition key of every per-call built table: the UTC day the call started (NULL when unknown)."""


@dataclass
class Plan:
    """What a build will do: everything (`full`, with the reason) or the touched days of the new loads."""

    full: bool
    reason: str
    config_hash: str
    new_loads: dict[str, list[str]] = field(default_factory=dict)
    days: list[date | None] = field(default_factory=list)  # the days whose rows are recomputed


def config_hash(config: Config) -> str:
    """The hash of everything besides the raw rows that a build's answers depend on."""
    h = hashlib.sha256(config.model_dump_json(exclude={"run", "spark"}).encode())
    for p in config.latency.profiles:
        try:
            h.update(p.csv.read_bytes())
        except OSError:
            h.update(b"unreadable profile " + str(p.csv).encode())
    sql = resources.files("phaselens.pipeline").joinpath("sql")
    for f in sorted(sql.iterdir(), key=lambda f: f.name):
        if f.name.endswith(".sql"):
            h.update(f.name.encode() + f.read_bytes())
    try:
        h.update(metadata.version("phaselens").encode())
    except metadata.PackageNotFoundError:
        pass
    return h.hexdigest()


def ensure_state(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(BUILD_STATE_DDL)


def _has(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return bool(con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = ? AND schema_name = 'main'", [name]
    ).fetchone()[0])


def caching_reach_days(config: Config) -> int | None:
    """Whole days a cache lifetime reaches (None: unlimited, so reuse depends on all history)."""
    lifetimes = config.caching.lifetimes_s
    if any(v is None for v in lifetimes):
        return None
    return max(1, math.ceil(max(lifetimes) / 86400))


def plan(con: duckdb.DuckDBPyConnection, config: Config, full: bool = False) -> Plan:
    """The plan of the next build over this store and configuration."""
    ensure_state(con)
    digest = config_hash(config)
    if full:
        return Plan(True, "--full asked for", digest)
    row = con.execute("SELECT config_hash FROM build_state").fetchall()
    if not row:
        return Plan(True, "no earlier build", digest)
    if row[0][0] != digest:
        return Plan(True, "the configuration (or phaselens) changed since the last build", digest)
    missing = [t for t in ("call_attribution", "call_timing", "latency_fits", "source_gap_days") if not _has(con, t)]
    if missing:
        return Plan(True, f"built tables missing ({', '.join(missing)})", digest)
    if caching_reach_days(config) is None:
        return Plan(True, "an unlimited cache lifetime makes prefix reuse depend on all history", digest)
    new: dict[str, list[str]] = {}
    for source in SOURCES:
        new[source] = [r[0] for r in con.execute(
            f"SELECT DISTINCT load_id FROM {source} r WHERE NOT EXISTS "
            "(SELECT 1 FROM build_loads b WHERE b.source = ? AND b.load_id = r.load_id) ORDER BY 1", [source]
        ).fetchall()]
    return Plan(False, "incremental", digest, new_loads=new)


def record(con: duckdb.DuckDBPyConnection, p: Plan, days: int) -> None:
    """Write the state of the build that is about to commit (inside its transaction)."""
    if p.full:
        con.execute("DELETE FROM build_loads")
        for source in SOURCES:
            con.execute(f"INSERT INTO build_loads SELECT DISTINCT ?, load_id, now() AT TIME ZONE 'UTC' FROM {source}",
                        [source])
    else:
        for source, ids in p.new_loads.items():
            if ids:
                con.execute("INSERT INTO build_loads SELECT ?, unnest(?::VARCHAR[]), now() AT TIME ZONE 'UTC'",
                            [source, ids])
    if p.full:
        con.execute("DELETE FROM build_source_gaps")
        con.execute(f"INSERT INTO build_source_gaps {gap_kinds_sql()}")
    con.execute("DELETE FROM build_state")
    con.execute("INSERT INTO build_state VALUES (?, now() AT TIME ZONE 'UTC', ?, ?)", [p.config_hash, p.full, days])


# ---- the incremental build ------------------------------------------------------------------------------
SCRATCH = "phaselens_scratch"
NULL_DAY = "DATE '0001-01-01'"

# Built tables recomputed per day: the table, and how its rows map to a day ("call": by call_id, else a day column).
SLICED: dict[str, tuple[str, ...]] = {
    "workloads rules": ("call_workload",),
    "concurrency": ("call_concurrency",),
    "latency": ("call_timing", "latency_fits"),
    "costs": ("call_unit_prices", "call_costs", "deployment_costs"),
    "caching reuse": ("call_prefix_reuse",),
    "caching days": ("caching_days",),
    "attribution": ("call_attribution",),
    "whatif": ("whatif_calls",),
}
RECONCILED = ("reconciliation", "allocated_costs", "untraced_costs")
ATTRIBUTION_INPUTS = ("call_workload", "call_timing", "call_concurrency", "call_costs")
"""The per-call tables call_attribution.sql joins: computed on the same context as it, so kept for it."""
BY_DAY_COLUMN = {"latency_fits", "whatif_calls", "caching_days", *RECONCILED}
BY_HOUR_COLUMN = {"deployment_costs"}
# per call, with the call's start: spliced by the start's day (which skips the other days' row groups)
BY_START_COLUMN = {"call_attribution", "call_workload", "call_unit_prices", "call_costs", "call_concurrency",
                   "call_timing", "call_prefix_reuse"}
CACHING_INPUTS = ("call_workload", "call_unit_prices", "call_costs")
"""The store's per-call tables the caching stages read: narrowed to their context's days (`Scratch.narrow`)."""

# deployment_costs: the hours of a deployment's period without a call are idle rows; the period runs from its
# first to its last call hour unless active_from/active_to fix it, so a new day can widen it anywhere.
DEPLOYMENT_SPAN_SQL = """
WITH span AS (
  SELECT d.deployment,
         coalesce(CAST(d.active_from AS TIMESTAMP), min(c.hour) FILTER (WHERE c.calls > 0)) AS first_hour,
         coalesce(CAST(d.active_to AS TIMESTAMP) + INTERVAL 23 HOUR, max(c.hour) FILTER (WHERE c.calls > 0)) AS last_hour
  FROM pricing_deployments d
  LEFT JOIN main.deployment_costs c ON c.deployment = d.deployment
  GROUP BY d.deployment, d.active_from, d.active_to
)
"""
DEPLOYMENT_GAPS_SQL = DEPLOYMENT_SPAN_SQL + """,
hours AS (
  SELECT deployment, unnest(range(first_hour, last_hour + INTERVAL 1 HOUR, INTERVAL 1 HOUR)) AS hour
  FROM span WHERE first_hour IS NOT NULL AND last_hour IS NOT NULL
)
INSERT INTO main.deployment_costs BY NAME
SELECT h.deployment, d.provider, d.gpu_type, d.gpus, d.usd_per_gpu_hour, d.idle AS idle_policy, h.hour,
       0 AS calls, 0 AS untimed_calls, 0.0 AS gpu_s, 0.0 AS busy_s, d.hour_cost_usd AS cost_usd,
       CAST(0 AS DECIMAL(38, 12)) AS allocated_usd, CAST(d.hour_cost_usd AS DECIMAL(38, 12)) AS idle_usd
FROM hours h
JOIN pricing_deployments d ON d.deployment = h.deployment
WHERE NOT EXISTS (SELECT 1 FROM main.deployment_costs c WHERE c.deployment = h.deployment AND c.hour = h.hour)
"""
DEPLOYMENT_OUTSIDE_SQL = DEPLOYMENT_SPAN_SQL + """
DELETE FROM main.deployment_costs c
WHERE NOT EXISTS (SELECT 1 FROM span s WHERE s.deployment = c.deployment
                  AND c.hour BETWEEN s.first_hour AND s.last_hour)
"""


def _days_sql(reach: int) -> str:
    return f"""
CREATE OR REPLACE TEMP TABLE incr_touched AS
SELECT DISTINCT CASE WHEN started_at IS NULL THEN {NULL_DAY} ELSE d END AS dkey
FROM (
  SELECT started_at,
         unnest(CASE WHEN started_at IS NULL THEN [NULL::DATE]
                     ELSE list_transform(range(0, greatest(coalesce(date_diff('day', CAST(started_at AS DATE),
                            CAST(ended_at AS DATE)), 0), 0) + 1), lambda k: CAST(started_at AS DATE) + CAST(k AS INTEGER))
                END) AS d
  FROM (SELECT started_at, ended_at FROM main.raw_calls WHERE load_id IN (SELECT load_id FROM incr_loads)
        UNION ALL  -- the rows these loads replaced (docs/store.md, raw_calls_replaced): their old days change too
        SELECT started_at, ended_at FROM main.raw_calls_replaced WHERE load_id IN (SELECT load_id FROM incr_loads))
);
-- every stage but caching: the touched days themselves
CREATE OR REPLACE TEMP TABLE incr_days AS SELECT dkey FROM incr_touched;
-- caching reuse: a touched day and those within the caching reach either side (reuse looks back, first writes
-- look forward), read with the calls within the longest cache lifetime of them; calls without a start time have
-- no reuse
CREATE OR REPLACE TEMP TABLE incr_cache_days AS
SELECT DISTINCT CASE WHEN dkey = {NULL_DAY} THEN dkey ELSE dkey + CAST(k AS INTEGER) END AS dkey
FROM incr_touched, range(-{reach}, {reach} + 1) t(k);
"""


def day_ranges(days: list[date]) -> list[tuple[date, date]]:
    """Days as [start, end) ranges of consecutive days, so a filter on a sorted column reads few row groups."""
    ranges: list[list[date]] = []
    for d in sorted(set(days)):
        if ranges and ranges[-1][1] == d:
            ranges[-1][1] = d + timedelta(days=1)
        else:
            ranges.append([d, d + timedelta(days=1)])
    return [(a, b) for a, b in ranges]


def started_within(days: list[date | None], in_flight: bool = False, alias: str = "", margin_s: int = 0) -> str:
    """The condition selecting the calls that started on `days` (None: the calls without a start), or with
    `in_flight` also those running during one of them, written with literal bounds on `started_at`/`ended_at`
    so DuckDB skips the row groups outside them (a store is loaded in about time order). `margin_s` widens
    each run of days by that many seconds either side."""
    q = f"{alias}." if alias else ""
    parts = []
    for a, b in day_ranges([d for d in days if d is not None]):
        lo, hi = f"TIMESTAMP '{a}'", f"TIMESTAMP '{b}'"
        if margin_s:
            lo, hi = f"({lo} - INTERVAL {int(margin_s)} SECOND)", f"({hi} + INTERVAL {int(margin_s)} SECOND)"
        if in_flight:
            parts.append(f"({q}started_at < {hi} AND ({q}started_at >= {lo} OR {q}ended_at >= {lo}))")
        else:
            parts.append(f"({q}started_at >= {lo} AND {q}started_at < {hi})")
    if None in days:
        parts.append(f"{q}started_at IS NULL")
    return " OR ".join(parts) or "false"


def rows_within(macro: str, days: list[date | None], columns: str = "*") -> str:
    """A query of `columns` of a period macro's rows (`requests_in`, `invoice_costs_in`: (since, until, unstarted))
    for the calls that started on `days` (None: the calls without a start). Those macros filter each table they
    read on its own start, so only those days' row groups are read."""
    parts = [f"SELECT {columns} FROM {macro}(TIMESTAMP '{a}', TIMESTAMP '{b}', false)"
             for a, b in day_ranges([d for d in days if d is not None])]
    if None in days:  # an empty range and the calls without a start
        parts.append(f"SELECT {columns} FROM {macro}(TIMESTAMP '0001-01-01', TIMESTAMP '0001-01-01', true)")
    return " UNION ALL ".join(parts) or f"SELECT {columns} FROM {macro}(NULL, NULL, false) WHERE false"


class Scratch:
    """Run a stage's unchanged SQL on the context calls: a schema first in the search path holds `raw_calls`
    (the context) and receives the stage's tables, which are then spliced into main for the recomputed days.

    `raw_calls` of the schema is a view over one of two contexts: the recomputed days with every call in flight
    during one of them (concurrency counts the calls in flight, whenever they started), copied into a temporary
    table (in memory, outside the store's transaction: the per-call stages read every column of it), or the
    caching stages' days and their reach, a temporary view over the store's calls (`view_context`).

    Inside the schema, DuckDB's optimistic writes are off: a stage's tables are then kept in memory until the splice
    copies their rows into main, instead of being compressed and written to the store file first (they are dropped
    before the build commits, so writing them was work done twice: it cost a day's build about a second at 10 M
    calls). Beyond the build's memory limit they spill to its temporary directory, as temporary tables do. The
    splice writes main's tables as usual."""

    TOUCHED, CACHE = "incr_context", "incr_cache_context"  # the temp table and the temp view of the two contexts
    ASIDE = "__aside"  # the suffix of a scratch table set aside by `splice`

    def __init__(self, con: duckdb.DuckDBPyConnection, days: list[date | None]):
        self.con, self.days = con, days
        self.path, self.optimistic = con.execute(
            "SELECT current_setting('search_path'), current_setting('enable_optimistic_write')").fetchone()
        self.viewing = False
        self.narrowed: tuple[str, ...] = ()

    def __enter__(self) -> Scratch:
        self.con.execute(f"CREATE SCHEMA {SCRATCH}")
        if self.days:  # no day: no context (a build of billing lines alone reconciles from its own)
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE {self.TOUCHED} AS SELECT * FROM main.raw_calls WHERE "
                             + started_within(self.days, in_flight=True))
            self.context(self.TOUCHED)
        return self

    def context(self, table: str, days: list[date | None] | None = None) -> None:
        """Make `raw_calls` of the schema the calls of temp table `table` (those that started on `days`, if given)."""
        self.release()
        where = f" WHERE {started_within(days)}" if days is not None else ""
        self.con.execute(f"CREATE VIEW {SCRATCH}.raw_calls AS SELECT * FROM temp.main.{table}{where}")
        self.viewing = True

    def view_context(self, table: str, days: list[date | None], margin_s: int = 0) -> None:
        """Make the calls that started on `days` (widened by `margin_s` seconds either side) the context: temp view
        `table` over the store's calls, with literal bounds, so only those row groups are read (the caching stages
        read few of its columns: a copy of every column would cost more than it saves)."""
        self.con.execute(f"CREATE OR REPLACE TEMP VIEW {table} AS SELECT * FROM main.raw_calls "
                         f"WHERE {started_within(days, margin_s=margin_s)}")
        self.context(table)

    def release(self) -> None:
        """Drop the context view, so a stage can make a `raw_calls` of its own (reconciliation does)."""
        if self.viewing:
            self.con.execute(f"DROP VIEW {SCRATCH}.raw_calls")
            self.viewing = False

    def inside(self) -> None:
        self.con.execute(f"SET search_path = '{SCRATCH},main'")
        self.con.execute("SET enable_optimistic_write = false")

    def outside(self) -> None:
        self.con.execute(f"SET search_path = '{self.path or 'main'}'")
        self.con.execute(f"SET enable_optimistic_write = {str(bool(self.optimistic)).lower()}")

    def splice(self, tables: tuple[str, ...], days: str = "incr_days", keep: tuple[str, ...] = (),
               started: list[date | None] | None = None) -> None:
        """Replace the recomputed days' rows of each main table by the scratch rows of those days (`days`, a temp
        table of day keys; `started`, the same days as a list, by which the tables with the call's start are
        spliced; default: this schema's days); the scratch tables named in `keep` are set aside for a later
        stage (`restore`), the others dropped."""
        started = self.days if started is None else started
        self.outside()
        for t in tables:
            if t in BY_HOUR_COLUMN:
                key = f"CAST(hour AS DATE)"
                self.con.execute(f"DELETE FROM main.{t} WHERE {key} IN (SELECT dkey FROM {days})")
                self.con.execute(f"INSERT INTO main.{t} BY NAME SELECT * FROM {SCRATCH}.{t} "
                                 f"WHERE {key} IN (SELECT dkey FROM {days})")
            elif t in BY_START_COLUMN:  # the days' calls (a retired call's old day is touched too)
                self.con.execute(f"DELETE FROM main.{t} WHERE {started_within(started)}")
                self.con.execute(f"INSERT INTO main.{t} BY NAME SELECT * FROM {SCRATCH}.{t} "
                                 f"WHERE {started_within(started)}")
            elif t in BY_DAY_COLUMN:
                key = f"coalesce(day, {NULL_DAY})"
                self.con.execute(f"DELETE FROM main.{t} WHERE {key} IN (SELECT dkey FROM {days})")
                self.con.execute(f"INSERT INTO main.{t} BY NAME SELECT * FROM {SCRATCH}.{t} "
                                 f"WHERE {key} IN (SELECT dkey FROM {days})")
            else:
                raise AssertionError(f"{t}: no day key to splice it by")
            if t in keep:
                self.con.execute(f"ALTER TABLE {SCRATCH}.{t} RENAME TO {t}{self.ASIDE}")
            else:
                self.con.execute(f"DROP TABLE {SCRATCH}.{t}")

    def narrow(self, tables: tuple[str, ...], days: list[date | None], margin_s: int = 0) -> None:
        """Make each of the store's per-call `tables` (which keep the call's start) a view of the schema over the
        rows of the calls that started on `days` (widened by `margin_s` seconds either side), so a stage on those
        days reads their row groups only."""
        for t in tables:
            self.con.execute(f"CREATE OR REPLACE VIEW {SCRATCH}.{t} AS SELECT * FROM main.{t} "
                             f"WHERE {started_within(days, margin_s=margin_s)}")
        self.narrowed = tables

    def widen(self) -> None:
        """Drop the views `narrow` made."""
        for t in self.narrowed:
            self.con.execute(f"DROP VIEW {SCRATCH}.{t}")
        self.narrowed = ()

    def restore(self, tables: tuple[str, ...]) -> None:
        """Bring back the scratch tables `splice` set aside: a stage on the same context reads them, not the whole
        store's (their rows for the recomputed days' calls are the ones spliced into main)."""
        for t in tables:
            self.con.execute(f"ALTER TABLE {SCRATCH}.{t}{self.ASIDE} RENAME TO {t}")

    def drop(self, tables: tuple[str, ...]) -> None:
        for t in tables:
            self.con.execute(f"DROP TABLE {SCRATCH}.{t}")

    def __exit__(self, *exc) -> None:
        self.outside()
        if exc[0] is None:
            self.release()
            left = [r[0] for r in self.con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE schema_name = ?", [SCRATCH]).fetchall()]
            for t in left:
                self.con.execute(f"DROP TABLE {SCRATCH}.{t}")
            self.con.execute(f"DROP SCHEMA {SCRATCH}")
            self.con.execute(f"DROP TABLE IF EXISTS temp.main.{self.TOUCHED}")
            self.con.execute(f"DROP VIEW IF EXISTS temp.main.{self.CACHE}")


# reconciliation: a cell (provider, model, day, token type) reads the billing lines of its day, the calls of its
# day and the provider's billed range (whether its calls are covered), and its cause reads the cells one day either
# side; so touched days (new calls, the days of new billing lines, days entering or leaving a billed range) are
# recomputed with their neighbours, from the touched days' calls and the traced side the store keeps of the other
# days within two of them (reconcile.CELL_TABLES: a day not touched has the same calls and billed range). The
# billing lines are few: all are read.
RC_CALL_COLUMNS = ("call_id", "started_at", "provider", "model", "uncached_input_tokens", "cache_read_tokens",
                   "cache_write_tokens", "output_tokens", "source", "instrumentation", "streaming", "workload_hint",
                   "service", "team", "project")
"""The columns of raw_calls that reconciliation.sql and allocation.sql read."""
WHATIF_REQUEST_COLUMNS = ("workload", "call_id", "started_at", "operation", "provider", "model", "status",
                          "uncached_input_tokens", "cache_read_tokens", "cache_write_tokens", "cache_write_1h_tokens",
                          "output_tokens", "ttft_s", "decode_s", "itl_s", "e2e_s", "timing_source", "cost_usd", "priced")
"""The columns of `requests` that whatif_calls.sql reads (the touched days' are copied for it, not the wide ones)."""


RC_CONTEXT = "incr_rc_context"  # the temp table of the reconciliation context's calls
RC_CALL_INPUTS = ("call_costs",)  # the per-call tables reconciliation reads
RC_DAYS_SQL = """
CREATE OR REPLACE TEMP TABLE incr_rc_days AS
SELECT DISTINCT dkey + CAST(k AS INTEGER) AS dkey FROM incr_rc_touched, range(-1, 2) t(k);
CREATE OR REPLACE TEMP TABLE incr_rc_context_days AS
SELECT DISTINCT dkey + CAST(k AS INTEGER) AS dkey FROM incr_rc_touched, range(-2, 3) t(k);
-- the context days that are not touched: their cells' traced side is the store's (reconcile.CELL_TABLES)
CREATE OR REPLACE TEMP TABLE incr_rc_kept_days AS
SELECT dkey FROM incr_rc_context_days EXCEPT SELECT dkey FROM incr_rc_touched;
"""


def _rc_context(con: duckdb.DuckDBPyConnection) -> None:
    """The touched cells' neighbour days and context days, and the touched days' calls as the scratch
    `raw_calls`: a view over a temporary copy (selected with literal bounds, so only those days' row groups are
    read). The other context days' cells are read from the store's traced side, not from their calls."""
    con.execute(RC_DAYS_SQL)
    days = [d for (d,) in con.execute("SELECT dkey FROM incr_rc_touched").fetchall()]
    con.execute(f"CREATE OR REPLACE TEMP TABLE {RC_CONTEXT} AS SELECT {', '.join(RC_CALL_COLUMNS)} "
                f"FROM main.raw_calls WHERE {started_within(days)}")
    con.execute(f"CREATE OR REPLACE VIEW {SCRATCH}.raw_calls AS SELECT * FROM temp.main.{RC_CONTEXT}")
    for t in RC_CALL_INPUTS:  # the store's rows of those days' calls only
        con.execute(f"CREATE OR REPLACE VIEW {SCRATCH}.{t} AS SELECT * FROM main.{t} WHERE {started_within(days)}")


RC_TOUCHED_SQL = f"""
CREATE OR REPLACE TEMP TABLE incr_rc_touched AS
SELECT dkey FROM incr_days WHERE dkey <> {NULL_DAY}
UNION
SELECT CAST(unnest(generate_series(CAST(CAST(period_start AS DATE) AS TIMESTAMP),
                                   CAST(CAST(coalesce(period_end, period_start) AS DATE) AS TIMESTAMP),
                                   INTERVAL 1 DAY)) AS DATE)
FROM main.raw_billing_lines WHERE load_id IN (SELECT unnest($loads::VARCHAR[]))
"""
# in the context, reconciliation.sql's scope (providers with token lines or calls) must be the store's: a provider
# with billing lines, none of tokens, and calls only outside the context would drop out
RC_SCOPE_DIFFERS_SQL = f"""
SELECT count(*) FROM (
  SELECT DISTINCT provider FROM main.raw_calls c
  WHERE EXISTS (SELECT 1 FROM main.raw_billing_lines b WHERE b.provider = c.provider)
    AND NOT EXISTS (SELECT 1 FROM main.raw_billing_lines b WHERE b.provider = c.provider AND b.token_type <> 'other')
  EXCEPT SELECT provider FROM {SCRATCH}.raw_calls)
"""
# the billing lines alone say whether any provider is in scope only by its calls (a pass over billing lines, few)
RC_OTHER_ONLY_SQL = """
SELECT count(*) FROM (SELECT provider FROM main.raw_billing_lines GROUP BY provider HAVING bool_and(token_type = 'other'))
"""
RC_GAPS_CHANGED_SQL = """
SELECT count(*) FROM (
  (SELECT * FROM incr_source_gaps EXCEPT SELECT * FROM build_source_gaps)
  UNION ALL (SELECT * FROM build_source_gaps EXCEPT SELECT * FROM incr_source_gaps))
"""
# the days whose calls a provider's billed range (first to last billed day) newly covers or no longer covers
RC_RANGE_DAYS_SQL = f"""
WITH new AS (SELECT provider, min(day) AS f, max(day) AS l FROM {SCRATCH}.reconciliation
             WHERE billing_sources IS NOT NULL GROUP BY provider),
old AS (SELECT provider, min(day) AS f, max(day) AS l FROM main.reconciliation
        WHERE billing_sources IS NOT NULL GROUP BY provider),
moved AS (SELECT n.f AS nf, n.l AS nl, o.f AS of, o.l AS ol FROM new n FULL JOIN old o USING (provider)
          WHERE n.f IS DISTINCT FROM o.f OR n.l IS DISTINCT FROM o.l),
days AS (SELECT *, CAST(unnest(generate_series(CAST(least(nf, of) AS TIMESTAMP), CAST(greatest(nl, ol) AS TIMESTAMP),
                                               INTERVAL 1 DAY)) AS DATE) AS d FROM moved)
SELECT DISTINCT d FROM days
WHERE coalesce(d BETWEEN nf AND nl, false) <> coalesce(d BETWEEN of AND ol, false)
  AND d NOT IN (SELECT dkey FROM incr_rc_touched)
"""


RC_NEIGHBOUR_CAUSES_SQL = f"""
UPDATE main.untraced_costs u SET cause = r.cause
FROM {SCRATCH}.reconciliation r
WHERE r.provider = u.provider AND r.model IS NOT DISTINCT FROM u.model AND r.day = u.day
  AND r.token_type = u.token_type
  AND u.day IN (SELECT dkey FROM incr_rc_days) AND u.day NOT IN (SELECT dkey FROM incr_rc_touched)
"""


def reconcile_touched(scratch: Scratch, config: Config, billing_loads: list[str]) -> list[date] | None:
    """Reconciliation and invoice allocation of an incremental build, inside the `Scratch` of `recompute`: the
    cells of the touched days and their neighbours, or every cell when what a cell reads of the whole store
    changed (a source's gaps, the providers in scope). Returns the days whose invoice allocation it recomputed
    (None: every day)."""
    from .reconcile import CELL_TABLES, build_reconciliation

    con = scratch.con

    # source_gaps from the build's per-day counts (those of the touched days recounted), evaluated once: the
    # context's cells read this copy
    con.execute(f"CREATE OR REPLACE TABLE {SCRATCH}.source_gaps AS "
                f"SELECT source, instrumentation, gap_kinds FROM ({source_gaps_sql()})")
    con.execute(f"CREATE OR REPLACE TEMP TABLE incr_source_gaps AS "
                f"SELECT source, instrumentation, CAST(gap_kinds AS VARCHAR) FROM {SCRATCH}.source_gaps")
    gaps_changed = con.execute(RC_GAPS_CHANGED_SQL).fetchone()[0] > 0
    con.execute("DELETE FROM build_source_gaps; INSERT INTO build_source_gaps SELECT * FROM incr_source_gaps")
    con.execute("DROP TABLE incr_source_gaps")
    if gaps_changed:
        con.execute(f"DROP TABLE {SCRATCH}.source_gaps")
        build_reconciliation(con, config.reconcile, config.pricebook)
        return None
    con.execute(RC_TOUCHED_SQL, {"loads": billing_loads})
    whole = False
    for _ in range(2):  # a second pass when a billed range moved over days not yet touched
        _rc_context(con)
        if con.execute(RC_OTHER_ONLY_SQL).fetchone()[0] and con.execute(RC_SCOPE_DIFFERS_SQL).fetchone()[0]:
            whole = True
            break
        scratch.inside()
        try:
            build_reconciliation(con, config.reconcile, config.pricebook, list_price_days="incr_rc_context_days",
                                 allocate_days="incr_rc_touched", keep_days="incr_rc_kept_days")
        finally:
            scratch.outside()
        moved = con.execute(RC_RANGE_DAYS_SQL).fetchall()
        if not moved:
            break
        con.execute("INSERT INTO incr_rc_touched SELECT unnest(?::DATE[])", [[d for (d,) in moved]])
    else:
        raise AssertionError("a billed range moved again on the second pass")
    if not whole:
        # a neighbour day's lines and calls are unchanged, and so is its allocation: only its causes move
        for t, days in (("reconciliation", "incr_rc_days"), ("allocated_costs", "incr_rc_touched"),
                        ("untraced_costs", "incr_rc_touched"), *((t, "incr_rc_touched") for t in CELL_TABLES)):
            con.execute(f"DELETE FROM main.{t} WHERE day IN (SELECT dkey FROM {days})")
            con.execute(f"INSERT INTO main.{t} BY NAME SELECT * FROM {SCRATCH}.{t} "
                        f"WHERE day IN (SELECT dkey FROM {days})")
        con.execute(RC_NEIGHBOUR_CAUSES_SQL)
    allocated = [d for (d,) in con.execute("SELECT dkey FROM incr_rc_touched ORDER BY 1").fetchall()]
    con.execute(f"DROP VIEW IF EXISTS {SCRATCH}.invoice_costs")
    con.execute(f"DROP VIEW IF EXISTS {SCRATCH}.invoice_shares")
    con.execute(f"DROP MACRO TABLE IF EXISTS {SCRATCH}.invoice_costs_in")
    con.execute(f"DROP MACRO TABLE IF EXISTS {SCRATCH}.invoice_shares_in")
    for t in ("raw_calls", *RC_CALL_INPUTS):
        con.execute(f"DROP VIEW IF EXISTS {SCRATCH}.{t}")
    for t in (*RECONCILED, *CELL_TABLES, "reconcile_settings", "source_gaps"):
        con.execute(f"DROP TABLE IF EXISTS {SCRATCH}.{t}")
    for t in ("incr_rc_touched", "incr_rc_days", "incr_rc_context_days", "incr_rc_kept_days", RC_CONTEXT):
        con.execute(f"DROP TABLE IF EXISTS {t}")
    if whole:
        build_reconciliation(con, config.reconcile, config.pricebook)
        return None
    return allocated


def reuse_changed(con: duckdb.DuckDBPyConnection, days: list[date | None]) -> set[date]:
    """Of `days`, those whose calls' `call_prefix_reuse` rows the scratch schema's differ from the store's (read
    before the splice): a call's rows change when a call of another day within a cache lifetime changed."""
    if not [d for d in days if d is not None]:
        return set()
    cols = ", ".join(f'"{c}"' for (c,) in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE schema_name = ? AND table_name = 'call_prefix_reuse' "
        "ORDER BY column_index", [SCRATCH]).fetchall())
    cond = started_within([d for d in days if d is not None])
    new = f"SELECT {cols} FROM {SCRATCH}.call_prefix_reuse WHERE {cond}"
    old = f"SELECT {cols} FROM main.call_prefix_reuse WHERE {cond}"
    return {d for (d,) in con.execute(
        f"SELECT DISTINCT CAST(started_at AS DATE) FROM (({new} EXCEPT ALL {old}) UNION ALL ({old} EXCEPT ALL {new}))"
    ).fetchall()}


AUDIT = "phaselens_audit"
PER_CALL_AUDITS = frozenset({"call_attribution_once", "calls_priced_or_flagged", "no_negative_tokens_or_durations"})
"""Audits whose offending rows are calls (raw_calls, call_attribution): an incremental build runs them on the calls
of the recomputed days only, the rows it wrote."""
PER_SHARE_AUDITS = frozenset({"allocation_one_share_per_call"})
"""Audits whose offending rows are invoice shares (allocated_costs): run on the days whose billed money an
incremental build shared out again. The rest (allocation conserved, workload shares) are global."""


def _audit_scoped(con: duckdb.DuckDBPyConnection, names: list[str], views: dict[str, str]) -> None:
    """Run `names` with each of `views`' tables replaced by the rows its condition selects."""
    from .audits import run_audits

    path = con.execute("SELECT current_setting('search_path')").fetchone()[0]
    con.execute(f"CREATE SCHEMA {AUDIT}")
    try:
        for t, cond in views.items():
            con.execute(f"CREATE VIEW {AUDIT}.{t} AS SELECT * FROM main.{t} WHERE {cond}")
        con.execute(f"SET search_path = '{AUDIT},main'")
        run_audits(con, names)
    finally:
        con.execute(f"SET search_path = '{path or 'main'}'")
        try:
            con.execute(f"DROP SCHEMA {AUDIT} CASCADE")
        except duckdb.Error:  # a failed statement aborted the build's transaction: its rollback drops the schema
            pass


def audit_touched(con: duckdb.DuckDBPyConnection, rebuilt: list[date | None], allocated: list[date] | None) -> None:
    """The audits of an incremental build: the per-call ones over the calls of the days whose calls were
    recomputed (`rebuilt`), the per-share ones over the re-allocated days (`allocated`; None: every day), every other one
    over the whole store. A failure raises `AuditError` (the build rolls back)."""
    from .audits import audit_names, run_audits

    names = audit_names()
    if rebuilt:
        calls = started_within(rebuilt)  # the calls of those days (a retired call's old day is one of them)
        _audit_scoped(con, [n for n in names if n in PER_CALL_AUDITS], {"raw_calls": calls, "call_attribution": calls})
    shares = [n for n in names if n in PER_SHARE_AUDITS]
    if allocated is not None and shares:
        listed = ", ".join(f"DATE '{d}'" for d in allocated) or "NULL"
        _audit_scoped(con, shares, {"allocated_costs": f"day IN ({listed})"})
        names = [n for n in names if n not in PER_SHARE_AUDITS]
    run_audits(con, [n for n in names if n not in PER_CALL_AUDITS])


def recompute(con: duckdb.DuckDBPyConnection, config: Config, p: Plan,
              stage) -> tuple[list[date | None], list[date] | None]:
    """The incremental build's stages (inside the build's transaction). Returns the days recomputed, and the days
    whose calls' rows changed (`requests` or their invoice-true costs; None: every day), which a publish computes:
    a day recomputed only for the caching lever's reach keeps its calls' rows."""
    from . import build as b
    from .caching import build_caching
    from .latency import add_profile_only_fits, build_timing
    from .pricing import build_costs
    from .store import sql_text

    reach = caching_reach_days(config)
    assert reach is not None
    billing_loads = p.new_loads.get("raw_billing_lines", [])
    con.execute("CREATE OR REPLACE TEMP TABLE incr_loads AS SELECT unnest(?::VARCHAR[]) AS load_id",
                [p.new_loads.get("raw_calls", [])])
    con.execute(_days_sql(reach))

    def listed(table: str) -> list[date | None]:
        return [None if d == date(1, 1, 1) else d for (d,) in con.execute(
            f"SELECT dkey FROM {table} ORDER BY dkey").fetchall()]

    # the recomputed days (`incr_days`), those of the caching stages (a superset: `days`) and their context
    touched, days = listed("incr_days"), listed("incr_cache_days")
    changed = {d for d in touched if d is not None}
    allocated: list[list[date] | None] = [[]]

    def reconcile(s: Scratch) -> None:
        if touched:  # the touched days' counts of source_gaps, recounted
            con.execute(f"DELETE FROM main.source_gap_days WHERE coalesce(day, {NULL_DAY}) IN (SELECT dkey FROM incr_days)")
            con.execute("INSERT INTO main.source_gap_days BY NAME " + rows_within("source_gap_parts", touched))
        allocated[0] = reconcile_touched(s, config, billing_loads)

    def changed_days() -> list[date] | None:
        """The days whose calls' rows or invoice-true costs changed (None: every day), once reconciled."""
        return None if allocated[0] is None else sorted(changed | set(allocated[0]))

    def workload_days() -> list[date | None] | None:
        """The days whose `workloads` parts change: those, and the calls without a start if they were touched."""
        days_changed = changed_days()
        return None if days_changed is None else days_changed + ([None] if None in touched else [])

    stage("settings", lambda: b._settings_table(con, config))
    if days:
        sql, params = b.workload_rules_sql(config.workloads)
        sliced = {
            "workloads rules": lambda: con.execute(sql, params),
            "concurrency": lambda: con.execute(sql_text("call_concurrency")),
            "latency": lambda: build_timing(con, config.latency, profile_only_rows=False),
            "costs": lambda: build_costs(con, config.pricebook),
        }
        with Scratch(con, touched) as s:
            for name, fn in sliced.items():
                s.inside()
                stage(name, fn)
                s.splice(SLICED[name], keep=ATTRIBUTION_INPUTS)
                if name == "costs":
                    con.execute(DEPLOYMENT_OUTSIDE_SQL)
                    con.execute(DEPLOYMENT_GAPS_SQL)
            stage("latency profiles", lambda: add_profile_only_fits(con, config.latency))
            s.release()
            stage("reconcile", lambda: reconcile(s))
            s.inside()
            # a call's reuse reads the calls within the longest cache lifetime of it, either side
            lifetime = max(config.caching.lifetimes_s)
            s.view_context(s.CACHE, days, margin_s=lifetime)
            s.narrow(CACHING_INPUTS, days, margin_s=lifetime)
            stage("caching reuse", lambda: build_caching(con, config.caching, "reuse"))
            # the caching lever's sums of the touched days and of the neighbours whose calls' reuse changed (a
            # neighbour's other inputs, its calls, prices and fits, are unchanged), then the whole-store rows
            # summed over the days
            summed = sorted(set(touched) | reuse_changed(con, [d for d in days if d not in touched]),
                            key=lambda d: d or date(1, 1, 1))
            con.execute("CREATE OR REPLACE TEMP TABLE incr_cache_sum_days AS SELECT unnest(?::DATE[]) AS dkey",
                        [[d or date(1, 1, 1) for d in summed]])
            s.splice(SLICED["caching reuse"], "incr_cache_days", keep=SLICED["caching reuse"], started=days)
            s.inside()
            s.context(s.CACHE, summed)  # a subset of the reuse stage's context
            s.restore(SLICED["caching reuse"])  # its rows of these days' calls are the ones spliced
            stage("caching days", lambda: build_caching(con, config.caching, "days"))
            s.splice(SLICED["caching days"], "incr_cache_sum_days")
            s.drop(SLICED["caching reuse"])
            s.widen()
            stage("caching", lambda: build_caching(con, config.caching, "merge"))
            s.inside()
            s.context(s.TOUCHED)
            s.restore(ATTRIBUTION_INPUTS)  # this context's per-call rows, not the whole store's
            stage("attribution", lambda: con.execute(sql_text("call_attribution")))
            s.splice(SLICED["attribution"])
            s.drop(ATTRIBUTION_INPUTS)
            stage("workloads", lambda: b.build_workloads(con, workload_days()))
            # the what-if picks per (workload, day): the recomputed days' requests are all it reads
            con.execute(f"CREATE VIEW {SCRATCH}.requests AS "
                        + rows_within("requests_in", touched, ", ".join(WHATIF_REQUEST_COLUMNS)))
            s.inside()
            stage("whatif", lambda: con.execute(sql_text("whatif_calls"), {"cap": config.whatif.sample_calls_per_day}))
            con.execute(f"DROP VIEW {SCRATCH}.requests")
            s.splice(SLICED["whatif"])
    elif any(p.new_loads.values()):  # billing lines alone: the invoice side, and `workloads` that reads it
        with Scratch(con, []) as s:
            stage("reconcile", lambda: reconcile(s))
        stage("workloads", lambda: b.build_workloads(con, workload_days()))
    if days or any(p.new_loads.values()):
        stage("audits", lambda: audit_touched(con, touched if days else [], allocated[0]))
    for t in ("incr_loads", "incr_touched", "incr_days", "incr_cache_days", "incr_cache_sum_days"):
        con.execute(f"DROP TABLE IF EXISTS {t}")
    return days, changed_days()
