"""How the billing adapters make `BillingLine`s, and walk a file's rows or report pages into them.

Each billing adapter turns one export row (or one API result) into `BillingLine`s, a `Reject` or a `Skip`,
reading its values with `values` and its rows with `readers`. The pieces here keep the lines uniform:

- `LineMaker` builds the lines of one file: currency upper-cased, `cost_usd` filled (USD as is, otherwise a
  rate from `options["fx"]`, never assumed), money rounded to the store's scale, and a `billing_line_id`
  hashed from the normalised content (`canonical`), never from the locator.
- `table_records` checks a CSV or Parquet file's columns and runs the adapter on each row;
  `bucket_results` does the same for the results of API report pages. A bad row becomes a `Reject`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from phaselens.models import BillingLine, Reject
from phaselens.models.records import TokenType, truncate_raw

from . import jsonread
from .base import Record, SourceFile
from .normalize import normalize_model
from .readers import Row, guarded, open_table, raw_of, read_json_values, require_columns, text_of
from .values import RecordError, clean, parse_decimal, parse_timestamp, utc_naive

MONEY_STEP = Decimal("1e-12")  # DECIMAL(38, 12) in the store
QUANTITY_STEP = Decimal("1e-6")  # DECIMAL(38, 6) in the store
_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _fit(d: Decimal, step: Decimal) -> Decimal:
    """Round to the store's scale only when `d` has more decimals than it keeps."""
    return d.quantize(step) if d.as_tuple().exponent < step.as_tuple().exponent else d


def _num(d: Decimal | None) -> str | None:
    return None if d is None else format(d.normalize(), "f")


def _str(value: Any) -> str | None:
    value = clean(value)
    return None if value is None else str(value)


def canonical(value: Any) -> Any:
    """A value in one spelling for id hashing: numbers normalised (`328000.0` = `328000`), times as ISO UTC."""
    value = clean(value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, datetime):
        return utc_naive(value).isoformat()
    if isinstance(value, int | float | Decimal):
        return _num(parse_decimal(value, "value"))
    if isinstance(value, str) and (value[0].isdigit() or value[0] in "+-."):
        if _ISO_DAY.match(value):
            try:
                return parse_timestamp(value, "value").isoformat()
            except RecordError:
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
            raise RecordError("missing_field", "currency is empty")
        if period_end < period_start:
            raise RecordError("end_before_start", f"period ends {period_end} before it starts {period_start}")
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
                                     raw=raw_of(lambda result=result: text_of(result)))
                        continue
                    yield from guarded(src, source, at, lambda result=result: text_of(result),
                                       lambda result=result, bucket=bucket, at=at: handle(result, bucket, at))
