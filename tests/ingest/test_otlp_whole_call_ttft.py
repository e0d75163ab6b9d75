"""A span-stated TTFT that is the whole call's time is not a first token (docs/formats.md#timing-from-spans).

OpenLIT writes `gen_ai.server.time_to_first_token` = the call's duration (and `time_per_output_token` 0) on calls
that are not streamed. Such a value is dropped and the call timed as a non-streamed call without TTFT; a streamed
call, a span without a streaming flag, or a TTFT well inside the span keep the value as stated.
"""

from __future__ import annotations

import gzip
import json

import pytest

from tests.ingest.test_otlp_merge import CONF, batch, calls, span, write

OPENLIT = "openlit.instrumentation.openai"


def _attrs(ttft: float, *, stream: bool | None, tpot: float | str = "0") -> dict:
    a = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1-nano", "gen_ai.system": "openai",
         "gen_ai.usage.input_tokens": "1856", "gen_ai.usage.output_tokens": "150",
         "gen_ai.server.time_to_first_token": ttft, "gen_ai.server.time_per_output_token": tpot}
    if stream is not None:
        a["gen_ai.request.stream"] = stream
    return a


def _basis(c: dict) -> str | None:
    return json.loads(c["attributes_json"]).get("phaselens.ttft_basis")


@pytest.mark.parametrize("ttft_s", [0.3569, 0.3578, 0.340, 0.3600])  # 0.9 ms, 0, 17.8 ms short, and past the end
def test_non_streamed_ttft_equal_to_the_duration_is_not_used(store, load, tmp_path, ttft_s):
    load(write(tmp_path, "ol.jsonl", batch(OPENLIT, span("a", "a1", 0, 357.8, _attrs(ttft_s, stream=False)))))
    (c,) = calls(store)
    assert c["ttft_s"] is None and c["first_token_at"] is None and c["timing_source"] == "none"
    assert _basis(c) == "whole_call"
    assert c["itl_s"] is None  # OpenLIT's time_per_output_token 0 goes with it
    assert c["e2e_s"] == pytest.approx(0.3578) and c["streaming"] is False
    # the span's own attributes stay in the store as written
    assert float(json.loads(c["attributes_json"])["gen_ai.server.time_to_first_token"]) == pytest.approx(ttft_s)


def test_the_tolerance_is_the_larger_of_20_ms_and_5_percent(store, load, tmp_path):
    long = span("b", "b1", 0, 1000, _attrs(0.951, stream=False))    # 49 ms short of 1 s: within 5%
    short = span("c", "c1", 2000, 2100, _attrs(0.075, stream=False))  # 25 ms short of 100 ms: outside both
    load(write(tmp_path, "ol.jsonl", batch(OPENLIT, long, short)))
    a, b = calls(store)
    assert a["ttft_s"] is None and _basis(a) == "whole_call"
    assert b["ttft_s"] == pytest.approx(0.075) and b["timing_source"] == "measured" and _basis(b) == "span_attribute"


@pytest.mark.parametrize("stream", [True, None])
def test_streamed_or_unflagged_calls_keep_the_stated_ttft(store, load, tmp_path, stream):
    load(write(tmp_path, "ol.jsonl", batch(OPENLIT, span("d", "d1", 0, 104.4, _attrs(0.1, stream=stream, tpot=0.001)))))
    (c,) = calls(store)
    assert c["ttft_s"] == pytest.approx(0.1) and c["timing_source"] == "measured" and _basis(c) == "span_attribute"
    assert c["itl_s"] == pytest.approx(0.001)


def test_recorded_openlit_spans(store, load, tmp_path):
    """OpenLIT 1.45.0 around the real openai SDK: every non-streamed call's TTFT is its whole duration."""
    p = tmp_path / "openlit.jsonl"
    p.write_bytes(gzip.decompress((CONF / "openlit-openai" / "spans.jsonl.gz").read_bytes()))
    load(p)
    rows = calls(store)
    assert len(rows) == 12
    unstreamed = [c for c in rows if c["streaming"] is False]
    streamed = [c for c in rows if c["streaming"] is True]
    assert len(unstreamed) == 5 and len(streamed) == 7
    assert all(c["ttft_s"] is None and _basis(c) == "whole_call" for c in unstreamed)
    for c in streamed:
        own = float(json.loads(c["attributes_json"])["gen_ai.server.time_to_first_token"])
        assert c["ttft_s"] == pytest.approx(own, abs=0.001) and c["timing_source"] == "measured"
        assert c["ttft_s"] < 0.8 * c["e2e_s"]
