-- otlp_calls: one row per model call from the spans grouped in otlp_labels (otlp_merge.sql). Per call:
-- identity (call id, span, locator, service...) from the earliest span; start from the earliest, end from the
-- latest (the span that saw the stream end); tokens and cost from the span that carries the most token counts
-- (inner spans win ties: they are closest to the wire), never summed across spans; TTFT from the span that
-- measured it (server phases, then a TTFT attribute, kept as stated, then chunk events, timed from the call's start).
CREATE OR REPLACE TEMP TABLE otlp_calls AS
-- Engine spans with stage spans below them (otlp_stages) take their phases from the stages where the span has no
-- server phase attribute, and their first token from the end of the prefill stage where it has no TTFT.
-- A disaggregated request (a prefill worker's span and a decode worker's, linked in otlp_merge.sql) takes its
-- input buckets, prefill time and queue time from the prefill worker, its output, decode time and first token
-- from the decode worker, and names both pools (service names) in attributes_json.
WITH staged AS (
  SELECT s.* REPLACE (
           coalesce(s._server_prefill, st.stage_prefill_s, s.prefill_s) AS prefill_s,
           coalesce(s._server_decode, st.stage_decode_s, s.decode_s) AS decode_s,
           coalesce(s.queue_s, st.stage_queue_s) AS queue_s,
           coalesce(s.ttft_s, CASE WHEN s.operation <> 'embeddings' THEN (st.stage_first_token_ns - s._start_ns) / 1e9 END) AS ttft_s,
           coalesce(s.first_token_at, CASE WHEN s.operation <> 'embeddings'
                                           THEN make_timestamp((st.stage_first_token_ns // 1000)::BIGINT) END) AS first_token_at,
           coalesce(nullif(s._ttft_basis, 'whole_call'), CASE WHEN st.stage_first_token_ns IS NOT NULL THEN 'server_stages' END, s._ttft_basis) AS _ttft_basis,
           CASE WHEN s.timing_source = 'none' AND st.stage_first_token_ns IS NOT NULL THEN 'measured'
                ELSE s.timing_source END AS timing_source)
  FROM otlp_ok s LEFT JOIN otlp_stages st USING (trace_id, span_id)
),
g AS (
  SELECT s.*, l.label,
         l.label.t = s.trace_id AND l.label.i = s.span_id AS is_root
  FROM staged s JOIN otlp_labels l USING (trace_id, span_id)
),
-- spans per call, counted on the narrow keys (a window over the wide rows costs more). Both branches of `pick`
-- read it: NOT MATERIALIZED computes it in each, where DuckDB would copy every row (and its struct) into a buffer
sized AS NOT MATERIALIZED (
  SELECT g.*, n.n_spans, g AS r
  FROM g JOIN (SELECT label, count(*) AS n_spans FROM g GROUP BY label) n USING (label)
),
ranked AS (  -- calls of several spans only
  SELECT *,
         -- the prefill worker's half of a disaggregated request never gives the tokens (its one output token)
         row_number() OVER (PARTITION BY label ORDER BY coalesce(_prefill_side, false), _token_fields DESC,
                                                       _start_ns DESC, span_id) AS token_rank,
         row_number() OVER (PARTITION BY label ORDER BY
           CASE _ttft_basis WHEN 'server_phases' THEN 0 WHEN 'server_stages' THEN 0 WHEN 'span_attribute' THEN 1
                            WHEN 'events' THEN 2 WHEN 'events_extrapolated' THEN 3 ELSE 9 END,
           _start_ns DESC, span_id) AS timing_rank,
         min(_start_ns) OVER (PARTITION BY label) AS g_start_ns,
         max(_end_ns) OVER (PARTITION BY label) AS g_end_ns
  FROM sized WHERE n_spans > 1
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
    any_value(r) FILTER (WHERE _prefill_side AND convention IN ('vllm', 'sglang')) AS pre,
    any_value(r) FILTER (WHERE NOT _prefill_side AND convention IN ('vllm', 'sglang')) AS dec,
    bool_or(streaming) AS streaming,
    bool_or(status = 'error') AS any_error,
    list(span_id ORDER BY _start_ns) FILTER (WHERE NOT is_root) AS merged
  FROM ranked
  GROUP BY label
  UNION ALL
  -- a call of one span: the same picks without grouping (that span is each of them, where it qualifies)
  SELECT
    label, n_spans, _start_ns, _end_ns,
    CASE WHEN is_root THEN r END, r, r,
    CASE WHEN _prefill_side AND convention IN ('vllm', 'sglang') THEN r END,
    CASE WHEN NOT _prefill_side AND convention IN ('vllm', 'sglang') THEN r END,
    streaming, status = 'error',
    CASE WHEN NOT is_root THEN [span_id] END
  FROM sized WHERE n_spans = 1
),
joined AS (
  SELECT
    p.*,
    pre IS NOT NULL AND dec IS NOT NULL AS disagg,
    -- a TTFT the span states itself is kept as stated; one from chunk events is timed from the call's start;
    -- a disaggregated request's first token comes from the decode worker
    CASE WHEN pre IS NOT NULL AND dec IS NOT NULL
         THEN epoch_us(coalesce(dec.first_token_at, pre.first_token_at)) / 1e6 - (g_start_ns // 1000) / 1e6
         WHEN tim._ttft_basis = 'span_attribute' THEN tim.ttft_s
         WHEN tim.first_token_at IS NOT NULL
         THEN epoch_us(tim.first_token_at) / 1e6 - (g_start_ns // 1000) / 1e6 END AS g_ttft,
    coalesce(CASE WHEN tok.convention = 'vllm' AND (pre IS NULL OR dec IS NULL) THEN tok.e2e_s END,
             (g_end_ns - g_start_ns) / 1e9) AS g_e2e
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
  -- prompt tokens once: a disaggregated request's input buckets from the prefill worker that computed them
  CASE WHEN disagg THEN pre.uncached_input_tokens ELSE tok.uncached_input_tokens END AS uncached_input_tokens,
  CASE WHEN disagg THEN pre.cache_read_tokens ELSE tok.cache_read_tokens END AS cache_read_tokens,
  CASE WHEN disagg THEN pre.cache_write_tokens ELSE tok.cache_write_tokens END AS cache_write_tokens,
  tok.cache_write_1h_tokens,
  tok.output_tokens, tok.reasoning_tokens,
  CASE WHEN n_spans = 1 THEN tok.e2e_s ELSE g_e2e END AS e2e_s,
  CASE WHEN n_spans = 1 THEN tok.ttft_s WHEN tok.operation <> 'embeddings' THEN g_ttft END AS ttft_s,
  CASE WHEN disagg THEN pre.queue_s ELSE coalesce(tim.queue_s, tok.queue_s) END AS queue_s,
  CASE WHEN n_spans = 1 THEN tok.prefill_s WHEN disagg THEN pre.prefill_s WHEN tok.operation = 'embeddings' THEN g_e2e
       ELSE coalesce(CASE WHEN tim._ttft_basis = 'server_phases' THEN tim.prefill_s END, g_ttft) END AS prefill_s,
  CASE WHEN n_spans = 1 THEN tok.decode_s WHEN disagg THEN dec.decode_s WHEN tok.operation = 'embeddings' THEN 0.0
       ELSE coalesce(CASE WHEN tim._ttft_basis = 'server_phases' THEN tim.decode_s END, g_e2e - g_ttft) END AS decode_s,
  CASE WHEN n_spans = 1 THEN tok.itl_s
       WHEN disagg THEN itl_split(dec.decode_s, tok.output_tokens)
       WHEN tok.operation <> 'embeddings'
       THEN itl_split(coalesce(CASE WHEN tim._ttft_basis = 'server_phases' THEN tim.decode_s END, g_e2e - g_ttft), tok.output_tokens)
  END AS itl_s,
  coalesce(tim.itl_p50_s, tok.itl_p50_s) AS itl_p50_s,
  coalesce(tim.itl_p95_s, tok.itl_p95_s) AS itl_p95_s,
  CASE WHEN n_spans = 1 THEN tok.timing_source
       WHEN disagg AND pre.prefill_s IS NOT NULL AND dec.decode_s IS NOT NULL THEN 'measured'
       WHEN g_ttft IS NULL THEN 'none' ELSE tim.timing_source END AS timing_source,
  streaming,
  CASE WHEN any_error THEN 'error' ELSE 'ok' END AS status,
  coalesce(tok.error_type, root.error_type, tim.error_type) AS error_type,
  tok.provided_cost_usd,
  CASE WHEN n_spans = 1 THEN tok.attributes_json
       ELSE json_merge_patch(json_merge_patch(coalesce(root.attributes_json, '{}'), coalesce(tok.attributes_json, '{}')),
              json_merge_patch(json_object('phaselens.ttft_basis', tim._ttft_basis, 'phaselens.merged_spans', merged),
                CASE WHEN disagg THEN json_object('phaselens.prefill_pool', pre.service, 'phaselens.decode_pool', dec.service)
                     ELSE json_object() END))::VARCHAR END AS attributes_json,
  n_spans,
  list_transform(merged, lambda m: root.trace_id || ':' || m) AS merged_ids
FROM joined;
