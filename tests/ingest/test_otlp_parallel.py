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


def _split(mixed_file: Path, where: Path) -> list[Path]:
    """The mixed file's lines as a run of small files, one of them gzip and one a single OTLP JSON document, with
    a gateway's log and an empty file among them (not OTLP: nothing of theirs is parsed ahead)."""
    lines = mixed_file.read_text().splitlines(keepends=True)
    step = len(lines) // 6 + 1
    parts = [lines[i:i + step] for i in range(0, len(lines), step)]
    where.mkdir()
    files = []
    for n, part in enumerate(parts):
        p = where / f"part{n}.jsonl"
        if n == 1:
            p = p.with_suffix(".jsonl.gz")
            p.write_bytes(gzip.compress("".join(part).encode()))
        elif n == len(parts) - 1:
            p = p.with_suffix(".json")
            p.write_text(json.dumps({"resourceSpans": [rs for line in part for rs in _batch(line)]}))
        else:
            p.write_text("".join(part))
        files.append(p)
    gateway = where / "litellm.spendlogs.jsonl"
    gateway.write_bytes((ROOT / "tests" / "fixtures" / "gateways" / "litellm.spendlogs.jsonl").read_bytes())
    empty = where / "empty.jsonl"
    empty.write_text("")
    return [*files[:2], gateway, *files[2:4], empty, *files[4:]]


def _batch(line: str) -> list:
    try:
        return json.loads(line)["resourceSpans"]
    except (ValueError, KeyError, TypeError):
        return []


def _watch_ahead(monkeypatch) -> dict[str, list]:
    """What the run parsed ahead (`read`: file name, parsed or not; `passes`: the files of each pass) and what loads
    used (`used`: file names)."""
    seen: dict[str, list] = {"read": [], "used": [], "passes": []}
    real_read, real_used = otlp.ParseAhead._read, otlp._parsed_ahead

    def read(self, batch, options):
        early = real_read(self, batch, options)
        seen["read"] += [(Path(path).name, early[path] is not None) for path in batch]
        seen["passes"].append([Path(path).name for path in batch])
        return early

    def used(src):
        early = real_used(src)
        if early is not None:
            seen["used"].append(src.path.name)
        return early

    monkeypatch.setattr(otlp.ParseAhead, "_read", read)
    monkeypatch.setattr(otlp, "_parsed_ahead", used)
    return seen


@pytest.mark.parametrize("per_pass", [otlp.AHEAD_FILES, 2])
def test_a_run_of_small_files_parsed_ahead_stores_what_one_load_a_file_stores(mixed_file, tmp_path, monkeypatch, per_pass):
    """The files of a run parse, several in one pass, while the files before them stage (`ParseAhead`): the store,
    the rejects and the ledger are those of loading the files one run each, in the same order (none parsed
    ahead)."""
    import threading

    monkeypatch.setattr(otlp, "AHEAD_FILES", per_pass)
    files = _split(mixed_file, tmp_path / "in")
    alone = connect(tmp_path / "alone.duckdb")
    seen = _watch_ahead(monkeypatch)
    for f in files:
        ingest(alone, [f])
    assert seen == {"read": [], "used": [], "passes": []}  # a run of one file has no next file
    ahead = connect(tmp_path / "ahead.duckdb")
    result = ingest(ahead, files)
    statuses = {Path(f.file).name: f.status for f in result.files}
    assert statuses == {f.name: "empty" if f.name == "empty.jsonl" else "loaded" for f in files}, result.files
    otlp_files = [f.name for f in files if f.name.startswith("part")]
    # every OTLP file but the first was parsed ahead and used; the gateway log and the empty file were not parsed
    assert seen["used"] == otlp_files[1:], seen
    assert [name for name, parsed in seen["read"] if parsed] == otlp_files[1:], seen
    # every file after the first, in passes of at most `per_pass` files (the default: all of them in one)
    assert [name for p in seen["passes"] for name in p] == [f.name for f in files[1:]], seen
    assert max(map(len, seen["passes"])) == min(per_pass, len(files) - 1), seen
    want, got = _store_rows(alone), _store_rows(ahead)
    assert len(want["calls"]) > 20
    # the bad lines are in the middle: in a file parsed ahead, so their line numbers are checked too
    bad = [r[4] for r in want["rejects"] if r[0] == "otlp" and r[1] == "malformed_json"]
    assert len(bad) == 1 and bad[0].split(":")[0] in otlp_files[1:-1], bad
    for part in want:
        assert got[part] == want[part], part
    assert not [t for t in threading.enumerate() if t.name.startswith("phaselens-otlp-ahead")]


def test_a_file_written_to_after_it_was_parsed_ahead_is_read_again_by_its_load(mixed_file, tmp_path, monkeypatch):
    lines = mixed_file.read_text().splitlines(keepends=True)
    half = len(lines) // 2
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(lines[:half]))
    b.write_text("".join(lines[half:]))
    more = "".join(line.replace('"traceId":"', '"traceId":"eeee') for line in lines[:half])  # other calls
    seen = _watch_ahead(monkeypatch)
    real_read = otlp.ParseAhead._read

    def read_then_write(self, batch, options):
        early = real_read(self, batch, options)
        with open(b, "a") as f:  # the exporter appends after the parse ahead read the file
            f.write(more)
        return early

    monkeypatch.setattr(otlp.ParseAhead, "_read", read_then_write)
    store = connect(tmp_path / "s.duckdb")
    result = ingest(store, [a, b])
    assert [f.status for f in result.files] == ["loaded", "loaded"]
    assert seen["read"] == [("b.jsonl", True)] and seen["used"] == []  # parsed ahead, then not used
    monkeypatch.setattr(otlp.ParseAhead, "_read", real_read)
    alone = connect(tmp_path / "alone.duckdb")
    for f in (a, b):  # b as it is now, with the appended calls
        ingest(alone, [f])
    want, got = _store_rows(alone), _store_rows(store)
    assert store.execute("SELECT count(*) FROM raw_calls WHERE trace_id LIKE 'eeee%'").fetchone()[0] > 10
    for part in want:
        assert got[part] == want[part], part


def test_a_path_loaded_before_is_not_parsed_ahead_unless_forced(mixed_file, tmp_path, monkeypatch):
    """A run offered the same files again (a cron job over one folder) costs their hashes: nothing is parsed."""
    lines = mixed_file.read_text().splitlines(keepends=True)
    files = [tmp_path / f"p{n}.jsonl" for n in range(3)]
    for n, f in enumerate(files):
        f.write_text("".join(lines[n::3]))
    store = connect(tmp_path / "s.duckdb")
    seen = _watch_ahead(monkeypatch)
    assert [f.status for f in ingest(store, files).files] == ["loaded"] * 3
    assert seen["used"] == ["p1.jsonl", "p2.jsonl"]
    for v in seen.values():
        v.clear()
    assert [f.status for f in ingest(store, files).files] == ["unchanged"] * 3
    assert seen == {"read": [], "used": [], "passes": []}
    forced = ingest(store, files, force=True).files
    assert [(f.status, f.accepted) for f in forced] == [("loaded", 0)] * 3 and all(f.duplicates for f in forced)
    assert seen["used"] == ["p1.jsonl", "p2.jsonl"]


def test_a_run_that_stops_stops_its_parse_ahead(mixed_file, tmp_path, monkeypatch):
    import threading

    lines = mixed_file.read_text().splitlines(keepends=True)
    files = [tmp_path / f"p{n}.jsonl" for n in range(3)]
    for n, f in enumerate(files):
        f.write_text("".join(lines[n::3]))
    seen = _watch_ahead(monkeypatch)

    def stop(result, i, n):
        raise KeyboardInterrupt  # the operator stops the run once the first file is loaded

    store = connect(tmp_path / "s.duckdb")
    with pytest.raises(KeyboardInterrupt):
        ingest(store, files, on_file=stop)
    assert [name for name, _ in seen["read"]] in (["p1.jsonl", "p2.jsonl"], [])  # one pass: parsed, or stopped
    assert store.execute("SELECT file, status FROM raw_loads").fetchall() == [(str(files[0]), "loaded")]
    assert not [t for t in threading.enumerate() if t.name.startswith("phaselens-otlp-ahead")]


def test_files_parsed_in_one_pass_each_get_what_their_own_parse_gives(mixed_file):
    """`parse_files` pays the parse's fixed cost once for several files; each file's spans, prefix hashes, line
    rejects (with its own name and line numbers) and batch count are those of parsing it alone."""
    lines = mixed_file.read_text().splitlines(keepends=True)
    third = len(lines) // 3
    files = [("a.jsonl", lines[:third]), ("dir/b.jsonl", lines[third:2 * third]), ("c.jsonl", lines[2 * third:]),
             ("empty.jsonl", ["\n"])]
    keep = otlp.keep_list(None)
    con = otlp.parser_connection()
    together = otlp.parse_files(con, files, keep)
    alone = [otlp.parse_chunk(con, ls, 1, display, keep) for display, ls in files]
    assert sum(p.spans[0].num_rows for p in together) > 20 and any(p.line_rejects[0].num_rows for p in together)
    assert all(p.prefix[0].num_rows for p in together[:3])  # the recorded calls carry prompt text: hashes in each
    for got, want in zip(together, alone, strict=True):
        assert (got.first_line, got.last_line, got.batches) == (want.first_line, want.last_line, want.batches)
        for part in ("spans", "prefix", "line_rejects"):
            assert getattr(got, part)[1] == getattr(want, part)[1], part  # the DuckDB types
            assert getattr(got, part)[0].to_pylist() == getattr(want, part)[0].to_pylist(), part
