"""The DuckDB store: raw tables written by loads, and the documented public views read by everyone.

Tables (written only by `pipeline/`):
- `raw_calls`          one row per model call (`LlmCall`), unique on `call_id`
- `raw_billing_lines`  one row per billing line item (`BillingLine`), unique on `billing_line_id`
- `raw_rejects`        quarantined records with their reason (`Reject`)
- `raw_loads`          the ledger: one row per file per ingest run
- `raw_otlp_spans`     every stored OTLP span, normalised (no prompt text), with the call it is part of:
                       what lets spans of one call that arrive in different loads merge (ingest/otlp_carry.py)
- `raw_calls_replaced` stored call rows a later load replaced (re-merged with spans it brought), for the
                       incremental build

Public views (the read model; see docs/store.md): `requests`, `billing_lines`, `rejects`, `loads`,
`source_gaps`, and the relations `phaselens build` publishes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

import duckdb

from phaselens.models.vocabulary import expand_sql_rules, sql_macros
from phaselens.models import BillingLine, LlmCall, Reject, Settings
from phaselens.models.schema import create_table_sql

from .errors import StoreError

SCHEMA_VERSION = 1

LOADS_DDL = """
CREATE TABLE IF NOT EXISTS raw_loads (
  load_id VARCHAR,            -- one id per file per run
  run_id VARCHAR,             -- one id per `phaselens ingest` invocation
  file VARCHAR,               -- path as given
  content_sha256 VARCHAR,     -- hash of the file's bytes; an unchanged file is not read twice
  adapter VARCHAR,            -- format detected from content
  kind VARCHAR,               -- calls | billing
  started_at TIMESTAMP,
  finished_at TIMESTAMP,
  accepted BIGINT,            -- new records stored
  duplicates BIGINT,          -- records already in the store (same call or line from another file)
  rejected BIGINT,            -- records quarantined in rejects
  skipped BIGINT,             -- valid records that are not model calls (HTTP, tool, agent spans)
  status VARCHAR,             -- loaded | partial | unchanged | empty | failed
  message VARCHAR
)
"""

REPLACED_DDL = """
CREATE TABLE IF NOT EXISTS raw_calls_replaced (
  call_id VARCHAR,            -- a call whose stored row a later load replaced: new spans of it arrived
  load_id VARCHAR,            -- the load that replaced it
  started_at TIMESTAMP,       -- the replaced row's times: the days the incremental build recomputes
  ended_at TIMESTAMP,
  retired BOOLEAN             -- the call id is gone (its spans are now part of an earlier-starting call)
)
"""

META_DDL = "CREATE TABLE IF NOT EXISTS phaselens_meta (key VARCHAR PRIMARY KEY, value VARCHAR)"


def sql_text(name: str) -> str:
    """The text of `pipeline/sql/<name>.sql`, with the shared rules it calls (`default_workload(hint, service)`,
    `itl_split(decode, output_tokens)`) written out from their one definition (`models.vocabulary.SQL_RULES`),
    so the SQL runs on any engine."""
    return expand_sql_rules(resources.files("phaselens.pipeline").joinpath("sql", f"{name}.sql").read_text())


def relation_exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether a table or view `name` exists in the store (the connection's current database) or among the
    connection's temporary relations (registered Arrow data included); an attached database's do not count."""
    sql = (
        "SELECT count(*) FROM (SELECT table_name AS n, database_name AS d FROM duckdb_tables() "
        "UNION ALL SELECT view_name, database_name FROM duckdb_views() WHERE NOT internal) "
        "WHERE n = ? AND d IN (current_database(), 'temp')"
    )
    return con.execute(sql, [name]).fetchone()[0] > 0


def connect(db: Path | str, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the store (creating it and its schema when writable) with phaselens' macros installed."""
    db = Path(db)
    if read_only and not db.exists():
        raise StoreError(f"no store at {db}", "run `phaselens ingest PATH --db FILE` first, or pass the right --db")
    try:
        con = duckdb.connect(str(db), read_only=read_only)
    except duckdb.IOException as e:
        if "lock" in str(e).lower():
            raise StoreError(
                f"the store {db} is in use by another phaselens process",
                "wait for the running ingest/build to finish, or use another --db",
            ) from e
        raise StoreError(f"cannot open the store {db}: {e}", "check the path and its permissions") from e
    if not read_only:
        # Bounded memory whatever the input size: DuckDB spills to <db>.tmp beyond this (build raises it).
        con.execute("SET memory_limit = ?", [Settings().memory_limit])
    install_macros(con)
    if not read_only:
        ensure_schema(con)
    return con


def install_macros(con: duckdb.DuckDBPyConnection) -> None:
    for stmt in sql_macros():
        con.execute(stmt)


STORE_SCHEMA_FILES = ("text_macros", "sketch_macros", "call_attribution_ddl", "views", "source_gaps")
"""What every store holds besides the raw tables, created in this order (a Spark build runs them first too). The
text and sketch macros are stored, not temporary: the build's stored macros (workload_stats) call them, and a
reader's cursor is a connection of its own that would not see a temporary one."""


def _add_attribution_start(con: duckdb.DuckDBPyConnection) -> None:
    """A store built before call_attribution kept the start of each call gains the column, filled from raw_calls,
    so `requests` (which joins on it) keeps its attribution until the next build."""
    has = con.execute("SELECT count(*) FROM duckdb_columns() WHERE database_name = current_database() "
                      "AND schema_name = 'main' AND table_name = 'call_attribution' AND column_name = 'started_at'"
                      ).fetchone()[0]
    if has:
        return
    con.execute("ALTER TABLE call_attribution ADD COLUMN started_at TIMESTAMP")
    con.execute("UPDATE call_attribution a SET started_at = c.started_at FROM raw_calls c WHERE c.call_id = a.call_id")


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the raw tables and the public views if they do not exist yet."""
    con.execute(META_DDL)
    row = con.execute("SELECT value FROM phaselens_meta WHERE key = 'schema_version'").fetchone()
    if row and int(row[0]) > SCHEMA_VERSION:
        raise StoreError(
            f"the store was written by a newer phaselens (schema {row[0]} > {SCHEMA_VERSION})",
            "upgrade phaselens, or start a new store with --db",
        )
    con.execute(create_table_sql("raw_calls", LlmCall))
    # columns added since the first schema: stores written before them gain them empty
    con.execute("ALTER TABLE raw_calls ADD COLUMN IF NOT EXISTS instrumentation VARCHAR")
    con.execute(create_table_sql("raw_billing_lines", BillingLine))
    con.execute(create_table_sql("raw_rejects", Reject, extra="rejected_at TIMESTAMP"))
    con.execute(LOADS_DDL)
    con.execute(REPLACED_DDL)
    for name in STORE_SCHEMA_FILES:
        con.execute(sql_text(name))
        if name == "call_attribution_ddl":
            _add_attribution_start(con)
    con.execute(
        "INSERT OR REPLACE INTO phaselens_meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)]
    )


def in_transaction(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether an explicit transaction is open: in autocommit every statement gets its own id."""
    probe = "SELECT current_transaction_id()"
    return con.execute(probe).fetchone() == con.execute(probe).fetchone()


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Run the block in a transaction, or inside the caller's when one is already open (a stage of `build`)."""
    if in_transaction(con):
        yield
        return
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
