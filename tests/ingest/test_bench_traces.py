"""Edge cases of the request-trace adapters (Azure, Mooncake, ServeGen) from small fixtures.

The real traces are covered in test_sources_real_data.py; these fixtures add bad rows and pin the
documented anchor, block-size and labelling rules.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from phaselens.ingest.trace_requests import prefix_tokens
from phaselens.pipeline.load import ingest
from phaselens.pipeline.store import connect

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "bench" / "traces"


def load(tmp_path, name, **options):
    con = connect(tmp_path / "s.duckdb")
    res = ingest(con, [TRACES / name], options=options or None)
    cur = con.execute("SELECT * FROM raw_calls")
    names = [d[0] for d in cur.description]
    rows = {r["source_locator"].rsplit(":", 1)[1]: r for r in (dict(zip(names, x)) for x in cur.fetchall())}
    rej = sorted((loc.rsplit(":", 1)[1], reason) for loc, reason in
                 con.execute("SELECT locator, reason FROM rejects").fetchall())
    return res, rows, rej


def test_prefix_tokens_are_cumulative_block_ends():
    assert prefix_tokens(1100, 3, 512) == [512, 1024, 1100]
    assert prefix_tokens(1024, 2, 512) == [512, 1024]
    assert prefix_tokens(600, 3, 512) == [512, 600, 600]  # more ids than the prompt needs: clamped
    assert prefix_tokens(40, 3, 16) == [16, 32, 40]


def test_mooncake_anchor_hashes_and_bad_rows(tmp_path):
    res, rows, rej = load(tmp_path, "mooncake.small.jsonl")
    assert res.files[0].adapter == "mooncake" and len(rows) == 3
    assert rej == [("4", "negative_tokens"), ("5", "malformed_row")]
    first, second = rows["1"], rows["2"]
    assert first["started_at"] == datetime(2024, 1, 1)  # default anchor + 0 ms
    assert second["started_at"] == datetime(2024, 1, 1, 0, 0, 1, 500000)  # + 1500 ms
    # block ids are scoped to their file, so the same id in another trace file is another block
    scope = first["prefix_hashes"][0].split(":")[0]
    assert len(scope) == 12 and all(h.startswith(scope + ":") for h in first["prefix_hashes"] + second["prefix_hashes"])
    assert [h.split(":")[1] for h in first["prefix_hashes"]] == ["0", "1", "2"] and first["prefix_tokens"] == [512, 1024, 1100]
    assert [h.split(":")[1] for h in second["prefix_hashes"]] == ["0", "3"] and second["prefix_tokens"] == [512, 600]
    assert (first["provider"], first["model"], first["timing_source"]) == ("mooncake", "unknown", "none")
    assert (first["uncached_input_tokens"], first["output_tokens"]) == (1100, 20)


def test_mooncake_anchor_and_block_size_options(tmp_path):
    _, rows, _ = load(tmp_path, "mooncake.small.jsonl", anchor="2025-06-01T12:00:00Z", block_size=256,
                      model="kimi-k1")
    assert rows["3"]["started_at"] == datetime(2025, 6, 1, 12, 0, 2, 750000)
    assert rows["2"]["prefix_tokens"] == [256, 600]  # 2 ids of 256; the last entry is the whole prompt
    assert rows["1"]["model"] == "kimi-k1"


def test_bad_anchor_fails_the_file_with_a_fix(tmp_path):
    res, rows, _ = load(tmp_path, "mooncake.small.jsonl", anchor="yesterday")
    assert res.files[0].status == "failed" and "anchor" in res.files[0].message and not rows


def test_azure_rows(tmp_path):
    res, rows, rej = load(tmp_path, "azure.small.csv")
    assert res.files[0].adapter == "azure_trace"
    assert rej == [("4", "missing_field"), ("5", "bad_number"), ("6", "malformed_row")]
    a = rows["2"]
    assert a["started_at"] == datetime(2023, 11, 16, 18, 17, 3, 979960)  # 7 fraction digits, no zone
    assert (a["uncached_input_tokens"], a["output_tokens"], a["e2e_s"]) == (4808, 10, None)
    assert (a["provider"], a["timing_source"]) == ("azure_trace", "none")


def test_servegen_rows(tmp_path):
    res, rows, rej = load(tmp_path, "servegen.small.csv")
    assert rej == [("4", "bad_number")]  # negative duration
    a = rows["2"]
    assert a["e2e_s"] == pytest.approx(14.0) and a["ttft_s"] is None and a["decode_s"] is None
    assert a["timing_source"] == "none" and a["started_at"] is None
    assert '"request_type":"multimodal"' in rows["3"]["attributes_json"]
