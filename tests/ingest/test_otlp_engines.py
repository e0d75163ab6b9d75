"""Engine spans beyond one process (docs/formats.md#engine-spans-sglang-and-disaggregated-serving).

The spans are built with the attribute and span names the engines' tracing code writes (cited per helper):
SGLang's request span and its stage spans, and vLLM's `llm_request` span on the prefill and the decode worker
of a disaggregated deployment (the request sent to the prefill worker with `max_tokens` 1 and the same
`X-Request-Id` as the one sent to the decode worker).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phaselens.pipeline.load import ingest
from tests.ingest.test_otlp_merge import MS, T0, _value

MODEL = "Qwen/Qwen2.5-7B-Instruct"


def span(trace: str, sid: str, name: str, start_ms: float, end_ms: float, attrs: dict | None = None,
         parent: str | None = None, events: list[tuple[str, float]] = ()) -> dict:
    s = {"traceId": trace.ljust(32, "0"), "spanId": sid.ljust(16, "0"), "name": name, "kind": 1,
         "startTimeUnixNano": str(T0 + int(start_ms * MS)), "endTimeUnixNano": str(T0 + int(end_ms * MS)),
         "attributes": [{"key": k, "value": _value(v)} for k, v in (attrs or {}).items()], "status": {}}
    if parent:
        s["parentSpanId"] = parent.ljust(16, "0")
    if events:
        s["events"] = [{"timeUnixNano": str(T0 + int(t * MS)), "name": n} for n, t in events]
    return s


def batch(service: str, scope: str, spans: list[dict]) -> str:
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeSpans": [{"scope": {"name": scope}, "spans": spans}]}]}) + "\n"


def sglang_request(trace: str, n: int, start: float, *, role: str = "", prompt: int, cached: int, out: int,
                   prefill_ms: float, decode_ms: float, queue_ms: float = 2.0, room: int | None = None,
                   latency_attrs: bool = True) -> list[dict]:
    """One SGLang request as `python/sglang/srt/observability/trace.py` writes it: a root span
    "{role} Req {rid[:8]}" (attributes `rid`, `bootstrap_room` under disaggregation; at the end the usage and
    latency attributes of `tokenizer_manager_components/request_tracing.py` `make_span_attrs`), a thread span
    per scheduler process, and stage spans under it (`req_time_stats.py`: `prefill_waiting`, `prefill_forward`,
    one `decode_loop` per decode step with `decode_ct`)."""
    rid = f"{n:08x}" + "c0ffee" * 4
    code = {"": 0, "prefill": 1, "decode": 2}[role]
    root, thread = f"{n:02x}a{code}", f"{n:02x}b{code}"
    first = start + queue_ms + prefill_ms
    end = first + decode_ms
    attrs = {"rid": rid}
    if room is not None:
        attrs["bootstrap_room"] = hex(room)
    attrs.update({"gen_ai.usage.prompt_tokens": prompt, "gen_ai.usage.completion_tokens": out,
                  "gen_ai.usage.cached_tokens": cached, "gen_ai.request.id": rid,
                  "gen_ai.response.model": MODEL, "gen_ai.response.finish_reasons": '["length"]'})
    if latency_attrs:
        attrs.update({"gen_ai.latency.time_to_first_token": (first - start) / 1000,
                      "gen_ai.latency.e2e": (end - start) / 1000,
                      "gen_ai.latency.time_in_model_decode": (end - first) / 1000})
    spans = [span(trace, root, f"{role} Req {rid[:8]}", start, end, attrs),  # role "" when not disaggregated
             span(trace, thread, "Scheduler [TP 0] (host:5f3c2a1b | pid:4242)", start, end,
                  {"host_id": "5f3c2a1b", "pid": 4242, "thread_label": "Scheduler", "tp_rank": 0}, parent=root)]
    stages = []
    if role in ("", "prefill"):
        stages.append(("prefill_waiting", start, start + queue_ms, {}))
        stages.append(("prefill_forward", start + queue_ms, first, {}))
    if role in ("", "decode"):
        steps = max(out - 1, 1)
        for i in range(steps):
            a = first + decode_ms * i / steps
            stages.append(("decode_loop", a, a + decode_ms / steps, {"decode_ct": i}))
    for i, (name, a, b, at) in enumerate(stages):
        spans.append(span(trace, f"{n:02x}c{code}{i:04d}", name, a, b, at, parent=thread))
    return spans


def requests(store) -> list[dict]:
    cur = store.execute("SELECT * FROM requests ORDER BY started_at, call_id")
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def test_sglang_request_is_one_call_with_cached_tokens_and_phases(store, load, tmp_path):
    spans = sglang_request("a1", 1, 0, prompt=2000, cached=1536, out=120, prefill_ms=180, decode_ms=1190)
    p = tmp_path / "sglang.jsonl"
    p.write_text(batch("sglang", "sglang server", spans))
    r = load(p).files[0]
    assert (r.accepted, r.rejected) == (1, 0)
    (c,) = requests(store)
    assert (c["provider"], c["convention"], c["model_raw"]) == ("sglang", "sglang", MODEL)
    # SGLang's prompt count includes the prefix-cache hits it reports as cached_tokens
    assert (c["uncached_input_tokens"], c["cache_read_tokens"], c["output_tokens"]) == (464, 1536, 120)
    assert c["ttft_s"] == pytest.approx(0.182) and c["e2e_s"] == pytest.approx(1.372)
    assert c["decode_s"] == pytest.approx(1.19) and c["timing_source"] == "measured"


def test_sglang_stage_spans_time_the_phases_without_latency_attributes(store, load, tmp_path):
    spans = sglang_request("a2", 2, 0, prompt=900, cached=0, out=40, prefill_ms=95, decode_ms=390,
                           latency_attrs=False)
    p = tmp_path / "sglang_stages.jsonl"
    p.write_text(batch("sglang", "sglang server", spans))
    load(p)
    (c,) = requests(store)
    assert c["prefill_s"] == pytest.approx(0.095, abs=1e-6)  # the prefill_forward stage
    assert c["decode_s"] == pytest.approx(0.390, abs=1e-6)  # the decode_loop stages
    assert c["queue_s"] == pytest.approx(0.002, abs=1e-6)  # prefill_waiting


def vllm_llm_request(trace: str, sid: str, start: float, *, request_id: str, prompt: int, out: int, cached: int,
                     queue_ms: float, prefill_ms: float, decode_ms: float) -> dict:
    """vLLM's `llm_request` span (`vllm/tracing.py` SpanAttributes; written by the output processor when a
    request finishes): prompt and completion counts, `gen_ai.request.id` (the `X-Request-Id` the proxy sent,
    prefixed), and the server latencies."""
    ttft = queue_ms + prefill_ms
    e2e = ttft + decode_ms
    return span(trace, sid, "llm_request", start, start + e2e, {
        "gen_ai.request.id": request_id, "gen_ai.response.model": MODEL, "gen_ai.request.max_tokens": 1 if out == 1 else 512,
        "gen_ai.usage.prompt_tokens": prompt, "gen_ai.usage.completion_tokens": out,
        "gen_ai.usage.cached_tokens": cached,
        "gen_ai.latency.time_in_queue": queue_ms / 1000, "gen_ai.latency.time_to_first_token": ttft / 1000,
        "gen_ai.latency.time_in_model_prefill": prefill_ms / 1000,
        "gen_ai.latency.time_in_model_decode": decode_ms / 1000,
        "gen_ai.latency.time_in_model_inference": (prefill_ms + decode_ms) / 1000,
        "gen_ai.latency.e2e": e2e / 1000})


def disagg_lines() -> str:
    """Two requests through a prefill pool and a decode pool (vLLM's disaggregated proxy,
    `tests/v1/kv_connector/nixl_integration/toy_proxy_server.py`: the prefill request with max_tokens 1, then
    the decode request, both with one X-Request-Id). The decode worker receives the prompt's KV cache: it
    reports the prompt again (all of it computed elsewhere) and the whole answer."""
    pre, dec = [], []
    for i, (start, prompt, cached, out) in enumerate([(0, 3000, 1024, 200), (5000, 1200, 0, 60)]):
        rid = f"chatcmpl-{i:04d}aa11-2b3c-4d5e-8f90-123456789abc"
        pre.append(vllm_llm_request(f"a{i}", f"a{i}", start, request_id=rid, prompt=prompt, out=1, cached=cached,
                                    queue_ms=4, prefill_ms=310 if i == 0 else 120, decode_ms=0))
        dec.append(vllm_llm_request(f"d{i}", f"d{i}", start + 340, request_id=rid, prompt=prompt, out=out,
                                    cached=prompt, queue_ms=3, prefill_ms=8, decode_ms=out * 9.0))
    return batch("vllm-prefill", "vllm.llm_engine", pre) + batch("vllm-decode", "vllm.llm_engine", dec)


def test_disaggregated_request_is_one_call_phases_from_each_pool(store, load, tmp_path):
    p = tmp_path / "disagg.jsonl"
    p.write_text(disagg_lines())
    r = load(p).files[0]
    assert (r.accepted, r.skipped, r.rejected) == (2, 2, 0)
    a, b = requests(store)
    # prompt tokens once, from the prefill worker that computed them (its prefix cache: 1,024 read);
    # the answer from the decode worker; never the prefill worker's single token on top
    assert (a["uncached_input_tokens"], a["cache_read_tokens"], a["output_tokens"]) == (1976, 1024, 200)
    assert (b["uncached_input_tokens"], b["cache_read_tokens"], b["output_tokens"]) == (1200, 0, 60)
    # prefill time from the prefill pool, decode time from the decode pool
    assert a["prefill_s"] == pytest.approx(0.310) and a["decode_s"] == pytest.approx(1.8)
    assert b["prefill_s"] == pytest.approx(0.120) and b["decode_s"] == pytest.approx(0.54)
    assert a["queue_s"] == pytest.approx(0.004)
    # the first token reaches the caller from the decode worker: its start + its TTFT, after the call's start
    assert a["ttft_s"] == pytest.approx(0.340 + 0.011)
    assert a["e2e_s"] == pytest.approx(0.340 + 0.011 + 1.8)
    attrs = json.loads(a["attributes_json"])
    assert (attrs["phaselens.prefill_pool"], attrs["phaselens.decode_pool"]) == ("vllm-prefill", "vllm-decode")
    assert a["span_id"] == "a0".ljust(16, "0")  # the earlier span, on the prefill worker, names the call


def _pools(store) -> list[tuple]:
    return [(r["span_id"], r["uncached_input_tokens"], r["cache_read_tokens"], r["output_tokens"],
             round(r["prefill_s"], 6), round(r["decode_s"], 6),
             json.loads(r["attributes_json"]).get("phaselens.decode_pool")) for r in requests(store)]


@pytest.mark.parametrize("order", ["prefill first", "decode first"])
def test_disaggregated_halves_in_two_files_are_the_calls_of_one_file(store, load, tmp_path, order):
    """Each worker's spans in a file of its own (two collectors): the second file's spans are paired with the
    stored ones by request id, as in one file. A third, older file holds a decode span that reuses the first
    request id 20 minutes earlier: too far from any prefill span to be paired, in one file or across files."""
    from phaselens.pipeline.store import connect

    stray = vllm_llm_request("e0", "e0", -20 * 60_000, request_id="chatcmpl-0000aa11-2b3c-4d5e-8f90-123456789abc",
                             prompt=3000, out=200, cached=3000, queue_ms=3, prefill_ms=8, decode_ms=1800)
    old = batch("vllm-decode", "vllm.llm_engine", [stray])
    pre, dec = disagg_lines().splitlines(keepends=True)
    one = tmp_path / "one.jsonl"
    one.write_text(old + pre + dec)
    whole = connect(tmp_path / "whole.duckdb")
    ingest(whole, [str(one)])
    expected = _pools(whole)
    whole.close()
    assert len(expected) == 3  # the stray decode span stays a call of its own

    files = {"old": old, "pre": pre, "dec": dec}
    for name in ("old", *(("pre", "dec") if order == "prefill first" else ("dec", "pre"))):
        (tmp_path / f"{name}.jsonl").write_text(files[name])
        load(tmp_path / f"{name}.jsonl")
    assert _pools(store) == expected


def test_sglang_disaggregated_request_joins_on_the_bootstrap_room(store, load, tmp_path):
    """SGLang PD: the router sends the request to a prefill and a decode server at once, one bootstrap room."""
    pre = sglang_request("b1", 3, 0, role="prefill", prompt=2500, cached=2048, out=1, prefill_ms=140,
                         decode_ms=0, room=0x5A17, latency_attrs=False)
    dec = sglang_request("b1", 4, 1, role="decode", prompt=2500, cached=0, out=90, prefill_ms=150,
                         decode_ms=800, room=0x5A17, latency_attrs=False)
    p = tmp_path / "sglang_pd.jsonl"
    p.write_text(batch("sglang-prefill", "sglang server", pre) + batch("sglang-decode", "sglang server", dec))
    load(p)
    (c,) = requests(store)
    assert (c["uncached_input_tokens"], c["cache_read_tokens"], c["output_tokens"]) == (452, 2048, 90)
    assert c["prefill_s"] == pytest.approx(0.140, abs=1e-6)  # the prefill worker's prefill_forward
    assert c["decode_s"] == pytest.approx(0.800, abs=1e-6)  # the decode worker's decode_loop steps
    attrs = json.loads(c["attributes_json"])
    assert (attrs["phaselens.prefill_pool"], attrs["phaselens.decode_pool"]) == ("sglang-prefill", "sglang-decode")


def test_unrelated_engine_requests_stay_apart(store, load, tmp_path):
    lines = disagg_lines().replace("chatcmpl-0001", "chatcmpl-9999", 1)  # the second pair's ids now differ
    p = tmp_path / "apart.jsonl"
    p.write_text(lines)
    load(p)
    assert len(requests(store)) == 3


def test_formats_doc_cites_the_engines_sources():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "formats.md").read_text()
    for src in ("python/sglang/srt/observability/trace.py", "request_tracing.py", "req_time_stats.py",
                "vllm/tracing.py", "toy_proxy_server.py"):
        assert src in doc, src
