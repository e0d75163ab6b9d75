"""Build: derive everything from the raw tables, in one transaction, idempotently.

Stages, in order (each leaves one or more tables; SQL in `pipeline/sql/`):
1. `call_workload`     workload per call from the configured rules (default: feature tag, then service)
2. `call_concurrency`  calls of the same model in flight when each call started
3. `call_timing`       measured timing, or the latency model's estimate (`latency_fits`)
4. `call_costs`        cost per call split by token bucket (`price_table`, `deployment_costs`)
   `reconciliation`    billed vs traced per (provider, model, day, token type); invoice-true `invoice_costs`
5. `caching_*`         prefix reuse and what a prompt cache would save
6. `call_attribution`  the per-call results joined; `requests` reads it
7. `workloads`         (a table) per-workload split, dominance, shape, diagnosis and lever
8. `whatif_calls`      the bounded replay set of the routing what-if (pipeline/whatif.py)
9. audits              `pipeline/sql/audits/*.sql` must return no rows, else the build rolls back (pipeline/audits.py)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date

import duckdb

from phaselens.models.config import Config, WorkloadRule
from phaselens.models.vocabulary import default_workload_sql

from . import telemetry
from .audits import run_audits
from .store import sql_text


@dataclass
class BuildResult:
    calls: int = 0
    workloads: int = 0
    unpriced_calls: int = 0
    estimated_calls: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    full: bool = True                                       # every table re-derived from every raw row
    reason: str = ""                                        # why the build was full (or "incremental")
    days_rebuilt: list[date | None] = field(default_factory=list)  # UTC days recomputed (None: calls without a start)
    days_changed: list[date] | None = None                  # UTC days whose calls' rows changed (None: every day)
    new_loads: int = 0                                      # ledger loads whose rows this build saw first


def workload_rules_sql(rules: list[WorkloadRule]) -> tuple[str, dict[str, str]]:
    """The CREATE TABLE call_workload statement for `rules` (first match wins) and its bound parameters."""
    params: dict[str, str] = {}
    whens: list[str] = []

    def bind(value: str) -> str:
        name = f"p{len(params)}"
        params[name] = value
        return f"${name}"

    columns = {"feature": "workload_hint", "service": "service", "provider": "provider", "model": "model",
               "operation": "operation"}
    for rule in rules:
        conds = [
            f"regexp_matches(coalesce({col}, ''), {bind(getattr(rule, key))})"
            for key, col in columns.items()
            if getattr(rule, key) is not None
        ]
        for attr, pattern in rule.attributes.items():
            path = '$."' + attr.replace('"', '\\"') + '"'
            conds.append(f"regexp_matches(coalesce(json_extract_string(attributes_json, {bind(path)}), ''), {bind(pattern)})")
        whens.append(f"WHEN {' AND '.join(conds)} THEN {bind(rule.name)}")
    case = f"CASE {' '.join(whens)} ELSE {{default}} END" if whens else "{default}"
    default = default_workload_sql()
    sql = (
        "CREATE OR REPLACE TABLE call_workload AS\n"
        f"SELECT call_id, started_at, {case.format(default=default)} AS workload FROM raw_calls"
    )
    return sql, params


def _settings_table(con: duckdb.DuckDBPyConnection, config: Config) -> None:
    values = {**config.shapes.model_dump(), **config.diagnosis.model_dump()}
    cols = ", ".join(f"${k} AS {k}" for k in values)
    con.execute(f"CREATE OR REPLACE TABLE build_settings AS SELECT {cols}", values)


SOURCE_GAP_DAYS_SQL = "CREATE OR REPLACE TABLE source_gap_days AS SELECT * FROM source_gap_parts(NULL, NULL, true)"
"""The counts `source_gaps` is made of, per day (pipeline/sql/source_gaps.sql), as this build saw them."""


WORKLOAD_PARTS = ("workload_days", "workload_days_hist", "workload_days_concurrency")
"""The per-day parts `workloads` adds up (pipeline/sql/workloads.sql), kept as tables by a DuckDB build."""


def build_workloads(con: duckdb.DuckDBPyConnection, days: list[date | None] | None = None) -> None:
    """`workloads` as a table: pipeline/sql/workloads.sql defines the `workload_stats` macro (with the rules of
    workload_rules.sql) and the views over the whole store: its per-day parts (`WORKLOAD_PARTS`) and `workloads`,
    which adds them up. A build keeps the parts and `workloads` as tables, so the audits, publish and every reader
    read stored rows; `days` (an incremental build) recomputes the parts of those days only (None: a start-less
    call's) and adds up `workloads` again. `workload_stats(since, until)` stays a macro."""
    if not isinstance(con, duckdb.DuckDBPyConnection):  # the Spark engine's store keeps the views (same rows)
        con.execute(sql_text("workload_rules") + sql_text("workloads"))
        return
    if days is not None:
        from .incremental import NULL_DAY, day_ranges

        keys = ", ".join(NULL_DAY if d is None else f"DATE '{d}'" for d in days) or "NULL"
        bounds = [(f"TIMESTAMP '{a}'", f"TIMESTAMP '{b}'", "false") for a, b in day_ranges([d for d in days if d])]
        if None in days:  # an empty range and the calls without a start
            bounds.append(("TIMESTAMP '0001-01-01'", "TIMESTAMP '0001-01-01'", "true"))
        for table, macro in zip(WORKLOAD_PARTS, ("workload_day_parts", "workload_day_hist", "workload_day_concurrency")):
            con.execute(f"DELETE FROM main.{table} WHERE coalesce(day, {NULL_DAY}) IN ({keys})")
            for since, until, unstarted in bounds:
                con.execute(f"INSERT INTO main.{table} BY NAME SELECT * FROM {macro}({since}, {until}, {unstarted})")
        con.execute("CREATE OR REPLACE TABLE main.workloads AS SELECT * FROM workload_stats(NULL, NULL)")
        return
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()}
    for name in ("workloads", *WORKLOAD_PARTS):
        if name in tables:
            con.execute(f"DROP TABLE main.{name}")
    con.execute(sql_text("workload_rules") + sql_text("workloads"))
    for name in (*WORKLOAD_PARTS, "workloads"):  # the parts first: `workloads` reads them
        con.execute(f"CREATE OR REPLACE TABLE main.{name}_built AS SELECT * FROM main.{name}")
        con.execute(f"DROP VIEW main.{name}")
        con.execute(f"ALTER TABLE main.{name}_built RENAME TO {name}")


def stage_timer(result: BuildResult, on_stage: Callable[[str, float], None] | None) -> Callable[[str, Callable[[], None]], None]:
    """`stage(name, fn)`: runs `fn`, records its seconds in `result.seconds[name]` and reports them to `on_stage`."""
    def stage(name: str, fn: Callable[[], None]) -> None:
        t = time.perf_counter()
        fn()
        result.seconds[name] = time.perf_counter() - t
        if on_stage:
            on_stage(name, result.seconds[name])

    return stage


def build(
    con: duckdb.DuckDBPyConnection,
    config: Config | None = None,
    full: bool = False,
    *,
    on_stage: Callable[[str, float], None] | None = None,
) -> BuildResult:
    """Bring every built table up to date with the raw tables; running it twice gives the same store.

    Incremental by default: when an earlier build of the same configuration left its state, only the UTC days
    touched by loads since then are recomputed (pipeline/incremental.py); `full=True`, a changed configuration
    or no state re-derive everything. Either way the store is the one a full build gives.
    """
    from . import incremental

    config = config or Config()
    result = BuildResult()
    p = incremental.plan(con, config, full)
    result.full, result.reason = p.full, p.reason
    result.new_loads = sum(len(v) for v in p.new_loads.values())

    stage = stage_timer(result, on_stage)

    from phaselens.models import Settings

    con.execute("SET memory_limit = ?", [Settings().build_memory_limit])
    with telemetry.operation("build"):
        if p.full:
            result.days_rebuilt = _days(con)
            _run_stages(con, config, stage, lambda: incremental.record(con, p, len(result.days_rebuilt)))
        else:
            _in_transaction(con, lambda: _incremental(con, config, p, stage, result))
    # from `workloads` (one row per workload, its counts over every call): a few rows, not a pass over the calls
    result.calls, result.unpriced_calls, result.estimated_calls, result.workloads = con.execute(
        "SELECT coalesce(sum(calls), 0), coalesce(sum(unpriced_calls), 0), coalesce(sum(estimated_calls), 0), "
        "count(*) FROM workloads"
    ).fetchall()[0]
    return result


def _in_transaction(con: duckdb.DuckDBPyConnection, fn: Callable[[], None]) -> None:
    con.execute("BEGIN TRANSACTION")
    try:
        fn()
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise


def _incremental(con: duckdb.DuckDBPyConnection, config: Config, p, stage, result: BuildResult) -> None:
    from . import incremental

    # audits inside: the per-call ones over the recomputed calls, the rest global; a failure rolls all back
    result.days_rebuilt, result.days_changed = incremental.recompute(con, config, p, stage)
    con.execute("INSERT OR REPLACE INTO phaselens_meta VALUES ('built_at', CAST(now() AT TIME ZONE 'UTC' AS VARCHAR))")
    incremental.record(con, p, len(result.days_rebuilt))


def _days(con: duckdb.DuckDBPyConnection) -> list[date | None]:
    return [r[0] for r in con.execute("SELECT DISTINCT CAST(started_at AS DATE) AS d FROM raw_calls ORDER BY d").fetchall()]


def _reconcile(con: duckdb.DuckDBPyConnection, config: Config) -> None:
    """Reconciliation, reading `source_gaps` from the per-day counts the build just kept (`source_gap_days`): on
    DuckDB a temporary table of the view's name stands in for the view (which would count every call again) while
    reconciliation is built. The Spark engine's store keeps the view (its session has no `main` schema)."""
    from .incremental import source_gaps_sql
    from .reconcile import build_reconciliation

    stand_in = isinstance(con, duckdb.DuckDBPyConnection)
    if stand_in:
        con.execute(f"CREATE OR REPLACE TEMP TABLE source_gaps AS {source_gaps_sql()}")
    build_reconciliation(con, config.reconcile, config.pricebook)
    if stand_in:
        con.execute("DROP TABLE temp.source_gaps")


def _run_stages(con: duckdb.DuckDBPyConnection, config: Config, stage: Callable[[str, Callable[[], None]], None],
                before_commit: Callable[[], None] = lambda: None) -> None:
    from .caching import build_caching
    from .latency import build_timing
    from .pricing import build_costs

    con.execute("BEGIN TRANSACTION")
    try:
        stage("settings", lambda: _settings_table(con, config))
        sql, params = workload_rules_sql(config.workloads)
        stage("workloads rules", lambda: con.execute(sql, params))
        stage("concurrency", lambda: con.execute(sql_text("call_concurrency")))
        stage("latency", lambda: build_timing(con, config.latency))
        stage("costs", lambda: build_costs(con, config.pricebook))
        stage("source gaps", lambda: con.execute(SOURCE_GAP_DAYS_SQL))
        stage("reconcile", lambda: _reconcile(con, config))
        stage("caching", lambda: build_caching(con, config.caching))
        stage("attribution", lambda: con.execute(sql_text("call_attribution")))
        stage("workloads", lambda: build_workloads(con))
        stage("whatif", lambda: con.execute(sql_text("whatif_calls"), {"cap": config.whatif.sample_calls_per_day}))
        stage("audits", lambda: run_audits(con))  # invariants of the built store; a failure rolls all back
        con.execute(
            "INSERT OR REPLACE INTO phaselens_meta VALUES ('built_at', CAST(now() AT TIME ZONE 'UTC' AS VARCHAR))"
        )
        before_commit()
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
