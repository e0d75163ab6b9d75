"""`phaselens collect`: a live OTLP/HTTP trace receiver that feeds the store in small batches.

POST /v1/traces takes protobuf or JSON bodies (optionally gzip/deflate). Each accepted request is appended to the
spool and fsynced before the receiver answers 200, so an acknowledged span survives a crash or `kill -9`. A flusher
thread closes the spool's segment every `flush_seconds` (or at `flush_spans` spans), opens the store, loads the
closed segments with `pipeline.load.ingest` (ledger, dedupe by call_id, rejects), publishes the dashboard's snapshot,
closes the store and deletes the segments. The store is held only while a batch loads: when another phaselens
process holds it, the flusher waits and tries again later, and requests go on being accepted into the spool.

Responses follow the OTLP/HTTP specification: an ExportTraceServiceResponse in the request's encoding, with
`partial_success` when spans were rejected; errors carry a google.rpc.Status body. See docs/receiver.md.
"""

from __future__ import annotations

import argparse
import hmac
import itertools
import logging
import os
import signal
import socket
import sys
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from phaselens import __version__
from phaselens.models import resolve_db

from . import telemetry
from .errors import PhaselensError, StoreError
from .receiver_decode import (
    CONTENT_TYPES,
    SOURCE,
    BadRequest,
    Checked,
    check_spans,
    decompress,
    export_response,
    status_body,
    to_otlp_json,
)
from .receiver_flush import Flusher, is_locked
from .receiver_spool import Spool
from .store import connect

log = logging.getLogger("phaselens.receiver")

PATH = "/v1/traces"
DEFAULTS = {"host": "127.0.0.1", "port": 4318, "max_body_bytes": 20 * 1024 * 1024, "flush_seconds": 2.0,
            "flush_spans": 5000}
TOKEN_ENV = "PHASELENS_COLLECT_TOKEN"
LOOPBACK = {"127.0.0.1", "::1", "localhost"}
STOP_WAIT_S = 10.0  # how long shutdown waits for requests in flight, and then for a busy store


class _Handler(BaseHTTPRequestHandler):
    """One OTLP/HTTP request: checks in the order path, method, token, type, size, body; never raises."""

    protocol_version = "HTTP/1.1"
    server_version = f"phaselens-collect/{__version__}"
    timeout = 30  # seconds a connection may stall or idle before it is closed
    server: _Server

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        """Every method is routed through `_handle`, which answers 405 for all but POST."""
        self._handle()

    do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_POST  # noqa: N815

    def version_string(self) -> str:
        """The `Server` header: name and version, no Python version."""
        return self.server_version

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's signature
        """http.server's own messages (malformed request lines) go to the debug log, not stderr."""
        log.debug("%s %s", self.address_string(), format % args)

    def log_request(self, code="-", size="-") -> None:
        """Silenced: `_reply` logs one line per request, with its span counts."""

    def _handle(self) -> None:
        rec = self.server.receiver
        self.body_read = False  # the handler lives as long as the connection; this is per request
        with rec.in_flight():
            fmt = CONTENT_TYPES.get(self.headers.get_content_type(), "json")
            try:
                try:
                    self._serve(rec)
                except BadRequest as e:
                    self._reply(e.status, status_body(fmt, e.status, e.message), fmt, note=e.message)
            except (ConnectionError, socket.timeout):
                self.close_connection = True  # the client went away or stalled; nothing to answer
            except Exception as e:
                log.exception("unexpected error answering %s %s", self.command, self.path)
                self.close_connection = self.body_read = True  # do not read on after an unknown failure
                try:
                    self._reply(500, status_body(fmt, 500, f"internal error: {type(e).__name__}"), fmt)
                except OSError:
                    pass

    def _serve(self, rec: Receiver) -> None:
        if urlsplit(self.path).path != PATH:
            raise BadRequest(f"no such endpoint; send traces to POST {PATH}", 404)
        if self.command != "POST":
            raise BadRequest(f"{self.command} is not allowed on {PATH}; use POST", 405)
        if rec.stopping.is_set():
            raise BadRequest("the receiver is shutting down; retry shortly", 503)
        if rec.token is not None:
            scheme, _, given = (self.headers.get("Authorization") or "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), rec.token.encode()):
                raise BadRequest("a valid `Authorization: Bearer <token>` header is required", 401)
        fmt = CONTENT_TYPES.get(self.headers.get_content_type())
        if fmt is None:
            raise BadRequest(f"Content-Type must be one of {', '.join(CONTENT_TYPES)}", 415)
        encoding = self.headers.get("Content-Encoding", "identity")
        if self.headers.get("Transfer-Encoding") or self.headers.get("Content-Length") is None:
            raise BadRequest("a Content-Length header is required (chunked bodies are not accepted)", 411)
        try:
            length = int(self.headers["Content-Length"])
        except ValueError:
            length = -1
        if length < 0:
            raise BadRequest("Content-Length is not a byte count")
        if length > rec.max_body_bytes:
            raise BadRequest(f"the body ({length} bytes) is larger than the limit of {rec.max_body_bytes} bytes", 413)
        body = self.rfile.read(length)
        if len(body) < length:
            raise ConnectionError("client closed the connection mid-body")
        self.body_read = True
        doc = to_otlp_json(decompress(body, encoding, rec.max_body_bytes), fmt)
        checked = check_spans(doc, rec.next_ref())
        try:
            rec.accept(checked)
        except OSError as e:
            log.error("cannot write the spool (%s); answering 503 so the client retries", e)
            raise BadRequest("the receiver cannot store the request right now; retry shortly", 503) from e
        note = f"{checked.accepted} span(s) accepted, {len(checked.rejects)} rejected"
        self._reply(200, export_response(fmt, checked), fmt, note=note)

    def _drain(self) -> None:
        """Read and drop an unread body (up to twice the limit) so the client sees the answer; else close."""
        rec = self.server.receiver
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            length = -1
        if self.headers.get("Transfer-Encoding") or not 0 <= length <= 2 * rec.max_body_bytes:
            self.close_connection = True  # the unread body would be taken for the next request
            return
        while length > 0:
            chunk = self.rfile.read(min(length, 1 << 16))
            if not chunk:
                self.close_connection = True
                return
            length -= len(chunk)
        self.body_read = True

    def _reply(self, status: int, body: bytes, fmt: str, note: str = "") -> None:
        if not self.body_read:
            self._drain()
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf" if fmt == "protobuf" else "application/json")
        self.send_header("Content-Length", str(len(body)))
        if status == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="phaselens collect"')
        elif status == 405:
            self.send_header("Allow", "POST")
        elif status == 503:
            self.send_header("Retry-After", "2")
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        log.debug("%s %s %s -> %d %s", self.address_string(), self.command, self.path, status, note)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    receiver: Receiver


class _Server6(_Server):
    address_family = socket.AF_INET6


class Receiver:
    """The HTTP server, the spool and the flusher of one `phaselens collect`; `run()` serves until `stop()`."""

    def __init__(self, db: Path | str, host: str = DEFAULTS["host"], port: int = DEFAULTS["port"],
                 token: str | None = None, max_body_bytes: int = DEFAULTS["max_body_bytes"],
                 flush_seconds: float = DEFAULTS["flush_seconds"], flush_spans: int = DEFAULTS["flush_spans"],
                 spool_dir: Path | str | None = None) -> None:
        if max_body_bytes <= 0 or flush_seconds <= 0 or flush_spans <= 0:
            raise PhaselensError("--max-body-bytes, --flush-seconds and --flush-spans must be above zero",
                                 "pass positive values, e.g. --flush-seconds 2 --flush-spans 5000")
        self.db = Path(db)
        self.token = token or None
        self.max_body_bytes, self.flush_spans = max_body_bytes, flush_spans
        self.stopping = threading.Event()
        self._state, self._serving = threading.Lock(), False
        self._ref_prefix = f"{SOURCE}:{datetime.now(UTC):%Y%m%dT%H%M%S%f}"
        self._refs = itertools.count(1)
        self._busy, self._idle = 0, threading.Condition()
        self.spool = Spool(spool_dir or f"{self.db}.spool")
        self.flusher = Flusher(self.db, self.spool, flush_seconds)
        try:
            self.server = (_Server6 if ":" in host else _Server)((host, port), _Handler)
        except OSError as e:
            self.spool.close()
            raise PhaselensError(f"cannot listen on {host}:{port}: {e.strerror or e}",
                                 "choose another --port, or stop the process that uses it") from e
        self.server.receiver = self

    @property
    def url(self) -> str:
        """The endpoint clients send to, e.g. http://127.0.0.1:4318/v1/traces."""
        host, port = self.server.server_address[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}{PATH}"

    def next_ref(self) -> str:
        """A unique name for the next request, used in reject locators."""
        return f"{self._ref_prefix}-{next(self._refs)}"

    def in_flight(self) -> _InFlight:
        """A context that counts a request being answered (shutdown waits for the count to reach zero)."""
        return _InFlight(self)

    def accept(self, checked: Checked) -> None:
        """Spool a checked request durably; wake the flusher when the segment reached `flush_spans` spans."""
        self.spool.append(checked.line(), checked.accepted, checked.rejects)
        telemetry.count("rejected", len(checked.rejects), adapter="otlp_http", stage="receiver")
        if self.spool.current_spans >= self.flush_spans:
            self.flusher.wake.set()

    def run(self) -> None:
        """Load leftovers, serve until `stop()`, then finish the requests in flight and flush what was accepted."""
        with telemetry.operation("receiver.start", url=self.url):
            self._first_flush()
        self.flusher.start()
        try:
            with self._state:  # a stop() that came during the first flush cancels serving
                self._serving = not self.stopping.is_set()
            if self._serving:
                log.info("phaselens collect listening on %s (store %s, spool %s)", self.url, self.db,
                         self.spool.folder)
                self.server.serve_forever(poll_interval=0.25)
        finally:
            self._close()

    def stop(self) -> None:
        """Stop serving (from another thread or a signal handler's helper thread); `run()` then flushes and returns."""
        with self._state:
            self.stopping.set()
            serving = self._serving
        if serving:
            self.server.shutdown()  # returns once serve_forever has ended, even if it had not begun yet

    def _first_flush(self) -> None:
        """Create or check the store (a store that cannot be used stops the start), then load leftovers."""
        try:
            connect(self.db).close()
        except StoreError as e:
            if not is_locked(e):
                self.spool.close()
                self.server.server_close()
                raise
        if not self.flusher.try_flush():
            log.info("the store is busy; leftovers load when it is free, and requests are accepted meanwhile")

    def _close(self) -> None:
        self.stopping.set()
        self.server.server_close()
        with self._idle:
            self._idle.wait_for(lambda: self._busy == 0, timeout=STOP_WAIT_S)
        self.flusher.stop()
        deadline = time.monotonic() + STOP_WAIT_S
        while not self.flusher.try_flush():
            if time.monotonic() > deadline:
                log.warning("the store stayed busy; %d segment(s) stay in %s and load when collect starts again",
                            len(self.spool.pending()), self.spool.folder)
                break
            time.sleep(0.5)
        self.spool.close()
        log.info("phaselens collect stopped")


class _InFlight:
    """Counts requests being answered, so shutdown waits for them before the final flush."""

    def __init__(self, rec: Receiver) -> None:
        self.rec = rec

    def __enter__(self) -> None:
        with self.rec._idle:
            self.rec._busy += 1

    def __exit__(self, *exc) -> None:
        with self.rec._idle:
            self.rec._busy -= 1
            self.rec._idle.notify_all()


def serve(db: Path | str, host: str = DEFAULTS["host"], port: int = DEFAULTS["port"], token: str | None = None,
          max_body_bytes: int = DEFAULTS["max_body_bytes"], flush_seconds: float = DEFAULTS["flush_seconds"],
          flush_spans: int = DEFAULTS["flush_spans"], spool_dir: Path | str | None = None) -> None:
    """Run the receiver in the foreground until SIGTERM or SIGINT, then flush and return (sizes in bytes, times in s)."""
    if not logging.getLogger().handlers and not log.handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    rec = Receiver(db, host, port, token, max_body_bytes, flush_seconds, flush_spans, spool_dir)
    if host not in LOOPBACK and rec.token is None:
        log.warning("listening on %s without a token: anyone who reaches this port can write to the store", host)

    def on_signal(signum, frame) -> None:
        """Begin a graceful stop; a helper thread calls stop(), since shutdown() blocks until serving ends."""
        log.info("received %s; finishing requests in flight and flushing", signal.Signals(signum).name)
        threading.Thread(target=rec.stop, daemon=True).start()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        rec.run()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def main(argv: list[str] | None = None) -> int:
    """`python -m phaselens.pipeline.receiver --db FILE [--port N ...]`: the receiver without the CLI wiring."""
    ap = argparse.ArgumentParser(description="Receive OTLP/HTTP traces into a phaselens store.")
    ap.add_argument("--db", type=Path, help="Store file; default $PHASELENS_DB, else ./phaselens.duckdb.")
    ap.add_argument("--host", default=DEFAULTS["host"], help="Address to bind; 0.0.0.0 must be asked for.")
    ap.add_argument("--port", type=int, default=DEFAULTS["port"], help="Port (0 = any free port).")
    ap.add_argument("--token", default=os.environ.get(TOKEN_ENV), help=f"Required bearer token; default ${TOKEN_ENV}.")
    ap.add_argument("--max-body-bytes", type=int, default=DEFAULTS["max_body_bytes"], help="Largest body, bytes.")
    ap.add_argument("--flush-seconds", type=float, default=DEFAULTS["flush_seconds"], help="Seconds between loads.")
    ap.add_argument("--flush-spans", type=int, default=DEFAULTS["flush_spans"], help="Load early at this many spans.")
    ap.add_argument("--spool-dir", type=Path, help="Spool folder; default <db>.spool.")
    ap.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    args = ap.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    try:
        serve(resolve_db(args.db), args.host, args.port, args.token, args.max_body_bytes, args.flush_seconds,
              args.flush_spans, args.spool_dir)
    except PhaselensError as e:
        print(f"Error: {e.message}" + (f"\n  fix: {e.fix}" if e.fix else ""), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
