"""OTLP chunks parse in threads on connections of their own (docs/ingest.md#parsing-apart-from-staging).

The input is what real instrumentations wrote (the spans recorded by tests/conformance, each package's own
output) with a line that is not JSON and a batch whose span list is missing in the middle, so the re-parse of a
chunk with a bad line and the lost-entry reject are on the path too.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import duckdb
import pytest

from phaselens.ingest import otlp
from phaselens.pipeline.load import ingest
from phaselens.pipeline.store import connect

ROOT = Path(__file__).resolve().parents[2]
# the openai SDK's own file is empty: it writes no spans of its own
RECORDED = [p for p in sorted((ROOT / "tests" / "conformance" / "fixtures").glob("*/spans.jsonl.gz"))
            if gzip.open(p, "rt").read(1)]
WITH_CONTENT = ROOT / "tests" / "fixtures" / "otlp" / "with_content.jsonl"


def _recorded_lines() -> list[str]:
    lines: list[str] = []
    for path in RECORDED:
        lines += _lines(path)
    return lines


@pytest.fixture(scope="module")
def mixed_file(tmp_path_factory) -> Path:
    lines = _recorded_lines()
    assert len(lines) > 40, "the recorded conformance spans are missing"
    lost = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "x"}, "spens": []}]}]}
    middle = len(lines) // 2
    lines[middle:middle] = ['{"resourceSpans": [ not json\n', json.dumps(lost) + "\n"]
    p = tmp_path_factory.mktemp("parallel") / "recorded.jsonl"
    p.write_text("".join(lines))
    return p


def _store_rows(con: duckdb.DuckDBPyConnection) -> dict[str, list]:
    def rows(sql: str) -> list:
        return sorted(con.execute(sql).fetchall(), key=repr)

    return {
        "calls": rows("SELECT * EXCLUDE (load_id) FROM raw_calls"),
        "spans": rows("SELECT * EXCLUDE (load_id) FROM raw_otlp_spans"),
        "rejects": rows("SELECT source, reason, detail, raw, regexp_replace(locator, '^.*/', '') FROM raw_rejects"),
        "ledger": rows("SELECT status, accepted, duplicates, rejected, skipped FROM raw_loads"),
    }


def test_chunks_parsed_in_threads_store_what_one_chunk_parsed_in_turn_stores(mixed_file, tmp_path, monkeypatch):
    one = connect(tmp_path / "one.duckdb")
    monkeypatch.setattr(otlp, "PARSE_WORKERS", 1)
    ingest(one, [mixed_file])  # the whole file is one chunk (it is far below CHUNK_BYTES)
    many = connect(tmp_path / "many.duckdb")
    monkeypatch.setattr(otlp, "PARSE_WORKERS", 2)
    # about ten chunks: up to three parse ahead of the one staged
    monkeypatch.setattr(otlp, "CHUNK_BYTES", mixed_file.stat().st_size // 10)
    ingest(many, [mixed_file])
    want, got = _store_rows(one), _store_rows(many)
    assert len(want["calls"]) > 20
    reasons = [r[1] for r in want["rejects"]]
    assert "malformed_json" in reasons and "missing_field" in reasons
    for part in want:
        assert got[part] == want[part], part



def test_a_large_file_parses_while_it_is_hashed_and_a_known_one_stops_before_its_first_write(
        mixed_file, tmp_path, monkeypatch):
    """Past HASH_BESIDE_BYTES the first chunks parse while the file is hashed; the content check comes before the
    first write, so a file loaded before is stopped there (its parses cut short) and stores nothing."""
    import hashlib

    from phaselens.pipeline import load

    monkeypatch.setattr(load, "HASH_BESIDE_BYTES", 0)  # this 4 MB file takes the large files' path
    monkeypatch.setattr(otlp, "CHUNK_BYTES", mixed_file.stat().st_size // 10)
    read: list[int] = []  # chunks read and handed to the parsers
    real = otlp._line_chunks

    def line_chunks(src):
        for first_line, lines in real(src):
            read.append(first_line)
            yield first_line, lines

    monkeypatch.setattr(otlp, "_line_chunks", line_chunks)
    store = connect(tmp_path / "s.duckdb")
    (first,) = ingest(store, [mixed_file]).files
    assert first.status == "loaded" and first.accepted > 20
    sha = store.execute("SELECT content_sha256 FROM raw_loads").fetchone()[0]
    assert sha == hashlib.sha256(mixed_file.read_bytes()).hexdigest()
    chunks, stored = len(read), _store_rows(store)
    assert chunks >= 10

    read.clear()  # the same bytes under another name: parsing starts, and stops at the check
    renamed = tmp_path / "renamed.jsonl"
    renamed.write_bytes(mixed_file.read_bytes())
    (again,) = ingest(store, [renamed]).files
    assert (again.status, again.accepted, again.message) == ("unchanged", 0, "same content already loaded; nothing to do")
    assert 0 < len(read) <= otlp.PARSE_WORKERS + 1 < chunks  # what was handed out before the check, no more
    after = _store_rows(store)
    assert {k: v for k, v in after.items() if k != "ledger"} == {k: v for k, v in stored.items() if k != "ledger"}
    assert store.execute("SELECT status, content_sha256 FROM raw_loads ORDER BY started_at").fetchall() == [
        ("loaded", sha), ("unchanged", sha)]

    read.clear()  # a path loaded before is hashed first: offered again unchanged, nothing of it is read
    (same_path,) = ingest(store, [mixed_file]).files
    assert same_path.status == "unchanged" and read == []

    (forced,) = ingest(store, [mixed_file], force=True).files  # read again: every call a duplicate
    assert forced.status == "loaded" and forced.accepted == 0 and forced.duplicates >= first.accepted


def test_a_chunk_that_runs_out_of_memory_is_parsed_in_parts_and_stores_the_same(mixed_file, tmp_path, monkeypatch):
    want = connect(tmp_path / "roomy.duckdb")
    ingest(want, [mixed_file])
    passes: list[int] = []
    real = otlp.parse_chunk

    def parse_chunk(con, lines, first_line, display, keep):
        passes.append(len(lines))
        return real(con, lines, first_line, display, keep)

    monkeypatch.setattr(otlp, "parse_chunk", parse_chunk)
    tight = connect(tmp_path / "tight.duckdb")  # the store keeps its own limit: set when it was opened
    # the file's 4 MB as one chunk does not fit a parser's 32 MB; its halves, or theirs, do (each line alone does)
    monkeypatch.setenv("PHASELENS_MEMORY_LIMIT", "32MB")
    result = ingest(tight, [mixed_file])
    assert [f.status for f in result.files] == ["loaded"], [f.message for f in result.files]
    lines = len(mixed_file.read_text().splitlines())
    assert passes[0] == lines and len(passes) > 3 and max(passes[1:]) < lines, passes  # it ran out, then in parts
    got, expected = _store_rows(tight), _store_rows(want)
    assert len(expected["calls"]) > 20
    for part in expected:
        assert got[part] == expected[part], part


def test_a_line_too_large_for_the_memory_limit_fails_its_file_and_names_the_setting(mixed_file, tmp_path, monkeypatch):
    store = connect(tmp_path / "s.duckdb")
    monkeypatch.setenv("PHASELENS_MEMORY_LIMIT", "16MB")  # the parsers' limit: no line of the file fits it alone
    result = ingest(store, [mixed_file])
    (f,) = result.files
    assert f.status == "failed" and "cannot be parsed within the memory limit" in f.message, f.message
    assert "PHASELENS_MEMORY_LIMIT" in f.message and "SET memory_limit" not in f.message
    assert store.execute("SELECT count(*) FROM raw_calls").fetchone()[0] == 0

def test_a_chunk_with_a_line_that_is_not_json_keeps_its_other_lines(mixed_file):
    lines = mixed_file.read_text().splitlines(keepends=True)
    con = otlp.parser_connection()
    parsed = otlp.parse_chunk(con, lines, 1, "f", otlp.keep_list(None))
    bad = [i for i, line in enumerate(lines, 1) if line.startswith('{"resourceSpans": [ not')]
    rejects = parsed.line_rejects[0].to_pylist()
    assert [(r["reason"], r["locator"]) for r in rejects if r["reason"] == "malformed_json"] == [("malformed_json", f"f:{bad[0]}")]
    reasons = [r["reason"] for r in rejects]
    assert parsed.batches == len(lines) - 1 and reasons.count("malformed_json") == 1 and reasons.count("missing_field") == 1
    assert parsed.spans[0].num_rows > 20


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [line for line in f if line.strip()]


@pytest.mark.parametrize("path", [WITH_CONTENT, *RECORDED], ids=lambda p: p.parent.name if p.suffix == ".gz" else p.name)
def test_prompt_text_stays_with_the_parser(path):
    lines = _lines(path)
    content = set()
    for line in lines:
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    for a in sp.get("attributes", []):
                        if re.match(otlp.CONTENT_KEY_PATTERN, a["key"]):
                            content.update(s for s in _strings(a["value"]) if len(s) >= 12)
    con = otlp.parser_connection()
    parsed = otlp.parse_chunk(con, lines, 1, "f", otlp.keep_list(None))
    assert "content_attrs" not in parsed.spans[0].column_names
    crossing = [s for part in (parsed.spans, parsed.prefix, parsed.line_rejects)
                for row in part[0].to_pylist() for s in _strings(row)]
    assert crossing and not [c for c in content if any(c in s for s in crossing)]
    if content and path == WITH_CONTENT:
        assert parsed.prefix[0].num_rows > 0  # its hashes do cross


def test_a_parser_that_fails_fails_its_file_only_and_leaves_no_thread_behind(mixed_file, tmp_path, monkeypatch):
    import threading

    real = otlp.parse_chunk

    def parse_chunk(con, lines, first_line, display, keep):
        if "broken" in display and first_line > 1:
            raise RuntimeError("the parser broke on a later chunk")
        return real(con, lines, first_line, display, keep)

    monkeypatch.setattr(otlp, "parse_chunk", parse_chunk)
    monkeypatch.setattr(otlp, "CHUNK_BYTES", mixed_file.stat().st_size // 10)
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(mixed_file.read_bytes())
    good = tmp_path / "good.jsonl"
    good.write_bytes(mixed_file.read_bytes().replace(b'"traceId":"', b'"traceId":"f'))  # other trace ids, same spans
    before = threading.active_count()
    store = connect(tmp_path / "s.duckdb")
    result = ingest(store, [broken, good])
    assert [f.status for f in result.files] == ["failed", "loaded"], [f.message for f in result.files]
    assert "the parser broke on a later chunk" in result.files[0].message
    # nothing of the failed file is kept, though its first chunk was staged before the failure
    assert store.execute("SELECT count(*) FROM raw_calls WHERE source_locator LIKE '%broken.jsonl%'").fetchone()[0] == 0
    assert store.execute("SELECT count(*) FROM raw_calls").fetchone()[0] == result.files[1].accepted > 0
    assert threading.active_count() == before


def test_the_load_stages_on_the_cores_the_parsers_leave_and_gets_them_back(mixed_file, tmp_path, monkeypatch):
    monkeypatch.setattr(otlp.OtlpJsonAdapter, "stage_threads", 1)
    seen: list[int] = []
    real_stage, real_parse = otlp._stage_chunk, otlp.parse_chunk

    def stage_chunk(con, display, parsed, load_id):
        seen.append(con.execute("SELECT current_setting('threads')").fetchone()[0])
        return real_stage(con, display, parsed, load_id)

    def parse_chunk(con, lines, first_line, display, keep):
        if "broken" in display and first_line > 1:
            raise RuntimeError("the parser broke on a later chunk")
        return real_parse(con, lines, first_line, display, keep)

    monkeypatch.setattr(otlp, "_stage_chunk", stage_chunk)
    monkeypatch.setattr(otlp, "parse_chunk", parse_chunk)
    monkeypatch.setattr(otlp, "CHUNK_BYTES", mixed_file.stat().st_size // 4)
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(mixed_file.read_bytes().replace(b'"traceId":"', b'"traceId":"f'))  # not the same content
    store = connect(tmp_path / "s.duckdb")
    store.execute("SET threads = 3")
    result = ingest(store, [mixed_file, broken])
    assert [f.status for f in result.files] == ["loaded", "failed"], [f.message for f in result.files]
    assert seen and set(seen) == {1}, seen  # every chunk of both files staged with one thread
    # back to the connection's own setting after the loaded file and after the failed one (its transaction aborted)
    assert store.execute("SELECT current_setting('threads')").fetchone()[0] == 3
