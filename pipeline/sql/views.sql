-- Public read model. Every view here is documented in docs/store.md; columns are stable.

-- requests: one row per model call. Grain: call_id. Upstream: raw_calls, call_attribution.
-- Timing columns prefer the measured value and fall back to the build's estimate.
CREATE OR REPLACE VIEW requests AS
SELECT
  c.call_id, c.trace_id, c.span_id, c.parent_span_id, c.source, c.convention, c.instrumentation, c.load_id,
  c.source_locator,
  c.started_at, c.first_token_at, c.ended_at,
  c.provider, c.model, c.model_raw, c.operation, c.service,
  coalesce(a.workload, default_workload(c.workload_hint, c.service)) AS workload,  -- before a build: the default rule
  c.team, c.project, c.api_key, c."user", c.environment,
  c.streaming, c.status, c.error_type,
  c.uncached_input_tokens, c.cache_read_tokens, c.cache_write_tokens, c.cache_write_1h_tokens,
  c.output_tokens, c.reasoning_tokens,
  coalesce(c.uncached_input_tokens, 0) + coalesce(c.cache_read_tokens, 0) + coalesce(c.cache_write_tokens, 0)
    AS input_tokens,
  c.e2e_s,
  coalesce(c.ttft_s, a.ttft_s) AS ttft_s,
  c.queue_s,
  coalesce(c.prefill_s, a.prefill_s) AS prefill_s,
  coalesce(c.decode_s, a.decode_s) AS decode_s,
  coalesce(c.itl_s, a.itl_s) AS itl_s,
  c.itl_p50_s, c.itl_p95_s,
  CASE WHEN c.timing_source = 'none' AND a.timing_source IS NOT NULL THEN a.timing_source
       ELSE c.timing_source END AS timing_source,
  a.concurrency,
  a.uncached_input_cost_usd, a.cache_read_cost_usd, a.cache_write_cost_usd, a.output_cost_usd,
  a.input_cost_usd, a.cost_usd, coalesce(a.priced, false) AS priced, a.price_source,
  c.provided_cost_usd,
  c.prefix_hashes, c.prefix_tokens,
  c.attributes_json
FROM raw_calls c
LEFT JOIN call_attribution a USING (call_id);

-- billing_lines: one row per provider line item. Grain: billing_line_id.
CREATE OR REPLACE VIEW billing_lines AS SELECT * FROM raw_billing_lines;

-- rejects: quarantined records with their reason and locator. Grain: one row per rejected record.
CREATE OR REPLACE VIEW rejects AS SELECT * FROM raw_rejects;

-- loads: the ingest ledger. Grain: one row per file per ingest run.
CREATE OR REPLACE VIEW loads AS SELECT * FROM raw_loads;
