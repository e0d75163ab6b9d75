-- otlp_calls: one row per model call from the spans grouped in otlp_labels (otlp_merge.sql). Per call:
-- identity (call id, span, locator, service...) from the earliest span; start from the earliest, end from the
-- latest (the span that saw the stream end); tokens and cost from the span that carries the most token counts
-- (inner spans win ties: they are closest to the wire), never summed across spans; TTFT from the span that
-- measured it (server phases, then a TTFT attribute, kept as stated, then chunk events, timed from the call's start).
CREATE OR REPLACE TEMP TABLE otlp_calls AS
WITH g AS (
  SELECT s.*, l.label,
         l.label.t = s.trace_id AND l.label.i = s.span_id AS is_root,
         count(*) OVER (PARTITION BY l.label) AS n_spans
  FROM otlp_ok s JOIN otlp_labels l USING (trace_id, span_id)
),
ranked AS (
  SELECT *,
         row_number() OVER (PARTITION BY label ORDER BY _token_fields DESC, _start_ns DESC, span_id) AS token_rank,
         row_number() OVER (PARTITION BY label ORDER BY
           CASE _ttft_basis WHEN 'server_phases' THEN 0 WHEN 'span_attribute' THEN 1 WHEN 'events' THEN 2
                            WHEN 'events_extrapolated' THEN 3 ELSE 9 END, _start_ns DESC, span_id) AS timing_rank,
         min(_start_ns) OVER (PARTITION BY label) AS g_start_ns,
         max(_end_ns) OVER (PARTITION BY label) AS g_end_ns
  FROM g
),
pick AS (
  SELECT
    label,
    any_value(n_spans) AS n_spans,
    any_value(g_start_ns) AS g_start_ns,
    any_value(g_end_ns) AS g_end_ns,
    any_value(r) FILTER (WHERE is_root) AS root,
    any_value(r) FILTER (WHERE token_rank = 1) AS tok,
    any_value(r) FILTER (WHERE timing_rank = 1) AS tim,
    bool_or(streaming) AS streaming,
    bool_or(status = 'error') AS any_error,
    list(span_id ORDER BY _start_ns) FILTER (WHERE NOT is_root) AS merged
  FROM (SELECT ranked.*, ranked AS r FROM ranked)
  GROUP BY label
),
joined AS (
  SELECT
    p.*,
    -- a TTFT the span states itself is kept as stated; one from chunk events is timed from the call's start
    CASE WHEN tim._ttft_basis = 'span_attribute' THEN tim.ttft_s
         WHEN tim.first_token_at IS NOT NULL
         THEN epoch_us(tim.first_token_at) / 1e6 - (g_start_ns // 1000) / 1e6 END AS g_ttft,
    coalesce(CASE WHEN tok.convention = 'vllm' THEN tok.e2e_s END, (g_end_ns - g_start_ns) / 1e9) AS g_e2e
  FROM pick p
)
SELECT
  root.call_id, root.trace_id, root.span_id, root.parent_span_id, root.source,
  CASE WHEN n_spans > 1 THEN tok.convention || '+' || n_spans - 1 ELSE tok.convention END AS convention,
  coalesce(root.instrumentation, tok.instrumentation) AS instrumentation,
  root.load_id, root.source_locator,
  make_timestamp((g_start_ns // 1000)::BIGINT) AS started_at,
  CASE WHEN tok.operation <> 'embeddings' AND g_ttft BETWEEN 0 AND 86400
       THEN make_timestamp((g_start_ns // 1000)::BIGINT + (g_ttft * 1e6)::BIGINT) END AS first_token_at,
  make_timestamp((g_end_ns // 1000)::BIGINT) AS ended_at,
  coalesce(tok.provider, root.provider) AS provider,
  coalesce(tok.model, root.model) AS model,
  coalesce(tok.model_raw, root.model_raw) AS model_raw,
  tok.operation,
  coalesce(root.service, tok.service) AS service,
  coalesce(root.workload_hint, tok.workload_hint, tim.workload_hint) AS workload_hint,
  coalesce(root.team, tok.team) AS team,
  coalesce(root.project, tok.project) AS project,
  coalesce(root.api_key, tok.api_key) AS api_key,
  coalesce(root."user", tok."user") AS "user",
  coalesce(root.environment, tok.environment) AS environment,
  tok.uncached_input_tokens, tok.cache_read_tokens, tok.cache_write_tokens, tok.cache_write_1h_tokens,
  tok.output_tokens, tok.reasoning_tokens,
  CASE WHEN n_spans = 1 THEN tok.e2e_s ELSE g_e2e END AS e2e_s,
  CASE WHEN n_spans = 1 THEN tok.ttft_s WHEN tok.operation <> 'embeddings' THEN g_ttft END AS ttft_s,
  coalesce(tim.queue_s, tok.queue_s) AS queue_s,
  CASE WHEN n_spans = 1 THEN tok.prefill_s WHEN tok.operation = 'embeddings' THEN g_e2e
       ELSE coalesce(CASE WHEN tim._ttft_basis = 'server_phases' THEN tim.prefill_s END, g_ttft) END AS prefill_s,
  CASE WHEN n_spans = 1 THEN tok.decode_s WHEN tok.operation = 'embeddings' THEN 0.0
       ELSE coalesce(CASE WHEN tim._ttft_basis = 'server_phases' THEN tim.decode_s END, g_e2e - g_ttft) END AS decode_s,
  CASE WHEN n_spans = 1 THEN tok.itl_s
       WHEN tok.operation <> 'embeddings' AND tok.output_tokens > 1
       THEN coalesce(CASE WHEN tim._ttft_basis = 'server_phases' THEN tim.decode_s END, g_e2e - g_ttft) / (tok.output_tokens - 1) END AS itl_s,
  coalesce(tim.itl_p50_s, tok.itl_p50_s) AS itl_p50_s,
  coalesce(tim.itl_p95_s, tok.itl_p95_s) AS itl_p95_s,
  CASE WHEN n_spans = 1 THEN tok.timing_source WHEN g_ttft IS NULL THEN 'none' ELSE tim.timing_source END AS timing_source,
  streaming,
  CASE WHEN any_error THEN 'error' ELSE 'ok' END AS status,
  coalesce(tok.error_type, root.error_type, tim.error_type) AS error_type,
  tok.provided_cost_usd,
  CASE WHEN n_spans = 1 THEN tok.attributes_json
       ELSE json_merge_patch(json_merge_patch(coalesce(root.attributes_json, '{}'), coalesce(tok.attributes_json, '{}')),
              json_object('phaselens.ttft_basis', tim._ttft_basis, 'phaselens.merged_spans', merged))::VARCHAR END AS attributes_json,
  n_spans,
  list_transform(merged, lambda m: root.trace_id || ':' || m) AS merged_ids
FROM joined;
