"""Edge cases of the LLMPerf and AIPerf adapters, from small fixtures shaped like the real exports.

The real files are covered in test_sources_real_data.py; these fixtures add the quirks the real
files lack (bad numbers, unknown units, a cut JSON line) and pin the documented labelling rules.
"""

from __future__ import annotations

import gzip
import json
from datetime import datetime
from pathlib import Path

import pytest

from phaselens.pipeline.load import ingest
from phaselens.pipeline.store import connect

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bench"
LLMPERF = FIXTURES / "llmperf" / "groq_8b.json"
AIPERF = FIXTURES / "aiperf.profile_export.jsonl"


def load(tmp_path, path, **options):
    con = connect(tmp_path / "s.duckdb")
    res = ingest(con, [path], options=options or None)
    assert not res.failed, [f.message for f in res.failed]
    cur = con.execute("SELECT * FROM raw_calls")
    names = [d[0] for d in cur.description]
    rows = {r[0]: dict(zip(names, r)) for r in cur.fetchall()}
    return con, res, rows


def by_locator(rows: dict) -> dict:
    return {r["source_locator"].rsplit(":", 1)[1]: r for r in rows.values()}


def test_llmperf_records_errors_and_labels(tmp_path):
    con, res, rows = load(tmp_path, LLMPERF)
    got = by_locator(rows)
    assert (res.files[0].accepted, res.files[0].rejected) == (3, 2)
    assert sorted(con.execute("SELECT locator, reason FROM rejects").fetchall()) == [
        (f"{LLMPERF}:[3]", "bad_number"),  # ttft_s "fast"
        (f"{LLMPERF}:[4]", "negative_tokens"),  # number_input_tokens -550
    ]
    ok = got["[0]"]  # ttft 0.5, e2e 2.0, 100 tokens
    assert ok["itl_s"] == pytest.approx(1.5 / 99)
    assert json.loads(ok["attributes_json"])["source_itl_s"] == 0.02  # LLMPerf's e2e / tokens, kept aside
    assert (ok["provider"], ok["model"], ok["model_raw"]) == ("groq", "llama-2-8b-chat", "llama-2-8b-chat")

    few = got["[1]"]  # error -100 with a response: measured values kept, status error
    assert (few["status"], few["error_type"], few["output_tokens"]) == ("error", "-100", 31)
    assert few["itl_s"] == pytest.approx(1.15 / 30)

    none = got["[2]"]  # 429 with LLMPerf's zeros: nothing was measured
    assert (none["status"], none["error_type"]) == ("error", "429")
    assert none["e2e_s"] is None and none["ttft_s"] is None and none["uncached_input_tokens"] is None

    dump = con.execute("SELECT string_agg(CAST(c AS VARCHAR), '|') FROM raw_calls c").fetchone()[0]
    assert "SECRET" not in dump  # GEN_TEXT never stored


def test_llmperf_options_win_over_file_name(tmp_path):
    _, _, rows = load(tmp_path, LLMPERF, provider="fireworks", model="accounts/fireworks/models/llama-v3-8b")
    assert {(r["provider"], r["model"]) for r in rows.values()} == {("fireworks", "llama-v3-8b")}


def test_aiperf_units_errors_and_chunks(tmp_path):
    con, res, rows = load(tmp_path, AIPERF)
    assert (res.files[0].accepted, res.files[0].rejected) == (3, 2)
    assert sorted(con.execute("SELECT locator, reason FROM rejects").fetchall()) == [
        (f"{AIPERF}:4", "malformed_json"),
        (f"{AIPERF}:5", "bad_number"),  # ttft in "fortnights"
    ]
    ok = rows["aiperf:req-ok-1"]  # ttft 1000 ms, latency 1100 ms, osl 5 = 2 output + 3 reasoning
    assert ok["ttft_s"] == pytest.approx(1.0) and ok["e2e_s"] == pytest.approx(1.1)
    assert ok["itl_s"] == pytest.approx(0.1 / 4)
    assert (ok["output_tokens"], ok["reasoning_tokens"], ok["uncached_input_tokens"]) == (5, 3, 550)
    assert ok["itl_p50_s"] == pytest.approx(0.025)  # chunks 10, 20, 30, 40 ms
    assert ok["itl_p95_s"] == pytest.approx(0.0385)  # rank 2.85: 30 + 0.85 × 10 ms
    assert ok["started_at"] == datetime(2025, 10, 3, 20, 13, 39, 159192)  # timestamp_ns, UTC
    assert ok["first_token_at"] == datetime(2025, 10, 3, 20, 13, 40, 159192)
    assert (ok["provider"], ok["model"]) == ("aiperf", "unknown")

    sec = rows["aiperf:req-seconds-2"]  # units in seconds are honoured
    assert sec["ttft_s"] == pytest.approx(0.5) and sec["itl_s"] == pytest.approx(2.0 / 200)

    err = rows["aiperf:req-cancelled-3"]
    assert (err["status"], err["error_type"]) == ("error", "RequestCancellationError")
    assert err["e2e_s"] is None and err["output_tokens"] is None
    assert err["started_at"] == datetime(2025, 10, 3, 20, 13, 39, 154829)


def test_llmperf_gzip_copy_dedupes_by_content(tmp_path):
    con, _, rows = load(tmp_path, LLMPERF)
    packed = tmp_path / "renamed.json.gz"
    packed.write_bytes(gzip.compress(LLMPERF.read_bytes()))
    res = ingest(con, [packed])
    assert (res.files[0].adapter, res.files[0].accepted, res.files[0].duplicates) == ("llmperf", 0, len(rows))
