"""Gateway and observability exports (LiteLLM, Langfuse, Helicone) loaded through the pipeline.

Fixtures in tests/fixtures/gateways/ are built from the examples and quirks of docs/formats.md#litellm-spend-logs,
docs/formats.md#langfuse-observations and docs/formats.md#helicone-request-logs
(including LiteLLM's completionStartTime fallback). Every expected number below is worked out by
hand from the fixture's own values, as the comments show.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from phaselens.ingest.base import SourceFile
from phaselens.ingest.registry import detect
from phaselens.pipeline.load import ingest
from phaselens.pipeline.store import connect

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gateways"
SECRET = "SECRET"  # every fixture's prompt/completion text contains this word

COLUMNS = (
    "call_id, source, provider, model, uncached_input_tokens, cache_read_tokens, cache_write_tokens, "
    "cache_write_1h_tokens, output_tokens, reasoning_tokens, e2e_s, ttft_s, prefill_s, decode_s, itl_s, "
    "timing_source, status, error_type, workload_hint, team, api_key, \"user\", environment, streaming, "
    "provided_cost_usd, attributes_json, started_at, first_token_at, ended_at, operation"
)


@pytest.fixture
def load(tmp_path):
    """Load fixture files into a fresh store; returns (connection, IngestResult)."""

    def run(*names: str):
        con = connect(tmp_path / "s.duckdb")
        res = ingest(con, [FIXTURES / n for n in names])
        assert not res.failed, [f.message for f in res.failed]
        return con, res

    return run


def calls(con) -> dict[str, dict]:
    cur = con.execute(f"SELECT {COLUMNS} FROM raw_calls")
    names = [d[0] for d in cur.description]
    return {row[0]: dict(zip(names, row)) for row in cur.fetchall()}


def rejects(con) -> list[tuple[str, str]]:
    return sorted(con.execute("SELECT locator, reason FROM rejects").fetchall())


def attrs(call: dict) -> dict:
    return json.loads(call["attributes_json"] or "{}")


def assert_no_text(con) -> None:
    """No prompt or completion text in any stored column or reject."""
    dump = con.execute("SELECT string_agg(CAST(c AS VARCHAR), '|') FROM raw_calls c").fetchone()[0] or ""
    dump += con.execute("SELECT string_agg(coalesce(raw, '') || detail, '|') FROM raw_rejects").fetchone()[0] or ""
    assert SECRET not in dump


# ---------------------------------------------------------------- detection


@pytest.mark.parametrize(
    "name, adapter",
    [
        ("litellm.spendlogs.json", "litellm"),
        ("litellm.spendlogs.csv", "litellm"),
        ("litellm.spendlogs.jsonl", "litellm"),
        ("langfuse.observations.json", "langfuse"),
        ("langfuse.observations.csv", "langfuse"),
        ("langfuse.observations.jsonl", "langfuse"),
        ("helicone.requests.json", "helicone"),
        ("helicone.clickhouse.csv", "helicone"),
    ],
)
def test_detected_from_content_not_name(tmp_path, name, adapter):
    renamed = tmp_path / "export.data"  # no telling suffix: detection must read the content
    renamed.write_bytes((FIXTURES / name).read_bytes())
    assert detect(SourceFile(renamed)).name == adapter


def test_otlp_and_billing_shapes_not_claimed(tmp_path):
    otlp = tmp_path / "spans.json"
    otlp.write_text(json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": []}]}) + "\n")
    usage = tmp_path / "usage.json"
    usage.write_text(json.dumps({"object": "page", "data": [{"object": "bucket", "start_time": 1, "end_time": 2,
                                                            "results": [{"input_tokens": 5}]}]}))
    from phaselens.ingest.registry import adapters

    mine = {"litellm", "langfuse", "helicone", "llmperf", "aiperf", "vllm_bench", "azure_trace", "mooncake",
            "servegen"}
    for path in (otlp, usage):
        assert not [a.name for a in adapters() if a.name in mine and a.sniff(SourceFile(path))]


# ---------------------------------------------------------------- LiteLLM


def test_litellm_json_rows(load):
    con, res = load("litellm.spendlogs.json")
    got = calls(con)
    assert res.files[0].accepted == 6 and res.files[0].rejected == 2
    assert rejects(con) == [
        (f"{FIXTURES / 'litellm.spendlogs.json'}:[5]", "missing_model"),
        (f"{FIXTURES / 'litellm.spendlogs.json'}:[6]", "end_before_start"),
    ]

    a = got["litellm:chatcmpl-9b2f6c1e-4a7d-4f3e-9d0a-5c8e2b1f7a64"]  # docs/formats.md#litellm-spend-logs example, streamed
    assert a["ttft_s"] == pytest.approx(0.412)  # completionStartTime 00.535 − startTime 00.123
    assert a["e2e_s"] == pytest.approx(3.412)  # request_duration_ms
    assert a["decode_s"] == pytest.approx(3.0)
    assert a["itl_s"] == pytest.approx(3.0 / 211)  # 212 output tokens, first excluded
    assert a["timing_source"] == "measured" and a["streaming"] is True
    assert (a["uncached_input_tokens"], a["cache_read_tokens"], a["output_tokens"]) == (1864, None, 212)
    assert a["provided_cost_usd"] == Decimal("0.0002916")
    assert (a["provider"], a["model"], a["api_key"], a["team"], a["user"]) == (
        "openai", "gpt-4o-mini", "support-bot", "team-support", "cust_4412")
    assert a["environment"] == "prod"  # the plain tag "prod" is an environment, not a feature
    assert a["workload_hint"] is None

    b = got["litellm:chatcmpl-nonstream-0002"]  # completionStartTime == endTime: LiteLLM's fallback
    assert b["ttft_s"] is None and b["prefill_s"] is None and b["itl_s"] is None
    assert b["timing_source"] == "none"
    assert b["e2e_s"] == pytest.approx(2.5)  # no request_duration_ms: endTime − startTime
    assert attrs(b)["completion_start_is_end"] is True
    # OpenAI-style prompt_tokens 1500 include usage_object.prompt_tokens_details.cached_tokens 1024
    assert (b["uncached_input_tokens"], b["cache_read_tokens"]) == (476, 1024)
    assert (b["output_tokens"], b["reasoning_tokens"]) == (300, 64)
    assert b["model"] == "o4-mini" and b["workload_hint"] == "invoice-summarizer"  # spend_logs_metadata.feature

    c = got["litellm:msg_01anthropicstream"]  # LiteLLM's Anthropic prompt_tokens = 200 + 4000 read + 1000 write
    assert (c["uncached_input_tokens"], c["cache_read_tokens"], c["cache_write_tokens"]) == (200, 4000, 1000)
    assert c["team"] == "research" and c["api_key"] == "researcher-key"  # team alias wins over team_id
    assert c["workload_hint"] == "deep-research" and c["environment"] == "staging"
    assert c["ttft_s"] == pytest.approx(1.25) and c["itl_s"] == pytest.approx(2.75 / 149)

    d = got["litellm:msg_02oldlitellm"]  # prompt 100 < cache read 300: cannot include it
    assert (d["uncached_input_tokens"], d["cache_read_tokens"], d["cache_write_tokens"]) == (100, 300, 0)
    assert attrs(d)["prompt_tokens_excludes_cache"] is True
    assert d["provider"] == "anthropic" and d["model"] == "claude-3-5-haiku"  # provider from the model prefix

    h = got["litellm:msg_03rawanthropicusage"]  # usage object in Anthropic's own shape: input excludes cache
    assert (h["uncached_input_tokens"], h["cache_read_tokens"], h["cache_write_tokens"]) == (50, 2000, 500)
    assert h["operation"] == "chat"

    e = got["litellm:chatcmpl-failed-0005"]
    assert (e["status"], e["error_type"], e["provider"]) == ("error", "RateLimitError", "azure.ai.openai")
    assert_no_text(con)


def test_litellm_csv_cells_hold_json(load):
    con, res = load("litellm.spendlogs.csv")
    got = calls(con)
    assert len(got) == 3 and rejects(con) == [(f"{FIXTURES / 'litellm.spendlogs.csv'}:5", "bad_number")]
    a = got["litellm:csv-chatcmpl-9b2f6c1e-4a7d-4f3e-9d0a-5c8e2b1f7a64"]  # space-separated times, no zone
    assert a["ttft_s"] == pytest.approx(0.412) and a["api_key"] == "support-bot"
    assert str(a["started_at"]) == "2025-08-13 10:00:00.123000"
    b = got["litellm:csv-chatcmpl-nonstream-0002"]
    assert (b["uncached_input_tokens"], b["cache_read_tokens"], b["reasoning_tokens"]) == (476, 1024, 64)
    assert b["workload_hint"] == "invoice-summarizer"
    c = got["litellm:csv-msg_01anthropicstream"]
    assert (c["uncached_input_tokens"], c["cache_read_tokens"], c["cache_write_tokens"]) == (200, 4000, 1000)


def test_litellm_jsonl_bad_line_is_rejected_alone(load):
    con, res = load("litellm.spendlogs.jsonl")
    assert sorted(calls(con)) == ["litellm:jsonl-a", "litellm:jsonl-c"]
    assert rejects(con) == [(f"{FIXTURES / 'litellm.spendlogs.jsonl'}:2", "malformed_json")]
    assert con.execute("SELECT raw FROM rejects").fetchone()[0] is None  # a broken line may hold prompt text


def test_litellm_reload_is_idempotent(load, tmp_path):
    con, _ = load("litellm.spendlogs.json")
    copy = tmp_path / "renamed.json"
    copy.write_bytes((FIXTURES / "litellm.spendlogs.json").read_bytes() + b"\n")  # new bytes, same rows
    res = ingest(con, [copy])
    assert (res.files[0].accepted, res.files[0].duplicates) == (0, 6)
    assert con.execute("SELECT count(*) FROM raw_calls").fetchone()[0] == 6


# ---------------------------------------------------------------- Langfuse


def test_langfuse_observations(load):
    con, res = load("langfuse.observations.json")
    got = calls(con)
    f = res.files[0]
    assert (f.accepted, f.skipped, f.rejected) == (9, 2, 1)  # SPAN + EVENT skipped, no-model GENERATION rejected
    assert rejects(con) == [(f"{FIXTURES / 'langfuse.observations.json'}:data[9]", "missing_model")]

    a = got["langfuse:a3c5e1f0b2d94c7e"]  # docs/formats.md#langfuse-observations example: input already excludes the cache
    assert (a["uncached_input_tokens"], a["cache_read_tokens"], a["output_tokens"]) == (328, 1536, 212)
    assert a["ttft_s"] == pytest.approx(0.412) and a["e2e_s"] == pytest.approx(3.412)  # seconds
    assert a["itl_s"] == pytest.approx(3.0 / 211)
    assert a["provided_cost_usd"] == Decimal("0.0002916")  # costDetails.total
    assert (a["workload_hint"], a["environment"], a["model"]) == ("support-chat", "production", "gpt-4o-mini")

    b = got["langfuse:gen-cache-read-reasoning"]  # {input, output, input_cache_read, output_reasoning}
    assert (b["uncached_input_tokens"], b["cache_read_tokens"]) == (120, 40)
    assert (b["output_tokens"], b["reasoning_tokens"]) == (140, 60)  # output 80 excludes reasoning 60
    assert b["e2e_s"] == pytest.approx(2.0) and b["ttft_s"] is None and b["timing_source"] == "none"
    assert b["provided_cost_usd"] == Decimal("0.000748")  # no total: 0.000132 + 0.000616

    c = got["langfuse:gen-dotted-keys"]  # prompt_details.cache_read / completion_details.reasoning keys
    assert (c["uncached_input_tokens"], c["cache_read_tokens"], c["output_tokens"], c["reasoning_tokens"]) == (
        50, 450, 40, 10)
    assert c["itl_s"] == pytest.approx(1.0 / 39)

    d = got["langfuse:gen-anthropic-otel"]  # 5m + 1h cache writes
    assert (d["cache_read_tokens"], d["cache_write_tokens"], d["cache_write_1h_tokens"]) == (3000, 1500, 1000)
    assert d["provider"] == "anthropic"  # from metadata gen_ai.system

    e = got["langfuse:gen-latency-ms-slip"]  # latency 1707 but the timestamps are 1.707 s apart
    assert e["e2e_s"] == pytest.approx(1.707)
    assert attrs(e)["latency_unit_fix"] == "ms_to_s" and attrs(e)["source_latency_s"] == 1707

    g = got["langfuse:gen-latency-outlier"]  # no endTime to check against: kept, flagged
    assert g["e2e_s"] == pytest.approx(1707.0) and attrs(g)["latency_outlier"] is True

    h = got["langfuse:gen-error"]
    assert (h["status"], h["error_type"]) == ("error", "upstream 503 Service Unavailable")

    v = got["langfuse:gen-vertex-total"]  # total 2023 != 5 + 845: the parts win, total kept aside
    assert (v["uncached_input_tokens"], v["output_tokens"]) == (5, 845)
    assert attrs(v)["source_total_tokens"] == 2023

    s = got["langfuse:gen-completion-start"]  # no timeToFirstToken: completionStartTime − startTime
    assert s["ttft_s"] == pytest.approx(0.8) and s["itl_s"] == pytest.approx(4.2 / 400)
    assert_no_text(con)


def test_langfuse_csv_and_jsonl(load):
    con, res = load("langfuse.observations.csv", "langfuse.observations.jsonl")
    got = calls(con)
    csv_f, jsonl_f = res.files
    assert (csv_f.accepted, csv_f.skipped, jsonl_f.accepted, jsonl_f.skipped) == (3, 1, 1, 2)
    a = got["langfuse:csv-a3c5e1f0b2d94c7e"]  # usageDetails / costDetails as JSON string cells
    assert (a["uncached_input_tokens"], a["cache_read_tokens"], a["output_tokens"]) == (328, 1536, 212)
    assert a["ttft_s"] == pytest.approx(0.412) and a["provided_cost_usd"] == Decimal("0.0002916")
    d = got["langfuse:csv-gen-anthropic-otel"]
    assert (d["cache_write_tokens"], d["cache_write_1h_tokens"]) == (1500, 1000)
    b = got["langfuse:csv-gen-cache-read-reasoning"]
    assert (b["output_tokens"], b["reasoning_tokens"], b["e2e_s"]) == (140, 60, 2.0)
    assert got["langfuse:jsonl-a3c5e1f0b2d94c7e"]["uncached_input_tokens"] == 328
    assert_no_text(con)


# ---------------------------------------------------------------- Helicone


def test_helicone_rest(load):
    con, res = load("helicone.requests.json")
    got = calls(con)
    assert len(got) == 4 and not rejects(con)
    a = got["helicone:0f6c7a9e-2b1d-4c8e-9a3f-7d5e1b2c4a60"]  # docs/formats.md#helicone-request-logs example
    assert a["ttft_s"] == pytest.approx(0.412) and a["e2e_s"] == pytest.approx(3.412)  # ms -> s
    assert (a["uncached_input_tokens"], a["cache_read_tokens"], a["cache_write_tokens"]) == (328, 1536, 0)
    assert a["provided_cost_usd"] == Decimal("0.0002916")  # costUSD, dollars
    assert (a["provider"], a["model"], a["workload_hint"], a["user"]) == (
        "openai", "gpt-4o-mini", "support-chat", "cust_4412")

    b = got["helicone:1a2b3c4d-0000-4000-8000-000000000002"]  # non-streamed, cache write 2000 of 2400
    assert b["ttft_s"] is None and b["timing_source"] == "none" and b["e2e_s"] == pytest.approx(1.2)
    assert (b["uncached_input_tokens"], b["cache_write_tokens"]) == (400, 2000)
    assert (b["provider"], b["environment"], b["workload_hint"]) == ("anthropic", "staging", "triage")

    c = got["helicone:1a2b3c4d-0000-4000-8000-000000000003"]
    assert (c["status"], c["error_type"]) == ("error", "http_429")

    d = got["helicone:1a2b3c4d-0000-4000-8000-000000000004"]  # TTFT == latency: the response came whole
    assert d["ttft_s"] is None and attrs(d)["source_ttft_s"] == pytest.approx(0.9)
    assert_no_text(con)


def test_helicone_clickhouse_cost_is_usd_times_1e9(load):
    con, _ = load("helicone.clickhouse.csv")
    got = calls(con)
    a = got["helicone:5d0c9a8e-1111-4c8e-9a3f-7d5e1b2c4a60"]
    assert a["provided_cost_usd"] == Decimal("0.0002916")  # cost 291600 / 1e9
    assert a["ttft_s"] == pytest.approx(0.412) and a["e2e_s"] == pytest.approx(3.412)  # latency in ms
    assert a["workload_hint"] == "support-chat"  # from the ClickHouse map literal
    b = got["helicone:5d0c9a8e-2222-4c8e-9a3f-7d5e1b2c4a61"]
    assert b["provided_cost_usd"] == Decimal("0.001234567")  # 1234567 / 1e9
    assert (b["status"], b["error_type"], b["ttft_s"]) == ("error", "http_500", None)  # TTFT 0 = none
