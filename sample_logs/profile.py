"""Tables that define the simulated day: models and their latency physics, workloads, daily load curve.

Everything the simulation draws from is declared here as data, so a change of traffic mix or of a
model's speed is a change of one row. Rates are tokens per second, latencies seconds.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Latency physics and names of one model as the simulation sees it."""

    provider: str
    request_model: str  # name the client asks for (span name, `gen_ai.request.model`)
    response_model: str  # dated name the provider answers with (`gen_ai.response.model`)
    prefill_tok_s: float  # uncached input tokens per second; cache reads run 10x faster
    itl_s: float  # base inter-token latency, seconds
    network_s: tuple[float, float]  # client <-> server overhead before the first token, seconds


# Request names of the models the workloads call.
TAB_MODEL = "qwen2.5-coder-7b"
INLINE_MODEL = "global.anthropic.claude-sonnet-4-20250514-v1:0"  # Claude Sonnet 4, Bedrock global inference profile
AGENT_CLAUDE = "claude-sonnet-4-20250514"
EMBEDDING_MODEL = "text-embedding-3-small"
BATCH_MODEL = "gpt-4o-mini"

MODELS: dict[str, ModelSpec] = {
    m.request_model: m
    for m in (
        ModelSpec("vllm", TAB_MODEL, TAB_MODEL, 14_000, 0.007, (0.0015, 0.003)),  # 2x L40S, batched prefill
        ModelSpec("anthropic", AGENT_CLAUDE, AGENT_CLAUDE, 9_000, 0.022, (0.030, 0.080)),
        # Claude Sonnet 4 on Amazon Bedrock: spans carry the Bedrock model id as request and response model.
        ModelSpec("aws.bedrock", INLINE_MODEL, INLINE_MODEL, 9_000, 0.022, (0.030, 0.080)),
        ModelSpec("openai", "gpt-4o", "gpt-4o-2024-08-06", 12_000, 0.014, (0.030, 0.080)),
        # Azure OpenAI: the deployment is named after the model; responses carry the dated model version.
        ModelSpec("azure.ai.openai", "gpt-4.1-mini", "gpt-4.1-mini-2025-04-14", 20_000, 0.009, (0.030, 0.080)),
        ModelSpec("openai", "o4-mini", "o4-mini-2025-04-16", 15_000, 0.010, (0.030, 0.080)),
        ModelSpec("openai", EMBEDDING_MODEL, EMBEDDING_MODEL, 150_000, 0.0, (0.030, 0.080)),
        ModelSpec("openai", BATCH_MODEL, "gpt-4o-mini-2024-07-18", 18_000, 0.008, (0.030, 0.080)),
    )
}

# Conventions (how a call's span is written). `None` = never traced.
CONV_VLLM = "vllm"  # vLLM engine `llm_request` SERVER span, `gen_ai.latency.*`
CONV_SEMCONV = "otel_genai"  # OTel GenAI semconv v1.41 (opt-in path): provider.name, time_to_first_chunk
CONV_OPENAI_V2 = "openai_v2"  # opentelemetry-instrumentation-openai-v2 default path: gen_ai.system, no TTFT
CONV_OPENLLMETRY = "openllmetry"  # OpenLLMetry <=0.47: `openai.chat`, old token names, chunk events
CONV_OPENINFERENCE = "openinference"  # OpenInference: `llm.token_count.*`, First Token Stream Event


@dataclass(frozen=True, slots=True)
class Workload:
    """One feature of the editor: who calls, how much, and how its traffic is shaped over the day."""

    name: str  # `app.feature`
    service: str  # `service.name` of the calling service
    share: float  # share of traced LLM calls
    curve: str  # key into CURVES
    calls_per_trace: tuple[int, int]  # min, max LLM calls a trace (or chat session) holds


# Traced traffic; shares of traced calls (they sum to 1).
WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("tab_completion", "editor-tab", 0.55, "office", (1, 1)),
        Workload("inline_edit", "editor-inline", 0.15, "office", (1, 1)),
        Workload("chat", "editor-chat", 0.15, "office", (1, 8)),  # one trace per turn; a session has 1-8 turns
        Workload("agent", "editor-agent", 0.10, "office", (3, 15)),
        Workload("indexing", "editor-indexer", 0.05, "background", (1, 1)),
    )
}
# Untraced traffic: a nightly batch job calling OpenAI with no instrumentation (a billing gap).
UNTRACED = Workload("batch_summarizer", "batch-summarizer", 0.0, "nightly", (1, 1))
UNTRACED_SHARE_OF_OPENAI = 0.03  # of all calls to OpenAI's own API (traced + untraced; Azure OpenAI not included)
VLLM_SERVICE = "vllm"  # service.name of the self-hosted vLLM server that emits the `llm_request` spans

# Model and convention mixes, as (value, weight) rows.
CHAT_MODELS = (("gpt-4o", 0.6), ("gpt-4.1-mini", 0.4))  # gpt-4o from OpenAI, gpt-4.1-mini from Azure OpenAI
CHAT_CONVENTIONS = ((CONV_OPENAI_V2, 0.5), (CONV_OPENLLMETRY, 0.5))
AGENT_MODELS = ((AGENT_CLAUDE, 0.75), ("o4-mini", 0.25))
AGENT_TOOLS = (("read_file", 0.5), ("grep", 0.3), ("run_tests", 0.2))
TOOL_SECONDS = {"read_file": (0.005, 0.05), "grep": (0.05, 0.8), "run_tests": (5.0, 90.0)}
TOOL_RESULT_TOKENS = {"read_file": (1_000, 8_000), "grep": (300, 3_000), "run_tests": (1_000, 6_000)}
REPOS = (  # (repo, tokens of its context block), Zipf-weighted by position
    ("acme/web-frontend", 14_000), ("acme/payments-api", 18_500), ("acme/mobile-app", 11_000),
    ("acme/data-pipeline", 21_000), ("acme/auth-service", 9_500), ("acme/infra", 12_500),
    ("acme/search", 16_000), ("acme/design-system", 8_000), ("acme/ml-platform", 19_000),
    ("acme/docs-site", 8_500), ("acme/billing-worker", 13_000), ("acme/cli", 10_000),
)
# Model mix of each traced workload. Chat picks its model per session and agents per trace; session and
# trace lengths do not depend on the model, so these weights are also the expected shares of calls.
WORKLOAD_MODELS: dict[str, tuple[tuple[str, float], ...]] = {
    "tab_completion": ((TAB_MODEL, 1.0),),
    "inline_edit": ((INLINE_MODEL, 1.0),),
    "chat": CHAT_MODELS,
    "agent": AGENT_MODELS,
    "indexing": ((EMBEDDING_MODEL, 1.0),),
}
AGENT_SYSTEM_TOKENS = 9_000  # agent system prompt plus tool definitions, identical in every agent call

# Token ranges (inclusive), drawn log-uniformly.
TOKENS = {
    "tab_prompt": (1_500, 8_000), "tab_output": (4, 40),  # fill-in-the-middle: surrounding code in, a line out
    "inline_prompt": (2_000, 8_000), "inline_output": (80, 500),
    "chat_first_prompt": (1_000, 4_000), "chat_user_msg": (50, 800), "chat_output": (200, 1_500),
    "chat_max_prompt": (20_000, 20_000),
    "agent_task": (100, 600), "agent_output": (200, 3_000), "agent_max_prompt": (150_000, 150_000),
    "index_input": (500, 8_000),
    "batch_prompt": (4_000, 12_000), "batch_output": (300, 600),
}
CHAT_SYSTEM_TOKENS = 1_100  # shared chat system prompt; OpenAI caches it in 1,024-token units
BATCH_SYSTEM_TOKENS = 1_536  # batch job instructions, cached by OpenAI after the first call

STREAMING_SHARE_CHAT = 0.9  # the rest of chat calls are non-streamed
# Traces whose LLM spans carry prompt text, per convention. openai-v2's default path logs content as log
# records, never on spans, so the OpenLLMetry half of chat captures twice as often: ~10% of chat spans.
CONTENT_CAPTURE_SHARE = {CONV_OPENLLMETRY: 0.20, CONV_OPENINFERENCE: 0.10, CONV_SEMCONV: 0.10}
SELECT_SHARE = 0.3  # traces with a database read before the model call
CACHE_TTL_S = 300  # prompt-cache lifetime assumed for both Anthropic (5 min) and OpenAI

# Errors: API calls only (vLLM is local and healthy). Rate = base + peak * load.
ERROR_RATE = (0.012, 0.020)
ERROR_TYPES = (("RateLimitError", 0.6), ("InternalServerError", 0.25), ("APITimeoutError", 0.15))
ERROR_SECONDS = {"RateLimitError": (0.04, 0.15), "InternalServerError": (0.3, 3.0), "APITimeoutError": (60.0, 60.0)}
ERROR_HTTP_STATUS = {"RateLimitError": 429, "InternalServerError": 500, "APITimeoutError": 504}

# API-side queueing: exponential with mean = base + peak * load (seconds).
API_QUEUE_MEAN_S = (0.005, 0.030)
# vLLM: the server is shared with untraced internal traffic whose running batch follows the daily
# curve; ITL grows with the running batch and requests queue once it exceeds the scheduler's limit.
VLLM_BACKGROUND_PEAK = 26  # running sequences of other tenants at the daily peak
VLLM_MAX_RUNNING = 24  # above this many running sequences, new requests wait in the queue
VLLM_ITL_PER_SEQ = 0.05  # relative ITL increase per running sequence (up to VLLM_MAX_RUNNING)
VLLM_QUEUE_MEAN_PER_SEQ_S = 0.012  # mean queue wait per sequence above the limit
VLLM_FRONTEND_S = (0.0015, 0.003)  # tokenisation and scheduling overhead inside the server

# Relative load per UTC hour of a Monday (value at the middle of the hour): quiet night, working-hours
# peaks, a lunch dip at 12:00.
_OFFICE = (0.04, 0.03, 0.03, 0.03, 0.04, 0.06, 0.12, 0.30, 0.65, 0.92, 1.00, 0.97,
           0.62, 0.70, 0.95, 1.00, 0.93, 0.75, 0.45, 0.28, 0.18, 0.12, 0.08, 0.05)
CURVES: dict[str, tuple[float, ...]] = {
    "office": _OFFICE,
    "background": tuple(0.35 + 0.65 * v for v in _OFFICE),  # re-indexing runs around the clock
    "nightly": tuple(1.0 if 1 <= h <= 4 else 0.0 for h in range(24)),  # cron window 01:00-05:00
}
MINUTES_PER_DAY = 24 * 60


def minute_weights(curve: str) -> list[float]:
    """Relative load of each minute of the day (1,440 values), linear between hour midpoints."""
    hours = CURVES[curve]
    out = []
    for minute in range(MINUTES_PER_DAY):
        pos = minute / 60.0 - 0.5
        lo = int(pos // 1) % 24
        frac = pos - (pos // 1)
        hi = (lo + 1) % 24
        if hours[lo] == 0.0 or hours[hi] == 0.0:  # a hard on/off window (cron) does not ramp
            out.append(hours[int(minute // 60)])
        else:
            out.append(hours[lo] * (1 - frac) + hours[hi] * frac)
    return out


def provider_share(provider: str) -> float:
    """Expected share (0..1) of traced calls that go to `provider`: workload shares times model weights."""
    total = 0.0
    for name, rows in WORKLOAD_MODELS.items():
        weights = sum(w for _, w in rows)
        total += WORKLOADS[name].share * sum(w for m, w in rows if MODELS[m].provider == provider) / weights
    return total


def load_at(minute: float) -> float:
    """Office load (0..1) at a minute of the day, the driver of queueing and error rates."""
    weights = _OFFICE_MINUTES
    return weights[min(int(minute), MINUTES_PER_DAY - 1)] / max(_OFFICE)


_OFFICE_MINUTES = minute_weights("office")
