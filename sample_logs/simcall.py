"""`SimCall`: the ground truth of one simulated LLM call, traced or not."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime, timedelta

_EPOCH = datetime(1970, 1, 1)


def ns_to_datetime(ns: int) -> datetime:
    """Naive UTC datetime (microsecond precision) for a Unix time in nanoseconds."""
    return _EPOCH + timedelta(microseconds=ns // 1_000)


@dataclass(frozen=True, slots=True)
class SimCall:
    """One LLM call as it really happened: identity, who called, tokens and true latency phases.

    Times are Unix nanoseconds (UTC); durations are seconds and add up exactly:
    `e2e_s = network_s + queue_s + prefill_s + decode_s`. `ttft_s` is the time from the span's start
    to the first *visible* token, so for a reasoning model it also holds the hidden reasoning tokens;
    it is the true value even when the span cannot show it (non-streamed calls). Token buckets are
    disjoint; `reasoning_tokens` is part of `output_tokens`.
    """

    call_id: str  # stable within a seed: "call-0000001" in simulation order
    trace_id: str | None  # 32 lowercase hex; None for untraced calls
    span_id: str | None  # 16 lowercase hex of the LLM span; None for untraced calls
    service: str  # service.name of the calling application
    span_service: str | None  # service.name on the LLM span's resource (vLLM spans come from `vllm`)
    workload: str  # `app.feature`
    provider: str
    model: str  # request model name
    response_model: str
    operation: str  # chat, text_completion, embeddings
    convention: str | None  # how the span is written (see profile.CONV_*); None when untraced
    traced: bool
    streaming: bool
    status: str  # "ok" or "error"
    error_type: str | None
    start_ns: int
    first_token_ns: int | None  # None for embeddings and errors
    end_ns: int
    uncached_input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    output_tokens: int
    reasoning_tokens: int
    network_s: float  # client/frontend overhead before the first token (vLLM: tokenisation, scheduling)
    queue_s: float
    prefill_s: float
    decode_s: float  # (output_tokens - 1) * itl_s, reasoning tokens included
    ttft_s: float | None
    itl_s: float | None  # mean inter-token latency of this call; None when output_tokens < 2
    concurrency: int | None  # vLLM running sequences when the request arrived
    response_id: str | None
    repo: str | None  # agent traces: the repository whose context the prompt carries
    session_id: str | None  # chat: conversation the turn belongs to
    step: int  # position of the call within its trace (agent) or session (chat), from 0
    tool_after: str | None  # agent: tool run after this call, before the next one
    tool_s: float | None  # duration of that tool, seconds
    content_captured: bool  # the span carries prompt/completion text (synthetic, with markers)

    @property
    def e2e_s(self) -> float:
        """End-to-end latency, seconds."""
        return (self.end_ns - self.start_ns) / 1e9

    @property
    def input_tokens(self) -> int:
        """All input tokens: uncached + cache read + cache write."""
        return self.uncached_input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def started_at(self) -> datetime:
        """Start as a naive UTC datetime."""
        return ns_to_datetime(self.start_ns)

    @property
    def first_token_at(self) -> datetime | None:
        """First visible token as a naive UTC datetime, if the call produced one."""
        return None if self.first_token_ns is None else ns_to_datetime(self.first_token_ns)

    @property
    def ended_at(self) -> datetime:
        """End as a naive UTC datetime."""
        return ns_to_datetime(self.end_ns)


SIMCALL_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(SimCall))
TRUTH_COLUMNS: tuple[str, ...] = SIMCALL_FIELDS + ("e2e_s", "input_tokens", "started_at", "first_token_at", "ended_at")
