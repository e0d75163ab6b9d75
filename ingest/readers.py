"""Reading a file's records: CSV (comma or tab, plain or gzip), JSON (one document, an array, `{"data": [...]}`
or JSON Lines) and Parquet, each record with the locator of where it is; and the loops that run an adapter's
code on one record at a time, so a `RecordError` (or a value no rule foresaw) becomes a `Reject` for that record
and the file goes on.

Call sources and billing exports read records two ways:

- call sources take each record as written: `iter_records` (JSON or CSV, told apart by the first character),
  `iter_json_records` and `iter_csv_records` yield `(index, locator suffix, record)`, the record a dict or the
  `Reject` that stands for it, and `build_all` runs the adapter's builder on each. A reject's `raw` never holds
  prompt or completion text (`safe_raw`). Record ids that the source does not give hash the file's content
  (`file_fingerprint`), so a renamed or re-compressed file dedupes.
- billing exports are read by column, whatever its casing or separator: `open_table` (CSV or Parquet) gives
  `Row`s, `read_json_values` gives JSON values with numbers kept exact, and `guarded` runs one row's code.

A cut JSON document keeps its whole records, rejects the cut one and marks the file as not read in full.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from phaselens.models import LlmCall, Reject, Skip
from phaselens.models.records import RejectReason, truncate_raw

from . import jsonread
from .base import Record, SchemaMismatch, SourceFile, UnreadableFile, csv_rows
from .values import RecordError, clean, column_key, flatten, is_blank

PARQUET_MAGIC = b"PAR1"
_HASH_CHUNK = 1 << 20
WITHHELD = "[withheld: nested too deeply to show]"

# Keys whose (non-numeric) values carry prompt or completion text: dropped from every reject's `raw`.
TEXT_KEYS = frozenset({
    "messages", "response", "proxy_server_request", "input", "output", "prompt", "completion",
    "GEN_TEXT", "generated_text", "generated_texts", "request_body", "response_body", "body",
    "content", "text", "signed_body_url",
})

# What a record's code may raise on a value no rule foresaw (a field of the wrong type, a number the store
# cannot hold): that record alone is rejected. Caught after `RecordError`, which is a ValueError too.
UNFORESEEN = (ValueError, TypeError, ArithmeticError, RecursionError, KeyError, IndexError, AttributeError)


def _unforeseen_reason(e: BaseException) -> RejectReason:
    return "bad_number" if isinstance(e, ArithmeticError) else "malformed_row"


# ---------------------------------------------------------------- the file


def file_fingerprint(src: SourceFile) -> str:
    """First 16 hex digits of the SHA-256 of the file's decompressed content (not its name or path)."""
    h = hashlib.sha256()
    with src.open_binary() as f:
        for chunk in iter(lambda: f.read(_HASH_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def hashed_call_id(source: str, fingerprint: str, index: int | str) -> str:
    """`<source>:<content fingerprint>:<record index>`: stable across re-loads and renames."""
    return f"{source}:{fingerprint}:{index}"


def option_text(src: SourceFile, key: str) -> str | None:
    """A non-blank string option given to the load (e.g. `provider`, `model`), else None."""
    value = src.options.get(key)
    return str(value) if not is_blank(value) else None


def file_label(src: SourceFile) -> str:
    """The file's stem without compression/format suffixes: a label only, never used to detect a format."""
    name = src.path.name
    for suffix in (".gz", ".jsonl", ".ndjson", ".json", ".csv"):
        name = name[: -len(suffix)] if name.lower().endswith(suffix) else name
    return name


def is_parquet(src: SourceFile) -> bool:
    """Parquet files start with the magic bytes `PAR1`."""
    return src.head[:4] == PARQUET_MAGIC


def parquet_file(src: SourceFile):
    """The pyarrow ParquetFile of `src` (gzip-wrapped files are decompressed in memory)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if src.compression == "gzip":
        return pq.ParquetFile(pa.BufferReader(src.read_bytes()))
    return pq.ParquetFile(src.path)


def table_keys(src: SourceFile) -> set[str]:
    """Column keys (see `column_key`) of a CSV header or a Parquet schema, for sniffing; empty when neither."""
    if is_parquet(src):
        try:
            return {column_key(n) for n in parquet_file(src).schema_arrow.names}
        except Exception:  # noqa: BLE001 - a corrupt footer is simply not ours to claim
            return set()
    header = src.csv_header()
    return {column_key(c) for c in header} if header else set()


def require_columns(src: SourceFile, fmt: str, keys: set[str], required: dict[str, tuple[str, ...]]) -> None:
    """Raise `SchemaMismatch` naming each required column (by its first alias) that the file lacks."""
    missing = [name for name, aliases in required.items() if not any(column_key(a) in keys for a in (name, *aliases))]
    if missing:
        raise SchemaMismatch(src.display, fmt, missing)


def json_head(src: SourceFile) -> Any:
    """The first JSON value of the file (first element when it is an array), or None."""
    obj = src.first_json()
    if isinstance(obj, list):
        return obj[0] if obj else None
    return obj


def peek_record(src: SourceFile) -> dict | None:
    """The first record of a JSON array / `{"data": [...]}` / JSON Lines file, read from its head only."""
    text = src.head_text.lstrip()
    if not text or text[0] not in "[{":
        return None
    first = src.first_json()
    if isinstance(first, list):
        return first[0] if first and isinstance(first[0], dict) else None
    if isinstance(first, dict):
        data = first.get("data")
        if isinstance(data, list):
            return data[0] if data and isinstance(data[0], dict) else None
        return first
    start = text.find("[", text.find('"data"')) if text[0] == "{" and '"data"' in text else -1
    if start < 0:  # else: a large {"data": [...]} document cut at the head
        return None
    try:
        rec, _ = json.JSONDecoder().raw_decode(text[start + 1:].lstrip())
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


def peek_columns(src: SourceFile) -> set[str]:
    """The field names of the first record: JSON keys, or the CSV header."""
    rec = peek_record(src)
    return set(rec) if rec is not None else set(src.csv_header() or ())


# ---------------------------------------------------------------- rejects


def text_of(value: Any) -> str:
    """A value as text for JSON `raw` output."""
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


def raw_of(raw: Callable[[], str | None]) -> str | None:
    """`raw()` truncated for a reject's `raw` column; withheld when the value is nested too deeply to render."""
    try:
        return truncate_raw(raw())
    except (RecursionError, ValueError):
        return WITHHELD


def safe_raw(record: Any) -> str | None:
    """A record for `rejects.raw`: text-bearing keys removed at any depth, then truncated."""

    def scrub(obj: Any) -> Any:
        if isinstance(obj, dict):
            numeric = (int, float, type(None))
            return {k: scrub(v) for k, v in obj.items() if k not in TEXT_KEYS or isinstance(v, numeric)}
        return [scrub(v) for v in obj[:50]] if isinstance(obj, list) else obj

    if record is None:
        return None
    return raw_of(lambda: json.dumps(scrub(record), default=str, ensure_ascii=False))


def reject(src: SourceFile, source: str, where: int | str, reason: str, detail: str, raw: Any = None) -> Reject:
    """A `Reject` for the record at `where`, with its raw form scrubbed of prompt/completion text."""
    return Reject(source=source, locator=src.locator(where), reason=reason, detail=detail[:300], raw=safe_raw(raw))


# ---------------------------------------------------------------- CSV


def csv_records(src: SourceFile) -> Iterator[tuple[str, list[str] | None, list[str] | None, str]]:
    """(locator suffix, header names, fields, problem) for each row of a CSV file after its header.

    A row is located by the line it ends on. Blank lines are not rows; the first other row is the header
    (names stripped). A row that cannot be read (an oversized field, a NUL byte, a stray quote that would
    run on over the next lines) comes with fields None and the problem (see `base.csv_rows`), also before
    the header, where names is None.
    """
    delimiter = src.csv_delimiter()
    names: list[str] | None = None
    with src.open_text() as f:
        for line, fields, problem in csv_rows(f, delimiter, lambda: None if names is None else len(names)):
            if fields is None:
                yield str(line), names, None, problem
                continue
            if not fields or all(not x.strip() for x in fields):
                continue
            if names is None:
                names = [c.strip() for c in fields]
                continue
            yield str(line), names, fields, ""


# ---------------------------------------------------------------- records of call sources

IndexedRecord = tuple[int, str, Any]  # (index, locator suffix, record): the record is a dict, or a Reject
Builder = Callable[[dict, int, str], "LlmCall | Skip | Iterable[LlmCall | Skip]"]


def _json_line_values(text: str, parse_float=None) -> Iterator[tuple[int, str, Any, ValueError | None]]:
    """(line number, line, value, error) for each non-blank line of JSON Lines text."""
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = jsonread.loads(line, parse_float=parse_float)
        except ValueError as e:
            yield n, line, None, e
            continue
        yield n, line, value, None


def json_lines(text: str) -> bool:
    """True when the text reads as JSON Lines: its first line is a JSON value, or (the first being bad)
    another of its first lines is a whole JSON object."""
    lines = [line.strip() for line in text.lstrip().splitlines()[:200] if line.strip()]
    if not lines:
        return False
    try:
        jsonread.loads(lines[0])
        return True
    except ValueError:
        pass
    # the first line is bad: JSON Lines still when most other lines are whole objects (in a pretty-printed
    # document only a few inner lines happen to be)
    rest = lines[1:50]
    whole = 0
    for line in rest:
        if line.startswith("{") and line.endswith("}"):
            try:
                whole += isinstance(jsonread.loads(line), dict)
            except ValueError:
                continue
    return whole > 0 and whole * 2 >= len(rest)


def iter_json_records(src: SourceFile, source: str) -> Iterator[IndexedRecord]:
    """Records of a JSON array, `{"data": [...]}`, a single object or JSON Lines, each with its locator.

    A JSON document cut short (or broken part way) keeps the whole records before the break, rejects
    the cut one as `malformed_json` and marks the file as not read in full; a bad JSON Lines line is
    rejected alone.
    """
    with src.open_text() as f:
        text = f.read()
    stripped = text.lstrip()
    try:
        doc = jsonread.loads(stripped)
    except ValueError:
        doc = None
        if stripped[:1] == "[" or (stripped[:1] == "{" and not json_lines(text)):
            cut = jsonread.salvage(stripped)
            src.incomplete(cut.why)
            doc = cut.value
            if doc is None:
                yield 0, "1", reject(src, source, 1, "malformed_json", cut.why)
                return
            if cut.why:  # empty: the document is whole, only nested deeper than the standard decoder reads
                yield -1, f"@{cut.position}", reject(
                    src, source, f"@{cut.position}", "malformed_json", f"{cut.why}: what follows is not read")
    if isinstance(doc, dict):
        data = doc.get("data")
        if isinstance(data, list):
            yield from _whole_records(src, source, data, "data[{}]")
        elif jsonread.is_whole(doc):
            yield 0, "1", doc
        else:
            yield 0, "1", reject(src, source, 1, "malformed_json", "the record is cut short", doc)
        return
    if isinstance(doc, list):
        yield from _whole_records(src, source, doc, "[{}]")
        return
    for n, _, value, error in _json_line_values(text):
        if error is None:
            yield n, str(n), value
        else:
            yield n, str(n), reject(src, source, n, "malformed_json", f"line is not JSON: {error}")


def _whole_records(src: SourceFile, source: str, records: list, where: str) -> Iterator[IndexedRecord]:
    for i, rec in enumerate(records):
        at = where.format(i)
        if jsonread.is_whole(rec):
            yield i, at, rec
        else:
            yield i, at, reject(src, source, at, "malformed_json", "the record is cut short where the document breaks", rec)


def iter_csv_records(src: SourceFile, source: str) -> Iterator[IndexedRecord]:
    """Rows of a CSV file as dicts (header names stripped), indexed from 0, located by line number.

    Blank lines before the header are passed over; a row that cannot be read (an oversized field, a
    stray quote that would run on over the next lines) or with the wrong number of fields is rejected
    alone (see `csv_records`).
    """
    i = 0
    for where, names, fields, problem in csv_records(src):
        if fields is None:
            yield i, where, reject(src, source, where, "malformed_row", problem)
        elif len(fields) != len(names):
            yield i, where, reject(src, source, where, "malformed_row",
                                   f"row does not have the header's {len(names)} fields", dict(zip(names, fields)))
        else:
            yield i, where, dict(zip(names, fields))
        i += 1


def iter_records(src: SourceFile, source: str) -> Iterator[IndexedRecord]:
    """JSON or CSV records of a file, told apart by its first character."""
    first = src.head_text.lstrip()[:1]
    return iter_json_records(src, source) if first in "[{" else iter_csv_records(src, source)


def build_all(
    src: SourceFile, source: str, rows: Iterable[IndexedRecord], build: Builder
) -> Iterator[LlmCall | Skip | Reject]:
    """Run `build(record, index, locator)` over rows; a `RecordError` or a non-object record becomes a Reject."""
    for index, where, rec in rows:
        if isinstance(rec, Reject):
            yield rec
            continue
        if not isinstance(rec, dict):
            yield reject(src, source, where, "malformed_row", f"expected an object, got {type(rec).__name__}", rec)
            continue
        try:
            out = build(rec, index, src.locator(where))
            out = [out] if isinstance(out, (LlmCall, Skip)) else list(out)
        except RecordError as e:
            yield reject(src, source, where, e.reason, e.detail, rec)
            continue
        except UNFORESEEN as e:
            yield reject(src, source, where, _unforeseen_reason(e), f"cannot read the record ({type(e).__name__}: {e})",
                         rec)
            continue
        yield from out


# ---------------------------------------------------------------- rows of billing exports


@dataclass
class Row:
    """One input row with column-insensitive access; `where` is its locator suffix (line, row, path).

    Nested JSON objects are flattened to dotted names, so `{"service": {"description": ...}}` and a CSV
    column `service.description` or `service_description` read the same.
    """

    values: dict[str, Any]
    where: str
    original: Any = None
    problem: str | None = None

    @classmethod
    def of(cls, mapping: dict, where: str, original: Any = None) -> Row:
        """A row from a (possibly nested) mapping; NULL-like strings become None."""
        values: dict[str, Any] = {}
        for k, v in flatten(mapping).items():
            values.setdefault(column_key(str(k)), clean(v))
        return cls(values, where, mapping if original is None else original)

    def get(self, *names: str) -> Any:
        """The first non-empty value among the given column names (any casing or separator)."""
        for name in names:
            v = self.values.get(column_key(name))
            if v is not None:
                return v
        return None

    def text(self, *names: str) -> str | None:
        """Like `get`, as a string."""
        v = self.get(*names)
        return None if v is None else str(v)

    def raw(self) -> str:
        """The row as JSON text, for a reject's `raw` column."""
        return json.dumps(self.original, default=str, ensure_ascii=False)


@dataclass
class Table:
    """A tabular file: its column names and a way to iterate its rows."""

    columns: list[str]
    rows: Callable[[], Iterator[Row]]

    @property
    def keys(self) -> set[str]:
        """The column keys (see `column_key`) of the file's columns."""
        return {column_key(c) for c in self.columns}


def open_table(src: SourceFile) -> Table:
    """Read CSV (comma or tab) or Parquet; CSV locators are line numbers, Parquet ones row numbers."""
    if is_parquet(src):
        try:
            pf = parquet_file(src)
        except Exception as e:  # noqa: BLE001
            raise UnreadableFile(src.display, f"not a readable Parquet file ({e})", "check the file is complete") from e

        def parquet_rows() -> Iterator[Row]:
            """Rows in batches of 8,192, numbered from 1; a row group that cannot be decoded marks the file partial."""
            n = 0
            for group in range(pf.num_row_groups):
                start = n
                try:
                    for batch in pf.iter_batches(batch_size=8192, row_groups=[group]):
                        recs = batch.to_pylist()
                        for rec in recs:
                            n += 1
                            yield Row.of(rec, str(n))
                except Exception as e:  # noqa: BLE001 - pyarrow raises OSError, ArrowInvalid ... on corrupt pages
                    rows = pf.metadata.row_group(group).num_rows
                    src.incomplete(f"row group {group + 1} (rows {start + 1} to {start + rows}) is corrupt and was "
                                   f"not read in full ({type(e).__name__}: {str(e)[:160]})")
                    n = start + rows
                    continue
                rows = pf.metadata.row_group(group).num_rows
                if n - start < rows:  # a corrupt column chunk can end the batches early without an error
                    src.incomplete(f"row group {group + 1} (rows {start + 1} to {start + rows}) is corrupt: "
                                   f"{n - start:,} of its {rows:,} rows could be read")
                    n = start + rows

        return Table(list(pf.schema_arrow.names), parquet_rows)
    header = src.csv_header() or []
    delimiter = src.csv_delimiter()

    def table_rows() -> Iterator[Row]:
        """Rows after the header (see `csv_records`); an unreadable row before the header is passed over."""
        keys: list[str] | None = None
        for where, names, fields, problem in csv_records(src):
            if fields is None:  # an oversized field, a NUL byte, a stray quote: reject the row, read on
                if names is not None:
                    yield Row({}, where, "", problem=problem)
                continue
            if len(fields) != len(names):
                yield Row({}, where, delimiter.join(fields),
                          problem=f"{len(fields)} fields where the header has {len(names)}")
                continue
            if keys is None:
                keys = [column_key(n) for n in names]
            values: dict[str, Any] = {}
            for key, field in zip(keys, fields):
                values.setdefault(key, clean(field))
            yield Row(values, where, dict(zip(names, fields)))

    return Table(header, table_rows)


def read_json_values(src: SourceFile, source: str) -> Iterator[tuple[str, Any] | Reject]:
    """(locator suffix, value) for one JSON document, each element of a JSON array, or each JSON line;
    floats are kept exact as `Decimal`.

    A document cut short or broken part way yields what is whole before the break (cut objects and
    arrays as `jsonread.PartialDict` / `PartialList`, for the caller to reject), one `malformed_json`
    reject at the break, and marks the file as not read in full.
    """
    text = src.read_text()
    if not text.strip():
        return
    try:
        doc = jsonread.loads(text, parse_float=Decimal)
    except ValueError:
        if json_lines(text):
            for n, line, value, error in _json_line_values(text, parse_float=Decimal):
                if error is None:
                    yield str(n), value
                else:
                    yield Reject(source=source, locator=src.locator(n), reason="malformed_json",
                                 detail=f"not valid JSON: {error}", raw=truncate_raw(line))
            return
        cut = jsonread.salvage(text, parse_float=Decimal)
        if cut.why:  # empty: the document is whole, only nested deeper than the standard decoder reads
            src.incomplete(cut.why)
            yield Reject(source=source, locator=src.locator(f"@{cut.position}"), reason="malformed_json",
                         detail=f"{cut.why}: what follows is not read",
                         raw=truncate_raw(text[max(cut.position - 200, 0):cut.position + 200]))
        doc = cut.value
        if doc is None:
            return
    if isinstance(doc, list):
        for i, item in enumerate(doc):
            yield f"[{i}]", item
    else:
        yield "1", doc


def guarded(
    src: SourceFile, source: str, where: str, raw: Callable[[], str], produce: Callable[[], Iterable[Record]]
) -> Iterator[Record]:
    """Run one row's `produce()` whole: its records, or one `Reject` if it raised `RecordError`."""
    try:
        out = list(produce())
    except RecordError as e:
        yield Reject(source=source, locator=src.locator(where), reason=e.reason, detail=e.detail, raw=raw_of(raw))
        return
    except UNFORESEEN as e:
        yield Reject(source=source, locator=src.locator(where), reason=_unforeseen_reason(e),
                     detail=f"cannot read the row ({type(e).__name__}: {str(e)[:200]})", raw=raw_of(raw))
        return
    yield from out
