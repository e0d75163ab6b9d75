"""OpenAI organization Usage API and Costs API pages (`GET /v1/organization/usage/*`, `/costs`).

A file is one page (`{"object": "page", "data": [bucket, ...]}`), a JSON array of pages, or JSON
Lines of pages. Bucket times are unix seconds (UTC).

Usage results (`organization.usage.completions.result`) become one line per token bucket:
uncached input (`input_uncached_tokens`, or `input_tokens - input_cached_tokens -
input_cache_write_tokens` when the newer field is absent), cache read, cache write and output.
The Usage API reports no money, so these lines carry the quantity with `cost = 0` and
`charge_category = "usage_quantity"`: reconciliation takes tokens from them and money from the
Costs API lines, and a sum of `cost` over a store holding both counts every dollar once.
Embeddings usage becomes uncached input; other usage endpoints (images, audio, vector stores) have
no tokens and are skipped. Buckets with nothing used are skipped.

Costs results (`organization.costs.result`) carry `amount.value` in dollars (a JSON number or a
decimal string) with a lower-case currency. `line_item` is `"<model>, <direction>[, qualifier]"`:
split on the first comma, `cached input` is matched before `input`, a `priority | ` style prefix is
the service tier, an `ft-` prefix marks a fine-tune, and a line item that names no token direction
(`web search tool calls`, `Vector storage`, `whisper-1, audio`) is token type `other`.
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
from .normalize import normalize_model, normalize_provider
from .readers import json_head
from .values import RecordError, parse_decimal, parse_timestamp, tokens_from

PROVIDER = normalize_provider("openai") or "openai"
COSTS_RESULT = "organization.costs.result"
USAGE_RESULT = re.compile(r"organization\.usage\.(?P<endpoint>[a-z_]+)\.result")
_MARKER = re.compile(r'"object"\s*:\s*"(organization\.(?:usage\.[a-z_]+|costs)\.result)"')
_PAGE = re.compile(r'"object"\s*:\s*"page"')

# token bucket, source field, description; uncached input has a computed fallback (see `_usage_quantities`)
COMPLETIONS_BUCKETS: list[tuple[TokenType, str]] = [
    ("uncached_input", "input_uncached_tokens"),
    ("cache_read", "input_cached_tokens"),
    ("cache_write", "input_cache_write_tokens"),
    ("output", "output_tokens"),
]
USAGE_REQUIRED: dict[str, tuple[str, ...]] = {
    "completions": ("input_tokens", "output_tokens"),
    "embeddings": ("input_tokens",),
}
USAGE_TAGS = ("user_id", "api_key_id", "service_tier", "batch", "num_model_requests")
COST_TAGS = ("api_key_id",)
# line-item direction (after the first comma), matched as a prefix in this order
COST_DIRECTIONS: list[tuple[str, TokenType]] = [
    ("cached input", "cache_read"),
    ("cache write", "cache_write"),
    ("cached write", "cache_write"),
    ("input", "uncached_input"),
    ("output", "output"),
]
_TIER_PREFIX = re.compile(r"^(?P<tier>[A-Za-z][\w -]*?)\s*\|\s*(?P<rest>.*)$")
_MODALITY = re.compile(r"^(?P<model>\S+)\s+(?P<modality>audio|image|text|realtime|video)$", re.I)


def parse_line_item(line_item: str | None) -> tuple[TokenType, str | None, dict[str, Any]]:
    """(token type, model as written, tags) of a Costs API line item such as `gpt-4o-mini-2024-07-18, cached input`."""
    if not line_item or not line_item.strip():
        return "other", None, {}
    text = line_item.strip()
    tags: dict[str, Any] = {}
    m = _TIER_PREFIX.match(text)
    if m:
        tags["service_tier"] = m["tier"].strip().lower()
        text = m["rest"]
    head, comma, tail = text.partition(",")
    if not comma:
        return "other", None, tags
    parts = [p.strip().lower() for p in tail.split(",")]
    direction, qualifiers = parts[0], [p for p in parts[1:] if p]
    if qualifiers:
        tags["qualifiers"] = qualifiers
    model = head.strip()
    mm = _MODALITY.match(model)
    if mm:
        model, tags["modality"] = mm["model"], mm["modality"].lower()
    token_type: TokenType = next((t for prefix, t in COST_DIRECTIONS if direction.startswith(prefix)), "other")
    return token_type, model or None, tags


def _model_name(model_raw: str | None, tags: dict[str, Any]) -> str | None:
    """The normalised model; a fine-tune (`ft-gpt-4o-...`) is named by its base model and tagged."""
    if not model_raw:
        return None
    if model_raw.lower().startswith("ft-"):
        tags["fine_tuned"] = True
        return normalize_model(model_raw[3:])
    return normalize_model(model_raw)


def _tokens(result: dict, field: str, *, required: bool = False) -> Decimal | None:
    value = parse_decimal(result.get(field), field, required=required)
    if value is not None and value < 0:
        raise RecordError("negative_tokens", f"{field} is {value}")
    return value


def _usage_quantities(result: dict, endpoint: str) -> list[tuple[TokenType, str, Decimal]]:
    """(token type, source field, tokens) of one usage result, disjoint buckets."""
    for field in USAGE_REQUIRED[endpoint]:
        _tokens(result, field, required=True)
    if endpoint == "embeddings":
        return [("uncached_input", "input_tokens", _tokens(result, "input_tokens", required=True))]
    out: list[tuple[TokenType, str, Decimal]] = []
    for token_type, field in COMPLETIONS_BUCKETS:
        qty = _tokens(result, field)
        if token_type == "uncached_input" and qty is None:
            total = _tokens(result, "input_tokens", required=True)
            qty = total - (_tokens(result, "input_cached_tokens") or 0) - (_tokens(result, "input_cache_write_tokens") or 0)
            if qty < 0:
                raise RecordError("negative_tokens", f"input_tokens {total} is less than cached + cache-write tokens")
        out.append((token_type, field, qty or Decimal(0)))
    return out


def _bucket_period(bucket: dict) -> tuple:
    return parse_timestamp(bucket.get("start_time"), "start_time"), parse_timestamp(bucket.get("end_time"), "end_time")


def _usage_records(result: dict, bucket: dict, where: str, maker: LineMaker, source: str) -> Iterator[Record]:
    endpoint = USAGE_RESULT.fullmatch(result.get("object") or "")["endpoint"]
    if endpoint not in USAGE_REQUIRED:
        yield Skip(source=source, locator=maker.src.locator(where), kind=f"openai_usage:{endpoint}")
        return
    start, end = _bucket_period(bucket)
    quantities = [q for q in _usage_quantities(result, endpoint) if q[2] != 0]
    if not quantities:
        yield Skip(source=source, locator=maker.src.locator(where), kind="openai_usage:zero")
        return
    tags = {k: result.get(k) for k in USAGE_TAGS}
    model_raw = result.get("model")
    model = _model_name(model_raw, tags)
    for token_type, field, qty in quantities:
        yield maker.line(
            where, period_start=start, period_end=end, provider=PROVIDER, token_type=token_type, cost=Decimal(0),
            currency="USD", quantity_tokens=qty, project=result.get("project_id"), model=model, model_raw=model_raw,
            charge_category="usage_quantity", sku=field, description=f"{endpoint} usage: {field}", tags=tags,
        )


def _cost_records(result: dict, bucket: dict, where: str, maker: LineMaker) -> Iterator[Record]:
    start, end = _bucket_period(bucket)
    amount = result.get("amount")
    if not isinstance(amount, dict):
        raise RecordError("missing_field", "amount is missing or not an object")
    cost = parse_decimal(amount.get("value"), "amount.value")
    currency = amount.get("currency")
    if not currency:
        raise RecordError("missing_field", "amount.currency is empty")
    token_type, model_raw, tags = parse_line_item(result.get("line_item"))
    model = _model_name(model_raw, tags)
    tags.update({k: result.get(k) for k in COST_TAGS})
    quantity = parse_decimal(result.get("quantity"), "quantity", required=False)
    if quantity is not None:
        tags["quantity"], tags["quantity_unit"] = str(quantity), result.get("quantity_unit")
    qty = tokens_from(quantity, result.get("quantity_unit")) if token_type != "other" else None
    yield maker.line(
        where, period_start=start, period_end=end, provider=PROVIDER, token_type=token_type, cost=cost,
        currency=str(currency), quantity_tokens=qty, project=result.get("project_id"), model=model,
        model_raw=model_raw, sku=result.get("line_item"), description=result.get("line_item") or "all line items",
        tags=tags,
    )


def _page_kind(src: SourceFile) -> str | None:
    """`usage` or `costs` for an OpenAI organization page (empty pages count as usage), else None."""
    page = json_head(src)
    if page is None:
        text = src.head_text
        if not _PAGE.search(text[:4096]):
            return None
        m = _MARKER.search(text)
        return None if m is None else ("costs" if m.group(1) == COSTS_RESULT else "usage")
    if not isinstance(page, dict) or page.get("object") != "page" or not isinstance(page.get("data"), list):
        return None
    for bucket in page["data"]:
        for result in (bucket.get("results") if isinstance(bucket, dict) else None) or []:
            kind = result.get("object") if isinstance(result, dict) else None
            if kind == COSTS_RESULT:
                return "costs"
            if isinstance(kind, str) and USAGE_RESULT.fullmatch(kind):
                return "usage"
            return None
    return "usage"


class _OpenAIPages:
    """Reads OpenAI organization pages; usage and cost results are told apart by their `object`."""

    kind: ClassVar[str] = "billing"
    name: ClassVar[str]
    page_kind: ClassVar[str]

    def sniff(self, src: SourceFile) -> bool:
        """True for a page (or pages) whose results are of this adapter's kind."""
        return _page_kind(src) == self.page_kind

    def parse(self, src: SourceFile) -> Iterator[Record]:
        """One line per token bucket (usage) or per result (costs); bad results become rejects."""
        maker = LineMaker(src, self.name)
        yield from bucket_results(src, self.name, lambda result, bucket, at: self._result(result, bucket, at, maker))

    def _result(self, result: Any, bucket: dict, where: str, maker: LineMaker) -> Iterator[Record]:
        kind = result.get("object") if isinstance(result, dict) else None
        if kind == COSTS_RESULT:
            yield from _cost_records(result, bucket, where, maker)
        elif isinstance(kind, str) and USAGE_RESULT.fullmatch(kind):
            yield from _usage_records(result, bucket, where, maker, self.name)
        else:
            raise RecordError("unsupported_record", f"result object {kind!r} is neither usage nor costs")


class OpenAIUsageAdapter(_OpenAIPages):
    """OpenAI Usage API pages: token quantities per bucket, no money (`charge_category = usage_quantity`)."""

    name: ClassVar[str] = "openai_usage"
    page_kind: ClassVar[str] = "usage"


class OpenAICostsAdapter(_OpenAIPages):
    """OpenAI Costs API pages: dollars per line item and day."""

    name: ClassVar[str] = "openai_costs"
    page_kind: ClassVar[str] = "costs"


ADAPTERS = [OpenAIUsageAdapter(), OpenAICostsAdapter()]
