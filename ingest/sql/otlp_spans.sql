-- otlp_spans: every span of the parsed OTLP JSON batches in `otlp_batches(line_no, j)`, as canonical LlmCall
-- columns plus `_kind` (call | skip), `_reason` (reject) and the span's own times for merging (otlp_merge.sql).
-- Grain: one row per span. The attribute names per column come from ingest/conventions.py, templated in where
-- the placeholder CONVENTION_COLUMNS stands; `$keep` is the privacy allow-list (attributes kept in attributes_json).
-- A skip span (`_kind`) is read for its ids, name, scope and times only (the columns raw_otlp_spans keeps of it):
-- its other columns are not those of its attributes.
-- Attribute names accepted per convention: docs/formats.md#genai-attribute-conventions.
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
  SELECT line_no, rk, rv, coalesce(s.scope.name, '') AS scope_name, s.scope.version AS scope_version, unnest(s.spans) AS x FROM scope_spans
),
gated AS (  -- a span with none of the keys that make a call is a skip span: its attributes are not read
  SELECT *, x.name = 'llm_request' OR list_has_any(list_transform(x.attributes, lambda a: a.key), [{{CALL_KEYS}}]) AS may_call
  FROM spans
),
marked AS (  -- which attributes carry prompt or completion text, decided once per attribute
  SELECT *, CASE WHEN may_call THEN list_transform(x.attributes, lambda a: otlp_is_content(a.key)) END AS is_content
  FROM gated
),
parted AS (
  SELECT *, CASE WHEN may_call THEN list_filter(x.attributes, lambda a, i: is_content[i]) ELSE [] END AS content_attrs,
         CASE WHEN may_call THEN list_filter(x.attributes, lambda a, i: NOT is_content[i]) ELSE [] END AS plain_attrs
  FROM marked
),
flat AS (
  SELECT
    line_no, scope_name, scope_version, x.name AS span_name, x.kind AS span_kind,
    lower(x.traceId) AS trace_id, lower(x.spanId) AS span_id, nullif(lower(x.parentSpanId), '') AS parent_span_id,
    otlp_ns(x.startTimeUnixNano) AS start_ns0,
    otlp_ns(x.endTimeUnixNano) AS end_ns,
    nullif(x.endTimeUnixNano, '') IS NOT NULL AND otlp_ns(x.endTimeUnixNano) IS NULL AS end_garbage,
    x.status.code AS status_code,
    x.events AS events,
    coalesce(TRY_CAST(x.droppedEventsCount AS BIGINT), 0) AS dropped_events,
    rk, rv,
    -- prompt/completion text: only for hashing the leading blocks (otlp_prefix.sql), never stored
    content_attrs,
    list_transform(plain_attrs, lambda a: a.key) AS k,
    list_transform(plain_attrs, lambda a: otlp_value(a.value)) AS v
  FROM parted
),
conv AS (  -- each attribute lookup of the conventions once, as _r0, _r1, ... (ingest/conventions.py)
  SELECT *, start_ns0 AS start_ns,
    list_transform(k, lambda x: list_contains($keep, x)) AS kept,  -- on the allow-list, decided once per attribute
    {{CONVENTION_RAW_COLUMNS}}
  FROM flat
),
typed AS (
  SELECT
    *,
    {{CONVENTION_COLUMNS}},
    list_sort(list_transform(
      list_filter(events, lambda e: e.name IN ('gen_ai.content.completion.chunk', 'First Token Stream Event', 'llm.content.completion.chunk')),
      lambda e: otlp_ns(e.timeUnixNano))) AS chunk_ns
  FROM conv
),
classified AS (
  SELECT
    * EXCLUDE (start_ns),
    -- Logfire's "streaming response ... took {duration}" is a log span at the stream's end: it started `duration` before
    CASE WHEN stream_duration IS NOT NULL AND av(k, v, 'logfire.span_type') = 'log' AND end_ns IS NOT NULL
         THEN end_ns - (stream_duration * 1e9)::HUGEINT ELSE start_ns END AS start_ns,
    stream_duration IS NOT NULL AND av(k, v, 'logfire.span_type') = 'log' AS is_stream_log,
    lower(coalesce(op_attr_raw,
             CASE WHEN span_name = 'llm_request' THEN 'chat' END)) AS op_raw,
    coalesce(model_raw, CASE WHEN av(k, v, 'genkit:metadata:subtype') = 'model' THEN av(k, v, 'genkit:name') END) AS model_name
  FROM typed
),
kinded AS (
  SELECT
    *,
    CASE
      WHEN op_raw IN ({{NOT_CALLS}}) THEN 'skip'
      WHEN op_raw IS NOT NULL AND op_raw NOT IN ('chat', 'llm', 'generation', 'completion', 'text_completion', 'embeddings',
           'embedding', 'model', 'generate_content', 'responses', 'messages')
           AND NOT (op_raw LIKE 'ai.%' OR op_raw IN ('generatetext', 'streamtext', 'generateobject', 'streamobject', 'embed', 'embedmany'))
           AND model_name IS NULL AND input_tokens IS NULL AND output_tokens IS NULL THEN 'skip'
      WHEN op_raw IS NOT NULL THEN 'call'
      WHEN input_tokens IS NOT NULL OR output_tokens IS NOT NULL OR reasoning_tokens IS NOT NULL
        OR cache_read_tokens IS NOT NULL OR cache_write_tokens IS NOT NULL THEN 'call'
      WHEN model_name IS NOT NULL THEN 'call'
      ELSE 'skip'
    END AS _kind,
    CASE WHEN op_raw IN ({{EMBEDDING_OPS}}) OR op_raw LIKE 'ai.embed%' THEN 'embeddings'
         WHEN op_raw IN ('completion', 'text_completion') AND av(k, v, 'llm.request.type') IS NULL THEN 'text_completion'
         ELSE 'chat' END AS operation,
    (end_ns - start_ns) / 1e9 AS span_s,
    coalesce(start_ns BETWEEN 1 AND 4102444800000000000, false) AS start_ok,  -- 1970 .. 2100
    coalesce(end_ns BETWEEN 1 AND 4102444800000000000, false) AS end_ok,
    -- chunk events kept after the SDK's event cap dropped the oldest: the first kept one is chunk no. dropped_events.
    -- The dropped chunks are spaced at the kept ones' mean gap (first to last kept over their count): chunks arrive
    -- in bursts, so a median gap (the short in-burst one) would place the first token too late.
    CASE WHEN len(chunk_ns) > 1 THEN (chunk_ns[-1] - chunk_ns[1]) / 1e9 / (len(chunk_ns) - 1) END AS chunk_gap_s
  FROM classified
),
timed AS (
  SELECT
    *,
    CASE WHEN coalesce(len(chunk_ns), 0) = 0 THEN NULL
         WHEN dropped_events = 0 THEN (chunk_ns[1] - start_ns) / 1e9
         WHEN chunk_gap_s IS NOT NULL THEN greatest((chunk_ns[1] - start_ns) / 1e9 - dropped_events * chunk_gap_s, 0.0)
    END AS event_ttft,
    CASE WHEN coalesce(len(chunk_ns), 0) = 0 THEN NULL WHEN dropped_events = 0 THEN 'events'
         WHEN chunk_gap_s IS NOT NULL THEN 'events_extrapolated' END AS event_basis
  FROM kinded
),
split AS (
  SELECT
    *,
    -- input counts that include cache (OTel GenAI, OpenAI style) lose their cache parts; those that exclude it
    -- (Anthropic's raw usage) are the uncached count already. Conventions: ingest/conventions.py
    CASE WHEN input_tokens IS NULL THEN NULL
         WHEN input_semantics = 'excludes_cache' THEN input_tokens
         -- an "including" count smaller than its own cache parts can only have excluded them (e.g. Bedrock's inputTokens)
         WHEN input_tokens < coalesce(cache_read_tokens, 0) + coalesce(cache_write_tokens, 0) THEN input_tokens
         ELSE input_tokens - coalesce(cache_read_tokens, 0) - coalesce(cache_write_tokens, 0) END AS uncached,
    coalesce(server_e2e, span_s) AS e2e,
    -- a TTFT attribute that is the whole call's time on a non-streamed call is no first token (ingest/conventions.py)
    coalesce(CASE WHEN NOT ttft_whole_call THEN ttft END, event_ttft) AS ttft_any,
    CASE WHEN server_prefill IS NOT NULL OR server_decode IS NOT NULL THEN 'server_phases'
         WHEN ttft IS NOT NULL AND NOT ttft_whole_call THEN 'span_attribute'
         WHEN event_basis IS NOT NULL THEN event_basis
         WHEN ttft_whole_call THEN 'whole_call' END AS ttft_basis
  FROM timed
)
SELECT
  'otlp:' || coalesce(trace_id, '') || ':' || coalesce(span_id, '') AS call_id,
  trace_id, span_id, parent_span_id,
  'otlp' AS source,
  CASE WHEN scope_name LIKE 'sglang%' OR av(k, v, 'module') LIKE 'sglang::%' THEN 'sglang'
       WHEN span_name = 'llm_request' OR server_e2e IS NOT NULL THEN 'vllm'
       WHEN av(k, v, 'openinference.span.kind') IS NOT NULL OR scope_name LIKE 'openinference%' THEN 'openinference'
       WHEN av(k, v, 'langfuse.observation.type') IS NOT NULL THEN 'langfuse'
       WHEN scope_name LIKE 'logfire%' THEN 'logfire'
       WHEN scope_name LIKE 'openlit%' THEN 'openlit'
       WHEN scope_name LIKE 'pydantic-ai%' THEN 'pydantic_ai'
       WHEN scope_name = 'litellm' THEN 'litellm'
       WHEN scope_name = 'ai' OR av(k, v, 'ai.model.id') IS NOT NULL THEN 'vercel_ai'
       WHEN av(k, v, 'traceloop.workflow.name') IS NOT NULL OR av(k, v, 'llm.request.type') IS NOT NULL
            OR av(k, v, 'gen_ai.is_streaming') IS NOT NULL OR span_name LIKE '%.chat' THEN 'openllmetry'
       ELSE 'otel_genai' END AS convention,
  nullif(trim(coalesce(scope_name, '') || ' ' || coalesce(scope_version, '')), '') AS instrumentation,
  '' AS load_id,
  otlp_file($displays, line_no) || '#' || coalesce(span_id, 'line' || otlp_line(line_no)) AS source_locator,
  CASE WHEN start_ok THEN make_timestamp((start_ns // 1000)::BIGINT) END AS started_at,
  CASE WHEN start_ok AND ttft_any BETWEEN 0 AND 86400 AND operation <> 'embeddings'
       THEN make_timestamp((start_ns // 1000)::BIGINT + (ttft_any * 1e6)::BIGINT) END AS first_token_at,
  CASE WHEN end_ok THEN make_timestamp((end_ns // 1000)::BIGINT) END AS ended_at,
  normalize_provider(coalesce(provider_raw, CASE WHEN span_name = 'llm_request' OR scope_name LIKE 'vllm%' THEN 'vllm'
                                                 WHEN scope_name LIKE 'sglang%' OR av(k, v, 'module') LIKE 'sglang::%'
                                                 THEN 'sglang' END)) AS provider,
  normalize_model(trim(model_name, '"')) AS model,
  trim(model_name, '"') AS model_raw,
  operation,
  service,
  workload_hint,
  team,
  project,
  api_key,
  "user",
  environment,
  uncached AS uncached_input_tokens,
  cache_read_tokens,
  cache_write_tokens,
  NULL::BIGINT AS cache_write_1h_tokens,
  CASE WHEN operation = 'embeddings' THEN coalesce(output_tokens, 0) ELSE output_tokens END AS output_tokens,
  reasoning_tokens,
  e2e AS e2e_s,
  CASE WHEN operation <> 'embeddings' THEN ttft_any END AS ttft_s,
  server_queue AS queue_s,
  CASE WHEN operation = 'embeddings' THEN e2e ELSE coalesce(server_prefill, ttft_any) END AS prefill_s,
  CASE WHEN operation = 'embeddings' THEN 0.0 ELSE coalesce(server_decode, e2e - ttft_any) END AS decode_s,
  CASE WHEN operation <> 'embeddings' AND tpot IS NOT NULL AND NOT ttft_whole_call THEN tpot
       WHEN operation <> 'embeddings' THEN itl_split(coalesce(server_decode, e2e - ttft_any), output_tokens) END AS itl_s,
  -- Per-call ITL from chunk events, per token (a chunk may carry several tokens; dropped chunks count too).
  CASE WHEN len(chunk_ns) > 2 AND output_tokens > 1 THEN
    list_aggregate(list_transform(list_zip(chunk_ns[2:], chunk_ns[:-1]), lambda p: (p[1] - p[2]) / 1e9), 'quantile_cont', 0.5)
      * (len(chunk_ns) + dropped_events - 1) / (output_tokens - 1)
  END AS itl_p50_s,
  CASE WHEN len(chunk_ns) > 2 AND output_tokens > 1 THEN
    list_aggregate(list_transform(list_zip(chunk_ns[2:], chunk_ns[:-1]), lambda p: (p[1] - p[2]) / 1e9), 'quantile_cont', 0.95)
      * (len(chunk_ns) + dropped_events - 1) / (output_tokens - 1)
  END AS itl_p95_s,
  CASE WHEN operation = 'embeddings' THEN 'measured'
       WHEN ttft_basis IN ('server_phases', 'span_attribute') THEN 'measured'
       WHEN ttft_basis IN ('events', 'events_extrapolated') THEN 'events'
       ELSE 'none' END AS timing_source,
  coalesce(streaming, CASE WHEN len(chunk_ns) > 0 OR is_stream_log THEN true END) AS streaming,
  CASE WHEN status_code = 2 OR error_type IS NOT NULL THEN 'error' ELSE 'ok' END AS status,
  error_type,
  CASE WHEN cost_currency IS NULL OR upper(cost_currency) = 'USD' THEN cost_amount END AS provided_cost_usd,
  -- privacy by allow-list: only attributes the conventions know or the user keeps; the rest is dropped, key and value
  otlp_json_object(
    list_concat(list_filter(k, lambda x, i: kept[i]), CASE WHEN ttft_basis IS NOT NULL THEN ['phaselens.ttft_basis'] ELSE [] END),
    list_concat(list_filter(v, lambda x, i: kept[i]), CASE WHEN ttft_basis IS NOT NULL THEN [ttft_basis] ELSE [] END)
  ) AS attributes_json,
  content_attrs,
  -- for merging spans of one call (otlp_merge.sql)
  start_ns AS _start_ns, end_ns AS _end_ns, response_id AS _response_id, is_stream_log AS _is_stream_log,
  scope_name AS _scope, ttft_basis AS _ttft_basis, span_name AS _span_name,
  -- engines (docs/formats.md#engine-spans-sglang-and-disaggregated-serving): the request's id and bootstrap room,
  -- the server's own phases, and whether the span is the prefill worker's half of a disaggregated request
  request_id AS _request_id, nullif(bootstrap_room, '0x0') AS _room,
  server_prefill AS _server_prefill, server_decode AS _server_decode,
  (span_name LIKE 'prefill Req %' OR (span_name = 'llm_request' AND output_tokens = 1)) AS _prefill_side,
  (input_tokens IS NOT NULL)::INT + (output_tokens IS NOT NULL)::INT + (cache_read_tokens IS NOT NULL)::INT
    + (cache_write_tokens IS NOT NULL)::INT + (reasoning_tokens IS NOT NULL)::INT AS _token_fields,
  _kind,
  CASE
    WHEN _kind = 'skip' THEN NULL
    WHEN coalesce(trace_id, '') = '' OR coalesce(span_id, '') = '' THEN 'missing_field'
    WHEN NOT start_ok OR (end_ns IS NOT NULL AND NOT end_ok) OR end_garbage THEN 'bad_timestamp'
    WHEN end_ns IS NOT NULL AND end_ns < start_ns THEN 'end_before_start'
    WHEN (input_tokens_raw IS NOT NULL AND input_tokens IS NULL) OR (cache_read_tokens_raw IS NOT NULL AND cache_read_tokens IS NULL)
      OR (cache_write_tokens_raw IS NOT NULL AND cache_write_tokens IS NULL) OR (output_tokens_raw IS NOT NULL AND output_tokens IS NULL)
      OR (reasoning_tokens_raw IS NOT NULL AND reasoning_tokens IS NULL) OR NOT coalesce(ttft_any BETWEEN 0 AND 86400, true)
      OR (ttft_raw IS NOT NULL AND ttft IS NULL)
      OR NOT coalesce(e2e BETWEEN 0 AND 86400 * 7, true) THEN 'bad_number'
    WHEN model_name IS NULL OR trim(model_name) = '' THEN 'missing_model'
    WHEN input_tokens < 0 OR cache_read_tokens < 0 OR cache_write_tokens < 0 OR output_tokens < 0 OR reasoning_tokens < 0 THEN 'negative_tokens'
  END AS _reason,
  line_no
FROM split;
