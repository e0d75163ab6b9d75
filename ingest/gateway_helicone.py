"""Helicone request logs -> `LlmCall`.

Two shapes (docs/formats.md#helicone-request-logs), told apart per row:
- REST `HeliconeRequest` (`/v1/request/query`): JSON array, `{"data": [...]}` or JSON Lines, with
  `response_status`, `delay_ms`, `costUSD` (dollars), `request_model`/`response_model`,
  `request_properties`.
- The ClickHouse `request_response_rmt` shape (a table dump, JSON Lines or CSV): `status`,
  `latency`, `model`, `properties`, and `cost` as an integer = USD × 1e9.

Decisions:
- `delay_ms` / `latency` and `time_to_first_token` are MILLISECONDS. A TTFT that is null, 0, or not
  shorter than the whole call is not a first-token time (non-streamed responses arrive whole), so
  ttft is None there and the source value is kept as `source_ttft_s`.
- `prompt_tokens` is taken to INCLUDE cache reads and writes (Helicone stores the provider's
  OpenAI-style prompt count; not verified against Helicone's code), so
  uncached = prompt − cache read − cache write. A prompt count smaller than the cache counts cannot
  include them and is kept as uncached, flagged `prompt_tokens_excludes_cache`.
- `costUSD` is dollars; the ClickHouse `cost` is divided by 1e9. A REST row's `cost` is not used.
- `provider` (`OPENAI`, `ANTHROPIC` ...) goes through `normalize_provider`.
- The `Helicone-Property-Feature` property -> `workload_hint`; `...-Environment` -> environment.
- HTTP status ≥ 400 -> status error (`error_type` = `http_<status>`).
- Request and response bodies (`signed_body_url`, `llmSchema`) are never read.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import ClassVar

from phaselens.models import LlmCall

from .base import Record, SourceFile
from .normalize import normalize_model, normalize_provider
from .readers import build_all, iter_records, peek_columns
from .values import (
    RecordError, after, as_dict, attrs_json, derive_timing, first_of, is_blank, parse_time, seconds_between,
    text_or_none, to_float, to_seconds, to_tokens, to_usd,
)

SOURCE = "helicone"
SNIFF_ID = "request_id"
SNIFF_ANY = {"delay_ms", "response_status", "costUSD", "time_to_first_token", "prompt_cache_read_tokens"}
SNIFF_TIME = {"request_created_at"}

CLICKHOUSE_COST_DIVISOR = 1_000_000_000
REST_MARKERS = ("response_status", "delay_ms", "costUSD", "request_model", "response_model")
MODEL_FIELDS = ("model_override", "response_model", "request_model", "model")
LATENCY_FIELDS = ("delay_ms", "latency")
STATUS_FIELDS = ("response_status", "status")
PROPERTY_FIELDS = ("request_properties", "properties")
USER_FIELDS = ("request_user_id", "user_id")
# Property names (lowercased, with or without the `helicone-property-` header prefix) -> LlmCall field.
PROPERTY_MAP = {
    "feature": "workload_hint", "workload": "workload_hint", "use-case": "workload_hint",
    "environment": "environment", "env": "environment",
    "team": "team", "project": "project", "service": "service",
}
PROPERTY_PREFIX = "helicone-property-"
KEPT_FIELDS = ("request_path", "country_code", "target_url", "organization_id", "prompt_id",
               "prompt_audio_tokens", "completion_audio_tokens", "total_tokens", "cache_reference_id")


def _properties(row: dict) -> dict[str, str]:
    out: dict[str, str] = {}
    for field in PROPERTY_FIELDS:
        for key, value in as_dict(row.get(field)).items():
            name = str(key).strip().lower()
            name = name[len(PROPERTY_PREFIX):] if name.startswith(PROPERTY_PREFIX) else name
            target = PROPERTY_MAP.get(name)
            if target and target not in out and not is_blank(value):
                out[target] = str(value).strip()
    return out


def _tokens(row: dict, attrs: dict) -> dict:
    prompt = to_tokens(row.get("prompt_tokens"), "prompt_tokens")
    read = to_tokens(row.get("prompt_cache_read_tokens"), "prompt_cache_read_tokens")
    write = to_tokens(row.get("prompt_cache_write_tokens"), "prompt_cache_write_tokens")
    cached = (read or 0) + (write or 0)
    uncached = prompt
    if prompt is not None and prompt >= cached:
        uncached = prompt - cached
    elif prompt is not None:
        attrs["prompt_tokens_excludes_cache"] = True
    return {
        "uncached_input_tokens": uncached,
        "cache_read_tokens": read,
        "cache_write_tokens": write,
        "output_tokens": to_tokens(row.get("completion_tokens"), "completion_tokens"),
    }


def _cost(row: dict, rest: bool) -> Decimal | None:
    if not is_blank(row.get("costUSD")):
        return to_usd(row["costUSD"], "costUSD")
    if not rest and not is_blank(row.get("cost")):
        return to_usd(row["cost"], "cost", divisor=CLICKHOUSE_COST_DIVISOR)
    return None


def _build(row: dict, index: int, locator: str) -> LlmCall:
    request_id = text_or_none(row.get(SNIFF_ID))
    if request_id is None:
        raise RecordError("missing_field", "request_id is empty")
    model_raw = text_or_none(first_of(row, MODEL_FIELDS))
    if model_raw is None:
        raise RecordError("missing_model", "none of model_override, response_model, request_model, model is set")
    rest = any(k in row for k in REST_MARKERS)
    attrs: dict = {k: row.get(k) for k in KEPT_FIELDS}
    start = parse_time(row.get("request_created_at"), "request_created_at")
    end = parse_time(row.get("response_created_at"), "response_created_at")
    if start and end and end < start:
        raise RecordError("end_before_start", f"response_created_at {end} is before request_created_at {start}")
    tokens = _tokens(row, attrs)
    e2e = to_seconds(first_of(row, LATENCY_FIELDS), "delay_ms/latency", per_second=1000)
    if e2e is None:
        e2e = seconds_between(start, end)
    ttft = to_seconds(row.get("time_to_first_token"), "time_to_first_token", per_second=1000)
    if ttft is not None and (ttft <= 0 or (e2e is not None and ttft >= e2e)):
        attrs["source_ttft_s"], ttft = ttft, None
    timing = derive_timing(e2e, ttft, tokens["output_tokens"])
    status = to_float(first_of(row, STATUS_FIELDS), "response_status")
    failed = status is not None and status >= 400
    attrs["http_status"] = None if status is None else int(status)
    props = _properties(row)
    return LlmCall(
        call_id=f"{SOURCE}:{request_id}",
        source=SOURCE,
        source_locator=locator,
        started_at=start,
        first_token_at=after(start, timing["ttft_s"]),
        ended_at=end,
        provider=normalize_provider(text_or_none(row.get("provider"))),
        model=normalize_model(model_raw),
        model_raw=model_raw,
        api_key=text_or_none(row.get("proxy_key_id")),
        user=text_or_none(first_of(row, USER_FIELDS)),
        streaming=True if timing["ttft_s"] is not None else None,
        status="error" if failed else "ok",
        error_type=f"http_{int(status)}" if failed else None,
        provided_cost_usd=_cost(row, rest),
        attributes_json=attrs_json(attrs),
        **props,
        **tokens,
        **timing,
    )


class HeliconeAdapter:
    """Reads Helicone request logs: REST `HeliconeRequest` JSON or the ClickHouse/CSV export."""

    name: ClassVar[str] = SOURCE
    kind: ClassVar[str] = "calls"

    def sniff(self, src: SourceFile) -> bool:
        """True when the first record has `request_id`, `request_created_at` and a Helicone-only field."""
        cols = peek_columns(src)
        return SNIFF_ID in cols and SNIFF_TIME <= cols and bool(SNIFF_ANY & cols or {"latency", "status"} <= cols)

    def parse(self, src: SourceFile) -> Iterator[Record]:
        """One `LlmCall` per logged request; unusable rows become Rejects."""
        return build_all(src, SOURCE, iter_records(src, SOURCE), _build)


ADAPTERS = [HeliconeAdapter()]
