"""Publish: write what the dashboard reads into a new, small, read-only snapshot and swap it in atomically.

DuckDB lets one process write a store and no other process open it meanwhile, so the dashboard never reads the
store itself. At the end of `ingest` and `build` the writer calls `publish(con, db_path)`, which

1. writes a NEW file `<db>.published/<UTC timestamp>-<n>.duckdb` with the rollups (`pipeline/sql/rollup_*.sql`),
   the whole-store relations the pages show (`workloads`, `latency_fits`, `caching_opportunity`,
   `reconciliation`, `untraced_costs` when built), data-health summaries, a bounded call sample, and the read
   macros of `rollup_macros.sql`;
   the rollups kept per UTC day (`PARTITIONED`) are computed only for the days given as changed when the
   previous snapshot is of the store as it stood before those changes (its `basis`, see `store_basis`); the
   other days' rows are copied from that snapshot. Otherwise, and when no days are given, every day is
   computed. Either way the new file is complete before it is named CURRENT;
2. points `<db>.published/CURRENT` at it (temp file + `os.replace`, atomic on POSIX);
3. deletes snapshots older than the one CURRENT named before, so a reader that has just read the pointer
   still finds its file.

Readers open the snapshot CURRENT names, read-only: a writer never blocks them and a half-built state is
never visible. The snapshot is a documented read model too (docs/dashboard.md).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb

from phaselens.models.config import Config

from .errors import StoreError
from .incremental import rows_within
from .store import relation_exists, sql_text

FORMAT_VERSION = 2
ALIAS = "published"
PREVIOUS = "pl_previous"  # the snapshot an incremental publish copies untouched days from
POINTER = "CURRENT"
SNAPSHOT_NAME = re.compile(r"^(\d{8}T\d{6}\d{6}Z)-(\d+)\.duckdb$")

# Rollup SQL files over the calls of the days being computed (`_pl_calls`); each leaves `_pl_part_<table>` temp
# tables of the relations in PARTITIONED.
PARTITION_FILES: tuple[str, ...] = ("rollup_hourly", "rollup_hist", "rollup_sample", "rollup_calls_by_day")

# The snapshot's relations kept per UTC day: name -> (its day expression, its sort order). A NULL day (calls
# without a start time) is computed on every publish.
PARTITIONED: dict[str, tuple[str, str]] = {
    "rollup_hourly": ("date_trunc('day', hour)", "hour, workload, provider, model, team, project"),
    "rollup_hist_hourly": ("date_trunc('day', hour)", "hour, workload, provider, model, team, metric, bucket"),
    "rollup_hist_daily": ("day", "day, workload, provider, model, team, metric, bucket"),
    "call_sample_days": ("day", "day, workload, started_at, call_id"),
    "calls_by_model_day": ("day", "day, provider, model"),
}

# Rollup SQL files run after the partitioned relations are assembled; each creates relations in `published.`.
ROLLUP_FILES: tuple[str, ...] = ("rollup_dimensions", "rollup_sample_final", "rollup_health", "rollup_billing")

# Whole-store relations copied as they are when the build has made them (the pages say when one is missing).
COPIED_RELATIONS: tuple[str, ...] = (
    "latency_fits", "caching_opportunity", "caching_by_workload", "reconciliation", "untraced_costs",
    "whatif_calls",
)

# Macro files over optional relations, created when the snapshot has those relations.
OPTIONAL_MACROS: dict[str, tuple[str, ...]] = {
    "rollup_macros_billing": ("reconciliation", "untraced_costs"),
    "rollup_macros_caching": ("caching_opportunity",),
}

# Inputs that exist only after some build stage, with the typed empty stand-in used before then: the relations (the
# first the store has: a store built by an earlier version has no `invoice_shares`) and the columns read; the days
# being computed are read through the relation's period macro (`<relation>_in`).
OPTIONAL_INPUTS: dict[str, tuple[tuple[str, ...], str]] = {
    "_pl_invoice_costs": (("invoice_shares", "invoice_costs"),
                          "call_id, input_cost_usd_invoice, output_cost_usd_invoice, cost_usd_invoice"),
}
EMPTY_INPUTS: dict[str, str] = {
    "_pl_invoice_costs": (
        "SELECT NULL::VARCHAR AS call_id, NULL::DECIMAL(38, 12) AS input_cost_usd_invoice, "
        "NULL::DECIMAL(38, 12) AS output_cost_usd_invoice, NULL::DECIMAL(38, 12) AS cost_usd_invoice WHERE false"
    ),
}

# `workloads` before the first build: the columns the pages and the read macros read, no rows.
EMPTY_WORKLOADS = (
    "SELECT NULL::VARCHAR AS workload, NULL::BIGINT AS calls, NULL::VARCHAR AS dominant_latency_phase, "
    "NULL::VARCHAR AS dominant_cost_phase, NULL::VARCHAR AS shape_class, NULL::VARCHAR AS cause, "
    "NULL::VARCHAR AS diagnosis, NULL::VARCHAR AS lever, NULL::VARCHAR AS cost_diagnosis, "
    "NULL::VARCHAR AS cost_lever, NULL::DOUBLE AS itl_contention_ratio, NULL::DOUBLE AS concurrency_high, "
    "NULL::DOUBLE AS concurrency_low, NULL::DOUBLE AS reuse_share, NULL::DOUBLE AS achieved_share, "
    "NULL::DECIMAL(38, 12) AS cache_usd_saved, NULL::DOUBLE AS cache_ttft_saved_p50_s, "
    "NULL::BIGINT AS cache_lifetime_s, NULL::BIGINT AS store_days WHERE false"
)


def _empty_settings() -> str:
    """`build_settings` with no row, typed as the build writes it (pipeline/build.py)."""
    values = {**Config().shapes.model_dump(), **Config().diagnosis.model_dump()}
    types = {int: "INTEGER", float: "DOUBLE"}
    return "SELECT " + ", ".join(f"NULL::{types[type(v)]} AS {k}" for k, v in values.items()) + " WHERE false"


def published_dir(db_path: Path | str) -> Path:
    """The folder holding a store's snapshots: `<db>.published` beside the store file."""
    return Path(f"{db_path}.published")


def current_snapshot(db_path: Path | str) -> Path | None:
    """The snapshot file `<db>.published/CURRENT` names, or None when nothing was published yet."""
    folder = published_dir(db_path)
    for _ in range(3):  # the pointer may move between reading it and checking its file; read it again then
        try:
            name = (folder / POINTER).read_text().strip()
        except FileNotFoundError:
            return None
        path = folder / name
        if name and path.exists():
            return path
    return None


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _new_snapshot_path(folder: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    taken = [int(m.group(2)) for p in folder.iterdir() if (m := SNAPSHOT_NAME.match(p.name))]
    n = max(taken, default=0) + 1
    while (path := folder / f"{stamp}-{n}.duckdb").exists():
        n += 1
    return path


def _previous_slos(db_path: Path | str) -> list[tuple[str, str, float]]:
    """SLOs of the current snapshot, carried over when a publish has no configuration (e.g. after ingest)."""
    snap = current_snapshot(db_path)
    if snap is None:
        return []
    try:
        with duckdb.connect(str(snap), read_only=True) as prev:
            return prev.execute("SELECT workload, metric, max_s FROM slos").fetchall()
    except duckdb.Error:
        return []


def _previous_whatif_config(db_path: Path | str) -> str | None:
    """The what-if configuration of the current snapshot, carried over like the SLOs."""
    snap = current_snapshot(db_path)
    if snap is None:
        return None
    try:
        with duckdb.connect(str(snap), read_only=True) as prev:
            row = prev.execute("SELECT config_json FROM whatif_config").fetchone()
            return row[0] if row else None
    except duckdb.Error:
        return None


def whatif_config_json(config: Config) -> str:
    """What the dashboard's what-if panel needs of the configuration: tokenizer ratios and the price book."""
    return config.model_dump_json(include={"whatif", "prices", "deployments"})


def store_basis(con: duckdb.DuckDBPyConnection) -> str:
    """What the store's calls stand at: its last build, how many raw calls it holds and how many stored rows loads
    replaced (loads only add calls, or replace stored ones with what later spans of them said). A writer reads it
    before it changes the store and passes it to `publish` with the days it changed; a snapshot records the basis
    it was made from, so a publish that missed a change is caught and made a full one.
    """
    built = con.execute("SELECT max(value) FROM phaselens_meta WHERE key = 'built_at'").fetchall()[0][0]
    calls = con.execute("SELECT count(*) FROM raw_calls").fetchall()[0][0]
    replaced = con.execute("SELECT count(*) FROM raw_calls_replaced").fetchall()[0][0]
    return f"built_at={built}|calls={calls}|replaced={replaced}"


def build_days(result) -> list[date] | None:
    """The days whose calls' rows a build changed, for `publish(days=...)`: None (every day) after a full build or
    one that re-allocated every invoice. A day recomputed only for the caching lever's reach is not among them: the
    snapshot's per-day rollups read the calls and their invoice-true costs, and its caching relations are copied
    whole."""
    if getattr(result, "full", True):
        return None
    return getattr(result, "days_changed", None)


def loaded_days(con: duckdb.DuckDBPyConnection, load_ids: Iterable[str]) -> list[date]:
    """The UTC days of the calls that the loads `load_ids` stored, for `publish(days=...)` after an ingest."""
    ids = sorted(set(load_ids))
    if not ids:
        return []
    # with the old days of the rows those loads replaced (spans of a stored call arrived later)
    rows = con.execute(
        "SELECT DISTINCT CAST(started_at AS DATE) FROM (SELECT started_at, load_id FROM raw_calls UNION ALL "
        "SELECT started_at, load_id FROM raw_calls_replaced) WHERE load_id IN (SELECT unnest(?)) "
        "AND started_at IS NOT NULL", [ids]).fetchall()
    return sorted(r[0] for r in rows)


def _billing_lines(con: duckdb.DuckDBPyConnection) -> str:
    return str(con.execute("SELECT count(*) FROM raw_billing_lines").fetchall()[0][0])


def _billing_days(con: duckdb.DuckDBPyConnection, seen: str | None) -> list[date] | None:
    """The UTC days covered by the billing lines stored after the first `seen` lines (the table only grows; a
    line's period may span days), or None when that cannot be told (no count recorded, or fewer lines now)."""
    if seen is None or not seen.isdigit() or int(seen) > int(_billing_lines(con)):
        return None
    rows = con.execute(
        "SELECT DISTINCT unnest(generate_series(CAST(period_start AS DATE), "
        "greatest(CAST(period_start AS DATE), CAST(period_end - INTERVAL 1 MICROSECOND AS DATE)), INTERVAL 1 DAY))::DATE "
        "FROM raw_billing_lines WHERE rowid >= ? AND period_start IS NOT NULL", [int(seen)]).fetchall()
    return [r[0] for r in rows]


def _previous_for_increment(db_path: Path | str, since: str) -> tuple[Path, str | None] | None:
    """The current snapshot when it can take an incremental publish (same format, store and basis `since`), with
    the count of billing lines it was made from."""
    snap = current_snapshot(db_path)
    if snap is None:
        return None
    try:
        with duckdb.connect(str(snap), read_only=True) as prev:
            meta = dict(prev.execute("SELECT key, value FROM published_meta").fetchall())
    except duckdb.Error:
        return None
    tables = set(meta.get("relations", "").split(","))
    if (meta.get("format_version") != str(FORMAT_VERSION) or meta.get("basis") != since
            or meta.get("store") != str(Path(db_path).resolve()) or not set(PARTITIONED) <= tables):
        return None
    return snap, meta.get("billing_lines")


def _assemble_partitioned(con: duckdb.DuckDBPyConnection, days: Iterable[date] | None, previous: str | None) -> None:
    """Create each PARTITIONED relation: the previous snapshot's rows of the days not computed, then the new rows."""
    keep = None
    if previous is not None and days is not None:
        listed = ", ".join(f"DATE '{d}'" for d in sorted(set(days)))
        keep = f"{{day}} IS NOT NULL" + (f" AND CAST({{day}} AS DATE) NOT IN ({listed})" if listed else "")
    for name, (day, order) in PARTITIONED.items():
        old = f"SELECT * FROM {previous}.{name} WHERE {keep.format(day=day)} UNION ALL " if keep else ""
        con.execute(f"CREATE TABLE {ALIAS}.{name} AS SELECT * FROM ({old}SELECT * FROM _pl_part_{name}) ORDER BY {order}")
        con.execute(f"DROP TABLE _pl_part_{name}")


def _write_relations(
    con: duckdb.DuckDBPyConnection, slos: list[tuple[str, str, float]], whatif_json: str | None = None,
    days: Iterable[date] | None = None, previous: str | None = None,
) -> None:
    for view, (sources, columns) in OPTIONAL_INPUTS.items():
        source = next((s for s in sources if relation_exists(con, s)), None)
        if source is None:
            body = EMPTY_INPUTS[view]
        elif days is None:
            body = f"SELECT {columns} FROM {source}"
        else:
            body = rows_within(f"{source}_in", [*days, None], columns)
        con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS {body}")
    con.execute(sql_text("sketch_macros").replace("CREATE OR REPLACE MACRO", "CREATE OR REPLACE TEMP MACRO"))
    # the calls of the days being computed (the rollups never read the attributes or prefix hashes): a few days'
    # calls are read once into a temp table; every day's are streamed from the view by each rollup instead, so a
    # full publish does not hold the whole store
    kind = "VIEW" if days is None else "TABLE"
    columns = "* EXCLUDE (attributes_json, prefix_hashes, prefix_tokens)"
    con.execute(f"CREATE OR REPLACE TEMP {kind} _pl_calls AS "
                + (f"SELECT {columns} FROM requests" if days is None else rows_within("requests_in", [*days, None], columns)))
    for name in PARTITION_FILES:
        con.execute(sql_text(name))
    con.execute(f"DROP {kind} _pl_calls")
    _assemble_partitioned(con, days, previous)
    for name in ROLLUP_FILES:
        con.execute(sql_text(name))
    workloads = "SELECT * FROM workloads" if relation_exists(con, "workloads") else EMPTY_WORKLOADS
    con.execute(f"CREATE TABLE {ALIAS}.workloads AS {workloads}")
    # the diagnosis thresholds the build used, for the read macros' rules under any filter (none before a build)
    settings = "SELECT * FROM build_settings" if relation_exists(con, "build_settings") else _empty_settings()
    con.execute(f"CREATE TABLE {ALIAS}.build_settings AS {settings}")
    for name in COPIED_RELATIONS:
        if relation_exists(con, name):
            con.execute(f"CREATE TABLE {ALIAS}.{name} AS SELECT * FROM {name}")
    con.execute(f"CREATE TABLE {ALIAS}.slos (workload VARCHAR, metric VARCHAR, max_s DOUBLE)")
    if slos:
        con.executemany(f"INSERT INTO {ALIAS}.slos VALUES (?, ?, ?)", slos)
    con.execute(f"CREATE TABLE {ALIAS}.whatif_config (config_json VARCHAR)")
    if whatif_json is not None:
        con.execute(f"INSERT INTO {ALIAS}.whatif_config VALUES (?)", [whatif_json])


def _finish_snapshot(path: Path, store: Path | str, basis: str, computed: str, billing_lines: str) -> None:
    """Create the read macros and the meta row inside the new snapshot (opened as its own database)."""
    with duckdb.connect(str(path)) as snap:
        snap.execute(sql_text("sketch_macros"))
        snap.execute(sql_text("text_macros"))
        snap.execute(sql_text("workload_rules"))
        snap.execute(sql_text("rollup_macros"))
        for name, needs in OPTIONAL_MACROS.items():
            if all(relation_exists(snap, r) for r in needs):
                snap.execute(sql_text(name))
        snap.execute("CREATE TABLE published_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        tables = [r[0] for r in snap.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
        snap.executemany(
            "INSERT INTO published_meta VALUES (?, ?)",
            [["format_version", str(FORMAT_VERSION)], ["store", str(Path(store).resolve())],
             ["published_at", datetime.now(UTC).replace(tzinfo=None).isoformat(sep=" ")],
             ["relations", ",".join(tables)], ["basis", basis], ["computed_days", computed],
             ["billing_lines", billing_lines]],
        )
        snap.execute("CHECKPOINT")


def _swap_pointer(folder: Path, path: Path) -> str | None:
    pointer = folder / POINTER
    try:
        previous = pointer.read_text().strip() or None
    except FileNotFoundError:
        previous = None
    tmp = folder / f".{POINTER}.{os.getpid()}.tmp"
    tmp.write_text(path.name + "\n")
    os.replace(tmp, pointer)
    return previous


def _delete_older(folder: Path, keep_from: str | None, current: str) -> None:
    """Delete snapshot files older than `keep_from` (the previous snapshot); newer ones may be in progress."""
    floor = keep_from if keep_from and keep_from < current else current
    for p in folder.iterdir():
        base = p.name.removesuffix(".wal")
        if SNAPSHOT_NAME.match(base) and base < floor:
            p.unlink(missing_ok=True)


def publish(
    con: duckdb.DuckDBPyConnection, db_path: Path | str, config: Config | None = None, *,
    days: Iterable[date] | None = None, since: str | None = None,
) -> Path:
    """Write a new snapshot of the dashboard's relations from the store `con` is open on, make it CURRENT, and
    return its path; call it outside a transaction. `config` supplies the SLOs (else the last snapshot's are kept).

    `days` (UTC) and `since` (the `store_basis` read before those days changed) make the publish incremental:
    when the current snapshot was made at basis `since`, only those days' rollups are computed and the rest are
    copied from it; otherwise every day is computed. The snapshot's `published_meta.computed_days` says which.
    """
    folder = published_dir(db_path)
    folder.mkdir(parents=True, exist_ok=True)
    slos = [(s.workload, s.metric, s.max_s) for s in config.slos] if config is not None else _previous_slos(db_path)
    whatif_json = whatif_config_json(config) if config is not None else _previous_whatif_config(db_path)
    basis = store_basis(con)
    billing_lines = _billing_lines(con)
    found = _previous_for_increment(db_path, since) if days is not None and since is not None else None
    previous = None
    if found is not None:
        # new billing changes the invoice-true cost of the calls its cells cover: their days are computed too
        billed = _billing_days(con, found[1])
        if billed is not None:
            previous, days = found[0], sorted(set(days) | set(billed))
    if previous is None:
        days = None
    path = _new_snapshot_path(folder)
    con.execute(f"ATTACH {_quote(str(path))} AS {ALIAS}")
    attached_previous = False
    try:
        if previous is not None:
            con.execute(f"ATTACH {_quote(str(previous))} AS {PREVIOUS} (READ_ONLY)")
            attached_previous = True
        _write_relations(con, slos, whatif_json, days, PREVIOUS if previous is not None else None)
        con.execute(f"CHECKPOINT {ALIAS}")
    except BaseException:
        con.execute(f"DETACH {ALIAS}")
        if attached_previous:
            con.execute(f"DETACH {PREVIOUS}")
        path.unlink(missing_ok=True)
        Path(f"{path}.wal").unlink(missing_ok=True)
        raise
    con.execute(f"DETACH {ALIAS}")
    if attached_previous:
        con.execute(f"DETACH {PREVIOUS}")
    computed = "all" if days is None else ",".join(str(d) for d in sorted(set(days)))
    _finish_snapshot(path, db_path, basis, computed, billing_lines)
    previous_name = _swap_pointer(folder, path)
    _delete_older(folder, previous_name, path.name)
    return path


def publish_store(db_path: Path | str, config: Config | None = None) -> Path:
    """Publish a store that this process does not have open, reading it read-only; returns the snapshot path."""
    db_path = Path(db_path)
    if not db_path.exists():
        raise StoreError(f"no store at {db_path}", "run `phaselens ingest PATH --db FILE` first, or pass the right --db")
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH {_quote(str(db_path))} AS pl_store (READ_ONLY)")
    except duckdb.IOException as e:
        con.close()
        raise StoreError(
            f"the store {db_path} is in use by another phaselens process",
            "wait for the running ingest/build to finish; it publishes a snapshot when it ends",
        ) from e
    try:
        con.execute("USE pl_store")
        return publish(con, db_path, config)
    finally:
        con.close()

