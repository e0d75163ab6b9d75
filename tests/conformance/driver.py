"""Runs inside one instrumentation's virtual environment (started by record.py; not imported by the tests).

Sets a global OTel SDK TracerProvider whose exporter writes OTLP JSON Lines as the Collector's file exporter
does (one ExportTraceServiceRequest per line, camelCase, int64 as strings, ids in lowercase hex), turns the
instrumentation on, and drives the official SDK through the workloads against the fake servers.
Environment: CONF_BASE_URL, CONF_OUT, CONF_SINK, CONF_ENTRY, CONF_API, CONF_WORKLOADS.
Prints one `CONF_RESULT {json}` line with notes.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import sys
from pathlib import Path

from google.protobuf import json_format
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

BASE = os.environ["CONF_BASE_URL"]
OUT = Path(os.environ["CONF_OUT"])
SINK = Path(os.environ["CONF_SINK"])
ENTRY = os.environ["CONF_ENTRY"]
API = os.environ["CONF_API"]
WORKLOADS = json.loads(os.environ["CONF_WORKLOADS"])
NOTES: list[str] = []


def _hexify(obj):
    """The Collector writes trace and span ids as hex; MessageToDict gives base64 for bytes."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str):
                obj[k] = base64.b64decode(v).hex() if v else ""
            else:
                _hexify(v)
    elif isinstance(obj, list):
        for v in obj:
            _hexify(v)
    return obj


def request_to_line(msg) -> str:
    d = json_format.MessageToDict(msg, preserving_proto_field_name=False)
    return json.dumps(_hexify(d), separators=(",", ":"))


class OtlpJsonLinesExporter(SpanExporter):
    def __init__(self, path: Path):
        self.f = open(path, "a", encoding="utf-8")

    def export(self, spans):
        self.f.write(request_to_line(encode_spans(spans)) + "\n")
        self.f.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self):
        self.f.close()


def provider() -> TracerProvider:
    tp = TracerProvider(resource=Resource.create({"service.name": f"conformance-{ENTRY}"}))
    tp.add_span_processor(SimpleSpanProcessor(OtlpJsonLinesExporter(OUT)))
    trace.set_tracer_provider(tp)
    return tp


def prompt(workload: str, i: int) -> tuple[str, str]:
    """(shared prefix, unique part) of call i of a workload; whitespace words are the server's tokens."""
    w = WORKLOADS[workload]
    prefix = " ".join(f"{workload}ctx{j}" for j in range(w["prefix"]))
    unique = " ".join(f"{workload}q{i}t{j}" for j in range(w["unique"]))
    return prefix, unique


CLIENT = Path(os.environ.get("CONF_CLIENT", "client.jsonl"))


def calls():
    """The calls to make; each one's wall time as the caller sees it goes to CONF_CLIENT (one line per call)."""
    import time

    for name, w in WORKLOADS.items():
        model = w["openai_model"] if API == "openai" else w["anthropic_model"]
        for i, stream in enumerate(w["stream"]):
            prefix, unique = prompt(name, i)
            t0 = time.time_ns()
            yield name, model, stream, prefix, unique, w["output"]
            t1 = time.time_ns()
            with open(CLIENT, "a") as f:
                f.write(json.dumps({"client_start_ns": t0, "client_end_ns": t1, "model": model}) + "\n")


def openai_messages(prefix, unique):
    msgs = []
    if prefix:
        msgs.append({"role": "system", "content": prefix})
    msgs.append({"role": "user", "content": unique})
    return msgs


def anthropic_args(prefix, unique):
    kw = {"messages": [{"role": "user", "content": unique}]}
    if prefix:
        kw["system"] = [{"type": "text", "text": prefix, "cache_control": {"type": "ephemeral"}}]
    return kw


def drive_openai_sdk():
    import openai

    client = openai.OpenAI(base_url=BASE + "/v1", api_key="sk-conformance", max_retries=0)
    for _, model, stream, prefix, unique, n in calls():
        if stream:
            s = client.chat.completions.create(model=model, messages=openai_messages(prefix, unique), max_tokens=n,
                                               stream=True, stream_options={"include_usage": True})
            for _ in s:
                pass
        else:
            client.chat.completions.create(model=model, messages=openai_messages(prefix, unique), max_tokens=n)


def drive_anthropic_sdk():
    import anthropic

    client = anthropic.Anthropic(base_url=BASE, api_key="sk-ant-conformance", max_retries=0)
    for _, model, stream, prefix, unique, n in calls():
        if stream:
            with client.messages.stream(model=model, max_tokens=n, **anthropic_args(prefix, unique)) as s:
                for _ in s.text_stream:
                    pass
        else:
            client.messages.create(model=model, max_tokens=n, **anthropic_args(prefix, unique))


def drive_sdk():
    (drive_openai_sdk if API == "openai" else drive_anthropic_sdk)()


def run_pydantic_ai():
    from pydantic_ai import Agent
    from pydantic_ai.settings import ModelSettings

    Agent.instrument_all(True)
    if API == "openai":
        from pydantic_ai.providers.openai import OpenAIProvider
        try:
            from pydantic_ai.models.openai import OpenAIChatModel as M
        except ImportError:
            from pydantic_ai.models.openai import OpenAIModel as M
        prov = OpenAIProvider(base_url=BASE + "/v1", api_key="sk-conformance")
    else:
        from pydantic_ai.models.anthropic import AnthropicModel as M
        from pydantic_ai.providers.anthropic import AnthropicProvider
        prov = AnthropicProvider(api_key="sk-ant-conformance", anthropic_client=None) if False else None
        import anthropic
        prov = AnthropicProvider(anthropic_client=anthropic.AsyncAnthropic(base_url=BASE, api_key="sk-ant-conformance",
                                                                           max_retries=0))
    import asyncio

    async def go():
        for _, model, stream, prefix, unique, n in calls():
            agent = Agent(M(model, provider=prov), system_prompt=prefix or (), model_settings=ModelSettings(max_tokens=n))
            if stream:
                async with agent.run_stream(unique) as r:
                    async for _ in r.stream_text(delta=True):
                        pass
            else:
                await agent.run(unique)

    asyncio.run(go())


def run_litellm():
    import litellm

    litellm.callbacks = ["otel"]
    for _, model, stream, prefix, unique, n in calls():
        kw = dict(model="openai/" + model, messages=openai_messages(prefix, unique), max_tokens=n,
                  api_base=BASE + "/v1", api_key="sk-conformance")
        if stream:
            for _ in litellm.completion(stream=True, stream_options={"include_usage": True}, **kw):
                pass
        else:
            litellm.completion(**kw)


def sink_to_lines():
    """OTLP/HTTP bodies the sink received (exporters that only send over HTTP) -> JSON Lines."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    n = 0
    with open(OUT, "a", encoding="utf-8") as f:
        for p in sorted(SINK.iterdir()):
            data = p.read_bytes()
            if p.name.endswith(".gz"):
                data = gzip.decompress(data)
            if ".json" in p.name:
                msg = json_format.Parse(data, ExportTraceServiceRequest())
            else:
                msg = ExportTraceServiceRequest.FromString(data)
            f.write(request_to_line(msg) + "\n")
            n += 1
    return n


def main():
    inst = ENTRY.rsplit("-", 1)[0] if not ENTRY.startswith("otel-openai-v2") else "otel-openai-v2"
    # Logfire and Langfuse set up their own TracerProvider: Logfire gets our exporter as an extra span
    # processor, Langfuse exports over OTLP/HTTP to the fake servers' sink.
    tp = provider() if inst not in ("logfire", "langfuse") else None
    if inst == "otel-openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
        OpenAIInstrumentor().instrument(tracer_provider=tp)
        drive_sdk()
    elif inst == "openllmetry":
        if API == "openai":
            from opentelemetry.instrumentation.openai import OpenAIInstrumentor
        else:
            from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor as OpenAIInstrumentor
        OpenAIInstrumentor().instrument(tracer_provider=tp)
        drive_sdk()
    elif inst == "openinference":
        if API == "openai":
            from openinference.instrumentation.openai import OpenAIInstrumentor as I
        else:
            from openinference.instrumentation.anthropic import AnthropicInstrumentor as I
        I().instrument(tracer_provider=tp)
        drive_sdk()
    elif inst == "openlit":
        import inspect

        import openlit
        from opentelemetry import trace as otel_trace
        kw = dict(disable_metrics=True, collect_gpu_stats=False,
                  disabled_instrumentors=[x for x in ("anthropic", "openai") if x != API])
        if "tracer" in inspect.signature(openlit.init).parameters:
            kw["tracer"] = tp.get_tracer("openlit")
        else:  # openlit >= 1.35 has no `tracer`: it reuses the global TracerProvider when one is set
            otel_trace.set_tracer_provider(tp)
        openlit.init(**kw)
        drive_sdk()
    elif inst == "logfire":
        import logfire
        logfire.configure(send_to_logfire=False, console=False, service_name=f"conformance-{ENTRY}",
                          additional_span_processors=[SimpleSpanProcessor(OtlpJsonLinesExporter(OUT))])
        if API == "openai":
            logfire.instrument_openai()
        else:
            logfire.instrument_anthropic()
        drive_sdk()
    elif inst == "langfuse":
        os.environ.update(LANGFUSE_PUBLIC_KEY="pk-lf-conformance", LANGFUSE_SECRET_KEY="sk-lf-conformance",
                          LANGFUSE_HOST=BASE, LANGFUSE_TRACING_ENVIRONMENT="conformance")
        from langfuse import get_client
        from langfuse.openai import openai as lf_openai  # noqa: F401  (patches the SDK)
        drive_openai_sdk()
        get_client().flush()
    elif inst == "pydantic-ai":
        run_pydantic_ai()
    elif inst == "litellm":
        run_litellm()
    elif inst == "sdk":
        drive_sdk()
    else:
        raise SystemExit(f"unknown entry {ENTRY}")
    if tp is not None:
        tp.force_flush()
    try:
        import logfire  # noqa: F401
        logfire.force_flush()
    except Exception:
        pass
    sunk = sink_to_lines()
    if sunk:
        NOTES.append(f"{sunk} OTLP/HTTP requests received by the sink")
    print("CONF_RESULT " + json.dumps({"notes": NOTES}), flush=True)


if __name__ == "__main__":
    main()
    sys.exit(0)
