"""Azure Cost Management exports (CSV): Azure OpenAI token meters.

EA exports use PascalCase headers and MCA exports camelCase (`MeterName` / `meterName`); columns are
matched case- and separator-insensitively, with the aliases in `COLUMNS`. Only Azure OpenAI rows
(`meterSubCategory`, `ProductName`, `meterCategory` or `serviceName` mentioning OpenAI) become lines;
other meters are a `Skip`.

Per row:
- token type and model from the meter name (`gpt-4o-0806-Inp-glbl Tokens` -> uncached input of
  gpt-4o, `5.4 mini cd Inp Gl 1M Tokens` -> cache read of gpt-5.4-mini, `... Cd Wr ...` -> cache
  write; see `billing_vocab.azure_meter`). OpenAI meters that are not token meters (hosting,
  training, provisioned units) are token type `other`.
- quantity: `quantity` times the block named by `unitOfMeasure` (`1K`, `1 K`, `1M`, `1000`).
- period: `date` (MM/dd/yyyy or ISO) to the next day; the rows of these exports are daily.
- money: `costInBillingCurrency` (or `CostInBillingCurrency`, `Cost`, `PreTaxCost`) in
  `billingCurrency`; `cost_usd` from `costInUsd` when the export has it, else USD as is or a rate
  from `options["fx"]`. `chargeType` Refund is stored negative.
- `subscriptionId` -> account, `resourceGroup` -> project, `tags` (JSON, braces optional) -> tags_json.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import ClassVar

from phaselens.models import Skip

from .base import Record, SourceFile
from .billing_lines import LineMaker, table_records
from .billing_vocab import azure_meter
from .normalize import normalize_provider
from .readers import Row, table_keys
from .values import RecordError, column_key, parse_decimal, parse_tags, parse_timestamp, snake, tokens_from

FORMAT = "Azure cost export"
PROVIDER = normalize_provider("azure.ai.openai") or "azure.ai.openai"
OPENAI_MARK = "openai"

# canonical name -> accepted column names (any casing, `_`/`.`/space ignored)
COLUMNS: dict[str, tuple[str, ...]] = {
    "date": ("date", "usageDate", "UsageDateTime"),
    "meterName": ("meterName", "meter"),
    "quantity": ("quantity", "usageQuantity", "consumedQuantity"),
    "costInBillingCurrency": ("costInBillingCurrency", "cost", "preTaxCost", "extendedCost"),
    "billingCurrency": ("billingCurrency", "billingCurrencyCode", "currency"),
    "costInUsd": ("costInUsd",),
    "unitOfMeasure": ("unitOfMeasure",),
    "meterCategory": ("meterCategory",),
    "meterSubCategory": ("meterSubCategory",),
    "productName": ("productName", "product"),
    "serviceName": ("serviceName", "consumedService"),
    "meterId": ("meterId",),
    "subscriptionId": ("subscriptionId", "subscriptionGuid"),
    "resourceGroup": ("resourceGroup", "resourceGroupName"),
    "resourceId": ("resourceId", "instanceId"),
    "tags": ("tags",),
    "chargeType": ("chargeType",),
    "pricingModel": ("pricingModel",),
}
REQUIRED = {name: COLUMNS[name] for name in ("date", "meterName", "quantity", "costInBillingCurrency", "billingCurrency")}
SIGNATURE = frozenset(column_key(c) for c in ("meterName", "meterCategory", "meterSubCategory", "meterId",
                                              "unitOfMeasure", "costInBillingCurrency", "consumedService"))
FOCUS_COLUMNS = frozenset(column_key(c) for c in ("BilledCost", "ChargePeriodStart", "EffectiveCost"))
OPENAI_COLUMNS = ("meterSubCategory", "productName", "meterCategory", "serviceName")
NEGATIVE_CHARGES = frozenset({"refund"})
METER_BLOCKS = frozenset({"1K", "1M"})


def _get(row: Row, name: str):
    return row.get(*COLUMNS[name])


def _is_openai(row: Row) -> bool:
    return any(OPENAI_MARK in column_key(str(_get(row, c) or "")) for c in OPENAI_COLUMNS)


def _from_resource(row: Row, segment: str) -> str | None:
    """A segment of the ARM resource id (`/subscriptions/<id>/resourceGroups/<name>/...`)."""
    m = re.search(rf"/{segment}/([^/]+)", str(_get(row, "resourceId") or ""), re.I)
    return m.group(1) if m else None


def _meter_block(meter: str) -> str | None:
    """The block a newer meter names itself (`GPT 5.1 inp Rg 1M Tokens` -> `1M`), for exports without a unit."""
    return next((w for w in meter.split() if w.upper() in METER_BLOCKS), None)


def _row_records(row: Row, maker: LineMaker, source: str) -> Iterator[Record]:
    if not _is_openai(row):
        yield Skip(source=source, locator=maker.src.locator(row.where), kind=f"azure:{_get(row, 'meterCategory')}")
        return
    start = parse_timestamp(_get(row, "date"), "date").replace(hour=0, minute=0, second=0, microsecond=0)
    cost = parse_decimal(_get(row, "costInBillingCurrency"), "costInBillingCurrency")
    cost_usd = parse_decimal(_get(row, "costInUsd"), "costInUsd", required=False)
    currency = _get(row, "billingCurrency")
    if not currency:
        raise RecordError("missing_field", "billingCurrency is empty")
    charge = snake(str(_get(row, "chargeType") or "Usage"))
    if charge in NEGATIVE_CHARGES:
        cost = -abs(cost)
        cost_usd = None if cost_usd is None else -abs(cost_usd)
    meter = _get(row, "meterName")
    info = azure_meter(meter)
    token_type = info.token_type or "other"
    quantity = parse_decimal(_get(row, "quantity"), "quantity", required=False)
    unit = _get(row, "unitOfMeasure") or _meter_block(meter or "")
    qty = tokens_from(quantity, unit) if token_type != "other" and charge == "usage" else None
    tags = {**info.tags, **parse_tags(_get(row, "tags"))}
    if _get(row, "pricingModel"):
        tags["pricing_model"] = _get(row, "pricingModel")
    yield maker.line(
        row.where, period_start=start, period_end=start + timedelta(days=1), provider=PROVIDER,
        token_type=token_type, cost=cost, currency=str(currency), cost_usd=cost_usd, quantity_tokens=qty,
        account=_get(row, "subscriptionId") or _from_resource(row, "subscriptions"),
        project=_get(row, "resourceGroup") or _from_resource(row, "resourcegroups"), model=info.model,
        model_raw=info.model_raw, charge_category=charge, sku=_get(row, "meterId") or meter, description=meter,
        tags=tags, identity={"resource": _get(row, "resourceId"), "unit": unit, "quantity": str(quantity)},
    )


class AzureCostAdapter:
    """Azure Cost Management CSV exports (EA or MCA): Azure OpenAI lines, other meters skipped."""

    name: ClassVar[str] = "azure_cost"
    kind: ClassVar[str] = "billing"

    def sniff(self, src: SourceFile) -> bool:
        """True for a CSV header with `meterName` and two more Cost Management columns, and not FOCUS."""
        keys = table_keys(src)
        return column_key("meterName") in keys and len(keys & SIGNATURE) >= 3 and not keys & FOCUS_COLUMNS

    def parse(self, src: SourceFile) -> Iterator[Record]:
        """One line per Azure OpenAI row; SchemaMismatch when a required column is missing."""
        yield from table_records(src, self.name, FORMAT, REQUIRED, lambda row, maker: _row_records(row, maker, self.name))


ADAPTERS = [AzureCostAdapter()]
