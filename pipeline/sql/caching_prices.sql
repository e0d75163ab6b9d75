-- caching_prices: the per-token input prices of each priced call and its input cost as billed, so a
-- cache's effect can be priced per call at the call's own price.
-- Grain: one row per call of raw_calls priced per token (not GPU-hour deployments) with every input price known.
-- Upstream: raw_calls (an incremental build's recomputed days), call_unit_prices (USD per token; the row call_costs.sql prices the call with), call_costs.
CREATE OR REPLACE TEMP TABLE caching_prices AS
SELECT
  c.call_id,
  p.uncached_input,             -- USD per uncached input token
  p.cache_read,                 -- USD per cache-read token
  p.cache_write,                -- USD per 5-minute cache-write token
  p.cache_write_1h,             -- USD per 1-hour cache-write token
  k.input_cost_usd AS billed_input_usd
FROM raw_calls c                -- first: in an incremental build, a few days' calls the store's rows are probed with
JOIN call_unit_prices p ON p.call_id = c.call_id
JOIN call_costs k ON k.call_id = c.call_id
WHERE k.priced
  AND k.price_source IS DISTINCT FROM 'gpu_hours'
  AND p.uncached_input IS NOT NULL AND p.cache_read IS NOT NULL
  AND p.cache_write IS NOT NULL AND p.cache_write_1h IS NOT NULL;
