"""Load: files -> adapters -> staging tables -> the store, one transaction per file.

Guarantees:
- A file whose bytes were already loaded is not read again (ledger row `unchanged`).
- A call or billing line already stored (same `call_id` / `billing_line_id`, from any file) is
  counted as a duplicate and not stored twice.
- A crash or error mid-file rolls the whole file back; what was stored before is untouched.
- Every record ends up stored, rejected (with reason) or counted as skipped.
"""

from __future__ import annotations

import glob
import hashlib
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa

from phaselens.ingest.base import RecordAdapter, SourceFile, SqlAdapter, StageCounts, UnreadableFile
from phaselens.ingest.otlp import ParseAhead
from phaselens.ingest.registry import detect
from phaselens.models import BillingLine, LlmCall, Reject, Skip

from . import telemetry
from .errors import PhaselensError

BATCH_ROWS = 20_000
# a file at least this large, at a path not loaded before, is hashed while an adapter that can (`reads_before_hash`)
# starts reading it; a smaller one is hashed first (in milliseconds), so a re-offered small file costs its hash, not
# the start of a parse
HASH_BESIDE_BYTES = 16 << 20


@dataclass(frozen=True)
class FileResult:
    """The outcome of loading one file (one row of the `loads` ledger)."""

    file: str
    load_id: str
    status: str  # loaded | partial | unchanged | empty | failed
    adapter: str | None = None
    kind: str | None = None
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    skipped: int = 0
    message: str = ""
    seconds: float = 0.0
    replaced: int = 0  # stored calls the file changed (later spans of them arrived), not in the ledger

    @property
    def failed(self) -> bool:
        return self.status == "failed"


@dataclass
class IngestResult:
    run_id: str
    files: list[FileResult] = field(default_factory=list)
    not_data: list[Path] = field(default_factory=list)  # code, docs and config found in folders, not read

    @property
    def failed(self) -> list[FileResult]:
        return [f for f in self.files if f.failed]

    def total(self, attr: str) -> int:
        return sum(getattr(f, attr) for f in self.files)


# Inside a folder, files with these endings are code, docs or config, never traces or billing: they are
# skipped and counted. A file named on the command line is always read.
NOT_DATA_SUFFIXES = frozenset({
    ".py", ".pyc", ".md", ".rst", ".toml", ".ini", ".cfg", ".yaml", ".yml", ".sh", ".j2", ".html",
    ".css", ".js", ".ts", ".lock", ".sql",
})


def is_not_data(f: Path) -> bool:
    """True for code, docs and config (by file ending), which a folder walk skips."""
    return f.suffix.lower() in NOT_DATA_SUFFIXES or f.name in {"Makefile", "Dockerfile", "LICENSE"}


def expand_paths(paths: Iterable[str | Path], not_data: list[Path] | None = None) -> list[Path]:
    """Files, folders (recursively, hidden files skipped) and globs, in a stable order, each once."""
    out: list[Path] = []
    for p in paths:
        text = str(p)
        matches = sorted(glob.glob(text, recursive=True)) if glob.has_magic(text) else [text]
        if not matches:
            raise PhaselensError(f"no file matches {text}", "check the path or quote the glob")
        for m in matches:
            mp = Path(m)
            if mp.is_dir():
                found = sorted(
                    f
                    for f in mp.rglob("*")
                    if f.is_file() and not any(part.startswith(".") for part in f.relative_to(mp).parts)
                )
                out.extend(f for f in found if not is_not_data(f))
                if not_data is not None:
                    not_data.extend(f for f in found if is_not_data(f))
            elif mp.exists():
                out.append(mp)
            else:
                raise PhaselensError(f"no such file: {m}", "check the path")
    seen: set[Path] = set()
    unique = []
    for f in out:
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _hash_in_thread(path: Path) -> Future[str]:
    """`file_sha256(path)` computed in a thread of its own (hashlib releases the interpreter while it hashes), so
    detecting the format, and reading for an adapter that reads before the hash is needed, go on meanwhile."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="phaselens-hash")
    try:
        return pool.submit(file_sha256, path)
    finally:
        pool.shutdown(wait=False)


_LOADED = "status IN ('loaded', 'partial', 'empty')"  # a ledger row whose content is in the store


def _content_loaded_before(con: duckdb.DuckDBPyConnection, sha: str) -> bool:
    """Whether the ledger holds a load of this content."""
    row = con.execute(f"SELECT 1 FROM raw_loads WHERE content_sha256 = ? AND {_LOADED} LIMIT 1", [sha]).fetchone()
    return row is not None


def _paths_loaded_before(con: duckdb.DuckDBPyConnection, files: list[str]) -> set[str]:
    """Which of `files` (paths as given) the ledger holds a load of."""
    if not files:
        return set()
    return {r[0] for r in con.execute(
        f"SELECT DISTINCT file FROM raw_loads WHERE {_LOADED} AND file IN (SELECT unnest($files))",
        {"files": files}).fetchall()}


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # the hash says why it cannot be read


class _KnownContent(Exception):
    """Raised by the content check of a file whose hash turned out to be loaded already (or unreadable): the load
    rolls back what the adapter read and records why."""


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def create_stage_tables(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE OR REPLACE TEMP TABLE stage_calls AS SELECT * FROM raw_calls LIMIT 0")
    con.execute("CREATE OR REPLACE TEMP TABLE stage_billing AS SELECT * FROM raw_billing_lines LIMIT 0")
    con.execute("CREATE OR REPLACE TEMP TABLE stage_rejects AS SELECT * EXCLUDE (rejected_at) FROM raw_rejects LIMIT 0")


_TABLE_FOR = {LlmCall: "stage_calls", BillingLine: "stage_billing", Reject: "stage_rejects"}


def stage_records(con: duckdb.DuckDBPyConnection, records: Iterator) -> StageCounts:
    """Write a RecordAdapter's output into the staging tables, in batches."""
    batches: dict[type, list[dict]] = {LlmCall: [], BillingLine: [], Reject: []}
    counts = {"accepted": 0, "rejected": 0, "skipped": 0}

    def flush(kind: type) -> None:
        rows = batches[kind]
        if not rows:
            return
        table = pa.Table.from_pylist(rows)
        con.register("_stage_batch", table)
        try:
            con.execute(f"INSERT INTO {_TABLE_FOR[kind]} BY NAME SELECT * FROM _stage_batch")
        finally:
            con.unregister("_stage_batch")
        rows.clear()

    for rec in records:
        kind = type(rec)
        if kind is Skip:
            counts["skipped"] += 1
            continue
        if kind not in batches:
            raise TypeError(f"adapter yielded {kind.__name__}, expected LlmCall, BillingLine, Reject or Skip")
        counts["rejected" if kind is Reject else "accepted"] += 1
        batches[kind].append(rec.model_dump())
        if len(batches[kind]) >= BATCH_ROWS:
            flush(kind)
    for kind in batches:
        flush(kind)
    return StageCounts(**counts)


def _commit_stage(con: duckdb.DuckDBPyConnection, load_id: str, kind: str) -> tuple[int, int]:
    """Move staged rows into the raw tables; returns (new rows, duplicates)."""
    if kind == "calls":
        table, stage, key = "raw_calls", "stage_calls", "call_id"
    else:
        table, stage, key = "raw_billing_lines", "stage_billing", "billing_line_id"
    # an adapter may store rows itself while it reads (OTLP stores each chunk's merged calls): they are the load's
    # already, and only the staged rows can be duplicates
    added = 0
    staged, distinct = con.execute(f"SELECT count(*), count(DISTINCT {key}) FROM {stage}").fetchone()
    if staged:
        # The same record twice in one file (an exporter retry) keeps its first occurrence.
        dedupe = f"QUALIFY row_number() OVER (PARTITION BY s.{key} ORDER BY s.source_locator) = 1" if distinct < staged else ""
        added = con.execute(
            f"""
            INSERT INTO {table}
            SELECT * REPLACE ($load_id AS load_id) FROM {stage} s
            WHERE NOT EXISTS (SELECT 1 FROM {table} r WHERE r.{key} = s.{key})
            {dedupe}
            """,
            {"load_id": load_id},
        ).fetchone()[0]
    inserted = con.execute(f"SELECT count(*) FROM {table} WHERE load_id = ?", [load_id]).fetchone()[0]
    con.execute(
        """
        INSERT INTO raw_rejects
        SELECT * REPLACE ($load_id AS load_id), $now AS rejected_at FROM stage_rejects s
        WHERE NOT EXISTS (SELECT 1 FROM raw_rejects r WHERE r.locator = s.locator AND r.reason = s.reason)
        """,
        {"load_id": load_id, "now": _now()},
    )
    return inserted, staged - added


def _ledger(con: duckdb.DuckDBPyConnection, r: FileResult, run_id: str, sha: str | None, started: datetime) -> None:
    con.execute(
        "INSERT INTO raw_loads VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            r.load_id, run_id, r.file, sha, r.adapter, r.kind, started, _now(),
            r.accepted, r.duplicates, r.rejected, r.skipped, r.status, r.message,
        ],
    )


def _failure(display: str, e: UnreadableFile) -> str:
    """The ledger message of a file that could not be read: the file, why, and what to do."""
    why = e.why if display in e.why else f"{display}: {e.why}"
    return why + (f"; {e.fix}" if e.fix else "")


def _begin(con: duckdb.DuckDBPyConnection) -> None:
    """Start the file's transaction; one left open or aborted by an earlier error is rolled back first, so
    one bad file never fails the files after it."""
    try:
        con.execute("BEGIN TRANSACTION")
    except duckdb.TransactionException:
        _rollback(con)
        con.execute("BEGIN TRANSACTION")


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    """Roll the file's transaction back, whatever state the error left it in (open, aborted or already
    ended: DuckDB ends a transaction whose COMMIT failed, and an adapter may have ended it)."""
    try:
        con.execute("ROLLBACK")
    except duckdb.TransactionException:
        pass  # no transaction is active: nothing of this file was kept


def load_file(
    con: duckdb.DuckDBPyConnection, path: Path, run_id: str, *, options: dict | None = None, force: bool = False,
    read_ahead: Callable[[], object] | None = None,
) -> FileResult:
    """Load one file in one transaction and record it in the ledger. `read_ahead` waits for and returns what the
    run parsed of the file ahead of its load (`ingest`), which its adapter may use."""
    with telemetry.operation("ingest.file", file=str(path)) as span:
        r = _load_file(con, path, run_id, options=options, force=force, read_ahead=read_ahead)
        if span is not None:
            span.set_attributes({"adapter": r.adapter or "", "status": r.status})
        for outcome in ("accepted", "duplicates", "rejected", "skipped"):
            telemetry.count(outcome, getattr(r, outcome), adapter=r.adapter or "")
        return r


def _load_file(
    con: duckdb.DuckDBPyConnection, path: Path, run_id: str, *, options: dict | None = None, force: bool = False,
    read_ahead: Callable[[], object] | None = None,
) -> FileResult:
    started = _now()
    load_id = uuid.uuid4().hex[:16]
    display = str(path)
    sha: str | None = None

    def done(**kw) -> FileResult:
        r = FileResult(file=display, load_id=load_id, seconds=(_now() - started).total_seconds(), **kw)
        _ledger(con, r, run_id, sha, started)
        return r

    hashing = _hash_in_thread(path)

    def loaded_before() -> bool:  # waits for the hash; OSError when the file cannot be read
        nonlocal sha
        sha = hashing.result()
        return not force and _content_loaded_before(con, sha)

    def known() -> FileResult | None:
        """Once the hash is in: the ledger row of a file whose content was loaded before or that cannot be read
        (outside any transaction); None when the load goes on."""
        try:
            if not loaded_before():
                return None
        except OSError as e:
            return done(status="failed", message=f"cannot read: {e.strerror or e}")
        return done(status="unchanged", message="same content already loaded; nothing to do")

    def content_check() -> None:  # inside the file's transaction, so it only says whether to stop; `known` says why
        try:
            stop = loaded_before()
        except OSError as e:
            raise _KnownContent() from e
        if stop:
            raise _KnownContent()

    src = SourceFile(path, display=display, options=options or {}, read_ahead=read_ahead)
    try:
        if src.is_empty:
            return known() or done(status="empty", message="the file is empty; nothing to load")
        adapter = detect(src)
    except UnreadableFile as e:
        return known() or done(status="failed", message=_failure(display, e))
    except Exception as e:  # noqa: BLE001 - whatever stops one file's detection must not stop the run
        return known() or done(status="failed", message=f"{display}: cannot tell its format ({type(e).__name__}: {str(e)[:200]})")
    # a path loaded before is most likely offered again unchanged: hashed first, it costs its hash and no more
    late = (isinstance(adapter, SqlAdapter) and getattr(adapter, "reads_before_hash", False)
            and _size(path) >= HASH_BESIDE_BYTES and not _paths_loaded_before(con, [display]))
    if not late and (r := known()):
        return r
    if late:
        src.content_check = content_check

    _begin(con)
    threads = _fewer_threads(con, getattr(adapter, "stage_threads", None))
    try:
        create_stage_tables(con)
        if isinstance(adapter, SqlAdapter) and hasattr(adapter, "stage"):
            counts = adapter.stage(con, src, load_id)
        elif isinstance(adapter, RecordAdapter):
            counts = stage_records(con, adapter.parse(src))
        else:  # pragma: no cover - registry guarantees one of the two
            raise TypeError(f"adapter {adapter.name} has neither stage() nor parse()")
        src.before_first_write()  # nothing is committed before the content is known to be new
        _restore_threads(con, threads)  # the writes of the commit use every core again
        threads = None
        inserted, dups = _commit_stage(con, load_id, adapter.kind)
        # a re-merged call replaces its stored row: only the net change is new
        inserted, dups = inserted - counts.replaced, dups + counts.duplicates
        # a file not read in full keeps what was read whole, and says why the rest was not
        r = done(
            status="partial" if src.problems else "loaded", adapter=adapter.name, kind=adapter.kind,
            accepted=inserted, duplicates=dups, rejected=counts.rejected, skipped=counts.skipped,
            replaced=counts.replaced, message=("not read in full: " + "; ".join(src.problems)) if src.problems else "",
        )
        con.execute("COMMIT")
        return r
    except _KnownContent:
        _rollback(con)
        r = known()
        assert r is not None, "the content check stops a load only for a known or unreadable file"
        return r
    except UnreadableFile as e:
        _rollback(con)
        return (late and known()) or done(status="failed", adapter=adapter.name, kind=adapter.kind,
                                          message=_failure(display, e))
    except Exception as e:
        _rollback(con)
        return (late and known()) or done(status="failed", adapter=adapter.name, kind=adapter.kind,
                    message=f"{display}: unexpected error while reading ({type(e).__name__}: {str(e)[:300]})")
    finally:  # after a failure: the transaction has ended, so the setting can be changed back
        _restore_threads(con, threads)


def _fewer_threads(con: duckdb.DuckDBPyConnection, wanted: int | None) -> int | None:
    """Lower the connection's DuckDB threads to `wanted` for one file's staging; returns the setting to restore
    afterwards, or None when nothing was changed."""
    if not wanted:
        return None
    threads = int(con.execute("SELECT current_setting('threads')").fetchall()[0][0])
    if wanted >= threads:
        return None
    con.execute(f"SET threads = {int(wanted)}")
    return threads


def _restore_threads(con: duckdb.DuckDBPyConnection, threads: int | None) -> None:
    """Set the connection's DuckDB threads back to what `_fewer_threads` returned (nothing when it returned None)."""
    if threads is not None:
        con.execute(f"SET threads = {threads}")


def ingest(
    con: duckdb.DuckDBPyConnection,
    paths: Iterable[str | Path],
    *,
    options: dict | None = None,
    force: bool = False,
    on_file: Callable[[FileResult, int, int], None] | None = None,
) -> IngestResult:
    """Load every file under `paths`; `on_file(result, index, total)` reports progress."""
    not_data: list[Path] = []
    files = expand_paths(paths, not_data)
    result = IngestResult(run_id=uuid.uuid4().hex[:16], not_data=not_data)
    # each file's fixed costs would add up over many small files: the next ones parse while this one stages
    with ParseAhead(con) as ahead:
        # not a path loaded before: most likely offered again unchanged, so its hash alone decides
        known = set() if force else _paths_loaded_before(con, [str(f) for f in files[1:]])
        ahead.offer([f for f in files[1:] if str(f) not in known], options or {})
        for i, f in enumerate(files, 1):
            r = load_file(con, f, result.run_id, options=options, force=force, read_ahead=ahead.take(f))
            result.files.append(r)
            if on_file:
                on_file(r, i, len(files))
    return result
