"""Receiver benchmark: spans/s that the official OTel SDK exporter (OTLPSpanExporter, protobuf over HTTP, 512-span
batches, kept-alive connections) gets acknowledged on loopback, with 1 and 4 exporter processes, against

- `null`: a server that answers 200 at once without reading the spans (what the exporters can send at all here),
- `old`:  the receiver as of a baseline git ref (default: the last one on `http.server`), fsync before answering,
- `new`:  this tree's receiver, fsync (group commit) before answering;

then kept-alive vs fresh-connection latency of one small request (median of N), for `old` and `new`.

    .venv/bin/python bench/receiver/run.py [--seconds 8] [--baseline ff3315a]

Prints one table; numbers are from this machine in this run only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "bench-token"
LISTENING = re.compile(r"listening on (http://\S+/v1/traces)")

NULL_SERVER = r"""
import asyncio, sys
class P(asyncio.Protocol):
    def connection_made(self, t): self.t, self.buf, self.need = t, bytearray(), None
    def data_received(self, d):
        self.buf += d
        while True:
            if self.need is None:
                i = self.buf.find(b"\r\n\r\n")
                if i < 0: return
                head = bytes(self.buf[:i]).lower(); del self.buf[:i + 4]
                self.need = int(head.split(b"content-length:")[1].split(b"\r\n")[0])
            if len(self.buf) < self.need: return
            del self.buf[:self.need]; self.need = None
            self.t.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n")
async def main():
    s = await asyncio.get_running_loop().create_server(P, "127.0.0.1", 0)
    print(f"listening on http://127.0.0.1:{s.sockets[0].getsockname()[1]}/v1/traces", flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""

OLD_SERVER = r"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("phaselens.pipeline.receiver_old", sys.argv[1])
mod = importlib.util.module_from_spec(spec); sys.modules[spec.name] = mod; spec.loader.exec_module(mod)
sys.exit(mod.main(sys.argv[2:]))
"""

EXPORTER = r"""
import sys, time
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind
url, token, seconds, worker = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
class Keep(SpanExporter):
    def __init__(self): self.spans = []
    def export(self, spans): self.spans.extend(spans); return SpanExportResult.SUCCESS
keep = Keep()
tp = TracerProvider(resource=Resource.create({"service.name": f"bench-{worker}"}))
tp.add_span_processor(SimpleSpanProcessor(keep))
tracer = tp.get_tracer("bench")
for i in range(512):
    with tracer.start_as_current_span("chat gpt-4o-mini", kind=SpanKind.CLIENT) as s:
        s.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                          "gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.model": "gpt-4o-mini",
                          "gen_ai.usage.input_tokens": 900 + i, "gen_ai.usage.output_tokens": 50})
exp = OTLPSpanExporter(endpoint=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
ok = failed = 0
start = time.monotonic()
while time.monotonic() - start < seconds:
    if exp.export(keep.spans) == SpanExportResult.SUCCESS: ok += 1
    else: failed += 1
print(ok * len(keep.spans), failed, time.monotonic() - start, flush=True)
"""


def start(kind: str, tmp: Path, baseline: str, extra: list[str]) -> tuple[subprocess.Popen, str]:
    db = tmp / f"{kind}-{time.monotonic_ns()}.duckdb"
    args = ["--db", str(db), "--port", "0", "--token", TOKEN, "--log-level", "info", *extra]
    if kind == "null":
        argv = [sys.executable, "-c", NULL_SERVER]
    elif kind == "old":
        old = tmp / "receiver_old.py"
        old.write_text(subprocess.run(["git", "-C", str(ROOT), "show", f"{baseline}:pipeline/receiver.py"],
                                      check=True, capture_output=True, text=True).stdout)
        argv = [sys.executable, "-c", OLD_SERVER, str(old), *args]
    else:
        argv = [sys.executable, "-m", "phaselens", "collect", *args]
    log = tmp / f"{kind}.log"
    proc = subprocess.Popen(argv, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            env={**os.environ, "OTEL_SDK_DISABLED": "true"})
    deadline = time.monotonic() + 60
    while not (m := LISTENING.search(log.read_text())):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"{kind} server did not start:\n{log.read_text()}")
        time.sleep(0.05)
    return proc, m.group(1)


def throughput(url: str, clients: int, seconds: float) -> tuple[float, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    procs = [subprocess.Popen([sys.executable, "-c", EXPORTER, url, TOKEN, str(seconds), str(i)],
                              stdout=subprocess.PIPE, text=True, env=env) for i in range(clients)]
    spans = failed = 0
    elapsed = 0.0
    for p in procs:
        out, _ = p.communicate(timeout=seconds + 120)
        s, f, e = out.split()
        spans, failed, elapsed = spans + int(s), failed + int(f), max(elapsed, float(e))
    return spans / elapsed, failed


def latency(url: str, n: int) -> tuple[float, float]:
    body = json.dumps({"resourceSpans": []}).encode()
    u = urlsplit(url)
    h = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}

    def one(conn: http.client.HTTPConnection) -> float:
        t = time.perf_counter()
        conn.request("POST", u.path, body=body, headers=h)
        r = conn.getresponse()
        r.read()
        return time.perf_counter() - t

    fresh = []
    for _ in range(n):
        t = time.perf_counter()
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        one(c)
        fresh.append(time.perf_counter() - t)
        c.close()
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    one(c)
    kept = [one(c) for _ in range(n)]
    c.close()
    return statistics.median(kept) * 1e3, statistics.median(fresh) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--baseline", default="ff3315a", help="git ref of the old receiver")
    ap.add_argument("--latency-requests", type=int, default=30)
    ap.add_argument("--servers", default="null,old,new")
    ap.add_argument("--server-args", default="", help="extra receiver options, e.g. '--flush-seconds 600'")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for kind in args.servers.split(","):
            proc, url = start(kind, tmp, args.baseline, args.server_args.split())
            try:
                for clients in (1, 4):
                    rate, failed = throughput(url, clients, args.seconds)
                    rows.append((kind, f"{clients} exporter(s)", f"{rate:,.0f} spans/s", f"{failed} failed exports"))
                    print(*rows[-1], sep="  |  ", flush=True)
                if kind != "null":
                    kept, fresh = latency(url, args.latency_requests)
                    rows.append((kind, "latency", f"kept-alive {kept:.2f} ms, fresh {fresh:.2f} ms",
                                 f"ratio {kept / fresh:.2f}"))
                    print(*rows[-1], sep="  |  ", flush=True)
            finally:
                proc.terminate()
                proc.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
