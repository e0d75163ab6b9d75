"""The receiver's flusher: loads closed spool segments into the store in small batches and publishes the snapshot.

The store is held only while a batch loads (open, load, publish, close). When another phaselens process holds it,
the flush returns False and the next try comes later, with a growing pause (at most RETRY_MAX_S); the spool keeps
the data meanwhile. Segments are deleted only after the store is closed, so a crash in between loads them again,
which changes nothing: loads are idempotent by file content and by call_id, and receipt rejects by locator.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from . import telemetry
from .errors import StoreError
from .load import FileResult, ingest
from phaselens.ingest.otlp_http import PB_LINE_PREFIX, expand_line
from .receiver_spool import Segment, Spool
from .store import connect

log = logging.getLogger("phaselens.receiver")

RETRY_MAX_S = 10.0  # longest pause between two tries of a busy store
COUNTS = ("accepted", "duplicates", "rejected", "skipped", "replaced")  # replaced: stored calls later spans changed


def is_locked(e: StoreError) -> bool:
    """Whether a StoreError says another process holds the store (worth waiting for), not that it is unusable."""
    return "in use" in e.message


class Flusher:
    """Loads closed spool segments into the store in small batches, holding the store only while loading."""

    def __init__(self, db: Path, spool: Spool, flush_seconds: float) -> None:
        self.db, self.spool, self.flush_seconds = db, spool, flush_seconds
        self.wake, self.stopping = threading.Event(), threading.Event()
        self.failures = 0
        self._thread = threading.Thread(target=self._run, name="phaselens-flusher", daemon=True)

    def start(self) -> None:
        """Start the background loop: a flush every `flush_seconds`, or when woken."""
        self._thread.start()

    def stop(self) -> None:
        """Stop the background loop (the final flush is the caller's)."""
        self.stopping.set()
        self.wake.set()
        self._thread.join()

    def _run(self) -> None:
        next_at = time.monotonic() + self.flush_seconds
        while not self.stopping.is_set():
            self.wake.wait(max(0.0, next_at - time.monotonic()))
            if self.stopping.is_set():
                return
            self.wake.clear()
            ok = self.try_flush()
            self.failures = 0 if ok else self.failures + 1
            wait = self.flush_seconds if ok else min(RETRY_MAX_S, max(self.flush_seconds, 0.5) * 2 ** (self.failures - 1))
            next_at = time.monotonic() + wait

    def try_flush(self) -> bool:
        """`flush()`, with any error logged and reported as False: the spool keeps the data for the next try."""
        try:
            return self.flush()
        except Exception:
            log.exception("flush failed; the spool keeps the data and the next flush tries again")
            return False

    def flush(self) -> bool:
        """Close the current segment and load every closed one; False when the store is busy (try again later)."""
        self.spool.rotate()
        pending = self.spool.pending()
        if not pending:
            return True
        started = time.perf_counter()
        try:
            con = connect(self.db)
        except StoreError as e:
            level = logging.INFO if is_locked(e) and self.failures < 3 else logging.WARNING
            log.log(level, "store busy (%s); %d segment(s) wait in the spool", e.message, len(pending))
            return False
        totals = dict.fromkeys(COUNTS, 0)
        load_ids: list[str] = []
        with telemetry.operation("receiver.flush", segments=len(pending)):
            try:
                since = _basis(con)  # before loading: the snapshot made at this basis can take just the new days
                for segment in pending:
                    for k, v in self._load_segment(con, segment, load_ids).items():
                        totals[k] += v
                # a batch of duplicates changes nothing to show; one whose spans joined stored calls does
                if totals["accepted"] or totals["rejected"] or totals["replaced"]:
                    _publish(con, self.db, load_ids, since)
            finally:
                con.close()
        for segment in pending:
            segment.delete()  # after the store is closed: a crash before this reloads them, which changes nothing
        log.info("flushed %d segment(s): %d stored, %d duplicate, %d rejected, %d skipped in %.2f s", len(pending),
                 totals["accepted"], totals["duplicates"], totals["rejected"], totals["skipped"],
                 time.perf_counter() - started)
        return True

    def _load_segment(self, con, segment: Segment, load_ids: list[str]) -> dict[str, int]:
        counts = dict.fromkeys(COUNTS, 0)
        load_id = ""
        if segment.data.exists() and segment.data.stat().st_size:
            _expand_protobuf_lines(segment)
            r = ingest(con, [segment.data]).files[0]
            if r.failed:
                log.warning("loading %s failed (%s); loading its requests one by one", segment.data.name, r.message)
                results = self._load_one_by_one(con, segment)
            else:
                results = [r]
            for r in results:
                for k in COUNTS:
                    counts[k] += getattr(r, k)
            load_id = results[0].load_id if results else ""
            load_ids.extend(r.load_id for r in results if r.load_id)
        rejects = segment.read_rejects()
        if rejects:
            counts["rejected"] += _store_rejects(con, rejects, load_id or uuid.uuid4().hex[:16])
        return counts

    def _load_one_by_one(self, con, segment: Segment) -> list[FileResult]:
        """Load a segment that failed as a whole one request line at a time; lines that still fail go to `failed/`."""
        scratch = self.spool.split_dir(segment)
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(mode=0o700)
        results: list[FileResult] = []
        try:
            with open(segment.data, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    one = scratch / f"{segment.base.name}-{n:06d}.otlp.jsonl"
                    one.write_text(line, encoding="utf-8")
                    r = ingest(con, [one]).files[0]
                    results.append(r)
                    if r.failed:
                        with open(self.spool.failed_path(segment), "a", encoding="utf-8") as bad:
                            bad.write(line)
                        log.error("request %d of %s cannot be loaded (%s); kept in %s", n, segment.data.name,
                                  r.message, self.spool.failed_path(segment))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return results


def _expand_protobuf_lines(segment: Segment) -> None:
    """Rewrite a segment's protobuf lines as OTLP JSON (what `ingest` reads); the swap is atomic, so a crash leaves
    either the old file or the new one, which hold the same requests."""
    with open(segment.data, encoding="utf-8") as f:
        if not any(line.startswith(PB_LINE_PREFIX) for line in f):
            return
    tmp = segment.data.with_name(segment.data.name + ".expand")
    with open(segment.data, encoding="utf-8") as src, open(tmp, "w", encoding="utf-8") as dst:
        for line in src:
            dst.write(expand_line(line.rstrip("\n")) + "\n")
        dst.flush()
        os.fsync(dst.fileno())
    os.replace(tmp, segment.data)


def _store_rejects(con, rejects: list, load_id: str) -> int:
    """Insert the spans rejected on receipt into `raw_rejects` (once each); returns how many were new."""
    now = datetime.now(UTC).replace(tzinfo=None)
    rows = pa.Table.from_pylist([{**r.model_dump(), "load_id": load_id, "rejected_at": now} for r in rejects])
    con.register("_receiver_rejects", rows)
    try:
        before = con.execute("SELECT count(*) FROM raw_rejects").fetchall()[0][0]
        con.execute(
            """
            INSERT INTO raw_rejects BY NAME
            SELECT * FROM _receiver_rejects s
            WHERE NOT EXISTS (SELECT 1 FROM raw_rejects r WHERE r.locator = s.locator AND r.reason = s.reason)
            """
        )
        return con.execute("SELECT count(*) FROM raw_rejects").fetchall()[0][0] - before
    finally:
        con.unregister("_receiver_rejects")


def _basis(con) -> str | None:
    """The store's basis for an incremental publish (`publish.store_basis`), None without the publish stage."""
    try:
        from .publish import store_basis
    except ImportError:
        return None
    return store_basis(con)


def _publish(con, db: Path, load_ids: list[str], since: str | None) -> None:
    """Refresh the dashboard's snapshot when `pipeline/publish.py` is installed; a failure is logged, not raised.

    Incremental: when the current snapshot was made at basis `since` (the store before this flush), only the days
    of the calls this flush stored are computed and the rest is copied from it; otherwise every day is."""
    try:
        from .publish import loaded_days, publish
    except ImportError:
        return
    try:
        publish(con, db, days=loaded_days(con, load_ids), since=since)
    except Exception:
        log.exception("publishing the dashboard snapshot failed; the calls are stored and the next flush publishes")
