"""One rule for a span's ids and times: the receiver's answer before acknowledging (`span_problem`) is the load's.

Each case is one OpenAI chat span with its ids or times spoiled. It is loaded from a file (the rule in
ingest/sql/otlp_spans.sql) and judged by the receiver (ingest/otlp_http.py); both must give the same
verdict: stored, or rejected with the same reason. The same span sent as protobuf must pass the receiver's fast
path only when the receiver's slow path would store it.
"""

from __future__ import annotations

import copy
import json

import pytest
from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from phaselens.pipeline.load import ingest
from phaselens.ingest.otlp_http import check_spans, clean_protobuf, span_problem, to_otlp_json
from tests.conftest import FIXTURES

DOC = json.loads((FIXTURES / "otlp" / "bad_records.jsonl").read_text().splitlines()[0])
DOC["resourceSpans"][0]["scopeSpans"][0]["spans"] = DOC["resourceSpans"][0]["scopeSpans"][0]["spans"][:1]
DROP = object()

CASES: dict[str, dict] = {
    "valid": {},
    "no traceId": {"traceId": DROP}, "empty traceId": {"traceId": ""}, "short traceId": {"traceId": "abc"},
    "all-zero traceId": {"traceId": "0" * 32}, "traceId not hex": {"traceId": "z" * 32},
    "traceId a number": {"traceId": 5}, "base64 traceId": {"traceId": "S/kvNXezTaajzpKdDg5HNg=="},
    "no spanId": {"spanId": DROP}, "empty spanId": {"spanId": ""}, "short spanId": {"spanId": "12"},
    "all-zero spanId": {"spanId": "0" * 16}, "parent not hex": {"parentSpanId": "xyz"},
    "empty parent": {"parentSpanId": ""}, "all-zero parent": {"parentSpanId": "0" * 16},
    "no start": {"startTimeUnixNano": DROP}, "start '0'": {"startTimeUnixNano": "0"}, "start 0": {"startTimeUnixNano": 0},
    "start not digits": {"startTimeUnixNano": "abc"}, "start negative": {"startTimeUnixNano": "-5"},
    "start in exponent form": {"startTimeUnixNano": 1.7550792e18}, "start '1.5e18'": {"startTimeUnixNano": "1.5e18"},
    "start in hex": {"startTimeUnixNano": "0x185B4C5E2A1F0000"}, "start with spaces": {"startTimeUnixNano": " 1755079200123456789"},
    "start past 2100": {"startTimeUnixNano": "9999999999999999999"}, "start 25 digits": {"startTimeUnixNano": "9" * 25},
    "start an object": {"startTimeUnixNano": {"a": 1}}, "start true": {"startTimeUnixNano": True},
    "start empty": {"startTimeUnixNano": ""},
    "no end": {"endTimeUnixNano": DROP}, "end empty": {"endTimeUnixNano": ""}, "end '0'": {"endTimeUnixNano": "0"},
    "end NaN": {"endTimeUnixNano": "NaN"}, "end an object": {"endTimeUnixNano": {"x": 1}},
    "end before start": {"endTimeUnixNano": "1755079200000000000"},
    "end equals start": {"endTimeUnixNano": "1755079200123456789"},
    "times as numbers": {"startTimeUnixNano": 1755079200123456789, "endTimeUnixNano": 1755079203535456789},
    "events not a list": {"events": {"a": 1}}, "event time not digits": {"events": [{"name": "x", "timeUnixNano": "abc"}]},
    "event not an object": {"events": [5]},
}


def spoiled(case: dict) -> dict:
    doc = copy.deepcopy(DOC)
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    for key, value in case.items():
        if value is DROP:
            span.pop(key, None)
        else:
            span[key] = value
    return doc


def load_verdict(store, tmp_path, doc: dict) -> str | None:
    """None when the load stored the span, else its reject reason."""
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(doc) + "\n")
    ingest(store, [str(path)])
    reasons = [r for (r,) in store.execute("SELECT reason FROM rejects").fetchall()]
    stored = store.execute("SELECT count(*) FROM raw_calls").fetchone()[0]
    assert stored + len(reasons) == 1, (stored, reasons)
    return reasons[0] if reasons else None


@pytest.mark.parametrize("name", list(CASES))
def test_the_receiver_and_the_load_give_the_same_verdict(name, store, tmp_path):
    doc = spoiled(CASES[name])
    problem = span_problem(doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0])
    assert (problem[0] if problem else None) == load_verdict(store, tmp_path, doc)


def test_the_cases_cover_stored_spans_and_every_reason():
    verdicts = {name: span_problem(spoiled(case)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]) for name, case in CASES.items()}
    assert verdicts["valid"] is None and verdicts["base64 traceId"] is None and verdicts["no end"] is None
    assert {v[0] for v in verdicts.values() if v} == {"missing_field", "bad_timestamp", "end_before_start"}


PROTOBUF_CASES = {
    "valid": {}, "no traceId": {"traceId": DROP}, "no spanId": {"spanId": DROP}, "no start": {"startTimeUnixNano": DROP},
    "no end": {"endTimeUnixNano": DROP}, "end before start": {"endTimeUnixNano": "1755079200000000000"},
    "start past 2100": {"startTimeUnixNano": "9999999999999999999"}, "short traceId": {"traceId": "abcd"},
}


@pytest.mark.parametrize("name", list(PROTOBUF_CASES))
def test_the_protobuf_fast_path_passes_only_what_the_slow_path_keeps(name):
    doc = spoiled(PROTOBUF_CASES[name])
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    for key in ("traceId", "spanId", "parentSpanId"):  # protobuf JSON writes bytes as base64
        if key in span:
            span[key] = __import__("base64").b64encode(bytes.fromhex(span[key])).decode()
    body = ParseDict(doc, ExportTraceServiceRequest()).SerializeToString()
    _, fast_ok = clean_protobuf(body)
    slow = check_spans(to_otlp_json(body, "protobuf"), "ref")
    assert fast_ok == (not slow.rejects), (fast_ok, slow.rejects)
