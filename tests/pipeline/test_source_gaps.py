"""Source gaps: what an instrumentation itself loses, per source, and reconciliation naming it as a cause."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from phaselens.cli import app
from phaselens.pipeline.build import build
from phaselens.pipeline.incremental import source_gaps_sql
from phaselens.pipeline.load import ingest
from phaselens.pipeline.reconcile import build_reconciliation
from phaselens.pipeline.store import connect
from tests.pipeline.test_reconcile import BOOK, cells, line, prerequisites, usd

OTLP = Path(__file__).parents[1] / "fixtures" / "otlp"
D1 = date(2026, 3, 2)
COLUMNS = ("call_id", "source", "instrumentation", "operation", "status", "provider", "model", "model_raw",
           "timing_source", "started_at", "streaming", "uncached_input_tokens", "cache_read_tokens",
           "cache_write_tokens", "output_tokens", "ttft_s")


def row(n: int, instrumentation: str | None, *, source: str = "otlp", operation: str = "chat", streaming=True,
        uncached=100, cache_read=0, cache_write=0, output=10, ttft=0.2, provider="acme", model="m1") -> dict:
    return {"call_id": f"c{n:05d}", "source": source, "instrumentation": instrumentation, "operation": operation,
            "status": "ok", "provider": provider, "model": model, "model_raw": model, "timing_source": "none",
            "started_at": datetime.combine(D1, datetime.min.time()) + timedelta(hours=12, seconds=n),
            "streaming": streaming, "uncached_input_tokens": uncached, "cache_read_tokens": cache_read,
            "cache_write_tokens": cache_write, "output_tokens": output, "ttft_s": ttft}


def insert_calls(con, rows: list[dict]) -> None:
    con.executemany(f"INSERT INTO raw_calls ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
                    [[r[c] for c in COLUMNS] for r in rows])


def gaps(con) -> dict[str, dict]:
    cur = con.execute("SELECT * FROM source_gaps")
    cols = [d[0] for d in cur.description]
    return {r[cols.index("instrumentation")]: dict(zip(cols, r)) for r in cur.fetchall()}


def test_each_kind_of_loss_is_found_per_instrumentation():
    con = connect(":memory:")
    rows = (
        [row(i, "complete 1.0") for i in range(10)]
        + [row(100 + i, "nocache 1.0", cache_read=None, cache_write=None) for i in range(10)]
        # cache counts only on calls that did not stream
        + [row(200 + i, "streamloss 1.0", streaming=i < 5, cache_read=None if i < 5 else 3,
               cache_write=None if i < 5 else 0) for i in range(10)]
        + [row(300 + i, "readsonly 1.0", cache_write=None) for i in range(10)]
        + [row(400 + i, "nottft 1.0", ttft=None) for i in range(10)]
        + [row(500 + i, "noflag 1.0", streaming=None) for i in range(10)]
        # embeddings have no cache counts, output or TTFT by nature: never a gap
        + [row(600 + i, "embedder 1.0", operation="embeddings", streaming=None, cache_read=None, cache_write=None,
               output=None, ttft=None) for i in range(10)]
        + [row(700 + i, None, source="litellm", streaming=False, ttft=None) for i in range(10)]
    )
    insert_calls(con, rows)
    got = gaps(con)
    kinds = {k: v["gap_kinds"] for k, v in got.items()}
    assert kinds == {
        "complete 1.0": [],
        "nocache 1.0": ["no_cache_counts"],
        "streamloss 1.0": ["cache_counts_lost_when_streamed"],
        "readsonly 1.0": ["no_cache_write_counts"],
        "nottft 1.0": ["no_ttft"],
        "noflag 1.0": ["no_streaming_flag"],
        "embedder 1.0": [],
        "litellm": [],  # no TTFT on calls that did not stream is no loss; the adapter stands in for the scope
    }
    assert got["nocache 1.0"]["gaps"] == "no cache counts on 100% of calls"
    assert got["streamloss 1.0"]["cache_missing_streamed_share"] == 1.0
    assert got["streamloss 1.0"]["gaps"] == "cache counts lost on 100% of streamed calls"
    assert got["nottft 1.0"]["gaps"] == "TTFT missing on 100% of streamed calls (estimated instead)"
    assert (got["complete 1.0"]["calls"], got["complete 1.0"]["streamed_calls"], got["complete 1.0"]["gaps"]) == (10, 10, "")


def test_a_small_loss_is_measured_but_not_named():
    con = connect(":memory:")
    insert_calls(con, [row(i, "mostly 2.0", cache_read=None if i < 3 else 1, cache_write=None if i < 3 else 0)
                       for i in range(10)])
    g = gaps(con)["mostly 2.0"]
    assert (g["cache_counts_missing_share"], g["gap_kinds"]) == (0.3, [])


def test_cache_counts_zeroed_on_streamed_calls_are_found_per_model():
    """Counts present but 0 on every streamed call of models whose unstreamed calls hit the cache."""
    con = connect(":memory:")
    rows = (
        # the source: unstreamed calls of m1 and m2 read the cache, its streamed calls of them all say 0
        [row(i, "zeroes 1.45", streaming=False, cache_read=2048, model="m1" if i % 2 else "m2") for i in range(4)]
        + [row(10 + i, "zeroes 1.45", streaming=True, cache_read=0, model="m1" if i % 2 else "m2") for i in range(4)]
        # another source streams only a model whose calls never hit the cache: no loss to see
        + [row(20 + i, "chatonly 1.0", streaming=False, cache_read=2048, model="rag") for i in range(4)]
        + [row(30 + i, "chatonly 1.0", streaming=True, cache_read=0, model="chat") for i in range(4)]
        # streamed calls of the cached model that do hit the cache now and then: the counts are real
        + [row(40 + i, "mixed 1.0", streaming=False, cache_read=256) for i in range(4)]
        + [row(50 + i, "mixed 1.0", streaming=True, cache_read=256 if i == 0 else 0) for i in range(4)]
        # too few streamed calls to tell
        + [row(60 + i, "few 1.0", streaming=False, cache_read=256) for i in range(4)]
        + [row(70 + i, "few 1.0", streaming=True, cache_read=0) for i in range(2)]
    )
    insert_calls(con, rows)
    got = gaps(con)
    assert got["zeroes 1.45"]["gap_kinds"] == ["cache_counts_zeroed_when_streamed"]
    assert got["zeroes 1.45"]["cache_zero_streamed_share"] == 1.0
    assert "cache counts 0 on all 4 streamed calls" in got["zeroes 1.45"]["gaps"]
    assert got["chatonly 1.0"]["gap_kinds"] == [] and got["chatonly 1.0"]["cache_zero_streamed_share"] is None
    assert got["mixed 1.0"]["gap_kinds"] == [] and got["mixed 1.0"]["cache_zero_streamed_share"] == 0.75
    assert got["few 1.0"]["gap_kinds"] == []


def test_recorded_openlit_anthropic_zeroes_streamed_cache_counts(tmp_path):
    """OpenLIT 1.45.0 around the anthropic SDK (tests/conformance/fixtures): `phaselens loads --gaps` names it."""
    import gzip

    spans = tmp_path / "openlit-anthropic.jsonl"
    fixtures = Path(__file__).parents[1] / "conformance" / "fixtures"
    spans.write_bytes(gzip.decompress((fixtures / "openlit-anthropic" / "spans.jsonl.gz").read_bytes()))
    db = tmp_path / "s.duckdb"
    con = connect(db)
    ingest(con, [spans])
    con.close()
    out = CliRunner().invoke(app, ["loads", "--gaps", "--db", str(db), "--format", "json"])
    assert out.exit_code == 0, out.output
    (g,) = json.loads(out.output)
    assert g["instrumentation"] == "openlit.instrumentation.anthropic"
    assert g["gap_kinds"] == ["cache_counts_zeroed_when_streamed"]
    # the openai instrumentation of the same release keeps streamed cache reads: no such gap
    spans = tmp_path / "openlit-openai.jsonl"
    spans.write_bytes(gzip.decompress((fixtures / "openlit-openai" / "spans.jsonl.gz").read_bytes()))
    con = connect(":memory:")
    ingest(con, [spans])
    assert gaps(con)["openlit.instrumentation.openai"]["gap_kinds"] == []


def test_cache_reads_zeroed_on_streamed_calls_are_named_by_reconciliation():
    # Anthropic-style: uncached input is right on every call; streamed calls lost their cache reads to 0
    calls = ([row(i, "zeroes 1.45", streaming=False, uncached=300, cache_read=2048, output=6) for i in range(10)]
             + [row(100 + i, "zeroes 1.45", streaming=True, uncached=300, cache_read=0, output=6) for i in range(10)])
    lines = [line(D1, "uncached_input", 6_000, usd(6_000, "uncached_input")),
             line(D1, "cache_read", 40_960, usd(40_960, "cache_read")),
             line(D1, "output", 120, usd(120, "output"))]
    got = cells(reconciled_with(calls, lines))
    read = got[("m1", D1, "cache_read")]
    assert (read["cause"], read["gap_sources"]) == ("not_recorded_by_source", "zeroes 1.45")
    assert got[("m1", D1, "uncached_input")]["cause"] == "ok"


def test_otlp_scope_name_and_version_reach_the_calls(tmp_path):
    con = connect(tmp_path / "s.duckdb")
    ingest(con, [OTLP / "openai_v2_default.jsonl", OTLP / "openllmetry_chunks.jsonl"])
    scopes = {r[0] for r in con.execute("SELECT DISTINCT instrumentation FROM requests").fetchall()}
    raw = set()
    for name in ("openai_v2_default.jsonl", "openllmetry_chunks.jsonl"):
        for text in (OTLP / name).read_text().splitlines():
            for rs in json.loads(text)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    scope = ss.get("scope") or {}
                    raw.add(" ".join(x for x in (scope.get("name"), scope.get("version")) if x) or None)
    assert scopes and scopes <= raw
    assert set(gaps(con)) == scopes


def test_store_written_before_the_column_gains_it(tmp_path):
    import duckdb

    path = tmp_path / "old.duckdb"
    con = connect(path)
    con.execute("ALTER TABLE raw_calls DROP COLUMN instrumentation")
    con.close()
    with duckdb.connect(str(path)) as raw:
        assert "instrumentation" not in [r[0] for r in raw.execute("DESCRIBE raw_calls").fetchall()]
    con = connect(path)
    assert "instrumentation" in [r[0] for r in con.execute("DESCRIBE raw_calls").fetchall()]
    ingest(con, [OTLP / "openai_v2_default.jsonl"])
    assert con.execute("SELECT count(*) FROM source_gaps").fetchone()[0] >= 1


# --- reconciliation names the source ------------------------------------------------------------------------
def reconciled_with(calls: list[dict], lines: list[dict]):
    con = connect(":memory:")
    insert_calls(con, calls)
    columns = ("billing_line_id", *lines[0])
    con.executemany(f"INSERT INTO raw_billing_lines ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                    [[f"b{i}", *ln.values()] for i, ln in enumerate(lines)])
    prerequisites(con)
    build_reconciliation(con, None, BOOK)
    return con


def test_cache_writes_an_instrumentation_does_not_record_are_named_as_the_cause():
    # Anthropic-style spans: input excludes the cache, and this instrumentation never records cache writes
    calls = [row(i, "anthro-instr 0.3", uncached=10_000, cache_read=50_000, cache_write=None, output=500)
             for i in range(20)]
    lines = [line(D1, "uncached_input", 200_000, usd(200_000, "uncached_input")),
             line(D1, "cache_read", 1_000_000, usd(1_000_000, "cache_read")),
             line(D1, "cache_write", 400_000, usd(400_000, "cache_write")),
             line(D1, "output", 10_000, usd(10_000, "output"))]
    got = cells(reconciled_with(calls, lines))
    write = got[("m1", D1, "cache_write")]
    assert (write["cause"], write["status"], write["gap_sources"]) == (
        "not_recorded_by_source", "not_traced", "anthro-instr 0.3")
    assert "cache writes not recorded by anthro-instr 0.3" in write["explanation"]
    for t in ("uncached_input", "cache_read", "output"):
        assert got[("m1", D1, t)]["cause"] == "ok"


def test_the_same_gap_with_a_source_that_records_cache_writes_stays_untraced_traffic():
    calls = [row(i, "complete 1.0", uncached=10_000, cache_read=50_000, cache_write=0, output=500) for i in range(20)]
    lines = [line(D1, "uncached_input", 200_000, usd(200_000, "uncached_input")),
             line(D1, "cache_read", 1_000_000, usd(1_000_000, "cache_read")),
             line(D1, "cache_write", 400_000, usd(400_000, "cache_write")),
             line(D1, "output", 10_000, usd(10_000, "output"))]
    write = cells(reconciled_with(calls, lines))[("m1", D1, "cache_write")]
    assert (write["cause"], write["gap_sources"]) == ("untraced_traffic", None)


def test_missing_cache_tokens_names_the_instrumentation_that_records_none():
    # OTel-style spans (input includes the cache) from an instrumentation without cache attributes
    calls = [row(i, "openai_v2 2.1b0", uncached=100_000, cache_read=None, cache_write=None, output=100)
             for i in range(10)]
    lines = [line(D1, "uncached_input", 400_000, usd(400_000, "uncached_input")),
             line(D1, "cache_read", 600_000, usd(600_000, "cache_read")),
             line(D1, "output", 1_000, usd(1_000, "output"))]
    got = cells(reconciled_with(calls, lines))
    assert got[("m1", D1, "cache_read")]["cause"] == "missing_cache_tokens"
    assert "cache counts not recorded by openai_v2 2.1b0" in got[("m1", D1, "uncached_input")]["explanation"]


def test_an_output_count_off_by_one_per_call_is_named():
    # short answers, each counted one token short (5% of the output): more than the 1% tolerance
    calls = [row(i, "chunkcounter 0.9", uncached=100, output=19) for i in range(3000)]
    lines = [line(D1, "uncached_input", 300_000, usd(300_000, "uncached_input")),
             line(D1, "output", 60_000, usd(60_000, "output"))]
    out = cells(reconciled_with(calls, lines))[("m1", D1, "output")]
    assert (out["cause"], out["status"]) == ("not_recorded_by_source", "billed_above_traced")
    assert "one token per call" in out["explanation"] and "chunkcounter 0.9" in out["explanation"]


# --- phaselens loads --gaps ---------------------------------------------------------------------------------
def test_loads_gaps_as_table_and_json(tmp_path):
    db = tmp_path / "s.duckdb"
    con = connect(db)
    insert_calls(con, [row(i, "nocache 1.0", cache_read=None, cache_write=None) for i in range(4)]
                 + [row(10 + i, "complete 1.0") for i in range(4)])
    con.close()
    runner = CliRunner()
    table = runner.invoke(app, ["loads", "--gaps", "--db", str(db)])
    assert table.exit_code == 0, table.output
    assert "nocache 1.0" in table.output and "no cache counts on 100% of calls" in table.output
    as_json = runner.invoke(app, ["loads", "--gaps", "--db", str(db), "--format", "json"])
    assert as_json.exit_code == 0, as_json.output
    rows = {r["instrumentation"]: r for r in json.loads(as_json.output)}
    assert rows["nocache 1.0"]["gap_kinds"] == ["no_cache_counts"] and rows["complete 1.0"]["gaps"] == ""


# --- spans recorded from the real instrumentations (tests/fixtures/source_gaps/record.py) ---------------------
RECORDED = Path(__file__).parents[1] / "fixtures" / "source_gaps"
TRUTH = json.loads((RECORDED / "truth.json").read_text()) if (RECORDED / "truth.json").exists() else {}
VERSIONS = json.loads((RECORDED / "versions.json").read_text()) if (RECORDED / "versions.json").exists() else {}


def _recorded_store():
    con = connect(":memory:")
    ingest(con, [RECORDED / "openai_v2.jsonl", RECORDED / "openllmetry.jsonl"])
    return con


def test_recorded_instrumentations_show_their_own_losses():
    """Every call's usage reported 1,536 cached of 1,864 prompt tokens and 0 cache writes (truth.json)."""
    got = gaps(_recorded_store())
    openllmetry = got[f"opentelemetry.instrumentation.openai.v1 {VERSIONS['opentelemetry-instrumentation-openai']}"]
    # openai-v2 spans carry the scope of the GenAI utility it writes them through, not its own name
    openai_v2 = got[f"opentelemetry.util.genai.handler {VERSIONS['opentelemetry-util-genai']}"]
    assert openai_v2["calls"] == openllmetry["calls"] == TRUTH["calls"]
    assert openai_v2["gap_kinds"] == ["no_cache_counts", "no_ttft", "no_streaming_flag"]
    assert openllmetry["gap_kinds"] == ["no_cache_write_counts"]  # reads kept, the reported 0 writes dropped
    assert openllmetry["streamed_calls"] == TRUTH["streamed"] and openllmetry["ttft_missing_streamed_share"] == 0


def _recorded_openai_v2_with_its_bill():
    """The openai-v2 calls (which record no cache counts) and the bill of their true usage."""
    con = _recorded_store()
    con.execute("DELETE FROM raw_calls WHERE instrumentation NOT LIKE 'opentelemetry.util.genai.handler%'")
    day = con.execute("SELECT CAST(min(started_at) AS DATE) FROM raw_calls").fetchone()[0]
    n = TRUTH["calls"]
    uncached = n * (TRUTH["prompt_tokens"] - TRUTH["cached_tokens"])
    bill = [line(day, "uncached_input", uncached, "0", provider="openai", model="gpt-4o-mini", category="usage_quantity"),
            line(day, "cache_read", n * TRUTH["cached_tokens"], "0", provider="openai", model="gpt-4o-mini",
                 category="usage_quantity"),
            line(day, "output", n * TRUTH["completion_tokens"], "0", provider="openai", model="gpt-4o-mini",
                 category="usage_quantity")]
    columns = ("billing_line_id", *bill[0])
    con.executemany(f"INSERT INTO raw_billing_lines ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                    [[f"b{i}", *ln.values()] for i, ln in enumerate(bill)])
    return con, day


def _blames_openai_v2(con, day) -> None:
    got = cells(con)
    source = f"opentelemetry.util.genai.handler {VERSIONS['opentelemetry-util-genai']}"
    read, plain = got[("gpt-4o-mini", day, "cache_read")], got[("gpt-4o-mini", day, "uncached_input")]
    assert (read["cause"], plain["cause"]) == ("missing_cache_tokens", "missing_cache_tokens")
    assert plain["gap_sources"] == source and f"cache counts not recorded by {source}" in plain["explanation"]
    assert got[("gpt-4o-mini", day, "output")]["cause"] == "ok"


def test_reconciliation_blames_the_recorded_instrumentation_for_cached_input_priced_as_uncached():
    con, day = _recorded_openai_v2_with_its_bill()
    prerequisites(con, None)
    build_reconciliation(con)
    _blames_openai_v2(con, day)


def test_a_full_build_reads_the_gaps_from_the_counts_it_keeps_then_leaves_the_live_view():
    """The full build's reconciliation reads `source_gaps` from `source_gap_days` (a temporary table of the view's
    name), not by counting every call again; the same cause is named, and afterwards the name is the view's."""
    con, day = _recorded_openai_v2_with_its_bill()
    build(con, full=True)
    _blames_openai_v2(con, day)
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'source_gaps'").fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'source_gaps'").fetchone()[0] == 1
    kept = con.execute(f"SELECT * FROM ({source_gaps_sql()}) ORDER BY ALL").fetchall()
    assert kept and con.execute("SELECT * FROM source_gaps ORDER BY ALL").fetchall() == kept


def test_recorded_anthropic_instrumentations():
    """Each Anthropic call's usage: 128 uncached, 1,536 read, 200 written, 212 output (truth.json)."""
    con = connect(":memory:")
    ingest(con, [RECORDED / "openllmetry_anthropic.jsonl", RECORDED / "openinference_anthropic.jsonl"])
    got = gaps(con)
    openllmetry = got[f"opentelemetry.instrumentation.anthropic {VERSIONS['opentelemetry-instrumentation-anthropic']}"]
    openinference = got[f"openinference.instrumentation.anthropic {VERSIONS['openinference-instrumentation-anthropic']}"]
    # The SDK traces itself under a global provider: each of its spans is merged with the instrumentation's span
    # of the same call (one call, one row), so it is no source of calls of its own and each call is stored once.
    assert f"com.anthropic.sdk.python {VERSIONS['anthropic']}" not in got
    assert openllmetry["calls"] == openinference["calls"] == TRUTH["calls"]
    # Neither instrumentation records TTFT (OpenInference no streaming flag either), but the SDK's span merged
    # into each call carries both: the stored calls have no such gap.
    assert openllmetry["gap_kinds"] == [] and openllmetry["streaming_flag_missing_share"] == 0
    assert openinference["gap_kinds"] == []
    truth = TRUTH["anthropic"]
    buckets = con.execute(
        "SELECT DISTINCT uncached_input_tokens, cache_read_tokens, cache_write_tokens FROM requests").fetchall()
    assert buckets == [(truth["uncached_input_tokens"], truth["cache_read_input_tokens"],
                        truth["cache_creation_input_tokens"])]
    # OpenLLMetry's streamed output count is one too many (213); the SDK's span beside it has the true count,
    # and the tokens come from one span, never mixed: the stored count is the true one.
    streamed_out = con.execute("SELECT DISTINCT output_tokens FROM requests WHERE streaming AND instrumentation = ?",
                               [openllmetry["instrumentation"]]).fetchall()
    assert streamed_out == [(truth["output_tokens"],)]


def _without_sdk_spans(src: Path, dst: Path) -> Path:
    """The recorded lines minus the anthropic SDK's own spans: as recorded where the SDK's tracing is off."""
    out = []
    for text in src.read_text().splitlines():
        batch = json.loads(text)
        for rs in batch["resourceSpans"]:
            rs["scopeSpans"] = [ss for ss in rs["scopeSpans"] if ss["scope"]["name"] != "com.anthropic.sdk.python"]
        out.append(json.dumps(batch))
    dst.write_text("\n".join(out) + "\n")
    return dst


def test_reconciliation_names_the_streamed_output_count_off_by_one(tmp_path):
    """OpenLLMetry's recorded Anthropic calls (alone: without the SDK's own spans, which would supply the true
    count), repeated to a day's traffic, against a bill of the true counts."""
    from phaselens.models.reconcile import ReconcileSettings

    con = connect(":memory:")
    ingest(con, [_without_sdk_spans(RECORDED / "openllmetry_anthropic.jsonl", tmp_path / "openllmetry_anthropic.jsonl")])
    source = f"opentelemetry.instrumentation.anthropic {VERSIONS['opentelemetry-instrumentation-anthropic']}"
    assert con.execute("SELECT count(*) FROM raw_calls WHERE instrumentation <> ?", [source]).fetchone()[0] == 0
    con.execute("CREATE TEMP TABLE one AS SELECT * FROM raw_calls")
    con.execute("INSERT INTO raw_calls SELECT one.* REPLACE (call_id || ':' || n AS call_id) FROM one, range(1, 600) t(n)")
    calls, streamed, day, model = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE streaming), CAST(min(started_at) AS DATE), min(model) FROM raw_calls"
    ).fetchone()
    truth = TRUTH["anthropic"]
    bill = [line(day, t, calls * truth[k], "0", provider="anthropic", model=model, category="usage_quantity")
            for t, k in (("uncached_input", "uncached_input_tokens"), ("cache_read", "cache_read_input_tokens"),
                         ("cache_write", "cache_creation_input_tokens"), ("output", "output_tokens"))]
    columns = ("billing_line_id", *bill[0])
    con.executemany(f"INSERT INTO raw_billing_lines ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                    [[f"b{i}", *ln.values()] for i, ln in enumerate(bill)])
    prerequisites(con, None)
    build_reconciliation(con, ReconcileSettings(token_tolerance=0.001))  # one token in 212 is 0.5%
    got = cells(con)
    out = got[(model, day, "output")]
    assert (out["cause"], out["status"]) == ("not_recorded_by_source", "traced_above_billed")
    assert f"one token per streamed call ({streamed} of {calls} traced calls streamed)" in out["explanation"]
    assert source in out["explanation"]
    for t in ("uncached_input", "cache_read", "cache_write"):
        assert got[(model, day, t)]["cause"] == "ok"
