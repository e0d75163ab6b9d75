"""Render simulated calls as OpenTelemetry traces through the real SDK, as OTLP JSON lines per service.

Each trace gets the spans a real deployment would produce around its LLM calls: HTTP server and
client spans, an occasional database query, agent and tool spans. The LLM span itself comes from
`conventions.llm_span`. Trace and LLM span ids are the simulation's; the other ids and the small
timings of non-LLM spans come from generators seeded by the trace id, so output is deterministic
and does not depend on how traces are cut into chunks or spread over processes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from opentelemetry import trace as trace_api
from opentelemetry.context import Context
from opentelemetry.sdk.resources import _DEFAULT_RESOURCE, Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode

from phaselens.sample_logs import profile as P
from phaselens.sample_logs.conventions import SCOPES, llm_span
from phaselens.sample_logs.otlp_json import CollectingProcessor, OtlpJsonLinesExporter, SeededIdGenerator
from phaselens.sample_logs.simcall import SimCall
from phaselens.sample_logs.simulate import TOOL_GAP_NS

MS = 1_000_000  # ns
SERVICE_VERSIONS = {
    "editor-tab": "3.14.0", P.VLLM_SERVICE: "0.11.2", "editor-inline": "2.3.1", "editor-agent": "0.9.4",
    "editor-indexer": "1.2.0",
}
CHAT_VERSIONS = {P.CONV_OPENLLMETRY: "1.8.2", P.CONV_OPENAI_V2: "1.9.0"}  # a rollout: old and new instrumentation
ROUTES = {"inline_edit": "/api/inline-edit", "chat": "/api/chat", "indexing": "/api/index"}
DB_QUERIES = {  # workload -> (operation, table, query text without values)
    "inline_edit": ("SELECT", "user_settings", "SELECT model_prefs, style_rules FROM user_settings WHERE user_id = $1"),
    "chat": ("SELECT", "chat_messages", "SELECT id, role, token_count FROM chat_messages WHERE session_id = $1"),
    "agent": ("SELECT", "repo_index", "SELECT path, symbol_count FROM repo_index WHERE repo = $1 LIMIT 50"),
    "indexing": ("INSERT", "chunk_embeddings", "INSERT INTO chunk_embeddings (chunk_id, vector) VALUES ($1, $2)"),
}
_ROOT = Context()


@dataclass
class ChunkResult:
    """The OTLP JSON lines of a chunk of traces, per output group (calling service), and counts."""

    lines: dict[str, list[str]] = field(default_factory=dict)
    traces: int = 0
    spans: int = 0
    llm_spans: int = 0


class TraceRenderer:
    """Turns traces into OTLP JSON lines; one per process, reused for every chunk it renders."""

    def __init__(self, batch_spans: int = 256, single_group: bool = False, seed: int = 0,
                 count_only: bool = False) -> None:
        self.params = (batch_spans, single_group, seed)
        self.count_only = count_only  # create the spans but drop them instead of encoding (to count spans)
        self.batch_spans = batch_spans
        self.single_group = single_group
        self.ids = SeededIdGenerator(seed)
        self.limits = SpanLimits(  # explicit, so OTEL_* environment variables cannot change the output
            max_span_attributes=512, max_events=100_000, max_links=128, max_event_attributes=32,
            max_link_attributes=32, max_span_attribute_length=SpanLimits.UNSET, max_attribute_length=SpanLimits.UNSET,
        )
        self.processors: dict[str, CollectingProcessor] = {}
        self.tracers: dict[tuple, trace_api.Tracer] = {}
        self.providers: dict[tuple, TracerProvider] = {}
        self.result = ChunkResult()
        self.rng = random.Random()

    def render(self, traces: list[list[SimCall]]) -> ChunkResult:
        """Spans of these traces as JSON lines; every line is flushed before returning."""
        self.result = ChunkResult()
        for trace in traces:
            self._write_trace(trace)
        for processor in self.processors.values():
            processor.force_flush()
        return self.result

    # ---- plumbing --------------------------------------------------------------------------------
    def _processor(self, group: str) -> CollectingProcessor:
        key = "all" if self.single_group else group
        if key not in self.processors:
            exporter = OtlpJsonLinesExporter(lambda line, key=key: self.result.lines.setdefault(key, []).append(line))
            self.processors[key] = CollectingProcessor(None if self.count_only else exporter, self.batch_spans)
        return self.processors[key]

    def _tracer(self, group: str, service: str, version: str, scope: str) -> trace_api.Tracer:
        key = (group, service, version, scope)
        if key not in self.tracers:
            if (group, service, version) not in self.providers:
                resource = _DEFAULT_RESOURCE.merge(Resource({  # no detectors: no host names, no random ids
                    "service.name": service, "service.version": version,
                    "deployment.environment.name": "production",
                }))
                provider = TracerProvider(resource=resource, id_generator=self.ids, span_limits=self.limits,
                                          shutdown_on_exit=False)
                provider.add_span_processor(self._processor(group))
                self.providers[(group, service, version)] = provider
            name, scope_version, schema_url = SCOPES[scope]
            self.tracers[key] = self.providers[(group, service, version)].get_tracer(name, scope_version, schema_url)
        return self.tracers[key]

    def _span(self, tracer, name, kind, start, attrs, parent=None, span_id=None, events=()):
        if span_id is not None:
            self.ids.pin_span(span_id)
        context = _ROOT if parent is None else trace_api.set_span_in_context(parent, _ROOT)
        span = tracer.start_span(name, context=context, kind=kind, attributes=attrs, start_time=start)
        for event_name, at, event_attrs in events:
            span.add_event(event_name, event_attrs or None, timestamp=at)
        self.result.spans += 1
        return span

    def _llm(self, group, service, version, call, trace, parent):
        spec = llm_span(call, trace, self.rng)
        tracer = self._tracer(group, service, version, spec.scope)
        span = self._span(tracer, spec.name, spec.kind, call.start_ns, spec.attributes, parent, call.span_id,
                          spec.events)
        if call.status == "error":
            span.set_status(Status(StatusCode.ERROR, f"{call.error_type}: Error code: "
                                                     f"{P.ERROR_HTTP_STATUS.get(call.error_type, 500)}"))
        span.end(end_time=call.end_ns)
        self.result.llm_spans += 1

    def _db(self, group, service, version, workload, start, parent) -> int:
        operation, table, query = DB_QUERIES[workload]
        end = start + self.rng.randint(1 * MS, 6 * MS)
        attrs = {"db.system.name": "postgresql", "db.namespace": "editor", "db.operation.name": operation,
                 "db.collection.name": table, "db.query.text": query, "server.address": "db.internal",
                 "server.port": 5432}
        span = self._span(self._tracer(group, service, version, "db"), f"{operation} {table}",
                          SpanKind.CLIENT, start, attrs, parent)
        span.end(end_time=end)
        return end

    def _server(self, group, service, version, route, start, failed):
        attrs = {"http.request.method": "POST", "http.route": route, "url.path": route, "url.scheme": "https",
                 "server.address": f"{service}.internal", "network.protocol.version": "1.1",
                 "http.response.status_code": 502 if failed else 200}
        span = self._span(self._tracer(group, service, version, "http_server"), f"POST {route}",
                          SpanKind.SERVER, start, attrs)
        if failed:
            span.set_status(Status(StatusCode.ERROR))
        return span

    def _client(self, group, service, version, host, port, path, start, parent):
        attrs = {"http.request.method": "POST", "url.full": f"http://{host}:{port}{path}", "server.address": host,
                 "server.port": port, "http.response.status_code": 200}
        return self._span(self._tracer(group, service, version, "http_client"), f"POST {path}",
                          SpanKind.CLIENT, start, attrs, parent)

    # ---- traces ----------------------------------------------------------------------------------
    def _write_trace(self, trace: list[SimCall]) -> None:
        first = trace[0]
        self.ids.begin_trace(first.trace_id)
        self.rng.seed(int(first.trace_id, 16) ^ 0x5BD1E995)
        {"tab_completion": self._tab, "agent": self._agent}.get(first.workload, self._single)(trace)
        self.result.traces += 1
        self._processor(first.service).flush_full()

    def _tab(self, trace: list[SimCall]) -> None:
        call, group = trace[0], trace[0].service
        version = SERVICE_VERSIONS[group]
        client = self._client(group, group, version, "vllm.internal", 8000, "/v1/completions",
                              call.start_ns - self.rng.randint(MS // 4, MS + MS // 2), None)
        self._llm(group, call.span_service, SERVICE_VERSIONS[call.span_service], call, trace, client)
        client.end(end_time=call.end_ns + self.rng.randint(MS // 5, MS))

    def _single(self, trace: list[SimCall]) -> None:
        """Inline edit, chat turn, indexing batch: HTTP request -> (db) -> (workflow) -> model call."""
        call, group = trace[0], trace[0].service
        version = CHAT_VERSIONS[call.convention] if group == "editor-chat" else SERVICE_VERSIONS[group]
        failed = call.status == "error"
        reads_first = call.workload in ("inline_edit", "chat") and self.rng.random() < P.SELECT_SHARE
        pre = self.rng.randint(1 * MS, 4 * MS) + (8 * MS if reads_first else 0)
        root = self._server(group, group, version, ROUTES[call.workload], call.start_ns - pre, failed)
        if reads_first:
            self._db(group, group, version, call.workload, call.start_ns - pre + MS // 2, root)
        parent, workflow = root, None
        if call.convention == P.CONV_OPENLLMETRY:
            attrs = {"traceloop.span.kind": "workflow", "traceloop.entity.name": "chat",
                     "traceloop.workflow.name": "chat"}
            workflow = self._span(self._tracer(group, group, version, "traceloop"), "chat.workflow",
                                  SpanKind.INTERNAL, call.start_ns - MS // 2, attrs, root)
            parent = workflow
        self._llm(group, group, version, call, trace, parent)
        end = call.end_ns
        if workflow is not None:
            end += MS // 4
            workflow.end(end_time=end)
        if call.workload == "indexing" and not failed:
            end = self._db(group, group, version, "indexing", end + MS // 5, root)
        root.end(end_time=end + self.rng.randint(MS // 2, 3 * MS))

    def _agent(self, trace: list[SimCall]) -> None:
        first, group = trace[0], trace[0].service
        version = SERVICE_VERSIONS[group]
        agent = lambda scope: self._tracer(group, group, version, scope)  # noqa: E731
        context_ns = self.rng.randint(20 * MS, 300 * MS)
        start = first.start_ns - context_ns - 2 * MS
        root = self._span(agent("agent"), "invoke_agent editor-agent", SpanKind.INTERNAL, start, {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "editor-agent",
            "openinference.span.kind": "AGENT", "app.feature": "agent"})
        ctx = self._span(agent("agent"), "build_context", SpanKind.INTERNAL, start + MS,
                         {"openinference.span.kind": "CHAIN"}, root)
        if self.rng.random() < P.SELECT_SHARE:
            self._db(group, group, version, "agent", start + 2 * MS, ctx)
        ctx.end(end_time=first.start_ns - MS)
        for call in trace:
            self._llm(group, group, version, call, trace, root)
            if call.tool_after:
                tool_start = call.end_ns + TOOL_GAP_NS
                tool_end = tool_start + round(call.tool_s * 1e9)
                tool = self._span(agent("agent"), f"execute_tool {call.tool_after}", SpanKind.INTERNAL, tool_start, {
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.tool_after,
                    "openinference.span.kind": "TOOL", "tool.name": call.tool_after}, root)
                if call.tool_after == "run_tests":
                    ci = self._client(group, group, version, "ci-runner.internal", 8080, "/v1/test-runs",
                                      tool_start + MS, tool)
                    ci.end(end_time=tool_end - MS)
                tool.end(end_time=tool_end)
        root.end(end_time=trace[-1].end_ns + self.rng.randint(1 * MS, 5 * MS))
