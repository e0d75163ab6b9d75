"""Readers shared by the billing adapters: CSV, Parquet and JSON, each row behind one `Row` interface.

- `Row` gives column-insensitive access (see `billing_common.column_key`); nested JSON objects are
  flattened to dotted names, so `{"service": {"description": ...}}` and a CSV column
  `service.description` or `service_description` read the same.
- `open_table` reads CSV (comma or tab, plain or gzip) and Parquet; `read_json_values` reads one JSON
  document, a JSON array or JSON Lines, with floats kept exact as `Decimal`.
- `guarded` runs one row whole and turns a `RowError` into a `Reject`, so a bad row never stops the file.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from phaselens.models import Reject
from phaselens.models.records import truncate_raw

from . import jsonread
from .base import Record, SourceFile, UnreadableFile, csv_rows
from .billing_common import LineMaker, RowError, clean, column_key, require_columns
from .calls_common import json_lines

PARQUET_MAGIC = b"PAR1"


def flatten(obj: dict, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys (`{"sku": {"id": 1}}` -> `{"sku.id": 1, "sku": {"id": 1}}`); lists stay values.

    The object itself stays under its own key too, so a field that should hold a number but holds an
    object is seen (and rejected as not a number) instead of vanishing into child keys.
    """
    out: dict[str, Any] = {}
    stack = [(obj, prefix)]
    while stack:  # a loop, not recursion: deep nesting cannot overflow the stack
        node, pre = stack.pop()
        for k, v in node.items():
            key = f"{pre}{k}"
            if isinstance(v, dict) and v:
                stack.append((v, key + "."))
            out.setdefault(key, v)
    return out


@dataclass
class Row:
    """One input row with column-insensitive access; `where` is its locator suffix (line, row, path)."""

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


def parquet_file(src: SourceFile):
    """The pyarrow ParquetFile of `src` (gzip-wrapped files are decompressed in memory)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if src.compression == "gzip":
        return pq.ParquetFile(pa.BufferReader(src.read_bytes()))
    return pq.ParquetFile(src.path)


def is_parquet(src: SourceFile) -> bool:
    """Parquet files start with the magic bytes `PAR1`."""
    return src.head[:4] == PARQUET_MAGIC


def table_keys(src: SourceFile) -> set[str]:
    """Column keys of a CSV header or a Parquet schema, for sniffing; empty when neither."""
    if is_parquet(src):
        try:
            return {column_key(n) for n in parquet_file(src).schema_arrow.names}
        except Exception:  # noqa: BLE001 - a corrupt footer is simply not ours to claim
            return set()
    header = src.csv_header()
    return {column_key(c) for c in header} if header else set()


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
        """Rows after the header, located by the line they end on; blank lines are not rows."""
        names: list[str] | None = None
        keys: list[str] = []
        with src.open_text() as f:
            for line, fields, problem in csv_rows(f, delimiter, lambda: None if names is None else len(names)):
                where = str(line)
                if fields is None:  # an oversized field, a NUL byte, a stray quote: reject the row, read on
                    if names is not None:
                        yield Row({}, where, "", problem=problem)
                    continue
                if not fields or all(not x.strip() for x in fields):
                    continue
                if names is None:  # blank lines before the header are passed over
                    names = [n.strip() for n in fields]
                    keys = [column_key(n) for n in names]
                    continue
                if len(fields) != len(names):
                    yield Row({}, where, delimiter.join(fields),
                              problem=f"{len(fields)} fields where the header has {len(names)}")
                    continue
                values: dict[str, Any] = {}
                for key, field in zip(keys, fields):
                    values.setdefault(key, clean(field))
                yield Row(values, where, dict(zip(names, fields)))

    return Table(header, table_rows)


def read_json_values(src: SourceFile, source: str) -> Iterator[tuple[str, Any] | Reject]:
    """(locator suffix, value) for one JSON document, each element of a JSON array, or each JSON line.

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
            for n, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    yield str(n), jsonread.loads(line, parse_float=Decimal)
                except ValueError as e:
                    yield Reject(source=source, locator=src.locator(n), reason="malformed_json",
                                 detail=f"not valid JSON: {e}", raw=truncate_raw(line))
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


def json_head(src: SourceFile) -> Any:
    """The first JSON value of the file (first element when it is an array), or None."""
    obj = src.first_json()
    if isinstance(obj, list):
        return obj[0] if obj else None
    return obj


def guarded(src: SourceFile, source: str, where: str, raw: Callable[[], str], produce: Callable[[], Iterable[Record]]) -> Iterator[Record]:
    """Run one row's `produce()` whole: its records, or one `Reject` if it raised `RowError`."""
    try:
        out = list(produce())
    except RowError as e:
        yield Reject(source=source, locator=src.locator(where), reason=e.reason, detail=e.detail,
                     raw=_raw(raw))
        return
    except (ValueError, TypeError, ArithmeticError, RecursionError, KeyError, IndexError, AttributeError) as e:
        # a value no rule foresaw (a field of the wrong type, a number the store cannot hold): this row only
        reason = "bad_number" if isinstance(e, ArithmeticError) else "malformed_row"
        yield Reject(source=source, locator=src.locator(where), reason=reason,
                     detail=f"cannot read the row ({type(e).__name__}: {str(e)[:200]})", raw=_raw(raw))
        return
    yield from out


def _raw(raw: Callable[[], str]) -> str | None:
    try:
        return truncate_raw(raw())
    except (RecursionError, ValueError):
        return "[withheld: nested too deeply to show]"


def table_records(
    src: SourceFile, source: str, fmt: str, required: dict[str, tuple[str, ...]],
    produce: Callable[[Row, LineMaker], Iterable[Record]],
) -> Iterator[Record]:
    """Check a tabular file's columns, then `produce` each row's records (bad rows become rejects)."""
    table = open_table(src)
    require_columns(src, fmt, table.keys, required)
    maker = LineMaker(src, source)
    for row in table.rows():
        if row.problem:
            yield Reject(source=source, locator=src.locator(row.where), reason="malformed_row", detail=row.problem,
                         raw=truncate_raw(str(row.original)))
            continue
        yield from guarded(src, source, row.where, row.raw, lambda row=row: produce(row, maker))


def text_of(value: Any) -> str:
    """A value as text for JSON `raw` output."""
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


def bucket_results(
    src: SourceFile, source: str, handle: Callable[[dict, dict, str], Iterable[Record]]
) -> Iterator[Record]:
    """Walk API report pages (`data[]` buckets with `results[]`) and run `handle(result, bucket, where)` on each."""
    for item in read_json_values(src, source):
        if isinstance(item, Reject):
            yield item
            continue
        where, value = item
        pages = value if isinstance(value, list) else [value]
        for p, page in enumerate(pages):
            page_where = f"{where}[{p}]" if isinstance(value, list) else where
            # a page or bucket whose record list cannot be read is one reject, and the file was not read in full
            if not isinstance(page, dict) or not isinstance(page.get("data"), list):
                src.incomplete("a report page without a `data` list: its results were not read")
                yield Reject(source=source, locator=src.locator(page_where), reason="malformed_row",
                             detail="not a report page: no `data` list", raw=truncate_raw(text_of(page)))
                continue
            for b, bucket in enumerate(page["data"]):
                results = bucket.get("results") if isinstance(bucket, dict) else None
                if not isinstance(results, list):
                    src.incomplete("a bucket without a `results` list: its results were not read")
                    yield Reject(source=source, locator=src.locator(f"{page_where}#data[{b}]"),
                                 reason="malformed_row", detail="bucket without a `results` list",
                                 raw=truncate_raw(text_of(bucket)))
                    continue
                for r, result in enumerate(results):
                    at = f"{page_where}#data[{b}].results[{r}]"
                    if not jsonread.is_whole(result):
                        yield Reject(source=source, locator=src.locator(at), reason="malformed_json",
                                     detail="the result is cut short where the document breaks",
                                     raw=_raw(lambda result=result: text_of(result)))
                        continue
                    yield from guarded(src, source, at, lambda result=result: text_of(result),
                                       lambda result=result, bucket=bucket, at=at: handle(result, bucket, at))
