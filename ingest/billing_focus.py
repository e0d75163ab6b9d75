"""FOCUS 1.0-1.3 cost and usage data (FinOps Open Cost and Usage Specification), CSV or Parquet.

Every row becomes a `BillingLine`, so per-provider sums of `BilledCost` are kept to the cent:
cloud charges that are not LLM tokens (compute, storage, network ...) are token type `other` with
no model and no quantity. Real exports bend the spec, and these quirks are read as data:
literal `NULL` cells, timestamps without `T`/`Z` (`2024-09-18 22:00:00`, taken as UTC),
`Usage-Based`/`Usage-based`, negative corrections (kept as negative cost), `PricingQuantity` in
unit blocks unlike `ConsumedQuantity`, Tags JSON whose keys carry stray spaces (`" org"`, stripped),
and shifted columns such as a numeric `AvailabilityZone` (never read as a location).

Provider: LLM services map to the GenAI provider names (`Amazon Bedrock` -> `aws.bedrock`, Azure
OpenAI -> `azure.ai.openai`, `Vertex AI` -> `gcp.vertex_ai`); a provider that is itself an LLM
vendor (OpenAI, Anthropic ...) is normalised; a marketplace model (a cloud `ProviderName` with an
LLM vendor as `PublisherName`) goes to that cloud's model service. Any other row keeps the cloud's
own name, lower-cased (`aws`, `microsoft`, `oracle`), so cloud spend never counts as LLM spend.

FOCUS 1.3 renamed `ProviderName` to `ServiceProviderName` (the seller) and added `HostProviderName`
(the infrastructure); either spelling is read, and a model vendor sold on a cloud's infrastructure
goes to that cloud's model service, as a 1.0 marketplace row does.

Token rows (`ConsumedUnit` or `PricingUnit` counting tokens, e.g. `1000 Tokens`; `Token-Hours` of
cache storage are not tokens) get their token type, first found:
1. the FOCUS-defined `SkuPriceDetails` properties: `TokenDirection` (`Input` / `Output`) with
   `TokenCacheAction` (`Uncached`, `Read`, `Write`, `Other`); an input meter with no cache action
   bills uncached tokens and cache writes together (the provider does not meter writes apart), so it
   is uncached input. The earlier draft property `TokenType` (`Input`, `CacheRead`, `CacheWrite`,
   `Output`) is read too. `ModelId` there names the model when nothing else does;
2. the provider's own naming in `SkuId` / `SkuMeter` / `ChargeDescription` (see `billing_vocab`);
3. plain words (`Input Tokens`, `Cache Read`); else `other`.
A property value outside the allowed set is kept in the line's tags and the names decide. The
quantity is `ConsumedQuantity` in tokens, or `PricingQuantity` times the block its unit names.
`BillingAccountId` -> account, `SubAccountId` -> project, `ChargeCategory` (with `_correction` for
ChargeClass Correction) -> charge_category.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, ClassVar

from phaselens.models.records import TokenType

from .base import Record, SourceFile
from .billing_lines import LineMaker, table_records
from .billing_vocab import NameInfo, azure_meter, bedrock_model_from_arn, bedrock_usage_type, gemini_sku, token_type_from_text
from .normalize import normalize_model, normalize_provider
from .readers import Row, table_keys
from .values import column_key, parse_decimal, parse_tags, parse_timestamp, snake, unit_multiplier

FORMAT = "FOCUS"
REQUIRED: dict[str, tuple[str, ...]] = {
    "BilledCost": (), "BillingCurrency": (), "ChargePeriodStart": (), "ChargePeriodEnd": (),
    "ProviderName": ("ServiceProviderName",), "ChargeCategory": (),
}
# columns no other billing format has; three of them make a FOCUS file even if a required one is gone
SIGNATURE = frozenset(column_key(c) for c in (
    "BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "ChargePeriodStart", "ChargePeriodEnd",
    "ChargeCategory", "ProviderName", "InvoiceIssuerName", "PricingQuantity", "ServiceProviderName",
    "HostProviderName",
))
# ServiceName pattern -> provider alias for `normalize_provider`, first match wins
LLM_SERVICES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"bedrock", re.I), "bedrock"),
    (re.compile(r"openai", re.I), "azure_openai"),
    (re.compile(r"vertex\s*ai|gemini", re.I), "vertex_ai"),
]
LLM_VENDORS = frozenset({"openai", "anthropic", "mistral", "mistralai", "cohere", "deepseek", "xai", "groq", "meta", "ai21"})
# cloud ProviderName -> the alias of its model service, for marketplace models
CLOUD_MODEL_SERVICES = {"aws": "bedrock", "amazonwebservices": "bedrock", "microsoft": "azure.ai.inference",
                        "azure": "azure.ai.inference", "google": "vertex_ai", "googlecloud": "vertex_ai"}
# provider -> (parser, columns it reads) for the provider's own token naming
NAME_PARSERS = {
    "aws.bedrock": (bedrock_usage_type, ("SkuId", "x_UsageType")),
    "azure.ai.openai": (azure_meter, ("SkuMeter", "x_SkuMeterName", "ChargeDescription")),
    "gcp.vertex_ai": (gemini_sku, ("ChargeDescription", "SkuMeter", "x_SkuDescription")),
}
# SkuPriceDetails token properties (FOCUS 1.3) -> token type; `None` key: the property is absent
TOKEN_DIRECTIONS = {"input": "input", "output": "output"}
TOKEN_CACHE_ACTIONS: dict[str | None, TokenType] = {
    "uncached": "uncached_input", "read": "cache_read", "write": "cache_write", "other": "other",
    None: "uncached_input",
}
# the earlier draft's single property
DRAFT_TOKEN_TYPES: dict[str, TokenType] = {
    "input": "uncached_input", "uncached": "uncached_input", "cacheread": "cache_read", "cachewrite": "cache_write",
    "output": "output", "reasoning": "output",
}
IDENTITY_COLUMNS = (
    "Id", "ResourceId", "RegionId", "AvailabilityZone", "ChargeFrequency", "ChargeClass", "PricingQuantity",
    "PricingUnit", "ConsumedQuantity", "ConsumedUnit", "ListCost", "EffectiveCost", "ContractedCost",
    "CommitmentDiscountId", "ServiceName", "PublisherName", "InvoiceIssuerName", "BillingPeriodStart",
)


def focus_provider(row: Row) -> tuple[str, bool]:
    """(provider, is an LLM service) of a FOCUS row."""
    provider_name = row.text("ProviderName", "ServiceProviderName") or ""
    service = row.text("ServiceName") or ""
    for pattern, alias in LLM_SERVICES:
        if pattern.search(service):
            if alias == "azure_openai" and column_key(provider_name) not in ("microsoft", "azure"):
                alias = "openai"
            return normalize_provider(alias) or alias, True
    if column_key(provider_name) in LLM_VENDORS:
        host = CLOUD_MODEL_SERVICES.get(column_key(row.text("HostProviderName") or ""))
        if host and not row.get("ProviderName"):  # FOCUS 1.3: a vendor's model run on a cloud
            alias = "azure.ai.openai" if host == "azure.ai.inference" and column_key(provider_name) == "openai" else host
            return normalize_provider(alias) or alias, True
        return normalize_provider(provider_name) or provider_name.lower(), True
    publisher = column_key(row.text("PublisherName") or "")
    cloud = CLOUD_MODEL_SERVICES.get(column_key(provider_name))
    if cloud and publisher in LLM_VENDORS:
        alias = "azure.ai.openai" if cloud == "azure.ai.inference" and publisher == "openai" else cloud
        return normalize_provider(alias) or alias, True
    return provider_name.strip().lower(), False


def _is_token_unit(unit: Any) -> bool:
    """`Tokens`, `1000 Tokens`, `1K tokens`; not `Token-Hours` (cache storage is billed per token-hour)."""
    text = "" if unit is None else str(unit).lower()
    return "token" in text and not re.search(r"token[s]?[ -]*hours?", text)


def sku_token_properties(row: Row) -> tuple[TokenType | None, str | None, dict[str, Any]]:
    """(token type, model id, tags) from the FOCUS-defined token properties of `SkuPriceDetails`.

    The token type is None when the details carry no token property or an unknown value (then the
    names decide); the tags record the properties as written, so a line shows what the bill said.
    """
    details = parse_tags(row.get("SkuPriceDetails"))

    def prop(key: str) -> Any:
        # a JSON string or a Parquet MAP is parsed above; a Parquet STRUCT arrives flattened to dotted columns
        return details[key] if key in details else row.get(f"SkuPriceDetails.{key}")

    model_id = prop("ModelId")
    model_id = str(model_id).strip() if model_id not in (None, "") else None
    direction, action, draft = (prop(k) for k in ("TokenDirection", "TokenCacheAction", "TokenType"))
    if direction is None and action is None and draft is None:
        return None, model_id, {}
    tags = {"focus_token_direction": direction, "focus_token_cache_action": action, "focus_token_type": draft}
    tags = {k: str(v) for k, v in tags.items() if v is not None}
    token_type: TokenType | None = None
    if direction is not None or action is not None:
        d = TOKEN_DIRECTIONS.get(column_key(str(direction))) if direction is not None else "input"
        a = column_key(str(action)) if action is not None else None
        if d == "output" and a is None:
            token_type = "output"
        elif d == "input" and a in TOKEN_CACHE_ACTIONS:
            token_type = TOKEN_CACHE_ACTIONS[a]
    else:
        token_type = DRAFT_TOKEN_TYPES.get(column_key(str(draft)))
    if token_type is None:
        tags["focus_token_unknown"] = "token properties outside the FOCUS values; token type from the names"
    return token_type, model_id, tags


def _token_quantity(row: Row) -> Decimal | None:
    """Tokens of a token row: ConsumedQuantity in tokens, else PricingQuantity times its block."""
    for qty_col, unit_col in (("ConsumedQuantity", "ConsumedUnit"), ("PricingQuantity", "PricingUnit")):
        unit = row.get(unit_col)
        block = unit_multiplier(unit) if _is_token_unit(unit) else None
        qty = parse_decimal(row.get(qty_col), qty_col, required=False) if block else None
        if block and qty is not None:
            return qty * block[0]
    return None


def _name_info(row: Row, provider: str) -> NameInfo:
    parser, columns = NAME_PARSERS.get(provider, (None, ()))
    for column in columns:
        info = parser(row.text(column)) if parser else NameInfo()
        if info.token_type:
            return info
    for column in ("SkuMeter", "ChargeDescription"):
        token_type = token_type_from_text(row.text(column))
        if token_type:
            return NameInfo(token_type)
    return NameInfo()


def _row_records(row: Row, maker: LineMaker) -> Iterator[Record]:
    start = parse_timestamp(row.get("ChargePeriodStart"), "ChargePeriodStart")
    end = parse_timestamp(row.get("ChargePeriodEnd"), "ChargePeriodEnd")
    cost = parse_decimal(row.get("BilledCost"), "BilledCost")
    provider, _ = focus_provider(row)
    is_token = _is_token_unit(row.get("ConsumedUnit")) or _is_token_unit(row.get("PricingUnit"))
    info = _name_info(row, provider) if is_token else NameInfo()
    sku_type, sku_model, sku_tags = sku_token_properties(row) if is_token else (None, None, {})
    if sku_type or sku_model:
        info = NameInfo(sku_type or info.token_type, info.model or (normalize_model(sku_model) if sku_model else None),
                        info.model_raw or sku_model, info.tags)
    resource = row.text("ResourceId")
    arn_model = bedrock_model_from_arn(resource) if is_token else None
    category = snake(row.text("ChargeCategory") or "")
    if (row.text("ChargeClass") or "").lower() == "correction":
        category += "_correction"
    yield maker.line(
        row.where, period_start=start, period_end=end, provider=provider,
        token_type=(info.token_type or "other") if is_token else "other", cost=cost,
        currency=row.text("BillingCurrency"), quantity_tokens=_token_quantity(row) if is_token else None,
        account=row.get("BillingAccountId"), project=row.get("SubAccountId"),
        model=arn_model or info.model, model_raw=resource if arn_model else info.model_raw,
        charge_category=category, sku=row.get("SkuPriceId", "SkuId"), description=row.get("ChargeDescription"),
        tags={**info.tags, **sku_tags, **parse_tags(row.get("Tags"))},
        identity={c: row.text(c) for c in IDENTITY_COLUMNS},
    )


class FocusAdapter:
    """FOCUS CSV or Parquet: every row a line (non-token rows `other`), totals kept to the cent."""

    name: ClassVar[str] = "focus"
    kind: ClassVar[str] = "billing"

    def sniff(self, src: SourceFile) -> bool:
        """True when the CSV header or Parquet schema has three or more FOCUS-only columns."""
        return len(table_keys(src) & SIGNATURE) >= 3

    def parse(self, src: SourceFile) -> Iterator[Record]:
        """One line per row; SchemaMismatch when a mandatory FOCUS column is missing."""
        yield from table_records(src, self.name, FORMAT, REQUIRED, _row_records)


ADAPTERS = [FocusAdapter()]
