"""One call, one row (docs/ingest.md#one-call-one-row): spans that describe the same model call are stored once.

The recorded instrumentations' pairs are checked by tests/conformance; these are the nested shapes around them,
built from the attributes those packages write (the anthropic SDK's own span, OpenLLMetry, a framework span
that copies its child's usage, Logfire's request + "streaming response" pair, OpenTelemetry's event cap).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from phaselens.ingest import otlp

T0 = 1_796_000_000_000_000_000  # ns
MS = 1_000_000
CONF = Path(__file__).resolve().parents[1] / "conformance" / "fixtures"


def _value(v):
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": v}


def span(trace: str, sid: str, start_ms: float, end_ms: float, attrs: dict, *, parent: str | None = None,
         name: str = "chat", events: list[tuple[str, float]] = (), dropped: int = 0) -> dict:
    s = {"traceId": trace.ljust(32, "0"), "spanId": sid.ljust(16, "0"), "name": name, "kind": 3,
         "startTimeUnixNano": str(T0 + int(start_ms * MS)), "endTimeUnixNano": str(T0 + int(end_ms * MS)),
         "attributes": [{"key": k, "value": _value(v)} for k, v in attrs.items()], "status": {}}
    if parent:
        s["parentSpanId"] = parent.ljust(16, "0")
    if events:
        s["events"] = [{"timeUnixNano": str(T0 + int(t * MS)), "name": n} for n, t in events]
    if dropped:
        s["droppedEventsCount"] = dropped
    return s


def batch(scope: str, *spans: dict, service: str = "svc") -> str:
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeSpans": [{"scope": {"name": scope, "version": "1"}, "spans": list(spans)}]}]}) + "\n"


SDK = "com.anthropic.sdk.python"
LLMETRY = "opentelemetry.instrumentation.anthropic"


def sdk_attrs(inp: int, out: int, *, ttft: float | None = None, rid: str | None = None, stream: bool = False,
              model: str = "claude-3-5-haiku-20241022") -> dict:
    """What the anthropic SDK writes about its own call (fields as recorded in tests/conformance/fixtures)."""
    a = {"gen_ai.provider.name": "anthropic", "gen_ai.operation.name": "chat", "gen_ai.request.model": model,
         "gen_ai.response.model": model, "gen_ai.usage.input_tokens": inp, "gen_ai.usage.output_tokens": out,
         "gen_ai.usage.cache_read.input_tokens": 0, "gen_ai.usage.cache_write.input_tokens": 0}
    if stream:
        a["gen_ai.request.stream"] = True
    if ttft is not None:
        a["gen_ai.response.time_to_first_chunk"] = ttft
    if rid:
        a["gen_ai.response.id"] = rid
    return a


def llmetry_attrs(inp: int, out: int, *, rid: str | None = None, model: str = "claude-3-5-haiku-20241022") -> dict:
    """OpenLLMetry's span of the same call: no TTFT, its streamed output count one too many."""
    a = {"gen_ai.provider.name": "anthropic", "gen_ai.operation.name": "chat", "gen_ai.request.model": model,
         "gen_ai.response.model": model, "gen_ai.usage.input_tokens": inp, "gen_ai.usage.output_tokens": out + 1,
         "gen_ai.usage.total_tokens": inp + out + 1, "gen_ai.usage.cache_read.input_tokens": 0,
         "gen_ai.usage.cache_creation.input_tokens": 0}
    if rid:
        a["gen_ai.response.id"] = rid
    return a


def calls(store) -> list[dict]:
    cur = store.execute("SELECT * FROM requests ORDER BY started_at, call_id")
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def write(tmp_path: Path, name: str, *lines: str) -> Path:
    p = tmp_path / name
    p.write_text("".join(lines))
    return p


def test_framework_span_copying_its_childs_usage_counts_once(store, load, tmp_path):
    """A framework's model span (pydantic-ai style) repeats the usage of the SDK span inside it."""
    usage = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.provider.name": "openai",
             "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 50,
             "gen_ai.usage.cache_read.input_tokens": 400}
    outer = span("a1", "f1", 0, 900, usage, name="chat gpt-4o-mini")
    inner = span("a1", "c1", 20, 880, {**usage, "gen_ai.response.time_to_first_chunk": 0.2}, parent="f1")
    r = load(write(tmp_path, "f.jsonl", batch("pydantic-ai", outer), batch("opentelemetry.instrumentation.openai_v2", inner)))
    assert (r.files[0].accepted, r.files[0].skipped) == (1, 1)
    (c,) = calls(store)
    assert (c["uncached_input_tokens"], c["cache_read_tokens"], c["output_tokens"]) == (600, 400, 50)
    assert c["span_id"] == "f1".ljust(16, "0")  # the earliest span names the call
    assert c["e2e_s"] == pytest.approx(0.9)  # earliest start to latest end
    assert c["ttft_s"] == pytest.approx(0.2) and c["timing_source"] == "measured"  # stated by the inner span, kept


def test_a_chain_of_seven_nested_spans_of_one_call_is_one_call_named_by_the_outermost(store, load, tmp_path):
    """Call spans nested seven deep, each the only call child of the one above (wrappers around wrappers): the links
    are pairwise, each round of label propagation carries the outermost span's label one link further, and the
    rounds go on until none moves, so the innermost span joins too. Another call of the same trace stays apart."""
    usage = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.provider.name": "openai",
             "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 50}
    chain = [span("c7", "s1", 0, 1000, usage, name="agent chat")]
    for i in range(2, 8):
        chain.append(span("c7", f"s{i}", 10 * i, 1000 - 10 * i, usage, parent=f"s{i - 1}"))
    other = span("c7", "o1", 2000, 2500, {**usage, "gen_ai.usage.input_tokens": 7})
    r = load(write(tmp_path, "chain.jsonl", batch("pydantic-ai", chain[0], other),
                   *(batch("opentelemetry.instrumentation.openai_v2", s) for s in chain[1:])))
    assert (r.files[0].accepted, r.files[0].skipped) == (2, 6)
    first, second = calls(store)
    assert first["span_id"] == "s1".ljust(16, "0") and first["uncached_input_tokens"] == 1000
    assert first["e2e_s"] == pytest.approx(1.0)
    assert second["span_id"] == "o1".ljust(16, "0") and second["uncached_input_tokens"] == 7
    stored = store.execute("SELECT left(span_id, 2), stored_call_id FROM raw_otlp_spans WHERE span_id LIKE 's%' "
                           "ORDER BY span_id").fetchall()
    assert stored == [("s1", None)] + [(f"s{i}", first["call_id"]) for i in range(2, 8)]  # each span kept, in the call


def test_a_call_whose_spans_nest_a_thousand_deep_is_one_call_in_a_few_rounds(store, load, tmp_path, monkeypatch):
    """Hostile input: a thousand call spans, each the only call child of the one above. They are one call, and the
    rounds of label propagation grow with the logarithm of the depth, not with the depth."""
    usage = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.provider.name": "openai",
             "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 50}
    depth = 1000
    spans = [span("d1", f"{i:04x}", i * 0.001, 10_000 - i * 0.001, usage, parent=f"{i - 1:04x}" if i else None)
             for i in range(depth)]
    rounds = 0
    real = otlp._sql

    def counting(name: str) -> str:
        nonlocal rounds
        rounds += name == "otlp_merge_step"
        return real(name)

    monkeypatch.setattr(otlp, "_sql", counting)
    r = load(write(tmp_path, "deep.jsonl", batch("opentelemetry.instrumentation.openai_v2", *spans)))
    assert (r.files[0].accepted, r.files[0].skipped) == (1, depth - 1)
    (c,) = calls(store)
    assert c["span_id"] == "0000".ljust(16, "0") and c["uncached_input_tokens"] == 1000
    assert rounds <= 2 * depth.bit_length() + 2, rounds  # 22 at most, where one link a round takes 1,000


def test_request_and_streaming_response_pair_is_one_call(store, load, tmp_path):
    """Logfire: the request span ends when the stream is returned; a log span at the stream's end has usage."""
    req = span("b1", "r1", 0, 5, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                                   "gen_ai.provider.name": "openai", "logfire.span_type": "span"},
               name="Chat Completion with {request_data[model]!r}")
    log = span("b2", "l1", 400, 400, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                                       "gen_ai.provider.name": "openai", "logfire.span_type": "log",
                                       "duration": 0.392, "gen_ai.usage.input_tokens": 40,
                                       "gen_ai.usage.output_tokens": 200},
               name="streaming response from {request_data[model]!r} took {duration:.2f}s")
    load(write(tmp_path, "l.jsonl", batch("logfire.openai", req, log)))
    (c,) = calls(store)
    assert (c["uncached_input_tokens"], c["output_tokens"]) == (40, 200)
    assert c["e2e_s"] == pytest.approx(0.4)  # from the request's start to the stream's end
    assert c["streaming"] is True and c["span_id"] == "r1".ljust(16, "0")


def test_three_nested_wrappers_are_one_call(store, load, tmp_path):
    """Agent framework span > instrumentation span > the SDK's own span, all naming the model."""
    model = "claude-3-5-haiku-20241022"
    top = span("c1", "w1", 0, 1000, {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}, name="chat")
    mid = span("c1", "w2", 10, 990, llmetry_attrs(300, 120, rid="msg_1"), parent="w1", name="anthropic.chat")
    low = span("c1", "w3", 12, 985, sdk_attrs(300, 120, ttft=0.31, rid="msg_1", stream=True), parent="w2")
    r = load(write(tmp_path, "n.jsonl", batch("agents", top), batch(LLMETRY, mid), batch(SDK, low)))
    assert (r.files[0].accepted, r.files[0].skipped) == (1, 2)
    (c,) = calls(store)
    assert c["output_tokens"] == 120  # the SDK's count; OpenLLMetry's 121 is not added, nor taken
    assert c["uncached_input_tokens"] == 300
    assert c["e2e_s"] == pytest.approx(1.0) and c["ttft_s"] == pytest.approx(0.31)
    assert c["decode_s"] == pytest.approx(1.0 - 0.31)
    assert c["streaming"] is True and c["span_id"] == "w1".ljust(16, "0")
    assert json.loads(c["attributes_json"])["phaselens.merged_spans"] == ["w2".ljust(16, "0"), "w3".ljust(16, "0")]


def test_sdk_span_in_its_own_trace_pairs_with_the_enclosing_instrumentation_span(store, load, tmp_path):
    """Two concurrent calls of one model, each SDK span the root of a trace of its own: each pairs with the
    instrumentation span around it (the nearest on both sides), so tokens never cross between calls."""
    a_out, b_out = 200, 40
    lines = batch(LLMETRY,
                  span("d1", "i1", 0, 600, llmetry_attrs(50, a_out), name="anthropic.chat"),
                  span("d2", "i2", 100, 350, llmetry_attrs(70, b_out), name="anthropic.chat"))
    lines += batch(SDK,
                   span("e1", "s1", 2, 598, sdk_attrs(50, a_out, ttft=0.1, stream=True)),
                   span("e2", "s2", 103, 349, sdk_attrs(70, b_out, ttft=0.05, stream=True)))
    # a call with no instrumentation span around it stays its own call
    lines += batch(SDK, span("e3", "s3", 700, 900, sdk_attrs(10, 5)))
    load(write(tmp_path, "p.jsonl", lines))
    got = [(c["span_id"][:2], c["uncached_input_tokens"], c["output_tokens"], round(c["ttft_s"] or 0, 3))
           for c in calls(store)]
    assert got == [("i1", 50, a_out, 0.1), ("i2", 70, b_out, 0.05), ("s3", 10, 5, 0.0)]


def test_conflicting_response_ids_or_other_services_are_not_merged(store, load, tmp_path):
    lines = batch(LLMETRY, span("f1", "i1", 0, 500, llmetry_attrs(50, 20, rid="msg_a"), name="anthropic.chat"))
    lines += batch(SDK, span("f2", "s1", 5, 490, sdk_attrs(50, 20, rid="msg_b")))
    lines += batch(LLMETRY, span("f3", "i2", 1000, 1500, llmetry_attrs(50, 20), name="anthropic.chat"), service="one")
    lines += batch(SDK, span("f4", "s2", 1005, 1490, sdk_attrs(50, 20)), service="two")
    load(write(tmp_path, "x.jsonl", lines))
    assert len(calls(store)) == 4


def _recorded_pair_lines() -> tuple[list[str], list[str]]:
    """The recorded OpenLLMetry-Anthropic fixture split into its instrumentation's and the SDK's batches."""
    p = CONF / "openllmetry-anthropic" / "spans.jsonl.gz"
    if not p.exists():
        pytest.skip("no recorded conformance fixture")
    inst, sdk = [], []
    for text in gzip.open(p, "rt"):
        b = json.loads(text)
        scopes = {ss["scope"]["name"] for rs in b["resourceSpans"] for ss in rs["scopeSpans"]}
        (sdk if scopes == {SDK} else inst).append(text if text.endswith("\n") else text + "\n")
    assert inst and sdk
    return inst, sdk


def test_recorded_pair_in_one_file_is_one_call_each(store, load, tmp_path):
    inst, sdk = _recorded_pair_lines()
    r = load(write(tmp_path, "both.jsonl", *inst, *sdk))
    assert (r.files[0].accepted, r.files[0].skipped) == (12, 12)
    assert store.execute("SELECT count(*), count(DISTINCT instrumentation) FROM requests").fetchone() == (12, 1)


FIELDS = ("call_id", "started_at", "ended_at", "first_token_at", "ttft_s", "e2e_s", "uncached_input_tokens",
          "cache_read_tokens", "cache_write_tokens", "output_tokens", "streaming", "convention", "attributes_json")


def fingerprint(store) -> list[tuple]:
    """What one call, one row must keep equal however the spans arrive: every stored call and its figures."""
    return [tuple(round(c[f], 6) if isinstance(c[f], float) else c[f] for f in FIELDS) for c in calls(store)]


def ledger(result) -> tuple[int, int, int]:
    return (sum(f.accepted for f in result.files), sum(f.skipped for f in result.files),
            sum(f.duplicates for f in result.files))


def one_file_truth(tmp_path: Path, *lines: str) -> tuple[list[tuple], tuple[int, int, int]]:
    """The calls (and ledger totals) of loading all the lines as one file, in a store of their own."""
    from phaselens.pipeline.load import ingest
    from phaselens.pipeline.store import connect

    (tmp_path / "truth.duckdb").unlink(missing_ok=True)
    con = connect(tmp_path / "truth.duckdb")
    try:
        r = ingest(con, [write(tmp_path, "truth.jsonl", *lines)])
        return fingerprint(con), ledger(r)
    finally:
        con.close()


@pytest.mark.parametrize("order", ["instrumentation_first", "sdk_first"])
def test_recorded_pair_in_two_files_is_one_call_each(store, load, tmp_path, order):
    """The recorded OpenLLMetry + anthropic SDK spans, the instrumentation's in one file and the SDK's in another
    (in either order): the same calls, tokens and times as one file, and the ledger counts each SDK span as merged."""
    inst, sdk = _recorded_pair_lines()
    truth, truth_ledger = one_file_truth(tmp_path, *inst, *sdk)
    first, second = (inst, sdk) if order == "instrumentation_first" else (sdk, inst)
    r = load(write(tmp_path, "first.jsonl", *first), write(tmp_path, "second.jsonl", *second))
    assert [f.status for f in r.files] == ["loaded", "loaded"]
    assert fingerprint(store) == truth and len(truth) == 12
    assert ledger(r) == truth_ledger == (12, 12, 0)
    assert (r.files[1].accepted, r.files[1].skipped) == (0, 12)  # every span of the second file joined a stored call
    # every stored row the second file replaced is recorded for the incremental build; its call id is retired only
    # when the earliest span came second (the call is then named by it)
    replaced = store.execute("SELECT count(*), count(*) FILTER (WHERE retired), count(DISTINCT load_id) "
                             "FROM raw_calls_replaced").fetchone()
    assert replaced == (12, 12 if order == "sdk_first" else 0, 1)
    assert not store.execute("SELECT count(*) FROM raw_calls_replaced r JOIN raw_calls c USING (call_id) "
                             "WHERE r.retired").fetchone()[0]


def test_the_same_file_twice_is_still_deduplicated(store, load, tmp_path):
    inst, sdk = _recorded_pair_lines()
    load(write(tmp_path, "inst.jsonl", *inst), write(tmp_path, "sdk.jsonl", *sdk))
    before = fingerprint(store)
    again = load(tmp_path / "sdk.jsonl", tmp_path / "inst.jsonl")
    assert [f.status for f in again.files] == ["unchanged", "unchanged"]
    forced = load(tmp_path / "sdk.jsonl", tmp_path / "inst.jsonl", force=True)
    assert [(f.status, f.accepted, f.duplicates) for f in forced.files] == [("loaded", 0, 12), ("loaded", 0, 12)]
    assert fingerprint(store) == before
    # a renamed copy holding both halves: duplicates, nothing new
    copy = load(write(tmp_path, "copy.jsonl", *sdk[:2], *inst))
    assert (copy.files[0].accepted, copy.files[0].duplicates) == (0, 12)
    assert fingerprint(store) == before
    assert store.execute("SELECT count(*), count(DISTINCT (trace_id, span_id)) FROM raw_otlp_spans "
                         "WHERE _kind = 'call'").fetchone() == (24, 24)


def _nested_lines() -> list[str]:
    model = "claude-3-5-haiku-20241022"
    top = span("c1", "w1", 0, 1000, {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}, name="chat")
    mid = span("c1", "w2", 10, 990, llmetry_attrs(300, 120, rid="msg_1"), parent="w1", name="anthropic.chat")
    low = span("c1", "w3", 12, 985, sdk_attrs(300, 120, ttft=0.31, rid="msg_1", stream=True), parent="w2")
    return [batch("agents", top), batch(LLMETRY, mid), batch(SDK, low)]


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 2, 0), (2, 0, 1)])
def test_three_nested_wrappers_in_three_files_are_one_call(store, load, tmp_path, order):
    lines = _nested_lines()
    truth, truth_ledger = one_file_truth(tmp_path, *lines)
    r = load(*(write(tmp_path, f"part{i}.jsonl", lines[i]) for i in order))
    assert fingerprint(store) == truth and len(truth) == 1
    assert ledger(r) == truth_ledger == (1, 2, 0)
    (c,) = calls(store)
    assert (c["output_tokens"], c["span_id"]) == (120, "w1".ljust(16, "0"))
    assert sorted(json.loads(c["attributes_json"])["phaselens.merged_spans"]) == ["w2".ljust(16, "0"), "w3".ljust(16, "0")]


def test_a_pair_split_by_a_chunk_boundary_is_one_call(store, load, tmp_path, monkeypatch):
    """With chunks of about one line, every span is read in a chunk of its own: the merge still holds."""
    inst, sdk = _recorded_pair_lines()
    truth, truth_ledger = one_file_truth(tmp_path, *inst, *sdk)
    monkeypatch.setattr(otlp, "CHUNK_BYTES", 1)
    r = load(write(tmp_path, "split.jsonl", *inst, *sdk))
    assert fingerprint(store) == truth
    assert ledger(r) == truth_ledger


def test_logfire_request_and_stream_in_two_files_are_one_call(store, load, tmp_path):
    """Rule 3 links spans of two traces: the stream's span arrives in a later file (a later export batch)."""
    base = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.provider.name": "openai"}
    req = span("b1", "r1", 0, 5, {**base, "logfire.span_type": "span"}, name="Chat Completion with {request_data[model]!r}")
    log = span("b2", "l1", 400, 400, {**base, "logfire.span_type": "log", "duration": 0.392,
                                       "gen_ai.usage.input_tokens": 40, "gen_ai.usage.output_tokens": 200},
               name="streaming response from {request_data[model]!r} took {duration:.2f}s")
    lines = [batch("logfire.openai", req), batch("logfire.openai", log)]
    truth, _ = one_file_truth(tmp_path, *lines)
    load(write(tmp_path, "req.jsonl", lines[0]), write(tmp_path, "log.jsonl", lines[1]))
    assert fingerprint(store) == truth and len(truth) == 1
    (c,) = calls(store)
    assert (c["output_tokens"], c["e2e_s"]) == (200, pytest.approx(0.4))


def test_same_trace_unrelated_calls_stay_apart_across_files(store, load, tmp_path):
    """An agent span over one model call merges with it; when a later file brings a second call under the same agent
    span, the agent span is no longer one call's wrapper: three calls, as one file would give. A call of another
    model in the same trace stays its own call all along."""
    model = "gpt-4o-mini"
    usage = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model, "gen_ai.provider.name": "openai"}
    agent = span("t1", "a1", 0, 3000, {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}, name="agent run")
    one = span("t1", "c1", 100, 900, {**usage, "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10},
               parent="a1")
    other = span("t1", "o1", 950, 1100, {**usage, "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 7,
                                         "gen_ai.usage.output_tokens": 3}, parent="a1")
    two = span("t1", "c2", 1200, 2900, {**usage, "gen_ai.usage.input_tokens": 200, "gen_ai.usage.output_tokens": 20},
               parent="a1")
    first = [batch("agents", agent), batch("opentelemetry.instrumentation.openai_v2", one, other)]
    second = [batch("opentelemetry.instrumentation.openai_v2", two)]
    load(write(tmp_path, "first.jsonl", *first))
    assert len(calls(store)) == 2  # the agent span and its one gpt-4o-mini call are one call; gpt-4o apart
    truth, truth_ledger = one_file_truth(tmp_path, *first, *second)
    load(write(tmp_path, "second.jsonl", *second))
    assert fingerprint(store) == truth and len(truth) == 4
    assert sum(c["output_tokens"] or 0 for c in calls(store)) == 33


def test_a_failure_mid_load_leaves_the_store_as_it_was(store, load, tmp_path, monkeypatch):
    """The second file's load fails after its spans were merged with the stored calls and the stored rows removed:
    the transaction rolls back, the stored calls and their spans are as before, and the file loads again later."""
    from phaselens.ingest import otlp_carry

    inst, sdk = _recorded_pair_lines()
    load(write(tmp_path, "sdk.jsonl", *sdk))
    snapshot = {t: store.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                for t in ("raw_calls", "raw_otlp_spans", "raw_calls_replaced")}
    real = otlp_carry.settle

    def settle_then_fail(con, load_id):
        out = real(con, load_id)
        assert out["replaced"] == 12  # the stored rows are gone inside the transaction
        raise RuntimeError("disk full")

    monkeypatch.setattr(otlp_carry, "settle", settle_then_fail)
    r = load(write(tmp_path, "inst.jsonl", *inst))
    assert r.files[0].status == "failed" and "disk full" in r.files[0].message
    for t, rows in snapshot.items():
        assert store.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() == rows, t
    monkeypatch.setattr(otlp_carry, "settle", real)
    r = load(tmp_path / "inst.jsonl")
    assert r.files[0].status == "loaded"
    assert store.execute("SELECT count(*) FROM requests").fetchone()[0] == 12


def _chunks(first_ms: float, n: int, gap_ms: float) -> list[tuple[str, float]]:
    return [("gen_ai.content.completion.chunk", first_ms + i * gap_ms) for i in range(n)]


def test_capped_events_with_a_ttft_attribute_use_the_attribute(store, load, tmp_path):
    """OpenTelemetry's SDK keeps the newest 128 events: 72 chunk events were dropped before these."""
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.provider.name": "openai",
             "gen_ai.usage.input_tokens": 40, "gen_ai.usage.output_tokens": 200}
    kept = _chunks(300 + 72 * 2.0, 128, 2.0)  # truth: first chunk at 300 ms, one every 2 ms
    with_attr = span("g1", "a1", 0, 760, {**attrs, "gen_ai.response.time_to_first_chunk": 0.3}, events=kept, dropped=72)
    without = span("g2", "b1", 1000, 1760, attrs, events=[(n, t + 1000) for n, t in kept], dropped=72)
    load(write(tmp_path, "cap.jsonl", batch("opentelemetry.instrumentation.openai.v1", with_attr, without)))
    a, b = calls(store)
    assert a["ttft_s"] == pytest.approx(0.3) and a["timing_source"] == "measured"
    assert json.loads(a["attributes_json"])["phaselens.ttft_basis"] == "span_attribute"
    # back-extrapolated: the first kept event is chunk no. 72, the dropped ones spaced at the kept ones' gap
    assert b["ttft_s"] == pytest.approx(0.3, abs=0.001) and b["timing_source"] == "events"
    assert json.loads(b["attributes_json"])["phaselens.ttft_basis"] == "events_extrapolated"
    # never the first kept event (0.444 s)
    assert abs(b["ttft_s"] - (300 + 72 * 2.0) / 1000) > 0.1


def test_capped_bursty_events_extrapolate_at_the_mean_gap(store, load, tmp_path):
    """Chunks that arrive in bursts (three close together, then a pause) have a short median gap: spacing the
    dropped ones at the median would put the first token far too late."""
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
             "gen_ai.usage.input_tokens": 40, "gen_ai.usage.output_tokens": 300}
    times, t = [], 100.0
    for i in range(300):
        times.append(t)
        t += 0.2 if i % 3 != 2 else 5.6  # mean gap 2 ms, median 0.2 ms
    dropped = 172
    kept = [("gen_ai.content.completion.chunk", x) for x in times[dropped:]]
    load(write(tmp_path, "burst.jsonl", batch("opentelemetry.instrumentation.openai.v1",
                                              span("h1", "c1", 0, times[-1] + 1, attrs, events=kept, dropped=dropped))))
    (c,) = calls(store)
    assert c["ttft_s"] == pytest.approx(0.1, abs=0.01)



def test_a_later_span_reaches_every_trace_of_a_stored_call(store, load, tmp_path):
    """Logfire's request span and its "streaming response" span (two traces) are stored as one call; a later file
    brings an agent span around the request, in the request's trace only. The stream's trace is read back too (it
    holds a span of the stored call), so the call is re-derived from all three spans, as one file gives."""
    base = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.provider.name": "openai"}
    agent = span("b1", "a1", 0, 450, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"},
                 name="agent run")
    req = span("b1", "r1", 2, 5, {**base, "logfire.span_type": "span"}, parent="a1",
               name="Chat Completion with {request_data[model]!r}")
    log = span("b2", "l1", 400, 400, {**base, "logfire.span_type": "log", "duration": 0.392,
                                       "gen_ai.usage.input_tokens": 40, "gen_ai.usage.output_tokens": 200},
               name="streaming response from {request_data[model]!r} took {duration:.2f}s")
    files = [batch("logfire.openai", req, log), batch("agents", agent)]
    truth, truth_ledger = one_file_truth(tmp_path, *files)
    r = load(*(write(tmp_path, f"part{i}.jsonl", f) for i, f in enumerate(files)))
    assert fingerprint(store) == truth and len(truth) == 1
    assert ledger(r) == truth_ledger == (1, 2, 0)
    (c,) = calls(store)
    assert (c["span_id"], c["output_tokens"], c["convention"]) == ("a1".ljust(16, "0"), 200, "logfire+2")


def _walk_lines() -> list[str]:
    """An HTTP root span, a framework call below it, a tool span below that, and the SDK's span of the same call
    below the tool span: the merge walks up from the SDK span through the tool span to the framework span."""
    model = "claude-3-5-haiku-20241022"
    root = span("d1", "h1", 0, 1200, {"http.request.method": "POST", "http.route": "/api/chat"}, name="POST /api/chat")
    top = span("d1", "w1", 5, 1000, llmetry_attrs(300, 120, rid="msg_9"), parent="h1", name="anthropic.chat")
    tool = span("d1", "t1", 8, 995, {"tool.name": "retry"}, parent="w1", name="execute_tool retry")
    low = span("d1", "w3", 12, 985, sdk_attrs(300, 120, ttft=0.31, rid="msg_9", stream=True), parent="t1")
    return [batch("opentelemetry.instrumentation.fastapi", root), batch(LLMETRY, top), batch("agents", tool),
            batch(SDK, low)]


@pytest.mark.parametrize("order", [(0, 1, 2, 3), (3, 2, 1, 0), (0, 3, 1, 2)])
def test_a_root_non_call_span_is_not_stored_and_the_walk_through_a_middle_one_holds_across_files(store, load, tmp_path, order):
    """A non-call span with no parent can never sit between two spans of one call: it is not kept. A non-call
    span with a parent is kept, so a call whose spans arrive in different files still merges through it."""
    lines = _walk_lines()
    truth, truth_ledger = one_file_truth(tmp_path, *lines)
    r = load(*(write(tmp_path, f"walk{i}.jsonl", lines[i]) for i in order))
    assert fingerprint(store) == truth and len(truth) == 1
    assert ledger(r) == truth_ledger == (1, 3, 0)
    kept = store.execute("SELECT span_id FROM raw_otlp_spans WHERE _kind = 'skip' ORDER BY 1").fetchall()
    assert kept == [("t1".ljust(16, "0"),)]
