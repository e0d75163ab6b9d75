-- caching_opportunity: per workload (level 'workload') and per workload, provider and model (level
-- 'model'), for each cache lifetime: how much input repeats a prefix, what the provider's cache already
-- achieved, and what a prompt cache would save in dollars and TTFT.
-- Grain: (lifetime_s, level, workload, provider, model); provider and model are NULL on 'workload' rows.
-- Upstream: caching_days (summed over the days). Read by `what_if()`, `caching_by_workload` and the dashboard.
CREATE OR REPLACE TABLE caching_opportunity AS
WITH agg AS (
  SELECT
    lifetime_s,
    CASE WHEN grouping(provider, model) = 0 THEN 'model' ELSE 'workload' END AS level,
    workload, provider, model,
    sum(calls)::BIGINT AS calls,
    sum(hashed_calls)::BIGINT AS hashed_calls,
    sum(input_tokens)::BIGINT AS input_tokens,
    sum(hashed_input_tokens)::BIGINT AS hashed_input_tokens,
    sum(total_blocks)::BIGINT AS total_blocks,
    sum(seen_blocks)::BIGINT AS seen_blocks,
    sum(reusable_tokens)::BIGINT AS reusable_tokens,
    sum(hit_tokens)::BIGINT AS hit_tokens,
    sum(write_tokens)::BIGINT AS write_tokens,
    sum(reads_reported_calls)::BIGINT AS reads_reported_calls,
    sum(cache_read_tokens)::BIGINT AS cache_read_tokens,
    sum(reads_reported_input_tokens) AS reads_reported_input_tokens,
    sum(comparable_calls)::BIGINT AS comparable_calls,
    sum(comparable_reusable_tokens) AS comparable_reusable_tokens,
    sum(comparable_input_tokens) AS comparable_input_tokens,
    sum(priced_calls)::BIGINT AS priced_calls,
    sum(priced_hashed_calls)::BIGINT AS priced_hashed_calls,
    sum(priced_input_tokens)::BIGINT AS priced_input_tokens,
    sum(priced_cache_read_tokens)::BIGINT AS priced_cache_read_tokens,
    CAST(sum(usd_now) AS DECIMAL(38, 12)) AS usd_now,
    CAST(sum(usd_with_cache) AS DECIMAL(38, 12)) AS usd_with_cache,
    CAST(sum(usd_all_uncached) AS DECIMAL(38, 12)) AS usd_all_uncached,
    CAST(sum(usd_all_cache_read) AS DECIMAL(38, 12)) AS usd_all_cache_read,
    CAST(sum(usd_all_cache_write) AS DECIMAL(38, 12)) AS usd_all_cache_write,
    sum(ttft_fitted_calls)::BIGINT AS ttft_fitted_calls,
    CAST(sum(ttft_saved_s) AS DOUBLE) / nullif(sum(ttft_fitted_calls), 0) AS ttft_saved_s_mean,
    -- TTFT saved per newly cached token: as measured where the cache adds reads, else the fit's slope
    -- (input-weighted across models on 'workload' rows)
    coalesce(
      CAST(sum(ttft_saved_s) AS DOUBLE) / nullif(sum(ttft_new_hit_tokens), 0),
      CAST(sum(slope_weighted_s) AS DOUBLE) / nullif(sum(slope_input_tokens), 0)
    ) AS ttft_s_per_token_saved
  FROM caching_days
  GROUP BY GROUPING SETS ((lifetime_s, workload), (lifetime_s, workload, provider, model))
),
hist AS (
  -- the TTFT saved per call as a histogram sketch (sketch_macros.sql), read at its median like every percentile
  SELECT
    lifetime_s,
    CASE WHEN grouping(provider, model) = 0 THEN 'model' ELSE 'workload' END AS level,
    workload, provider, model, ttft_bucket, sum(ttft_fitted_calls) AS n
  FROM caching_days
  WHERE ttft_bucket IS NOT NULL
  GROUP BY GROUPING SETS ((lifetime_s, workload, ttft_bucket), (lifetime_s, workload, provider, model, ttft_bucket))
),
hist_cum AS (
  SELECT *,
    sum(n) OVER (PARTITION BY lifetime_s, level, workload, provider, model ORDER BY ttft_bucket
                 ROWS UNBOUNDED PRECEDING) AS cum,
    sum(n) OVER (PARTITION BY lifetime_s, level, workload, provider, model) AS total
  FROM hist
),
p50 AS (
  SELECT lifetime_s, level, workload, provider, model,
    pl_hist_value(min(ttft_bucket) FILTER (WHERE cum >= pl_hist_rank(0.5, total))) AS ttft_saved_p50_s
  FROM hist_cum
  GROUP BY lifetime_s, level, workload, provider, model
),
shares AS (
  SELECT
    a.*,
    p.ttft_saved_p50_s,
    a.reusable_tokens / nullif(a.hashed_input_tokens, 0) AS reuse_share,
    a.cache_read_tokens / nullif(a.reads_reported_input_tokens, 0) AS achieved_share,
    a.comparable_reusable_tokens / nullif(a.comparable_input_tokens, 0) AS possible_share,
    CAST(a.usd_now - a.usd_with_cache AS DECIMAL(38, 12)) AS usd_saved,
    CASE WHEN a.lifetime_s IS NULL THEN 'earlier (no expiry)'
         WHEN a.lifetime_s % 3600 = 0 THEN printf('within %d h', a.lifetime_s // 3600)
         WHEN a.lifetime_s % 60 = 0 THEN printf('within %d min', a.lifetime_s // 60)
         ELSE printf('within %d s', a.lifetime_s) END AS lifetime_text
  FROM agg a
  LEFT JOIN p50 p
    ON p.lifetime_s IS NOT DISTINCT FROM a.lifetime_s AND p.level = a.level
   AND p.workload IS NOT DISTINCT FROM a.workload AND p.provider IS NOT DISTINCT FROM a.provider
   AND p.model IS NOT DISTINCT FROM a.model
)
SELECT
  lifetime_s,                   -- cache lifetime in seconds, restarted by every use; NULL = unlimited
  level,                        -- 'workload': all its providers and models; 'model': one provider and model
  workload, provider, model,
  calls,
  hashed_calls,                 -- calls with prefix hashes and a start time (reuse is measured on these)
  input_tokens,                 -- uncached + cache read + cache write, all calls
  hashed_input_tokens,
  total_blocks, seen_blocks,    -- prompt blocks, and those an earlier call sent within the lifetime
  reusable_tokens,              -- input tokens that repeat a prefix sent within the lifetime
  reuse_share,                  -- reusable_tokens / hashed_input_tokens
  hit_tokens,                   -- cache reads with the cache: max(reusable, reported) per call
  write_tokens,                 -- first writes with the cache: prefixes a later call reuses
  reads_reported_calls,         -- calls whose provider reports cache reads (0 included)
  cache_read_tokens,            -- cache reads achieved, as reported
  achieved_share,               -- cache_read_tokens / input tokens of the reporting calls
  comparable_calls,             -- reporting calls that also have prefix hashes
  possible_share,               -- reusable share of the comparable calls: what the cache could have read
  priced_calls,                 -- calls with per-token prices (dollar columns cover these only)
  priced_hashed_calls,
  priced_input_tokens, priced_cache_read_tokens,
  usd_now,                      -- input side as billed (uncached + cache read + cache write)
  usd_with_cache,               -- the same with the cache (calls without prefix hashes unchanged)
  usd_saved,                    -- usd_now - usd_with_cache; negative when writes cost more than reads save
  usd_all_uncached, usd_all_cache_read, usd_all_cache_write,   -- the input priced all one way (what-if)
  ttft_fitted_calls,            -- hashed calls whose provider and model have a latency fit
  ttft_s_per_token_saved,       -- seconds of TTFT saved per newly cached input token (the what-if's rate)
  ttft_saved_s_mean,            -- TTFT saved per call with the cache, seconds (fitted hashed calls)
  ttft_saved_p50_s,
  CASE
    WHEN hashed_calls = 0 AND reads_reported_calls = 0 THEN
      'No prefix hashes or reported cache reads: capture prompt content (hashed at ingest, text dropped) or load hash_ids to measure reuse.'
    WHEN hashed_calls = 0 THEN
      printf('No prefix hashes, so reuse is not measured; the provider served %.1f%% of input from cache.', 100 * achieved_share)
    ELSE
      printf('%.1f%% of input tokens repeat a prefix sent %s', 100 * coalesce(reuse_share, 0), lifetime_text)
      || CASE WHEN hashed_calls < calls THEN printf(' (%d of %d calls have prefix hashes)', hashed_calls, calls) ELSE '' END
      || CASE
           WHEN priced_hashed_calls = 0 THEN '; no per-token price, so no dollar figure'
           WHEN usd_saved >= 0 THEN printf('; a prompt cache would save %s of %s input cost', usd_saved_text, usd_now_text)
           ELSE printf('; a prompt cache would cost %s more: its writes outweigh its reads', usd_lost_text)
         END
      || CASE WHEN ttft_saved_s_mean IS NULL THEN '; no latency fit, so no TTFT figure'
              ELSE printf(' and %.0f ms of TTFT per call (mean)', 1000 * ttft_saved_s_mean) END
      || CASE WHEN possible_share IS NULL THEN ''
              -- achieved above possible reads as a contradiction: the note says why, next to the two shares
              WHEN achieved_share > possible_share AND comparable_calls < reads_reported_calls
                THEN printf('; the provider''s cache read %.1f%% of input, above the %.1f%% possible, because possible is measured only on the %,d of %,d reporting calls that have prefix hashes',
                            100 * achieved_share, 100 * possible_share, comparable_calls, reads_reported_calls)
              WHEN achieved_share > possible_share
                THEN printf('; the provider''s cache read %.1f%% of input, above the %.1f%% possible %s: it matched prefixes the hashes here do not see (kept longer than this lifetime, or cached in finer blocks)',
                            100 * achieved_share, 100 * possible_share, lifetime_text)
              ELSE printf('; the provider''s cache read %.1f%% of input where %.1f%% was possible',
                          100 * achieved_share, 100 * possible_share)
                   || CASE WHEN comparable_calls < reads_reported_calls
                           THEN printf(' (possible measured on %,d of %,d calls)', comparable_calls, reads_reported_calls)
                           ELSE '' END
         END
      || '.'
  END AS note
FROM (
  SELECT
    *,
    pl_usd_text(usd_saved) AS usd_saved_text, pl_usd_text(-usd_saved) AS usd_lost_text,
    pl_usd_text(usd_now) AS usd_now_text
  FROM shares
)
