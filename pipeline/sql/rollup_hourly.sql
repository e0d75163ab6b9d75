-- rollup_hourly: what the dashboard sums under any filter. Grain: one row per UTC hour of started_at ×
-- workload × provider × model × team × project (calls without a start time share one NULL hour).
-- Upstream: _pl_calls (the `requests` rows of the UTC days being published; pipeline/publish.py assembles the
-- snapshot's table from these rows and the previous snapshot's rows of the other days); _pl_invoice_costs (invoice-true cost per call, empty until reconciliation is built).
-- Seconds and tokens are sums over the group's calls; money is exact DECIMAL USD: estimated (list or price-book
-- price), invoice-true (billed cost allocated to the call), and best (invoice-true where billed, else estimated).
-- Phase time follows `workloads`: only calls with both sides of the split count, and the prefill side is the
-- time to the first token as the caller sees it (queueing included; queue_time_s says how much of it queued).
CREATE OR REPLACE TEMP TABLE _pl_part_rollup_hourly AS
SELECT
  date_trunc('hour', r.started_at) AS hour,
  r.workload,
  coalesce(r.provider, '(unknown)') AS provider,
  coalesce(r.model, '(unknown)') AS model,
  coalesce(r.team, '(none)') AS team,
  coalesce(r.project, '(none)') AS project,
  count(*) AS calls,
  count(*) FILTER (WHERE r.status = 'error') AS error_calls,
  count(*) FILTER (WHERE r.timing_source = 'measured') AS measured_calls,
  count(*) FILTER (WHERE r.timing_source = 'events') AS events_calls,
  count(*) FILTER (WHERE r.timing_source = 'estimated') AS estimated_calls,
  count(*) FILTER (WHERE r.timing_source IS NULL OR r.timing_source NOT IN ('measured', 'events', 'estimated'))
    AS untimed_calls,
  count(*) FILTER (WHERE r.priced) AS priced_calls,
  count(*) FILTER (WHERE NOT r.priced) AS unpriced_calls,
  coalesce(sum(r.uncached_input_tokens), 0)::BIGINT AS uncached_input_tokens,
  coalesce(sum(r.cache_read_tokens), 0)::BIGINT AS cache_read_tokens,
  coalesce(sum(r.cache_write_tokens), 0)::BIGINT AS cache_write_tokens,
  coalesce(sum(r.input_tokens), 0)::BIGINT AS input_tokens,
  coalesce(sum(r.output_tokens), 0)::BIGINT AS output_tokens,
  coalesce(sum(r.reasoning_tokens), 0)::BIGINT AS reasoning_tokens,
  count(*) FILTER (WHERE coalesce(r.ttft_s, r.prefill_s) IS NOT NULL AND r.decode_s IS NOT NULL) AS split_calls,
  coalesce(sum(coalesce(r.ttft_s, r.prefill_s)) FILTER (WHERE r.decode_s IS NOT NULL), 0) AS prefill_time_s,
  coalesce(sum(least(coalesce(r.queue_s, 0), coalesce(r.ttft_s, r.prefill_s)))
    FILTER (WHERE r.decode_s IS NOT NULL AND coalesce(r.ttft_s, r.prefill_s) IS NOT NULL), 0) AS queue_time_s,
  coalesce(sum(r.decode_s) FILTER (WHERE coalesce(r.ttft_s, r.prefill_s) IS NOT NULL), 0) AS decode_time_s,
  -- the queue share of TTFT as `workloads` takes it (queue seconds of calls with a TTFT over the TTFT of calls
  -- with a queue time), in fixed point so any filter's sum equals the store's
  coalesce(sum(r.queue_s::DECIMAL(38, 12)) FILTER (WHERE r.ttft_s IS NOT NULL), 0) AS ttft_queue_s,
  coalesce(sum(r.ttft_s::DECIMAL(38, 12)) FILTER (WHERE r.queue_s IS NOT NULL), 0) AS queued_ttft_s,
  coalesce(sum(r.e2e_s), 0) AS e2e_time_s,
  coalesce(sum(r.uncached_input_cost_usd), 0) AS uncached_input_cost_usd,
  coalesce(sum(r.cache_read_cost_usd), 0) AS cache_read_cost_usd,
  coalesce(sum(r.cache_write_cost_usd), 0) AS cache_write_cost_usd,
  coalesce(sum(r.output_cost_usd), 0) AS output_cost_usd,
  coalesce(sum(r.input_cost_usd), 0) AS input_cost_usd,
  coalesce(sum(r.cost_usd), 0) AS cost_usd,
  count(i.cost_usd_invoice) AS invoice_calls,
  coalesce(sum(i.input_cost_usd_invoice), 0) AS input_cost_usd_invoice,
  coalesce(sum(i.output_cost_usd_invoice), 0) AS output_cost_usd_invoice,
  coalesce(sum(i.cost_usd_invoice), 0) AS cost_usd_invoice,
  -- the best cost known per call: invoice-true where reconciled billing covers the call, else the estimate
  coalesce(sum(CASE WHEN i.cost_usd_invoice IS NOT NULL THEN i.input_cost_usd_invoice ELSE r.input_cost_usd END), 0)
    AS input_cost_usd_best,
  coalesce(sum(CASE WHEN i.cost_usd_invoice IS NOT NULL THEN i.output_cost_usd_invoice ELSE r.output_cost_usd END), 0)
    AS output_cost_usd_best,
  coalesce(sum(coalesce(i.cost_usd_invoice, r.cost_usd)), 0) AS cost_usd_best
FROM _pl_calls r
LEFT JOIN _pl_invoice_costs i USING (call_id)
GROUP BY ALL;
