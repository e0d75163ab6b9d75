"""The build on Spark gives the DuckDB build's answers, relation by relation and row by row.

On the sample day, through the commands a user runs:
  phaselens ingest sample_logs/traces sample_logs/billing --db A.duckdb
  phaselens build --db A.duckdb --config sample_logs/phaselens.toml
  phaselens export --db A.duckdb --lake L
  phaselens build --engine spark --lake L --spark-master local[2] --config sample_logs/phaselens.toml
then every relation the DuckDB build writes (and the public views over them) is compared with the lake's
(pipeline/engines/compare.py: DECIMAL exactly at the same scale, floats within 1e-9 relative), and
`workloads --format json`, `report` and the dashboard are run on both.

One SparkSession (local[2], 2 shuffle partitions) serves the whole module. Skipped, with the reason, where
PySpark or a Java runtime is missing (`./dev.sh test` installs both).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import duckdb
import pytest

pytest.importorskip("pyspark", reason="the Spark engine needs the [spark] extra (pip install -e '.[test,spark]')")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("no Java runtime: ./dev.sh test installs Debian's openjdk-17-jre-headless", allow_module_level=True)

from typer.testing import CliRunner  # noqa: E402

from phaselens.cli import app  # noqa: E402
from phaselens.pipeline.engines.compare import compare_relation  # noqa: E402
from phaselens.pipeline.lake import catalog_db_path, open_lake  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_logs"
CONFIG = SAMPLE / "phaselens.toml"

# DuckDB-store bookkeeping of incremental builds (pipeline/incremental.py), not build results: a Spark build
# is always a full build and keeps none.
NOT_BUILD_RESULTS = {"phaselens_meta", "build_state", "build_loads", "build_source_gaps"}
PUBLIC_VIEWS = ("requests", "workloads", "invoice_costs", "source_gaps", "billing_lines", "rejects", "loads")


def _cli(*args: str) -> str:
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 0, f"phaselens {' '.join(args)}:\n{r.output}"
    return r.stdout if hasattr(r, "stdout") else r.output


@pytest.fixture(scope="module")
def spark():
    from phaselens.pipeline.engines.spark import spark_session

    session = spark_session("local[2]", shuffle_partitions=2, app_name="phaselens parity tests")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def built(tmp_path_factory, spark):
    """(store, lake): the sample day built by DuckDB and, from its exported lake, by Spark."""
    work = tmp_path_factory.mktemp("parity")
    db, lake = work / "A.duckdb", work / "L"
    _cli("ingest", str(SAMPLE / "traces"), str(SAMPLE / "billing"), "--db", str(db))
    _cli("build", "--db", str(db), "--config", str(CONFIG))
    _cli("export", "--db", str(db), "--lake", str(lake))
    _cli("build", "--engine", "spark", "--lake", str(lake), "--spark-master", "local[2]", "--config", str(CONFIG))
    return db, lake


def _both(db: Path, lake: Path) -> duckdb.DuckDBPyConnection:
    from phaselens.ingest.normalize import sql_macros

    con, path = open_lake(str(lake))
    con.close()
    both = duckdb.connect()
    both.execute(f"ATTACH '{db}' AS a (READ_ONLY)")
    both.execute(f"ATTACH '{path}' AS l (READ_ONLY)")
    for stmt in sql_macros():
        both.execute(stmt)
    return both


def _relations(con: duckdb.DuckDBPyConnection, catalog: str) -> set[str]:
    return {r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = ? AND table_name NOT LIKE 'raw\\_%' "
        "ESCAPE '\\'", [catalog]).fetchall()}


def test_the_spark_build_writes_every_relation_the_duckdb_build_writes(built):
    db, lake = built
    con = _both(db, lake)
    duck = _relations(con, "a") - NOT_BUILD_RESULTS
    spark = _relations(con, "l") - NOT_BUILD_RESULTS
    assert duck == spark
    assert {"call_attribution", "call_costs", "reconciliation", "caching_opportunity", "latency_fits",
            "whatif_calls", "workloads", "requests"} <= spark


def test_every_relation_equal_row_by_row(built):
    db, lake = built
    con = _both(db, lake)
    names = sorted(_relations(con, "a") - NOT_BUILD_RESULTS)
    differences = []
    for name in names:
        differences += compare_relation(con, name, f"SELECT * FROM a.{name}", f"SELECT * FROM l.{name}")
    assert not differences, "\n".join(map(str, differences))
    # not vacuous: the sample day has calls, money, estimated timing and billing gaps to compare
    n = con.execute("SELECT count(*), count(*) FILTER (WHERE timing_source = 'estimated'), sum(cost_usd) "
                    "FROM l.call_attribution").fetchone()
    assert n[0] > 1000 and n[1] > 0 and n[2] > 0
    assert con.execute("SELECT count(*) FROM l.reconciliation").fetchone()[0] > 0


def test_workloads_json_is_identical(built):
    db, lake = built
    from decimal import Decimal

    from phaselens.pipeline.engines.compare import values_equal

    from_store = json.loads(_cli("workloads", "--db", str(db), "--format", "json"), parse_float=Decimal)
    from_lake = json.loads(_cli("workloads", "--lake", str(lake), "--format", "json"), parse_float=Decimal)
    assert from_store and [sorted(r) for r in from_lake] == [sorted(r) for r in from_store]
    con = duckdb.connect(str(db), read_only=True)
    exact = {c for c, t, *_ in con.execute("DESCRIBE workloads").fetchall() if not t.upper() in ("DOUBLE", "FLOAT")}
    for a, b in zip(from_store, from_lake):
        for col in a:
            if col in exact:  # DECIMAL money, counts, text (dominance, levers), timestamps: the same characters
                assert a[col] == b[col], (a["workload"], col, a[col], b[col])
            else:  # DOUBLE: summed in another order on Spark, so equal within 1e-9 relative
                x = None if a[col] is None else float(a[col])
                y = None if b[col] is None else float(b[col])
                assert values_equal(x, y), (a["workload"], col, a[col], b[col])


def test_report_on_a_spark_built_lake(built, tmp_path):
    db, lake = built
    out_lake, out_db = tmp_path / "lake", tmp_path / "db"
    _cli("report", "--lake", str(lake), "--period", "2026-11-16", "--out", str(out_lake), "--format", "md,json")
    _cli("report", "--db", str(db), "--period", "2026-11-16", "--out", str(out_db), "--format", "md,json")
    md = sorted(out_lake.glob("*.md"))
    assert md and md[0].read_text().strip()
    for f in md + sorted(out_lake.glob("*.json")):
        assert f.read_text() == (out_db / f.name).read_text(), f.name


def test_dashboard_on_a_spark_built_lake(built, monkeypatch):
    from streamlit.testing.v1 import AppTest

    db, lake = built
    path = catalog_db_path(str(lake))
    assert (path.parent / (path.name + ".published")).is_dir(), "build --engine spark publishes a snapshot"
    monkeypatch.setenv("PHASELENS_DB", str(path))
    at = AppTest.from_file(str(ROOT / "app" / "streamlit_app.py"), default_timeout=90)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    calls = duckdb.connect(str(db), read_only=True).execute("SELECT count(*) FROM requests").fetchone()[0]
    shown = [m.value for m in at.metric if m.label == "Calls"]
    assert shown == [f"{calls:,}"]
