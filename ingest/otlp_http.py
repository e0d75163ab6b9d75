"""OTLP/HTTP trace requests for `phaselens collect`: bounded decompression, protobuf or JSON bodies turned into the
OTLP JSON that `ingest/otlp.py` reads, cheap per-span checks, and the response bodies the OTLP/HTTP spec prescribes.

Protobuf bodies become OTLP JSON the way the spec's JSON encoding writes them: lowerCamelCase keys, trace and span
ids as lowercase hex (not base64), 64-bit integers as decimal strings, enums as integers. JSON bodies are taken as
they are (lowerCamelCase keys, hex ids, int64 as strings or numbers).

A span whose ids or times are missing or invalid is rejected here (`span_problem`, the load's own rule), answered
as `partial_success`, and recorded as a `Reject`; every other judgement (model, tokens, kind of span) is made when
the spool is loaded.
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import DecodeError
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from phaselens.models import Reject
from phaselens.models.records import truncate_raw

from .otlp_protobuf import request_to_json

SOURCE = "otlp_http"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
CONTENT_TYPES = {PROTOBUF: "protobuf", JSON: "json"}

# Content-Encoding -> zlib window bits (gzip header; zlib header, which the OTel exporters send as `deflate`).
ENCODINGS: dict[str, int | None] = {"identity": None, "gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS,
                                    "deflate": zlib.MAX_WBITS}

# Span fields kept in a reject's `raw` column: identity and time only, never attributes (they may hold prompt text).
RAW_FIELDS: tuple[str, ...] = ("traceId", "spanId", "parentSpanId", "name", "kind", "startTimeUnixNano", "endTimeUnixNano")
# A span's time: a count of nanoseconds written as decimal digits, from 1970 up to 2100 (ingest's `otlp_ns`).
NS_DIGITS = re.compile(r"[0-9]{1,20}")
LAST_NS = 4_102_444_800 * 10**9

# HTTP status -> google.rpc.Code carried in the Status body of an error response.
GRPC_CODES: dict[int, int] = {400: 3, 401: 16, 404: 5, 405: 12, 411: 3, 413: 8, 415: 3, 500: 13, 503: 14}


class BadRequest(Exception):
    """The request cannot be used as a whole; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        self.message, self.status = message, status
        super().__init__(message)


@dataclass
class Checked:
    """A request after the per-span checks: the OTLP JSON of the spans kept, and the rejects."""

    doc: dict
    accepted: int = 0
    rejects: list[Reject] = field(default_factory=list)

    def line(self) -> str | None:
        """The kept spans as one OTLP JSON line (no newline), or None when no span was kept."""
        if not self.accepted:
            return None
        return json.dumps(self.doc, separators=(",", ":"))

    def error_message(self) -> str:
        """One sentence for `partial_success.error_message`: how many spans were rejected and why."""
        if not self.rejects:
            return ""
        why = Counter(f"{r.reason} ({r.detail})" for r in self.rejects)
        parts = [f"{n} {reason}" for reason, n in why.most_common(5)]
        more = "" if len(why) <= 5 else f"; and {len(why) - 5} other reason(s)"
        return f"{len(self.rejects)} span(s) rejected: " + "; ".join(parts) + more


def decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """Undo `Content-Encoding`, never producing more than `limit` bytes (a compression bomb stops at the limit)."""
    enc = (encoding or "identity").strip().lower()
    if enc not in ENCODINGS:
        raise BadRequest(f"Content-Encoding {encoding!r} is not supported; send gzip, deflate or none", 415)
    wbits = ENCODINGS[enc]
    if wbits is None:
        return body
    out, data = bytearray(), body
    try:
        while data:
            d = zlib.decompressobj(wbits)
            out += d.decompress(data, limit + 1 - len(out))
            if len(out) > limit:
                raise BadRequest(f"the decompressed body is larger than the limit of {limit} bytes", 413)
            if not d.eof:
                if d.unconsumed_tail:  # output stopped at the limit with input left: too large
                    raise BadRequest(f"the decompressed body is larger than the limit of {limit} bytes", 413)
                raise BadRequest(f"the {enc} body is truncated")
            data = d.unused_data.lstrip(b"\0") if wbits != zlib.MAX_WBITS else b""  # further gzip members
    except zlib.error as e:
        raise BadRequest(f"the body is not valid {enc} ({e})") from e
    return bytes(out)


def to_otlp_json(body: bytes, fmt: str) -> dict:
    """The request as an OTLP JSON object (`{"resourceSpans": [...]}`), from a protobuf or JSON body."""
    if fmt == "protobuf":
        req = ExportTraceServiceRequest()
        try:
            req.ParseFromString(body)
        except (DecodeError, RecursionError) as e:
            raise BadRequest(f"the body is not a valid ExportTraceServiceRequest protobuf ({e})") from e
        return request_to_json(req)
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise BadRequest(f"the body is not valid JSON ({str(e)[:200]})") from e
    if not isinstance(doc, dict):
        raise BadRequest("the body is JSON but not an object; send an ExportTraceServiceRequest")
    if LONE_SURROGATE_HINT.search(body):
        doc = _replace_lone_surrogates(doc)
    return doc


# A `\\uD800`-`\\uDFFF` escape in a JSON body: the only way a lone surrogate gets into a decoded string (raw bytes
# of one are not UTF-8 and fail the parse). Such a string cannot be written as UTF-8, so the store would refuse it.
LONE_SURROGATE_HINT = re.compile(rb"\\u[dD][89a-fA-F]")
LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _fix_text(s: str) -> str:
    if not LONE_SURROGATE.search(s):
        return s
    # pairs of surrogates become their character; a lone one becomes U+FFFD, as a UTF-8 decoder replaces bad bytes
    return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _replace_lone_surrogates(value):
    """The JSON value with every lone surrogate in its keys and strings replaced by U+FFFD (the span is kept)."""
    if isinstance(value, str):
        return _fix_text(value)
    if isinstance(value, list):
        return [_replace_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_fix_text(k): _replace_lone_surrogates(v) for k, v in value.items()}
    return value


def _list_of_objects(parent: dict, key: str, where: str) -> list[dict]:
    value = parent.get(key, [])
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise BadRequest(f"{where}.{key} must be a list of objects")
    return value


def check_spans(doc: dict, ref: str) -> Checked:
    """Drop the spans with missing or invalid ids or timestamps from `doc` (in place) and return them as rejects.

    `ref` names the request in reject locators (`<ref>#<spanId>`); a body whose structure is not OTLP raises BadRequest.
    """
    checked = Checked(doc)
    n = 0
    kept_resources = []
    for rs in _list_of_objects(doc, "resourceSpans", "body"):
        kept_scopes = []
        for ss in _list_of_objects(rs, "scopeSpans", "resourceSpans[]"):
            spans = ss.get("spans", [])
            if not isinstance(spans, list):
                raise BadRequest("scopeSpans[].spans must be a list")
            kept = []
            for span in spans:
                n += 1
                problem = span_problem(span)
                if problem is None:
                    kept.append(span)
                    continue
                reason, detail = problem
                span_id = span.get("spanId") if isinstance(span, dict) else None
                where = span_id if isinstance(span_id, str) and span_id else f"span{n}"
                raw = {k: span[k] for k in RAW_FIELDS if k in span} if isinstance(span, dict) else {
                    "type": type(span).__name__}
                checked.rejects.append(Reject(source=SOURCE, locator=f"{ref}#{where}", reason=reason, detail=detail,
                                              raw=truncate_raw(json.dumps(raw, default=str))))
            checked.accepted += len(kept)
            if kept:
                ss["spans"] = kept
                kept_scopes.append(ss)
        if kept_scopes:
            rs["scopeSpans"] = kept_scopes
            kept_resources.append(rs)
    doc["resourceSpans"] = kept_resources
    return checked


def span_problem(span: object) -> tuple[str, str] | None:
    """Why a span cannot be stored, as (reject reason, detail), or None when it can.

    The rule is the one the load applies to every OTLP span (`_reason` in ingest/sql/otlp_spans.sql, its ids and
    times), answered here so that a span is rejected in the response rather than acknowledged and rejected later:
    a traceId and a spanId that are present and not empty (any spelling: they are keys, not checked as hex); a
    start time, and an end time when there is one, that are counts of nanoseconds between 1970 and 2100; the end
    not before the start. tests/pipeline/test_span_validity.py holds both to the same verdicts. One difference:
    a span that is not a JSON object is rejected here, where a file's load counts it as skipped (neither stores it;
    the exporter that sent it is told why).
    """
    if not isinstance(span, dict):
        return "malformed_row", "span is not a JSON object"
    for key in ("traceId", "spanId"):
        if span.get(key) in (None, ""):
            return "missing_field", f"{key} is missing"
    start = time_ns(span.get("startTimeUnixNano"))
    if start is None:
        return "bad_timestamp", "startTimeUnixNano is missing, zero or not a count of nanoseconds from 1970 to 2100"
    if span.get("endTimeUnixNano") in (None, ""):
        return None
    end = time_ns(span["endTimeUnixNano"])
    if end is None:
        return "bad_timestamp", "endTimeUnixNano is not a count of nanoseconds from 1970 to 2100"
    if end < start:
        return "end_before_start", "endTimeUnixNano is earlier than startTimeUnixNano"
    return None


def time_ns(value: object) -> int | None:
    """An OTLP time (a JSON integer or a string of decimal digits) as nanoseconds after 1970, when it is one from
    1970 up to 2100, else None."""
    if isinstance(value, str) and NS_DIGITS.fullmatch(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 1 <= value <= LAST_NS else None


def export_response(fmt: str, checked: Checked | None) -> bytes:
    """An ExportTraceServiceResponse body (protobuf or JSON), with `partial_success` when spans were rejected."""
    resp = ExportTraceServiceResponse()
    if checked is not None and checked.rejects:
        resp.partial_success.rejected_spans = len(checked.rejects)
        resp.partial_success.error_message = checked.error_message()
    if fmt == "protobuf":
        return resp.SerializeToString()
    return json.dumps(MessageToDict(resp)).encode()


def status_body(fmt: str, http_status: int, message: str) -> bytes:
    """A google.rpc.Status error body (protobuf or JSON), as the OTLP/HTTP spec answers failed requests."""
    status = Status(code=GRPC_CODES.get(http_status, 2), message=message)
    if fmt == "protobuf":
        return status.SerializeToString()
    return json.dumps(MessageToDict(status)).encode()


# A spool line that holds a request's protobuf body as it came (base64), already checked: `{"otlp_pb": "..."}`.
# The flusher turns such lines into OTLP JSON (`expand_line`) before loading, so the request path never pays for it.
PB_LINE_KEY = "otlp_pb"
PB_LINE_PREFIX = '{"otlp_pb":'


def clean_protobuf(body: bytes) -> tuple[int, bool] | None:
    """Parse a protobuf body (upb) and run the per-span checks on the message itself: (spans, True) when every span
    passes them, (spans, False) when one does not (then the slow path names the rejects), None when empty."""
    req = ExportTraceServiceRequest()
    try:
        req.ParseFromString(body)
    except (DecodeError, RecursionError) as e:
        raise BadRequest(f"the body is not a valid ExportTraceServiceRequest protobuf ({e})") from e
    n = 0
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            for sp in ss.spans:
                n += 1
                if (not sp.trace_id or not sp.span_id or not 1 <= sp.start_time_unix_nano <= LAST_NS
                        or not (sp.end_time_unix_nano == 0  # unset: no end time
                                or sp.start_time_unix_nano <= sp.end_time_unix_nano <= LAST_NS)):
                    return n, False
    return n, True


def protobuf_line(body: bytes) -> str:
    """A spool line holding a checked protobuf body."""
    return json.dumps({PB_LINE_KEY: base64.b64encode(body).decode("ascii")})


def expand_line(line: str) -> str:
    """A spool line as OTLP JSON: protobuf lines are decoded, other lines are returned as they are."""
    if not line.startswith(PB_LINE_PREFIX):
        return line
    body = base64.b64decode(json.loads(line)[PB_LINE_KEY])
    return json.dumps(to_otlp_json(body, "protobuf"), separators=(",", ":"))
