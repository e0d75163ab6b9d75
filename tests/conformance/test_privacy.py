"""No prompt text of the recorded spans reaches any file phaselens writes.

The driver's prompts are made of distinctive words (`chatq0t1`, `ragctx5`, `agentq3t9`, ...), and the real
instrumentations copy them into many different attribute keys (messages, inputs, tool payloads, request
bodies). Each fixture is ingested and built into its own store; the bytes of every file written are searched.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance import evaluate as E

PROMPT_WORD = re.compile(rb"(?:chat|rag|agent)(?:q\d+t\d+|ctx\d+)")
ENTRIES = E.entries()


@pytest.mark.skipif(not ENTRIES, reason="no recorded conformance fixtures")
@pytest.mark.parametrize("entry", ENTRIES)
def test_no_prompt_text_in_written_files(entry, tmp_path):
    spans = gzip.decompress((E.FIXTURES / entry / "spans.jsonl.gz").read_bytes())
    assert PROMPT_WORD.search(spans) or entry.startswith(("otel-openai-v2", "sdk-", "litellm")), (
        f"{entry}: the recorded spans carry no prompt text, so this check would prove nothing")
    src = tmp_path / "in" / "spans.jsonl"
    src.parent.mkdir()
    src.write_bytes(spans)
    out = tmp_path / "out"
    out.mkdir()
    db = out / "store.duckdb"
    for args in (["ingest", str(src)], ["build", "--config", str(E.HERE / "phaselens.toml")]):
        done = subprocess.run([sys.executable, "-m", "phaselens", *args, "--db", str(db)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    leaked = [p.name for p in out.rglob("*") if p.is_file() and PROMPT_WORD.search(p.read_bytes())]
    assert not leaked, f"{entry}: prompt text found in {leaked}"
    assert not _text_columns_with_prompt_words(db), entry


def _text_columns_with_prompt_words(db: Path) -> list[str]:
    """Every text column of every table in the store, searched as values (the file's bytes may be compressed), the
    stored spans (raw_otlp_spans) among them."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM raw_otlp_spans").fetchone()[0] > 0
        cols = con.execute("SELECT table_name, column_name FROM duckdb_columns() WHERE database_name = current_database() "
                           "AND NOT internal AND (data_type IN ('VARCHAR', 'JSON') OR data_type LIKE '%VARCHAR%')").fetchall()
        return [f"{t}.{c}" for t, c in cols
                if con.execute(f'SELECT count(*) FROM "{t}" WHERE regexp_matches(CAST("{c}" AS VARCHAR), ?)',
                               [PROMPT_WORD.pattern.decode()]).fetchone()[0]]
    finally:
        con.close()


def _rejected_copy(line: bytes) -> bytes:
    """The batch with its spans' start times broken: the receiver rejects each on receipt, prompt text and all."""
    doc = json.loads(line)
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                s["startTimeUnixNano"] = "0"
    return json.dumps(doc).encode()


@pytest.mark.slow
@pytest.mark.skipif(not ENTRIES, reason="no recorded conformance fixtures")
def test_no_prompt_text_in_what_collect_writes(tmp_path):
    """Every recorded fixture sent to `phaselens collect` as OTLP/HTTP JSON, plus a rejected copy of one batch per
    fixture; after the flush, no file in the store's folder (store, spool, its reject sidecars) and no
    `rejects.raw` holds a prompt word."""
    from tests.test_receiver import Collect, post, query, wait_flushed

    out = tmp_path / "out"
    out.mkdir()
    db = out / "store.duckdb"
    server = Collect(tmp_path, db, "--flush-seconds", "0.3", "--max-body-bytes", str(64 * 1024 * 1024))
    sent = rejected = 0
    try:
        for entry in ENTRIES:
            lines = [x for x in gzip.decompress((E.FIXTURES / entry / "spans.jsonl.gz").read_bytes()).splitlines()
                     if x.strip()]
            for line in lines:
                status, _, body = post(server.url, line, token=None)
                assert status == 200, (entry, status, body[:200])
                sent += 1
            with_prompt = next((x for x in lines if PROMPT_WORD.search(x)), None)
            if with_prompt is not None:
                status, _, body = post(server.url, _rejected_copy(with_prompt), token=None)
                assert status == 200 and b"rejectedSpans" in body, (entry, status, body[:200])
                rejected += 1
        wait_flushed(server.spool, timeout=120)
    finally:
        assert server.stop() == 0, server.log.read_text()
    assert sent > 100 and rejected >= 10
    calls, rejects = query(db, "SELECT (SELECT count(*) FROM requests), (SELECT count(*) FROM rejects)")[0]
    assert calls > 100 and rejects >= rejected, (calls, rejects)
    raws = [r[0] for r in query(db, "SELECT raw FROM rejects WHERE raw IS NOT NULL")]
    assert not [r for r in raws if PROMPT_WORD.search(r.encode())], "prompt text in rejects.raw"
    leaked = [str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and PROMPT_WORD.search(p.read_bytes())]
    assert not leaked, f"prompt text found in {leaked}"
    assert "Traceback" not in server.log.read_text()
