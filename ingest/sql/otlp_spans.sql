-- otlp_spans: every span of the parsed OTLP JSON batches in `otlp_batches(line_no, j)`, as canonical LlmCall
-- columns plus `_kind` (call | skip), `_reason` and `_detail` (reject). Grain: one row per span.
-- Attribute names accepted per convention: docs/formats.md#genai-attribute-conventions (aliases included).
CREATE OR REPLACE TEMP TABLE otlp_spans AS
WITH resource_spans AS (
  SELECT line_no, unnest(j.resourceSpans) AS r FROM otlp_batches WHERE j IS NOT NULL
),
scope_spans AS (
  SELECT line_no,
         list_transform(r.resource.attributes, lambda a: a.key) AS rk,
         list_transform(r.resource.attributes, lambda a: otlp_value(a.value)) AS rv,
         unnest(r.scopeSpans) AS s
  FROM resource_spans
),
spans AS (
  SELECT line_no, rk, rv, s.scope.name AS scope_name, s.scope.version AS scope_version, unnest(s.spans) AS x FROM scope_spans
),
flat AS (
  SELECT
    line_no, scope_name, scope_version, x.name AS span_name, x.kind AS span_kind,
    lower(x.traceId) AS trace_id, lower(x.spanId) AS span_id, nullif(lower(x.parentSpanId), '') AS parent_span_id,
    TRY_CAST(x.startTimeUnixNano AS HUGEINT) AS start_ns,
    TRY_CAST(x.endTimeUnixNano AS HUGEINT) AS end_ns,
    x.status.code AS status_code,
    x.events AS events,
    rk, rv,
    list_filter(x.attributes, lambda a: NOT otlp_is_content(a.key)) AS kept,  -- prompt/completion text dropped
    list_filter(x.attributes, lambda a: otlp_is_content(a.key)) AS content_attrs
  FROM spans
),
kv AS (
  SELECT * EXCLUDE (kept),
         list_transform(kept, lambda a: a.key) AS k,
         list_transform(kept, lambda a: otlp_value(a.value)) AS v
  FROM flat
),
typed AS (
  SELECT
    *,
    coalesce(av(k, v, 'gen_ai.operation.name'), av(k, v, 'llm.request.type'),
             CASE av(k, v, 'openinference.span.kind') WHEN 'LLM' THEN 'chat' WHEN 'EMBEDDING' THEN 'embeddings' END,
             CASE WHEN span_name = 'llm_request' THEN 'chat' END) AS op_raw,
    coalesce(av(k, v, 'gen_ai.response.model'), av(k, v, 'gen_ai.request.model'), av(k, v, 'llm.model_name'),
             av(k, v, 'llm.response.model_name'), av(k, v, 'llm.request.model_name'), av(k, v, 'embedding.model_name')) AS model_raw,
    coalesce(av(k, v, 'gen_ai.provider.name'), av(k, v, 'gen_ai.system'), av(k, v, 'llm.provider'), av(k, v, 'llm.system'),
             CASE WHEN span_name = 'llm_request' OR scope_name LIKE 'vllm%' THEN 'vllm' END) AS provider_raw,
    coalesce(av(k, v, 'gen_ai.usage.input_tokens'), av(k, v, 'gen_ai.usage.prompt_tokens'), av(k, v, 'llm.token_count.prompt')) AS in_total_raw,
    TRY_CAST(TRY_CAST(coalesce(av(k, v, 'gen_ai.usage.input_tokens'), av(k, v, 'gen_ai.usage.prompt_tokens'), av(k, v, 'llm.token_count.prompt')) AS DOUBLE) AS BIGINT) AS in_total,
    coalesce(av(k, v, 'gen_ai.usage.cache_read.input_tokens'), av(k, v, 'gen_ai.usage.cache_read_input_tokens'),
             av(k, v, 'llm.token_count.prompt_details.cache_read'), av(k, v, 'gen_ai.usage.cached_tokens')) AS cache_read_raw,
    TRY_CAST(TRY_CAST(coalesce(av(k, v, 'gen_ai.usage.cache_read.input_tokens'), av(k, v, 'gen_ai.usage.cache_read_input_tokens'),
             av(k, v, 'llm.token_count.prompt_details.cache_read'), av(k, v, 'gen_ai.usage.cached_tokens')) AS DOUBLE) AS BIGINT) AS cache_read,
    coalesce(av(k, v, 'gen_ai.usage.cache_creation.input_tokens'), av(k, v, 'gen_ai.usage.cache_write.input_tokens'), av(k, v, 'gen_ai.usage.cache_creation_input_tokens'),
             av(k, v, 'llm.token_count.prompt_details.cache_write')) AS cache_write_raw,
    TRY_CAST(TRY_CAST(coalesce(av(k, v, 'gen_ai.usage.cache_creation.input_tokens'), av(k, v, 'gen_ai.usage.cache_write.input_tokens'), av(k, v, 'gen_ai.usage.cache_creation_input_tokens'),
             av(k, v, 'llm.token_count.prompt_details.cache_write')) AS DOUBLE) AS BIGINT) AS cache_write,
    coalesce(av(k, v, 'gen_ai.usage.output_tokens'), av(k, v, 'gen_ai.usage.completion_tokens'), av(k, v, 'llm.token_count.completion')) AS out_tokens_raw,
    TRY_CAST(TRY_CAST(coalesce(av(k, v, 'gen_ai.usage.output_tokens'), av(k, v, 'gen_ai.usage.completion_tokens'), av(k, v, 'llm.token_count.completion')) AS DOUBLE) AS BIGINT) AS out_tokens,
    coalesce(av(k, v, 'gen_ai.usage.reasoning.output_tokens'), av(k, v, 'gen_ai.usage.reasoning_tokens'),
             av(k, v, 'llm.token_count.completion_details.reasoning')) AS reasoning_raw,
    TRY_CAST(TRY_CAST(coalesce(av(k, v, 'gen_ai.usage.reasoning.output_tokens'), av(k, v, 'gen_ai.usage.reasoning_tokens'),
             av(k, v, 'llm.token_count.completion_details.reasoning')) AS DOUBLE) AS BIGINT) AS reasoning,
    TRY_CAST(av(k, v, 'gen_ai.latency.e2e') AS DOUBLE) AS srv_e2e,
    TRY_CAST(av(k, v, 'gen_ai.latency.time_in_queue') AS DOUBLE) AS srv_queue,
    TRY_CAST(av(k, v, 'gen_ai.latency.time_in_model_prefill') AS DOUBLE) AS srv_prefill,
    TRY_CAST(av(k, v, 'gen_ai.latency.time_in_model_decode') AS DOUBLE) AS srv_decode,
    coalesce(TRY_CAST(av(k, v, 'gen_ai.response.time_to_first_chunk') AS DOUBLE),
             TRY_CAST(av(k, v, 'gen_ai.latency.time_to_first_token') AS DOUBLE),
             TRY_CAST(coalesce(av(k, v, 'ai.response.msToFirstChunk'), av(k, v, 'ai.stream.msToFirstChunk')) AS DOUBLE) / 1000.0) AS attr_ttft,
    list_sort(list_transform(
      list_filter(events, lambda e: e.name IN ('gen_ai.content.completion.chunk', 'First Token Stream Event')),
      lambda e: TRY_CAST(e.timeUnixNano AS HUGEINT))) AS chunk_ns
  FROM kv
),
classified AS (
  SELECT
    *,
    CASE
      WHEN op_raw IN ('invoke_agent', 'create_agent', 'invoke_workflow', 'execute_tool', 'retrieval') THEN 'skip'
      WHEN op_raw IS NOT NULL THEN 'call'
      WHEN in_total IS NOT NULL OR out_tokens IS NOT NULL THEN 'call'
      ELSE 'skip'
    END AS _kind,
    CASE WHEN op_raw IN ('embeddings', 'embedding') THEN 'embeddings'
         WHEN op_raw = 'completion' THEN 'text_completion'
         ELSE coalesce(op_raw, 'chat') END AS operation,
    (end_ns - start_ns) / 1e9 AS span_s,
    coalesce(start_ns BETWEEN 1 AND 4102444800000000000, false) AS start_ok,  -- 1970 .. 2100
    coalesce(end_ns BETWEEN 1 AND 4102444800000000000, false) AS end_ok,
    CASE WHEN len(chunk_ns) > 0 THEN (chunk_ns[1] - start_ns) / 1e9 END AS event_ttft
  FROM typed
),
split AS (
  SELECT
    *,
    -- Inputs that are smaller than their own cache parts were reported Anthropic-style (cache excluded).
    CASE WHEN in_total IS NULL THEN NULL
         WHEN in_total < coalesce(cache_read, 0) + coalesce(cache_write, 0) THEN in_total
         ELSE in_total - coalesce(cache_read, 0) - coalesce(cache_write, 0) END AS uncached,
    coalesce(srv_e2e, span_s) AS e2e,
    coalesce(attr_ttft, event_ttft) AS ttft,
    CASE WHEN operation = 'embeddings' THEN 'measured'
         WHEN srv_prefill IS NOT NULL OR srv_decode IS NOT NULL OR attr_ttft IS NOT NULL THEN 'measured'
         WHEN event_ttft IS NOT NULL THEN 'events'
         ELSE 'none' END AS tsource
  FROM classified
)
SELECT
  'otlp:' || coalesce(trace_id, '') || ':' || coalesce(span_id, '') AS call_id,
  trace_id, span_id, parent_span_id,
  'otlp' AS source,
  CASE WHEN span_name = 'llm_request' OR av(k, v, 'gen_ai.latency.e2e') IS NOT NULL THEN 'vllm'
       WHEN av(k, v, 'openinference.span.kind') IS NOT NULL THEN 'openinference'
       WHEN av(k, v, 'traceloop.workflow.name') IS NOT NULL OR av(k, v, 'llm.request.type') IS NOT NULL
            OR av(k, v, 'gen_ai.is_streaming') IS NOT NULL OR span_name LIKE '%.chat' THEN 'openllmetry'
       ELSE 'otel_genai' END AS convention,
  nullif(trim(coalesce(scope_name, '') || ' ' || coalesce(scope_version, '')), '') AS instrumentation,
  '' AS load_id,
  $display || '#' || coalesce(span_id, 'line' || line_no) AS source_locator,
  CASE WHEN start_ok THEN make_timestamp((start_ns // 1000)::BIGINT) END AS started_at,
  CASE WHEN start_ok AND ttft BETWEEN 0 AND 86400 AND operation <> 'embeddings'
       THEN make_timestamp((start_ns // 1000)::BIGINT + (ttft * 1e6)::BIGINT) END AS first_token_at,
  CASE WHEN end_ok THEN make_timestamp((end_ns // 1000)::BIGINT) END AS ended_at,
  normalize_provider(provider_raw) AS provider,
  normalize_model(model_raw) AS model,
  model_raw,
  operation,
  av(rk, rv, 'service.name') AS service,
  coalesce(av(k, v, 'app.feature'), av(k, v, 'feature'), av(k, v, 'gen_ai.agent.name'), av(k, v, 'traceloop.workflow.name'),
           av(k, v, 'langfuse.trace.name'), av(rk, rv, 'app.feature')) AS workload_hint,
  coalesce(av(k, v, 'app.team'), av(k, v, 'team'), av(rk, rv, 'app.team'), av(rk, rv, 'team')) AS team,
  coalesce(av(k, v, 'app.project'), av(k, v, 'project'), av(rk, rv, 'app.project')) AS project,
  av(k, v, 'gen_ai.request.api_key_id') AS api_key,
  coalesce(av(k, v, 'user.id'), av(k, v, 'enduser.id'), av(k, v, 'gen_ai.request.user')) AS "user",
  coalesce(av(rk, rv, 'deployment.environment.name'), av(rk, rv, 'deployment.environment'), av(k, v, 'deployment.environment')) AS environment,
  uncached AS uncached_input_tokens,
  cache_read AS cache_read_tokens,
  cache_write AS cache_write_tokens,
  NULL::BIGINT AS cache_write_1h_tokens,
  CASE WHEN operation = 'embeddings' THEN coalesce(out_tokens, 0) ELSE out_tokens END AS output_tokens,
  reasoning AS reasoning_tokens,
  e2e AS e2e_s,
  CASE WHEN operation <> 'embeddings' THEN ttft END AS ttft_s,
  srv_queue AS queue_s,
  CASE WHEN operation = 'embeddings' THEN e2e ELSE coalesce(srv_prefill, ttft) END AS prefill_s,
  CASE WHEN operation = 'embeddings' THEN 0.0 ELSE coalesce(srv_decode, e2e - ttft) END AS decode_s,
  CASE WHEN operation <> 'embeddings' AND out_tokens > 1
       THEN coalesce(srv_decode, e2e - ttft) / (out_tokens - 1) END AS itl_s,
  -- Per-call ITL from chunk events, per token (a chunk may carry several tokens).
  CASE WHEN len(chunk_ns) > 2 AND out_tokens > 1 THEN
    list_aggregate(list_transform(list_zip(chunk_ns[2:], chunk_ns[:-1]), lambda p: (p[1] - p[2]) / 1e9), 'quantile_cont', 0.5)
      * (len(chunk_ns) - 1) / (out_tokens - 1)
  END AS itl_p50_s,
  CASE WHEN len(chunk_ns) > 2 AND out_tokens > 1 THEN
    list_aggregate(list_transform(list_zip(chunk_ns[2:], chunk_ns[:-1]), lambda p: (p[1] - p[2]) / 1e9), 'quantile_cont', 0.95)
      * (len(chunk_ns) - 1) / (out_tokens - 1)
  END AS itl_p95_s,
  tsource AS timing_source,
  coalesce(TRY_CAST(coalesce(av(k, v, 'gen_ai.request.stream'), av(k, v, 'gen_ai.is_streaming'), av(k, v, 'llm.is_streaming')) AS BOOLEAN),
           CASE WHEN len(chunk_ns) > 0 THEN true END) AS streaming,
  CASE WHEN status_code = 2 OR av(k, v, 'error.type') IS NOT NULL THEN 'error' ELSE 'ok' END AS status,
  av(k, v, 'error.type') AS error_type,
  TRY_CAST(coalesce(av(k, v, 'gen_ai.usage.cost'), av(k, v, 'llm.cost.total')) AS DECIMAL(38, 12)) AS provided_cost_usd,
  otlp_json_object(k, v) AS attributes_json,
  content_attrs,
  _kind,
  CASE
    WHEN _kind = 'skip' THEN NULL
    WHEN coalesce(trace_id, '') = '' OR coalesce(span_id, '') = '' THEN 'missing_field'
    WHEN NOT start_ok OR (end_ns IS NOT NULL AND NOT end_ok) THEN 'bad_timestamp'
    WHEN end_ns IS NOT NULL AND end_ns < start_ns THEN 'end_before_start'
    WHEN (in_total_raw IS NOT NULL AND in_total IS NULL) OR (cache_read_raw IS NOT NULL AND cache_read IS NULL)
      OR (cache_write_raw IS NOT NULL AND cache_write IS NULL) OR (out_tokens_raw IS NOT NULL AND out_tokens IS NULL)
      OR (reasoning_raw IS NOT NULL AND reasoning IS NULL) OR NOT coalesce(ttft BETWEEN 0 AND 86400, true)
      OR NOT coalesce(e2e BETWEEN 0 AND 86400 * 7, true) THEN 'bad_number'
    WHEN model_raw IS NULL OR trim(model_raw) = '' THEN 'missing_model'
    WHEN in_total < 0 OR cache_read < 0 OR cache_write < 0 OR out_tokens < 0 OR reasoning < 0 THEN 'negative_tokens'
  END AS _reason,
  line_no
FROM split;
