"""The Parquet lake: the store's raw relations as Parquet files, for engines other than DuckDB.

Layout under the lake root (a local folder; an object-store URI such as ``s3://bucket/lake`` is
passed through to DuckDB's ``COPY`` unchanged, which needs DuckDB's httpfs extension and credentials):

- ``raw_calls/day=YYYY-MM-DD/*.parquet``          partitioned by the UTC day of ``started_at``
- ``raw_billing_lines/day=YYYY-MM-DD/*.parquet``  partitioned by the UTC day of ``period_start``
- ``raw_rejects/*.parquet``, ``raw_loads/*.parquet``  unpartitioned (small)

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
}


def _q(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _root(lake: str) -> str:
    return str(lake).rstrip("/")


def export_lake(con: duckdb.DuckDBPyConnection, lake: str) -> dict[str, int]:
    """Write every raw relation of the store to ``lake`` (replacing what is there); rows per relation."""
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
            day = (f"coalesce(strftime(CAST({ts} AS TIMESTAMP), '%Y-%m-%d'), 'unknown')")
            con.execute(f"COPY (SELECT *, {day} AS day FROM {rel}) TO {target} "
                        "(FORMAT parquet, PARTITION_BY (day), OVERWRITE)")
        counts[rel] = con.execute(f"SELECT count(*) FROM {rel}").fetchone()[0]
    return counts


def read_relation_sql(lake: str, rel: str) -> str:
    """A DuckDB SELECT over one lake relation, with the store's columns only."""
    path = _q(f"{_root(lake)}/{rel}/**/*.parquet")
    if RAW_RELATIONS.get(rel) is None:
        return f"SELECT * FROM read_parquet({path})"
    return f"SELECT * EXCLUDE (day) FROM read_parquet({path}, hive_partitioning = true)"
