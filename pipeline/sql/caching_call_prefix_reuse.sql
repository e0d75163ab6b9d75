-- call_prefix_reuse: per call and cache lifetime, how much of the prompt an earlier call had already sent
-- to the same cache within the lifetime, and how much of it a later call will reuse.
-- Grain: (call_id, lifetime_s) for calls with prefix hashes and a start time; lifetime_s NULL = unlimited.
-- Upstream: caching_blocks, caching_calls, caching_lifetimes.
-- Parameters: $min_block_tokens (a reused prefix shorter than this is not cached).
-- A block counts as seen when the last earlier call that sent the same prefix started at most lifetime_s
-- before this one (every use restarts a provider's cache lifetime). Because a hash names its whole
-- prefix, the seen blocks of a call always form an unbroken prefix, so reusable_tokens is both the size
-- of the longest reused prefix and the tokens of the seen blocks.
CREATE OR REPLACE TABLE call_prefix_reuse AS
WITH judged AS (
  SELECT
    b.call_idx, l.lifetime_s, b.block_tokens, b.cum_tokens,
    b.since_prev_us IS NOT NULL AND (l.lifetime_s IS NULL OR b.since_prev_us <= l.lifetime_s * 1000000) AS seen,
    b.until_next_us IS NOT NULL AND (l.lifetime_s IS NULL OR b.until_next_us <= l.lifetime_s * 1000000)
      AS reused_later
  FROM caching_blocks b
  CROSS JOIN caching_lifetimes l
),
per_call AS (
  SELECT
    call_idx, lifetime_s,
    count(*) AS total_blocks,
    count(*) FILTER (WHERE seen) AS seen_blocks,
    max(cum_tokens) AS prefix_tokens,
    coalesce(sum(block_tokens) FILTER (WHERE seen), 0) AS seen_tokens,
    coalesce(sum(block_tokens) FILTER (WHERE reused_later AND NOT seen), 0) AS fresh_reused_tokens,
    coalesce(sum(block_tokens) FILTER (WHERE reused_later AND seen), 0) AS seen_reused_tokens,
    coalesce(max(cum_tokens) FILTER (WHERE reused_later), 0) AS reused_later_prefix_tokens
  FROM judged
  GROUP BY call_idx, lifetime_s
)
SELECT
  c.call_id,
  c.started_at,                                   -- the call's start: an incremental build finds a few days' rows by it
  p.lifetime_s,                                   -- seconds; NULL = unlimited
  p.total_blocks,                                 -- prompt blocks the call's prefix hashes cover
  p.seen_blocks,                                  -- of them, sent by an earlier call within the lifetime
  p.prefix_tokens,                                -- tokens the prefix hashes cover (the call's input)
  CASE WHEN p.seen_tokens >= $min_block_tokens THEN p.seen_tokens ELSE 0 END AS reusable_tokens,
  -- first writes: tokens this call would write to the cache because a later call within the lifetime
  -- reuses them (a prefix that was too short to be cached before has to be written now)
  CASE WHEN p.reused_later_prefix_tokens >= $min_block_tokens
       THEN p.fresh_reused_tokens + CASE WHEN p.seen_tokens < $min_block_tokens THEN p.seen_reused_tokens ELSE 0 END
       ELSE 0 END AS write_tokens
FROM per_call p
JOIN caching_calls c USING (call_idx)
