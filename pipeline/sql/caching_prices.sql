-- caching_prices: the per-token input prices of each priced call and its input cost as billed, so a
-- cache's effect can be priced per call at the call's own price.
-- Grain: one row per call priced per token (not GPU-hour deployments) with every input price known.
-- Upstream: raw_calls, price_table (USD per token; the same row call_costs.sql picks: key, UTC day,
-- time-of-day window and the highest input tier the call reaches), call_costs.
CREATE OR REPLACE TEMP TABLE caching_prices AS
WITH calls AS (
  SELECT
    call_id, provider, model, model_raw,
    CAST(started_at AS DATE) AS day,
    coalesce(hour(started_at) * 3600 + minute(started_at) * 60 + second(started_at), 0) AS second_of_day,
    coalesce(uncached_input_tokens, 0) + coalesce(cache_read_tokens, 0) + coalesce(cache_write_tokens, 0)
      AS total_input_tokens
  FROM raw_calls
),
price AS (
  SELECT c.call_id, p.uncached_input, p.cache_read, p.cache_write, p.cache_write_1h
  FROM calls c
  JOIN price_table p
    ON p.provider IS NOT DISTINCT FROM c.provider
   AND p.model IS NOT DISTINCT FROM c.model
   AND p.model_raw IS NOT DISTINCT FROM c.model_raw
   AND p.day IS NOT DISTINCT FROM c.day
   AND c.second_of_day >= p.window_start_s AND c.second_of_day < p.window_end_s
   AND p.tier_start_input_tokens <= c.total_input_tokens
  QUALIFY row_number() OVER (PARTITION BY c.call_id ORDER BY p.tier_start_input_tokens DESC) = 1
)
SELECT
  p.call_id,
  p.uncached_input,             -- USD per uncached input token
  p.cache_read,                 -- USD per cache-read token
  p.cache_write,                -- USD per 5-minute cache-write token
  p.cache_write_1h,             -- USD per 1-hour cache-write token
  k.input_cost_usd AS billed_input_usd
FROM price p
JOIN call_costs k USING (call_id)
WHERE k.priced
  AND k.price_source IS DISTINCT FROM 'gpu_hours'
  AND p.uncached_input IS NOT NULL AND p.cache_read IS NOT NULL
  AND p.cache_write IS NOT NULL AND p.cache_write_1h IS NOT NULL
