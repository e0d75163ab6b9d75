-- caching_calls: the calls whose prefix reuse can be measured, numbered so the block rows stay narrow.
-- Grain: one row per raw_calls.call_id that has a start time and as many prefix sizes as prefix hashes.
-- Upstream: raw_calls, caching_workload (the workload of each call).
-- Parameters: $scope = 'model' (one cache per provider and model) | 'workload' (per workload too).
CREATE OR REPLACE TEMP TABLE caching_calls AS
SELECT
  row_number() OVER () AS call_idx,             -- a join key only: no result depends on its order
  c.call_id,
  c.started_at,
  epoch_us(c.started_at) AS t_us,
  hash(c.provider, c.model, CASE WHEN $scope = 'workload' THEN w.workload END) AS cache_key,
  c.prefix_hashes,
  c.prefix_tokens
FROM raw_calls c
LEFT JOIN caching_workload w USING (call_id)
WHERE c.started_at IS NOT NULL
  AND len(c.prefix_hashes) > 0
  AND len(c.prefix_tokens) = len(c.prefix_hashes)
