"""What an adapter is, how a file is opened, and how the right adapter is found from content.

Two kinds of adapter exist:

- `RecordAdapter.parse(src)` yields `LlmCall | BillingLine | Reject | Skip` one by one. It suits
  small and irregular files (billing exports, gateway logs, benchmark results).
- `SqlAdapter.stage(con, src, load_id)` fills the staging tables with one DuckDB query. It suits
  heavy files (OTLP traces) that a Python loop would read too slowly.

Either way an adapter never raises on a bad record: it yields (or stages) a `Reject` with a reason
and a locator, and the good records go on. It raises `UnreadableFile` only when the whole file
cannot be read.
"""

from __future__ import annotations

import csv
import io
import json
import zlib
from collections.abc import Callable, Iterator
from dataclasses import astuple, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import IO, ClassVar, Literal, Protocol, runtime_checkable

from phaselens.models import BillingLine, LlmCall, Reject, Skip

Record = LlmCall | BillingLine | Reject | Skip
Kind = Literal["calls", "billing"]

HEAD_BYTES = 256 * 1024
GZIP_MAGIC = b"\x1f\x8b"


_BOM = b"\xef\xbb\xbf"


def _decoded_lines(data: bytes) -> list[str]:
    # bytes end a line at LF, CRLF or a bare CR only, as a text stream with newline="" does (not at U+2028)
    return [line.decode("utf-8", "replace") for line in data.splitlines(keepends=True)]


class UnreadableFile(Exception):
    """The file as a whole cannot be read (not a known format, corrupt, unreadable)."""

    def __init__(self, path: str, why: str, fix: str = "") -> None:
        self.path, self.why, self.fix = path, why, fix
        super().__init__(f"{path}: {why}" + (f" ({fix})" if fix else ""))


# the section of docs/formats.md that lists the columns each tabular format must have
FORMAT_DOCS = {
    "AWS CUR 2.0": "docs/formats.md#aws-cur-20-for-bedrock",
    "Azure cost export": "docs/formats.md#azure-cost-management-export",
    "FOCUS": "docs/formats.md#focus",
    "GCP billing export": "docs/formats.md#gcp-billing-export-for-vertex-ai",
}


class SchemaMismatch(UnreadableFile):
    """A known format whose columns changed: the load stops and names the missing columns."""

    def __init__(self, path: str, fmt: str, missing: list[str]) -> None:
        self.missing = missing
        doc = FORMAT_DOCS.get(fmt)
        super().__init__(
            path,
            f"looks like {fmt} but lacks the column(s) {', '.join(missing)}",
            "export it again with these columns, or tell us the new column names"
            + (f"; {doc} lists the columns read" if doc else ""),
        )


@dataclass(frozen=True)
class StageCounts:
    """What one adapter produced from one file."""

    accepted: int = 0
    rejected: int = 0
    skipped: int = 0
    duplicates: int = 0  # records already stored (or repeated in the file), found before staging
    replaced: int = 0  # stored rows the load removed from the raw table to stage their re-merged form (OTLP)

    def __add__(self, other: StageCounts) -> StageCounts:
        return StageCounts(*(a + b for a, b in zip(astuple(self), astuple(other))))


GZIP_CHUNK = 1 << 16


class _Gunzip(io.RawIOBase):
    """A gzip stream read as `gunzip` reads it: every member in turn (an empty first member included).

    It never raises on bad data: a stream cut short, corrupt deflate data or bytes after the last
    member end the stream there and are reported through `problem(why)` (zero padding is allowed).
    """

    def __init__(self, raw: IO[bytes], problem) -> None:
        self._raw, self._problem = raw, problem
        self._d: zlib._Decompress | None = None  # None between members
        self._in, self._out, self._done, self._members = b"", b"", False, 0

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()

    def readinto(self, b) -> int:
        while not self._out and not self._done:
            self._fill()
        n = min(len(b), len(self._out))
        b[:n] = self._out[:n]
        self._out = self._out[n:]
        return n

    def _fill(self) -> None:
        if self._d is None:
            if not self._in:
                self._in = self._raw.read(GZIP_CHUNK)
            if not self._in:
                self._done = True
                return
            if self._members and not self._in.startswith(GZIP_MAGIC[:len(self._in)]):
                rest = self._in + self._raw.read()
                if rest.strip(b"\0"):
                    self._problem(f"{len(rest):,} bytes after the last gzip member are not gzip data and were not read")
                self._done = True
                return
            self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            self._members += 1
        if not self._in:
            self._in = self._raw.read(GZIP_CHUNK)
            if not self._in:
                self._problem("the gzip data is cut short (the file ends inside a compressed member)")
                self._done = True
                return
        try:
            out = self._d.decompress(self._in, GZIP_CHUNK * 4)
        except zlib.error as e:
            self._problem(f"the gzip data is corrupt ({e})")
            self._done = True
            return
        if self._d.eof:
            self._in = self._d.unused_data
            self._d = None
        else:
            self._in = self._d.unconsumed_tail
        self._out += out


_BLANK = b" \t\r\n"


@dataclass
class SourceFile:
    """A file to ingest: opened transparently whether plain or gzip, with a peek at its head.

    Whatever stops a file from being read in full (a gzip stream cut short, a JSON document that ends
    early) is noted with `incomplete(why)`; the load then records the file as `partial` with the reasons.
    """

    path: Path
    display: str = ""
    options: dict = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    # set by the load when it hashes the file while the adapter starts reading: raises when the content turns out
    # to be loaded already (see `before_first_write`)
    content_check: Callable[[], None] | None = None
    # set by the load when the run parsed this file ahead of it, while the files before it were staged: waits for
    # and returns the adapter's own result (see ingest/otlp.py `ParseAhead`), which it may use instead of reading
    read_ahead: Callable[[], object] | None = None

    def __post_init__(self) -> None:
        if not self.display:
            self.display = str(self.path)

    def before_first_write(self) -> None:
        """An adapter that reads ahead of writing (`SqlAdapter.reads_before_hash`) calls this before it writes
        anything into the store: it waits for the file's hash and stops the load when that content was loaded
        before. The load checks again before it commits, so an adapter that never calls it stays correct."""
        if self.content_check is not None:
            self.content_check()

    def incomplete(self, why: str) -> None:
        """Note a reason the file was not read in full (each reason once; an empty one is no reason)."""
        if why and why not in self.problems:
            self.problems.append(why)

    @cached_property
    def raw_head(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                return f.read(HEAD_BYTES)
        except OSError as e:
            raise UnreadableFile(self.display, f"cannot open: {e.strerror or e}") from e

    @property
    def compression(self) -> Literal["gzip"] | None:
        """Detected from the magic bytes, never from the file name."""
        return "gzip" if self.raw_head[:2] == GZIP_MAGIC else None

    @cached_property
    def _head_read(self) -> tuple[bytes, bool]:
        """(the first HEAD_BYTES of the content after leading blank lines, whether that is all of it).

        Leading blank lines of any length are passed over, so a file that starts with 300 KB of
        newlines is still recognised; a gzip stream that yields nothing readable is unreadable.
        """
        seen: list[str] = []
        try:
            f = self._open_binary(seen.append)
        except OSError as e:
            raise UnreadableFile(self.display, f"cannot open: {e.strerror or e}") from e
        with f:
            chunk = f.read(GZIP_CHUNK)
            lead = b""
            if chunk.startswith(b"\xef\xbb\xbf"):
                lead, chunk = b"\xef\xbb\xbf", chunk[3:]
            while chunk and not chunk.lstrip(_BLANK):
                chunk = f.read(GZIP_CHUNK)
            chunk = chunk.lstrip(_BLANK)
            buf = bytearray(lead + chunk)
            while chunk and len(buf) < HEAD_BYTES:
                chunk = f.read(HEAD_BYTES - len(buf))
                buf += chunk
            whole = not f.read(1)
        if seen and not buf.strip(_BLANK + b"\xef\xbb\xbf"):
            raise UnreadableFile(self.display, f"not a readable gzip file: {seen[0]}", "check the file is complete")
        return bytes(buf[:HEAD_BYTES]), whole

    @property
    def head(self) -> bytes:
        """The first bytes of the decompressed content (leading blank lines passed over)."""
        return self._head_read[0]

    @property
    def head_is_whole(self) -> bool:
        """True when `head` holds all the content there is."""
        return self._head_read[1]

    @cached_property
    def head_text(self) -> str:
        text = self.head.decode("utf-8", errors="replace")
        return text[1:] if text.startswith("\ufeff") else text

    def _open_binary(self, problem) -> IO[bytes]:
        f = open(self.path, "rb")
        if f.read(2) == GZIP_MAGIC:
            f.seek(0)
            return io.BufferedReader(_Gunzip(f, problem), GZIP_CHUNK)
        f.seek(0)
        return f

    def open_binary(self) -> IO[bytes]:
        """The content, decompressed when gzip; a damaged gzip ends early and marks the file incomplete."""
        return self._open_binary(self.incomplete)

    def open_text(self) -> IO[str]:
        """Text stream (UTF-8, BOM dropped); gzip is decompressed on the fly."""
        return io.TextIOWrapper(self.open_binary(), encoding="utf-8-sig", errors="replace", newline="")

    def text_lines(self, block: int = 16 * 1024 * 1024) -> Iterator[str]:
        """The lines `open_text` gives (each with its own ending: LF, CRLF or a bare CR; BOM dropped, bad bytes
        replaced), read `block` bytes at a time: about a third less time than a text stream for files of long lines."""
        with self.open_binary() as f:
            data = f.read(block)
            while data and len(data) < 3 and _BOM.startswith(data):  # a BOM is dropped at the very start only
                more = f.read(block)
                if not more:
                    break
                data += more
            if _BOM.startswith(data[:3]):  # the BOM, or the whole file a cut BOM (no text either)
                data = data[3:]
            pending: list[bytes] = []  # the line that runs past the blocks read so far, in pieces
            while data or (data := f.read(block)):
                cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
                if cut == len(data) - 1 and data[cut] == 13:  # a CR that may be the first half of a CRLF
                    cut = max(data.rfind(b"\n", 0, cut), data.rfind(b"\r", 0, cut))
                if cut < 0:
                    pending.append(data)
                else:
                    pending.append(data[:cut + 1])
                    yield from _decoded_lines(b"".join(pending))
                    pending = [data[cut + 1:]]
                data = b""
            if any(pending):
                yield from _decoded_lines(b"".join(pending))

    def read_bytes(self) -> bytes:
        with self.open_binary() as f:
            return f.read()

    def read_text(self) -> str:
        """The whole content as text (UTF-8, BOM dropped, bad bytes replaced)."""
        return self.read_bytes().decode("utf-8-sig", errors="replace")

    @property
    def is_empty(self) -> bool:
        return not self.head.strip(_BLANK + b"\xef\xbb\xbf")

    def first_json(self) -> object | None:
        """The first JSON value: the first line of JSON Lines, or the whole head of a JSON document."""
        text = self.head_text.lstrip()
        if not text or text[0] not in "[{":
            return None
        first_line = text.splitlines()[0]  # LF, CRLF or a bare CR ends it
        for candidate in (first_line, text):
            try:
                return json.loads(candidate)
            except (ValueError, RecursionError):
                continue
        return _json_prefix(text)

    def first_line(self) -> str:
        """The first line of the head (any of LF, CRLF or a bare CR ends it)."""
        text = self.head_text.lstrip("\r\n")
        return text.splitlines()[0] if text else ""

    def csv_delimiter(self) -> str:
        line = self.first_line()
        return "\t" if line.count("\t") > line.count(",") else ","

    def csv_header(self) -> list[str] | None:
        """The header row of a CSV file, stripped, or None when the file does not look like CSV."""
        text = self.head_text.lstrip("\r\n")
        if not text or text[0] in "[{":
            return None
        line = self.first_line()
        if "," not in line and "\t" not in line:
            return None
        try:
            row = next(csv.reader([line], delimiter=self.csv_delimiter()), None)
        except csv.Error:
            return None
        return [c.strip() for c in row] if row else None

    def locator(self, where: int | str) -> str:
        return f"{self.display}:{where}"


def csv_rows(f: IO[str], delimiter: str, width: Callable[[], int | None]) -> Iterator[tuple[int, list[str] | None, str]]:
    """(line number the row ends on, its fields or None, the problem) for each row of a CSV text stream.

    A row the csv module cannot read, or one whose quote runs over several lines into a row of the wrong
    width (one stray `"` would otherwise swallow what follows, up to the csv field limit), is reported on
    its first line alone, and the lines after it are read again as rows of their own. `width()` is the
    header's width (None before the header is read).
    """
    source = iter(f)
    pending: list[tuple[int, str]] = []  # lines to read again after a bad multi-line row
    taken: list[tuple[int, str]] = []  # the lines the current row was read from
    counter = [0]

    def lines() -> Iterator[str]:
        while True:
            if pending:
                item = pending.pop(0)
            else:
                line = next(source, None)
                if line is None:
                    return
                counter[0] += 1
                item = (counter[0], line)
            taken.append(item)
            yield item[1]

    while True:
        reader = csv.reader(lines(), delimiter=delimiter)
        restart = False
        while not restart:
            taken.clear()
            try:
                row = next(reader)
                error = ""
            except StopIteration:
                return
            except csv.Error as e:
                row, error = None, f"unreadable CSV row: {e}"
            if not taken:
                return
            start, end = taken[0][0], taken[-1][0]
            expected = width()
            multi = len(taken) > 1
            if multi and (row is None or (expected is not None and len(row) != expected)):
                why = error or f"a quote on line {start} runs on to line {end}"
                yield start, None, f"{why}; line {start} is rejected and the lines after it are read again"
                pending[:0] = taken[1:]
                restart = True  # a fresh reader: the old one is inside the runaway field
                continue
            yield end, row, error


def _json_prefix(text: str) -> object | None:
    """A JSON array cut at HEAD_BYTES: its first element, as a one-element list (enough to sniff)."""
    if not text.startswith("["):
        return None
    try:
        obj, _ = json.JSONDecoder().raw_decode(text[1:].lstrip())
    except (ValueError, RecursionError):
        return None
    return [obj]


@runtime_checkable
class Adapter(Protocol):
    """A reader for one source shape."""

    name: ClassVar[str]
    kind: ClassVar[Kind]

    def sniff(self, src: SourceFile) -> bool: ...


@runtime_checkable
class RecordAdapter(Adapter, Protocol):
    def parse(self, src: SourceFile) -> Iterator[Record]: ...


@runtime_checkable
class SqlAdapter(Adapter, Protocol):
    """May also set `stage_threads` (int): the DuckDB threads the load's connection keeps while it stages, when
    the adapter works on other cores of its own (the loader sets the connection's `threads` back afterwards); and
    `reads_before_hash` (True): the loader then hashes the file while `stage` starts reading, and the adapter calls
    `src.before_first_write()` before it writes into the store (a large file's parsing need not wait for its hash)."""

    def stage(self, con, src: SourceFile, load_id: str) -> StageCounts:
        """Insert into the temp tables `stage_calls` / `stage_billing` / `stage_rejects`."""
        ...
