"""The instrumentation matrix the conformance suite records: one entry per (instrumentation, provider API).

`venv` names the virtual environment (under the cache dir) an entry runs in; entries that differ only by an
environment variable or by which SDK they wrap share one. `packages` is what that environment installs on
top of BASE_PACKAGES (the OTel SDK and the OTLP encoder the recorder's file exporter needs).
"""

from __future__ import annotations

# httpx: openai 3.x moved to httpx2, while several instrumentations still import httpx.
BASE_PACKAGES = ["opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-common", "protobuf", "httpx"]

VENVS: dict[str, list[str]] = {
    # 2.4b0 imports opentelemetry.util.genai.instruments, gone from util-genai 1.x: pin the last 0.x.
    "otel-openai-v2": ["openai", "opentelemetry-instrumentation-openai-v2", "opentelemetry-util-genai==0.4b0"],
    "openllmetry-openai": ["openai", "opentelemetry-instrumentation-openai"],
    "openllmetry-anthropic": ["anthropic", "opentelemetry-instrumentation-anthropic"],
    "openinference-openai": ["openai", "openinference-instrumentation-openai"],
    "openinference-anthropic": ["anthropic", "openinference-instrumentation-anthropic"],
    # openlit imports opentelemetry._events/_logs: a venv upgraded in place mixed OTel 1.39 and 1.45 parts
    # (`cannot import name '_events'`); pin one consistent OTel release and the SDK majors openlit supports.
    "openlit": ["openlit==1.45.0", "openai>=1.92,<3", "anthropic>=0.42,<1",
                "opentelemetry-api==1.45.1", "opentelemetry-sdk==1.45.1", "opentelemetry-exporter-otlp==1.45.1",
                "opentelemetry-instrumentation==0.66b1", "opentelemetry-semantic-conventions==0.66b1"],
    "logfire": ["logfire", "openai", "anthropic"],
    "langfuse": ["langfuse>=3", "openai"],
    "pydantic-ai": ["pydantic-ai-slim[openai,anthropic]"],
    "litellm": ["litellm", "openai", "opentelemetry-exporter-otlp-proto-http"],
    "sdk": ["openai", "anthropic"],
}

# name -> (venv, api, env, label, instrumentation package shown in the docs)
ENTRIES: dict[str, dict] = {
    "otel-openai-v2": dict(venv="otel-openai-v2", api="openai", env={},
                           label="OpenTelemetry openai-v2", package="opentelemetry-instrumentation-openai-v2"),
    "otel-openai-v2-latest": dict(venv="otel-openai-v2", api="openai",
                                  env={"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"},
                                  label="OpenTelemetry openai-v2 (gen_ai_latest_experimental)",
                                  package="opentelemetry-instrumentation-openai-v2"),
    "openllmetry-openai": dict(venv="openllmetry-openai", api="openai", env={},
                               label="OpenLLMetry OpenAI", package="opentelemetry-instrumentation-openai"),
    "openllmetry-anthropic": dict(venv="openllmetry-anthropic", api="anthropic", env={},
                                  label="OpenLLMetry Anthropic", package="opentelemetry-instrumentation-anthropic"),
    "openinference-openai": dict(venv="openinference-openai", api="openai", env={},
                                 label="OpenInference OpenAI", package="openinference-instrumentation-openai"),
    "openinference-anthropic": dict(venv="openinference-anthropic", api="anthropic", env={},
                                    label="OpenInference Anthropic", package="openinference-instrumentation-anthropic"),
    "openlit-openai": dict(venv="openlit", api="openai", env={}, label="OpenLIT OpenAI", package="openlit"),
    "openlit-anthropic": dict(venv="openlit", api="anthropic", env={}, label="OpenLIT Anthropic", package="openlit"),
    "logfire-openai": dict(venv="logfire", api="openai", env={}, label="Logfire OpenAI", package="logfire"),
    "logfire-anthropic": dict(venv="logfire", api="anthropic", env={}, label="Logfire Anthropic", package="logfire"),
    "langfuse-openai": dict(venv="langfuse", api="openai", env={}, label="Langfuse SDK OpenAI", package="langfuse"),
    "pydantic-ai-openai": dict(venv="pydantic-ai", api="openai", env={}, label="pydantic-ai OpenAI",
                               package="pydantic-ai-slim"),
    "pydantic-ai-anthropic": dict(venv="pydantic-ai", api="anthropic", env={}, label="pydantic-ai Anthropic",
                                  package="pydantic-ai-slim"),
    "litellm-openai": dict(venv="litellm", api="openai", env={}, label="LiteLLM otel callback (OpenAI)",
                           package="litellm"),
    "sdk-openai": dict(venv="sdk", api="openai", env={}, label="openai SDK, no instrumentation", package="openai"),
    "sdk-anthropic": dict(venv="sdk", api="anthropic", env={}, label="anthropic SDK, no instrumentation",
                          package="anthropic"),
}

# Workloads: model -> workload (the store assigns workloads by model through the suite's config file).
# prompt: (shared prefix words, unique words); output tokens; which calls stream.
WORKLOADS: dict[str, dict] = {
    "chat": dict(openai_model="gpt-4o-mini", anthropic_model="claude-3-5-haiku-20241022",
                 prefix=0, unique=40, output=200, stream=[True, True, True, False]),
    "rag": dict(openai_model="gpt-4.1-mini", anthropic_model="claude-3-7-sonnet-20250219",
                prefix=2048, unique=300, output=6, stream=[False, False, True, False]),
    "agent": dict(openai_model="gpt-4.1-nano", anthropic_model="claude-sonnet-4-20250514",
                  prefix=256, unique=1600, output=150, stream=[True, False, True, True]),
}
