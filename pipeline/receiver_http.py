"""The receiver's HTTP/1.1 server: an `asyncio.Protocol` per connection, with the limits a hostile client needs.

Why this and not `http.server`: one thread per connection let 300 slow clients (one header byte every 10 s) hold
every thread; its kept-alive answers went out in two writes (Nagle plus delayed ACK: ~44 ms per request); and an
oversize body was left unread, so the client saw a broken pipe instead of the 413. Here:

- the request head must arrive within `header_timeout` s (also the idle limit between kept-alive requests) and be at
  most `MAX_HEAD_BYTES`; the body must arrive within `body_timeout` s; a client that misses either is disconnected;
- at most `max_connections` connections are open; one more is answered 503 and closed;
- TCP_NODELAY is set and each response is one write (head and body together);
- path, method, token, Content-Type and Content-Length are judged when the head arrives, before any body byte is
  read: an error (401, 411, 413, 415, ...) is sent at once with `Connection: close`, the write side is shut, and the
  body still in flight is read and dropped (up to `LINGER_BYTES` or `LINGER_SECONDS`) so that a client that sends
  its whole body before reading, such as `http.client`, still reads the answer;
- the body is decoded, checked and spooled (fsync) in a worker thread, so the event loop only moves bytes.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger("phaselens.receiver")

MAX_HEAD_BYTES = 64 * 1024
LINGER_BYTES = 128 * 1024 * 1024
LINGER_SECONDS = 10.0
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
           408: "Request Timeout", 411: "Length Required", 413: "Content Too Large", 415: "Unsupported Media Type",
           431: "Request Header Fields Too Large", 500: "Internal Server Error", 503: "Service Unavailable"}

# (status, extra headers, body, content type, close after) -- what the application answers.
Answer = tuple[int, dict[str, str], bytes, str, bool]
# judge(method, path, headers) -> an Answer to send at once (no body read), or None to read the body.
Judge = Callable[[str, str, dict[str, str]], Answer | None]
# handle(method, path, headers, body) -> Answer; runs in a worker thread.
Handle = Callable[[str, str, dict[str, str], bytes], Answer]


def render(status: int, headers: dict[str, str], body: bytes, content_type: str, close: bool, server: str) -> bytes:
    """One response, head and body in one buffer."""
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}", f"Server: {server}",
             f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class _Conn(asyncio.Protocol):
    def __init__(self, srv: HttpServer) -> None:
        self.srv = srv
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.state = "head"  # head -> body -> busy -> head ... ; linger -> closed
        self.need = 0
        self.linger_left = 0
        self.req: tuple[str, str, dict[str, str]] | None = None

    # --- connection -------------------------------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.srv.conns.add(self)
        if len(self.srv.conns) > self.srv.max_connections:
            log.warning("connection limit (%d) reached; answering 503", self.srv.max_connections)
            self._fail(503, b"too many connections; retry shortly", {"Retry-After": "2"})
            return
        self._arm(self.srv.header_timeout)

    def connection_lost(self, exc) -> None:
        self.srv.conns.discard(self)
        self._disarm()
        self.state = "closed"

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self.timer = asyncio.get_running_loop().call_later(seconds, self._timed_out)

    def _disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _timed_out(self) -> None:
        log.debug("%s: %s timeout; closing", self._peer(), self.state)
        self.timer = None
        if self.transport is not None:
            self.transport.abort() if self.state == "linger" else self.transport.close()

    def _peer(self) -> str:
        peer = self.transport.get_extra_info("peername") if self.transport else None
        return f"{peer[0]}:{peer[1]}" if peer else "?"

    # --- input ------------------------------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self.state == "linger":
            self.linger_left -= len(data)
            if self.linger_left <= 0:
                self.transport.close()
            return
        if self.state in ("busy", "closed"):
            self.buf += data  # a pipelined request; reading is paused, so this stays small
            return
        self.buf += data
        self._advance()

    def _advance(self) -> None:
        if self.state == "head":
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > MAX_HEAD_BYTES:
                    self._fail(431, b"the request head is too large")
                return
            head, self.buf = bytes(self.buf[:end]), self.buf[end + 4:]
            if end > MAX_HEAD_BYTES:
                self._fail(431, b"the request head is too large")
                return
            try:
                method, path, headers = _parse_head(head)
            except ValueError as e:
                self._fail(400, str(e).encode())
                return
            answer = self.srv.judge(method, path, headers)
            if answer is not None:
                self._send(answer, linger=True)
                return
            self.req = (method, path, headers)
            self.need = int(headers["content-length"])
            self.state = "body"
            self._arm(self.srv.body_timeout)
        if self.state == "body" and len(self.buf) >= self.need:
            body, self.buf = bytes(self.buf[:self.need]), self.buf[self.need:]
            self.state = "busy"
            self._disarm()
            self.transport.pause_reading()
            method, path, headers = self.req
            fut = asyncio.get_running_loop().run_in_executor(self.srv.pool, self.srv.handle, method, path, headers,
                                                             body)
            fut.add_done_callback(self._answered)

    def _answered(self, fut) -> None:
        if self.state == "closed":
            return
        try:
            answer = fut.result()
        except Exception:
            log.exception("unexpected error answering a request")
            answer = (500, {}, b"internal error", "text/plain", True)
        self._send(answer, linger=False)
        if self.state == "head":
            self.transport.resume_reading()
            if self.buf:
                self._advance()

    # --- output -----------------------------------------------------------------------------------------------
    def _send(self, answer: Answer, linger: bool) -> None:
        status, headers, body, ctype, close = answer
        close = close or linger or self.srv.stopping
        self.transport.write(render(status, headers, body, ctype, close, self.srv.server_name))
        if not close:
            self.state = "head"
            self._arm(self.srv.header_timeout)
            return
        if linger:
            self._linger()
        else:
            self.state = "closed"
            self.transport.close()

    def _linger(self) -> None:
        """Shut the write side and drop what the client still sends, so it can read the answer; then close."""
        self.state = "linger"
        self.linger_left = LINGER_BYTES - len(self.buf)
        self.buf = bytearray()
        try:
            self.transport.write_eof()
        except (OSError, RuntimeError):
            self.transport.close()
            return
        self.transport.resume_reading()
        self._arm(LINGER_SECONDS)

    def _fail(self, status: int, message: bytes, headers: dict[str, str] | None = None) -> None:
        self._send((status, headers or {}, message, "text/plain", True), linger=True)


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError as e:  # latin-1 decodes every byte; kept for clarity
        raise ValueError("the request head is not text") from e
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ValueError("malformed request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise ValueError("malformed header line")
        key = name.lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    return parts[0], parts[1], headers


class HttpServer:
    """Serves `judge`/`handle` on one listening socket until `stop()`; `serve()` blocks in its own event loop."""

    def __init__(self, host: str, port: int, judge: Judge, handle: Handle, server_name: str,
                 header_timeout: float = 10.0, body_timeout: float = 30.0, max_connections: int = 256,
                 workers: int = 8) -> None:
        self.judge, self.handle, self.server_name = judge, handle, server_name
        self.header_timeout, self.body_timeout, self.max_connections = header_timeout, body_timeout, max_connections
        self.conns: set[_Conn] = set()
        self.stopping = False
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="collect")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind((host, port))
            self.sock.listen(512)
        except OSError:
            self.sock.close()
            raise
        self.sock.setblocking(False)
        self.server_address = self.sock.getsockname()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    def serve(self) -> None:
        """Run the event loop until `stop()`; then close idle connections and wait for answers in flight."""
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if self.stopping:
            return
        server = await self._loop.create_server(lambda: _Conn(self), sock=self.sock)
        try:
            await self._stop.wait()
        finally:
            server.close()
            for c in list(self.conns):
                if c.state in ("head", "linger") and c.transport is not None:
                    c.transport.close()
            for _ in range(100):  # answers being computed finish and are sent
                if not any(c.state == "busy" for c in self.conns):
                    break
                await asyncio.sleep(0.1)
            self.pool.shutdown(wait=True)

    def stop(self) -> None:
        """Ask `serve()` to return (thread-safe)."""
        self.stopping = True
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)

    def close(self) -> None:
        """Release the listening socket."""
        self.sock.close()
