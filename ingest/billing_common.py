"""Shared values of the billing adapters: column names, numbers, dates, units, currency and line ids.

Each billing adapter turns one export row (or one API result) into `BillingLine`s, a `Reject` or a
`Skip`. The pieces here keep that uniform (file readers live in `billing_io`):

- `column_key` makes column names case- and separator-insensitive: `costInBillingCurrency`,
  `CostInBillingCurrency` and `cost_in_billing_currency` are one column, and so are a nested JSON
  `service.description` and a flattened CSV `service_description`. `require_columns` raises
  `SchemaMismatch` naming what a recognised file lacks.
- `parse_decimal`, `parse_timestamp` raise `RowError` (a reject reason and a detail) on a bad
  value; `billing_io.guarded` turns that into a `Reject` and keeps the file going.
  `unit_multiplier` / `tokens_from` turn `1K`, `1 M`, `1000 Tokens` quantities into tokens.
- `LineMaker` builds the lines of one file: currency upper-cased, `cost_usd` filled (USD as is,
  otherwise a rate from `options["fx"]`, never assumed), money rounded to the store's scale, and a
  `billing_line_id` hashed from the normalised content, never from the locator.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from phaselens.models import BillingLine
from phaselens.models.records import RejectReason, TokenType

from .base import SchemaMismatch, SourceFile
from .normalize import normalize_model

NULL_STRINGS = frozenset({"", "NULL", "null", "None"})
MONEY_STEP = Decimal("1e-12")  # DECIMAL(38, 12) in the store
QUANTITY_STEP = Decimal("1e-6")  # DECIMAL(38, 6) in the store
MAX_VALUE = Decimal(10) ** 20  # no real quantity or amount of one line is larger; beyond it the store overflows
TOKEN_TYPES: tuple[TokenType, ...] = TokenType.__args__  # type: ignore[attr-defined]

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


class RowError(ValueError):
    """A row-level problem: becomes a `Reject` with this reason and detail."""

    def __init__(self, reason: RejectReason, detail: str) -> None:
        self.reason, self.detail = reason, detail
        super().__init__(f"{reason}: {detail}")


@lru_cache(maxsize=8192)
def column_key(name: str) -> str:
    """Lower-case alphanumerics of a column name: `meterName`, `MeterName`, `meter_name` -> `metername`."""
    return re.sub(r"[^0-9a-z]", "", name.lower())


def snake(value: str) -> str:
    """`UnusedReservation`, `Usage-Based`, `rounding error` -> `unused_reservation`, `usage_based`, `rounding_error`."""
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", value.strip())
    return re.sub(r"[^0-9a-z]+", "_", s.lower()).strip("_")


def clean(value: Any) -> Any:
    """Strings stripped; empty and NULL-like strings (`NULL`, `null`, `None`) become None."""
    if isinstance(value, str):
        value = value.strip()
        return None if value in NULL_STRINGS else value
    return value


def require_columns(src: SourceFile, fmt: str, keys: set[str], required: dict[str, tuple[str, ...]]) -> None:
    """Raise `SchemaMismatch` naming each required column (by its first alias) that the file lacks."""
    missing = [name for name, aliases in required.items() if not any(column_key(a) in keys for a in (name, *aliases))]
    if missing:
        raise SchemaMismatch(src.display, fmt, missing)


def parse_decimal(value: Any, field: str, *, required: bool = True) -> Decimal | None:
    """A number (int, float, Decimal or numeric string) as an exact Decimal; RowError when it is not one."""
    value = clean(value)
    if value is None:
        if required:
            raise RowError("missing_field", f"{field} is empty")
        return None
    if isinstance(value, bool):
        raise RowError("bad_number", f"{field}: {value!r} is not a number")
    if isinstance(value, float):
        value = repr(value)
    try:
        d = value if isinstance(value, Decimal) else Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise RowError("bad_number", f"{field}: {value!r} is not a number") from None
    if not d.is_finite():
        raise RowError("bad_number", f"{field}: {value!r} is not a finite number")
    if abs(d) > MAX_VALUE:
        raise RowError("bad_number", f"{field}: {str(value)[:40]} is out of range (above 1e20)")
    return d


def _utc_naive(dt: datetime) -> datetime:
    return dt.astimezone(UTC).replace(tzinfo=None) if dt.tzinfo else dt


def _checked(dt: datetime, field: str, value: Any) -> datetime:
    if not 1970 <= dt.year <= 2200:
        raise RowError("bad_timestamp", f"{field}: {value!r} is out of range")
    return dt


def parse_timestamp(value: Any, field: str) -> datetime:
    """A naive UTC datetime from unix seconds, ISO 8601 (`T` or space, `Z`, offset or ` UTC`) or MM/dd/yyyy."""
    value = clean(value)
    if value is None:
        raise RowError("missing_field", f"{field} is empty")
    if isinstance(value, datetime):
        return _checked(_utc_naive(value), field, value)
    if isinstance(value, date):
        return _checked(datetime(value.year, value.month, value.day), field, value)
    if isinstance(value, bool):
        raise RowError("bad_timestamp", f"{field}: {value!r} is not a time")
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
        raise RowError("bad_timestamp", f"{field}: {value!r} is not a recognised date/time") from None
    return _checked(_utc_naive(dt), field, value)


def _from_unix(value: int | float | Decimal, field: str) -> datetime:
    try:
        dt = datetime(1970, 1, 1) + timedelta(seconds=float(value))
    except (OverflowError, ValueError):
        raise RowError("bad_timestamp", f"{field}: {value!r} is out of range") from None
    return _checked(dt, field, value)


def _from_us_date(m: re.Match, field: str, value: Any) -> datetime:
    hour = int(m["H"] or 0)
    if m["ampm"]:
        if not 1 <= hour <= 12:
            raise RowError("bad_timestamp", f"{field}: {value!r} has an hour outside 1-12 with AM/PM")
        hour = hour % 12 + (12 if m["ampm"].lower() == "pm" else 0)
    try:
        dt = datetime(int(m["y"]), int(m["m"]), int(m["d"]), hour, int(m["M"] or 0), int(m["S"] or 0))
    except ValueError:
        raise RowError("bad_timestamp", f"{field}: {value!r} is not a valid MM/dd/yyyy date") from None
    return _checked(dt, field, value)


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


def _fit(d: Decimal, step: Decimal) -> Decimal:
    """Round to the store's scale only when `d` has more decimals than it keeps."""
    return d.quantize(step) if d.as_tuple().exponent < step.as_tuple().exponent else d


def _num(d: Decimal | None) -> str | None:
    return None if d is None else format(d.normalize(), "f")


_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def canonical(value: Any) -> Any:
    """A value in one spelling for id hashing: numbers normalised (`328000.0` = `328000`), times as ISO UTC."""
    value = clean(value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, datetime):
        return _utc_naive(value).isoformat()
    if isinstance(value, int | float | Decimal):
        return _num(parse_decimal(value, "value"))
    if isinstance(value, str) and (value[0].isdigit() or value[0] in "+-."):
        if _ISO_DAY.match(value):
            try:
                return parse_timestamp(value, "value").isoformat()
            except RowError:
                return value
        try:
            d = Decimal(value)
        except InvalidOperation:
            return value
        return _num(d) if d.is_finite() else value
    return value


def _rate(value: Any) -> Decimal:
    return value if isinstance(value, Decimal) else Decimal(str(value))


class LineMaker:
    """Builds the `BillingLine`s of one file: currency, USD conversion, rounding and stable ids."""

    def __init__(self, src: SourceFile, source: str) -> None:
        self.src, self.source = src, source
        self.fx = {str(k).strip().upper(): _rate(v) for k, v in (src.options.get("fx") or {}).items()}
        self._seen: Counter[str] = Counter()

    def usd(self, cost: Decimal, currency: str) -> Decimal | None:
        """`cost` in USD: as is for USD, with a user-supplied rate (USD per unit) otherwise, else None."""
        if currency == "USD":
            return cost
        rate = self.fx.get(currency)
        return cost * rate if rate is not None else None

    def line(
        self, where: str, *, period_start: datetime, period_end: datetime, provider: str, token_type: TokenType,
        cost: Decimal, currency: str | None, cost_usd: Decimal | None = None, quantity_tokens: Decimal | None = None,
        account: Any = None, project: Any = None, model: str | None = None, model_raw: str | None = None,
        charge_category: str = "usage", sku: Any = None, description: Any = None, tags: dict | None = None,
        identity: dict | None = None,
    ) -> BillingLine:
        """One line; `model` defaults to `model_raw` normalised, and `identity` (source fields that tell
        otherwise equal lines apart, e.g. a resource id) joins the id hash."""
        cur = (currency or "").strip().upper()
        if not cur:
            raise RowError("missing_field", "currency is empty")
        if period_end < period_start:
            raise RowError("end_before_start", f"period ends {period_end} before it starts {period_start}")
        cost = _fit(cost, MONEY_STEP)
        if model is None and model_raw:
            model = normalize_model(model_raw)
        usd = (cost_usd if cost_usd is not None else self.usd(cost, cur))
        usd = None if usd is None else _fit(usd, MONEY_STEP)
        qty = None if quantity_tokens is None else _fit(quantity_tokens, QUANTITY_STEP)
        clean_tags = {k: v for k, v in (tags or {}).items() if v is not None}
        tags_json = json.dumps(clean_tags, sort_keys=True, default=str, ensure_ascii=False) if clean_tags else None
        fields = {
            "source": self.source, "period_start": period_start.isoformat(), "period_end": period_end.isoformat(),
            "provider": provider, "account": _str(account), "project": _str(project), "model": model,
            "model_raw": model_raw, "token_type": token_type, "quantity_tokens": _num(qty), "cost": _num(cost),
            "currency": cur, "charge_category": charge_category, "sku": _str(sku), "description": _str(description),
            "tags": tags_json,
            "identity": {k: canonical(v) for k, v in identity.items()} if identity else None,
        }
        base = json.dumps(fields, sort_keys=True, default=str, ensure_ascii=False)
        n = self._seen[base]
        self._seen[base] += 1
        digest = hashlib.sha256((base if n == 0 else f"{base}#{n}").encode()).hexdigest()
        return BillingLine(
            billing_line_id=digest, period_start=period_start, period_end=period_end, provider=provider,
            account=_str(account), project=_str(project), model=model, model_raw=model_raw, token_type=token_type,
            quantity_tokens=qty, cost=cost, currency=cur, cost_usd=usd, charge_category=charge_category,
            sku=_str(sku), description=_str(description), source=self.source,
            source_locator=self.src.locator(where), tags_json=tags_json,
        )


def _str(value: Any) -> str | None:
    value = clean(value)
    return None if value is None else str(value)
