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
import gzip
import io
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import IO, ClassVar, Literal, Protocol, runtime_checkable

from phaselens.models import BillingLine, LlmCall, Reject, Skip

Record = LlmCall | BillingLine | Reject | Skip
Kind = Literal["calls", "billing"]

HEAD_BYTES = 256 * 1024
GZIP_MAGIC = b"\x1f\x8b"


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


@dataclass
class SourceFile:
    """A file to ingest: opened transparently whether plain or gzip, with a peek at its head."""

    path: Path
    display: str = ""
    options: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.display:
            self.display = str(self.path)

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
    def head(self) -> bytes:
        """The first bytes of the decompressed content."""
        if self.compression != "gzip":
            return self.raw_head
        try:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            return d.decompress(self.raw_head, HEAD_BYTES)
        except zlib.error as e:
            raise UnreadableFile(self.display, f"not a readable gzip file ({e})", "check the file is complete") from e

    @cached_property
    def head_text(self) -> str:
        text = self.head.decode("utf-8", errors="replace")
        return text[1:] if text.startswith("\ufeff") else text

    def open_binary(self) -> IO[bytes]:
        if self.compression == "gzip":
            return gzip.open(self.path, "rb")
        return open(self.path, "rb")

    def open_text(self) -> IO[str]:
        """Text stream (UTF-8, BOM dropped); gzip is decompressed on the fly."""
        return io.TextIOWrapper(self.open_binary(), encoding="utf-8-sig", errors="replace", newline="")

    def read_bytes(self) -> bytes:
        with self.open_binary() as f:
            try:
                return f.read()
            except (OSError, EOFError, zlib.error) as e:
                raise UnreadableFile(self.display, f"not a readable gzip file ({e})", "check the file is complete") from e

    @property
    def is_empty(self) -> bool:
        return not self.head.strip()

    def first_json(self) -> object | None:
        """The first JSON value: the first line of JSON Lines, or the whole head of a JSON document."""
        text = self.head_text.lstrip()
        if not text or text[0] not in "[{":
            return None
        first_line = text.split("\n", 1)[0]
        for candidate in (first_line, text):
            try:
                return json.loads(candidate)
            except ValueError:
                continue
        return _json_prefix(text)

    def csv_header(self) -> list[str] | None:
        """The header row of a CSV file, stripped, or None when the file does not look like CSV."""
        text = self.head_text.lstrip("\r\n")
        if not text or text[0] in "[{":
            return None
        line = text.split("\n", 1)[0].rstrip("\r")
        if "," not in line and "\t" not in line:
            return None
        dialect_delim = "\t" if line.count("\t") > line.count(",") else ","
        row = next(csv.reader([line], delimiter=dialect_delim), None)
        return [c.strip() for c in row] if row else None

    def locator(self, where: int | str) -> str:
        return f"{self.display}:{where}"


def _json_prefix(text: str) -> object | None:
    """A JSON array cut at HEAD_BYTES: its first element, as a one-element list (enough to sniff)."""
    if not text.startswith("["):
        return None
    try:
        obj, _ = json.JSONDecoder().raw_decode(text[1:].lstrip())
    except ValueError:
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
    def stage(self, con, src: SourceFile, load_id: str) -> StageCounts:
        """Insert into the temp tables `stage_calls` / `stage_billing` / `stage_rejects`."""
        ...
