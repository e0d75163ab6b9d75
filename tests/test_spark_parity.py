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

# DuckDB-store bookkeeping of incremental builds (pipeline/incremental.py) and of `phaselens run` (the files
# it has seen), not build results: a Spark build is always a full build and keeps none.
NOT_BUILD_RESULTS = {"phaselens_meta", "build_state", "build_loads", "build_source_gaps", "run_files"}
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


def test_a_lake_at_a_uri_reads_and_a_failed_audit_leaves_it_unbuilt(built, spark, tmp_path, monkeypatch):
    """The URI branch of the lake code (object stores take it), run on a `file://` URI: the built lake opens
    through the URI, and when an audit fails the Spark session writes an empty catalog over it, so every reader
    sees the lake as not built (no published relation left pointing at data the audit rejected)."""
    from phaselens.pipeline.audits import AuditError
    from phaselens.pipeline.engines.spark import _audit_lake

    _, lake = built
    monkeypatch.chdir(tmp_path)  # a URI lake keeps its local file of views in ./.phaselens-lakes/
    copy = tmp_path / "copy"
    shutil.copytree(lake, copy, ignore=shutil.ignore_patterns("*.duckdb*"))
    uri = copy.resolve().as_uri()
    assert uri.startswith("file://")
    has_requests = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'requests'"

    con, views = open_lake(uri)
    assert con.execute(has_requests).fetchone()[0] == 1
    assert con.execute("SELECT count(*) FROM requests").fetchone()[0] > 1000
    con.close()
    assert views.resolve().parent == tmp_path / ".phaselens-lakes"

    # one stored call given a negative output count: the audit over the written lake must fail on it
    day = next((copy / "raw_calls").glob("day=*"))
    files = sorted(day.glob("*.parquet"))
    rw = duckdb.connect()
    broken = rw.execute(f"SELECT min(call_id) FROM read_parquet('{day}/*.parquet')").fetchone()[0]
    rw.execute(f"COPY (SELECT * REPLACE (CASE WHEN call_id = ? THEN -7 ELSE output_tokens END AS output_tokens) "
               f"FROM read_parquet('{day}/*.parquet')) TO '{tmp_path}/day.parquet' (FORMAT parquet)", [broken])
    for f in files:
        f.unlink()
    shutil.move(tmp_path / "day.parquet", day / "day.parquet")
    with pytest.raises(AuditError) as failed:
        _audit_lake(uri, spark)
    assert failed.value.audit == "no_negative_tokens_or_durations" and broken in str(failed.value)

    con, _ = open_lake(uri)
    assert con.execute(has_requests).fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM phaselens_meta WHERE key = 'built_at'").fetchone()[0] == 0
    con.close()


# ---- edge inputs: what the sample day does not exercise ------------------------------------------------------

FIXTURES = ROOT / "tests" / "fixtures"

EDGE_CONFIG = """\
# Prices of the edge inputs: gpt-4o-mini at round numbers; the vLLM model on GPU-hours, one plain deployment
# and a disaggregated pair (prefill pool, decode pool).
[[prices]]
provider = "openai"
model = "gpt-4o-mini"
input = 1.0
output = 4.0

[[deployments]]
name = "qwen-mono"
provider = "vllm"
models = ["Qwen/Qwen2.5-7B-Instruct"]
gpu_type = "H100-80GB"
gpus = 1
usd_per_gpu_hour = 2.49

[[deployments]]
name = "qwen-prefill"
provider = "vllm"
models = ["Qwen/Qwen2.5-7B-Instruct"]
gpu_type = "H100-80GB"
gpus = 2
usd_per_gpu_hour = 3.00
pool = "vllm-prefill"

[[deployments]]
name = "qwen-decode"
provider = "vllm"
models = ["Qwen/Qwen2.5-7B-Instruct"]
gpu_type = "L40S-48GB"
gpus = 4
usd_per_gpu_hour = 2.00
pool = "vllm-decode"
"""


def _edge_inputs(work: Path) -> tuple[Path, Path, Path]:
    """(traces, billing, config) of the edge cases, from the project's fixtures:
    - a model no price book knows (a LiteLLM call whose model is renamed), so unpriced;
    - LiteLLM calls without TTFT (timing estimated by the day's fit), OpenTelemetry GenAI spans of a day too
      small for a fit (timing none) and Anthropic calls with cache writes;
    - billing for 2026-11-16 and 2026-11-17 but traces only of 2026-11-16 (billing without traces), and spans
      of a later day no billing covers (traces without billing): reconciliation gaps both ways;
    - vLLM engine spans of a disaggregated prefill/decode pair and a one-worker request, on GPU-hour
      deployments (docs/pricebook.md#disaggregated-pools)."""
    from tests.ingest.test_otlp_engines import disagg_lines
    from tests.pipeline.test_gpu_pools import solo_lines

    traces, billing = work / "traces", work / "billing"
    traces.mkdir()
    billing.mkdir()
    day = (FIXTURES / "batch" / "traces" / "litellm.2026-11-16.jsonl").read_text().splitlines()
    unknown = json.loads(day[0])
    unknown.update(request_id="req-2026-11-16-unknown-00", model="acme-mystery-13b", model_group="acme-mystery-13b")
    untimed = []  # calls whose log has no completionStartTime: no TTFT, timed by the day's latency fit
    for i, line in enumerate(day[1:4]):
        call = json.loads(line)
        call.pop("completionStartTime")
        call["request_id"] = f"req-2026-11-16-untimed-{i:02d}"
        untimed.append(json.dumps(call))
    (traces / "litellm.2026-11-16.jsonl").write_text("\n".join(day + [json.dumps(unknown)] + untimed) + "\n")
    for name in ("openai_v2.jsonl", "openllmetry_anthropic.jsonl"):
        shutil.copy(FIXTURES / "source_gaps" / name, traces / name)
    (traces / "vllm_engines.jsonl").write_text(disagg_lines() + solo_lines())
    shutil.copy(FIXTURES / "batch" / "billing" / "openai_costs.2026-11-16_17.json", billing)
    config = work / "edge.toml"
    config.write_text(EDGE_CONFIG)
    return traces, billing, config


@pytest.fixture(scope="module")
def edge_built(tmp_path_factory, spark):
    """(store, lake, report folder) of the edge inputs: built by DuckDB (`ingest`, `build`) and by `phaselens run`
    with `engine = "spark"` on the same store (no new file to load; the lake is written whole, built on Spark in
    the module's session, which the run reuses, published and reported)."""
    work = tmp_path_factory.mktemp("edge")
    traces, billing, config = _edge_inputs(work)
    db, lake = work / "E.duckdb", work / "EL"
    _cli("ingest", str(traces), str(billing), "--db", str(db))
    _cli("build", "--db", str(db), "--config", str(config))
    run_config = work / "run.toml"
    run_config.write_text(config.read_text() + f"""
[run]
db = "{db}"
sources = ["{traces}", "{billing}"]
engine = "spark"
lake = "{lake}"
report_dir = "{work / 'reports'}"
report_period = "2026-11-16"
report_formats = ["json", "md"]
""")
    r = CliRunner().invoke(app, ["run", "--config", str(run_config)])
    assert r.exit_code == 0, r.output + (work / "E.duckdb.run.log").read_text()
    return db, lake, work / "reports" / "2026-11-16"


def test_edge_inputs_every_relation_equal_row_by_row(edge_built):
    db, lake, _ = edge_built
    con = _both(db, lake)
    duck = _relations(con, "a") - NOT_BUILD_RESULTS
    assert duck == _relations(con, "l") - NOT_BUILD_RESULTS
    differences = []
    for name in sorted(duck):
        differences += compare_relation(con, name, f"SELECT * FROM a.{name}", f"SELECT * FROM l.{name}")
    assert not differences, "\n".join(map(str, differences))


def test_edge_inputs_hold_the_edge_cases(edge_built):
    """Not vacuous: each edge case the comparison above covers is present in the built relations."""
    db, lake, _ = edge_built
    con = _both(db, lake)
    one = lambda sql: con.execute(sql).fetchone()[0]  # noqa: E731
    assert one("SELECT count(*) FROM l.call_costs WHERE NOT priced") > 0  # unpriced model
    assert one("SELECT count(*) FROM l.call_attribution WHERE timing_source = 'estimated'") > 0
    assert one("SELECT count(*) FROM l.call_costs WHERE price_source = 'gpu_hours'") >= 3
    assert one("SELECT count(*) FROM l.call_costs WHERE prefill_deployment = 'qwen-prefill' "
               "AND decode_deployment = 'qwen-decode'") == 2  # the disaggregated pair
    assert one("SELECT count(DISTINCT deployment) FROM l.deployment_costs") == 3
    assert one("SELECT count(*) FROM l.raw_calls WHERE cache_write_tokens > 0") > 0
    assert one("SELECT count(*) FROM l.reconciliation") > 0



def test_run_with_the_spark_engine_reports_what_the_store_reports(edge_built, tmp_path):
    db, lake, reports = edge_built
    _cli("report", "--db", str(db), "--period", "2026-11-16", "--out", str(tmp_path), "--format", "md,json")
    written = sorted(reports.glob("*.json")) + sorted(reports.glob("*.md"))
    assert written
    for f in written:
        assert f.read_text() == (tmp_path / f.name).read_text(), f.name
    assert catalog_db_path(str(lake)).with_name(catalog_db_path(str(lake)).name + ".published").is_dir()
