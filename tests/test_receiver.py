"""`phaselens collect`, the live OTLP/HTTP receiver, run as its own process the way a user runs it.

Acceptance (issue 6): spans from the official OpenTelemetry SDK's OTLP/HTTP exporter reach `requests`; oversized and
malformed bodies get 413 and 400 while the server stays up; `kill -9` after acknowledgement loses no span; spans
rejected on receipt come back as `partialSuccess.rejectedSpans` and land in `rejects`.
"""

from __future__ import annotations

import gzip
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import zlib
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import duckdb
import pytest
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from phaselens.pipeline.errors import StoreError
from phaselens.pipeline.receiver import Receiver
from phaselens.pipeline.store import connect
from tests.conftest import FIXTURES

FIX = FIXTURES / "receiver"
TOKEN = "s3cret-token"
LIMIT = 256 * 1024
PB, JSON = "application/x-protobuf", "application/json"
T0 = 1_755_079_200_123_456_789  # 2025-08-13T10:00:00.123456789Z
T0_UTC = datetime(2025, 8, 13, 10, 0, 0, 123456)
LISTENING = re.compile(r"listening on (http://\S+/v1/traces)")


# --- helpers -------------------------------------------------------------------------------------------------------


class Collect:
    """`phaselens collect` in a subprocess on a free port, logging to a file."""

    def __init__(self, tmp: Path, db: Path, *args: str) -> None:
        self.db, self.spool = db, Path(f"{db}.spool")
        self.log = tmp / f"collect-{time.monotonic_ns()}.log"
        argv = [sys.executable, "-m", "phaselens", "collect", "--db", str(db), "--port", "0", *args]
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                         env={**os.environ, "OTEL_SDK_DISABLED": "true"})
        deadline = time.monotonic() + 30
        while not (m := LISTENING.search(self.log.read_text())):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                pytest.fail(f"collect did not start:\n{self.log.read_text()}")
            time.sleep(0.05)
        self.url = m.group(1)

    def stop(self) -> int:
        """SIGTERM, as a service manager stops it; returns the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)


def post(url: str, body: bytes, content_type: str = JSON, token: str | None = TOKEN, method: str = "POST",
         path: str | None = None, headers: dict | None = None) -> tuple[int, dict, bytes]:
    """One HTTP request; returns (status, lower-cased headers, body)."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    h = {"Content-Type": content_type, **(headers or {})}
    if token:
        h["Authorization"] = f"Bearer {token}"
    conn.request(method, path or u.path, body=body, headers=h)
    resp = conn.getresponse()
    out = resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    conn.close()
    return out


def segments(spool: Path) -> list[Path]:
    """Spool files not yet loaded (segments and their reject sidecars)."""
    return sorted(spool.glob("*.jsonl"))


def wait_flushed(spool: Path, timeout: float = 20) -> None:
    """Wait until the flusher has loaded every segment and closed the store (it deletes them after closing)."""
    deadline = time.monotonic() + timeout
    while segments(spool):
        assert time.monotonic() < deadline, f"still in the spool: {segments(spool)}"
        time.sleep(0.05)


def query(db: Path, sql: str, params: list | None = None) -> list[tuple]:
    """Run a query on the store read-only, waiting while a flush holds it."""
    deadline = time.monotonic() + 15
    while True:
        try:
            con = connect(db, read_only=True)
            break
        except StoreError:
            assert time.monotonic() < deadline, "the store stayed locked"
            time.sleep(0.1)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def kv(key: str, value: str | int) -> KeyValue:
    v = AnyValue(int_value=value) if isinstance(value, int) else AnyValue(string_value=value)
    return KeyValue(key=key, value=v)


def chat_span(trace: str, span: str, start: int, seconds: float, model: str = "gpt-4o", tokens=(900, 50)) -> Span:
    """A GenAI chat span (OTel semantic conventions) as protobuf."""
    attrs = [kv("gen_ai.operation.name", "chat"), kv("gen_ai.provider.name", "openai"),
             kv("gen_ai.request.model", model), kv("gen_ai.usage.input_tokens", tokens[0]),
             kv("gen_ai.usage.output_tokens", tokens[1])]
    return Span(trace_id=bytes.fromhex(trace), span_id=bytes.fromhex(span), name=f"chat {model}",
                kind=Span.SPAN_KIND_CLIENT, start_time_unix_nano=start,
                end_time_unix_nano=start + round(seconds * 1e9), attributes=attrs)


def pb_request(*spans: Span, service: str = "pb-client") -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=[kv("service.name", service)]),
        scope_spans=[ScopeSpans(spans=list(spans))])])


@pytest.fixture(scope="module")
def collect(tmp_path_factory):
    """One receiver for this module: a token, a small body limit and quick flushes."""
    tmp = tmp_path_factory.mktemp("collect")
    server = Collect(tmp, tmp / "store.duckdb", "--token", TOKEN, "--max-body-bytes", str(LIMIT),
                     "--flush-seconds", "0.3")
    yield server
    assert server.stop() == 0, server.log.read_text()
    assert "Traceback" not in server.log.read_text(), server.log.read_text()


# --- acceptance ----------------------------------------------------------------------------------------------------


def test_official_sdk_exporter_spans_reach_requests(collect):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource as SdkResource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
    from opentelemetry.trace import SpanKind

    results = []

    class Recording(OTLPSpanExporter):
        def export(self, spans):
            results.append(super().export(spans))
            return results[-1]

    # (input tokens incl. cache reads, cache reads, output tokens, duration s) per call
    calls = [(1864, 1536, 212, 3.412), (5000, 0, 40, 1.25), (120, 0, 900, 9.0)]
    provider = TracerProvider(resource=SdkResource.create({"service.name": "sdk-chat"}))
    provider.add_span_processor(BatchSpanProcessor(Recording(endpoint=collect.url,
                                                             headers={"Authorization": f"Bearer {TOKEN}"})))
    tracer = provider.get_tracer("tests.receiver")
    expected = {}
    for i, (inp, cache, out, seconds) in enumerate(calls):
        attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                 "gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": inp,
                 "gen_ai.usage.output_tokens": out}
        if cache:
            attrs["gen_ai.usage.cache_read.input_tokens"] = cache
        start = T0 + i * 60 * 10**9
        span = tracer.start_span("chat gpt-4o-mini", kind=SpanKind.CLIENT, attributes=attrs, start_time=start)
        span.end(end_time=start + round(seconds * 1e9))
        ctx = span.get_span_context()
        # OTel input tokens include cache reads (docs/formats.md#token-buckets-and-what-input-means): uncached = input - cache reads
        expected[f"otlp:{ctx.trace_id:032x}:{ctx.span_id:016x}"] = (
            inp - cache, cache or None, out, seconds, T0_UTC + timedelta(minutes=i))
    health = tracer.start_span("GET /health", kind=SpanKind.SERVER, attributes={"http.request.method": "GET"})
    health.end()
    assert provider.force_flush(10_000)
    provider.shutdown()
    assert results and all(r == SpanExportResult.SUCCESS for r in results)

    wait_flushed(collect.spool)  # while the receiver keeps running: the flusher has released the store
    rows = query(collect.db, "SELECT call_id, provider, model, uncached_input_tokens, cache_read_tokens, output_tokens, "
                             "e2e_s, started_at FROM requests WHERE service = 'sdk-chat'")
    got = {r[0]: r[1:] for r in rows}
    assert set(got) == set(expected)  # and the HTTP span, not a model call, is not among them
    for call_id, (uncached, cache, out, seconds, started) in expected.items():
        prov, model, u, c, o, e2e, st = got[call_id]
        assert (prov, model, u, c, o, st) == ("openai", "gpt-4o-mini", uncached, cache, out, started)
        assert e2e == pytest.approx(seconds)

    try:  # the dashboard's snapshot follows each flush when the publish stage is installed
        from phaselens.pipeline.publish import current_snapshot
    except ImportError:
        return
    snapshot = current_snapshot(collect.db)
    assert snapshot is not None
    with duckdb.connect(str(snapshot), read_only=True) as snap:
        published = snap.execute("SELECT sum(calls) FROM rollup_hourly").fetchone()[0]
    assert published == query(collect.db, "SELECT count(*) FROM requests")[0][0]


def test_bad_bodies_get_their_status_and_the_server_stays_up(collect):
    good = pb_request(chat_span("6bf92f3577b34da6a3ce929d0e0e4736", "c1c1c1c1c1c1c1c1", T0, 1.0)).SerializeToString()
    cases = [  # (what, post() arguments, expected status)
        ("body over the limit", {"body": b'{"resourceSpans":[]' + b" " * LIMIT + b"}"}, 413),
        ("gzip body over the limit once decompressed", {"body": gzip.compress(b" " * (LIMIT * 40)),
                                                        "headers": {"Content-Encoding": "gzip"}}, 413),
        ("truncated protobuf", {"body": good[:-7], "content_type": PB}, 400),
        ("malformed JSON", {"body": b'{"resourceSpans": [{"scopeSpans": '}, 400),
        ("gzip header on a plain body", {"body": b"{}", "headers": {"Content-Encoding": "gzip"}}, 400),
        ("OTLP structure broken", {"body": b'{"resourceSpans": {"scopeSpans": []}}'}, 400),
        ("no token", {"body": b"{}", "token": None}, 401),
        ("wrong token", {"body": b"{}", "token": "guess"}, 401),
        ("unsupported content type", {"body": b"{}", "content_type": "text/plain"}, 415),
        ("other method", {"body": b"", "method": "GET"}, 405),
        ("other path", {"body": b"{}", "path": "/v1/metrics"}, 404),
    ]
    for what, kwargs, status in cases:
        got, headers, body = post(collect.url, **kwargs)
        assert got == status, (what, got, body)
        if status in (400, 413):  # an OTLP Status body in the request's encoding, saying what was wrong
            message = (Status.FromString(body).message if kwargs.get("content_type") == PB
                       else json.loads(body)["message"])
            assert message, what
        if status == 401:
            assert headers["www-authenticate"].startswith("Bearer")
        if status == 405:
            assert headers["allow"] == "POST"

    # a body announced far over the limit is refused from its Content-Length alone, before it is sent
    u = urlsplit(collect.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.putrequest("POST", u.path)
    for k, v in {"Content-Type": PB, "Content-Length": str(100 * LIMIT), "Authorization": f"Bearer {TOKEN}"}.items():
        conn.putheader(k, v)
    conn.endheaders()
    assert conn.getresponse().status == 413
    conn.close()

    assert collect.proc.poll() is None
    status, headers, body = post(collect.url, good, PB)
    assert (status, headers["content-type"]) == (200, PB)
    assert not ExportTraceServiceResponse.FromString(body).HasField("partial_success")
    for encoding, packed in (("gzip", gzip.compress(good)), ("deflate", zlib.compress(good))):
        assert post(collect.url, packed, PB, headers={"Content-Encoding": encoding})[0] == 200, encoding
    wait_flushed(collect.spool)
    assert query(collect.db, "SELECT count(*) FROM requests WHERE span_id = 'c1c1c1c1c1c1c1c1'")[0][0] == 1


def test_rejected_spans_come_back_as_partial_success(collect):
    body = (FIX / "partial_request.json").read_bytes()
    spans = [s for rs in json.loads(body)["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    # the fixture names each span the receiver must reject `reject:<reason>`
    bad = {s["spanId"]: s["name"].removeprefix("reject:") for s in spans if s["name"].startswith("reject:")}
    good = {f"otlp:{s['traceId'].lower()}:{s['spanId'].lower()}" for s in spans if s["spanId"] not in bad}

    status, headers, resp = post(collect.url, body)
    assert (status, headers["content-type"]) == (200, JSON)
    partial = json.loads(resp)["partialSuccess"]
    assert int(partial["rejectedSpans"]) == len(bad) == 5
    assert "rejected" in partial["errorMessage"]

    wait_flushed(collect.spool)
    stored = query(collect.db, f"SELECT call_id FROM requests WHERE call_id IN ({','.join('?' * len(good))})",
                   sorted(good))
    assert {r[0] for r in stored} == good
    rejects = query(collect.db, "SELECT locator, reason, raw FROM rejects WHERE source = 'otlp_http'")
    assert {loc.rsplit("#", 1)[1]: reason for loc, reason, _ in rejects} == bad
    assert not any("SECRET" in (raw or "") for _, _, raw in rejects)  # prompt text is never echoed


def test_kill_9_after_acknowledgement_loses_no_span(tmp_path):
    db = tmp_path / "store.duckdb"
    first = Collect(tmp_path, db, "--flush-seconds", "3600", "--flush-spans", "1000000")
    acked = set()
    for i in range(1, 6):
        trace, span = f"{i:032x}", f"{i:016x}"
        status, _, body = post(first.url, pb_request(chat_span(trace, span, T0 + i * 10**9, 0.5)).SerializeToString(),
                               PB, token=None)
        assert status == 200 and ExportTraceServiceResponse.FromString(body).partial_success.rejected_spans == 0
        acked.add(f"otlp:{trace}:{span}")
    assert post(first.url, (FIX / "chat_request.json").read_bytes(), token=None)[0] == 200
    acked.add("otlp:4bf92f3577b34da6a3ce929d0e0e4736:00f067aa0ba902b7")  # its one chat span (the other is HTTP)
    first.kill9()

    assert query(db, "SELECT count(*) FROM requests")[0][0] == 0  # nothing loaded yet: only the spool holds them
    [segment] = segments(first.spool)
    with open(segment, "a") as f:  # a request torn by the kill mid-write, never acknowledged
        f.write('{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"')
    torn = segment.read_bytes()

    second = Collect(tmp_path, db, "--flush-seconds", "3600")  # loads the leftovers before it listens
    late = chat_span("9bf92f3577b34da6a3ce929d0e0e4736", "f1f1f1f1f1f1f1f1", T0, 0.5)
    assert post(second.url, pb_request(late).SerializeToString(), PB, token=None)[0] == 200
    acked.add("otlp:9bf92f3577b34da6a3ce929d0e0e4736:f1f1f1f1f1f1f1f1")
    assert second.stop() == 0  # a graceful stop flushes what it accepted, long before the interval
    assert {r[0] for r in query(db, "SELECT call_id FROM requests")} == acked
    assert query(db, "SELECT count(*) FROM rejects")[0][0] == 0  # the torn line was dropped, not quarantined
    assert segments(first.spool) == []

    # a crash between loading a segment and deleting it: the same segment is found again and changes nothing
    segment.write_bytes(torn)
    third = Receiver(db, port=0)
    runner = threading.Thread(target=third.run)
    runner.start()
    third.stop()
    runner.join(timeout=30)
    assert query(db, "SELECT count(*) FROM requests")[0][0] == len(acked)
    assert [r[0] for r in query(db, "SELECT status FROM loads WHERE file = ? ORDER BY started_at",
                                [str(segment)])] == ["loaded", "unchanged"]


# --- in-process details --------------------------------------------------------------------------------------------


def test_flush_spans_loads_before_the_interval(tmp_path):
    db = tmp_path / "store.duckdb"
    rec = Receiver(db, port=0, flush_seconds=3600, flush_spans=2)
    runner = threading.Thread(target=rec.run)
    runner.start()
    try:
        spans = [chat_span("7bf92f3577b34da6a3ce929d0e0e4736", f"d{i}d{i}d{i}d{i}d{i}d{i}d{i}d{i}", T0, 1.0)
                 for i in range(2)]
        assert post(rec.url, pb_request(*spans).SerializeToString(), PB, token=None)[0] == 200
        wait_flushed(rec.spool.folder, timeout=10)  # an hour before the interval would have
    finally:
        rec.stop()
        runner.join(timeout=30)
    assert query(db, "SELECT count(*) FROM requests")[0][0] == 2


def test_the_store_held_by_another_process_is_waited_for(tmp_path):
    db = tmp_path / "store.duckdb"
    connect(db).close()
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); sys.stdin.read()", str(db)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    rec = Receiver(db, port=0, flush_seconds=0.2)
    runner = threading.Thread(target=rec.run)
    runner.start()
    try:
        span = chat_span("8bf92f3577b34da6a3ce929d0e0e4736", "e1e1e1e1e1e1e1e1", T0, 1.0)
        assert post(rec.url, pb_request(span).SerializeToString(), PB, token=None)[0] == 200  # accepted meanwhile
        time.sleep(0.6)
        assert segments(rec.spool.folder)  # still waiting in the spool
        holder.stdin.close()  # the other process ends and releases the store
        holder.wait(timeout=10)
        wait_flushed(rec.spool.folder, timeout=15)
    finally:
        if holder.poll() is None:
            holder.kill()
        rec.stop()
        runner.join(timeout=30)
    assert query(db, "SELECT count(*) FROM requests WHERE span_id = 'e1e1e1e1e1e1e1e1'")[0][0] == 1


def _otlp_line(trace: str, span: str, start_ns: int) -> str:
    """One OTLP JSON request (the spool's line format) holding one chat span."""
    attrs = [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
             {"key": "gen_ai.provider.name", "value": {"stringValue": "openai"}},
             {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o"}},
             {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "900"}},
             {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "50"}}]
    span_json = {"traceId": trace, "spanId": span, "name": "chat gpt-4o", "kind": 3,
                 "startTimeUnixNano": str(start_ns), "endTimeUnixNano": str(start_ns + 10**9), "attributes": attrs}
    return json.dumps({"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "flush-days"}}]}, "scopeSpans": [{"spans": [span_json]}]}]})


def test_a_flush_publishes_only_the_days_it_loaded(tmp_path):
    try:
        from phaselens.pipeline.publish import current_snapshot
    except ImportError:
        pytest.skip("the publish stage is not installed")
    from phaselens.pipeline.receiver_flush import Flusher
    from phaselens.pipeline.receiver_spool import Spool

    db = tmp_path / "store.duckdb"
    spool = Spool(tmp_path / "spool")
    flusher = Flusher(db, spool, 60.0)
    day = 86_400 * 10**9

    def meta() -> dict:
        with duckdb.connect(str(current_snapshot(db)), read_only=True) as snap:
            return dict(snap.execute("SELECT key, value FROM published_meta").fetchall())

    def published_calls() -> dict:
        with duckdb.connect(str(current_snapshot(db)), read_only=True) as snap:
            return dict(snap.execute("SELECT CAST(hour AS DATE)::VARCHAR, sum(calls) FROM rollup_hourly GROUP BY 1").fetchall())

    try:
        spool.append(_otlp_line("a" * 32, "1" * 16, T0), 1, [])
        spool.append(_otlp_line("a" * 32, "2" * 16, T0 + day), 1, [])
        assert flusher.flush()
        assert meta()["computed_days"] == "all"  # no snapshot yet: every day
        spool.append(_otlp_line("b" * 32, "3" * 16, T0 + 2 * day), 1, [])
        spool.append(_otlp_line("b" * 32, "4" * 16, T0 + 2 * day + 60 * 10**9), 1, [])
        assert flusher.flush()
        assert meta()["computed_days"] == "2025-08-15"  # the day this flush stored, the other two copied
        assert published_calls() == {"2025-08-13": 1, "2025-08-14": 1, "2025-08-15": 2}
        spool.append(_otlp_line("b" * 32, "4" * 16, T0 + 2 * day + 60 * 10**9), 1, [])  # a duplicate only
        assert flusher.flush()
        assert meta()["computed_days"] == "2025-08-15"  # nothing new: the snapshot stays
    finally:
        spool.close()
    con = connect(db)
    try:  # what a full publish of the same store gives
        from phaselens.pipeline.publish import publish
        publish(con, db)
    finally:
        con.close()
    assert meta()["computed_days"] == "all"
    assert published_calls() == {"2025-08-13": 1, "2025-08-14": 1, "2025-08-15": 2}
