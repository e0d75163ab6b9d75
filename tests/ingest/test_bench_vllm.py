"""vLLM serving-benchmark detailed results, from fixtures built on the documented result shape.

`benchmark_serving.py --save-result --save-detailed` writes parallel per-request lists
(`input_lens`, `output_lens`, `ttfts` in s, `itls` = chunk gaps in s, `errors`, `generated_texts`).
Expected values are worked out by hand from the fixture lists, as the comments show.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phaselens.ingest.base import SourceFile
from phaselens.ingest.registry import detect
from phaselens.pipeline.load import ingest
from phaselens.pipeline.store import connect

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bench"
DETAILED = FIXTURES / "vllm_bench.detailed.json"
SHORT = FIXTURES / "vllm_bench.e2els_short_list.json"


def load(tmp_path, *paths, **options):
    con = connect(tmp_path / "s.duckdb")
    res = ingest(con, list(paths), options=options or None)
    assert not res.failed, [f.message for f in res.failed]
    cur = con.execute("SELECT * FROM raw_calls ORDER BY source_locator")
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, r)) for r in cur.fetchall()]
    return con, res, {r["source_locator"].rsplit(":", 1)[1]: r for r in rows}


def test_detected_from_content(tmp_path):
    other = tmp_path / "result"
    other.write_bytes(DETAILED.read_bytes())
    assert detect(SourceFile(other)).name == "vllm_bench"


def test_one_call_per_request(tmp_path):
    con, res, got = load(tmp_path, DETAILED)
    assert (res.files[0].accepted, res.files[0].rejected) == (4, 0)

    r0 = got["request[0]"]  # ttft 0.120, 4 one-token chunks summing to 0.088 s, 5 output tokens
    assert r0["e2e_s"] == pytest.approx(0.208) and r0["ttft_s"] == pytest.approx(0.120)
    assert r0["decode_s"] == pytest.approx(0.088) and r0["itl_s"] == pytest.approx(0.088 / 4)
    assert r0["itl_p50_s"] == pytest.approx(0.0215)  # median of 0.020, 0.021, 0.022, 0.025
    assert r0["itl_p95_s"] == pytest.approx(0.022 + 0.85 * 0.003)  # rank 2.85 between 0.022 and 0.025
    assert (r0["uncached_input_tokens"], r0["output_tokens"]) == (512, 5)
    assert (r0["provider"], r0["model"], r0["timing_source"]) == ("vllm", "llama-3.1-8b-instruct", "measured")

    r1 = got["request[1]"]  # 6 tokens in 3 chunks: per-token ITL differs from the chunk gap
    assert r1["itl_s"] == pytest.approx(0.091 / 5)
    assert json.loads(r1["attributes_json"])["source_itl_s"] == pytest.approx(0.091 / 3)

    r2 = got["request[2]"]  # one output token: no decode interval to divide
    assert r2["e2e_s"] == pytest.approx(0.080) and r2["decode_s"] == pytest.approx(0.0) and r2["itl_s"] is None

    r3 = got["request[3]"]  # errors[3] holds a traceback
    assert (r3["status"], r3["error_type"]) == ("error", "Traceback (most recent call last):")
    assert r3["ttft_s"] is None and r3["output_tokens"] is None
    assert json.loads(r3["attributes_json"])["requested_input_tokens"] == 2048

    attrs = json.loads(r0["attributes_json"])
    assert attrs["bench_date"] == "20250301-101500" and r0["started_at"] is None
    dump = con.execute("SELECT string_agg(CAST(c AS VARCHAR), '|') FROM raw_calls c").fetchone()[0]
    assert "SECRET" not in dump  # generated_texts never stored


def test_e2els_backend_and_short_lists(tmp_path):
    con, res, got = load(tmp_path, SHORT)
    assert (res.files[0].accepted, res.files[0].rejected) == (2, 1)
    (locator, reason), = con.execute("SELECT locator, reason FROM rejects").fetchall()
    assert locator.endswith(":request[2]") and reason == "malformed_row"  # input_lens has only 2 entries
    r0 = got["request[0]"]  # e2els given: 0.5 s, ttft 0.1 s, 10 tokens
    assert r0["e2e_s"] == pytest.approx(0.5) and r0["itl_s"] == pytest.approx(0.4 / 9)
    assert r0["provider"] == "vllm"  # backend openai-chat = a self-hosted OpenAI-compatible server
    assert r0["model"] == "qwen2.5-7b-instruct"


def test_options_override_labels_and_reload_dedupes(tmp_path):
    con, _, got = load(tmp_path, DETAILED, provider="together", model="llama-3.1-8b")
    assert {(r["provider"], r["model"]) for r in got.values()} == {("together", "llama-3.1-8b")}
    renamed = tmp_path / "copy.json"
    renamed.write_bytes(DETAILED.read_bytes())
    res = ingest(con, [renamed])  # same bytes: the ledger sees the file as already loaded
    assert res.files[0].status == "unchanged"
    res = ingest(con, [renamed], force=True)  # read again: every call id is already stored
    assert (res.files[0].accepted, res.files[0].duplicates) == (0, 4)
