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
),
instants AS (  -- each instant a prefix was sent at, with the instants before and after it (strictly: ties are one)
  SELECT block_key, t_us, lag(t_us) OVER w AS prev_us, lead(t_us) OVER w AS next_us
  FROM (SELECT DISTINCT block_key, t_us FROM blocks)
  WINDOW w AS (PARTITION BY block_key ORDER BY t_us)
)
-- lag and lead over the distinct instants give what a max / min over a RANGE frame ending one microsecond before
-- (after) each send gives, at a fraction of its cost (5x faster at 2.5 M blocks), and they are one pass on Spark too
SELECT
  b.call_idx,
  b.block_tokens,               -- tokens of this block alone
  b.cum_tokens,                 -- tokens of the prefix that ends with this block
  b.t_us - i.prev_us AS since_prev_us,
  i.next_us - b.t_us AS until_next_us
FROM blocks b
JOIN instants i ON i.block_key = b.block_key AND i.t_us = b.t_us
