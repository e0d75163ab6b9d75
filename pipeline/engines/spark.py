"""The build on Apache Spark: the same stages, the same SQL, over a Parquet lake.

`build_spark(session, lake, config)` reads the raw relations of a lake (`pipeline/lake.py`), runs
the build's stages in the DuckDB build's own order (`pipeline.build._run_stages`, so the two
engines cannot drift apart) against `SparkStore`, a stand-in for the DuckDB connection that
translates every statement with `pipeline/transpile.py` and runs it on Spark, and writes every
relation the build keeps back to the lake as Parquet (`<lake>/built/<relation>/`), with a catalog
(`<lake>/built/_catalog/`) that a DuckDB reader replays (`pipeline/lake.py: open_lake`).

What runs where:
- Every relation is Spark SQL; no Python UDF. Tables are materialised (checkpointed) when created,
  as DuckDB's tables are; temp relations stay in the session; views are Spark temp views.
- The Python parts of the build see the same connection interface as on DuckDB: the latency fit
  collects its bounded sample (`latency_sample.sql`, at most `sample_cap` calls per model) to the
  driver and fits it with the same numpy code, and its coefficients come back as a small table
  that `latency_call_timing.sql` applies in SQL; price tables are built on the driver from the
  distinct (provider, model, day) keys and sent back as small tables.
- Questions the build asks of DuckDB's catalog (`duckdb_tables()`, `duckdb_columns()`, ...) are
  answered by an in-memory DuckDB that mirrors the Spark session's relations (names, columns).

PySpark is imported only here, only when this engine is asked for (the `spark` extra).
"""
from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
from sqlglot import exp

from phaselens.ingest.normalize import sql_macros
from phaselens.models.config import Config
from phaselens.models.spark import LOCAL_DRIVER_MEMORY_CAP_GB

from .. import transpile
from ..build import BuildResult, _run_stages, stage_timer
from ..errors import PhaselensError
from ..lake import BUILT_DIR, CATALOG_DIR, CATALOG_SCHEMA, RAW_RELATIONS, lake_path, read_relation_spark
from ..store import STORE_SCHEMA_FILES, sql_text

SPARK_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",                        # DuckDB TIMESTAMP is UTC wall time
    "spark.sql.decimalOperations.allowPrecisionLoss": "false",  # DECIMAL products keep their scale
    "spark.sql.ansi.enabled": "true",                           # overflow and division by zero raise, as in DuckDB
    "spark.sql.parquet.inferTimestampNTZ.enabled": "true",      # DuckDB TIMESTAMP <-> Spark TIMESTAMP_NTZ
    "spark.sql.legacy.timeParserPolicy": "CORRECTED",
}


_CATALOG_FUNCS = re.compile(r"\b(duckdb_tables|duckdb_views|duckdb_columns|current_transaction_id)\s*\(", re.I)


class SparkEngineError(PhaselensError):
    pass


def _reason(e: Exception) -> str:
    """The line of a Spark/Java error that says what went wrong (py4j puts it after a call trace)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    for ln in lines:
        if re.match(r"^(org\.apache\.spark\.|java\.|\[[A-Z_.]+\])", ln) or "Exception:" in ln:
            return ln[:600]
    return (lines[0] if lines else type(e).__name__)[:600]


def spark_session(master: str = "local[2]", shuffle_partitions: int = 4, app_name: str = "phaselens build",
                  conf: Mapping[str, str] | None = None):
    """A SparkSession on `master` (`local[N]`, `spark://...`, `yarn`) or a Spark Connect URL (`sc://host:15002`),
    with the Spark settings in `conf` (the `[spark]` section and --spark-conf) over the build's own."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:  # the optional dependency group is missing
        raise SparkEngineError("the Spark engine needs PySpark", "pip install 'phaselens[spark]'") from e
    builder = SparkSession.builder.appName(app_name)
    builder = builder.remote(master) if master.startswith("sc://") else builder.master(master)
    settings = session_settings(master, shuffle_partitions, conf or {})
    for k, v in settings.items():
        builder = builder.config(k, v)
    try:
        session = builder.getOrCreate()
    except Exception as e:  # no Java, an unreachable master
        raise SparkEngineError(f"cannot start Spark on {master}: {str(e).splitlines()[0]}",
                               "install a Java runtime (17+) for local mode, or check the master URL") from e
    configure(session)
    return session


def session_settings(master: str, shuffle_partitions: int, conf: Mapping[str, str]) -> dict[str, str]:
    """The settings a session starts with: the SQL semantics the relations need (not overridable), then the
    user's, then defaults for what the user left unset: in local mode no web UI and a driver (which does all the
    work there) with half the machine's memory, at most LOCAL_DRIVER_MEMORY_CAP_GB."""
    out = {"spark.sql.shuffle.partitions": str(shuffle_partitions)}
    if not master.startswith("sc://"):
        out["spark.ui.enabled"] = "false"
    if master.startswith("local"):
        out["spark.driver.memory"] = f"{_local_driver_memory_gb()}g"
    out.update(conf)
    out.update(SPARK_CONF)
    return out


def _local_driver_memory_gb() -> int:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not a POSIX system: Spark's own default
        return 1
    return max(1, min(LOCAL_DRIVER_MEMORY_CAP_GB, int(total / 2**30 / 2)))


def configure(session) -> None:
    """Set the SQL settings the translated relations rely on (a session that already existed keeps its own)."""
    for k, v in SPARK_CONF.items():
        session.conf.set(k, v)


@dataclass
class _Relation:
    kind: str                 # table | view
    temp: bool
    df: Any = None            # the checkpointed DataFrame of a table


@dataclass
class _Result:
    table: pa.Table | None = None
    rows: list[tuple] | None = None

    def as_rows(self) -> list[tuple]:
        if self.rows is None:
            t = self.table
            cols = [t.column(i).to_pylist() for i in range(t.num_columns)] if t is not None else []
            self.rows = list(zip(*cols)) if cols else []
        return self.rows


def _to_arrow(df) -> pa.Table:
    if hasattr(df, "toArrow"):
        return df.toArrow()
    return pa.Table.from_pandas(df.toPandas())  # pragma: no cover - older PySpark


@dataclass
class SparkStore:
    """The part of a DuckDB connection the build uses, on a Spark session."""

    spark: Any
    relations: dict[str, _Relation] = field(default_factory=dict)
    macros: transpile.Macros = field(default_factory=transpile.Macros)
    catalog: list[tuple[str, str]] = field(default_factory=list)   # (name, DuckDB SQL) of kept views and macros
    meta: dict[str, str] = field(default_factory=dict)
    statements: int = 0
    deferred_audits: bool = False
    _last: _Result = field(default_factory=_Result)

    # --- the connection interface -------------------------------------------------------------
    def execute(self, sql: str, params: Mapping[str, Any] | Sequence[Any] | None = None) -> SparkStore:
        if sql.strip().rstrip(";") in _audit_texts():
            # The audits read the built relations; they run on DuckDB over the written lake (see build_spark).
            self.deferred_audits = True
            self._last = _Result(table=pa.table({"deferred": pa.array([], pa.string())}))
            return self
        if _CATALOG_FUNCS.search(sql):
            self._last = _Result(table=self._shadow().sql(sql, params=params or None).to_arrow_table())
            return self
        self._last = _Result(rows=[])
        for text, stmt in transpile.split_statements(sql):
            self._statement(text, stmt, params)
        return self

    def fetchall(self) -> list[tuple]:
        return self._last.as_rows()

    def fetchmany(self, size: int = 1) -> list[tuple]:
        return self._last.as_rows()[:size]

    def fetchone(self) -> tuple | None:
        rows = self._last.as_rows()
        return rows[0] if rows else None

    def fetchnumpy(self) -> dict[str, np.ndarray]:
        t = self._last.table
        return {name: t.column(name).to_numpy(zero_copy_only=False) for name in t.column_names}

    def fetch_arrow_table(self) -> pa.Table:
        return self._last.table

    @property
    def description(self) -> list[tuple]:
        t = self._last.table
        return [(name, str(t.schema.field(name).type), None, None, None, None, None) for name in t.column_names] \
            if t is not None else []

    def register(self, name: str, table: pa.Table) -> None:
        df = self.spark.createDataFrame(table) if table.num_rows else self._empty_from_arrow(table.schema)
        self._keep(name.lower(), df, kind="view", temp=True)

    def unregister(self, name: str) -> None:
        self._drop(name.lower())

    # --- statements ---------------------------------------------------------------------------
    def _spark_sql(self, node: exp.Expression, params) -> str:
        return transpile.spark_statement(node, self.macros, params)

    def _run(self, node: exp.Expression, params):
        sql = self._spark_sql(node, params)
        self.statements += 1
        try:
            return self.spark.sql(sql)
        except Exception as e:
            raise SparkEngineError(f"Spark rejected a build statement: {_reason(e)}",
                                   "this is a defect in the DuckDB-to-Spark rewrite layer; the statement was:\n"
                                   + sql[:2000]) from e

    def _statement(self, text: str, stmt: exp.Expression, params) -> None:
        if isinstance(stmt, (exp.Transaction, exp.Commit, exp.Rollback, exp.Set, exp.Pragma)):
            return
        macro = transpile.macro_of(stmt)
        if macro is not None:
            self.macros.defs[macro.name] = macro
            if not macro.temp:
                self._record(macro.name, text)
            return
        if isinstance(stmt, exp.Create):
            return self._create(text, stmt, params)
        if isinstance(stmt, exp.Drop):
            for name in [t.name.lower() for t in stmt.find_all(exp.Table)][:1]:
                if name not in self.relations and not stmt.args.get("exists"):
                    raise SparkEngineError(f"DROP of {name}, which does not exist", "")
                self._drop(name)
            return
        if isinstance(stmt, exp.Insert):
            return self._insert(stmt, params)
        if isinstance(stmt, exp.Update):
            return self._update(stmt, params)
        if isinstance(stmt, exp.Delete):
            return self._delete(stmt, params)
        if isinstance(stmt, exp.Describe):
            name = stmt.this.name.lower()
            schema = self._df(name).schema
            self._last = _Result(rows=[(f.name, f.dataType.simpleString().upper(), "YES", None, None, None)
                                       for f in schema.fields])
            return
        if isinstance(stmt, exp.Query):
            self._last = _Result(table=_to_arrow(self._run(stmt, params)))
            return
        raise SparkEngineError(f"the Spark engine does not run {type(stmt).__name__} statements", "")

    def _create(self, text: str, stmt: exp.Create, params) -> None:
        kind = str(stmt.args.get("kind", "")).upper()
        name = stmt.this.this.name.lower() if isinstance(stmt.this, exp.Schema) else stmt.this.name.lower()
        props = stmt.args.get("properties") or exp.Properties()
        temp = any(isinstance(p, exp.TemporaryProperty) for p in props.expressions)
        if stmt.args.get("exists") and name in self.relations:
            return
        if kind == "VIEW":
            query = self._spark_sql(stmt.expression, params)
            self.statements += 1
            self.spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW `{name}` AS {query}")
            self.relations[name] = _Relation("view", temp)
            if not temp:
                self._record(name, text)
            return
        if kind != "TABLE":
            raise SparkEngineError(f"the Spark engine does not create a {kind}", "")
        if stmt.expression is not None:
            df = self._run(stmt.expression, params)
        else:
            cols = [c for c in stmt.this.expressions if isinstance(c, exp.ColumnDef)]
            select = ", ".join(
                f"CAST(NULL AS {transpile._post_order(c.args['kind'].copy()).sql('spark')}) AS `{c.name}`" for c in cols)
            df = self.spark.sql(f"SELECT {select} WHERE false")
        self._keep(name, df, kind="table", temp=temp)

    def _insert(self, stmt: exp.Insert, params) -> None:
        target = stmt.this.this if isinstance(stmt.this, exp.Schema) else stmt.this
        name = target.name.lower()
        if name == "phaselens_meta":
            values = stmt.expression
            row = values.expressions[0] if isinstance(values, exp.Values) else None
            if row is None:
                raise SparkEngineError("phaselens_meta takes literal rows only", "")
            lit = [self._run(exp.select(*[e.copy() for e in row.expressions]), params).collect()[0]]
            self.meta[str(lit[0][0])] = str(lit[0][1])
            return
        from pyspark.sql import functions as F

        old = self._df(name)
        new = self._run(stmt.expression, params)
        if stmt.args.get("by_name"):
            have = {c.lower(): c for c in new.columns}
            cols = [(F.col(f"`{have[f.name.lower()]}`") if f.name.lower() in have else F.lit(None)).cast(f.dataType).alias(f.name)
                    for f in old.schema.fields]
        else:
            cols = [F.col(f"`{c}`").cast(f.dataType).alias(f.name) for c, f in zip(new.columns, old.schema.fields)]
        rel = self.relations[name]
        self._keep(name, old.unionByName(new.select(*cols)), kind=rel.kind, temp=rel.temp)

    def _delete(self, stmt: exp.Delete, params) -> None:
        """DELETE FROM t [AS a] [WHERE cond] as a rewrite of the table keeping the rows cond does not hold for."""
        target = stmt.this
        name = target.name.lower()
        alias = target.alias or name
        where = stmt.args.get("where")
        base = exp.Table(this=exp.to_identifier(name), alias=exp.TableAlias(this=exp.to_identifier(alias)))
        keep = exp.false() if where is None else exp.Coalesce(this=exp.paren(where.this.copy(), copy=False),
                                                               expressions=[exp.false()])
        query = exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier(alias))).from_(base).where(
            exp.Not(this=keep))
        rel = self.relations[name]
        self._keep(name, self._run(query, params), kind=rel.kind, temp=rel.temp)

    def _update(self, stmt: exp.Update, params) -> None:
        """UPDATE t [AS a] SET c = v, ... [FROM src] [WHERE cond] as a rewrite of the whole table:
        each row's new value where it matches (a target row may match at most one source row)."""
        from pyspark.sql import functions as F

        target = stmt.this
        name = target.name.lower()
        old = self._df(name)
        alias = target.alias or name
        sets = [(e.this.name, e.expression) for e in stmt.expressions]
        where = stmt.args.get("where")
        cond = where.this.copy() if where is not None else exp.true()
        values = [exp.alias_(exp.paren(v.copy(), copy=False), f"_pl_v{i}") for i, (_, v) in enumerate(sets)]
        from_ = stmt.args.get("from_") or stmt.args.get("from")
        base = exp.Table(this=exp.to_identifier(name), alias=exp.TableAlias(this=exp.to_identifier(alias)))
        if from_ is not None:
            inner = exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier(alias)), *values,
                               exp.alias_(exp.true(), "_pl_hit")).from_(base).join(
                from_.this.copy(), on=cond, join_type="LEFT")
        else:
            inner = exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier(alias)), *values,
                               exp.alias_(exp.paren(cond, copy=False), "_pl_hit")).from_(base)
        df = self._run(inner, params)
        if from_ is not None and df.count() != old.count():
            raise SparkEngineError(f"UPDATE of {name}: a row matches more than one source row", "")
        new_of = {c.lower(): i for i, (c, _) in enumerate(sets)}
        cols = []
        for f in old.schema.fields:
            c = F.col(f"`{f.name}`")
            if f.name.lower() in new_of:
                c = F.when(F.coalesce(F.col("_pl_hit"), F.lit(False)), F.col(f"_pl_v{new_of[f.name.lower()]}").cast(f.dataType)).otherwise(c)
            cols.append(c.cast(f.dataType).alias(f.name))
        rel = self.relations[name]
        self._keep(name, df.select(*cols), kind=rel.kind, temp=rel.temp)

    # --- relations ----------------------------------------------------------------------------
    def _df(self, name: str):
        rel = self.relations.get(name)
        if rel is not None and rel.df is not None:
            return rel.df
        return self.spark.table(f"`{name}`")

    def _keep(self, name: str, df, *, kind: str, temp: bool) -> None:
        try:
            df = df.localCheckpoint(eager=True)
        except Exception as e:
            raise SparkEngineError(f"Spark failed to build {name}: {_reason(e)}", "") from e
        df.createOrReplaceTempView(name)
        self.relations[name] = _Relation(kind, temp, df)
        self.catalog = [(n, s) for n, s in self.catalog if n != name]

    def _drop(self, name: str) -> None:
        self.relations.pop(name, None)
        self.catalog = [(n, s) for n, s in self.catalog if n != name]
        self.spark.catalog.dropTempView(name)

    def _record(self, name: str, text: str) -> None:
        self.catalog = [(n, s) for n, s in self.catalog if n != name] + [(name, text)]

    def _empty_from_arrow(self, schema: pa.Schema):
        from pyspark.sql.pandas.types import from_arrow_schema

        return self.spark.createDataFrame([], from_arrow_schema(schema))

    def _shadow(self) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB whose catalog lists this session's relations (for the build's catalog questions)."""
        con = duckdb.connect()
        con.execute("BEGIN TRANSACTION")  # the build runs inside one; current_transaction_id() must be stable
        for name, rel in self.relations.items():
            cols = ", ".join(f'CAST(NULL AS VARCHAR) AS "{c}"' for c in self._df(name).columns) or "1 AS _none"
            if rel.kind == "table":
                con.execute(f'CREATE TABLE "{name}" AS SELECT {cols} WHERE false')
            else:
                con.execute(f'CREATE VIEW "{name}" AS SELECT {cols} WHERE false')
        return con

    def kept_tables(self) -> list[str]:
        """The relations the build keeps (DuckDB's non-temporary tables), in creation order."""
        return [n for n, r in self.relations.items() if r.kind == "table" and not r.temp and not n.startswith("raw_")]


def _audit_texts() -> set[str]:
    from ..audits import audit_names, audit_sql

    return {audit_sql(n).strip().rstrip(";") for n in audit_names()}


def _load_raw(store: SparkStore, lake: str) -> dict[str, int]:
    counts = {}
    for rel in RAW_RELATIONS:
        df = read_relation_spark(store.spark, lake, rel)
        store._keep(rel, df, kind="table", temp=False)
        counts[rel] = store.relations[rel].df.count()
    return counts


def _write_built(store: SparkStore, lake: str) -> list[str]:
    from pyspark.sql import functions as F
    from pyspark.sql.types import Row, TimestampNTZType, TimestampType

    written = []
    for name in store.kept_tables():
        df = store.relations[name].df
        # Spark's zoned TIMESTAMP would read back in DuckDB as TIMESTAMPTZ; the DuckDB build has TIMESTAMP
        df = df.select(*[F.col(f"`{f.name}`").cast(TimestampNTZType()).alias(f.name)
                         if isinstance(f.dataType, TimestampType) else F.col(f"`{f.name}`") for f in df.schema.fields])
        df.coalesce(1).write.mode("overwrite").parquet(lake_path(lake, BUILT_DIR, name))
        written.append(name)
    rows = [Row(seq=i, kind="relation", name=n, text="") for i, n in enumerate(written)]
    rows += [Row(seq=len(rows) + i, kind="sql", name=n, text=s) for i, (n, s) in enumerate(store.catalog)]
    rows += [Row(seq=len(rows) + i, kind="meta", name=k, text=v) for i, (k, v) in enumerate(sorted(store.meta.items()))]
    store.spark.createDataFrame(rows, CATALOG_SCHEMA).coalesce(1) \
        .write.mode("overwrite").parquet(lake_path(lake, BUILT_DIR, CATALOG_DIR))
    return written


def _audit_lake(lake: str, spark) -> None:
    """The build's audits over the written lake, on DuckDB; a failure unpublishes the build (its catalog)."""
    from ..audits import run_audits
    from ..lake import open_lake, remove_catalog

    con, _ = open_lake(lake)
    try:
        run_audits(con)
    except Exception:
        con.close()
        remove_catalog(lake, spark)
        raise
    con.close()


def build_spark(
    session,
    lake: str,
    config: Config | None = None,
    *,
    on_stage: Callable[[str, float], None] | None = None,
    meta: Mapping[str, str] | None = None,
) -> BuildResult:
    """Run the build on `session` over the raw relations of `lake` and write its relations back to the lake;
    `meta` goes into the lake's catalog with the build's own metadata (readers see it in `phaselens_meta`)."""
    config = config or Config()
    result = BuildResult()
    configure(session)
    store = SparkStore(session)

    stage = stage_timer(result, on_stage)

    stage("read lake", lambda: _load_raw(store, lake))
    for stmt in sql_macros():
        store.execute(stmt)
    for name in STORE_SCHEMA_FILES:
        store.execute(sql_text(name))
    _run_stages(store, config, stage)
    store.meta.setdefault("built_at", time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()))
    store.meta["engine"] = "spark"
    store.meta.update(meta or {})
    stage("write lake", lambda: _write_built(store, lake))
    if store.deferred_audits:
        stage("audits", lambda: _audit_lake(lake, session))
    result.calls, result.unpriced_calls, result.estimated_calls, result.workloads = store.execute(
        "SELECT count(*), count(*) FILTER (WHERE NOT priced), count(*) FILTER (WHERE timing_source = 'estimated'), "
        "count(DISTINCT workload) FROM call_attribution"
    ).fetchall()[0]
    return result
