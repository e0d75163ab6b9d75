"""The sample-data generator: determinism, OTLP JSON shape, traffic mix, conventions, truth vs spans."""

from __future__ import annotations

import csv
import gzip
import json
import math
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from phaselens.sample_logs import generate as generate_module
from phaselens.sample_logs.generate import main, simulate, write_traces
from phaselens.sample_logs.profile import INLINE_MODEL

SEED, CALLS = 11, 500
AZURE = "acme-editor-prod.openai.azure.com"  # the Azure OpenAI resource the chat's gpt-4.1-mini calls
HEX32, HEX16 = re.compile(r"^[0-9a-f]{32}$"), re.compile(r"^[0-9a-f]{16}$")
CAMEL = re.compile(r"^[a-z][A-Za-z]*$")
PROMPT, COMPLETION = "PHASELENS-SECRET-PROMPT", "PHASELENS-SECRET-COMPLETION"
PROMPT_KEYS = re.compile(r"^(gen_ai\.input\.messages|gen_ai\.prompt\.\d+\.content"
                         r"|llm\.input_messages\.\d+\.message\.content|input\.value)$")
COMPLETION_KEYS = re.compile(r"^(gen_ai\.output\.messages|gen_ai\.completion\.0\.content"
                             r"|llm\.output_messages\.0\.message\.content|output\.value)$")


# ---- helpers: read the files back the way a consumer would -------------------------------------------
def read_lines(path: Path) -> list[str]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def value_of(v: dict):
    ((kind, raw),) = v.items()
    if kind == "intValue":
        assert isinstance(raw, str) and re.fullmatch(r"-?\d+", raw), v  # int64 as a decimal string
        return int(raw)
    if kind == "arrayValue":
        return [value_of(x) for x in raw.get("values", [])]
    assert kind in ("stringValue", "doubleValue", "boolValue"), v
    return raw


def attrs_of(obj: dict) -> dict:
    return {a["key"]: value_of(a["value"]) for a in obj.get("attributes", [])}


def load_spans(directory: Path) -> list[dict]:
    """Every span with its resource attributes, scope name and flattened attributes."""
    out = []
    for path in sorted(directory.glob("*.jsonl*")):
        for line in read_lines(path):
            doc = json.loads(line)
            for rs in doc["resourceSpans"]:
                resource = attrs_of(rs["resource"])
                for ss in rs["scopeSpans"]:
                    for span in ss["spans"]:
                        out.append({"file": path.name, "resource": resource, "scope": ss["scope"]["name"],
                                    "raw": span, "attrs": attrs_of(span), "name": span["name"],
                                    "start": int(span["startTimeUnixNano"]), "end": int(span["endTimeUnixNano"])})
    return out


def is_llm(span: dict) -> bool:
    a = span["attrs"]
    return (span["name"] == "llm_request" or a.get("openinference.span.kind") == "LLM"
            or span["name"] == "openai.chat" or a.get("gen_ai.operation.name") in ("chat", "embeddings"))


@pytest.fixture(scope="module")
def day(tmp_path_factory):
    """A small simulated day written to disk: (truth, spans, summary, out_dir, truth csv path)."""
    root = tmp_path_factory.mktemp("day")
    truth = simulate(SEED, CALLS)
    summary = write_traces(truth, root / "traces", seed=SEED)
    truth_csv = root / "truth.csv"
    args = ["--seed", str(SEED), "--calls", str(CALLS), "--out", str(root / "cli"), "--truth", str(truth_csv)]
    assert main(args) == 0
    return truth, load_spans(root / "traces"), summary, root, truth_csv


@pytest.fixture(scope="module")
def by_span_id(day):
    truth, spans, *_ = day
    calls = {c.span_id: c for c in truth if c.traced}
    return [(s, calls[s["raw"]["spanId"]]) for s in spans if is_llm(s)]


# ---- determinism ----------------------------------------------------------------------------------------
def test_same_seed_same_bytes_any_worker_count(tmp_path, day):
    _, _, _, root, _ = day
    again = tmp_path / "again"
    write_traces(simulate(SEED, CALLS), again, seed=SEED, workers=2)
    first = {p.name: p.read_bytes() for p in (root / "traces").iterdir()}
    second = {p.name: p.read_bytes() for p in again.iterdir()}
    assert first == second
    cli = {p.name: p.read_bytes() for p in (root / "cli").iterdir()}
    assert cli == first  # the command line writes the same thing


def test_different_seed_differs():
    assert simulate(1, 200) == simulate(1, 200)
    assert [c.start_ns for c in simulate(1, 200)] != [c.start_ns for c in simulate(2, 200)]


# ---- OTLP JSON encoding (docs/formats.md#otlp-json-traces) -------------------------------------------------------------
def _walk_keys(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _walk_keys(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _walk_keys(v)


def test_span_encoding_hex_ids_string_int64_integer_enums(day):
    _, spans, summary, root, _ = day
    names = [p.name for p in (root / "traces").iterdir()]
    assert any(n.endswith(".jsonl.gz") for n in names) and any(n.endswith(".jsonl") for n in names)
    for path in (root / "traces").iterdir():  # JSON Lines, each line one whole export request
        assert all(list(json.loads(line)) == ["resourceSpans"] for line in read_lines(path))
    assert len(spans) == summary.spans > 0 and sorted(summary.files) == sorted((root / "traces").iterdir())
    assert summary.bytes_written == sum(p.stat().st_size for p in summary.files)
    for s in spans:
        raw = s["raw"]
        assert HEX32.match(raw["traceId"]) and HEX16.match(raw["spanId"])
        assert "parentSpanId" not in raw or HEX16.match(raw["parentSpanId"])
        for key in ("startTimeUnixNano", "endTimeUnixNano"):
            assert isinstance(raw[key], str) and raw[key].isdigit()
        assert isinstance(raw["kind"], int) and 1 <= raw["kind"] <= 5
        assert isinstance(raw["status"], dict)
        assert raw["status"] == {} or raw["status"]["code"] == 2
        for event in raw.get("events", []):
            assert isinstance(event["timeUnixNano"], str) and event["timeUnixNano"].isdigit()
        assert all(CAMEL.match(k) for k in _walk_keys(raw))  # lowerCamelCase JSON keys throughout
        assert "droppedAttributesCount" not in raw and "droppedEventsCount" not in raw  # zero values omitted
        assert s["end"] >= s["start"]
        r = s["resource"]  # set by the SDK and the service; no detectors (host names, random instance ids)
        assert r["deployment.environment.name"] == "production" and r["service.version"]
        assert r["telemetry.sdk.name"] == "opentelemetry" and r["telemetry.sdk.language"] == "python"
        assert "service.instance.id" not in r and "host.name" not in r


# ---- traffic mix ------------------------------------------------------------------------------------------
def test_workload_shares_and_untraced_share():
    truth = simulate(SEED, 4000)
    traced = [c for c in truth if c.traced]
    shares = Counter(c.workload for c in traced)
    expected = {"tab_completion": 0.55, "inline_edit": 0.15, "chat": 0.15, "agent": 0.10, "indexing": 0.05}
    for workload, share in expected.items():
        assert shares[workload] / len(traced) == pytest.approx(share, abs=0.005)
    openai = [c for c in truth if c.provider == "openai"]  # OpenAI's own API; Azure OpenAI is another provider
    untraced = [c for c in truth if not c.traced]
    assert {c.service for c in untraced} == {"batch-summarizer"}
    assert len(untraced) / len(openai) == pytest.approx(0.03, abs=0.005)
    errors = sum(c.status == "error" for c in truth) / len(truth)
    assert 0.005 <= errors <= 0.02


def test_traffic_moved_to_clouds_runs_there():
    """Inline edits call Claude through Amazon Bedrock (a global inference profile), chat's gpt-4.1-mini runs on
    Azure OpenAI; the rest goes to the providers directly."""
    ran = {(c.workload, c.provider, c.model) for c in simulate(SEED, 2000)}
    assert ran == {("tab_completion", "vllm", "qwen2.5-coder-7b"), ("indexing", "openai", "text-embedding-3-small"),
                   ("inline_edit", "aws.bedrock", "global.anthropic.claude-sonnet-4-20250514-v1:0"),
                   ("chat", "openai", "gpt-4o"), ("chat", "azure.ai.openai", "gpt-4.1-mini"),
                   ("agent", "anthropic", "claude-sonnet-4-20250514"), ("agent", "openai", "o4-mini"),
                   ("batch_summarizer", "openai", "gpt-4o-mini")}


def test_diurnal_curve_quiet_night_busy_day_lunch_dip():
    truth = simulate(SEED, 6000)
    per_hour = Counter(c.started_at.hour for c in truth if c.workload == "tab_completion")
    night = sum(per_hour[h] for h in range(0, 5)) / 5
    peak = (per_hour[10] + per_hour[15]) / 2
    assert peak > 10 * night
    assert per_hour[12] < 0.8 * peak
    assert all(c.started_at.date().isoformat() == "2026-11-16" for c in truth if c.workload == "tab_completion")


def test_untraced_calls_are_in_truth_but_not_in_spans(day):
    truth, spans, summary, _, truth_csv = day
    untraced = [c for c in truth if not c.traced]
    assert untraced and all(c.trace_id is None and c.span_id is None for c in untraced)
    assert summary.untraced_calls == len(untraced)
    assert not any(s["resource"]["service.name"] == "batch-summarizer" for s in spans)
    assert not any("gpt-4o-mini" in json.dumps(s["attrs"]) for s in spans)
    llm_ids = {s["raw"]["spanId"] for s in spans if is_llm(s)}
    assert llm_ids == {c.span_id for c in truth if c.traced}
    rows = list(csv.DictReader(truth_csv.open(newline="")))
    assert len(rows) == CALLS and sum(r["traced"] == "False" for r in rows) == len(untraced)


def test_truth_parquet_holds_every_call(tmp_path):
    assert main(["--seed", "3", "--calls", "120", "--single-file", str(tmp_path / "all.jsonl"),
                 "--truth", str(tmp_path / "truth.parquet")]) == 0
    table = pq.read_table(tmp_path / "truth.parquet")
    assert table.num_rows == 120 and table.column("call_id").to_pylist() == [c.call_id for c in simulate(3, 120)]


def test_spans_option_writes_at_least_that_many_spans(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(generate_module, "_PILOT_CALLS", 1000)  # a smaller pilot keeps the test quick
    assert main(["--seed", "5", "--spans", "1500", "--single-file", str(tmp_path / "b.jsonl.gz")]) == 0
    assert "spans" in capsys.readouterr().out
    spans = load_spans(tmp_path)
    assert 1500 <= len(spans) < 1500 + 2500  # stops at the end of the chunk that reaches the target


# ---- conventions ------------------------------------------------------------------------------------------
def test_each_convention_appears_with_its_names(day):
    _, spans, *_ = day
    llm, by_name = [s for s in spans if is_llm(s)], defaultdict(list)
    for s in llm:
        by_name[s["name"]].append(s)
    vllm = by_name["llm_request"]
    assert vllm and all(s["raw"]["kind"] == 2 and s["scope"] == "vllm.llm_engine" for s in vllm)
    assert all({"gen_ai.usage.prompt_tokens", "gen_ai.latency.time_in_queue", "gen_ai.latency.time_to_first_token",
                "gen_ai.latency.time_in_model_prefill", "gen_ai.latency.time_in_model_decode",
                "gen_ai.latency.time_in_model_inference", "gen_ai.latency.e2e",
                "gen_ai.request.id"} <= s["attrs"].keys()
               and "gen_ai.system" not in s["attrs"] and "gen_ai.provider.name" not in s["attrs"] for s in vllm)
    inline = by_name[f"chat {INLINE_MODEL}"]
    assert inline and {(s["scope"], s["attrs"]["gen_ai.provider.name"], s["attrs"]["server.address"])
                       for s in inline} == {
        ("opentelemetry.instrumentation.botocore", "aws.bedrock", "bedrock-runtime.us-east-1.amazonaws.com")}
    assert all(s["attrs"].get("gen_ai.response.model", INLINE_MODEL) == INLINE_MODEL for s in inline)
    assert any("gen_ai.usage.cache_creation.input_tokens" in s["attrs"] for s in inline)  # Claude writes caches
    agent_claude = by_name["Messages"]
    assert agent_claude and all(s["scope"] == "openinference.instrumentation.anthropic" for s in agent_claude)
    o4 = by_name["chat o4-mini"]
    assert o4 and any(s["attrs"].get("gen_ai.usage.reasoning.output_tokens", 0) > 0 for s in o4)
    v2 = by_name["chat gpt-4o"] + by_name["chat gpt-4.1-mini"]
    assert v2 and all("app.feature" not in s["attrs"]
                      and not any("time_to_first" in k or "cache" in k for k in s["attrs"]) for s in v2)
    # gen_ai.system as before semconv v1.37 (Azure OpenAI `az.ai.openai`), server: the Azure resource's endpoint
    assert {(s["name"], s["attrs"]["gen_ai.system"], s["attrs"]["server.address"]) for s in v2} == {
        ("chat gpt-4o", "openai", "api.openai.com"), ("chat gpt-4.1-mini", "az.ai.openai", AZURE)}
    assert any("gen_ai.response.finish_reasons" in s["attrs"] for s in v2)  # the non-streamed ones
    old = by_name["openai.chat"]
    assert old and all(s["scope"] == "opentelemetry.instrumentation.openai.v1" for s in old)
    assert {(s["attrs"]["gen_ai.request.model"], s["attrs"]["gen_ai.system"], s["attrs"]["gen_ai.openai.api_base"])
            for s in old} == {("gpt-4o", "openai", "https://api.openai.com/v1/"),
                              ("gpt-4.1-mini", "az.ai.openai", f"https://{AZURE}/openai/")}
    assert all(s["attrs"]["llm.request.type"] == "chat" and "gen_ai.is_streaming" in s["attrs"] for s in old)
    emb = by_name["embeddings text-embedding-3-small"]
    assert emb and all("gen_ai.usage.output_tokens" not in s["attrs"] for s in emb)
    for s in llm:  # the workload is on every LLM span except openai-v2's default path (service tells there)
        assert s["resource"]["service.name"] == "editor-chat" if s in v2 else s["attrs"]["app.feature"] in {
            "tab_completion", "inline_edit", "chat", "agent", "indexing"}


def test_non_llm_spans_surround_the_calls(day):
    _, spans, *_ = day
    names = Counter(s["name"] for s in spans if not is_llm(s))
    for wanted in ("POST /v1/completions", "POST /api/chat", "POST /api/inline-edit", "POST /api/index",
                   "invoke_agent editor-agent", "build_context", "chat.workflow"):
        assert names[wanted] > 0, wanted
    assert any(n.startswith("execute_tool ") for n in names) and any(n.startswith("SELECT ") for n in names)
    kinds = {s["raw"]["kind"] for s in spans if not is_llm(s)}
    assert {1, 2, 3} <= kinds  # INTERNAL, SERVER, CLIENT


def test_agent_traces_root_tools_between_calls(day):
    truth, spans, *_ = day
    traces = defaultdict(list)
    for s in spans:
        if s["resource"]["service.name"] == "editor-agent":
            traces[s["raw"]["traceId"]].append(s)
    assert traces
    for trace in traces.values():
        roots = [s for s in trace if "parentSpanId" not in s["raw"]]
        assert [r["name"] for r in roots] == ["invoke_agent editor-agent"]
        assert roots[0]["attrs"]["gen_ai.operation.name"] == "invoke_agent"
        calls = sorted((s for s in trace if is_llm(s)), key=lambda s: s["start"])
        tools = sorted((s for s in trace if s["name"].startswith("execute_tool ")), key=lambda s: s["start"])
        assert all(t["attrs"]["openinference.span.kind"] == "TOOL" for t in tools)
        for tool in tools:  # each tool runs in a gap between two model calls
            before = [c for c in calls if c["end"] <= tool["start"]]
            after = [c for c in calls if c["start"] >= tool["end"]]
            assert before and after
        assert all(c["raw"]["parentSpanId"] == roots[0]["raw"]["spanId"] for c in calls)
    sizes = Counter(c.trace_id for c in truth if c.workload == "agent")
    assert sum(3 <= n <= 15 for n in sizes.values()) >= len(sizes) - 1  # the day's last trace may be cut short


# ---- spans agree with the truth --------------------------------------------------------------------------
def test_span_times_and_tokens_match_truth(by_span_id):
    seen = Counter()
    for span, call in by_span_id:
        a = span["attrs"]
        assert (span["start"], span["end"]) == (call.start_ns, call.end_ns)
        seen[call.convention] += 1
        if call.status == "error":
            assert span["raw"]["status"]["code"] == 2 and a["error.type"] == call.error_type
            assert not any(k.endswith(("output_tokens", "completion_tokens", "token_count.completion")) for k in a)
            continue
        if call.convention == "vllm":
            assert a["gen_ai.usage.prompt_tokens"] == call.input_tokens
            assert a["gen_ai.usage.completion_tokens"] == call.output_tokens
        elif call.convention == "otel_genai":
            total_input = call.uncached_input_tokens + call.cache_read_tokens + call.cache_write_tokens
            assert a["gen_ai.usage.input_tokens"] == total_input  # cached tokens included
            if call.operation == "chat":
                assert a["gen_ai.usage.cache_read.input_tokens"] == call.cache_read_tokens
                assert a["gen_ai.usage.output_tokens"] == call.output_tokens
            if call.provider in ("anthropic", "aws.bedrock"):
                assert a["gen_ai.usage.cache_creation.input_tokens"] == call.cache_write_tokens
            if call.model == "o4-mini":
                assert a["gen_ai.usage.reasoning.output_tokens"] == call.reasoning_tokens
        elif call.convention == "openinference":
            assert a["llm.token_count.prompt"] == call.input_tokens
            assert a["llm.token_count.prompt_details.cache_read"] == call.cache_read_tokens
            assert a["llm.token_count.prompt_details.cache_write"] == call.cache_write_tokens
            assert a["llm.token_count.completion"] == call.output_tokens
            assert a["llm.token_count.total"] == call.input_tokens + call.output_tokens
        elif call.convention == "openllmetry":
            assert a["gen_ai.usage.prompt_tokens"] == call.input_tokens
            assert a["gen_ai.usage.cache_read_input_tokens"] == call.cache_read_tokens
            assert a["llm.usage.total_tokens"] == call.input_tokens + call.output_tokens
        elif call.convention == "openai_v2":
            assert a["gen_ai.usage.input_tokens"] == call.input_tokens  # cache reads inside, not shown apart
    assert set(seen) == {"vllm", "otel_genai", "openinference", "openllmetry", "openai_v2"}


def test_ttft_and_decode_visible_in_spans_match_truth(by_span_id):
    checked = Counter()
    for span, call in by_span_id:
        if call.status != "ok" or call.operation == "embeddings":
            continue
        a, events = span["attrs"], span["raw"].get("events", [])
        if call.convention == "vllm":
            assert a["gen_ai.latency.time_to_first_token"] == pytest.approx(call.ttft_s, abs=1e-9)
            assert a["gen_ai.latency.time_in_model_decode"] == pytest.approx(call.decode_s, abs=1e-9)
            assert a["gen_ai.latency.time_in_queue"] == pytest.approx(call.queue_s, abs=1e-9)
            assert a["gen_ai.latency.e2e"] == pytest.approx((span["end"] - span["start"]) / 1e9, abs=1e-9)
            assert a["gen_ai.latency.time_in_model_inference"] == pytest.approx(
                a["gen_ai.latency.time_in_model_prefill"] + a["gen_ai.latency.time_in_model_decode"], abs=1e-8)
            # TTFT covers the server's frontend, the queue and the prefill; decode is the rest of the span
            assert a["gen_ai.latency.time_to_first_token"] >= a["gen_ai.latency.time_in_queue"] + a[
                "gen_ai.latency.time_in_model_prefill"] - 1e-9
        elif call.convention == "otel_genai":
            assert a["gen_ai.response.time_to_first_chunk"] == pytest.approx(call.ttft_s, abs=1e-9)
        elif call.convention == "openinference":
            (first,) = [e for e in events if e["name"] == "First Token Stream Event"]
            assert int(first["timeUnixNano"]) - span["start"] == round(call.ttft_s * 1e9)
        elif call.convention == "openllmetry" and call.streaming:
            times = [int(e["timeUnixNano"]) for e in events if e["name"] == "gen_ai.content.completion.chunk"]
            assert times[0] == call.first_token_ns and times[-1] == call.end_ns and times == sorted(times)
            assert len(times) == (max(2, math.ceil(call.output_tokens / 4)) if call.output_tokens > 1 else 1)
            decode = (times[-1] - times[0]) / 1e9
            assert decode == pytest.approx(call.decode_s, abs=1e-6)
        elif call.convention == "openai_v2":
            assert not events and not any("first" in k for k in a)  # the no-TTFT case
        checked[call.convention] += 1
    assert {"vllm", "otel_genai", "openinference", "openllmetry"} <= set(checked)


def test_truth_latency_physics():
    truth = [c for c in simulate(SEED, 6000) if c.status == "ok"]
    for c in truth:  # phases add up exactly to the span, decode is (out - 1) x ITL
        assert c.end_ns - c.start_ns == round((c.network_s + c.queue_s + c.prefill_s + c.decode_s) * 1e9)
        if c.output_tokens > 1:
            assert c.decode_s == pytest.approx((c.output_tokens - 1) * c.itl_s, abs=1e-9)
    rates = {"claude-sonnet-4-20250514": 9_000, INLINE_MODEL: 9_000, "gpt-4o": 12_000, "qwen2.5-coder-7b": 14_000}
    for model, rate in rates.items():  # prefill = uncached/rate + cache_read/(10 rate), up to noise
        ratios = [c.prefill_s / ((c.uncached_input_tokens + c.cache_write_tokens) / rate
                                 + c.cache_read_tokens / (10 * rate)) for c in truth if c.model == model]
        assert statistics.median(ratios) == pytest.approx(1.0, abs=0.05), model
    itl = {m: statistics.median(c.itl_s for c in truth if c.model == m and c.itl_s)
           for m in ("claude-sonnet-4-20250514", "gpt-4o", "gpt-4.1-mini", "o4-mini")}
    assert itl["claude-sonnet-4-20250514"] > itl["gpt-4o"] > itl["o4-mini"] > itl["gpt-4.1-mini"]
    tab = [c for c in truth if c.model == "qwen2.5-coder-7b"]
    night = [c for c in tab if c.started_at.hour < 5]
    peak = [c for c in tab if c.started_at.hour in (10, 15)]
    assert statistics.mean(c.itl_s for c in peak) > 1.5 * statistics.mean(c.itl_s for c in night)
    assert statistics.mean(c.queue_s for c in peak) > 10 * statistics.mean(c.queue_s for c in night)
    o4 = [c for c in truth if c.model == "o4-mini"]
    assert all(c.ttft_s >= c.network_s + c.queue_s + c.prefill_s + c.reasoning_tokens * c.itl_s - 1e-6 for c in o4)


# ---- content -----------------------------------------------------------------------------------------------
def test_content_markers_only_in_content_attributes(day):
    truth, spans, *_ = day
    captured = {c.span_id for c in truth if c.content_captured}
    with_prompt = set()
    for s in spans:
        raw = s["raw"]
        for key, value in s["attrs"].items():
            text = json.dumps(value)
            if PROMPT in text:
                assert PROMPT_KEYS.match(key), key
                with_prompt.add(raw["spanId"])
            if COMPLETION in text:  # earlier answers are part of later prompts
                assert COMPLETION_KEYS.match(key) or PROMPT_KEYS.match(key), key
        rest = json.dumps({k: v for k, v in raw.items() if k != "attributes"}) + json.dumps(s["resource"])
        assert PROMPT not in rest and COMPLETION not in rest
    assert with_prompt and with_prompt == captured
    completions = [s for s in spans if "gen_ai.completion.0.content" in s["attrs"] or "output.value" in s["attrs"]]
    completion_text = [json.dumps({k: v for k, v in s["attrs"].items() if COMPLETION_KEYS.match(k)})
                       for s in completions]
    assert completions and not any(PROMPT in text for text in completion_text)
    for span in (s for s in spans if s["raw"]["spanId"] in captured and "gen_ai.input.messages" in s["attrs"]):
        messages = json.loads(span["attrs"]["gen_ai.input.messages"])
        assert all(set(m) == {"role", "parts"} and m["parts"][0]["type"] == "text" for m in messages)


def test_agent_prompts_share_prefixes_within_and_across_traces(tmp_path):
    truth = simulate(23, 1500)  # capture content on every Anthropic agent call to see repositories recur
    agent = [replace(c, content_captured=True) for c in truth if c.convention == "openinference"]
    write_traces(agent, tmp_path, seed=23)
    prompts = defaultdict(list)
    for s in load_spans(tmp_path):
        a = s["attrs"]
        if a.get("openinference.span.kind") == "LLM":
            n = sum(k.endswith(".message.content") and k.startswith("llm.input_messages.") for k in a)
            msgs = [a[f"llm.input_messages.{i}.message.content"] for i in range(n)]
            prompts[s["raw"]["traceId"]].append((s["start"], msgs))
    assert prompts
    systems, contexts = set(), Counter()
    for trace in prompts.values():
        trace.sort()
        for (_, earlier), (_, later) in zip(trace, trace[1:]):
            assert later[: len(earlier)] == earlier  # each call extends the previous prompt
        systems.add(trace[0][1][0])
        contexts[trace[0][1][1]] += 1
    assert len(systems) == 1  # one system prompt for all agent calls
    assert len(prompts) > 5 and max(contexts.values()) > 1  # a repository's context block recurs across traces
