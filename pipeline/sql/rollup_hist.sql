-- Log-bucket histograms, so percentiles under any filter come from merged histograms. Upstream: _pl_calls (the
-- `requests` rows of the UTC days being published; pipeline/publish.py assembles the snapshot's tables).
-- Buckets and their reading are the percentile sketch of sketch_macros.sql (pl_hist_bucket / pl_hist_value):
-- 40 buckets per decade, a percentile within 2.9% of the exact nearest-rank value.
-- Two grains, each sorted by time so a period filter reads only its own row groups:
--   rollup_hist_hourly  UTC hour × workload × provider × model × team × metric × bucket, for ttft_s, itl_s, e2e_s (s)
--   rollup_hist_daily   UTC day, same keys, for those and input_tokens, output_tokens (tokens)
CREATE OR REPLACE TEMP TABLE _pl_buckets AS
SELECT
  date_trunc('hour', started_at) AS hour,
  workload,
  coalesce(provider, '(unknown)') AS provider,
  coalesce(model, '(unknown)') AS model,
  coalesce(team, '(none)') AS team,
  pl_hist_bucket(ttft_s) AS ttft_s, pl_hist_bucket(itl_s) AS itl_s, pl_hist_bucket(e2e_s) AS e2e_s,
  pl_hist_bucket(input_tokens) AS input_tokens, pl_hist_bucket(output_tokens) AS output_tokens
FROM _pl_calls;

CREATE OR REPLACE TEMP TABLE _pl_part_rollup_hist_hourly AS
SELECT hour, workload, provider, model, team, metric, bucket, count(*) AS calls
FROM (
  SELECT hour, workload, provider, model, team, 'ttft_s' AS metric, ttft_s AS bucket FROM _pl_buckets WHERE ttft_s IS NOT NULL
  UNION ALL
  SELECT hour, workload, provider, model, team, 'itl_s', itl_s FROM _pl_buckets WHERE itl_s IS NOT NULL
  UNION ALL
  SELECT hour, workload, provider, model, team, 'e2e_s', e2e_s FROM _pl_buckets WHERE e2e_s IS NOT NULL
)
GROUP BY ALL;

CREATE OR REPLACE TEMP TABLE _pl_part_rollup_hist_daily AS
SELECT day, workload, provider, model, team, metric, bucket, CAST(sum(calls) AS BIGINT) AS calls
FROM (
  SELECT date_trunc('day', hour) AS day, workload, provider, model, team, metric, bucket, calls
  FROM _pl_part_rollup_hist_hourly
  UNION ALL
  SELECT date_trunc('day', hour), workload, provider, model, team, 'input_tokens', input_tokens, 1
  FROM _pl_buckets WHERE input_tokens IS NOT NULL
  UNION ALL
  SELECT date_trunc('day', hour), workload, provider, model, team, 'output_tokens', output_tokens, 1
  FROM _pl_buckets WHERE output_tokens IS NOT NULL
)
GROUP BY ALL;

DROP TABLE _pl_buckets;
