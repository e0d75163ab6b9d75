"""How each instrumentation writes an LLM call's span: name, kind, scope, attributes, events.

One builder per convention, each following docs/formats.md#genai-attribute-conventions for the attribute names. The
instrumentation scopes are the names the real instrumentations register their tracers under.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field

from opentelemetry.trace import SpanKind

from phaselens.sample_logs import content as C
from phaselens.sample_logs import profile as P
from phaselens.sample_logs.simcall import SimCall

SCHEMA_1_28 = "https://opentelemetry.io/schemas/1.28.0"
SCHEMA_1_41 = "https://opentelemetry.io/schemas/1.41.0"

# scope key -> (instrumentation scope name, version, schema url)
SCOPES: dict[str, tuple[str, str | None, str | None]] = {
    "vllm": ("vllm.llm_engine", None, None),
    "anthropic_semconv": ("opentelemetry.instrumentation.anthropic", "0.1b0", SCHEMA_1_41),
    "bedrock_semconv": ("opentelemetry.instrumentation.botocore", "0.60b0", SCHEMA_1_41),
    "openai_semconv": ("opentelemetry.instrumentation.openai_v2", "2.5b0.dev", SCHEMA_1_41),
    "openai_v2": ("opentelemetry.instrumentation.openai_v2", "2.1b0", SCHEMA_1_28),
    "openllmetry": ("opentelemetry.instrumentation.openai.v1", "0.47.3", None),
    "openinference": ("openinference.instrumentation.anthropic", "0.1.18", None),
    "http_server": ("opentelemetry.instrumentation.fastapi", "0.55b0", SCHEMA_1_28),
    "http_client": ("opentelemetry.instrumentation.httpx", "0.55b0", SCHEMA_1_28),
    "db": ("opentelemetry.instrumentation.asyncpg", "0.55b0", SCHEMA_1_28),
    "traceloop": ("traceloop.sdk", "0.47.3", None),
    "agent": ("editor_agent.runtime", "0.9.4", None),
}

AZURE_ENDPOINT = "acme-editor-prod.openai.azure.com"  # the Azure OpenAI resource's endpoint
SERVER_ADDRESS = {"openai": "api.openai.com", "anthropic": "api.anthropic.com",
                  "aws.bedrock": "bedrock-runtime.us-east-1.amazonaws.com", "azure.ai.openai": AZURE_ENDPOINT}
API_BASE = {"openai": "https://api.openai.com/v1/", "azure.ai.openai": f"https://{AZURE_ENDPOINT}/openai/"}
# `gen_ai.system` before semconv v1.37 renamed it: Azure OpenAI was `az.ai.openai` (now `azure.ai.openai`)
GEN_AI_SYSTEM = {"openai": "openai", "azure.ai.openai": "az.ai.openai"}
FINISH_REASON = {  # (final, tool step)
    "anthropic": ("end_turn", "tool_use"), "aws.bedrock": ("end_turn", "tool_use"), "openai": ("stop", "tool_calls"),
}
SEMCONV_SCOPES = {"anthropic": "anthropic_semconv", "aws.bedrock": "bedrock_semconv"}  # else openai_semconv
CACHE_WRITE_PROVIDERS = frozenset({"anthropic", "aws.bedrock"})  # Claude reports cache writes wherever it runs
REQUEST_MAX_TOKENS = {"inline_edit": 1024, "agent": 8192}
VLLM_REQUEST = {"gen_ai.request.max_tokens": 64, "gen_ai.request.temperature": 0.2, "gen_ai.request.top_p": 0.95}
CHUNK_TOKENS = 4  # OpenLLMetry chunk events: one per ~4 output tokens keeps files small


@dataclass
class LlmSpanSpec:
    """Everything the writer needs to create one LLM span with the SDK."""

    name: str
    kind: SpanKind
    scope: str  # key into SCOPES
    attributes: dict
    events: list[tuple[str, int, dict]] = field(default_factory=list)  # (name, time ns, attributes)


def llm_span(call: SimCall, trace: list[SimCall], rng: random.Random) -> LlmSpanSpec:
    """The span an instrumentation would have written for `call` (one of `trace`'s calls)."""
    spec = _BUILDERS[call.convention](call, trace, rng)
    if call.status == "error":
        spec.attributes["error.type"] = call.error_type
    return spec


def _finish(call: SimCall) -> str:
    final, tool_step = FINISH_REASON.get(call.provider, ("stop", "tool_calls"))
    return tool_step if call.tool_after else final


def _messages(call: SimCall, trace: list[SimCall]) -> tuple[list[C.Message], str | None]:
    if call.workload == "agent":
        messages, completion = C.agent_messages(trace, call.step), C.agent_completion(call)
    else:
        messages, completion = C.chat_messages(call), C.chat_completion(call)
    return messages, completion if call.status == "ok" else None


def _exception_event(call: SimCall) -> tuple[str, int, dict]:
    status = P.ERROR_HTTP_STATUS.get(call.error_type or "", 500)
    return ("exception", call.end_ns, {"exception.type": call.error_type or "Error",
                                       "exception.message": f"Error code: {status}"})


def _vllm(call: SimCall, trace: list[SimCall], rng: random.Random) -> LlmSpanSpec:
    attrs = {
        "gen_ai.response.model": call.response_model,
        "gen_ai.request.id": call.response_id,
        **VLLM_REQUEST,
        "gen_ai.usage.prompt_tokens": call.input_tokens,
        "gen_ai.usage.completion_tokens": call.output_tokens,
        "gen_ai.latency.time_in_queue": call.queue_s,
        "gen_ai.latency.time_to_first_token": call.ttft_s,
        "gen_ai.latency.e2e": call.e2e_s,
        "gen_ai.latency.time_in_model_prefill": call.prefill_s,
        "gen_ai.latency.time_in_model_decode": call.decode_s,
        "gen_ai.latency.time_in_model_inference": round(call.prefill_s + call.decode_s, 9),
        "app.feature": call.workload,
    }
    return LlmSpanSpec("llm_request", SpanKind.SERVER, "vllm", attrs)


def _semconv(call: SimCall, trace: list[SimCall], rng: random.Random) -> LlmSpanSpec:
    """OTel GenAI semconv v1.41 opt-in path: Bedrock inline edits, o4-mini agent calls, embeddings."""
    attrs: dict = {
        "gen_ai.operation.name": call.operation,
        "gen_ai.provider.name": call.provider,
        "gen_ai.request.model": call.model,
    }
    if call.operation == "embeddings":
        attrs["gen_ai.request.encoding_formats"] = ("float",)
    else:
        attrs["gen_ai.request.max_tokens"] = REQUEST_MAX_TOKENS.get(call.workload, 4096)
        attrs["gen_ai.request.stream"] = call.streaming
    attrs.update({"server.address": SERVER_ADDRESS[call.provider], "server.port": 443})
    if call.status == "ok":
        attrs["gen_ai.response.model"] = call.response_model
        if call.response_id:
            attrs["gen_ai.response.id"] = call.response_id
        if call.operation != "embeddings":
            attrs["gen_ai.response.finish_reasons"] = (_finish(call),)
            if call.streaming:
                attrs["gen_ai.response.time_to_first_chunk"] = call.ttft_s
        attrs["gen_ai.usage.input_tokens"] = call.input_tokens  # cached tokens included (semconv MUST)
        if call.operation != "embeddings":
            attrs["gen_ai.usage.cache_read.input_tokens"] = call.cache_read_tokens
            if call.provider in CACHE_WRITE_PROVIDERS:
                attrs["gen_ai.usage.cache_creation.input_tokens"] = call.cache_write_tokens
            attrs["gen_ai.usage.output_tokens"] = call.output_tokens
            if call.provider == "openai":
                attrs["gen_ai.usage.reasoning.output_tokens"] = call.reasoning_tokens
                attrs["openai.response.service_tier"] = "default"
    attrs["app.feature"] = call.workload
    if call.content_captured:
        messages, completion = _messages(call, trace)
        attrs.update(C.semconv_content(messages, completion, _finish(call)))
    scope = SEMCONV_SCOPES.get(call.provider, "openai_semconv")
    return LlmSpanSpec(f"{call.operation} {call.model}", SpanKind.CLIENT, scope, attrs)


def _openai_v2(call: SimCall, trace: list[SimCall], rng: random.Random) -> LlmSpanSpec:
    """opentelemetry-instrumentation-openai-v2 default path: no TTFT, no cache tokens, no app.feature."""
    attrs: dict = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": GEN_AI_SYSTEM[call.provider],
        "gen_ai.request.model": call.model,
        "server.address": SERVER_ADDRESS[call.provider],
        "server.port": 443,
    }
    if call.status == "ok":
        attrs.update({
            "gen_ai.response.model": call.response_model,
            "gen_ai.response.id": call.response_id,
            "gen_ai.usage.input_tokens": call.input_tokens,
            "gen_ai.usage.output_tokens": call.output_tokens,
        })
        if call.provider == "openai":  # Azure OpenAI responses carry no service tier
            attrs["gen_ai.openai.response.service_tier"] = "default"
        if not call.streaming:  # streams never get finish reasons on this path
            attrs["gen_ai.response.finish_reasons"] = ("stop",)
    return LlmSpanSpec(f"chat {call.model}", SpanKind.CLIENT, "openai_v2", attrs)


def _openllmetry(call: SimCall, trace: list[SimCall], rng: random.Random) -> LlmSpanSpec:
    """OpenLLMetry <=0.47 `openai.chat`: deprecated token names and one event per streamed chunk."""
    attrs: dict = {
        "llm.request.type": "chat",
        "gen_ai.system": GEN_AI_SYSTEM[call.provider],
        "gen_ai.request.model": call.model,
        "gen_ai.openai.api_base": API_BASE[call.provider],
        "gen_ai.is_streaming": call.streaming,
        "traceloop.workflow.name": "chat",
        "app.feature": call.workload,
    }
    events: list[tuple[str, int, dict]] = []
    if call.status == "ok":
        attrs.update({
            "gen_ai.response.model": call.response_model,
            "gen_ai.response.id": call.response_id,
            "gen_ai.usage.prompt_tokens": call.input_tokens,
            "gen_ai.usage.completion_tokens": call.output_tokens,
            "llm.usage.total_tokens": call.input_tokens + call.output_tokens,
            "gen_ai.usage.cache_read_input_tokens": call.cache_read_tokens,
        })
        if call.streaming:
            events = [("gen_ai.content.completion.chunk", t, {}) for t in chunk_times(call, rng)]
    else:
        events = [_exception_event(call)]
    if call.content_captured:
        messages, completion = _messages(call, trace)
        attrs.update(C.openllmetry_content(messages, completion, "stop"))
    return LlmSpanSpec("openai.chat", SpanKind.CLIENT, "openllmetry", attrs, events)


def _openinference(call: SimCall, trace: list[SimCall], rng: random.Random) -> LlmSpanSpec:
    """OpenInference Anthropic `Messages` span (kind INTERNAL, as OpenInference leaves it)."""
    attrs: dict = {
        "openinference.span.kind": "LLM",
        "llm.system": call.provider,
        "llm.provider": call.provider,
        "llm.model_name": call.response_model,
        "llm.invocation_parameters": json.dumps({"max_tokens": REQUEST_MAX_TOKENS["agent"], "stream": True}),
        "app.feature": call.workload,
    }
    events: list[tuple[str, int, dict]] = []
    if call.status == "ok":
        attrs.update({
            "llm.token_count.prompt": call.input_tokens,  # Anthropic's uncached input + cache read + cache write
            "llm.token_count.prompt_details.cache_read": call.cache_read_tokens,
            "llm.token_count.prompt_details.cache_write": call.cache_write_tokens,
            "llm.token_count.completion": call.output_tokens,
            "llm.token_count.total": call.input_tokens + call.output_tokens,
        })
        events = [("First Token Stream Event", call.first_token_ns, {})]
    else:
        events = [_exception_event(call)]
    if call.content_captured:
        messages, completion = _messages(call, trace)
        attrs.update(C.openinference_content(messages, completion, call.model))
    return LlmSpanSpec("Messages", SpanKind.INTERNAL, "openinference", attrs, events)


def chunk_times(call: SimCall, rng: random.Random) -> list[int]:
    """Arrival times (ns) of streamed chunks: first at the first token, last at the end, jittered between."""
    first, end = call.first_token_ns, call.end_ns
    visible = call.output_tokens - call.reasoning_tokens
    if first is None or visible < 2 or end <= first:
        return [] if first is None else [first]
    n = max(2, math.ceil(visible / CHUNK_TOKENS))
    gaps = [math.exp(rng.gauss(0.0, 0.35)) for _ in range(n - 1)]
    scale = (end - first) / sum(gaps)
    times, t = [first], float(first)
    for gap in gaps[:-1]:
        t += gap * scale
        times.append(int(t))
    times.append(end)
    return times


_BUILDERS = {
    P.CONV_VLLM: _vllm,
    P.CONV_SEMCONV: _semconv,
    P.CONV_OPENAI_V2: _openai_v2,
    P.CONV_OPENLLMETRY: _openllmetry,
    P.CONV_OPENINFERENCE: _openinference,
}
