"""Every real trace/benchmark file in shared/data loads, and its totals match the raw file.

The expected figures are computed here from the raw files with json/csv, independently of the
adapters, and compared with what the store holds. The data lives outside the repo (`../shared`
beside it, or `$PHASELENS_SHARED`); without it these tests are skipped.
"""

from __future__ import annotations

import csv
import json
import os
import statistics
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from phaselens.ingest.normalize import normalize_provider
from phaselens.pipeline.load import ingest
from phaselens.pipeline.store import connect


def shared_data() -> Path | None:
    """shared/data from $PHASELENS_SHARED (the shared folder or its data folder), else ../shared beside the repo."""
    candidates = []
    if os.environ.get("PHASELENS_SHARED"):
        env = Path(os.environ["PHASELENS_SHARED"])
        candidates += [env / "data", env]
    candidates.append(Path(__file__).resolve().parents[2] / ".." / "shared" / "data")
    for c in candidates:
        if (c / "SOURCES.md").is_file():
            return c.resolve()
    return None


DATA = shared_data()
pytestmark = pytest.mark.skipif(
    DATA is None, reason="shared/data not found (set PHASELENS_SHARED or put shared/ beside the repo)"
)


def files(pattern: str) -> list[Path]:
    return sorted(DATA.glob(pattern)) if DATA else []


LLMPERF = files("llmperf_leaderboard/individual/*.json")
LLMPERF_SUMMARY = files("llmperf_leaderboard/summary/*.json")
AIPERF = files("aiperf_example_gpt-oss-20b/profile_export.jsonl")
AIPERF_AGGREGATE = files("aiperf_example_gpt-oss-20b/profile_export_aiperf.*")
AZURE = files("azure_llm_inference_2023/*.csv")
MOONCAKE = files("mooncake_fast25/*.jsonl")
SERVEGEN = files("servegen_offline_stat_traces/*.csv")
ADAPTER_OF = {
    **{p: "llmperf" for p in LLMPERF + LLMPERF_SUMMARY},
    **{p: "aiperf" for p in AIPERF + AIPERF_AGGREGATE},
    **{p: "azure_trace" for p in AZURE},
    **{p: "mooncake" for p in MOONCAKE},
    **{p: "servegen" for p in SERVEGEN},
}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One store with every file above loaded once; returns (connection, {path: FileResult})."""
    con = connect(tmp_path_factory.mktemp("real") / "s.duckdb")
    res = ingest(con, list(ADAPTER_OF))
    return con, {Path(f.file): f for f in res.files}


def per_file(con, path: Path, where: str = "true") -> dict:
    """Totals the store holds for one file's calls."""
    row = con.execute(
        f"""SELECT count(*), sum(input_tokens) FILTER (uncached_input_tokens IS NOT NULL), sum(output_tokens),
                   avg(ttft_s), avg(e2e_s), count(*) FILTER (status = 'error')
            FROM requests WHERE starts_with(source_locator, $p) AND {where}""",
        {"p": f"{path}:"},
    ).fetchone()
    return dict(zip(("calls", "input", "output", "mean_ttft", "mean_e2e", "errors"), row))


def llmperf_rows(con, path: Path) -> list[dict]:
    cur = con.execute(
        "SELECT source_locator, status, ttft_s, e2e_s, itl_s, output_tokens, attributes_json, provider, model "
        "FROM raw_calls WHERE starts_with(source_locator, $p)", {"p": f"{path}:"})
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def test_counts_of_real_files():
    assert (len(LLMPERF), len(LLMPERF_SUMMARY), len(AIPERF), len(AZURE), len(MOONCAKE), len(SERVEGEN)) == (
        19, 19, 1, 2, 2, 3)


def test_every_file_loads_without_rejects(store):
    con, results = store
    assert set(results) == set(ADAPTER_OF)
    for path, r in results.items():
        assert (r.status, r.adapter, r.rejected) == ("loaded", ADAPTER_OF[path], 0), (path, r.message)
    assert con.execute("SELECT count(*) FROM rejects").fetchone()[0] == 0
    for path in LLMPERF_SUMMARY + AIPERF_AGGREGATE:  # aggregates: one Skip each, no calls
        assert (results[path].accepted, results[path].skipped) == (0, 1)


def test_reload_changes_nothing(store):
    con, _ = store
    before = con.execute("SELECT count(*) FROM raw_calls").fetchone()[0]
    again = ingest(con, LLMPERF[:2] + SERVEGEN)
    assert {f.status for f in again.files} == {"unchanged"}
    assert con.execute("SELECT count(*) FROM raw_calls").fetchone()[0] == before


@pytest.mark.parametrize("path", LLMPERF, ids=lambda p: p.stem)
def test_llmperf_totals_and_itl_correction(store, path):
    con, _ = store
    raw = json.loads(path.read_text())
    # a failed request with LLMPerf's zero timings got no response: it carries no measurement
    answered = [r for r in raw if not (r["error_code"] is not None and r["end_to_end_latency_s"] == 0)]
    got = per_file(con, path)
    assert got["calls"] == len(raw)
    assert got["errors"] == sum(r["error_code"] is not None for r in raw)
    assert got["input"] == sum(r["number_input_tokens"] for r in answered)
    assert got["output"] == sum(r["number_output_tokens"] for r in answered)
    assert got["mean_ttft"] == pytest.approx(statistics.fmean(r["ttft_s"] for r in answered))

    rows = {int(r["source_locator"].rsplit("[", 1)[1].rstrip("]")): r for r in llmperf_rows(con, path)}
    for i, r in enumerate(raw):
        ours = rows[i]
        if r in answered and r["number_output_tokens"] > 1:
            expected = (r["end_to_end_latency_s"] - r["ttft_s"]) / (r["number_output_tokens"] - 1)
            assert ours["itl_s"] == pytest.approx(expected, rel=1e-12)  # first token excluded
            assert json.loads(ours["attributes_json"])["source_itl_s"] == r["inter_token_latency_s"]

    # labels: provider = file name's first token (normalised, e.g. bedrock -> aws.bedrock); the model
    # size in the file name agrees with the model the run's summary file names
    provider, size = path.stem.split("_")
    summary_model = json.loads((path.parents[1] / "summary" / path.name).read_text())["model"].lower()
    assert size in summary_model
    expected_labels = {(normalize_provider(provider), f"llama-2-{size}-chat")}
    assert {(r["provider"], r["model"]) for r in rows.values()} == expected_labels


def test_llmperf_source_itl_includes_ttft_and_ours_does_not(store):
    con, _ = store
    ratios, ours_vs_theirs = [], []
    for path in LLMPERF:
        for r in llmperf_rows(con, path):
            source_itl = json.loads(r["attributes_json"])["source_itl_s"]
            if r["status"] != "ok" or r["output_tokens"] < 2:
                continue
            ratios.append(source_itl * r["output_tokens"] / r["e2e_s"])
            ours_vs_theirs.append(r["itl_s"] / source_itl)
            # ours partitions the call: TTFT + (n − 1) inter-token gaps = e2e
            assert r["ttft_s"] + r["itl_s"] * (r["output_tokens"] - 1) == pytest.approx(r["e2e_s"])
    assert statistics.median(ratios) == pytest.approx(0.995, abs=0.002)  # SOURCES.md §3
    assert statistics.median(ours_vs_theirs) < 0.95  # theirs spreads TTFT over every token


def test_aiperf_totals_and_itl(store):
    con, _ = store
    (path,) = AIPERF
    raw = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    ok = [r for r in raw if r["error"] is None]
    m = lambda r, k: r["metrics"][k]["value"]  # noqa: E731
    got = per_file(con, path)
    assert (got["calls"], got["errors"]) == (len(raw), len(raw) - len(ok)) == (100, 11)
    assert got["input"] == sum(m(r, "input_sequence_length") for r in ok)
    assert got["output"] == sum(m(r, "output_sequence_length") for r in ok)
    assert got["mean_ttft"] == pytest.approx(statistics.fmean(m(r, "ttft") for r in ok) / 1000)

    stored = {
        row[0]: row[1:] for row in con.execute(
            "SELECT call_id, itl_s, itl_p50_s, itl_p95_s, reasoning_tokens, started_at, attributes_json "
            "FROM raw_calls WHERE source = 'aiperf'").fetchall()
    }
    for r in ok:
        itl, p50, p95, reasoning, started, attrs = stored["aiperf:" + r["metadata"]["x_request_id"]]
        expected = (m(r, "request_latency") - m(r, "ttft")) / (m(r, "output_sequence_length") - 1) / 1000
        assert itl == pytest.approx(expected, rel=1e-12)
        assert json.loads(attrs)["source_itl_s"] == pytest.approx(m(r, "inter_token_latency") / 1000)
        # 'inclusive' quantiles interpolate linearly between closest ranks, as numpy's default
        cuts = statistics.quantiles([g / 1000 for g in m(r, "inter_chunk_latency")], n=100, method="inclusive")
        assert (p50, p95) == (pytest.approx(cuts[49]), pytest.approx(cuts[94]))
        assert reasoning == m(r, "reasoning_token_count")
        ns = r["metadata"]["timestamp_ns"]
        assert started == datetime(1970, 1, 1) + timedelta(microseconds=ns // 1000)


@pytest.mark.parametrize("path", AZURE, ids=lambda p: p.stem)
def test_azure_totals_and_times(store, path):
    con, _ = store
    with path.open(newline="") as f:
        raw = list(csv.DictReader(f))
    got = per_file(con, path)
    assert got["calls"] == len(raw)
    assert got["input"] == sum(int(r["ContextTokens"]) for r in raw)
    assert got["output"] == sum(int(r["GeneratedTokens"]) for r in raw)
    assert got["mean_ttft"] is None and got["mean_e2e"] is None  # no latency in this trace
    times = [datetime.strptime(r["TIMESTAMP"][:26], "%Y-%m-%d %H:%M:%S.%f") for r in raw]
    lo, hi = con.execute(
        "SELECT min(started_at), max(started_at) FROM requests WHERE starts_with(source_locator, $p)",
        {"p": f"{path}:"}).fetchone()
    assert (lo, hi) == (min(times), max(times))


@pytest.mark.parametrize("path", MOONCAKE, ids=lambda p: p.stem)
def test_mooncake_totals(store, path):
    con, _ = store
    raw = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    got = per_file(con, path)
    assert got["calls"] == len(raw)
    assert got["input"] == sum(r["input_length"] for r in raw)
    assert got["output"] == sum(r["output_length"] for r in raw)
    last = con.execute(
        "SELECT max(started_at), sum(len(prefix_hashes)), bool_and(prefix_tokens[-1] = uncached_input_tokens) "
        "FROM raw_calls WHERE starts_with(source_locator, $p)", {"p": f"{path}:"}).fetchone()
    assert last[0] == datetime(2024, 1, 1) + timedelta(milliseconds=max(r["timestamp"] for r in raw))
    assert last[1] == sum(len(r["hash_ids"]) for r in raw) and last[2] is True


def test_mooncake_conversation_block_reuse_in_sql(store):
    con, _ = store
    (path,) = [p for p in MOONCAKE if "conversation" in p.name]
    # independent: share of blocks whose id appeared in an earlier request of the trace
    seen, total, reused = set(), 0, 0
    for line in path.read_text().splitlines():
        ids = json.loads(line)["hash_ids"]
        total += len(ids)
        reused += sum(h in seen for h in ids)
        seen.update(ids)
    share_sql = con.execute(
        """
        WITH blocks AS (
          SELECT CAST(split_part(source_locator, ':', -1) AS INTEGER) AS line, unnest(prefix_hashes) AS h
          FROM requests WHERE starts_with(source_locator, $p)
        ), first_seen AS (SELECT h, min(line) AS first_line FROM blocks GROUP BY h)
        SELECT avg(CASE WHEN b.line > f.first_line THEN 1.0 ELSE 0.0 END)
        FROM blocks b JOIN first_seen f USING (h)
        """,
        {"p": f"{path}:"},
    ).fetchone()[0]
    assert share_sql == pytest.approx(reused / total, abs=1e-12)
    assert share_sql == pytest.approx(0.366, abs=0.0005)  # SOURCES.md §2


@pytest.mark.parametrize("path", SERVEGEN, ids=lambda p: p.stem)
def test_servegen_totals(store, path):
    con, _ = store
    with path.open(newline="") as f:
        raw = list(csv.DictReader(f))
    got = per_file(con, path)
    assert got["calls"] == len(raw)
    assert got["input"] == sum(int(r["input_length"]) for r in raw)
    assert got["output"] == sum(int(r["output_length"]) for r in raw)
    assert got["mean_e2e"] == pytest.approx(statistics.fmean(int(r["duration"]) for r in raw) / 1000)
    assert got["mean_ttft"] is None
