-- caching_call_savings: per call and cache lifetime, what a prompt cache would have changed: tokens read
-- from cache and written to it, the input cost with the cache, and the TTFT saved.
-- Grain: (call_id, lifetime_s) for every call in raw_calls. Upstream: raw_calls, caching_lifetimes,
-- caching_workload, call_prefix_reuse, caching_prices, caching_fits.
-- Parameters: $write_5m_max_s (lifetimes up to this many seconds pay the 5-minute cache-write price,
-- longer ones the 1-hour price); $fit_by_day (true: caching_fits holds a fit per UTC day, joined on the call's
-- day; false: one fit per model, its day NULL, for every day: written in as a constant, the join stays an
-- equality on the day and does not pair each call with every day's fit of its model).
-- With the cache, a call reads from cache the larger of its reusable prefix and what its provider already
-- served from cache, writes the prefix a later call reuses, and pays the rest as uncached input. TTFT
-- saved is the latency fit of the call's own UTC day (latency_fits fits each day on its calls) as the call ran
-- minus with the new cache reads, so a call's figures depend on its day alone.
-- A view, read once by caching_days.sql: the per-call rows are aggregated as they are made, never stored
-- (so $write_5m_max_s and $fit_by_day are written into the text before it runs: a view takes no prepared
-- parameters).
CREATE OR REPLACE TEMP VIEW caching_call_savings AS
WITH calls AS (
  SELECT
    c.call_id, CAST(c.started_at AS DATE) AS day, l.lifetime_s, w.workload, c.provider, c.model,
    c.operation = 'embeddings' AS embeddings,
    c.cache_read_tokens,
    r.call_id IS NOT NULL AS hashed,
    r.total_blocks, r.seen_blocks, r.reusable_tokens, r.write_tokens,
    coalesce(c.uncached_input_tokens, 0) + coalesce(c.cache_read_tokens, 0) + coalesce(c.cache_write_tokens, 0) > 0
      AS has_usage,
    coalesce(c.uncached_input_tokens, 0) + coalesce(c.cache_read_tokens, 0) + coalesce(c.cache_write_tokens, 0)
      AS reported_input_tokens,
    coalesce(c.uncached_input_tokens, 0) + coalesce(c.cache_write_tokens, 0) AS reported_prefill_tokens,
    r.prefix_tokens
  FROM raw_calls c
  CROSS JOIN caching_lifetimes l
  LEFT JOIN caching_workload w USING (call_id)
  LEFT JOIN call_prefix_reuse r
    ON r.call_id = c.call_id AND coalesce(r.lifetime_s, -1) = coalesce(l.lifetime_s, -1)
),
tokens AS (
  SELECT
    *,
    -- a call without token counts is sized by its prefix hashes
    CASE WHEN has_usage THEN reported_input_tokens ELSE coalesce(prefix_tokens, 0) END AS input_tokens,
    CASE WHEN has_usage THEN reported_prefill_tokens ELSE coalesce(prefix_tokens, 0) END AS prefill_tokens
  FROM calls
),
hits AS (
  SELECT
    *,
    CASE WHEN hashed THEN least(input_tokens, greatest(reusable_tokens, coalesce(cache_read_tokens, 0))) END AS hit_tokens
  FROM tokens
),
cached AS (
  SELECT
    t.*,
    CASE WHEN t.hashed THEN least(t.write_tokens, t.input_tokens - t.hit_tokens) END AS cached_write_tokens,
    CASE WHEN t.hashed THEN least(t.hit_tokens - least(t.hit_tokens, coalesce(t.cache_read_tokens, 0)), t.prefill_tokens) END
      AS new_hit_tokens,
    p.call_id IS NOT NULL AS priced,
    p.uncached_input, p.cache_read,
    CASE WHEN t.lifetime_s IS NOT NULL AND t.lifetime_s <= $write_5m_max_s THEN p.cache_write ELSE p.cache_write_1h END
      AS cache_write,
    p.billed_input_usd,
    f.ttft_s_per_uncached_token AS fit_b,
    coalesce(f.ttft_intercept_s, 0) AS fit_a,
    coalesce(f.ttft_s_per_uncached_token_sq, 0) AS fit_q,
    coalesce(f.ttft_s_per_cached_token, 0) AS fit_k,   -- not fitted: cache reads take no prefill time
    coalesce(f.ttft_floor_s, 0) AS fit_floor
  FROM hits t
  LEFT JOIN caching_prices p USING (call_id)
  LEFT JOIN caching_fits f
    ON f.provider IS NOT DISTINCT FROM t.provider AND f.model IS NOT DISTINCT FROM t.model
   AND f.day IS NOT DISTINCT FROM (CASE WHEN $fit_by_day THEN t.day END) AND NOT t.embeddings
),
timed AS (
  -- the latency model's prefill time (docs/latency.md) as billed and with the new cache reads; the saving
  -- is their difference, so intercepts, squared terms and floors are honoured
  SELECT
    *,
    CASE WHEN hashed AND fit_b IS NOT NULL THEN greatest(
      greatest(fit_floor, fit_a + fit_b * prefill_tokens + fit_q * prefill_tokens * prefill_tokens
                          + fit_k * coalesce(cache_read_tokens, 0), 0)
      - greatest(fit_floor, fit_a + fit_b * (prefill_tokens - new_hit_tokens)
                            + fit_q * (prefill_tokens - new_hit_tokens) * (prefill_tokens - new_hit_tokens)
                            + fit_k * (coalesce(cache_read_tokens, 0) + new_hit_tokens), 0),
      0) END AS ttft_saved_s
  FROM cached
)
SELECT
  call_id, day, lifetime_s, workload, provider, model, hashed, priced,
  input_tokens,                                   -- uncached + cache read + cache write as reported
  cache_read_tokens,                              -- reported by the provider; NULL = not reported
  total_blocks, seen_blocks, reusable_tokens,
  hit_tokens,                                     -- read from cache with the cache (hashed calls)
  cached_write_tokens AS write_tokens,            -- written to the cache with the cache (hashed calls)
  new_hit_tokens,                                 -- cache reads beyond what the provider already served
  billed_input_usd AS usd_now,                    -- input side as billed (priced calls)
  -- the products below are exact at the prices' scale and left unrounded: caching_days.sql rounds each day's sum
  -- once (rounding DECIMALs row by row was the slowest part of the caching lever)
  CASE WHEN priced AND hashed THEN
         (input_tokens - hit_tokens - cached_write_tokens) * uncached_input
         + hit_tokens * cache_read + cached_write_tokens * cache_write
       WHEN priced THEN billed_input_usd END AS usd_with_cache,   -- unchanged without prefix hashes
  -- what the input side would cost if every input token were uncached / read from cache / written to
  -- cache: the what-if combines these linearly for any hit rate
  CASE WHEN priced THEN input_tokens * uncached_input END AS usd_all_uncached,
  CASE WHEN priced THEN input_tokens * cache_read END AS usd_all_cache_read,
  CASE WHEN priced THEN input_tokens * cache_write END AS usd_all_cache_write,
  -- the fit's linear TTFT saving per newly cached token, seconds (the what-if's fallback rate)
  CASE WHEN fit_b IS NOT NULL THEN greatest(fit_b - fit_k, 0) END AS ttft_s_per_token_saved,
  ttft_saved_s                                    -- seconds of TTFT the new cache reads save
FROM timed
