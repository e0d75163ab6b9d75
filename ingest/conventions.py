"""Span attribute names as data: which attribute of which convention fills each canonical call column.

One table, `FIELDS`, maps each canonical column (model, tokens by bucket, TTFT, streaming flag, ...) to
the ordered attribute keys the instrumentations write: the first one present on a span wins. Each entry
says which convention writes it, its unit, and for input counts whether the number includes cached
input (OpenAI style, and the OTel GenAI definition) or excludes it (Anthropic's raw `usage`). An entry
with a `path` reads one number out of a JSON value (a usage object some instrumentations store whole);
such values are read, never stored, since they may carry prompt or completion text.

`sql_columns()` turns the table into the column expressions of `sql/otlp_spans.sql` (templated in at
load time), and `stored_keys()` is the privacy allow-list: only these attributes (and those the user
names in `[ingest] keep_attributes`) are kept in `attributes_json`; everything else, key and value, is
dropped. Adding an instrumentation is an entry here plus a recorded fixture. See docs/ingest.md.

Sources of the names (read in each project's instrumentation code):
- OTel GenAI semantic conventions (current and proposed): opentelemetry-python-contrib
  `instrumentation-genai/opentelemetry-instrumentation-openai-v2`, semantic-conventions `gen-ai-spans.md`;
  the anthropic and openai SDKs' own spans (`com.anthropic.sdk.python`, `gen_ai.usage.cache_write.input_tokens`).
- OpenLLMetry (traceloop/openllmetry `opentelemetry-semantic-conventions-ai`): `llm.usage.*`,
  `gen_ai.usage.cache_read_input_tokens`, `gen_ai.usage.cache_creation_input_tokens`, `llm.is_streaming`.
- OpenInference (Arize-ai/openinference `semconv`): `llm.token_count.*`, `llm.model_name`, `llm.provider`.
- Langfuse SDK v3+ (langfuse/langfuse-python `langfuse/_client/attributes.py`): `langfuse.observation.*`.
- OpenLIT (openlit/openlit `sdk/python/src/openlit/semcov`): `gen_ai.server.time_to_first_token`,
  `gen_ai.server.time_per_output_token`, `gen_ai.request.is_stream`, `gen_ai.usage.cost`.
- Logfire (pydantic/logfire `logfire/_internal/integrations/llm_providers`): request span plus a
  "streaming response ... took {duration}" log span; `gen_ai.usage.raw` (the provider's usage object).
- pydantic-ai: `gen_ai.usage.details.*`, `gen_ai.client.operation.time_to_first_chunk`, `operation.cost`.
- LiteLLM's OpenTelemetry callback: `llm.is_streaming`, `gen_ai.cost.total_cost`.
- Vercel AI SDK: `ai.model.id`, `ai.usage.cachedInputTokens`, `ai.response.providerMetadata`, `ai.response.msToFirstChunk`.
- Google ADK: `gcp.vertex.agent.llm_response` (`usage_metadata`), trusted under scope `gcp.vertex.agent` only.
- Genkit: `genkit:name`, `genkit:output` (`usage`).
- vLLM (`vllm/tracing.py`, `SpanAttributes`): `gen_ai.latency.*`; SGLang (`sglang/srt/tracing`):
  `gen_ai.usage.cached_tokens`; Datadog LLM Observability style `cache_write_input_tokens`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Unit = Literal["tokens", "s", "ms", "ns", "text", "bool", "iso_time", "amount"]
Semantics = Literal["includes_cache", "excludes_cache"]


@dataclass(frozen=True)
class Key:
    """One attribute (optionally a JSON path inside its value) that fills a canonical column."""

    key: str
    convention: str
    unit: Unit = "tokens"
    path: str | None = None  # JSON path inside the value ('$.usage.input_tokens'); such values are never stored
    semantics: Semantics | None = None  # input counts only: does the number include cached input?
    scope: str | None = None  # only trusted on spans of an instrumentation scope starting with this
    resource: bool = False  # a resource attribute, not a span attribute



INC, EXC = "includes_cache", "excludes_cache"

FIELDS: dict[str, list[Key]] = {
    "op_attr": [
        Key("gen_ai.operation.name", "otel_genai", "text"),
        Key("llm.request.type", "openllmetry", "text"),
        Key("openinference.span.kind", "openinference", "text"),
        Key("langfuse.observation.type", "langfuse", "text"),
        Key("ai.operationId", "vercel_ai", "text"),
        Key("operation.name", "vercel_ai", "text"),
        Key("genkit:metadata:subtype", "genkit", "text"),
    ],
    "model": [
        Key("gen_ai.response.model", "otel_genai", "text"),
        Key("gen_ai.request.model", "otel_genai", "text"),
        Key("llm.model_name", "openinference", "text"),
        Key("llm.response.model_name", "openinference", "text"),
        Key("llm.request.model_name", "openinference", "text"),
        Key("embedding.model_name", "openinference", "text"),
        Key("langfuse.observation.model.name", "langfuse", "text"),
        Key("ai.model.id", "vercel_ai", "text"),
        Key("litellm.provider.model", "litellm", "text"),
        Key("gcp.vertex.agent.llm_response", "google_adk", "text", path="$.model_version", scope="gcp.vertex.agent"),
    ],
    "provider": [
        Key("gen_ai.provider.name", "otel_genai", "text"),
        Key("gen_ai.system", "otel_genai", "text"),
        Key("llm.provider", "openinference", "text"),
        Key("llm.system", "openinference", "text"),
        Key("ai.model.provider", "vercel_ai", "text"),
    ],
    "input_tokens": [
        # OpenLIT's Anthropic instrumentation copies Anthropic's usage.input_tokens (cache reads and writes
        # excluded) into the OTel name (openlit/instrumentation/anthropic/utils.py)
        Key("gen_ai.usage.input_tokens", "openlit", semantics=EXC, scope="openlit.instrumentation.anthropic"),
        Key("gen_ai.usage.input_tokens", "otel_genai", semantics=INC),
        Key("gen_ai.usage.prompt_tokens", "otel_genai_deprecated", semantics=INC),
        Key("llm.usage.prompt_tokens", "openllmetry", semantics=INC),
        Key("llm.token_count.prompt", "openinference", semantics=INC),
        Key("langfuse.observation.usage_details", "langfuse", path="$.input", semantics=EXC),
        Key("langfuse.observation.usage_details", "langfuse", path="$.input_tokens", semantics=INC),
        Key("langfuse.observation.usage_details", "langfuse", path="$.prompt_tokens", semantics=INC),
        Key("gen_ai.usage.raw", "logfire", path="$.prompt_tokens", semantics=INC),
        Key("gen_ai.usage.raw", "logfire", path="$.input_tokens", semantics=EXC),  # Anthropic's raw usage
        Key("genkit:output", "genkit", path="$.usage.inputTokens", semantics=INC),
        Key("input_tokens", "datadog", semantics=INC),
    ],
    "cache_read_tokens": [
        Key("gen_ai.usage.cache_read.input_tokens", "otel_genai"),
        Key("gen_ai.usage.cache_read_input_tokens", "openllmetry"),
        Key("llm.token_count.prompt_details.cache_read", "openinference"),
        Key("gen_ai.usage.cached_tokens", "sglang"),
        Key("gen_ai.usage.input_cached_tokens", "langfuse_custom"),
        Key("gen_ai.usage.details.cache_read_input_tokens", "pydantic_ai"),
        Key("gen_ai.usage.details.cache_read_tokens", "pydantic_ai"),
        Key("ai.response.providerMetadata", "vercel_ai", path="$.anthropic.cacheReadInputTokens"),
        Key("ai.response.providerMetadata", "vercel_ai", path="$.anthropic.usage.cache_read_input_tokens"),
        Key("ai.response.providerMetadata", "vercel_ai", path="$.bedrock.usage.cacheReadInputTokens"),
        Key("ai.response.providerMetadata", "vercel_ai", path="$.openai.cachedPromptTokens"),
        Key("ai.usage.cachedInputTokens", "vercel_ai"),
        Key("langfuse.observation.usage_details", "langfuse", path="$.cache_read_input_tokens"),
        Key("langfuse.observation.usage_details", "langfuse", path="$.input_cache_read"),
        Key("langfuse.observation.usage_details", "langfuse", path="$.prompt_tokens_details.cached_tokens"),
        Key("gen_ai.usage.raw", "logfire", path="$.cache_read_input_tokens"),
        Key("gen_ai.usage.raw", "logfire", path="$.prompt_tokens_details.cached_tokens"),
        Key("gcp.vertex.agent.llm_response", "google_adk", path="$.usage_metadata.cached_content_token_count",
            scope="gcp.vertex.agent"),
        Key("cache_read_input_tokens", "datadog"),
    ],
    "cache_write_tokens": [
        Key("gen_ai.usage.cache_creation.input_tokens", "otel_genai"),
        Key("gen_ai.usage.cache_write.input_tokens", "otel_genai"),
        Key("gen_ai.usage.cache_creation_input_tokens", "openllmetry"),
        Key("llm.token_count.prompt_details.cache_write", "openinference"),
        Key("gen_ai.usage.input_cache_creation", "langfuse_custom"),
        Key("gen_ai.usage.details.cache_creation_input_tokens", "pydantic_ai"),
        Key("gen_ai.usage.details.cache_write_tokens", "pydantic_ai"),
        Key("ai.response.providerMetadata", "vercel_ai", path="$.anthropic.cacheCreationInputTokens"),
        Key("ai.response.providerMetadata", "vercel_ai", path="$.anthropic.usage.cache_creation_input_tokens"),
        Key("ai.response.providerMetadata", "vercel_ai", path="$.bedrock.usage.cacheCreationInputTokens"),
        Key("ai.response.providerMetadata", "vercel_ai", path="$.bedrock.usage.cacheWriteInputTokens"),
        Key("langfuse.observation.usage_details", "langfuse", path="$.cache_creation_input_tokens"),
        Key("langfuse.observation.usage_details", "langfuse", path="$.input_cache_creation"),
        Key("gen_ai.usage.raw", "logfire", path="$.cache_creation_input_tokens"),
        Key("cache_write_input_tokens", "datadog"),
    ],
    "output_tokens": [
        Key("gen_ai.usage.output_tokens", "otel_genai"),
        Key("gen_ai.usage.completion_tokens", "otel_genai_deprecated"),
        Key("llm.usage.completion_tokens", "openllmetry"),
        Key("llm.token_count.completion", "openinference"),
        Key("langfuse.observation.usage_details", "langfuse", path="$.output"),
        Key("langfuse.observation.usage_details", "langfuse", path="$.output_tokens"),
        Key("langfuse.observation.usage_details", "langfuse", path="$.completion_tokens"),
        Key("gen_ai.usage.raw", "logfire", path="$.completion_tokens"),
        Key("gen_ai.usage.raw", "logfire", path="$.output_tokens"),
        Key("genkit:output", "genkit", path="$.usage.outputTokens"),
        Key("output_tokens", "datadog"),
    ],
    "reasoning_tokens": [
        Key("gen_ai.usage.reasoning.output_tokens", "otel_genai"),
        Key("gen_ai.usage.reasoning_tokens", "openllmetry"),
        Key("llm.token_count.completion_details.reasoning", "openinference"),
        Key("langfuse.observation.usage_details", "langfuse", path="$.completion_tokens_details.reasoning_tokens"),
        Key("langfuse.observation.usage_details", "langfuse", path="$.reasoning"),
        Key("genkit:output", "genkit", path="$.usage.thoughtsTokens"),
    ],
    "ttft": [
        Key("gen_ai.response.time_to_first_chunk", "otel_genai", "s"),
        Key("gen_ai.client.operation.time_to_first_chunk", "pydantic_ai", "s"),
        Key("gen_ai.server.time_to_first_token", "openlit", "s"),
        Key("gen_ai.latency.time_to_first_token", "vllm", "s"),
        Key("ai.response.msToFirstChunk", "vercel_ai", "ms"),
        Key("ai.stream.msToFirstChunk", "vercel_ai", "ms"),
        Key("langfuse.observation.completion_start_time", "langfuse", "iso_time"),
    ],
    "tpot": [
        Key("gen_ai.server.time_per_output_token", "openlit", "s"),
    ],
    "streaming": [
        Key("gen_ai.request.stream", "otel_genai", "bool"),
        Key("gen_ai.is_streaming", "openllmetry", "bool"),
        Key("llm.is_streaming", "openllmetry", "bool"),
        Key("gen_ai.request.is_stream", "openlit", "bool"),
    ],
    "response_id": [
        Key("gen_ai.response.id", "otel_genai", "text"),
        Key("llm.openai.id", "litellm", "text"),
    ],
    # engine request ids: the same request on the prefill and the decode worker of a disaggregated deployment
    # (vLLM: the X-Request-Id the proxy sends to both; SGLang: the bootstrap room the router assigns)
    "request_id": [Key("gen_ai.request.id", "vllm", "text")],
    "bootstrap_room": [Key("bootstrap_room", "sglang", "text")],
    "stream_duration": [  # Logfire's "streaming response ... took {duration}" log span
        Key("duration", "logfire", "s", scope="logfire"),
    ],
    "cost_amount": [
        Key("gen_ai.usage.cost.amount", "otel_genai", "amount"),
        Key("gen_ai.usage.cost", "openlit", "amount"),
        Key("llm.cost.total", "openinference", "amount"),
        Key("gen_ai.cost.total_cost", "litellm", "amount"),
        Key("operation.cost", "pydantic_ai", "amount"),
        Key("langfuse.observation.cost_details", "langfuse", "amount", path="$.total"),
    ],
    "cost_currency": [
        Key("gen_ai.usage.cost.currency", "otel_genai", "text"),
    ],
    "server_e2e": [Key("gen_ai.latency.e2e", "vllm", "s")],
    "server_queue": [Key("gen_ai.latency.time_in_queue", "vllm", "s")],
    "server_prefill": [Key("gen_ai.latency.time_in_model_prefill", "vllm", "s")],
    "server_decode": [Key("gen_ai.latency.time_in_model_decode", "vllm", "s")],
    "error_type": [Key("error.type", "otel_genai", "text")],
    "workload_hint": [
        Key("app.feature", "phaselens", "text"),
        Key("feature", "phaselens", "text"),
        Key("gen_ai.agent.name", "otel_genai", "text"),
        Key("traceloop.workflow.name", "openllmetry", "text"),
        Key("langfuse.trace.name", "langfuse", "text"),
        Key("ai.telemetry.functionId", "vercel_ai", "text"),
        Key("app.feature", "phaselens", "text", resource=True),
    ],
    "team": [
        Key("app.team", "phaselens", "text"), Key("team", "phaselens", "text"),
        Key("app.team", "phaselens", "text", resource=True), Key("team", "phaselens", "text", resource=True),
    ],
    "project": [
        Key("app.project", "phaselens", "text"), Key("project", "phaselens", "text"),
        Key("app.project", "phaselens", "text", resource=True),
    ],
    "api_key": [Key("gen_ai.request.api_key_id", "phaselens", "text")],
    "user": [
        Key("user.id", "otel", "text"), Key("enduser.id", "otel", "text"), Key("gen_ai.request.user", "otel_genai", "text"),
        Key("langfuse.user.id", "langfuse", "text"),
    ],
    "service": [Key("service.name", "otel", "text", resource=True)],
    "environment": [
        Key("deployment.environment.name", "otel", "text", resource=True),
        Key("deployment.environment", "otel", "text", resource=True),
        Key("deployment.environment", "otel", "text"),
    ],
}

# A TTFT attribute that is the whole call's time, not a first token. On a call its span says is not streamed
# (`streaming` false) the caller sees no token before the whole answer, yet OpenLIT (1.45.0) writes
# gen_ai.server.time_to_first_token = the call's duration there (and time_per_output_token 0): 1 to 7 ms short of
# the span's end in the recorded suite, the time OpenLIT takes to read the response. A span-stated TTFT within
# the larger of these of the span's own duration, on a non-streamed call, is not used (nor its time per output
# token): the call is timed as a non-streamed call without TTFT (`phaselens.ttft_basis` whole_call, and the
# build estimates its split: `timing_source` estimated). A span with no streaming flag keeps its TTFT.
WHOLE_CALL_TTFT_SHARE = 0.05  # of the span's duration
WHOLE_CALL_TTFT_S = 0.020

# Attributes read elsewhere (convention detection, engine spans, correlation) that are kept as well.
OTHER_KEPT: tuple[str, ...] = (
    "traceloop.workflow.name", "server.address", "server.port", "gen_ai.request.max_tokens",
    "gen_ai.request.temperature", "gen_ai.response.finish_reasons", "gen_ai.request.id",
    "gen_ai.conversation.id", "session.id", "langfuse.session.id", "langfuse.observation.level",
    "logfire.span_type", "http.response.status_code", "litellm.call_id",
    # engines: vLLM / SGLang / llm-d request spans
    "gen_ai.request.n", "gen_ai.request.top_p", "llm_d.role", "llm_d.pool", "phaselens.pool", "engine.role",
    "gen_ai.latency.time_in_scheduler", "gen_ai.latency.time_in_model_forward", "gen_ai.latency.time_in_model_execute",
    "kv_transfer.role", "disagg.role", "disagg.pool",
)

# Spans of these operations are not model calls (agent, tool and retrieval steps).
NOT_CALLS: tuple[str, ...] = (
    "invoke_agent", "create_agent", "invoke_workflow", "execute_tool", "retrieval", "agent", "tool", "chain",
    "span", "event", "retriever", "embedder_span", "guardrail", "evaluator", "reranker", "workflow", "task",
)

# Operation values meaning an embeddings call / a text completion call, per convention.
# Scopes of the spans a provider SDK writes about its own calls whenever a global tracer provider is set
# (beside any instrumentation's span of the same call). Such a span is often the root of a trace of its
# own, so it is paired with the instrumentation span around it by time (otlp_merge.sql, rule 4).
SDK_SCOPES: tuple[str, ...] = ("com.anthropic.sdk",)

EMBEDDING_OPS: tuple[str, ...] = ("embeddings", "embedding", "ai.embed", "ai.embedMany", "embed", "embedder")


def _sql_string(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _raw(k: Key) -> str:
    """SQL for the key's raw VARCHAR value (NULL when absent, blank, or outside its scope)."""
    kv = "rk, rv" if k.resource else "k, v"
    expr = f"av({kv}, {_sql_string(k.key)})"
    if k.path is not None:
        expr = f"otlp_json_path({expr}, {_sql_string(k.path)})"
    expr = f"nullif(trim({expr}), '')"
    if k.scope is not None:
        expr = f"CASE WHEN scope_name LIKE {_sql_string(k.scope + '%')} THEN {expr} END"
    return expr


def _typed(k: Key, raw: str) -> str:
    """SQL converting a raw value to the column's type and unit (NULL when not convertible)."""
    if k.unit == "tokens":
        return f"TRY_CAST(TRY_CAST({raw} AS DOUBLE) AS BIGINT)"
    if k.unit == "s":
        return f"TRY_CAST({raw} AS DOUBLE)"
    if k.unit == "ms":
        return f"TRY_CAST({raw} AS DOUBLE) / 1000.0"
    if k.unit == "ns":
        return f"TRY_CAST({raw} AS DOUBLE) / 1e9"
    if k.unit == "iso_time":  # seconds after the span's start
        return f"otlp_iso_after_start({raw}, start_ns)"
    if k.unit == "bool":
        return f"TRY_CAST({raw} AS BOOLEAN)"
    if k.unit == "amount":
        return f"TRY_CAST({raw} AS DECIMAL(38, 12))"
    return raw


def _raw_names() -> dict[str, str]:
    """Each distinct raw-value expression of the table -> the name of the column that holds it (`_r0`, `_r1`, ...)."""
    names: dict[str, str] = {}
    for keys in FIELDS.values():
        for k in keys:
            names.setdefault(_raw(k), f"_r{len(names)}")
    return names


def raw_columns() -> str:
    """The column expressions for `{{CONVENTION_RAW_COLUMNS}}` in sql/otlp_spans.sql: each attribute lookup once.

    A lookup used by several fields (or by a field's raw, typed and semantics columns) is computed once here and
    referred to by name in `sql_columns()`; writing it out at each use tripled the query and its planning time.
    """
    return ",\n    ".join(f"{expr} AS {name}" for expr, name in _raw_names().items())


def sql_columns() -> str:
    """The column expressions for `{{CONVENTION_COLUMNS}}` in sql/otlp_spans.sql.

    Per field F: `F_raw` (first present value, VARCHAR) and `F` (typed, in seconds/tokens); for input
    tokens also `input_semantics` (includes_cache | excludes_cache) of the entry that won.
    """
    names = _raw_names()
    cols: list[str] = []
    for field, keys in FIELDS.items():
        raws = [names[_raw(k)] for k in keys]
        cols.append(f"coalesce({', '.join(raws)}) AS {field}_raw")
        typed = [_typed(k, r) for k, r in zip(keys, raws)]
        cols.append(f"coalesce({', '.join(typed)}) AS {field}")
        if field == "input_tokens":
            cases = " ".join(f"WHEN {r} IS NOT NULL THEN {_sql_string(k.semantics or INC)}" for k, r in zip(keys, raws))
            cols.append(f"CASE {cases} END AS input_semantics")
    cols.append(f"{_whole_call_ttft(names)} AS ttft_whole_call")
    return ",\n    ".join(cols)


def _typed_field(field: str, names: dict[str, str]) -> str:
    keys = FIELDS[field]
    return f"coalesce({', '.join(_typed(k, names[_raw(k)]) for k in keys)})"


def _whole_call_ttft(names: dict[str, str]) -> str:
    """SQL: true when the span's TTFT attribute is its whole duration on a call it says is not streamed."""
    ttft, streaming = _typed_field("ttft", names), _typed_field("streaming", names)
    span_s = "((end_ns - start_ns) / 1e9)"
    return (f"coalesce(NOT {streaming} AND {ttft} >= {span_s} - greatest({WHOLE_CALL_TTFT_S!r}, "
            f"{WHOLE_CALL_TTFT_SHARE!r} * {span_s}), false)")


# the fields whose presence makes a span a model call (sql/otlp_spans.sql, `_kind`)
CALL_FIELDS: tuple[str, ...] = ("op_attr", "model", "input_tokens", "cache_read_tokens", "cache_write_tokens",
                                "output_tokens", "reasoning_tokens")


def call_keys() -> list[str]:
    """Span attribute keys without which a span cannot be a model call: a span that has none of them (and is not
    vLLM's `llm_request`) is a `skip` span, and its other attributes need not be read."""
    keys = {k.key for f in CALL_FIELDS for k in FIELDS[f] if not k.resource}
    keys.update(("genkit:metadata:subtype", "genkit:name"))  # a Genkit model span names its model by genkit:name
    return sorted(keys)


def stored_keys(extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The privacy allow-list: span attribute keys kept in `attributes_json` (plus the user's `extra`)."""
    keys = {k.key for keys in FIELDS.values() for k in keys if k.path is None and not k.resource}
    keys.update(OTHER_KEPT)
    keys.update(extra)
    return sorted(keys)


def conventions() -> dict[str, dict[str, list[str]]]:
    """convention -> canonical column -> attribute keys (for docs and the matrix)."""
    out: dict[str, dict[str, list[str]]] = {}
    for field, keys in FIELDS.items():
        for k in keys:
            name = k.key + (f" {k.path}" if k.path else "")
            out.setdefault(k.convention, {}).setdefault(field, []).append(name)
    return out
