-- call_unit_prices: the price_table row that applies to each call: its key (provider, model, raw model),
-- UTC day, time-of-day window and the highest input-token tier its total input reaches. USD per token.
-- Grain: one row per priced-or-keyed call (calls with no price_table row are absent).
-- Upstream: raw_calls, price_table. Read by call_costs.sql and caching_prices.sql.
-- The QUALIFY picks the highest tier; pipeline/pricing.py drops it when no price key has two rows.
CREATE OR REPLACE TABLE call_unit_prices AS
WITH calls AS (
  SELECT
    call_id, started_at, provider, model, model_raw,
    CAST(started_at AS DATE) AS day,
    coalesce(hour(started_at) * 3600 + minute(started_at) * 60 + second(started_at), 0) AS second_of_day,
    coalesce(uncached_input_tokens, 0) + coalesce(cache_read_tokens, 0) + coalesce(cache_write_tokens, 0)
      AS total_input_tokens
  FROM raw_calls
)
SELECT
  c.call_id,
  c.started_at,                 -- the call's start: an incremental build reads a few days' rows by it
  p.uncached_input, p.cache_read, p.cache_write, p.cache_write_1h, p.output,
  p.price_source, p.matched_model, p.deployment, p.unpriced_reason
FROM calls c
JOIN price_table p
  ON p.provider IS NOT DISTINCT FROM c.provider
 AND p.model IS NOT DISTINCT FROM c.model
 AND p.model_raw IS NOT DISTINCT FROM c.model_raw
 AND p.day IS NOT DISTINCT FROM c.day
 AND c.second_of_day >= p.window_start_s AND c.second_of_day < p.window_end_s
 AND p.tier_start_input_tokens <= c.total_input_tokens
QUALIFY row_number() OVER (PARTITION BY c.call_id ORDER BY p.tier_start_input_tokens DESC) = 1;
