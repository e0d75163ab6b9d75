"""Fake OpenAI-compatible and Anthropic Messages servers with known, logged timing (stdlib only).

One HTTP server on 127.0.0.1 answers both APIs:
- `POST /v1/chat/completions` (OpenAI Chat Completions, streamed or not, `stream_options.include_usage`);
- `POST /v1/messages` (Anthropic Messages, streamed as SSE or not);
- `POST /v1/traces` and `POST /api/public/otel/v1/traces` (an OTLP/HTTP sink: bodies are kept as they came,
  for exporters that insist on sending over HTTP; the recorder turns them into JSON Lines afterwards).

Timing model (seconds), the same for every call:
    TTFT   = BASE_TTFT_S + PREFILL_S_PER_TOKEN * uncached input + CACHED_S_PER_TOKEN * cache reads
    decode = DECODE_S_PER_TOKEN per output token after the first
A token is a whitespace-separated word of the prompt text. Each call answers exactly `max_tokens`
(or `max_completion_tokens`) tokens, one streamed chunk per token.

Prefix cache:
- OpenAI: automatic. The longest common token prefix with any earlier prompt, in whole blocks of
  CACHE_BLOCK tokens and at least CACHE_MIN tokens, is a cache read (`prompt_tokens_details.cached_tokens`).
  `prompt_tokens` includes it. No cache writes are reported (as the real API).
- Anthropic: explicit. The prompt up to the end of the last block marked `cache_control` is the cacheable
  prefix (if at least CACHE_MIN tokens); seen before -> `cache_read_input_tokens`, else
  `cache_creation_input_tokens`. `input_tokens` excludes both (as the real API).

Every answered call is appended to `server.log` (a list of dicts, times in ns since epoch):
start (request received), first_token (first content byte flushed; for a non-streamed call the time the
first token was computed, by the timing model), end (last byte flushed), the token buckets, the streamed flag and the model.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

BASE_TTFT_S = 0.060
PREFILL_S_PER_TOKEN = 0.000040
CACHED_S_PER_TOKEN = 0.000004
DECODE_S_PER_TOKEN = 0.0015
CACHE_BLOCK = 64
CACHE_MIN = 128

_WORD = re.compile(r"\S+")


def tokens_of(text: str) -> list[str]:
    return _WORD.findall(text or "")


def _content_text(content) -> list[tuple[str, bool]]:
    """(text, marked cache_control) pieces of a message content (string or list of blocks)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [(content, False)]
    out = []
    for block in content:
        if isinstance(block, dict):
            text = block.get("text") or ""
            out.append((text, bool(block.get("cache_control"))))
    return out


def _sleep_until(t_ns: int) -> None:
    while True:
        left = (t_ns - time.time_ns()) / 1e9
        if left <= 0:
            return
        time.sleep(min(left, 0.05))


class _State:
    def __init__(self, sink_dir: Path | None):
        self.lock = threading.Lock()
        self.log: list[dict] = []
        self.openai_prompts: list[list[str]] = []
        self.anthropic_prefixes: set[tuple[str, ...]] = set()
        self.counter = 0
        self.sink_dir = sink_dir
        self.sink_count = 0

    def next_id(self) -> int:
        with self.lock:
            self.counter += 1
            return self.counter

    def openai_cached(self, toks: list[str]) -> int:
        with self.lock:
            best = 0
            for prev in self.openai_prompts:
                n = 0
                for a, b in zip(prev, toks):
                    if a != b:
                        break
                    n += 1
                best = max(best, n)
            self.openai_prompts.append(toks)
        cached = (best // CACHE_BLOCK) * CACHE_BLOCK
        # the whole prompt is never a hit: at least one token is computed
        while cached >= len(toks) and cached > 0:
            cached -= CACHE_BLOCK
        return cached if cached >= CACHE_MIN else 0

    def anthropic_cache(self, prefix: list[str]) -> tuple[int, int]:
        if len(prefix) < CACHE_MIN:
            return 0, 0
        key = tuple(prefix)
        with self.lock:
            if key in self.anthropic_prefixes:
                return len(prefix), 0
            self.anthropic_prefixes.add(key)
        return 0, len(prefix)


def _ttft_s(uncached: int, cache_read: int) -> float:
    return BASE_TTFT_S + PREFILL_S_PER_TOKEN * uncached + CACHED_S_PER_TOKEN * cache_read


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-llm/1.0"

    def log_message(self, fmt, *args):  # quiet
        pass

    @property
    def state(self) -> _State:
        return self.server.state  # type: ignore[attr-defined]

    # -- plumbing ---------------------------------------------------------------------------
    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            return self.rfile.read(n)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return b""

    def _json(self, code: int, obj: dict, headers: dict | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _start_stream(self, headers: dict | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    # -- routes -----------------------------------------------------------------------------
    def do_GET(self):  # noqa: N802
        self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self):  # noqa: N802
        start_ns = time.time_ns()
        path = self.path.split("?")[0]
        body = self._body()
        if path.endswith("/v1/traces"):
            return self._sink(body)
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            return self._json(400, {"error": {"message": "bad json", "type": "invalid_request_error"}})
        if path.endswith("/chat/completions"):
            return self._openai(req, start_ns)
        if path.endswith("/messages"):
            return self._anthropic(req, start_ns)
        return self._json(404, {"error": {"message": f"no route {path}", "type": "invalid_request_error"}})

    def _sink(self, body: bytes) -> None:
        st = self.state
        if st.sink_dir is not None:
            with st.lock:
                st.sink_count += 1
                n = st.sink_count
            ctype = self.headers.get("Content-Type", "")
            enc = self.headers.get("Content-Encoding", "")
            ext = ("json" if "json" in ctype else "pb") + (".gz" if enc == "gzip" else "")
            (st.sink_dir / f"{n:05d}.{ext}").write_bytes(body)
        if "json" in self.headers.get("Content-Type", ""):
            self._json(200, {})
        else:
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

    def _record(self, **entry) -> None:
        with self.state.lock:
            self.state.log.append(entry)

    def _openai(self, req: dict, start_ns: int) -> None:
        toks: list[str] = []
        for m in req.get("messages") or []:
            for text, _ in _content_text(m.get("content")):
                toks += tokens_of(text)
        n_out = int(req.get("max_completion_tokens") or req.get("max_tokens") or 16)
        stream = bool(req.get("stream"))
        include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
        cached = self.state.openai_cached(toks)
        uncached = len(toks) - cached
        ttft = _ttft_s(uncached, cached)
        model = req.get("model") or "gpt-4o-mini"
        cid = f"chatcmpl-conf{self.state.next_id():06d}"
        created = int(start_ns // 1_000_000_000)
        usage = {"prompt_tokens": len(toks), "completion_tokens": n_out, "total_tokens": len(toks) + n_out,
                 "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                 "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                               "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}
        words = [f"w{i}" for i in range(n_out)]
        first_ns = start_ns + int(ttft * 1e9)
        if not stream:
            _sleep_until(first_ns + int(DECODE_S_PER_TOKEN * max(n_out - 1, 0) * 1e9))
            ready = time.time_ns()
            self._json(200, {
                "id": cid, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": " ".join(words), "refusal": None},
                             "logprobs": None, "finish_reason": "length"}],
                "usage": usage, "service_tier": "default", "system_fingerprint": "fp_conf",
            })
            end = time.time_ns()
            self._record(api="openai", id=cid, model=model, streamed=False, start_ns=start_ns,
                         first_token_ns=first_ns, ready_ns=ready, end_ns=end, input_tokens=len(toks), uncached_input_tokens=uncached,
                         cache_read_tokens=cached, cache_write_tokens=0, output_tokens=n_out)
            return

        def chunk(delta: dict, finish=None, with_usage=False, choices=True):
            obj = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                   "system_fingerprint": "fp_conf", "service_tier": "default",
                   "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}] if choices else []}
            if include_usage:
                obj["usage"] = usage if with_usage else None
            self._chunk(b"data: " + json.dumps(obj).encode() + b"\n\n")

        self._start_stream()
        _sleep_until(first_ns)
        chunk({"role": "assistant", "content": "", "refusal": None})
        first = None
        for i, w in enumerate(words):
            if i:
                _sleep_until(first_ns + int(DECODE_S_PER_TOKEN * i * 1e9))
            chunk({"content": (" " if i else "") + w})
            if first is None:
                first = time.time_ns()
        chunk({}, finish="length")
        if include_usage:
            chunk({}, with_usage=True, choices=False)
        self._chunk(b"data: [DONE]\n\n")
        self._end_stream()
        end = time.time_ns()
        self._record(api="openai", id=cid, model=model, streamed=True, start_ns=start_ns,
                     first_token_ns=first or end, end_ns=end, input_tokens=len(toks), uncached_input_tokens=uncached,
                     cache_read_tokens=cached, cache_write_tokens=0, output_tokens=n_out,
                     include_usage=include_usage)

    def _anthropic(self, req: dict, start_ns: int) -> None:
        pieces: list[tuple[str, bool]] = []
        system = req.get("system")
        pieces += _content_text(system)
        for m in req.get("messages") or []:
            pieces += _content_text(m.get("content"))
        toks: list[str] = []
        prefix_len = 0
        for text, marked in pieces:
            toks += tokens_of(text)
            if marked:
                prefix_len = len(toks)
        read, write = self.state.anthropic_cache(toks[:prefix_len])
        uncached = len(toks) - read - write
        n_out = int(req.get("max_tokens") or 16)
        stream = bool(req.get("stream"))
        # a cache write is computed like uncached input
        ttft = _ttft_s(uncached + write, read)
        model = req.get("model") or "claude-3-5-haiku-20241022"
        mid = f"msg_conf{self.state.next_id():06d}"
        words = [f"w{i}" for i in range(n_out)]
        first_ns = start_ns + int(ttft * 1e9)
        usage = {"input_tokens": uncached, "cache_creation_input_tokens": write, "cache_read_input_tokens": read,
                 "output_tokens": n_out, "service_tier": "standard"}
        if not stream:
            _sleep_until(first_ns + int(DECODE_S_PER_TOKEN * max(n_out - 1, 0) * 1e9))
            ready = time.time_ns()
            self._json(200, {
                "id": mid, "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": " ".join(words)}],
                "stop_reason": "max_tokens", "stop_sequence": None, "usage": usage,
            })
            end = time.time_ns()
            self._record(api="anthropic", id=mid, model=model, streamed=False, start_ns=start_ns,
                         first_token_ns=first_ns, ready_ns=ready, end_ns=end, input_tokens=len(toks), uncached_input_tokens=uncached,
                         cache_read_tokens=read, cache_write_tokens=write, output_tokens=n_out)
            return

        def event(name: str, obj: dict):
            self._chunk(f"event: {name}\ndata: {json.dumps(obj)}\n\n".encode())

        self._start_stream()
        _sleep_until(first_ns)
        event("message_start", {"type": "message_start", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {**usage, "output_tokens": 1}}})
        event("content_block_start", {"type": "content_block_start", "index": 0,
                                      "content_block": {"type": "text", "text": ""}})
        first = None
        for i, w in enumerate(words):
            if i:
                _sleep_until(first_ns + int(DECODE_S_PER_TOKEN * i * 1e9))
            event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": (" " if i else "") + w}})
            if first is None:
                first = time.time_ns()
        event("content_block_stop", {"type": "content_block_stop", "index": 0})
        event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
                                "usage": {"output_tokens": n_out}})
        event("message_stop", {"type": "message_stop"})
        self._end_stream()
        end = time.time_ns()
        self._record(api="anthropic", id=mid, model=model, streamed=True, start_ns=start_ns,
                     first_token_ns=first or end, end_ns=end, input_tokens=len(toks), uncached_input_tokens=uncached,
                     cache_read_tokens=read, cache_write_tokens=write, output_tokens=n_out)


class FakeLLMServer:
    """The fake servers on 127.0.0.1 (a free port unless given), in a background thread."""

    def __init__(self, port: int = 0, sink_dir: Path | None = None):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.state = _State(sink_dir)  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> list[dict]:
        return self.httpd.state.log  # type: ignore[attr-defined]

    def __enter__(self) -> FakeLLMServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


if __name__ == "__main__":  # manual use: python tests/conformance/fake_servers.py [port]
    import sys

    srv = FakeLLMServer(int(sys.argv[1]) if len(sys.argv) > 1 else 8765)
    with srv:
        print(f"fake OpenAI/Anthropic server on {srv.url}", flush=True)
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
