-- Public read model. Every view here is documented in docs/store.md; columns are stable.

-- whether a start time `t` lies in [since, until) (NULL = open), or with `unstarted` is missing
CREATE OR REPLACE MACRO pl_started_in(t, since, until, unstarted) AS
  ((since IS NULL OR t >= CAST(since AS TIMESTAMP)) AND (until IS NULL OR t < CAST(until AS TIMESTAMP)))
  OR (unstarted AND t IS NULL);

-- requests_in(since, until, unstarted): the rows of `requests` whose call started in [since, until) (or without a
-- start, with `unstarted`). Both sides are filtered on their own start (call_attribution keeps the start it was
-- built with), so a period's read skips the other periods' row groups of both tables.
CREATE OR REPLACE MACRO requests_in(since, until, unstarted) AS TABLE
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
FROM (SELECT * FROM raw_calls WHERE pl_started_in(started_at, since, until, unstarted)) c
LEFT JOIN (SELECT * FROM call_attribution WHERE pl_started_in(started_at, since, until, unstarted)) a USING (call_id);

-- requests: one row per model call. Grain: call_id. Upstream: raw_calls, call_attribution.
-- Timing columns prefer the measured value and fall back to the build's estimate.
CREATE OR REPLACE VIEW requests AS SELECT * FROM requests_in(NULL, NULL, true);

-- billing_lines: one row per provider line item. Grain: billing_line_id.
CREATE OR REPLACE VIEW billing_lines AS SELECT * FROM raw_billing_lines;

-- rejects: quarantined records with their reason and locator. Grain: one row per rejected record.
CREATE OR REPLACE VIEW rejects AS SELECT * FROM raw_rejects;

-- loads: the ingest ledger. Grain: one row per file per ingest run.
CREATE OR REPLACE VIEW loads AS SELECT * FROM raw_loads;
