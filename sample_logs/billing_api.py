"""The providers' own API exports of the simulated day: OpenAI Costs and Usage pages, Anthropic cost and usage reports.

Shapes follow docs/formats.md#openai-usage-api (OpenAI: 1-day UTC buckets, unix seconds, dollars) and docs/formats.md#anthropic-usage-report (Anthropic:
RFC 3339 bucket bounds, amounts as decimal strings in cents). Only the calls each provider bills
directly are in them: Claude on Bedrock and gpt-4.1-mini on Azure OpenAI are in `billing_cloud`.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime
from decimal import Decimal

from phaselens.sample_logs.billing_core import TOKEN_TYPES, Bucket, aggregate, bucket_end, of_provider
from phaselens.sample_logs.simcall import SimCall

UNTRACED_PROJECT = "proj_batch"  # planted gap 1: the OpenAI project of the uninstrumented batch job
OPENAI_PROJECTS = {"batch-summarizer": UNTRACED_PROJECT}  # service -> project; others: proj_editor
DEFAULT_OPENAI_PROJECT = "proj_editor"
ANTHROPIC_WORKSPACE = "wrkspc_01EditorProd"

# Anthropic cost report: our token type -> (token_type field, description suffix)
ANTHROPIC_COST_TYPES = {
    "uncached_input": ("uncached_input_tokens", "Input Tokens"),
    "cache_read": ("cache_read_input_tokens", "Cache Read Input Tokens"),
    "cache_write": ("cache_creation.ephemeral_5m_input_tokens", "Cache Write (5m) Input Tokens"),
    "output": ("output_tokens", "Output Tokens"),
}
ANTHROPIC_NAMES = {"claude-sonnet-4-20250514": "Claude Sonnet 4"}
# OpenAI Costs API line-item direction per token type
OPENAI_DIRECTIONS = {"uncached_input": "input", "cache_read": "cached input", "cache_write": "cache write",
                     "output": "output"}


def openai_project(call: SimCall) -> str:
    """The OpenAI project a call is billed to: one per calling service group."""
    return OPENAI_PROJECTS.get(call.service, DEFAULT_OPENAI_PROJECT)


def _unix(ts: datetime) -> int:
    return int(ts.replace(tzinfo=UTC).timestamp())


def _rfc3339(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ")


def _dollars(value: Decimal) -> float:
    """A JSON number for a dollar amount (nanodollar precision, few enough digits to round-trip exactly)."""
    return float(value.quantize(Decimal("1e-9")))


def _buckets(buckets: dict[tuple, Bucket], results, provider: str, fmt, keys: tuple[str, str]) -> list[dict]:
    """A report's `data`: buckets ordered by start, each holding the results `results(key, bucket)` yields."""
    by_start: dict[datetime, list] = defaultdict(list)
    for (start, *key), b in buckets.items():
        by_start[start].extend(results(tuple(key), b))
    return [{"object": "bucket", keys[0]: fmt(s), keys[1]: fmt(bucket_end(s, provider)), "results": r}
            for s, r in sorted(by_start.items())]


def openai_usage(calls: list[SimCall], day: date) -> list[dict]:
    """OpenAI Usage API pages: completions and embeddings, grouped by project and model."""
    def completions(key: tuple, b: Bucket) -> list[dict]:
        proj, model = key
        t = b.tokens
        return [{
            "object": "organization.usage.completions.result",
            "input_tokens": t["uncached_input"] + t["cache_read"] + t["cache_write"],
            "input_cached_tokens": t["cache_read"], "input_cache_write_tokens": t["cache_write"],
            "input_uncached_tokens": t["uncached_input"], "output_tokens": t["output"],
            "input_audio_tokens": 0, "output_audio_tokens": 0, "num_model_requests": b.requests,
            "project_id": proj, "user_id": None, "api_key_id": None, "model": model, "batch": False,
            "service_tier": "default",
        }]

    def embeddings(key: tuple, b: Bucket) -> list[dict]:
        proj, model = key
        return [{"object": "organization.usage.embeddings.result", "input_tokens": b.tokens["uncached_input"],
                 "num_model_requests": b.requests, "project_id": proj, "user_id": None, "api_key_id": None,
                 "model": model, "batch": False}]

    openai = of_provider(calls, "openai")
    pages = []
    for operation, results in (("chat", completions), ("embeddings", embeddings)):
        subset = [c for c in openai if (c.operation == "embeddings") == (operation == "embeddings")]
        buckets = aggregate(subset, lambda c: (openai_project(c), c.response_model), day)
        data = _buckets(buckets, results, "openai", _unix, ("start_time", "end_time"))
        pages.append({"object": "page", "data": data, "has_more": False, "next_page": None})
    return pages


def openai_costs(calls: list[SimCall], day: date) -> dict:
    """OpenAI Costs API page: dollars per project and line item (`<model>, <direction>`) and UTC day."""
    def results(key: tuple, b: Bucket) -> list[dict]:
        proj, model = key
        return [
            {"object": "organization.costs.result", "amount": {"value": _dollars(b.usd[t]), "currency": "usd"},
             "line_item": f"{model}, {OPENAI_DIRECTIONS[t]}", "project_id": proj, "api_key_id": None,
             "quantity": b.tokens[t], "quantity_unit": "tokens"}
            for t in TOKEN_TYPES if b.tokens.get(t)
        ]

    buckets = aggregate(of_provider(calls, "openai"), lambda c: (openai_project(c), c.response_model), day)
    data = _buckets(buckets, results, "openai", _unix, ("start_time", "end_time"))
    return {"object": "page", "data": data, "has_more": False, "next_page": None}


def anthropic_usage(calls: list[SimCall], day: date) -> dict:
    """Anthropic messages usage report: tokens per workspace and model, in the export's local-day buckets."""
    def results(key: tuple, b: Bucket) -> list[dict]:
        (model,) = key
        t = b.tokens
        return [{
            "uncached_input_tokens": t["uncached_input"], "cache_read_input_tokens": t["cache_read"],
            "cache_creation": {"ephemeral_5m_input_tokens": t["cache_write"], "ephemeral_1h_input_tokens": 0},
            "output_tokens": t["output"], "server_tool_use": {"web_search_requests": 0}, "api_key_id": None,
            "workspace_id": ANTHROPIC_WORKSPACE, "model": model, "service_tier": "standard",
            "context_window": "0-200k", "inference_geo": "global",
        }]

    buckets = aggregate(of_provider(calls, "anthropic"), lambda c: (c.response_model,), day)
    data = _strip_object(_buckets(buckets, results, "anthropic", _rfc3339, ("starting_at", "ending_at")))
    return {"data": data, "has_more": False, "next_page": None}


def anthropic_cost(calls: list[SimCall], day: date) -> dict:
    """Anthropic cost report: amounts in cents (decimal strings) per workspace and description."""
    def results(key: tuple, b: Bucket) -> list[dict]:
        (model,) = key
        out = []
        for t in TOKEN_TYPES:
            if not b.tokens.get(t):
                continue
            field, label = ANTHROPIC_COST_TYPES[t]
            cents = (b.usd[t] * 100).quantize(Decimal("1e-7"))
            out.append({
                "currency": "USD", "amount": format(cents.normalize(), "f"), "workspace_id": ANTHROPIC_WORKSPACE,
                "description": f"{ANTHROPIC_NAMES[model]} Usage - {label}", "cost_type": "tokens",
                "token_type": field, "model": model, "service_tier": "standard", "context_window": "0-200k",
                "inference_geo": "global",
            })
        return out

    buckets = aggregate(of_provider(calls, "anthropic"), lambda c: (c.response_model,), day)
    data = _strip_object(_buckets(buckets, results, "anthropic", _rfc3339, ("starting_at", "ending_at")))
    return {"data": data, "has_more": False, "next_page": None}


def _strip_object(data: list[dict]) -> list[dict]:
    """Anthropic buckets carry no `object` field."""
    return [{k: v for k, v in b.items() if k != "object"} for b in data]
