"""The receiver's protobuf-to-JSON walk writes exactly what the generic `MessageToDict` path writes."""

from __future__ import annotations

import math
import random

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from phaselens.ingest.otlp_protobuf import request_to_json

# Every field of the trace schema this module writes. A newer opentelemetry-proto that adds one fails here, so the
# walk is extended before it silently drops the new field.
KNOWN = {
    ExportTraceServiceRequest: {"resource_spans"},
    trace_pb2.ResourceSpans: {"resource", "scope_spans", "schema_url"},
    trace_pb2.ScopeSpans: {"scope", "spans", "schema_url"},
    trace_pb2.Span: {"trace_id", "span_id", "trace_state", "parent_span_id", "flags", "name", "kind",
                     "start_time_unix_nano", "end_time_unix_nano", "attributes", "dropped_attributes_count", "events",
                     "dropped_events_count", "links", "dropped_links_count", "status"},
    trace_pb2.Span.Event: {"time_unix_nano", "name", "attributes", "dropped_attributes_count"},
    trace_pb2.Span.Link: {"trace_id", "span_id", "trace_state", "attributes", "dropped_attributes_count", "flags"},
    trace_pb2.Status: {"message", "code"},
    common_pb2.InstrumentationScope: {"name", "version", "attributes", "dropped_attributes_count"},
    common_pb2.AnyValue: {"string_value", "bool_value", "int_value", "double_value", "array_value", "kvlist_value",
                          "bytes_value", "string_value_strindex"},
    common_pb2.KeyValue: {"key", "value", "key_strindex"},
    common_pb2.ArrayValue: {"values"},
    common_pb2.KeyValueList: {"values"},
    resource_pb2.Resource: {"attributes", "dropped_attributes_count", "entity_refs"},
}


def generic(req: ExportTraceServiceRequest) -> dict:
    """The generic path: MessageToDict, then ids from base64 to hex as OTLP JSON has them."""
    import base64

    doc = MessageToDict(req, use_integers_for_enums=True)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for sp in ss.get("spans", []):
                for obj in [sp, *sp.get("links", [])]:
                    for k in ("traceId", "spanId", "parentSpanId"):
                        if k in obj:
                            obj[k] = base64.b64decode(obj[k]).hex()
    return doc


@pytest.mark.parametrize("message", list(KNOWN), ids=lambda m: m.DESCRIPTOR.name)
def test_every_schema_field_is_known(message):
    assert {f.name for f in message.DESCRIPTOR.fields} == KNOWN[message]


def _value(rng: random.Random, depth: int, v: common_pb2.AnyValue) -> None:
    kind = rng.choice(["unset", "s", "i", "b", "d", "nan", "inf", "ninf", "arr", "kv", "bytes", "strindex", "empty_s"]
                      if depth < 3 else ["s", "i", "b", "d"])
    if kind == "s":
        v.string_value = rng.choice(["gpt-4o", "ünïcødé ✓", "a" * 300, "line\nbreak", '"quoted"'])
    elif kind == "empty_s":
        v.string_value = ""  # set but default: proto3 JSON still writes the oneof member
    elif kind == "i":
        v.int_value = rng.choice([0, 1, -1, 2**63 - 1, -(2**63), 123456789012])
    elif kind == "b":
        v.bool_value = rng.choice([True, False])
    elif kind == "d":
        v.double_value = rng.choice([0.0, 1.5, -2.25, 1e300, 5e-324, 0.1])
    elif kind == "nan":
        v.double_value = math.nan
    elif kind == "inf":
        v.double_value = math.inf
    elif kind == "ninf":
        v.double_value = -math.inf
    elif kind == "arr":
        v.array_value.SetInParent()
        for _ in range(rng.randint(0, 3)):
            _value(rng, depth + 1, v.array_value.values.add())
    elif kind == "kv":
        v.kvlist_value.SetInParent()
        _attrs(rng, depth + 1, v.kvlist_value.values)
    elif kind == "bytes":
        v.bytes_value = bytes(rng.randrange(256) for _ in range(rng.randint(0, 12)))
    elif kind == "strindex":
        v.string_value_strindex = rng.randint(0, 9)


def _attrs(rng: random.Random, depth: int, kvs) -> None:
    for i in range(rng.randint(0, 4)):
        kv = kvs.add()
        if rng.random() < 0.95:
            kv.key = rng.choice(["gen_ai.usage.input_tokens", "service.name", "k", ""]) + str(i)
        if rng.random() < 0.05:
            kv.key_strindex = rng.randint(1, 5)
        if rng.random() < 0.9:
            _value(rng, depth, kv.value)


def _ids(rng: random.Random, n: int) -> bytes:
    return bytes(rng.randrange(256) for _ in range(n)) if rng.random() < 0.95 else b""


def random_request(seed: int) -> ExportTraceServiceRequest:
    rng = random.Random(seed)
    req = ExportTraceServiceRequest()
    for _ in range(rng.randint(0, 3)):
        rs = req.resource_spans.add()
        if rng.random() < 0.8:
            rs.resource.SetInParent()
            _attrs(rng, 0, rs.resource.attributes)
            if rng.random() < 0.2:
                rs.resource.dropped_attributes_count = rng.randint(1, 9)
            if rng.random() < 0.1:
                ref = rs.resource.entity_refs.add()
                ref.type = "service"
                ref.id_keys.append("service.name")
        if rng.random() < 0.3:
            rs.schema_url = "https://opentelemetry.io/schemas/1.26.0"
        for _ in range(rng.randint(0, 3)):
            ss = rs.scope_spans.add()
            if rng.random() < 0.8:
                ss.scope.SetInParent()
                if rng.random() < 0.9:
                    ss.scope.name = rng.choice(["opentelemetry.instrumentation.openai_v2", "logfire", ""])
                if rng.random() < 0.5:
                    ss.scope.version = "2.4b0"
                _attrs(rng, 1, ss.scope.attributes)
                if rng.random() < 0.1:
                    ss.scope.dropped_attributes_count = 3
            if rng.random() < 0.2:
                ss.schema_url = "https://opentelemetry.io/schemas/1.37.0"
            for _ in range(rng.randint(0, 5)):
                sp = ss.spans.add()
                sp.trace_id, sp.span_id = _ids(rng, 16), _ids(rng, 8)
                if rng.random() < 0.6:
                    sp.parent_span_id = _ids(rng, 8)
                if rng.random() < 0.2:
                    sp.trace_state = "vendor=value"
                if rng.random() < 0.5:
                    sp.flags = rng.choice([0, 1, 256, 2**32 - 1])
                if rng.random() < 0.95:
                    sp.name = rng.choice(["chat gpt-4o", "streaming response from 'gpt-4o' took 1.2s", ""])
                sp.kind = rng.randint(0, 5)
                if rng.random() < 0.95:
                    sp.start_time_unix_nano = rng.randint(0, 2**64 - 1)
                if rng.random() < 0.95:
                    sp.end_time_unix_nano = rng.randint(0, 2**64 - 1)
                _attrs(rng, 0, sp.attributes)
                if rng.random() < 0.1:
                    sp.dropped_attributes_count = rng.randint(1, 100)
                for _ in range(rng.randint(0, 4)):
                    ev = sp.events.add()
                    if rng.random() < 0.9:
                        ev.time_unix_nano = rng.randint(1, 2**63)
                    if rng.random() < 0.9:
                        ev.name = rng.choice(["gen_ai.content.completion", "llm.content.completion.chunk", ""])
                    _attrs(rng, 1, ev.attributes)
                    if rng.random() < 0.1:
                        ev.dropped_attributes_count = 2
                if rng.random() < 0.2:
                    sp.dropped_events_count = rng.randint(1, 500)
                for _ in range(rng.randint(0, 2)):
                    ln = sp.links.add()
                    ln.trace_id, ln.span_id = _ids(rng, 16), _ids(rng, 8)
                    if rng.random() < 0.3:
                        ln.trace_state = "a=b"
                    _attrs(rng, 1, ln.attributes)
                    if rng.random() < 0.2:
                        ln.dropped_attributes_count = 1
                    if rng.random() < 0.3:
                        ln.flags = 1
                if rng.random() < 0.1:
                    sp.dropped_links_count = 4
                r = rng.random()
                if r < 0.3:
                    sp.status.SetInParent()  # present but empty: written as {}
                elif r < 0.7:
                    sp.status.code = rng.randint(0, 2)
                    if rng.random() < 0.5:
                        sp.status.message = "boom"
    return req


@pytest.mark.parametrize("seed", range(300))
def test_random_requests_match_the_generic_path(seed):
    req = random_request(seed)
    # through bytes, as the receiver sees it
    parsed = ExportTraceServiceRequest.FromString(req.SerializeToString())
    assert request_to_json(parsed) == generic(parsed)


def test_sdk_exported_spans_match_the_generic_path():
    """Spans as the official SDK exporter encodes them."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Link, Status, StatusCode

    mem = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "chat", "deployment.environment": "prod"}))
    provider.add_span_processor(SimpleSpanProcessor(mem))
    tracer = provider.get_tracer("phaselens.test", "1.0")
    with tracer.start_as_current_span("chat gpt-4o", attributes={"gen_ai.usage.input_tokens": 1234,
                                                                  "gen_ai.request.temperature": 0.2,
                                                                  "gen_ai.response.finish_reasons": ["stop"],
                                                                  "llm.is_streaming": True}) as parent:
        parent.add_event("gen_ai.content.completion", {"idx": 0})
        with tracer.start_as_current_span("child", links=[Link(parent.get_span_context(), {"k": "v"})]) as child:
            child.set_status(Status(StatusCode.ERROR, "rate limited"))
    req = encode_spans(mem.get_finished_spans())
    parsed = ExportTraceServiceRequest.FromString(req.SerializeToString())
    out = request_to_json(parsed)
    assert out == generic(parsed)
    spans = out["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert len(spans) == 2 and all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)


def test_empty_request():
    assert request_to_json(ExportTraceServiceRequest()) == generic(ExportTraceServiceRequest()) == {}
