"""Shared helpers of the call adapters (gateways, benchmarks, request traces), so all do it one way:
records from JSON arrays, `{"data": [...]}`, JSON Lines or CSV, each with a locator and a `Reject`
(never an exception) when unusable; times to naive UTC; numbers, tokens and money with the right reject
reason; the timing rules of design §5 (`derive_timing`); stable call ids (the source's own id, else a
hash of the file's content plus the record index, so a renamed or re-compressed file dedupes); and
`safe_raw`, which keeps prompt and completion text out of a reject's `raw` column.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import math
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from phaselens.models import LlmCall, Reject, Skip
from phaselens.models.records import truncate_raw
from phaselens.models.vocabulary import itl_per_token

from . import jsonread
from .base import SourceFile, csv_rows

UNKNOWN_MODEL = "unknown"
"""Model label for token-shape sources that name no model (request traces, some benchmarks)."""

# Keys whose (non-numeric) values carry prompt or completion text: dropped from every reject's `raw`.
TEXT_KEYS = frozenset({
    "messages", "response", "proxy_server_request", "input", "output", "prompt", "completion",
    "GEN_TEXT", "generated_text", "generated_texts", "request_body", "response_body", "body",
    "content", "text", "signed_body_url",
})

_EPOCH = datetime(1970, 1, 1)
# Upper bounds past which a value cannot be real (and would overflow the store's columns): rejected as bad_number.
MAX_TOKENS = 10**12  # tokens in one call
MAX_SECONDS = 1e7  # about 116 days for one call's duration
MAX_USD = Decimal(10) ** 12  # dollars for one call
_HASH_CHUNK = 1 << 20


class RecordError(Exception):
    """One record cannot be used; the record loop turns it into a `Reject` with this reason."""

    def __init__(self, reason: str, detail: str) -> None:
        self.reason, self.detail = reason, detail
        super().__init__(f"{reason}: {detail}")


# ---------------------------------------------------------------- values


def is_blank(value: Any) -> bool:
    """True for None, empty strings and the literal `null`/`NULL`/`None` CSV exports write."""
    return value is None or (isinstance(value, str) and value.strip() in ("", "null", "NULL", "None"))


def to_float(value: Any, field: str) -> float | None:
    """A number (int, float or numeric string) as float; None when blank; `bad_number` otherwise."""
    if is_blank(value):
        return None
    if isinstance(value, bool):
        raise RecordError("bad_number", f"{field} is a boolean, not a number")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise RecordError("bad_number", f"{field} is not a number: {str(value)[:40]!r}") from None
    if not math.isfinite(out):
        raise RecordError("bad_number", f"{field} is not finite: {value!r}")
    return out


def to_tokens(value: Any, field: str) -> int | None:
    """A token count (whole, ≥ 0) as int; None when blank; `bad_number` / `negative_tokens` otherwise."""
    f = to_float(value, field)
    if f is None:
        return None
    if f != int(f):
        raise RecordError("bad_number", f"{field} is not a whole number of tokens: {value!r}")
    if f < 0:
        raise RecordError("negative_tokens", f"{field} = {value!r}")
    if f > MAX_TOKENS:
        raise RecordError("bad_number", f"{field} = {str(value)[:40]} is out of range (above {MAX_TOKENS:.0e} tokens)")
    return int(f)


def to_seconds(value: Any, field: str, *, per_second: float = 1.0) -> float | None:
    """A duration given in units of 1/`per_second` s (1000 for ms) as seconds; negative -> `bad_number`."""
    f = to_float(value, field)
    if f is None:
        return None
    if f < 0:
        raise RecordError("bad_number", f"{field} is a negative duration: {value!r}")
    if f / per_second > MAX_SECONDS:
        raise RecordError("bad_number", f"{field} = {str(value)[:40]} is out of range (above {MAX_SECONDS:.0e} s)")
    return f / per_second


def to_usd(value: Any, field: str, *, divisor: int = 1) -> Decimal | None:
    """Money as Decimal USD (exact decimal of the written number, divided by `divisor`); None when blank."""
    if is_blank(value):
        return None
    try:
        out = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise RecordError("bad_number", f"{field} is not an amount: {str(value)[:40]!r}") from None
    if not out.is_finite():
        raise RecordError("bad_number", f"{field} is not finite: {value!r}")
    out = out / divisor if divisor != 1 else out
    if abs(out) > MAX_USD:
        raise RecordError("bad_number", f"{field} = {str(value)[:40]} is out of range (above {MAX_USD:.0e} USD)")
    return out


def parse_time(value: Any, field: str) -> datetime | None:
    """An ISO 8601 string or epoch number (s, ms, µs or ns by magnitude) as a naive UTC datetime."""
    if is_blank(value):
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return from_epoch(value, field)
    text = str(value).strip()
    if text.replace(".", "", 1).isdigit():
        return from_epoch(float(text) if "." in text else int(text), field)
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise RecordError("bad_timestamp", f"{field} is not an ISO 8601 time: {text[:40]!r}") from None
    if dt.tzinfo is not None:
        dt = dt.astimezone(UTC).replace(tzinfo=None)
    return dt


def from_epoch(value: float | int, field: str = "timestamp") -> datetime:
    """Epoch seconds, ms, µs or ns (told apart by magnitude) as a naive UTC datetime."""
    v = abs(value)
    if isinstance(value, int) and v >= 10**17:  # nanoseconds, kept exact
        return _EPOCH + timedelta(microseconds=value // 1000)
    scale = 1e9 if v >= 1e17 else 1e6 if v >= 1e14 else 1e3 if v >= 1e11 else 1.0
    try:
        return _EPOCH + timedelta(seconds=value / scale)
    except OverflowError:
        raise RecordError("bad_timestamp", f"{field} is out of range: {value!r}") from None


def seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    """`end − start` in seconds, or None when either is missing."""
    return None if start is None or end is None else (end - start).total_seconds()


def text_or_none(value: Any) -> str | None:
    """A non-blank scalar as a stripped string, else None. An object or array where text belongs is not
    text: it reads as absent (so each field's rule for a missing value applies), never as its repr, which
    for a deeply nested value overflows the stack."""
    if isinstance(value, dict | list | tuple):
        return None
    return None if is_blank(value) else str(value).strip()


def after(start: datetime | None, seconds: float | None) -> datetime | None:
    """`start + seconds`, or None when either is missing (e.g. the first-token time from TTFT)."""
    return None if start is None or seconds is None else start + timedelta(seconds=seconds)


def json_cell(value: Any) -> Any:
    """A CSV cell holding JSON (or a ClickHouse map literal) as a Python value; other values unchanged."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text or text[0] not in "[{":
        return value
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:  # ClickHouse writes Map(String, String) as {'k':'v'}
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return value


def as_dict(value: Any) -> dict:
    """A dict from a dict or a JSON-string cell; anything else becomes `{}`."""
    value = json_cell(value)
    return value if isinstance(value, dict) else {}


def dig(obj: Any, path: str) -> Any:
    """`obj["a"]["b"]` for `path` "a.b"; a key that itself contains dots is tried whole first."""
    if isinstance(obj, dict) and path in obj:
        return obj[path]
    head, _, rest = path.partition(".")
    if not rest or not isinstance(obj, dict):
        return None
    return dig(as_dict(obj.get(head)), rest)


def first_of(obj: Any, paths: Iterable[str]) -> Any:
    """The first non-blank value among `paths` (see `dig`), or None."""
    for path in paths:
        value = dig(obj, path)
        if not is_blank(value):
            return value
    return None


def attrs_json(attrs: dict[str, Any]) -> str | None:
    """Leftover attributes as compact, key-sorted JSON, without blank values; None when empty."""
    kept = {k: v for k, v in attrs.items() if not is_blank(v) and v != {} and v != []}
    return json.dumps(kept, sort_keys=True, default=str, separators=(",", ":")) if kept else None


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0–100) with linear interpolation between closest ranks, as numpy's default."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), min(math.floor(pos) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


# ---------------------------------------------------------------- timing


def derive_timing(e2e_s: float | None, ttft_s: float | None, output_tokens: int | None) -> dict[str, Any]:
    """LlmCall timing fields (seconds) from e2e and TTFT: prefill = TTFT, decode = e2e − TTFT, ITL per token.

    A TTFT longer than the whole call cannot be a first-token time; it is dropped here and the caller
    keeps the source's value in `attributes_json`.
    """
    if ttft_s is not None and e2e_s is not None and ttft_s > e2e_s:
        ttft_s = None
    decode_s = e2e_s - ttft_s if e2e_s is not None and ttft_s is not None else None
    itl_s = itl_per_token(decode_s, output_tokens)
    return {"e2e_s": e2e_s, "ttft_s": ttft_s, "prefill_s": ttft_s, "decode_s": decode_s, "itl_s": itl_s,
            "timing_source": "measured" if ttft_s is not None else "none"}


# ---------------------------------------------------------------- identity


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


# ---------------------------------------------------------------- rejects


def safe_raw(record: Any) -> str | None:
    """A record for `rejects.raw`: text-bearing keys removed at any depth, then truncated."""

    def scrub(obj: Any) -> Any:
        if isinstance(obj, dict):
            numeric = (int, float, type(None))
            return {k: scrub(v) for k, v in obj.items() if k not in TEXT_KEYS or isinstance(v, numeric)}
        return [scrub(v) for v in obj[:50]] if isinstance(obj, list) else obj

    if record is None:
        return None
    try:
        return truncate_raw(json.dumps(scrub(record), default=str, ensure_ascii=False))
    except (RecursionError, ValueError):
        return "[withheld: nested too deeply to show]"


def reject(src: SourceFile, source: str, where: int | str, reason: str, detail: str, raw: Any = None) -> Reject:
    """A `Reject` for the record at `where`, with its raw form scrubbed of prompt/completion text."""
    return Reject(source=source, locator=src.locator(where), reason=reason, detail=detail[:300], raw=safe_raw(raw))


# ---------------------------------------------------------------- reading records


Row = tuple[int, str, Any]  # (index, locator suffix, record) — record is a dict, or a Reject
Builder = Callable[[dict, int, str], "LlmCall | Skip | Iterable[LlmCall | Skip]"]


def iter_json_records(src: SourceFile, source: str) -> Iterator[Row]:
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
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield n, str(n), jsonread.loads(line)
        except ValueError as e:
            yield n, str(n), reject(src, source, n, "malformed_json", f"line is not JSON: {e}")


def _whole_records(src: SourceFile, source: str, records: list, where: str) -> Iterator[Row]:
    for i, rec in enumerate(records):
        at = where.format(i)
        if jsonread.is_whole(rec):
            yield i, at, rec
        else:
            yield i, at, reject(src, source, at, "malformed_json", "the record is cut short where the document breaks", rec)


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


def iter_csv_records(src: SourceFile, source: str) -> Iterator[Row]:
    """Rows of a CSV file as dicts (header names stripped), indexed from 0, located by line number.

    Blank lines before the header are passed over; a row that cannot be read (an oversized field, a
    stray quote that would run on over the next lines) or with the wrong number of fields is rejected
    alone (see `base.csv_rows`).
    """
    delimiter = src.csv_delimiter()
    names: list[str] | None = None
    i = 0
    with src.open_text() as f:
        for line, fields, problem in csv_rows(f, delimiter, lambda: None if names is None else len(names)):
            where = str(line)
            if fields is None:
                yield i, where, reject(src, source, where, "malformed_row", problem)
                i += 1
                continue
            if not fields or all(not x.strip() for x in fields):
                continue
            if names is None:
                names = [c.strip() for c in fields]
                continue
            if len(fields) != len(names):
                yield i, where, reject(src, source, where, "malformed_row",
                                       f"row does not have the header's {len(names)} fields", dict(zip(names, fields)))
            else:
                yield i, where, dict(zip(names, fields))
            i += 1


def iter_records(src: SourceFile, source: str) -> Iterator[Row]:
    """JSON or CSV records of a file, told apart by its first character."""
    first = src.head_text.lstrip()[:1]
    return iter_json_records(src, source) if first in "[{" else iter_csv_records(src, source)


def build_all(src: SourceFile, source: str, rows: Iterable[Row], build: Builder) -> Iterator[LlmCall | Skip | Reject]:
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
        except (ValueError, TypeError, ArithmeticError, RecursionError, KeyError, IndexError, AttributeError) as e:
            # a value no rule above foresaw (e.g. a field of the wrong type): this record only is rejected
            reason = "bad_number" if isinstance(e, ArithmeticError) else "malformed_row"
            yield reject(src, source, where, reason, f"cannot read the record ({type(e).__name__}: {e})", rec)
            continue
        yield from out


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
