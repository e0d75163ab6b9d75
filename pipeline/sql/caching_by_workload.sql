-- caching_by_workload: the caching lever of each workload at the headline cache lifetime (the first
-- configured), for the workload diagnosis. Grain: workload. Upstream: caching_opportunity.
-- Parameters: $lifetime_s (the headline lifetime in seconds; NULL = unlimited).
CREATE OR REPLACE TABLE caching_by_workload AS
SELECT
  workload, lifetime_s, calls, hashed_calls, input_tokens, reusable_tokens, reuse_share,
  cache_read_tokens, achieved_share, possible_share,
  usd_now, usd_with_cache, usd_saved, ttft_saved_s_mean, ttft_saved_p50_s, note
FROM caching_opportunity
WHERE level = 'workload'
  AND coalesce(lifetime_s, -1) = coalesce(CAST($lifetime_s AS BIGINT), -1)
