"""Checks of the conformance suite that do not hold today, with the reason: (entry, check) -> why.

Each runs as a strict xfail: once phaselens (or a newer fixture) makes it hold, the suite fails until the
entry is removed here. "missing at the source" = the instrumentation does not record it; "wrong at the source" =
the span records a wrong value; "client-side timing" = the span times the call from the caller's side, which
the server's truth excludes; "phaselens reads it wrong" = the span carries it and ingest does not use it (or
uses it wrongly).
"""

from __future__ import annotations

KNOWN_GAPS: dict[tuple[str, str], str] = {
    ('langfuse-openai', 'e2e'):
        'the stored duration is more than 2% away from the call as the caller timed it; the span starts or ends inside the call (first call: connection set-up; for wrappers the truth also holds the set-up the recording driver does per call)',
    ('langfuse-openai', 'streaming'):
        'missing at the source: the span records no streaming flag (model.parameters omits stream) and no chunk events',
    ('langfuse-openai', 'ttft'):
        "wrong at the source: on the first call Langfuse's completion_start_time is 155 ms after the first chunk arrived (later calls agree with the server within 1 ms); phaselens keeps the span's value",
    ('litellm-openai', 'dominant_time'):
        'follows from missing TTFT: the estimated split (no measured calls to fit) gives no or the wrong dominant phase',
    ('litellm-openai', 'e2e'):
        'the stored duration is more than 2% away from the call as the caller timed it; the span starts or ends inside the call (first call: connection set-up; for wrappers the truth also holds the set-up the recording driver does per call)',
    ('litellm-openai', 'tokens'):
        "missing at the source: LiteLLM's span has no cache read count (only gen_ai.cost.cache_read_cost and a usage JSON blob)",
    ('litellm-openai', 'ttft'):
        'missing at the source: no TTFT attribute and no chunk events; phaselens can only estimate',
    ('logfire-anthropic', 'dominant_time'):
        'follows from missing TTFT: the estimated split (no measured calls to fit) gives no or the wrong dominant phase',
    ('logfire-anthropic', 'e2e'):
        'the stored duration is more than 2% away from the call as the caller timed it; the span starts or ends inside the call (first call: connection set-up; for wrappers the truth also holds the set-up the recording driver does per call)',
    ('logfire-anthropic', 'ttft'):
        'missing at the source: neither the request span nor the "streaming response" span (joined to it) records when the first chunk arrived; phaselens can only estimate',
    ('logfire-openai', 'dominant_time'):
        'follows from missing TTFT: the estimated split (no measured calls to fit) gives no or the wrong dominant phase',
    ('logfire-openai', 'e2e'):
        'the stored duration is more than 2% away from the call as the caller timed it; the span starts or ends inside the call (first call: connection set-up; for wrappers the truth also holds the set-up the recording driver does per call)',
    ('logfire-openai', 'ttft'):
        'missing at the source: neither the request span nor the "streaming response" span (joined to it) records when the first chunk arrived; phaselens can only estimate',
    ('openinference-anthropic', 'e2e'):
        'the stored duration is more than 2% away from the call as the caller timed it; the span starts or ends inside the call (first call: connection set-up; for wrappers the truth also holds the set-up the recording driver does per call)',
    ('openinference-openai', 'e2e'):
        'the stored duration is more than 2% away from the call as the caller timed it; the span starts or ends inside the call (first call: connection set-up; for wrappers the truth also holds the set-up the recording driver does per call)',
    ('openinference-openai', 'ttft'):
        "client-side timing: the span starts 11-16 ms before the server receives the request (the first call also opens the connection), so the first-token event timed from the span's start exceeds the server's TTFT by more than 15% on 2 of 7 calls",
    ('openlit-anthropic', 'e2e'):
        "client-side time outside the span: OpenLIT's span ends 1 to 4.5 ms before the SDK call returns to the "
        "caller, on every call of both OpenLIT fixtures (the recorder's synchronous span export and what OpenLIT does "
        "after ending its span lie in that gap); on the shortest call (msg_conf000008, 148 ms) that is 3.2%. "
        "phaselens stores the span's own duration exactly; the other 11 calls are within 2%",
    ('openlit-anthropic', 'tokens'):
        "wrong at the source: on streamed calls OpenLIT 1.45.0 takes the cache counts from message_start, then resets them to 0 on message_delta when its usage omits them, so streamed calls lose their cache reads and writes "
        "(source_gaps names it: cache_counts_zeroed_when_streamed, on the Data health page and in `phaselens loads --gaps`)",
    ('openllmetry-anthropic', 'e2e'):
        'the stored duration is more than 2% away from the call as the caller timed it; the span starts or ends inside the call (first call: connection set-up; for wrappers the truth also holds the set-up the recording driver does per call)',
    ('openllmetry-openai', 'e2e'):
        'the stored duration is more than 2% away from the call as the caller timed it; the span starts or ends inside the call (first call: connection set-up; for wrappers the truth also holds the set-up the recording driver does per call)',
    ('openllmetry-openai', 'ttft'):
        "client-side timing: chunk events capped at 128 are back-extrapolated at the kept events' mean gap (within 5 ms of the first chunk as the client saw it), but the span starts 12-29 ms before the server receives the request, so 2 of 7 calls exceed the server's TTFT by more than 15%",
    ('otel-openai-v2', 'dominant_time'):
        'follows from missing TTFT: the estimated split (no measured calls to fit) gives no or the wrong dominant phase',
    ('otel-openai-v2', 'streaming'):
        'missing at the source: the span records no streaming flag and no chunk events',
    ('otel-openai-v2', 'tokens'):
        'missing at the source: openai-v2 records no cache read count (cached_tokens), so cached input reads as uncached',
    ('otel-openai-v2', 'ttft'):
        'missing at the source: no TTFT attribute and no chunk events; phaselens can only estimate',
    ('otel-openai-v2-latest', 'dominant_time'):
        'follows from missing TTFT: the estimated split (no measured calls to fit) gives no or the wrong dominant phase',
    ('otel-openai-v2-latest', 'streaming'):
        'missing at the source: the span records no streaming flag and no chunk events',
    ('otel-openai-v2-latest', 'tokens'):
        'missing at the source: openai-v2 records no cache read count (cached_tokens), so cached input reads as uncached',
    ('otel-openai-v2-latest', 'ttft'):
        'missing at the source: no TTFT attribute and no chunk events; phaselens can only estimate',
    ('pydantic-ai-anthropic', 'e2e'):
        'the stored duration is more than 2% away from the call as the caller timed it; the span starts or ends inside the call (first call: connection set-up; for wrappers the truth also holds the set-up the recording driver does per call)',
    ('pydantic-ai-openai', 'e2e'):
        'the stored duration is more than 2% away from the call as the caller timed it; the span starts or ends inside the call (first call: connection set-up; for wrappers the truth also holds the set-up the recording driver does per call)',
    ('pydantic-ai-openai', 'streaming'):
        'missing at the source: the span records no streaming flag and no chunk events',
}
