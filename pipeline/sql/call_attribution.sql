-- call_attribution: the build's per-call results in one place. Grain: call_id.
-- Upstream: raw_calls, call_workload, call_timing, call_concurrency, call_costs.
-- `started_at` is the call's start as built: `requests` joins on it too, so a read of a period (a day's rollups,
-- an incremental build's splice) skips the other periods' row groups.
CREATE OR REPLACE TABLE call_attribution AS
SELECT
  c.call_id,
  c.started_at,
  w.workload,
  t.ttft_s, t.prefill_s, t.decode_s, t.itl_s, t.timing_source,
  k.concurrency,
  p.uncached_input_cost_usd, p.cache_read_cost_usd, p.cache_write_cost_usd, p.output_cost_usd,
  p.input_cost_usd, p.cost_usd, coalesce(p.priced, false) AS priced, p.price_source
FROM raw_calls c
LEFT JOIN call_workload w USING (call_id)
LEFT JOIN call_timing t USING (call_id)
LEFT JOIN call_concurrency k USING (call_id)
LEFT JOIN call_costs p USING (call_id);
