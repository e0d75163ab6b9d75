"""Canonical records: what every adapter in `ingest/` hands to `pipeline/`.

Field names equal DuckDB column names and carry their unit (`_tokens`, `_s`, `_usd`, `_at` = UTC).
Timestamps are naive `datetime` values in UTC. Money is `Decimal`, never float.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

TimingSource = Literal["measured", "events", "estimated", "none"]
"""Where a call's prefill/decode split came from: server-reported or an explicit TTFT attribute
(`measured`), first-chunk span events (`events`), the fitted latency model (`estimated`), or nowhere
(`none`)."""

TokenType = Literal["uncached_input", "cache_read", "cache_write", "output", "other"]
"""Disjoint token buckets. Input side (prefill): uncached_input, cache_read, cache_write.
Output side (decode): output (reasoning included). `other` is a non-token charge (search, storage)."""

RejectReason = Literal[
    "malformed_json",  # a line or document that is not valid JSON
    "malformed_row",  # a CSV/JSON row whose shape does not fit the detected format
    "missing_model",  # a model call that names no model
    "missing_field",  # a required field (timestamp, id, quantity, cost ...) is absent
    "bad_timestamp",  # a timestamp that cannot be parsed or is out of range
    "end_before_start",  # an end time earlier than the start time
    "negative_tokens",  # a token count below zero
    "bad_number",  # a numeric field that is not a number
    "unknown_currency",  # a non-USD amount with no conversion rate supplied
    "unsupported_record",  # a record of a kind the format allows but phaselens cannot use
]
REJECT_REASONS: tuple[str, ...] = RejectReason.__args__  # type: ignore[attr-defined]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LlmCall(_Record):
    """One model call: a span, a gateway log row, a benchmark request, a trace row."""

    # identity
    call_id: str = Field(description="Stable id; loading the same call twice keeps one row.")
    trace_id: str | None = None
    span_id: str | None = None
    parent_span_id: str | None = None
    source: str = Field(description="Adapter that read it, e.g. `otlp`, `litellm`, `llmperf`.")
    convention: str | None = Field(
        default=None, description="Attribute convention, e.g. `otel_genai`, `openllmetry`, `openinference`, `vllm`."
    )
    instrumentation: str | None = Field(
        default=None,
        description="What wrote the record: the OTLP instrumentation scope as `name version`, e.g. "
        "`opentelemetry.instrumentation.openai_v2 2.1b0`; None where the source is the writer.",
    )
    load_id: str = ""
    source_locator: str = Field(default="", description="file:line or file#span_id")
    # time (UTC)
    started_at: datetime | None = None
    first_token_at: datetime | None = None
    ended_at: datetime | None = None
    # who
    provider: str | None = None
    model: str | None = Field(default=None, description="Normalised model name (lowercase, no date suffix).")
    model_raw: str | None = Field(default=None, description="Model name as the source wrote it.")
    operation: str = "chat"
    service: str | None = None
    workload_hint: str | None = Field(
        default=None, description="Feature/workflow tag found on the record; workload rules start from it."
    )
    team: str | None = None
    project: str | None = None
    api_key: str | None = None
    user: str | None = None
    environment: str | None = None
    # tokens, disjoint buckets
    uncached_input_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cache_write_1h_tokens: int | None = Field(default=None, description="Of cache_write_tokens, the 1-hour TTL part.")
    output_tokens: int | None = None
    reasoning_tokens: int | None = Field(default=None, description="Of output_tokens.")
    # timing, seconds
    e2e_s: float | None = None
    ttft_s: float | None = None
    queue_s: float | None = None
    prefill_s: float | None = None
    decode_s: float | None = None
    itl_s: float | None = Field(default=None, description="decode_s / (output_tokens - 1); first token excluded.")
    itl_p50_s: float | None = Field(default=None, description="Per-call ITL median, where chunk timings exist.")
    itl_p95_s: float | None = None
    timing_source: TimingSource = "none"
    streaming: bool | None = None
    status: Literal["ok", "error"] = "ok"
    error_type: str | None = None
    provided_cost_usd: Decimal | None = Field(default=None, description="Cost the source itself reported.")
    # prefix reuse: cumulative hashes of the leading prompt blocks and their cumulative size in tokens
    prefix_hashes: list[str] | None = None
    prefix_tokens: list[int] | None = None
    attributes_json: str | None = Field(default=None, description="Leftover attributes (never prompt text).")


class BillingLine(_Record):
    """One provider line item: a usage or cost row of a billing export."""

    billing_line_id: str = Field(description="Content hash of the normalised line; the idempotency key.")
    period_start: datetime
    period_end: datetime
    provider: str
    account: str | None = None
    project: str | None = Field(default=None, description="Project, workspace or sub-account.")
    model: str | None = None
    model_raw: str | None = None
    token_type: TokenType
    quantity_tokens: Decimal | None = None
    cost: Decimal
    currency: str = "USD"
    cost_usd: Decimal | None = Field(default=None, description="`cost` converted with a user-supplied rate.")
    charge_category: str = Field(default="usage", description="usage, credit, refund, tax, adjustment ...")
    sku: str | None = None
    description: str | None = None
    source: str = Field(description="Adapter that read it, e.g. `openai_costs`, `focus`.")
    load_id: str = ""
    source_locator: str = ""
    tags_json: str | None = None


class Reject(_Record):
    """A record that could not be used, kept with its reason so nothing is lost silently."""

    source: str
    locator: str = Field(description="file:line, file#span_id or file:row")
    reason: RejectReason
    detail: str = ""
    raw: str | None = Field(default=None, description="The offending input, truncated; never prompt text.")
    load_id: str = ""


class Skip(_Record):
    """A record that is valid but not a model call (HTTP, database, tool, agent spans): counted, not kept."""

    source: str
    locator: str = ""
    kind: str = ""


RAW_TRUNCATE = 500


def truncate_raw(raw: str | bytes | None, limit: int = RAW_TRUNCATE) -> str | None:
    """Shorten offending input for the `rejects.raw` column."""
    if raw is None:
        return None
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    return raw if len(raw) <= limit else raw[:limit] + "…"
