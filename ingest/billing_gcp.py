"""Google Cloud Billing export (BigQuery standard or detailed table) rows for Vertex AI.

Rows come as JSON Lines or a JSON array (nested `service`, `sku`, `usage`, `project`, `labels`,
`credits[]`) or as CSV with flattened headers (`service.description` or `service_description`).
Only rows whose service is `Vertex AI` become lines; every other service is a `Skip`.

Per row:
- token type and model from the SKU description (`Gemini 2.5 Flash GA Text Input - Predictions`,
  see `billing_vocab.gemini_sku`): `Caching` is a cache read, `Caching Storage` is `other` (billed
  per token-hour), `Thinking` output is output; other Vertex SKUs are `other` with no model.
- quantity: `usage.amount_in_pricing_units` times the block its `pricing_unit` names when that unit
  names tokens (`1M tokens`), otherwise `usage.amount`, the SKU's base unit (exports label it
  `count`, even `requests`, for token SKUs). A unit that counts characters, or a pre-2.0 Gemini
  (billed per character) with no token unit, leaves the quantity empty rather than guessing.
- money: `cost` in `currency`. Credits are net-of-cost lines of their own: each entry of
  `credits[]` (or a CSV `credits` JSON column) becomes a negative line with
  `charge_category = "credit"`, the same token type, model and SKU, and no quantity.
- `cost_usd`: USD as is; otherwise a rate from `options["fx"]`, else the export's own
  `currency_conversion_rate` (local currency per USD), else empty.
- `billing_account_id` -> account, `project.id` -> project, project and resource labels -> tags_json.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, ClassVar

from phaselens.models import Reject, Skip
from phaselens.models.records import truncate_raw

from . import jsonread
from .base import Record, SourceFile
from .billing_lines import LineMaker, table_records
from .billing_vocab import gemini_sku
from .normalize import normalize_provider
from .readers import Row, guarded, is_parquet, json_head, read_json_values, table_keys, text_of
from .values import RecordError, column_key, parse_decimal, parse_tags, parse_timestamp, snake, unit_multiplier

FORMAT = "GCP billing export"
PROVIDER = normalize_provider("vertex_ai") or "gcp.vertex_ai"
VERTEX_SERVICES = frozenset({"vertexai"})
REQUIRED: dict[str, tuple[str, ...]] = {
    "service.description": (),
    "sku.description": (),
    "usage_start_time": (),
    "usage_end_time": (),
    "cost": (),
    "currency": (),
}
SIGNATURE = frozenset(column_key(c) for c in (*REQUIRED, "billing_account_id", "sku.id", "service.id", "invoice.month"))
COST_TYPES = {"regular": "usage", "tax": "tax", "adjustment": "adjustment", "rounding error": "rounding_error"}
CREDIT_TOTAL_COLUMNS = ("credits.amount", "credits_amount", "credit_amount")
LABEL_COLUMNS = ("project.labels", "labels")


def _quantity(row: Row, ver_major: int | None) -> Decimal | None:
    """Tokens of a token SKU row, or None when the export's units do not count tokens."""
    in_units = parse_decimal(row.get("usage.amount_in_pricing_units"), "usage.amount_in_pricing_units", required=False)
    pricing = unit_multiplier(row.get("usage.pricing_unit"))
    if in_units is not None and pricing and pricing[1] and pricing[0] > 1:
        return in_units * pricing[0]  # an explicit block such as `1M tokens`
    amount = parse_decimal(row.get("usage.amount"), "usage.amount", required=False)
    units = f"{row.get('usage.unit') or ''} {row.get('usage.pricing_unit') or ''}".lower()
    if amount is None or "char" in units:
        return None
    if ver_major is not None and ver_major < 2 and "token" not in units:
        return None  # Gemini 1.x on Vertex was billed per character
    return amount  # the base unit of a token SKU (labelled `count`, even `requests`) counts tokens


def _credits(row: Row) -> list[dict[str, Any]]:
    """The row's credits as dicts with an `amount`, from a `credits` list/JSON or a credit total column."""
    value = row.get("credits")
    if isinstance(value, str):
        try:
            value = json.loads(value, parse_float=Decimal)
        except ValueError:
            raise RecordError("malformed_row", f"credits is not JSON: {value[:80]!r}") from None
    if isinstance(value, list):
        return [c for c in value if isinstance(c, dict)]
    total = row.get(*CREDIT_TOTAL_COLUMNS)
    return [{"amount": total, "name": "credits"}] if total is not None else []


def _usd(maker: LineMaker, row: Row, cost: Decimal, currency: str) -> Decimal | None:
    usd = maker.usd(cost, currency.upper())
    if usd is not None:
        return usd
    rate = parse_decimal(row.get("currency_conversion_rate"), "currency_conversion_rate", required=False)
    return cost / rate if rate else None


def _row_records(row: Row, maker: LineMaker, source: str) -> Iterator[Record]:
    service = row.text("service.description")
    if service is None:
        raise RecordError("missing_field", "service.description is empty")
    if column_key(service) not in VERTEX_SERVICES:
        yield Skip(source=source, locator=maker.src.locator(row.where), kind=f"gcp:{service}")
        return
    start = parse_timestamp(row.get("usage_start_time"), "usage_start_time")
    end = parse_timestamp(row.get("usage_end_time"), "usage_end_time")
    cost = parse_decimal(row.get("cost"), "cost")
    currency = row.text("currency")
    if not currency:
        raise RecordError("missing_field", "currency is empty")
    sku_desc, sku_id = row.text("sku.description"), row.text("sku.id")
    info = gemini_sku(sku_desc)
    token_type = info.token_type or "other"
    ver = int(info.model_raw.split("-")[1].split(".")[0]) if info.model_raw else None
    qty = _quantity(row, ver) if token_type != "other" else None
    tags: dict[str, Any] = {}
    for column in LABEL_COLUMNS:
        tags.update(parse_tags(row.get(column)))
    tags.update(info.tags)
    common = dict(
        period_start=start, period_end=end, provider=PROVIDER, token_type=token_type, currency=currency,
        account=row.get("billing_account_id"), project=row.get("project.id", "project_id"), model=info.model,
        model_raw=info.model_raw, sku=sku_id or sku_desc, tags=tags,
    )
    location = row.text("location.location", "location.region")
    category = COST_TYPES.get((row.text("cost_type") or "regular").lower(), snake(row.text("cost_type") or ""))
    yield maker.line(row.where, cost=cost, cost_usd=_usd(maker, row, cost, currency), quantity_tokens=qty,
                     charge_category=category, description=sku_desc, identity={"location": location}, **common)
    for n, credit in enumerate(_credits(row)):
        amount = -abs(parse_decimal(credit.get("amount"), f"credits[{n}].amount"))
        name = credit.get("full_name") or credit.get("name") or credit.get("type") or "credit"
        yield maker.line(
            row.where, cost=amount, cost_usd=_usd(maker, row, amount, currency), charge_category="credit",
            description=f"{sku_desc} - credit: {name}",
            identity={"location": location, "credit_id": credit.get("id"), "credit_type": credit.get("type"),
                      "credit_name": credit.get("name")},
            **common,
        )


def _looks_like_json_row(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    keys = {column_key(k) for k in Row.of(obj, "").values}
    return len(keys & SIGNATURE) >= 4


class GcpBillingAdapter:
    """GCP billing export rows (JSON Lines, JSON array or CSV): Vertex AI lines, other services skipped."""

    name: ClassVar[str] = "gcp_billing"
    kind: ClassVar[str] = "billing"

    def sniff(self, src: SourceFile) -> bool:
        """True for rows with `service`, `sku`, `usage_start_time` ... (nested JSON or flattened CSV header)."""
        if len(table_keys(src) & SIGNATURE) >= 4:
            return True
        return _looks_like_json_row(json_head(src))

    def parse(self, src: SourceFile) -> Iterator[Record]:
        """One line per Vertex AI row plus one per credit; SchemaMismatch when a CSV lacks a required column."""
        if is_parquet(src) or src.csv_header() is not None:
            yield from table_records(src, self.name, FORMAT, REQUIRED, lambda row, maker: _row_records(row, maker, self.name))
            return
        maker = LineMaker(src, self.name)
        for item in read_json_values(src, self.name):
            if isinstance(item, Reject):
                yield item
                continue
            where, value = item
            if not jsonread.is_whole(value):
                yield Reject(source=self.name, locator=src.locator(where), reason="malformed_json",
                             detail="the row is cut short where the document breaks", raw=truncate_raw(text_of(value)))
                continue
            if not isinstance(value, dict):
                yield Reject(source=self.name, locator=src.locator(where), reason="malformed_row",
                             detail="a billing row that is not a JSON object", raw=truncate_raw(text_of(value)))
                continue
            row = Row.of(value, where)
            yield from guarded(src, self.name, where, row.raw, lambda row=row: _row_records(row, maker, self.name))


ADAPTERS = [GcpBillingAdapter()]
