"""The cloud exports of the simulated day: FOCUS 1.2 CSV for Amazon Bedrock, Azure cost export CSV for Azure OpenAI.

- `focus_bedrock`: one row per UTC hour and token type of Claude Sonnet 4 calls through the Bedrock
  global inference profile, shaped as the FOCUS example row of docs/formats.md#focus (`ProviderName` AWS, `PublisherName`
  Anthropic, `ServiceName` Amazon Bedrock, the Bedrock usage type as `SkuId`, `ConsumedUnit` Tokens,
  `PricingUnit` 1000 Tokens) with the rest of the FOCUS 1.2 columns, empty where AWS gives no value.
- `azure_cost`: one row per UTC day and meter of gpt-4.1-mini on a Global deployment, as an MCA
  actual-cost export writes it (docs/formats.md#azure-cost-management-export): camelCase columns, `MM/dd/yyyy` dates, meter names
  such as `gpt 4.1 mini cchd Inp glbl Tokens`, quantities in `1K` token blocks.

Costs are the exact products of tokens and the price sheet, so each export adds up to what the calls cost.
"""

from __future__ import annotations

import csv
import io
import uuid
from datetime import date, datetime, timedelta
from decimal import Decimal

from phaselens.sample_logs import profile as P
from phaselens.sample_logs.billing_core import (
    MILLION, PRICE_SHEET, TOKEN_TYPES, aggregate, hour_start, of_provider,
)
from phaselens.sample_logs.simcall import SimCall

# ---- Amazon Bedrock, FOCUS 1.2 -------------------------------------------------------------------------
FOCUS_COLUMNS = (
    "BillingAccountId", "BillingAccountName", "BillingAccountType", "BillingCurrency", "BillingPeriodStart",
    "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "ChargeClass",
    "ChargeDescription", "ChargeFrequency", "ProviderName", "PublisherName", "InvoiceIssuerName", "InvoiceId",
    "ServiceCategory", "ServiceSubcategory", "ServiceName", "SkuId", "SkuPriceId", "SkuMeter", "SkuPriceDetails",
    "ConsumedQuantity", "ConsumedUnit", "PricingCategory", "PricingQuantity", "PricingUnit", "ListUnitPrice",
    "ListCost", "ContractedUnitPrice", "ContractedCost", "BilledCost", "EffectiveCost", "PricingCurrency",
    "PricingCurrencyListUnitPrice", "PricingCurrencyContractedUnitPrice", "PricingCurrencyEffectiveCost",
    "RegionId", "RegionName", "AvailabilityZone", "ResourceId", "ResourceName", "ResourceType", "SubAccountId",
    "SubAccountName", "SubAccountType", "CommitmentDiscountId", "CommitmentDiscountCategory",
    "CommitmentDiscountName", "CommitmentDiscountStatus", "CommitmentDiscountType", "CommitmentDiscountQuantity",
    "CommitmentDiscountUnit", "CapacityReservationId", "CapacityReservationStatus", "Tags",
)
AWS_PAYER, AWS_ACCOUNT, AWS_REGION = "123456789012", "210987654321", "us-east-1"
BEDROCK_BLOCK = Decimal(1000)  # Bedrock prices token usage types per 1,000 tokens
# token type -> (usage type suffix, SkuMeter, description words)
BEDROCK_USAGE = {
    "uncached_input": ("input-tokens", "Input Tokens", "input tokens"),
    "cache_read": ("cache-read-input-token-count", "Cache Read Input Tokens", "cache read input tokens"),
    "cache_write": ("cache-write-input-token-count", "Cache Write Input Tokens", "cache write input tokens"),
    "output": ("output-tokens", "Output Tokens", "output tokens"),
}
BEDROCK_MODEL_WORDS = {P.INLINE_MODEL: ("Claude4Sonnet", "Claude Sonnet 4")}  # usage-type name, display name
BEDROCK_ROUTE = "cross-region-global"
FOCUS_FIXED = {  # the columns every row of this account's Bedrock usage has in common
    "BillingAccountId": AWS_PAYER, "BillingAccountName": "Acme Corp", "BillingAccountType": "Management Account",
    "BillingCurrency": "USD", "ChargeCategory": "Usage", "ChargeFrequency": "Usage-Based", "ProviderName": "AWS",
    "PublisherName": "Anthropic", "InvoiceIssuerName": "Amazon Web Services, Inc.",
    "ServiceCategory": "AI and Machine Learning", "ServiceSubcategory": "Generative AI",
    "ServiceName": "Amazon Bedrock", "ConsumedUnit": "Tokens", "PricingCategory": "Standard",
    "PricingUnit": "1000 Tokens", "PricingCurrency": "USD", "RegionId": AWS_REGION,
    "RegionName": "US East (N. Virginia)", "ResourceType": "Inference Profile", "SubAccountId": AWS_ACCOUNT,
    "SubAccountName": "editor-prod", "SubAccountType": "Member Account",
}


def _num(value: Decimal | int) -> str:
    """A decimal as plain digits, no exponent and no trailing zeros."""
    return format(Decimal(value).normalize(), "f")


def _iso(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ")


def _month(day: date) -> tuple[datetime, datetime]:
    first = datetime(day.year, day.month, 1)
    return first, (first + timedelta(days=32)).replace(day=1)


def focus_bedrock(calls: list[SimCall], day: date) -> list[dict]:
    """FOCUS 1.2 rows of the Bedrock calls: one per UTC hour, model and token type, costs in exact USD."""
    period_start, period_end = _month(day)
    buckets = aggregate(of_provider(calls, "aws.bedrock"), lambda c: (c.model,), day, start=hour_start)
    rows = []
    for (start, model), b in buckets.items():
        usage_name, display = BEDROCK_MODEL_WORDS[model]
        arn = f"arn:aws:bedrock:{AWS_REGION}:{AWS_ACCOUNT}:inference-profile/{model}"
        for token_type in TOKEN_TYPES:
            tokens = b.tokens.get(token_type)
            if not tokens:
                continue
            suffix, meter, words = BEDROCK_USAGE[token_type]
            sku = f"USE1-{usage_name}-{suffix}-{BEDROCK_ROUTE}"
            unit_price = PRICE_SHEET[("aws.bedrock", model)][token_type] * BEDROCK_BLOCK / MILLION
            cost = b.usd[token_type]
            row = dict.fromkeys(FOCUS_COLUMNS, "")
            row.update(FOCUS_FIXED)
            row.update({
                "BillingPeriodStart": _iso(period_start), "BillingPeriodEnd": _iso(period_end),
                "ChargePeriodStart": _iso(start), "ChargePeriodEnd": _iso(start + timedelta(hours=1)),
                "ChargeDescription": f"{display} {words} (global cross-region)", "SkuId": sku,
                "SkuPriceId": f"{sku}.OnDemand", "SkuMeter": meter, "ConsumedQuantity": _num(tokens),
                "PricingQuantity": _num(Decimal(tokens) / BEDROCK_BLOCK), "ListUnitPrice": _num(unit_price),
                "ContractedUnitPrice": _num(unit_price), "PricingCurrencyListUnitPrice": _num(unit_price),
                "PricingCurrencyContractedUnitPrice": _num(unit_price), "ListCost": _num(cost),
                "ContractedCost": _num(cost), "BilledCost": _num(cost), "EffectiveCost": _num(cost),
                "PricingCurrencyEffectiveCost": _num(cost), "ResourceId": arn, "ResourceName": model,
            })
            rows.append(row)
    return rows


# ---- Azure OpenAI, Cost Management export (MCA, actual cost) ---------------------------------------------
AZURE_COLUMNS = (
    "date", "billingAccountId", "billingAccountName", "billingProfileId", "billingProfileName",
    "invoiceSectionName", "subscriptionId", "subscriptionName", "resourceGroupName", "resourceId",
    "resourceLocation", "meterCategory", "meterSubCategory", "meterName", "meterId", "meterRegion", "ProductName",
    "consumedService", "quantity", "unitOfMeasure", "effectivePrice", "unitPrice", "paygPrice",
    "costInBillingCurrency", "costInUsd", "billingCurrency", "exchangeRatePricingToBilling", "chargeType",
    "pricingModel", "publisherType", "tags",
)
AZURE_SUBSCRIPTION = "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"
AZURE_GROUP, AZURE_ACCOUNT = "rg-editor-prod", "acme-editor-prod"
AZURE_BLOCK = ("1K", Decimal(1000))  # the gpt-4.1 meters count tokens in blocks of 1,000
# token type -> meter direction words; the meter name is "<model words> <direction> glbl Tokens"
AZURE_DIRECTIONS = {"uncached_input": "Inp", "cache_read": "cchd Inp", "output": "Outp"}
AZURE_MODEL_WORDS = {"gpt-4.1-mini": "gpt 4.1 mini"}
AZURE_FIXED = {
    "billingAccountId": "/providers/Microsoft.Billing/billingAccounts/8d1e0f1a-2b3c-4d5e-8f70-1a2b3c4d5e6f:"
                        "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d_2019-05-31",
    "billingAccountName": "Acme Corp", "billingProfileId": "AB12-CD34-EF5-GH6", "billingProfileName": "Acme Corp",
    "invoiceSectionName": "Editor", "subscriptionId": AZURE_SUBSCRIPTION, "subscriptionName": "editor-prod",
    "resourceGroupName": AZURE_GROUP,
    "resourceId": f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{AZURE_GROUP}/providers/"
                  f"Microsoft.CognitiveServices/accounts/{AZURE_ACCOUNT}",
    "resourceLocation": "eastus2", "meterCategory": "Cognitive Services", "meterSubCategory": "Azure OpenAI",
    "meterRegion": "Global", "ProductName": "Azure OpenAI", "consumedService": "Microsoft.CognitiveServices",
    "unitOfMeasure": AZURE_BLOCK[0], "billingCurrency": "USD", "exchangeRatePricingToBilling": "1",
    "chargeType": "Usage", "pricingModel": "OnDemand", "publisherType": "Microsoft", "tags": '{"app":"editor"}',
}


def azure_meter_name(model: str, token_type: str) -> str:
    """The Cost Management meter name of a model's token type on a Global deployment."""
    return f"{AZURE_MODEL_WORDS[model]} {AZURE_DIRECTIONS[token_type]} glbl Tokens"


def azure_cost(calls: list[SimCall], day: date) -> list[dict]:
    """Azure cost export rows of the Azure OpenAI calls: one per UTC day, model and meter."""
    daily = lambda c: c.started_at.replace(hour=0, minute=0, second=0, microsecond=0)  # noqa: E731
    buckets = aggregate(of_provider(calls, "azure.ai.openai"), lambda c: (c.model,), day, start=daily)
    rows = []
    for (start, model), b in buckets.items():
        for token_type in TOKEN_TYPES:
            tokens = b.tokens.get(token_type)
            if not tokens:
                continue
            meter = azure_meter_name(model, token_type)
            block_price = PRICE_SHEET[("azure.ai.openai", model)][token_type] * AZURE_BLOCK[1] / MILLION
            cost = b.usd[token_type]
            row = dict.fromkeys(AZURE_COLUMNS, "")
            row.update(AZURE_FIXED)
            row.update({
                "date": start.strftime("%m/%d/%Y"), "meterName": meter,
                "meterId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"azure-meter:{meter}")),
                "quantity": _num(Decimal(tokens) / AZURE_BLOCK[1]), "effectivePrice": _num(block_price),
                "unitPrice": _num(block_price), "paygPrice": _num(block_price),
                "costInBillingCurrency": _num(cost), "costInUsd": _num(cost),
            })
            rows.append(row)
    return rows


def csv_text(rows: list[dict], columns: tuple[str, ...]) -> str:
    """Rows as CSV text with a header line (`\\n` line ends, fields quoted only where needed)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
