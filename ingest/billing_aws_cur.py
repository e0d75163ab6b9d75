"""AWS Cost and Usage Report 2.0 rows for Amazon Bedrock, from CSV (plain or gzip) or Parquet.

Only rows whose `line_item_product_code` is `AmazonBedrock` or `AmazonBedrockService` (or a
Marketplace product named "... Amazon Bedrock Edition") become lines; every other product is a
`Skip`, counted but not stored. Column names are matched case- and separator-insensitively, so the
legacy `lineItem/UsageType` spelling reads like `line_item_usage_type`.

Per row:
- token type and model from the usage type (`USE1-Claude4Sonnet-input-tokens-cross-region-global`,
  `USW2-anthropic.claude-opus-4-8-mantle-cache-write-tokens-standard`, see `billing_vocab`); the
  model from `line_item_resource_id` wins when it is a foundation-model or inference-profile ARN.
  Bedrock rows with no token usage type (provisioned throughput, tools) are token type `other`.
- quantity: `line_item_usage_amount` times the block named by `pricing_unit` (`1K tokens` ->
  x1000, `tokens` -> x1). When `pricing_unit` is absent, Bedrock's documented 1K-token unit is used;
  a unit that counts something other than tokens leaves the quantity empty.
- money: `line_item_unblended_cost` in `line_item_currency_code` (USD when the column is absent).
  `Credit`, `Refund` and discount line item types are stored as negative cost with
  `charge_category` credit / refund / discount and no token quantity, so tokens are never counted
  twice; other line item types keep their name (`usage`, `tax`, `fee` ...).
- `line_item_usage_account_id` -> account; `resource_tags` (JSON, map or `resource_tags_*` columns)
  and `line_item_iam_principal` -> tags_json.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from typing import ClassVar

from phaselens.models import Skip

from .base import Record, SourceFile
from .billing_lines import LineMaker, table_records
from .billing_vocab import bedrock_model_from_arn, bedrock_usage_type
from .normalize import normalize_provider
from .readers import Row, table_keys
from .values import column_key, parse_decimal, parse_tags, parse_timestamp, snake, tokens_from

FORMAT = "AWS CUR 2.0"
PROVIDER = normalize_provider("bedrock") or "aws.bedrock"
BEDROCK_PRODUCTS = frozenset({"amazonbedrock", "amazonbedrockservice"})
MARKETPLACE_MARK = "amazon bedrock edition"
DEFAULT_TOKEN_BLOCK = Decimal(1000)  # Bedrock prices token usage types per 1K tokens

REQUIRED: dict[str, tuple[str, ...]] = {
    "line_item_usage_start_date": (),
    "line_item_usage_end_date": (),
    "line_item_product_code": (),
    "line_item_usage_type": (),
    "line_item_usage_amount": (),
    "line_item_unblended_cost": (),
}
SIGNATURE = frozenset(column_key(c) for c in REQUIRED)
COLUMNS = {
    "line_item_type": "line_item_line_item_type",
    "account": "line_item_usage_account_id",
    "resource": "line_item_resource_id",
    "unit": "pricing_unit",
    "currency": "line_item_currency_code",
    "principal": "line_item_iam_principal",
    "tags": "resource_tags",
    "description": "line_item_line_item_description",
    "product_name": "product_product_name",
    "line_item_id": "identity_line_item_id",
    "operation": "line_item_operation",
}
TAG_COLUMN = re.compile(r"^resource_?tags[/_.](?P<tag>.+)$", re.I)  # resource_tags_user_team, resourceTags/user:team
# line item type -> (charge category, sign forced on the cost: -1 negative, 0 as given)
LINE_ITEM_TYPES: dict[str, tuple[str, int]] = {
    "usage": ("usage", 0),
    "discountedusage": ("usage", 0),
    "savingsplancoveredusage": ("usage", 0),
    "credit": ("credit", -1),
    "refund": ("refund", -1),
    "bundleddiscount": ("discount", -1),
    "edpdiscount": ("discount", -1),
    "privateratediscount": ("discount", -1),
    "distributordiscount": ("discount", -1),
    "savingsplannegation": ("discount", -1),
    "tax": ("tax", 0),
    "fee": ("fee", 0),
    "rifee": ("fee", 0),
}
USAGE_CATEGORIES = frozenset({"usage"})


def _is_bedrock(row: Row) -> bool:
    if column_key(row.text("line_item_product_code") or "") in BEDROCK_PRODUCTS:
        return True
    return MARKETPLACE_MARK in (row.text(COLUMNS["product_name"]) or "").lower()


def _tags(row: Row) -> dict:
    tags = parse_tags(row.get(COLUMNS["tags"]))
    for name, value in (row.original.items() if isinstance(row.original, dict) else ()):
        m = TAG_COLUMN.match(str(name))
        if m and value not in (None, "", "NULL"):
            tags[m["tag"]] = value
    if row.get(COLUMNS["principal"]):
        tags["iam_principal"] = row.get(COLUMNS["principal"])
    return tags


def _row_records(row: Row, maker: LineMaker, source: str) -> Iterator[Record]:
    if not _is_bedrock(row):
        yield Skip(source=source, locator=maker.src.locator(row.where),
                   kind=f"aws:{row.text('line_item_product_code')}")
        return
    start = parse_timestamp(row.get("line_item_usage_start_date"), "line_item_usage_start_date")
    end = parse_timestamp(row.get("line_item_usage_end_date"), "line_item_usage_end_date")
    cost = parse_decimal(row.get("line_item_unblended_cost"), "line_item_unblended_cost")
    amount = parse_decimal(row.get("line_item_usage_amount"), "line_item_usage_amount", required=False)
    item_type = row.text(COLUMNS["line_item_type"]) or "Usage"
    category, sign = LINE_ITEM_TYPES.get(column_key(item_type), (snake(item_type), 0))
    if sign < 0:
        cost = -abs(cost)
    usage_type = row.text("line_item_usage_type")
    info = bedrock_usage_type(usage_type)
    token_type = info.token_type or "other"
    qty = None
    if token_type != "other" and category in USAGE_CATEGORIES:
        qty = tokens_from(amount, row.get(COLUMNS["unit"]), default=DEFAULT_TOKEN_BLOCK)
    resource = row.text(COLUMNS["resource"])
    model = bedrock_model_from_arn(resource) or info.model
    tags = {**info.tags, **_tags(row)}
    yield maker.line(
        row.where, period_start=start, period_end=end, provider=PROVIDER, token_type=token_type, cost=cost,
        currency=row.text(COLUMNS["currency"]) or "USD", quantity_tokens=qty, account=row.get(COLUMNS["account"]),
        model=model, model_raw=resource if bedrock_model_from_arn(resource) else info.model_raw,
        charge_category=category, sku=usage_type,
        description=row.get(COLUMNS["description"]) or row.get(COLUMNS["product_name"]), tags=tags,
        identity={"line_item_id": row.text(COLUMNS["line_item_id"]), "resource": resource,
                  "operation": row.text(COLUMNS["operation"]), "usage_amount": str(amount)},
    )


class AwsCurAdapter:
    """AWS CUR 2.0 (CSV or Parquet): Bedrock token lines; other AWS products are skipped."""

    name: ClassVar[str] = "aws_cur"
    kind: ClassVar[str] = "billing"

    def sniff(self, src: SourceFile) -> bool:
        """True when the CSV header or Parquet schema has at least three CUR `line_item_*` columns."""
        return len(table_keys(src) & SIGNATURE) >= 3

    def parse(self, src: SourceFile) -> Iterator[Record]:
        """One line per Bedrock row; SchemaMismatch when a required CUR column is missing."""
        yield from table_records(src, self.name, FORMAT, REQUIRED, lambda row, maker: _row_records(row, maker, self.name))


ADAPTERS = [AwsCurAdapter()]
