"""The receiver under hostile load: slow clients are cut off at the header timeout while others are served, an
oversize body gets a 413 that `http.client` reads, a JSON body with a lone surrogate has every acknowledged span
stored, a wrong token is refused before the body is read, and kept-alive connections carry many requests."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from urllib.parse import urlsplit

import pytest

from phaselens.pipeline.receiver import Receiver
from tests.test_receiver import FIX, JSON, TOKEN, post, query, wait_flushed

HEADER_TIMEOUT = 1.5


@pytest.fixture
def receiver(tmp_path):
    """A receiver in this process on a free port, with a short header timeout."""
    rec = Receiver(tmp_path / "store.duckdb", port=0, token=TOKEN, flush_seconds=0.3, header_timeout=HEADER_TIMEOUT,
                   body_timeout=HEADER_TIMEOUT, max_connections=400)
    t = threading.Thread(target=rec.run, daemon=True)
    t.start()
    u = urlsplit(rec.url)
    deadline = time.monotonic() + 20
    while True:  # wait until it answers (the first flush creates the store)
        try:
            socket.create_connection((u.hostname, u.port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "the receiver did not start"
            time.sleep(0.05)
    yield rec
    rec.stop()
    t.join(timeout=30)
    assert not t.is_alive()


def good_body(span_id: str = "00f067aa0ba902b7") -> bytes:
    doc = json.loads((FIX / "chat_request.json").read_text())
    return json.dumps(doc).replace("00f067aa0ba902b7", span_id).encode()


def test_slowloris_connections_are_closed_at_the_header_timeout_while_others_are_served(receiver):
    u = urlsplit(receiver.url)
    slow = []
    for _ in range(300):
        s = socket.create_connection((u.hostname, u.port), timeout=10)
        s.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n")  # a head that never ends
        slow.append(s)
    opened = time.monotonic()
    served = 0
    while time.monotonic() - opened < HEADER_TIMEOUT * 0.8:  # normal requests meanwhile
        status, _, _ = post(receiver.url, good_body(f"{served + 1:016x}"))
        assert status == 200
        served += 1
    assert served >= 1
    closed = 0
    for s in slow:
        s.settimeout(HEADER_TIMEOUT * 3 + 5)  # generous bound; the server closes at HEADER_TIMEOUT
        try:
            s.sendall(b"X-Slow: 1\r\n")
        except OSError:
            pass
        try:
            data = s.recv(1024)
        except ConnectionResetError:
            data = b""
        except TimeoutError:
            data = None
        closed += data == b""
        s.close()
    assert closed == 300
    assert post(receiver.url, good_body("feedfacefeedface"))[0] == 200  # still serving afterwards


def test_a_45_mib_body_gets_a_413_that_http_client_reads(receiver):
    u = urlsplit(receiver.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    body = b"{" + b" " * (45 * 1024 * 1024) + b"}"
    conn.request("POST", u.path, body=body, headers={"Content-Type": JSON, "Authorization": f"Bearer {TOKEN}"})
    resp = conn.getresponse()
    assert resp.status == 413
    assert resp.getheader("Connection") == "close"
    assert "larger than the limit" in json.loads(resp.read())["message"]
    conn.close()


def test_a_wrong_token_is_refused_on_the_head(receiver):
    status, headers, _ = post(receiver.url, good_body(), token="wrong")
    assert status == 401 and "bearer" in headers["www-authenticate"].lower()
    assert post(receiver.url, good_body(), token=None)[0] == 401
    assert post(receiver.url, good_body())[0] == 200


def test_a_lone_surrogate_is_stored_with_the_value_replaced(receiver):
    doc = json.loads((FIX / "chat_request.json").read_text())
    text = json.dumps(doc)
    assert '"support-bot"' in text
    body = text.replace('"support-bot"', '"support-\\ud800bot"').encode()
    assert b"\\ud800" in body
    status, _, answer = post(receiver.url, body)
    assert status == 200
    assert not json.loads(answer).get("partialSuccess", {}).get("rejectedSpans")
    wait_flushed(receiver.spool.folder)
    rows = query(receiver.db, "SELECT service FROM requests WHERE span_id = '00f067aa0ba902b7'")
    assert rows == [("support-\ufffdbot",)]


def test_one_kept_alive_connection_carries_many_requests(receiver):
    u = urlsplit(receiver.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    for i in range(20):
        conn.request("POST", u.path, body=good_body(f"{0xa000 + i:016x}"),
                     headers={"Content-Type": JSON, "Authorization": f"Bearer {TOKEN}"})
        resp = conn.getresponse()
        assert resp.status == 200
        resp.read()
        assert resp.getheader("Connection") is None  # kept alive
    conn.close()
    wait_flushed(receiver.spool.folder)
    assert query(receiver.db, "SELECT count(*) FROM requests WHERE span_id LIKE '000000000000a0%'")[0][0] == 20


def test_kill_9_mid_burst_loses_no_acknowledged_span(tmp_path):
    from tests.test_receiver import PB, T0, Collect, chat_span, pb_request

    db = tmp_path / "store.duckdb"
    server = Collect(tmp_path, db, "--token", TOKEN, "--flush-seconds", "0.2")
    acked: list[set[str]] = [set() for _ in range(4)]
    stop = threading.Event()

    def burst(worker: int) -> None:
        n = 0
        while not stop.is_set():
            ids = [f"{worker + 1:02x}{n:06x}{i:08x}" for i in range(64)]
            n += 1
            body = pb_request(*[chat_span(f"{int(s, 16):032x}", s, T0 + i, 1.0) for i, s in enumerate(ids)],
                              service="burst").SerializeToString()
            try:
                status, _, _ = post(server.url, body, PB)
            except OSError:
                return  # the server is gone: this request was not acknowledged
            if status == 200:
                acked[worker].update(ids)

    threads = [threading.Thread(target=burst, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while sum(map(len, acked)) < 2000 and time.monotonic() < deadline:
        time.sleep(0.02)
    server.kill9()  # mid-burst: requests are in flight
    stop.set()
    for t in threads:
        t.join(timeout=15)
    want = set().union(*acked)
    assert len(want) >= 2000
    again = Collect(tmp_path, db, "--token", TOKEN, "--flush-seconds", "0.2")
    wait_flushed(again.spool)
    assert again.stop() == 0
    stored = {r[0] for r in query(db, "SELECT span_id FROM requests WHERE service = 'burst'")}
    assert want - stored == set()
