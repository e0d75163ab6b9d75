"""Anthropic Admin API reports: the messages usage report and the cost report.

A file is one page (`{"data": [bucket, ...], "has_more": ..., "next_page": ...}`), a JSON array of
pages, or JSON Lines of pages. Buckets carry RFC 3339 `starting_at` / `ending_at`.

Usage results become one line per token bucket: `uncached_input_tokens`, `cache_read_input_tokens`,
cache creation (nested `cache_creation.{ephemeral_5m_input_tokens, ephemeral_1h_input_tokens}` or
the flattened `cache_creation_5m_input_tokens` / `cache_creation_1h_input_tokens`; the two TTLs stay
separate lines, told apart by `sku`) and `output_tokens`. Grouping fields that are null simply
stay null. Like OpenAI usage, these lines carry tokens but no money: `cost = 0` and
`charge_category = "usage_quantity"`, so reconciliation takes tokens from them and money from the
cost report. `server_tool_use.web_search_requests` is kept in `tags_json`.

Cost results carry `amount` as a decimal string in CENTS (`"98.40"` is $0.984), read exactly. The
token type comes from `token_type` (null unless the report was grouped by description: then the line
is `other`; an unknown value is read by its words, so a new cache TTL is still a cache write);
`cost_type` web_search, code_execution and session_usage are `other`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, ClassVar

from phaselens.models import Skip
from phaselens.models.records import TokenType

from .base import Record, SourceFile
from .billing_lines import LineMaker, bucket_results
from .billing_vocab import token_type_from_text
from .normalize import normalize_provider
from .readers import Row, json_head
from .values import RecordError, parse_decimal, parse_timestamp

PROVIDER = normalize_provider("anthropic") or "anthropic"
CENTS_PER_UNIT = Decimal(100)

# token bucket, sku (the official field path), accepted spellings
USAGE_FIELDS: list[tuple[TokenType, str, tuple[str, ...]]] = [
    ("uncached_input", "uncached_input_tokens", ()),
    ("cache_read", "cache_read_input_tokens", ()),
    ("cache_write", "cache_creation.ephemeral_5m_input_tokens", ("cache_creation_5m_input_tokens",)),
    ("cache_write", "cache_creation.ephemeral_1h_input_tokens", ("cache_creation_1h_input_tokens",)),
    ("output", "output_tokens", ()),
]
# an older total without the TTL split, used only when neither TTL field is present
CACHE_CREATION_TOTAL = "cache_creation_input_tokens"
USAGE_TAGS = {
    "api_key_id": "api_key_id", "service_tier": "service_tier", "context_window": "context_window",
    "inference_geo": "inference_geo", "speed": "speed", "service_account_id": "service_account_id",
    "web_search_requests": "server_tool_use.web_search_requests",
}
COST_TOKEN_TYPES: dict[str, TokenType] = {
    "uncached_input_tokens": "uncached_input",
    "cache_read_input_tokens": "cache_read",
    "cache_creation.ephemeral_5m_input_tokens": "cache_write",
    "cache_creation.ephemeral_1h_input_tokens": "cache_write",
    "output_tokens": "output",
}
COST_TAGS = ("cost_type", "service_tier", "context_window", "inference_geo")
_USAGE_KEY = re.compile(r'"(?:uncached_input_tokens|cache_read_input_tokens|cache_creation)"\s*:')
_COST_KEY = re.compile(r'"amount"\s*:')


def _period(bucket: dict) -> tuple:
    return (parse_timestamp(bucket.get("starting_at"), "starting_at"),
            parse_timestamp(bucket.get("ending_at"), "ending_at"))


def _usage_quantities(row: Row) -> list[tuple[TokenType, str, Decimal]]:
    """(token type, sku, tokens) per bucket present in a usage result."""
    out: list[tuple[TokenType, str, Decimal]] = []
    fields = list(USAGE_FIELDS)
    if row.get(USAGE_FIELDS[2][1], *USAGE_FIELDS[2][2], USAGE_FIELDS[3][1], *USAGE_FIELDS[3][2]) is None:
        fields.append(("cache_write", CACHE_CREATION_TOTAL, ()))
    for token_type, sku, aliases in fields:
        qty = parse_decimal(row.get(sku, *aliases), sku, required=False)
        if qty is None:
            continue
        if qty < 0:
            raise RecordError("negative_tokens", f"{sku} is {qty}")
        out.append((token_type, sku, qty))
    if not out:
        raise RecordError("missing_field", "no token field (uncached_input_tokens, output_tokens ...) in the result")
    return out


def _usage_records(result: dict, bucket: dict, where: str, maker: LineMaker, source: str) -> Iterator[Record]:
    row = Row.of(result, where)
    start, end = _period(bucket)
    quantities = [q for q in _usage_quantities(row) if q[2] != 0]
    if not quantities:
        yield Skip(source=source, locator=maker.src.locator(where), kind="anthropic_usage:zero")
        return
    tags = {tag: row.get(field) for tag, field in USAGE_TAGS.items()}
    for token_type, sku, qty in quantities:
        yield maker.line(
            where, period_start=start, period_end=end, provider=PROVIDER, token_type=token_type, cost=Decimal(0),
            currency="USD", quantity_tokens=qty, account=row.get("account_id"), project=row.get("workspace_id"),
            model_raw=row.text("model"), charge_category="usage_quantity", sku=sku,
            description=f"messages usage: {sku}", tags=tags,
        )


def _cost_records(result: dict, bucket: dict, where: str, maker: LineMaker) -> Iterator[Record]:
    row = Row.of(result, where)
    start, end = _period(bucket)
    cents = parse_decimal(row.get("amount"), "amount")
    cost_type, token_field = row.text("cost_type"), row.text("token_type")
    token_type: TokenType = "other"
    if cost_type in (None, "tokens") and token_field:
        # a token type this table does not know yet still keeps its money: read its words, else `other`
        token_type = COST_TOKEN_TYPES.get(token_field) or token_type_from_text(token_field.replace("_", " ")) or "other"
    yield maker.line(
        where, period_start=start, period_end=end, provider=PROVIDER, token_type=token_type,
        cost=cents / CENTS_PER_UNIT, currency=row.text("currency") or "USD", project=row.get("workspace_id"),
        account=row.get("account_id"), model_raw=row.text("model"), sku=token_field or cost_type,
        description=row.get("description"), tags={k: row.get(k) for k in COST_TAGS},
    )


def _first_result(src: SourceFile) -> tuple[bool, Any]:
    """(looks like an Anthropic report page, its first result or None)."""
    page = json_head(src)
    if page is None:
        return False, None
    if not isinstance(page, dict) or not isinstance(page.get("data"), list) or "object" in page:
        return False, None
    for bucket in page["data"]:
        if not isinstance(bucket, dict) or "starting_at" not in bucket or not isinstance(bucket.get("results"), list):
            return False, None
        if bucket["results"]:
            return True, bucket["results"][0]
    return True, None


def _report_kind(src: SourceFile) -> str | None:
    """`usage` or `cost` for an Anthropic Admin API report (empty pages count as usage), else None."""
    is_page, first = _first_result(src)
    if not is_page:
        text = src.head_text
        if src.first_json() is not None or '"starting_at"' not in text[:4096]:
            return None
        return "usage" if _USAGE_KEY.search(text) else "cost" if _COST_KEY.search(text) else None
    if first is None:
        return "usage"
    if not isinstance(first, dict):
        return None
    if "amount" in first:
        return "cost"
    if any(k in first for k in ("uncached_input_tokens", "cache_read_input_tokens", "cache_creation", "output_tokens")):
        return "usage"
    return None


class _AnthropicReport:
    """Reads Anthropic usage or cost report pages; results are told apart by their fields."""

    kind: ClassVar[str] = "billing"
    name: ClassVar[str]
    report: ClassVar[str]

    def sniff(self, src: SourceFile) -> bool:
        """True for report pages whose results are of this adapter's kind."""
        return _report_kind(src) == self.report

    def parse(self, src: SourceFile) -> Iterator[Record]:
        """One line per token bucket (usage) or per result (cost); bad results become rejects."""
        maker = LineMaker(src, self.name)
        yield from bucket_results(src, self.name, lambda result, bucket, at: self._result(result, bucket, at, maker))

    def _result(self, result: Any, bucket: dict, where: str, maker: LineMaker) -> Iterator[Record]:
        if not isinstance(result, dict):
            raise RecordError("malformed_row", "a result that is not an object")
        if "amount" in result:
            yield from _cost_records(result, bucket, where, maker)
        else:
            yield from _usage_records(result, bucket, where, maker, self.name)


class AnthropicUsageAdapter(_AnthropicReport):
    """Anthropic messages usage report: token quantities per bucket, no money (`usage_quantity`)."""

    name: ClassVar[str] = "anthropic_usage"
    report: ClassVar[str] = "usage"


class AnthropicCostAdapter(_AnthropicReport):
    """Anthropic cost report: money per bucket and description, amounts in cents."""

    name: ClassVar[str] = "anthropic_cost"
    report: ClassVar[str] = "cost"


ADAPTERS = [AnthropicUsageAdapter(), AnthropicCostAdapter()]
