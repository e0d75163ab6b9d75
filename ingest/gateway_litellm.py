"""LiteLLM proxy spend logs (`LiteLLM_SpendLogs` rows) -> `LlmCall`.

Shapes: the `/spend/logs` JSON array, `{"data": [...]}`, JSON Lines, or a CSV export of the table
(`metadata` and `request_tags` cells then hold JSON strings). Reference: docs/formats.md#litellm-spend-logs.

Decisions:
- TTFT = `completionStartTime − startTime`, but only when `completionStartTime` differs from
  `endTime`: LiteLLM falls back to `endTime` when it saw no first chunk (non-streamed and
  pass-through calls), and that value says nothing about the prefill/decode split (ttft None,
  `timing_source` none).
- e2e = `request_duration_ms` when present, else `endTime − startTime`.
- Cache counts are not columns of SpendLogs; they are read from the usage objects LiteLLM keeps in
  `metadata` (`usage_object`, `additional_usage_values`, or `metadata` itself), see `USAGE_*` below.
- `prompt_tokens` is LiteLLM's normalised, OpenAI-style count, which INCLUDES cache reads and
  writes for every provider: LiteLLM's Anthropic transformation adds `cache_read_input_tokens` and
  `cache_creation_input_tokens` into `prompt_tokens`. So uncached = prompt − cache read − cache write.
  Two exceptions keep a count from going wrong: a usage object in Anthropic's raw shape
  (`input_tokens`, which excludes the cache) gives uncached directly, and a `prompt_tokens` smaller
  than the cache counts cannot include them, so it is taken as uncached as it stands.
- `spend` (USD float) -> `provided_cost_usd`, as the exact decimal of the written number.
- The row's `messages`, `response` and `proxy_server_request` (prompt/completion text) are never read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from phaselens.models import LlmCall

from .base import Record, SourceFile
from .normalize import normalize_model, normalize_provider
from .readers import build_all, iter_records, peek_columns
from .values import (
    RecordError, as_dict, attrs_json, derive_timing, first_of, is_blank, json_cell, parse_time, seconds_between,
    text_or_none, to_seconds, to_tokens, to_usd,
)

SOURCE = "litellm"
SNIFF_COLUMNS = {"request_id", "spend", "startTime"}
SNIFF_ANY = {"completionStartTime", "call_type", "prompt_tokens", "api_key"}

# Where usage objects live inside `metadata`, searched in order.
USAGE_PLACES = ("usage_object", "additional_usage_values", "")
USAGE_CACHE_READ = (
    "cache_read_input_tokens", "prompt_tokens_details.cached_tokens", "input_tokens_details.cached_tokens",
)
USAGE_CACHE_WRITE = ("cache_creation_input_tokens", "prompt_tokens_details.cache_creation_tokens")
USAGE_CACHE_WRITE_1H = (
    "cache_creation.ephemeral_1h_input_tokens", "cache_creation_token_details.ephemeral_1h_input_tokens",
)
USAGE_REASONING = ("completion_tokens_details.reasoning_tokens", "output_tokens_details.reasoning_tokens")
USAGE_RAW_ANTHROPIC_INPUT = "input_tokens"  # Anthropic's own count: already excludes the cache

OPERATIONS = {
    "completion": "chat", "acompletion": "chat",
    "text_completion": "text_completion", "atext_completion": "text_completion",
    "embedding": "embeddings", "aembedding": "embeddings",
    "image_generation": "image_generation", "aimage_generation": "image_generation",
    "responses": "chat", "aresponses": "chat",
    "anthropic_messages": "chat",
    "transcription": "transcription", "atranscription": "transcription",
    "speech": "speech", "aspeech": "speech",
    "rerank": "rerank", "arerank": "rerank",
}
# Keys of `metadata.spend_logs_metadata`, and tag prefixes, that name a feature/workload.
FEATURE_KEYS = ("feature", "workload", "use_case", "usecase", "app", "workflow", "task")
ENVIRONMENT_KEYS = ("environment", "env")
ENVIRONMENT_TAGS = {"prod", "production", "staging", "stage", "dev", "development", "test", "qa"}
FAILURE_STATUSES = {"failure", "failed", "error"}
KEPT_COLUMNS = ("call_type", "model_id", "model_group", "api_base", "cache_hit", "session_id",
                "organization_id", "request_tags", "team_id", "mcp_namespaced_tool_name", "agent_id")


def _tags(row: dict) -> list[str]:
    tags = json_cell(row.get("request_tags"))
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",")] if tags.strip() else []
    return [str(t) for t in tags] if isinstance(tags, list) else []


def _tag_value(tags: list[str], keys: tuple[str, ...]) -> str | None:
    for tag in tags:
        for sep in (":", "="):
            key, found, value = tag.partition(sep)
            if found and key.strip().lower() in keys and value.strip():
                return value.strip()
    return None


def _usage_value(metadata: dict, paths: tuple[str, ...]) -> int | None:
    for place in USAGE_PLACES:
        obj = as_dict(metadata.get(place)) if place else metadata
        value = first_of(obj, paths)
        if value is not None:
            return to_tokens(value, f"metadata.{place + '.' if place else ''}{paths[0]}")
    return None


def _raw_anthropic_input(metadata: dict) -> int | None:
    for place in USAGE_PLACES[:2]:
        obj = as_dict(metadata.get(place))
        if USAGE_RAW_ANTHROPIC_INPUT in obj and "prompt_tokens" not in obj:
            return to_tokens(obj[USAGE_RAW_ANTHROPIC_INPUT], f"metadata.{place}.input_tokens")
    return None


def _tokens(row: dict, metadata: dict, attrs: dict) -> dict:
    prompt = to_tokens(row.get("prompt_tokens"), "prompt_tokens")
    output = to_tokens(row.get("completion_tokens"), "completion_tokens")
    read = _usage_value(metadata, USAGE_CACHE_READ)
    write = _usage_value(metadata, USAGE_CACHE_WRITE)
    write_1h = _usage_value(metadata, USAGE_CACHE_WRITE_1H)
    raw_input = _raw_anthropic_input(metadata)
    cached = (read or 0) + (write or 0)
    if raw_input is not None:
        uncached = raw_input
    elif prompt is not None and prompt >= cached:
        uncached = prompt - cached
    else:
        uncached = prompt
        if prompt is not None:
            attrs["prompt_tokens_excludes_cache"] = True
    return {
        "uncached_input_tokens": uncached,
        "cache_read_tokens": read,
        "cache_write_tokens": write,
        "cache_write_1h_tokens": write_1h,
        "output_tokens": output,
        "reasoning_tokens": _usage_value(metadata, USAGE_REASONING),
    }


def _timing(row: dict, attrs: dict, output_tokens: int | None) -> tuple[dict, dict]:
    start = parse_time(row.get("startTime"), "startTime")
    end = parse_time(row.get("endTime"), "endTime")
    first = parse_time(row.get("completionStartTime"), "completionStartTime")
    if start and end and end < start:
        raise RecordError("end_before_start", f"endTime {end} is before startTime {start}")
    e2e = to_seconds(row.get("request_duration_ms"), "request_duration_ms", per_second=1000)
    if e2e is None:
        e2e = seconds_between(start, end)
    ttft = None
    if first is not None and first != end and start is not None:
        ttft = seconds_between(start, first)
        if ttft < 0:
            attrs["source_ttft_s"], ttft = ttft, None
    elif first is not None and first == end:
        attrs["completion_start_is_end"] = True  # LiteLLM's fallback: no first chunk was seen
    timing = derive_timing(e2e, ttft, output_tokens)
    if ttft is not None and timing["ttft_s"] is None:
        attrs["source_ttft_s"] = ttft
    times = {"started_at": start, "ended_at": end, "first_token_at": first if timing["ttft_s"] is not None else None}
    return timing, times


def _build(row: dict, index: int, locator: str) -> LlmCall:
    request_id = row.get("request_id")
    if is_blank(request_id):
        raise RecordError("missing_field", "request_id is empty")
    model_raw = row.get("model")
    if is_blank(model_raw):
        model_raw = row.get("model_group")
    if is_blank(model_raw):
        raise RecordError("missing_model", "neither model nor model_group is set")
    model_raw = str(model_raw)
    metadata = as_dict(row.get("metadata"))
    attrs = {k: row.get(k) for k in KEPT_COLUMNS}
    attrs["request_tags"] = _tags(row) or None
    tokens = _tokens(row, metadata, attrs)
    timing, times = _timing(row, attrs, tokens["output_tokens"])

    provider = row.get("custom_llm_provider")
    if is_blank(provider) and "/" in model_raw:
        provider = model_raw.split("/", 1)[0]
    status_text = str(first_of(row, ("status",)) or metadata.get("status") or "success").strip().lower()
    error_info = as_dict(metadata.get("error_information"))
    failed = status_text in FAILURE_STATUSES
    if failed:
        attrs["error_code"] = error_info.get("error_code")
    spend_meta = as_dict(metadata.get("spend_logs_metadata"))
    tags = attrs["request_tags"] or []
    workload = first_of(spend_meta, FEATURE_KEYS) or _tag_value(tags, FEATURE_KEYS)
    environment = first_of(spend_meta, ENVIRONMENT_KEYS) or _tag_value(tags, ENVIRONMENT_KEYS)
    if environment is None:
        environment = next((t for t in tags if t.strip().lower() in ENVIRONMENT_TAGS), None)
    call_type = str(row.get("call_type") or "").strip()

    return LlmCall(
        call_id=f"{SOURCE}:{request_id}",
        source=SOURCE,
        source_locator=locator,
        trace_id=text_or_none(row.get("session_id")),
        provider=normalize_provider(text_or_none(provider)),
        model=normalize_model(model_raw),
        model_raw=model_raw,
        operation=OPERATIONS.get(call_type, call_type or "chat"),
        workload_hint=text_or_none(workload),
        team=text_or_none(first_of(metadata, ("user_api_key_team_alias",)) or first_of(row, ("team_id",))
                          or first_of(metadata, ("user_api_key_team_id",))),
        api_key=text_or_none(first_of(metadata, ("user_api_key_alias",)) or first_of(row, ("api_key",))),
        user=text_or_none(first_of(row, ("end_user", "user")) or first_of(metadata, ("user_api_key_user_id",))),
        environment=text_or_none(environment),
        streaming=True if timing["ttft_s"] is not None else None,
        status="error" if failed else "ok",
        error_type=(str(error_info.get("error_class") or error_info.get("error_code") or "failure")
                    if failed else None),
        provided_cost_usd=to_usd(row.get("spend"), "spend"),
        attributes_json=attrs_json(attrs),
        **tokens,
        **timing,
        **times,
    )


class LiteLLMAdapter:
    """Reads LiteLLM `LiteLLM_SpendLogs` rows (JSON, JSON Lines or CSV)."""

    name: ClassVar[str] = SOURCE
    kind: ClassVar[str] = "calls"

    def sniff(self, src: SourceFile) -> bool:
        """True when the first record has SpendLogs' `request_id`, `spend` and `startTime` columns."""
        cols = peek_columns(src)
        return SNIFF_COLUMNS <= cols and bool(SNIFF_ANY & cols)

    def parse(self, src: SourceFile) -> Iterator[Record]:
        """One `LlmCall` per spend-log row; unusable rows become Rejects."""
        return build_all(src, SOURCE, iter_records(src, SOURCE), _build)


ADAPTERS = [LiteLLMAdapter()]
