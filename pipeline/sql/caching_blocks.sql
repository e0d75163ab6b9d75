-- caching_blocks: one row per prompt block of every measurable call, with how long ago the same prefix
-- was last sent to the same cache and how soon it is sent again.
-- Grain: (call, block position). Upstream: caching_calls.
-- prefix_hashes[i] identifies the whole prompt up to block i: cumulative hashes computed at ingest, and
-- Mooncake `hash_ids` alike (equal ids mean equal prefixes). The block key folds the cache (provider,
-- model, workload when scoped) into the hash, so one window partition is one cached prefix.
-- "Earlier" is strict: calls that start at the same instant cannot warm each other's cache.
CREATE OR REPLACE TEMP TABLE caching_blocks AS
WITH blocks AS (
  SELECT
    call_idx, t_us,
    hash(cache_key, block_hash) AS block_key,
    cum_tokens,
    greatest(cum_tokens - prev_cum_tokens, 0) AS block_tokens
  FROM (
    SELECT
      call_idx, t_us, cache_key,
      unnest(prefix_hashes) AS block_hash,
      unnest(prefix_tokens) AS cum_tokens,
      unnest(list_transform(range(1, len(prefix_tokens) + 1),
                            lambda i: CASE WHEN i = 1 THEN 0 ELSE prefix_tokens[i - 1] END)) AS prev_cum_tokens
    FROM caching_calls
  )
)
SELECT
  call_idx,
  block_tokens,                 -- tokens of this block alone
  cum_tokens,                   -- tokens of the prefix that ends with this block
  t_us - max(t_us) OVER (w RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS since_prev_us,
  -- the next send, read as the previous one in reverse time: the same frame (later instants only), and a
  -- frame that starts at the partition's edge is computed in one pass on both engines, where Spark
  -- recomputes a frame that ends at UNBOUNDED FOLLOWING for every row (quadratic in a shared prefix's calls)
  min(t_us) OVER (w_rev RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) - t_us AS until_next_us
FROM blocks
WINDOW w AS (PARTITION BY block_key ORDER BY t_us),
       w_rev AS (PARTITION BY block_key ORDER BY t_us DESC)
