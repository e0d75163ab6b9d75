"""The values of an input record: the one error for a record that cannot be used, and the coercions every adapter
reads its fields with.

A coercion returns a field in the type the store keeps, or raises `RecordError` with a reject reason and a
detail; the record loops in `readers` turn that into a `Reject` for that record alone and read on. Call sources
and billing exports need different contracts, so some values have two readers, each written once:

- numbers: `to_float`, `to_tokens`, `to_seconds` and `to_usd` read one call's fields (a blank is None, each
  bounded by what one call can hold); `parse_decimal` keeps a billing amount exact (a blank is `missing_field`
  unless the field is optional) and bounds it by what the store holds.
- times: `parse_time` reads ISO 8601 or an epoch number in s, ms, µs or ns (told apart by magnitude);
  `parse_timestamp` reads what billing exports write: unix seconds, ISO 8601 (also with ` UTC` or more than six
  fraction digits) and MM/dd/yyyy, within 1970-2200. Both give naive UTC.
- units: `unit_multiplier` / `tokens_from` turn `1K`, `1 M`, `1000 Tokens` quantities into tokens.
- names and nesting: `column_key` makes a column name case- and separator-insensitive; `dig` / `first_of`
  read dotted paths of nested records; `parse_tags` and `attrs_json` read and write tag objects.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from phaselens.models.records import RejectReason
from phaselens.models.vocabulary import itl_per_token

UNKNOWN_MODEL = "unknown"
"""Model label for token-shape sources that name no model (request traces, some benchmarks)."""

NULL_STRINGS = frozenset({"", "NULL", "null", "None"})  # what exports write for an empty cell
# Upper bounds past which a value cannot be real (and would overflow the store's columns): rejected as bad_number.
MAX_TOKENS = 10**12  # tokens in one call
MAX_SECONDS = 1e7  # about 116 days for one call's duration
MAX_USD = Decimal(10) ** 12  # dollars for one call
MAX_VALUE = Decimal(10) ** 20  # no real quantity or amount of one billing line is larger; beyond it the store overflows

_EPOCH = datetime(1970, 1, 1)

# Nouns a unit may name, and whether they count tokens. Characters and requests are not tokens.
UNIT_NOUNS: dict[str, bool] = {
    "": True, "token": True, "tokens": True, "unit": True, "units": True, "count": True,
    "character": False, "characters": False, "char": False, "chars": False,
    "request": False, "requests": False,
}
UNIT_SCALES: dict[str, Decimal] = {
    "": Decimal(1), "k": Decimal(1000), "thousand": Decimal(1000), "m": Decimal(1_000_000),
    "million": Decimal(1_000_000),
}
_UNIT = re.compile(
    r"(?:(?P<num>\d+(?:\.\d+)?)\s*)?(?P<scale>k|thousand|million|m)?\s*(?P<noun>[a-z]*)"
)
_US_DATE = re.compile(
    r"(?P<m>\d{1,2})/(?P<d>\d{1,2})/(?P<y>\d{4})"
    r"(?:[ T](?P<H>\d{1,2}):(?P<M>\d{2})(?::(?P<S>\d{2}))?\s*(?P<ampm>[AaPp][Mm])?)?"
)
_LONG_FRACTION = re.compile(r"(\.\d{6})\d+")
_UNIX_SECONDS = re.compile(r"\d{9,11}(?:\.\d+)?")


class RecordError(ValueError):
    """One input record (a CSV row, a JSON object, an API result) cannot be used: it becomes a `Reject` with this
    reason and detail, and the file goes on."""

    def __init__(self, reason: RejectReason, detail: str) -> None:
        self.reason, self.detail = reason, detail
        super().__init__(f"{reason}: {detail}")


# ---------------------------------------------------------------- blanks and text


def clean(value: Any) -> Any:
    """Strings stripped; empty and NULL-like strings (`NULL`, `null`, `None`) become None."""
    if isinstance(value, str):
        value = value.strip()
        return None if value in NULL_STRINGS else value
    return value


def is_blank(value: Any) -> bool:
    """True for None, empty strings and the literal `null`/`NULL`/`None` CSV exports write."""
    return clean(value) is None


def text_or_none(value: Any) -> str | None:
    """A non-blank scalar as a stripped string, else None. An object or array where text belongs is not
    text: it reads as absent (so each field's rule for a missing value applies), never as its repr, which
    for a deeply nested value overflows the stack."""
    if isinstance(value, dict | list | tuple):
        return None
    return None if is_blank(value) else str(value).strip()


@lru_cache(maxsize=8192)
def column_key(name: str) -> str:
    """Lower-case alphanumerics of a column name: `meterName`, `MeterName`, `meter_name` -> `metername`."""
    return re.sub(r"[^0-9a-z]", "", name.lower())


def snake(value: str) -> str:
    """`UnusedReservation`, `Usage-Based`, `rounding error` -> `unused_reservation`, `usage_based`, `rounding_error`."""
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", value.strip())
    return re.sub(r"[^0-9a-z]+", "_", s.lower()).strip("_")


# ---------------------------------------------------------------- numbers


def _exact(value: Any) -> Decimal:
    """A number as the exact Decimal of its text; InvalidOperation or ValueError when it is not one."""
    return value if isinstance(value, Decimal) else Decimal(str(value).strip())


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
    """One call's money as Decimal USD (exact decimal of the written number, divided by `divisor`); None when blank."""
    if is_blank(value):
        return None
    try:
        out = _exact(value)
    except (InvalidOperation, ValueError):
        raise RecordError("bad_number", f"{field} is not an amount: {str(value)[:40]!r}") from None
    if not out.is_finite():
        raise RecordError("bad_number", f"{field} is not finite: {value!r}")
    out = out / divisor if divisor != 1 else out
    if abs(out) > MAX_USD:
        raise RecordError("bad_number", f"{field} = {str(value)[:40]} is out of range (above {MAX_USD:.0e} USD)")
    return out


def parse_decimal(value: Any, field: str, *, required: bool = True) -> Decimal | None:
    """A billing number (int, float, Decimal or numeric string) as an exact Decimal; RecordError when it is not one."""
    value = clean(value)
    if value is None:
        if required:
            raise RecordError("missing_field", f"{field} is empty")
        return None
    if isinstance(value, bool):
        raise RecordError("bad_number", f"{field}: {value!r} is not a number")
    if isinstance(value, float):
        value = repr(value)
    try:
        d = _exact(value)
    except (InvalidOperation, ValueError):
        raise RecordError("bad_number", f"{field}: {value!r} is not a number") from None
    if not d.is_finite():
        raise RecordError("bad_number", f"{field}: {value!r} is not a finite number")
    if abs(d) > MAX_VALUE:
        raise RecordError("bad_number", f"{field}: {str(value)[:40]} is out of range (above 1e20)")
    return d


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0–100) with linear interpolation between closest ranks, as numpy's default."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), min(math.floor(pos) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


# ---------------------------------------------------------------- times


def utc_naive(dt: datetime) -> datetime:
    """An aware datetime as naive UTC; a naive one as it is (taken as UTC)."""
    return dt.astimezone(UTC).replace(tzinfo=None) if dt.tzinfo else dt


def parse_time(value: Any, field: str) -> datetime | None:
    """An ISO 8601 string or epoch number (s, ms, µs or ns by magnitude) as a naive UTC datetime; None when blank."""
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
    return utc_naive(dt)


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


def _checked(dt: datetime, field: str, value: Any) -> datetime:
    if not 1970 <= dt.year <= 2200:
        raise RecordError("bad_timestamp", f"{field}: {value!r} is out of range")
    return dt


def parse_timestamp(value: Any, field: str) -> datetime:
    """A billing time as naive UTC from unix seconds, ISO 8601 (`T` or space, `Z`, offset or ` UTC`) or
    MM/dd/yyyy; a blank is `missing_field`."""
    value = clean(value)
    if value is None:
        raise RecordError("missing_field", f"{field} is empty")
    if isinstance(value, datetime):
        return _checked(utc_naive(value), field, value)
    if isinstance(value, date):
        return _checked(datetime(value.year, value.month, value.day), field, value)
    if isinstance(value, bool):
        raise RecordError("bad_timestamp", f"{field}: {value!r} is not a time")
    if isinstance(value, int | float | Decimal):
        return _from_unix(value, field)
    s = str(value).strip()
    if _UNIX_SECONDS.fullmatch(s):
        return _from_unix(Decimal(s), field)
    m = _US_DATE.fullmatch(s)
    if m:
        return _from_us_date(m, field, value)
    iso = s[:-3].rstrip() + "+00:00" if s.upper().endswith("UTC") else s
    iso = _LONG_FRACTION.sub(r"\1", iso)
    try:
        dt = datetime.fromisoformat(iso)
    except ValueError:
        raise RecordError("bad_timestamp", f"{field}: {value!r} is not a recognised date/time") from None
    return _checked(utc_naive(dt), field, value)


def _from_unix(value: int | float | Decimal, field: str) -> datetime:
    try:
        dt = _EPOCH + timedelta(seconds=float(value))
    except (OverflowError, ValueError):
        raise RecordError("bad_timestamp", f"{field}: {value!r} is out of range") from None
    return _checked(dt, field, value)


def _from_us_date(m: re.Match, field: str, value: Any) -> datetime:
    hour = int(m["H"] or 0)
    if m["ampm"]:
        if not 1 <= hour <= 12:
            raise RecordError("bad_timestamp", f"{field}: {value!r} has an hour outside 1-12 with AM/PM")
        hour = hour % 12 + (12 if m["ampm"].lower() == "pm" else 0)
    try:
        dt = datetime(int(m["y"]), int(m["m"]), int(m["d"]), hour, int(m["M"] or 0), int(m["S"] or 0))
    except ValueError:
        raise RecordError("bad_timestamp", f"{field}: {value!r} is not a valid MM/dd/yyyy date") from None
    return _checked(dt, field, value)


def seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    """`end − start` in seconds, or None when either is missing."""
    return None if start is None or end is None else (end - start).total_seconds()


def after(start: datetime | None, seconds: float | None) -> datetime | None:
    """`start + seconds`, or None when either is missing (e.g. the first-token time from TTFT)."""
    return None if start is None or seconds is None else start + timedelta(seconds=seconds)


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


# ---------------------------------------------------------------- units


def unit_multiplier(unit: Any) -> tuple[Decimal, bool] | None:
    """(tokens per unit, counts tokens?) for `1K`, `1 M`, `1000 Tokens`, `1000_tokens`, `tokens`; None if unknown."""
    unit = clean(unit)
    if unit is None:
        return None
    s = str(unit).strip().lower().replace("_", " ")
    m = _UNIT.fullmatch(s)
    if not m or m["noun"] not in UNIT_NOUNS or not (m["num"] or m["scale"] or m["noun"]):
        return None
    return Decimal(m["num"] or 1) * UNIT_SCALES[m["scale"] or ""], UNIT_NOUNS[m["noun"]]


def tokens_from(quantity: Decimal | None, unit: Any, *, default: Decimal | None = None) -> Decimal | None:
    """A quantity in `unit` blocks as tokens; `default` multiplier when no unit is given; None when not tokens."""
    if quantity is None:
        return None
    parsed = unit_multiplier(unit)
    if parsed is None:
        return quantity * default if default is not None and clean(unit) is None else None
    mult, counts_tokens = parsed
    return quantity * mult if counts_tokens else None


# ---------------------------------------------------------------- nested values


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


def parse_tags(value: Any) -> dict[str, Any]:
    """Tags from a JSON object string, a dict, a list of {key, value} or (key, value) pairs; keys stripped."""
    value = clean(value)
    if value is None:
        return {}
    if isinstance(value, str):
        text = value if value.lstrip().startswith(("{", "[")) else "{" + value + "}"
        try:
            value = json.loads(text, parse_float=Decimal)
        except ValueError:
            return {"_unparsed": value}
    pairs: list[tuple[Any, Any]]
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, list):
        pairs = []
        for item in value:
            if isinstance(item, dict) and "key" in item:
                pairs.append((item.get("key"), item.get("value")))
            elif isinstance(item, list | tuple) and len(item) == 2:
                pairs.append((item[0], item[1]))
    else:
        return {"_unparsed": str(value)}
    groups: dict[str, list[tuple[str, Any]]] = {}
    for k, v in pairs:
        groups.setdefault(str(k).strip(), []).append((str(k), v))
    out: dict[str, Any] = {}
    for key, items in groups.items():
        if len({json.dumps(v, sort_keys=True, default=str) for _, v in items}) == 1:
            out[key] = items[0][1]
        else:  # keys that differ only by spaces but disagree: keep each as written
            out.update(items)
    return out
