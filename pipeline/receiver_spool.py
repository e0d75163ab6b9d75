"""The receiver's spool: accepted requests on disk, fsynced before the receiver answers, until they are loaded.

Layout of the spool folder (default `<db>.spool/`, mode 0700, files 0600):

- `<stamp>-<pid>-<n>.otlp.jsonl`    a segment: one accepted request per line, as OTLP JSON (what `ingest` reads)
                                     or a checked protobuf body in base64, expanded to OTLP JSON by the flusher
- `<stamp>-<pid>-<n>.rejects.jsonl` its sidecar: the spans rejected on receipt, one `Reject` per line
- `failed/`                          request lines the store refused to load (kept for inspection, never retried)
- `.lock`                            held (flock) by the one receiver that owns the folder

Appends go to the current segment; `rotate()` closes it and `pending()` lists the closed ones, oldest first. Every
segment present when the spool is opened is a leftover of an earlier run (the lock guarantees it) and is pending;
its last line is dropped when incomplete, since a line is acknowledged only once it is whole and fsynced.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from phaselens.models import Reject

from .errors import PhaselensError

log = logging.getLogger("phaselens.receiver")

DATA_SUFFIX = ".otlp.jsonl"
REJECTS_SUFFIX = ".rejects.jsonl"
LOCK_NAME = ".lock"
FAILED_DIR = "failed"
SPLIT_PREFIX = ".split-"


@dataclass(frozen=True)
class Segment:
    """One closed segment: its OTLP JSON lines and its sidecar of rejects (either file may be absent)."""

    base: Path

    @property
    def data(self) -> Path:
        """The segment's OTLP JSON lines."""
        return self.base.with_name(self.base.name + DATA_SUFFIX)

    @property
    def rejects(self) -> Path:
        """The segment's sidecar of rejects, one `Reject` JSON per line."""
        return self.base.with_name(self.base.name + REJECTS_SUFFIX)

    def read_rejects(self) -> list[Reject]:
        """The rejects recorded on receipt for this segment."""
        if not self.rejects.exists():
            return []
        out = []
        with open(self.rejects, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                try:
                    out.append(Reject.model_validate_json(line))
                except ValueError:
                    log.warning("%s:%d is not a reject record; skipped", self.rejects, n)
        return out

    def delete(self) -> None:
        """Remove both files (once the store holds their content)."""
        self.data.unlink(missing_ok=True)
        self.rejects.unlink(missing_ok=True)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _drop_incomplete_tail(path: Path) -> int:
    """Cut a file after its last newline; returns the bytes dropped (a line written but never acknowledged)."""
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb+") as f:
        step, pos = 64 * 1024, size
        while pos > 0:
            start = max(0, pos - step)
            f.seek(start)
            chunk = f.read(pos - start)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                keep = start + nl + 1
                break
            pos = start
        else:
            keep = 0
        if keep < size:
            f.truncate(keep)
            os.fsync(f.fileno())
        return size - keep


class _AppendFile:
    """A file opened for appending; a write is made durable by `sync_to`, which shares one fsync among the writers
    waiting in that moment (group commit)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.size = self.synced = os.fstat(self.fd).st_size
        self.closed = False
        self._sync = threading.Lock()

    def write(self, data: bytes) -> int:
        """Append `data` (not yet fsynced; the caller holds the spool's mutex); returns the end offset.

        On failure cut the file back to its size before and raise."""
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]
        except OSError:
            self.undo()
            raise
        self.size += len(data)
        return self.size

    def sync_to(self, end: int) -> None:
        """Return once the file is fsynced at least up to `end`; one fsync serves every write made before it."""
        with self._sync:
            if self.synced >= end:
                return
            if self.closed:  # closed by rotate(), which fsyncs first; a failed fsync there leaves synced short
                raise OSError(f"{self.path} was closed before it could be fsynced")
            target = self.size
            os.fsync(self.fd)
            self.synced = target

    def undo(self) -> None:
        """Cut the file back to the size of its last whole write."""
        try:
            os.ftruncate(self.fd, self.size)
        except OSError:
            log.exception("could not cut %s back after a failed write", self.path)

    def close(self) -> None:
        """fsync what was written, then close the file descriptor."""
        with self._sync:
            try:
                if self.synced < self.size:
                    os.fsync(self.fd)
                    self.synced = self.size
            except OSError:
                log.exception("could not fsync %s when closing it", self.path)
            finally:
                self.closed = True
                os.close(self.fd)


class Spool:
    """The durable queue between the HTTP handlers (append) and the flusher (rotate, pending, delete)."""

    def __init__(self, folder: Path | str) -> None:
        self.folder = Path(folder)
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._lock_fd = os.open(self.folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:
            raise PhaselensError(f"cannot use the spool folder {self.folder}: {e.strerror or e}",
                                 "pass a writable --spool-dir") from e
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(self._lock_fd)
            raise PhaselensError(f"another `phaselens collect` is using the spool {self.folder}",
                                 "stop it first, or give this receiver its own --spool-dir") from e
        self._mutex = threading.Lock()
        self._seq = 0
        self._current: Segment | None = None
        self._files: dict[str, _AppendFile] = {}
        self.current_spans = 0
        self._recover()

    def _recover(self) -> None:
        for leftover in self.folder.glob(SPLIT_PREFIX + "*"):
            shutil.rmtree(leftover, ignore_errors=True)  # an interrupted split; its segment is still here
        for leftover in self.folder.glob("*" + DATA_SUFFIX + ".expand"):
            leftover.unlink(missing_ok=True)  # an interrupted protobuf expansion; its segment is still whole
        for path in sorted(self.folder.glob("*" + DATA_SUFFIX)) + sorted(self.folder.glob("*" + REJECTS_SUFFIX)):
            dropped = _drop_incomplete_tail(path)
            if dropped:
                log.warning("dropped an incomplete last line (%d bytes, never acknowledged) from %s", dropped, path)
        if pending := self.pending():
            log.info("spool %s holds %d segment(s) from an earlier run; loading them first", self.folder, len(pending))

    def append(self, line: str | None, spans: int, rejects: list[Reject]) -> None:
        """Write one accepted request (an OTLP JSON line of `spans` spans) and its rejects, fsynced (group commit).

        Raises OSError: after cutting both files back when a write fails, or when the fsync fails (see below).
        """
        if line is None and not rejects:
            return
        with self._mutex:
            if self._current is None:
                self._seq += 1
                stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
                self._current = Segment(self.folder / f"{stamp}-{os.getpid()}-{self._seq:06d}")
            written: list[tuple[_AppendFile, int]] = []
            ends: list[tuple[_AppendFile, int]] = []
            try:
                for path, payload in ((self._current.data, line and line + "\n"),
                                      (self._current.rejects, "".join(r.model_dump_json() + "\n" for r in rejects))):
                    if not payload:
                        continue
                    f = self._files.get(path.name)
                    if f is None:
                        f = self._files[path.name] = _AppendFile(path)
                        _fsync_dir(self.folder)
                    size_before = f.size
                    ends.append((f, f.write(payload.encode("utf-8"))))
                    written.append((f, size_before))
            except OSError:
                for f, size_before in written:
                    f.size = size_before
                    f.undo()
                raise
            if line is not None:
                self.current_spans += spans
        # fsync outside the mutex: requests that wrote meanwhile share one fsync. A failed fsync leaves the line in
        # the file unacknowledged (the client retries; the loader dedupes by call_id), never acknowledged and lost.
        for f, end in ends:
            f.sync_to(end)

    def rotate(self) -> None:
        """Close the current segment, so that the next append starts a new one and this one is pending."""
        with self._mutex:
            for f in self._files.values():
                f.close()
            self._files.clear()
            self._current, self.current_spans = None, 0

    def pending(self) -> list[Segment]:
        """The closed segments, oldest first."""
        with self._mutex:  # a segment being started now must not be taken for a closed one
            current = self._current.base.name if self._current else None
            bases = {p.name.removesuffix(DATA_SUFFIX) for p in self.folder.glob("*" + DATA_SUFFIX)}
            bases |= {p.name.removesuffix(REJECTS_SUFFIX) for p in self.folder.glob("*" + REJECTS_SUFFIX)}
        return [Segment(self.folder / b) for b in sorted(bases) if b != current]

    def failed_path(self, segment: Segment) -> Path:
        """Where request lines the store refused are kept: `failed/<segment>.otlp.jsonl`."""
        folder = self.folder / FAILED_DIR
        folder.mkdir(mode=0o700, exist_ok=True)
        return folder / segment.data.name

    def split_dir(self, segment: Segment) -> Path:
        """A scratch folder for loading a segment one request at a time."""
        return self.folder / f"{SPLIT_PREFIX}{segment.base.name}"

    def close(self) -> None:
        """Close the open files and release the folder's lock."""
        self.rotate()
        fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        os.close(self._lock_fd)
