"""The build over Spark Connect: a Spark Connect server (the one PySpark ships, in local[2]) is started, and

  phaselens build --engine spark --lake L --spark-master sc://localhost:PORT --config sample_logs/phaselens.toml

runs in its own process with no JVM of its own, against a lake exported from the sample day's DuckDB store. Every
relation it writes equals the DuckDB build's, row by row (pipeline/engines/compare.py), as in test_spark_parity.
Skipped, with the reason, where PySpark's Connect client (the [spark] extra), a Java runtime or the server's
start script is missing.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

pyspark = pytest.importorskip("pyspark", reason="the Spark engine needs the [spark] extra (pip install -e '.[test,spark]')")
pytest.importorskip("grpc", reason="Spark Connect needs PySpark's Connect client (the [spark] extra installs it)")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("no Java runtime: ./dev.sh test installs Debian's openjdk-17-jre-headless", allow_module_level=True)

from phaselens.ingest.normalize import sql_macros  # noqa: E402
from phaselens.pipeline.engines.compare import compare_relation, values_equal  # noqa: E402
from phaselens.pipeline.lake import open_lake  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_logs"
CONFIG = SAMPLE / "phaselens.toml"
SPARK_HOME = Path(pyspark.__file__).parent
START = SPARK_HOME / "sbin" / "start-connect-server.sh"
READY_S = 240
NOT_BUILD_RESULTS = {"phaselens_meta", "build_state", "build_loads", "build_source_gaps", "run_files"}


def _phaselens(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "phaselens", *args], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"phaselens {' '.join(args)}:\n{r.stdout}\n{r.stderr}"
    return r


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    """sc://localhost:PORT of a Spark Connect server in local[2], stopped after the module."""
    if not START.exists():
        pytest.skip(f"this PySpark has no {START.name} (PySpark 3.4+ ships it)")
    logs = tmp_path_factory.mktemp("spark-connect")
    port = _free_port()
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOG_DIR": str(logs), "SPARK_PID_DIR": str(logs),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    log = (logs / "server.log").open("w")
    proc = subprocess.Popen(
        ["bash", str(START), "--wait", "--master", "local[2]", "--driver-memory", "2g",
         "--conf", f"spark.connect.grpc.binding.port={port}", "--conf", "spark.ui.enabled=false"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + READY_S
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                tail = (logs / "server.log").read_text()[-3000:]
                pytest.fail(f"the Spark Connect server did not listen on {port} within {READY_S} s:\n{tail}")
            time.sleep(1)
        yield f"sc://localhost:{port}"
    finally:
        with_group = os.getpgid(proc.pid) if proc.poll() is None else None
        if with_group is not None:
            os.killpg(with_group, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(with_group, signal.SIGKILL)
        log.close()


def test_the_build_over_spark_connect_equals_the_duckdb_build(tmp_path, connect_server):
    db, lake = tmp_path / "A.duckdb", tmp_path / "L"
    _phaselens("ingest", str(SAMPLE / "traces"), str(SAMPLE / "billing"), "--db", str(db))
    _phaselens("build", "--db", str(db), "--config", str(CONFIG))
    _phaselens("export", "--db", str(db), "--lake", str(lake))
    built = _phaselens("build", "--engine", "spark", "--lake", str(lake), "--spark-master", connect_server,
                       "--config", str(CONFIG))
    assert f"full build on Spark ({connect_server})" in built.stderr  # progress and outcome go to stderr

    con, path = open_lake(str(lake))
    con.close()
    both = duckdb.connect()
    both.execute(f"ATTACH '{db}' AS a (READ_ONLY)")
    both.execute(f"ATTACH '{path}' AS l (READ_ONLY)")
    for stmt in sql_macros():
        both.execute(stmt)

    def relations(catalog: str) -> set[str]:
        return {r[0] for r in both.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_catalog = ? AND table_name NOT LIKE 'raw\\_%' "
            "ESCAPE '\\'", [catalog]).fetchall()} - NOT_BUILD_RESULTS

    names = relations("a")
    assert names == relations("l") and {"call_attribution", "workloads", "reconciliation"} <= names
    differences = []
    for name in sorted(names):
        differences += compare_relation(both, name, f"SELECT * FROM a.{name}", f"SELECT * FROM l.{name}")
    assert not differences, "\n".join(map(str, differences))
    assert both.execute("SELECT count(*) FROM l.call_attribution").fetchone()[0] > 1000
    # what a user compares: `workloads --format json` from the store and from the lake; money, counts, dominance
    # and levers to the character, DOUBLE columns (summed in another order) within 1e-9 relative
    from_store = json.loads(_phaselens("workloads", "--db", str(db), "--format", "json").stdout, parse_float=Decimal)
    from_lake = json.loads(_phaselens("workloads", "--lake", str(lake), "--format", "json").stdout, parse_float=Decimal)
    assert from_store and [sorted(r) for r in from_lake] == [sorted(r) for r in from_store]
    doubles = {c for c, t, *_ in both.execute("DESCRIBE a.workloads").fetchall() if t.upper() in ("DOUBLE", "FLOAT")}
    for a, b in zip(from_store, from_lake):
        for col in a:
            if col in doubles:
                assert values_equal(None if a[col] is None else float(a[col]),
                                    None if b[col] is None else float(b[col])), (a["workload"], col, a[col], b[col])
            else:
                assert a[col] == b[col], (a["workload"], col, a[col], b[col])
