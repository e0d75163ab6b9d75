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

import hmac
import itertools
import logging
import signal
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

from phaselens import __version__

from . import telemetry
from .errors import PhaselensError, StoreError
from phaselens.ingest.otlp_http import (
    CONTENT_TYPES,
    SOURCE,
    BadRequest,
    Checked,
    check_spans,
    clean_protobuf,
    decompress,
    export_response,
    protobuf_line,
    status_body,
    to_otlp_json,
)
from .receiver_flush import Flusher, is_locked
from .receiver_http import Answer, HttpServer
from .receiver_spool import Spool
from .store import connect

log = logging.getLogger("phaselens.receiver")

PATH = "/v1/traces"
DEFAULTS = {"host": "127.0.0.1", "port": 4318, "max_body_bytes": 20 * 1024 * 1024, "flush_seconds": 2.0,
            "flush_spans": 5000, "header_timeout": 10.0, "body_timeout": 30.0, "max_connections": 256}
TOKEN_ENV = "PHASELENS_COLLECT_TOKEN"
LOOPBACK = {"127.0.0.1", "::1", "localhost"}
STOP_WAIT_S = 10.0  # how long shutdown waits for requests in flight, and then for a busy store


def _content_type(headers: dict[str, str]) -> str:
    return headers.get("content-type", "").split(";")[0].strip().lower()


def _answer(status: int, body: bytes, fmt: str, close: bool = False) -> Answer:
    extra: dict[str, str] = {}
    if status == 401:
        extra["WWW-Authenticate"] = 'Bearer realm="phaselens collect"'
    elif status == 405:
        extra["Allow"] = "POST"
    elif status == 503:
        extra["Retry-After"] = "2"
    ctype = "application/x-protobuf" if fmt == "protobuf" else "application/json"
    return status, extra, body, ctype, close


class Receiver:
    """The HTTP server, the spool and the flusher of one `phaselens collect`; `run()` serves until `stop()`."""

    def __init__(self, db: Path | str, host: str = DEFAULTS["host"], port: int = DEFAULTS["port"],
                 token: str | None = None, max_body_bytes: int = DEFAULTS["max_body_bytes"],
                 flush_seconds: float = DEFAULTS["flush_seconds"], flush_spans: int = DEFAULTS["flush_spans"],
                 spool_dir: Path | str | None = None, header_timeout: float = DEFAULTS["header_timeout"],
                 body_timeout: float = DEFAULTS["body_timeout"],
                 max_connections: int = DEFAULTS["max_connections"]) -> None:
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
            self.server = HttpServer(host, port, self.judge, self.handle, f"phaselens-collect/{__version__}",
                                     header_timeout, body_timeout, max_connections)
        except OSError as e:
            self.spool.close()
            raise PhaselensError(f"cannot listen on {host}:{port}: {e.strerror or e}",
                                 "choose another --port, or stop the process that uses it") from e

    @property
    def url(self) -> str:
        """The endpoint clients send to, e.g. http://127.0.0.1:4318/v1/traces."""
        host, port = self.server.server_address[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}{PATH}"

    def judge(self, method: str, target: str, headers: dict[str, str]) -> Answer | None:
        """The checks made on the request head, before any body byte is read: an answer to send, or None."""
        fmt = CONTENT_TYPES.get(_content_type(headers), "json")
        try:
            if urlsplit(target).path != PATH:
                raise BadRequest(f"no such endpoint; send traces to POST {PATH}", 404)
            if method != "POST":
                raise BadRequest(f"{method} is not allowed on {PATH}; use POST", 405)
            if self.stopping.is_set():
                raise BadRequest("the receiver is shutting down; retry shortly", 503)
            if self.token is not None:
                scheme, _, given = headers.get("authorization", "").partition(" ")
                if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token.encode()):
                    raise BadRequest("a valid `Authorization: Bearer <token>` header is required", 401)
            if CONTENT_TYPES.get(_content_type(headers)) is None:
                raise BadRequest(f"Content-Type must be one of {', '.join(CONTENT_TYPES)}", 415)
            if "transfer-encoding" in headers or "content-length" not in headers:
                raise BadRequest("a Content-Length header is required (chunked bodies are not accepted)", 411)
            length = headers["content-length"]
            if not length.isdigit():
                raise BadRequest("Content-Length is not a byte count")
            if int(length) > self.max_body_bytes:
                raise BadRequest(f"the body ({length} bytes) is larger than the limit of {self.max_body_bytes} bytes",
                                 413)
        except BadRequest as e:
            log.debug("%s %s -> %d %s", method, target, e.status, e.message)
            return _answer(e.status, status_body(fmt, e.status, e.message), fmt, close=True)
        return None

    def handle(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        """Decode, check and spool one request body (fsync before the answer); runs in a worker thread."""
        fmt = CONTENT_TYPES[_content_type(headers)]
        with self.in_flight():
            try:
                body = decompress(body, headers.get("content-encoding", "identity"), self.max_body_bytes)
                fast = clean_protobuf(body) if fmt == "protobuf" else None
                if fast is not None and fast[1]:  # every span passes: spool the body as it is
                    checked = Checked({}, fast[0])
                    line = protobuf_line(body) if fast[0] else None
                else:
                    checked = check_spans(to_otlp_json(body, fmt), self.next_ref())
                    line = checked.line()
                try:
                    self.accept(checked, line)
                except OSError as e:
                    log.error("cannot write the spool (%s); answering 503 so the client retries", e)
                    raise BadRequest("the receiver cannot store the request right now; retry shortly", 503) from e
            except BadRequest as e:
                log.debug("%s %s -> %d %s", method, target, e.status, e.message)
                return _answer(e.status, status_body(fmt, e.status, e.message), fmt)
            except Exception as e:
                log.exception("unexpected error answering %s %s", method, target)
                return _answer(500, status_body(fmt, 500, f"internal error: {type(e).__name__}"), fmt, close=True)
        log.debug("%s %s -> 200 %d accepted, %d rejected", method, target, checked.accepted, len(checked.rejects))
        return _answer(200, export_response(fmt, checked), fmt)

    def next_ref(self) -> str:
        """A unique name for the next request, used in reject locators."""
        return f"{self._ref_prefix}-{next(self._refs)}"

    def in_flight(self) -> _InFlight:
        """A context that counts a request being answered (shutdown waits for the count to reach zero)."""
        return _InFlight(self)

    def accept(self, checked: Checked, line: str | None = None) -> None:
        """Spool a checked request durably; wake the flusher when the segment reached `flush_spans` spans."""
        self.spool.append(line if line is not None else checked.line(), checked.accepted, checked.rejects)
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
                self.server.serve()
        finally:
            self._close()

    def stop(self) -> None:
        """Stop serving (from another thread or a signal handler's helper thread); `run()` then flushes and returns."""
        with self._state:
            self.stopping.set()
        self.server.stop()  # serve() returns soon, or at once if it had not begun yet

    def _first_flush(self) -> None:
        """Create or check the store (a store that cannot be used stops the start), then load leftovers."""
        try:
            connect(self.db).close()
        except StoreError as e:
            if not is_locked(e):
                self.spool.close()
                self.server.close()
                raise
        if not self.flusher.try_flush():
            log.info("the store is busy; leftovers load when it is free, and requests are accepted meanwhile")

    def _close(self) -> None:
        self.stopping.set()
        self.server.close()
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

