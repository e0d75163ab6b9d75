-- caching_days: the caching lever's sums per UTC day, so the whole-store figures (caching_opportunity.sql) are
-- a sum over days, and an incremental build recomputes only the days whose calls or reuse changed.
-- Grain: (day, lifetime_s, workload, provider, model, ttft_bucket); day NULL holds the calls without a start time,
-- ttft_bucket is the sketch bucket (sketch_macros.sql) of the TTFT saved, NULL for calls without a TTFT figure.
-- Upstream: caching_call_savings. Every sum is exact (integers, DECIMAL; the dollar sums are of the calls' unrounded
-- products, rounded once per row here to 12 decimals), so summing the days in any order gives the same figures.
CREATE OR REPLACE TABLE caching_days AS
SELECT
  day, lifetime_s, workload, provider, model,
  CASE WHEN ttft_saved_s IS NOT NULL THEN pl_hist_bucket(ttft_saved_s) END AS ttft_bucket,
  count(*) AS calls,
  count(*) FILTER (WHERE hashed) AS hashed_calls,
  sum(input_tokens)::BIGINT AS input_tokens,
  coalesce(sum(input_tokens) FILTER (WHERE hashed), 0)::BIGINT AS hashed_input_tokens,
  coalesce(sum(total_blocks), 0)::BIGINT AS total_blocks,
  coalesce(sum(seen_blocks), 0)::BIGINT AS seen_blocks,
  coalesce(sum(reusable_tokens), 0)::BIGINT AS reusable_tokens,
  coalesce(sum(hit_tokens), 0)::BIGINT AS hit_tokens,
  coalesce(sum(write_tokens), 0)::BIGINT AS write_tokens,
  count(*) FILTER (WHERE cache_read_tokens IS NOT NULL) AS reads_reported_calls,
  sum(cache_read_tokens)::BIGINT AS cache_read_tokens,
  (sum(input_tokens) FILTER (WHERE cache_read_tokens IS NOT NULL))::BIGINT AS reads_reported_input_tokens,
  count(*) FILTER (WHERE cache_read_tokens IS NOT NULL AND hashed) AS comparable_calls,
  (sum(reusable_tokens) FILTER (WHERE cache_read_tokens IS NOT NULL AND hashed))::BIGINT AS comparable_reusable_tokens,
  (sum(input_tokens) FILTER (WHERE cache_read_tokens IS NOT NULL AND hashed))::BIGINT AS comparable_input_tokens,
  count(*) FILTER (WHERE priced) AS priced_calls,
  count(*) FILTER (WHERE priced AND hashed) AS priced_hashed_calls,
  coalesce(sum(input_tokens) FILTER (WHERE priced), 0)::BIGINT AS priced_input_tokens,
  coalesce(sum(cache_read_tokens) FILTER (WHERE priced), 0)::BIGINT AS priced_cache_read_tokens,
  CAST(sum(usd_now) AS DECIMAL(38, 12)) AS usd_now,
  CAST(sum(usd_with_cache) AS DECIMAL(38, 12)) AS usd_with_cache,
  CAST(sum(usd_all_uncached) AS DECIMAL(38, 12)) AS usd_all_uncached,
  CAST(sum(usd_all_cache_read) AS DECIMAL(38, 12)) AS usd_all_cache_read,
  CAST(sum(usd_all_cache_write) AS DECIMAL(38, 12)) AS usd_all_cache_write,
  count(*) FILTER (WHERE ttft_saved_s IS NOT NULL) AS ttft_fitted_calls,
  sum(CAST(ttft_saved_s AS DECIMAL(38, 12))) AS ttft_saved_s,                     -- s, fitted calls
  (sum(new_hit_tokens) FILTER (WHERE ttft_saved_s IS NOT NULL))::BIGINT AS ttft_new_hit_tokens,
  sum(CAST(input_tokens * ttft_s_per_token_saved AS DECIMAL(38, 12))) AS slope_weighted_s,   -- s
  (sum(input_tokens) FILTER (WHERE ttft_s_per_token_saved IS NOT NULL))::BIGINT AS slope_input_tokens
FROM caching_call_savings
GROUP BY ALL
