"""Build state and the plan of an incremental build (docs/operations.md, "What a run recomputes").

`build_state` (one row) holds the hash of everything a build's answers depend on besides the raw rows (the
configuration without `[run]`, the latency profiles' bytes, the build SQL and the package version) and when
the last build ended; `build_loads` holds, per raw source (`raw_calls`, `raw_billing_lines`), the ledger
load ids whose rows that build already saw: the high-water mark. A build compares the two with the store:

- no state yet, another hash, or `full=True`: a full build (every table re-derived from every raw row);
- otherwise the rows of loads not yet built name the touched UTC days (a call's day is the UTC date it
  started; a call spanning midnight touches every day it runs in), widened by what depends on them (see
  `affected_days`), and only those days are recomputed.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from datetime import date
from importlib import metadata, resources

import duckdb

from phaselens.models.config import Config

BUILD_STATE_DDL = """
CREATE TABLE IF NOT EXISTS build_state (
  config_hash VARCHAR,        -- sha256 of the configuration (without [run]), profiles, build SQL and version
  built_at TIMESTAMP,         -- UTC, when the last build committed
  full_build BOOLEAN,         -- whether the last build re-derived everything
  days_rebuilt BIGINT         -- UTC days the last build recomputed
);
CREATE TABLE IF NOT EXISTS build_loads (
  source VARCHAR,             -- raw_calls | raw_billing_lines
  load_id VARCHAR,            -- a ledger load id whose rows a build has seen
  built_at TIMESTAMP
);
"""

SOURCES = ("raw_calls", "raw_billing_lines")

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
    h = hashlib.sha256(config.model_dump_json(exclude={"run"}).encode())
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
    missing = [t for t in ("call_attribution", "call_timing", "latency_fits") if not _has(con, t)]
    if missing:
        return Plan(True, f"built tables missing ({', '.join(missing)})", digest)
    if config.deployments:
        return Plan(True, "the price book has GPU-hour deployments, whose idle hours are shared store-wide", digest)
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
    con.execute("DELETE FROM build_state")
    con.execute("INSERT INTO build_state VALUES (?, now() AT TIME ZONE 'UTC', ?, ?)", [p.config_hash, p.full, days])
