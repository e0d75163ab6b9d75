"""phaselens reports its own work over OTLP when the standard variables ask for it, and stays silent otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.conftest import FIXTURES


class _Sink(BaseHTTPRequestHandler):
    received: dict[str, list[bytes]] = {}

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.received.setdefault(self.path, []).append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args):
        pass


def _ingest(tmp_path, env_extra: dict) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | env_extra
    subprocess.run([sys.executable, "-m", "phaselens", "ingest", str(FIXTURES / "otlp" / "mixed_trace.jsonl"),
                    "--db", str(tmp_path / "t.duckdb")], check=True, capture_output=True, env=env, timeout=120)


def test_spans_and_metrics_are_exported_when_an_endpoint_is_set(tmp_path):
    _Sink.received = {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        _ingest(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_port}"})
    finally:
        server.shutdown()
    spans = []
    for body in _Sink.received.get("/v1/traces", []):
        req = ExportTraceServiceRequest.FromString(body)
        spans += [s for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert "phaselens.ingest.file" in {s.name for s in spans}
    metrics = set()
    for body in _Sink.received.get("/v1/metrics", []):
        req = ExportMetricsServiceRequest.FromString(body)
        metrics |= {m.name for rm in req.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert {"phaselens.operation.duration", "phaselens.records"} <= metrics


def test_nothing_is_set_up_without_an_endpoint(monkeypatch, store, load):
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    from phaselens.pipeline import telemetry

    for key in [k for k in os.environ if k.startswith("OTEL_")]:
        monkeypatch.delenv(key)
    telemetry._setup.cache_clear()
    r = load(FIXTURES / "otlp" / "mixed_trace.jsonl").files[0]
    assert r.accepted == 1
    assert telemetry._setup() is False
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)
    with telemetry.operation("noop") as span:
        assert span is None
