"""Publish: write what the dashboard reads into a new, small, read-only snapshot and swap it in atomically.

DuckDB lets one process write a store and no other process open it meanwhile, so the dashboard never reads the
store itself. At the end of `ingest` and `build` the writer calls `publish(con, db_path)`, which

1. writes a NEW file `<db>.published/<UTC timestamp>-<n>.duckdb` with the rollups (`pipeline/sql/rollup_*.sql`),
   the whole-store relations the pages show (`workloads`, `latency_fits`, `caching_opportunity`,
   `reconciliation`, `untraced_costs` when built), data-health summaries, a bounded call sample, and the read
   macros of `rollup_macros.sql`;
2. points `<db>.published/CURRENT` at it (temp file + `os.replace`, atomic on POSIX);
3. deletes snapshots older than the one CURRENT named before, so a reader that has just read the pointer
   still finds its file.

Readers open the snapshot CURRENT names, read-only: a writer never blocks them and a half-built state is
never visible. The snapshot is a documented read model too (docs/dashboard.md).
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from phaselens.models.config import Config

from .errors import StoreError
from .store import relation_exists, sql_text

FORMAT_VERSION = 1
ALIAS = "published"
POINTER = "CURRENT"
SNAPSHOT_NAME = re.compile(r"^(\d{8}T\d{6}\d{6}Z)-(\d+)\.duckdb$")

# Rollup SQL files run on the writer's connection, in order; each creates relations in `published.`.
ROLLUP_FILES: tuple[str, ...] = (
    "rollup_hourly", "rollup_dimensions", "rollup_hist", "rollup_sample", "rollup_health", "rollup_billing",
)

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

# Inputs that exist only after some build stage, with the typed empty stand-in used before then.
OPTIONAL_INPUTS: dict[str, tuple[str, str]] = {
    "_pl_invoice_costs": (
        "invoice_costs",
        "SELECT call_id, input_cost_usd_invoice, output_cost_usd_invoice, cost_usd_invoice FROM invoice_costs",
    ),
}
EMPTY_INPUTS: dict[str, str] = {
    "_pl_invoice_costs": (
        "SELECT NULL::VARCHAR AS call_id, NULL::DECIMAL(38, 12) AS input_cost_usd_invoice, "
        "NULL::DECIMAL(38, 12) AS output_cost_usd_invoice, NULL::DECIMAL(38, 12) AS cost_usd_invoice WHERE false"
    ),
}

# `workloads` before the first build: the columns the pages read, no rows.
EMPTY_WORKLOADS = (
    "SELECT NULL::VARCHAR AS workload, NULL::BIGINT AS calls, NULL::VARCHAR AS dominant_latency_phase, "
    "NULL::VARCHAR AS dominant_cost_phase, NULL::VARCHAR AS shape_class, NULL::VARCHAR AS cause, "
    "NULL::VARCHAR AS diagnosis, NULL::VARCHAR AS lever, NULL::VARCHAR AS cost_diagnosis, "
    "NULL::VARCHAR AS cost_lever WHERE false"
)


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


def _write_relations(
    con: duckdb.DuckDBPyConnection, slos: list[tuple[str, str, float]], whatif_json: str | None = None
) -> None:
    for view, (source, select) in OPTIONAL_INPUTS.items():
        body = select if relation_exists(con, source) else EMPTY_INPUTS[view]
        con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS {body}")
    for name in ROLLUP_FILES:
        con.execute(sql_text(name))
    workloads = "SELECT * FROM workloads" if relation_exists(con, "workloads") else EMPTY_WORKLOADS
    con.execute(f"CREATE TABLE {ALIAS}.workloads AS {workloads}")
    for name in COPIED_RELATIONS:
        if relation_exists(con, name):
            con.execute(f"CREATE TABLE {ALIAS}.{name} AS SELECT * FROM {name}")
    con.execute(f"CREATE TABLE {ALIAS}.slos (workload VARCHAR, metric VARCHAR, max_s DOUBLE)")
    if slos:
        con.executemany(f"INSERT INTO {ALIAS}.slos VALUES (?, ?, ?)", slos)
    con.execute(f"CREATE TABLE {ALIAS}.whatif_config (config_json VARCHAR)")
    if whatif_json is not None:
        con.execute(f"INSERT INTO {ALIAS}.whatif_config VALUES (?)", [whatif_json])


def _finish_snapshot(path: Path, store: Path | str) -> None:
    """Create the read macros and the meta row inside the new snapshot (opened as its own database)."""
    with duckdb.connect(str(path)) as snap:
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
             ["relations", ",".join(tables)]],
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


def publish(con: duckdb.DuckDBPyConnection, db_path: Path | str, config: Config | None = None) -> Path:
    """Write a new snapshot of the dashboard's relations from the store `con` is open on, make it CURRENT, and
    return its path; call it outside a transaction. `config` supplies the SLOs (else the last snapshot's are kept).
    """
    folder = published_dir(db_path)
    folder.mkdir(parents=True, exist_ok=True)
    slos = [(s.workload, s.metric, s.max_s) for s in config.slos] if config is not None else _previous_slos(db_path)
    whatif_json = whatif_config_json(config) if config is not None else _previous_whatif_config(db_path)
    path = _new_snapshot_path(folder)
    con.execute(f"ATTACH {_quote(str(path))} AS {ALIAS}")
    try:
        _write_relations(con, slos, whatif_json)
        con.execute(f"CHECKPOINT {ALIAS}")
    except BaseException:
        con.execute(f"DETACH {ALIAS}")
        path.unlink(missing_ok=True)
        Path(f"{path}.wal").unlink(missing_ok=True)
        raise
    con.execute(f"DETACH {ALIAS}")
    _finish_snapshot(path, db_path)
    previous = _swap_pointer(folder, path)
    _delete_older(folder, previous, path.name)
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

