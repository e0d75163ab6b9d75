"""The Parquet lake: the store's raw relations as Parquet files, for engines other than DuckDB.

Layout under the lake root (a local folder; an object-store URI such as ``s3://bucket/lake`` is
passed through to DuckDB's ``COPY`` unchanged, which needs DuckDB's httpfs extension and credentials):

- ``raw_calls/day=YYYY-MM-DD/*.parquet``          partitioned by the UTC day of ``started_at``
- ``raw_billing_lines/day=YYYY-MM-DD/*.parquet``  partitioned by the UTC day of ``period_start``
- ``raw_rejects/*.parquet``, ``raw_loads/*.parquet``, ``raw_calls_replaced/*.parquet``  unpartitioned (small)

A lake written before a relation existed (no folder for it) reads as that relation empty.

A call with no ``started_at`` goes to the partition ``day=unknown``, never dropped. The ``day``
column exists only as the partition key: reading a relation back drops it, so the rows equal the
store's rows.
"""
from __future__ import annotations

from pathlib import Path

import duckdb

# relation -> the timestamp column whose UTC day partitions it (None: one unpartitioned folder)
RAW_RELATIONS: dict[str, str | None] = {
    "raw_calls": "started_at",
    "raw_billing_lines": "period_start",
    "raw_rejects": None,
    "raw_loads": None,
    "raw_calls_replaced": None,  # call rows later loads replaced: the store's basis counts them
}


def _q(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _root(lake: str) -> str:
    return str(lake).rstrip("/")


def _day_expr(ts: str) -> str:
    return f"coalesce(strftime(CAST({ts} AS TIMESTAMP), '%Y-%m-%d'), 'unknown')"


def export_lake(con: duckdb.DuckDBPyConnection, lake: str, store: Path | None = None) -> dict[str, int]:
    """Write every raw relation of the store to ``lake`` (replacing what is there); rows per relation. With
    ``store`` (the store file ``con`` reads) a local lake records it as its source (``SOURCE_FILE``)."""
    root = _root(lake)
    if "://" not in root:
        Path(root).mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    for rel, ts in RAW_RELATIONS.items():
        target = _q(f"{root}/{rel}")
        if ts is None:
            con.execute(f"COPY (SELECT * FROM {rel}) TO {target} "
                        "(FORMAT parquet, PER_THREAD_OUTPUT, OVERWRITE)")
        else:
            con.execute(f"COPY (SELECT *, {_day_expr(ts)} AS day FROM {rel}) TO {target} "
                        "(FORMAT parquet, PARTITION_BY (day), OVERWRITE)")
        counts[rel] = con.execute(f"SELECT count(*) FROM {rel}").fetchone()[0]
    if store is not None and "://" not in root:
        _write_source(lake, store)
    return counts


# --- ingest straight to a lake (`phaselens ingest --lake`) ------------------------------------------------

SOURCE_FILE = "_source.json"
"""``<lake>/_source.json`` (local lakes): the store the lake's raw relations were last written from. Only
that store may rewrite single days of the lake; any other store would mix its rows with the lake's."""
PENDING_KEY = "lake_write_pending"
"""The store's note, kept while it writes days to a lake: an interrupted write is redone in full next time."""


def lake_store_path(lake: str) -> Path | None:
    """The store `ingest --lake` keeps beside a local lake's Parquet (its ledger, duplicates and OTLP merge
    state); None for an object-store lake, which needs an explicit --db."""
    root = _root(lake)
    return None if "://" in root else Path(root) / "phaselens-ingest.duckdb"


def lake_source(lake: str) -> str | None:
    import json

    p = Path(_root(lake)) / SOURCE_FILE
    try:
        return json.loads(p.read_text())["store"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def lake_has_raw_rows(lake: str) -> bool:
    root = _root(lake)
    if "://" in root:
        return True  # cannot look without credentials: assume so, which only asks for care
    return any(any((Path(root) / rel).glob("**/*.parquet")) for rel in ("raw_calls", "raw_billing_lines"))


def _write_source(lake: str, store: Path) -> None:
    import json
    import os

    p = Path(_root(lake)) / SOURCE_FILE
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps({"store": str(store.resolve())}) + "\n")
    os.replace(tmp, p)


def touched_partitions(con: duckdb.DuckDBPyConnection, load_ids: list[str]) -> dict[str, list[str]]:
    """Per partitioned relation, the day partitions (``YYYY-MM-DD`` or ``unknown``) holding rows the loads wrote,
    or rows they replaced (a call re-derived from later spans keeps its old day in ``raw_calls_replaced``)."""
    if not load_ids:
        return {rel: [] for rel, ts in RAW_RELATIONS.items() if ts}
    out: dict[str, list[str]] = {}
    for rel, ts in RAW_RELATIONS.items():
        if ts is None:
            continue
        src = (f"(SELECT {ts}, load_id FROM {rel} UNION ALL SELECT {ts}, load_id FROM raw_calls_replaced)"
               if rel == "raw_calls" else rel)
        out[rel] = sorted(r[0] for r in con.execute(
            f"SELECT DISTINCT {_day_expr(ts)} FROM {src} WHERE load_id IN (SELECT unnest(?))", [load_ids]).fetchall())
    return out


def write_lake(con: duckdb.DuckDBPyConnection, lake: str, store: Path, load_ids: list[str]) -> tuple[str, dict]:
    """Bring ``lake`` up to date with ``store`` after the loads ``load_ids``: on a local lake this store wrote
    last, rewrite only the day partitions they touched (and the small unpartitioned relations); otherwise, or
    after an interrupted write, write the whole lake. Returns ("days" | "full", what was written)."""
    import shutil

    root = _root(lake)
    resolved = str(store.resolve())
    pending = con.execute("SELECT value FROM phaselens_meta WHERE key = ?", [PENDING_KEY]).fetchone()
    by_days = "://" not in root and lake_source(lake) == resolved and pending is None
    con.execute("INSERT OR REPLACE INTO phaselens_meta VALUES (?, ?)", [PENDING_KEY, root])
    con.execute("CHECKPOINT")
    if not by_days:
        written: dict = export_lake(con, lake, store)
        how = "full"
    else:
        written = {}
        for rel, days in touched_partitions(con, load_ids).items():
            ts = RAW_RELATIONS[rel]
            for day in days:  # a partition is replaced whole: remove it, then write the store's rows of that day
                shutil.rmtree(Path(root) / rel / f"day={day}", ignore_errors=True)
            if days:
                con.execute(
                    f"COPY (SELECT *, {_day_expr(ts)} AS day FROM {rel} WHERE {_day_expr(ts)} IN (SELECT unnest(?))) "
                    f"TO {_q(f'{root}/{rel}')} (FORMAT parquet, PARTITION_BY (day), OVERWRITE_OR_IGNORE, "
                    "FILENAME_PATTERN 'part_{uuid}')", [days])
            written[rel] = days
        for rel, ts in RAW_RELATIONS.items():
            if ts is None:
                con.execute(f"COPY (SELECT * FROM {rel}) TO {_q(f'{root}/{rel}')} "
                            "(FORMAT parquet, PER_THREAD_OUTPUT, OVERWRITE)")
        how = "days"
        _write_source(lake, store)
    con.execute("DELETE FROM phaselens_meta WHERE key = ?", [PENDING_KEY])
    con.execute("CHECKPOINT")
    return how, written


def read_relation_sql(lake: str, rel: str) -> str:
    """A DuckDB SELECT over one lake relation, with the store's columns only."""
    path = _q(f"{_root(lake)}/{rel}/**/*.parquet")
    if RAW_RELATIONS.get(rel) is None:
        return f"SELECT * FROM read_parquet({path})"
    return f"SELECT * EXCLUDE (day) FROM read_parquet({path}, hive_partitioning = true)"


# --- relations built on another engine (`phaselens build --engine spark`) -------------------------------

BUILT_DIR = "built"
"""``<lake>/built/<relation>/*.parquet``: every relation the build keeps, one folder each."""
CATALOG_DIR = "_catalog"
"""``<lake>/built/_catalog/*.parquet``: (seq, kind, name, text) rows: the relations written
(kind ``relation``), the DuckDB views and macros over them in creation order (``sql``), and the
build's metadata (``meta``: built_at, engine). A DuckDB reader replays it (``open_lake``)."""
CATALOG_SCHEMA = "seq INT, kind STRING, name STRING, text STRING"


def lake_path(lake: str, *parts: str) -> str:
    return "/".join([_root(lake), *parts])


def _on_empty_store(query):
    """`query(con)` on an in-memory store with the store's schema and no rows (a raw relation's columns)."""
    from .store import ensure_schema

    con = duckdb.connect()
    try:
        ensure_schema(con)
        return query(con)
    finally:
        con.close()


def _raw_arrow_schema(rel: str):
    """The store's Arrow schema of a raw relation (for a lake folder with no files yet)."""
    return _on_empty_store(lambda con: con.sql(f"SELECT * FROM {rel} LIMIT 0").to_arrow_table().schema)


def _empty_view(con: duckdb.DuckDBPyConnection, rel: str) -> None:
    """A view named `rel` with the store's columns and types and no rows."""
    cols = _on_empty_store(lambda ref: ref.execute(f"DESCRIBE {rel}").fetchall())
    select = ", ".join(f'CAST(NULL AS {c[1]}) AS "{c[0]}"' for c in cols)
    con.execute(f"CREATE VIEW {rel} AS SELECT {select} LIMIT 0")


def read_relation_spark(spark, lake: str, rel: str):
    """A Spark DataFrame over one raw lake relation, with the store's columns only, in the store's order."""
    path = lake_path(lake, rel)
    names = _raw_arrow_schema(rel).names
    try:
        df = spark.read.option("basePath", path).parquet(path)
    except Exception as e:  # an empty partitioned relation has no files to infer a schema from
        if "UNABLE_TO_INFER_SCHEMA" not in str(e) and "PATH_NOT_FOUND" not in str(e):
            raise
        from pyspark.sql.pandas.types import from_arrow_schema

        return spark.createDataFrame([], from_arrow_schema(_raw_arrow_schema(rel)))
    return df.select(*[f"`{n}`" for n in names])


def remove_catalog(lake: str, spark=None) -> None:
    """Make a lake read as not built (its built relations stay, unreferenced, until the next build).

    A local lake loses its catalog folder. A lake at a URI (``s3://...``, ``file://...``) gets an empty
    catalog written over it by `spark` (the session that built it: it holds the store's credentials), so
    readers on any machine see no built relation. The local catalog file of views goes in both cases.
    """
    root = _root(lake)
    catalog = lake_path(lake, BUILT_DIR, CATALOG_DIR)
    if "://" in root:
        if spark is None:
            raise ValueError(f"removing the catalog of {lake} needs the Spark session that wrote it")
        spark.createDataFrame([], CATALOG_SCHEMA).coalesce(1).write.mode("overwrite").parquet(catalog)
    else:
        import shutil

        shutil.rmtree(Path(catalog), ignore_errors=True)
    catalog_db_path(lake).unlink(missing_ok=True)


def catalog_db_path(lake: str) -> Path:
    """The DuckDB file of views over a lake: inside a local lake, else in ./.phaselens-lakes/."""
    root = _root(lake)
    if "://" in root:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in root)
        folder = Path(".phaselens-lakes")
        folder.mkdir(exist_ok=True)
        return folder / f"{safe}.duckdb"
    return Path(root) / "phaselens-lake.duckdb"


def open_lake(lake: str) -> tuple[duckdb.DuckDBPyConnection, Path]:
    """A DuckDB connection whose relations are views over the lake, as a built store has them.

    The raw relations, every relation the build wrote, and then the build's own views and
    macros (``requests``, ``workloads``, ``workload_stats``, ...) replayed from the catalog, so every
    reader (``workloads``, ``report``, ``publish``, the dashboard's snapshot) runs unchanged. The
    views live in a small DuckDB file (``catalog_db_path``), rewritten on every open; the data
    stays in the lake. Returns the connection and that file's path (publish writes its snapshots
    next to it, which is where ``phaselens dashboard --lake`` looks).
    """
    import os

    from phaselens.ingest.normalize import sql_macros

    from .errors import StoreError
    from .store import META_DDL

    root = _root(lake)
    if "://" not in root and not (Path(root) / "raw_calls").exists():
        raise StoreError(f"no lake at {lake}", "write one with `phaselens export --db FILE --lake DIR`")
    path = catalog_db_path(lake)
    tmp = path.with_name(path.name + ".tmp")
    for p in (tmp, tmp.with_name(tmp.name + ".wal")):
        if p.exists():
            p.unlink()
    con = duckdb.connect(str(tmp))
    try:
        for stmt in sql_macros():
            con.execute(stmt)
        con.execute(META_DDL)
        for rel in RAW_RELATIONS:
            if "://" not in root and not any((Path(root) / rel).glob("**/*.parquet")):
                _empty_view(con, rel)  # a lake from before this relation existed, or an empty one
            else:
                con.execute(f"CREATE VIEW {rel} AS {read_relation_sql(lake, rel)}")
        catalog = lake_path(lake, BUILT_DIR, CATALOG_DIR)
        rows: list[tuple[str, str, str]] = []
        if "://" in root or Path(catalog).exists():
            try:
                rows = con.execute(f"SELECT kind, name, text FROM read_parquet({_q(catalog + '/*.parquet')}) "
                                   "ORDER BY seq").fetchall()
            except duckdb.IOException:
                rows = []
        for kind, name, text in rows:
            if kind == "relation":
                con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM read_parquet('
                            f'{_q(lake_path(lake, BUILT_DIR, name) + "/*.parquet")})')
            elif kind == "meta":
                con.execute("INSERT OR REPLACE INTO phaselens_meta VALUES (?, ?)", [name, text])
        for kind, name, text in rows:
            if kind == "sql":
                con.execute(text)
        con.execute("CHECKPOINT")
        con.close()
        os.replace(tmp, path)
    except BaseException:
        con.close()
        raise
    con = duckdb.connect(str(path))
    for stmt in sql_macros():
        con.execute(stmt)
    return con, path
