"""Langfuse observation exports -> `LlmCall` (GENERATION) or `Skip` (SPAN, EVENT, ...).

Shapes: the public API / UI batch export as a JSON array or `{"data": [...]}`, JSON Lines, or CSV
(whose `usageDetails`, `costDetails`, `metadata` cells are JSON strings). Reference: docs/formats.md#langfuse-observations.

Decisions:
- Only `type` GENERATION is a model call; every other observation type is a `Skip`.
- Token buckets from `usageDetails` (free-form keys; tables below). `input` already EXCLUDES cache
  reads and writes (Langfuse subtracts them on ingest), so it is the uncached bucket as it stands.
  `output` EXCLUDES reasoning (Langfuse subtracts reasoning and audio from it), so
  output_tokens = output + reasoning, and reasoning_tokens = the reasoning key. Audio token keys are
  kept in `attributes_json`, not added to a bucket. The deprecated `usage {input, output}` object and
  `promptTokens`/`completionTokens` are the fallback when `usageDetails` is absent (with the same
  reading, since no cache detail comes with them).
- `latency` and `timeToFirstToken` are SECONDS. `latency` is checked against `endTime − startTime`:
  when it matches the span only after dividing by 1000 it was written in ms (unit slip) and is
  converted; when it matches neither, the timestamps win and the source value is kept as
  `source_latency_s`. A `latency` with no timestamps to check against that is above
  `LATENCY_OUTLIER_S` is kept but flagged `latency_outlier` (exports have been seen with `latency: 1707`).
- TTFT = `timeToFirstToken`, else `completionStartTime − startTime`.
- `costDetails.total` -> `provided_cost_usd` (else the sum of the other cost keys, which are
  disjoint, else the v2 `totalCost` / deprecated `calculatedTotalCost`).
- `traceName` / `trace.name` -> `workload_hint`; `level` ERROR -> status error.
- `input`, `output` (prompt and completion) are never read.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import ClassVar

from phaselens.models import LlmCall, Skip

from .base import Record, SourceFile
from .normalize import normalize_model, normalize_provider
from .readers import build_all, iter_records, peek_columns
from .values import (
    RecordError, after, as_dict, attrs_json, derive_timing, first_of, parse_time, seconds_between, text_or_none,
    to_seconds, to_tokens, to_usd,
)

SOURCE = "langfuse"
SNIFF_COLUMNS = {"id", "traceId", "type", "startTime"}
CALL_TYPES = {"GENERATION"}

# usageDetails keys, by bucket; the first key present wins (they are aliases, never summed).
USAGE_INPUT = ("input", "input_tokens", "prompt_tokens")
USAGE_OUTPUT = ("output", "output_tokens", "completion_tokens")
USAGE_CACHE_READ = ("input_cached_tokens", "input_cache_read", "cache_read_input_tokens", "prompt_details.cache_read")
USAGE_CACHE_WRITE = ("input_cache_creation", "cache_creation_input_tokens", "prompt_details.cache_write")
USAGE_CACHE_WRITE_5M = "input_cache_creation_5m"
USAGE_CACHE_WRITE_1H = "input_cache_creation_1h"
USAGE_REASONING = ("output_reasoning_tokens", "output_reasoning", "completion_details.reasoning")
USAGE_AUDIO = ("input_audio_tokens", "input_audio", "output_audio_tokens", "output_audio")
LEGACY_USAGE = {"input": ("usage.input", "promptTokens"), "output": ("usage.output", "completionTokens")}
COST_TOTAL = ("total",)
COST_FALLBACK = ("totalCost", "calculatedTotalCost")
WORKLOAD_FIELDS = ("traceName", "trace.name", "metadata.feature", "metadata.workload")
PROVIDER_FIELDS = ("metadata.gen_ai.provider.name", "metadata.gen_ai.system", "metadata.ls_provider",
                   "metadata.provider", "metadata.attributes.gen_ai.system")
USER_FIELDS = ("userId", "trace.userId", "metadata.user_id")
KEPT_FIELDS = ("name", "level", "version", "promptName", "promptVersion", "modelId", "parentObservationId",
               "sessionId")
LATENCY_OUTLIER_S = 600.0
LATENCY_MATCH = 0.02  # relative tolerance when checking latency against the timestamps


def _usage(row: dict, attrs: dict) -> dict:
    usage = as_dict(row.get("usageDetails"))

    def pick(keys: tuple[str, ...], name: str) -> int | None:
        return to_tokens(first_of(usage, keys), f"usageDetails.{name}")

    if usage:
        uncached, output = pick(USAGE_INPUT, "input"), pick(USAGE_OUTPUT, "output")
    else:
        uncached = to_tokens(first_of(row, LEGACY_USAGE["input"]), "usage.input")
        output = to_tokens(first_of(row, LEGACY_USAGE["output"]), "usage.output")
    read = pick(USAGE_CACHE_READ, "cache_read")
    write = pick(USAGE_CACHE_WRITE, "input_cache_creation")
    write_5m = pick((USAGE_CACHE_WRITE_5M,), USAGE_CACHE_WRITE_5M)
    write_1h = pick((USAGE_CACHE_WRITE_1H,), USAGE_CACHE_WRITE_1H)
    if write is None and (write_5m is not None or write_1h is not None):
        write = (write_5m or 0) + (write_1h or 0)
    reasoning = pick(USAGE_REASONING, "reasoning")
    if output is not None or reasoning is not None:
        output = (output or 0) + (reasoning or 0)
    for key in USAGE_AUDIO:
        if key in usage:
            attrs[key] = usage[key]
    if "total" in usage:
        attrs["source_total_tokens"] = usage["total"]
    return {
        "uncached_input_tokens": uncached, "cache_read_tokens": read, "cache_write_tokens": write,
        "cache_write_1h_tokens": write_1h, "output_tokens": output, "reasoning_tokens": reasoning,
    }


def _latency(row: dict, span: float | None, attrs: dict) -> float | None:
    latency = to_seconds(row.get("latency"), "latency")
    if latency is None:
        return span
    if span is None:
        if latency > LATENCY_OUTLIER_S:
            attrs["latency_outlier"] = True
        return latency
    tol = max(LATENCY_MATCH * span, 0.002)
    if abs(latency - span) <= tol:
        return latency
    attrs["source_latency_s"] = latency
    if abs(latency / 1000 - span) <= tol:
        attrs["latency_unit_fix"] = "ms_to_s"
        return latency / 1000
    return span


def _cost(row: dict) -> Decimal | None:
    costs = as_dict(row.get("costDetails"))
    total = first_of(costs, COST_TOTAL)
    if total is not None:
        return to_usd(total, "costDetails.total")
    if costs:
        parts = [to_usd(v, f"costDetails.{k}") for k, v in costs.items()]
        return sum((p for p in parts if p is not None), Decimal(0))
    return to_usd(first_of(row, COST_FALLBACK), "totalCost")


def _build(row: dict, index: int, locator: str) -> LlmCall | Skip:
    kind = str(row.get("type") or "").strip().upper()
    if kind not in CALL_TYPES:
        return Skip(source=SOURCE, locator=locator, kind=kind.lower() or "untyped")
    obs_id = text_or_none(row.get("id"))
    if obs_id is None:
        raise RecordError("missing_field", "observation id is empty")
    model_raw = text_or_none(first_of(row, ("model", "providedModelName")))
    if model_raw is None:
        raise RecordError("missing_model", "the generation names no model")
    attrs: dict = {k: row.get(k) for k in KEPT_FIELDS}
    start = parse_time(row.get("startTime"), "startTime")
    end = parse_time(row.get("endTime"), "endTime")
    first = parse_time(row.get("completionStartTime"), "completionStartTime")
    if start and end and end < start:
        raise RecordError("end_before_start", f"endTime {end} is before startTime {start}")
    tokens = _usage(row, attrs)
    e2e = _latency(row, seconds_between(start, end), attrs)
    ttft = to_seconds(row.get("timeToFirstToken"), "timeToFirstToken")
    if ttft is None and first is not None and start is not None:
        ttft = seconds_between(start, first)
        if ttft < 0:
            attrs["source_ttft_s"], ttft = ttft, None
    timing = derive_timing(e2e, ttft, tokens["output_tokens"])
    if ttft is not None and timing["ttft_s"] is None:
        attrs["source_ttft_s"] = ttft
    failed = str(row.get("level") or "").strip().upper() == "ERROR"
    first_token_at = first or after(start, timing["ttft_s"])
    return LlmCall(
        call_id=f"{SOURCE}:{obs_id}",
        source=SOURCE,
        source_locator=locator,
        trace_id=text_or_none(row.get("traceId")),
        span_id=obs_id,
        parent_span_id=text_or_none(row.get("parentObservationId")),
        started_at=start,
        first_token_at=first_token_at if timing["ttft_s"] is not None else None,
        ended_at=end,
        provider=normalize_provider(text_or_none(first_of(row, PROVIDER_FIELDS))),
        model=normalize_model(model_raw),
        model_raw=model_raw,
        workload_hint=text_or_none(first_of(row, WORKLOAD_FIELDS)),
        user=text_or_none(first_of(row, USER_FIELDS)),
        environment=text_or_none(row.get("environment")),
        streaming=True if timing["ttft_s"] is not None else None,
        status="error" if failed else "ok",
        error_type=(text_or_none(row.get("statusMessage")) or "error")[:200] if failed else None,
        provided_cost_usd=_cost(row),
        attributes_json=attrs_json(attrs),
        **tokens,
        **timing,
    )


class LangfuseAdapter:
    """Reads Langfuse observation exports (JSON, JSON Lines or CSV)."""

    name: ClassVar[str] = SOURCE
    kind: ClassVar[str] = "calls"

    def sniff(self, src: SourceFile) -> bool:
        """True when the first record has an observation's `id`, `traceId`, `type` and `startTime`."""
        return SNIFF_COLUMNS <= peek_columns(src)

    def parse(self, src: SourceFile) -> Iterator[Record]:
        """One `LlmCall` per GENERATION, one `Skip` per other observation, Rejects for unusable rows."""
        return build_all(src, SOURCE, iter_records(src, SOURCE), _build)


ADAPTERS = [LangfuseAdapter()]
