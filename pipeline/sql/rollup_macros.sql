-- The dashboard's read model, created inside each published snapshot (run on the snapshot itself).
-- Every number a page shows comes from one of these macros over the snapshot's rollups; pages do no arithmetic.
-- Filter arguments, shared by all: p_since, p_until (TIMESTAMP, UTC, [since, until); NULL = open) and
-- p_providers, p_models, p_workloads, p_teams (VARCHAR[]; NULL = all values).
-- p_bin: 'hour' | 'day' | 'all' (time axis); p_group: 'all' | 'workload' | 'provider' | 'model' | 'team' |
-- 'project' (series).

-- A histogram bucket of rollup_hist read back as a value: its geometric centre (0 for the <= 0 bucket); the
-- percentile sketch of sketch_macros.sql, created in the snapshot before this file.
CREATE MACRO hist_value(b) AS pl_hist_value(b);

CREATE MACRO keep_row(hour, provider, model, workload, team, p_since, p_until, p_providers, p_models, p_workloads, p_teams) AS
  (p_since IS NULL OR hour >= CAST(p_since AS TIMESTAMP))
  AND (p_until IS NULL OR hour < CAST(p_until AS TIMESTAMP))
  AND (p_providers IS NULL OR list_contains(p_providers, provider))
  AND (p_models IS NULL OR list_contains(p_models, model))
  AND (p_workloads IS NULL OR list_contains(p_workloads, workload))
  AND (p_teams IS NULL OR list_contains(p_teams, team));

CREATE MACRO time_bin(p_bin, hour) AS
  CASE p_bin WHEN 'hour' THEN hour WHEN 'day' THEN date_trunc('day', hour) ELSE NULL::TIMESTAMP END;

CREATE MACRO series_key(p_group, workload, provider, model, team, project) AS
  CASE p_group WHEN 'workload' THEN workload WHEN 'provider' THEN provider WHEN 'model' THEN provider || '/' || model
               WHEN 'team' THEN team WHEN 'project' THEN project ELSE 'all' END;

-- Hourly rollup rows that pass the filters.
CREATE MACRO filtered_calls(p_since, p_until, p_providers, p_models, p_workloads, p_teams) AS TABLE
SELECT * FROM rollup_hourly
WHERE keep_row(hour, provider, model, workload, team, p_since, p_until, p_providers, p_models, p_workloads, p_teams);

-- Histogram rows that pass the filters: hourly ones (ttft_s, itl_s, e2e_s) for p_bin = 'hour', else daily ones
-- (all metrics). Both sources keep the column name `hour` here (a day's rows carry the day's start).
CREATE MACRO filtered_hist(p_since, p_until, p_providers, p_models, p_workloads, p_teams, p_bin) AS TABLE
SELECT hour, workload, provider, model, team, metric, bucket, calls FROM rollup_hist_hourly
WHERE p_bin = 'hour'
  AND keep_row(hour, provider, model, workload, team, p_since, p_until, p_providers, p_models, p_workloads, p_teams)
UNION ALL
SELECT day AS hour, workload, provider, model, team, metric, bucket, calls FROM rollup_hist_daily
WHERE p_bin <> 'hour'
  AND keep_row(day, provider, model, workload, team, p_since, p_until, p_providers, p_models, p_workloads, p_teams);

-- Percentiles (p50, p90, p95, p99) per time bin, series and metric from merged histograms: the value of the
-- bucket holding the ceil(p * n)-th smallest call (nearest rank). Seconds for *_s metrics, tokens otherwise
-- (token metrics only for p_bin 'day' or 'all').
CREATE MACRO hist_percentiles(p_since, p_until, p_providers, p_models, p_workloads, p_teams, p_bin, p_group) AS TABLE
WITH h AS (
  SELECT time_bin(p_bin, hour) AS t, series_key(p_group, workload, provider, model, team, NULL) AS series,
         metric, bucket, sum(calls) AS n
  FROM filtered_hist(p_since, p_until, p_providers, p_models, p_workloads, p_teams, p_bin)
  GROUP BY ALL
),
c AS (
  SELECT *, sum(n) OVER (PARTITION BY t, series, metric ORDER BY bucket ROWS UNBOUNDED PRECEDING) AS cum,
         sum(n) OVER (PARTITION BY t, series, metric) AS total
  FROM h
)
SELECT t, series, metric, CAST(any_value(total) AS BIGINT) AS calls,
       hist_value(min(bucket) FILTER (WHERE cum >= pl_hist_rank(0.5, total))) AS p50,
       hist_value(min(bucket) FILTER (WHERE cum >= pl_hist_rank(0.9, total))) AS p90,
       hist_value(min(bucket) FILTER (WHERE cum >= pl_hist_rank(0.95, total))) AS p95,
       hist_value(min(bucket) FILTER (WHERE cum >= pl_hist_rank(0.99, total))) AS p99
FROM c GROUP BY ALL ORDER BY t, series, metric;

-- The distribution of one metric: calls per histogram bucket with its bounds, for a histogram chart.
CREATE MACRO hist_distribution(p_since, p_until, p_providers, p_models, p_workloads, p_teams, p_metric) AS TABLE
SELECT bucket, CASE WHEN bucket = -32768 THEN 0.0 ELSE pow(10, bucket / 40) END AS lower_value,
       CASE WHEN bucket = -32768 THEN 0.0 ELSE pow(10, (bucket + 1) / 40) END AS upper_value,
       hist_value(bucket) AS value, CAST(sum(calls) AS BIGINT) AS calls
FROM filtered_hist(p_since, p_until, p_providers, p_models, p_workloads, p_teams, 'all')
WHERE metric = p_metric
GROUP BY bucket ORDER BY bucket;

-- Totals of everything the filters select, one row: counts, tokens, phase shares of time and money, costs.
CREATE MACRO totals(p_since, p_until, p_providers, p_models, p_workloads, p_teams) AS TABLE
WITH s AS (
  SELECT
    CAST(coalesce(sum(calls), 0) AS BIGINT) AS calls, CAST(coalesce(sum(error_calls), 0) AS BIGINT) AS error_calls,
    CAST(coalesce(sum(priced_calls), 0) AS BIGINT) AS priced_calls,
    CAST(coalesce(sum(unpriced_calls), 0) AS BIGINT) AS unpriced_calls,
    CAST(coalesce(sum(split_calls), 0) AS BIGINT) AS split_calls,
    CAST(coalesce(sum(input_tokens), 0) AS BIGINT) AS input_tokens,
    CAST(coalesce(sum(output_tokens), 0) AS BIGINT) AS output_tokens,
    coalesce(sum(prefill_time_s), 0) AS prefill_time_s, coalesce(sum(queue_time_s), 0) AS queue_time_s,
    coalesce(sum(decode_time_s), 0) AS decode_time_s,
    coalesce(sum(input_cost_usd), 0) AS input_cost_usd, coalesce(sum(output_cost_usd), 0) AS output_cost_usd,
    coalesce(sum(cost_usd), 0) AS cost_usd,
    CAST(coalesce(sum(invoice_calls), 0) AS BIGINT) AS invoice_calls,
    coalesce(sum(cost_usd_invoice), 0) AS cost_usd_invoice,
    coalesce(sum(input_cost_usd_best), 0) AS input_cost_usd_best,
    coalesce(sum(output_cost_usd_best), 0) AS output_cost_usd_best,
    coalesce(sum(cost_usd_best), 0) AS cost_usd_best,
    coalesce(sum(cost_usd_best), 0) - coalesce(sum(cost_usd_invoice), 0) AS cost_usd_estimated_unbilled
  FROM filtered_calls(p_since, p_until, p_providers, p_models, p_workloads, p_teams)
),
p AS (
  SELECT
    max(p50) FILTER (WHERE metric = 'ttft_s') AS ttft_p50_s, max(p95) FILTER (WHERE metric = 'ttft_s') AS ttft_p95_s,
    max(p50) FILTER (WHERE metric = 'itl_s') AS itl_p50_s, max(p95) FILTER (WHERE metric = 'itl_s') AS itl_p95_s,
    max(p50) FILTER (WHERE metric = 'e2e_s') AS e2e_p50_s, max(p95) FILTER (WHERE metric = 'e2e_s') AS e2e_p95_s
  FROM hist_percentiles(p_since, p_until, p_providers, p_models, p_workloads, p_teams, 'all', 'all')
)
SELECT s.*,
  s.prefill_time_s / nullif(s.prefill_time_s + s.decode_time_s, 0) AS prefill_time_share,
  s.decode_time_s / nullif(s.prefill_time_s + s.decode_time_s, 0) AS decode_time_share,
  -- shares of money are of the headline cost (invoice-true where billed, else estimated), like every surface's
  CAST(s.input_cost_usd_best AS DOUBLE) / nullif(CAST(s.input_cost_usd_best + s.output_cost_usd_best AS DOUBLE), 0)
    AS prefill_cost_share,
  CAST(s.output_cost_usd_best AS DOUBLE) / nullif(CAST(s.input_cost_usd_best + s.output_cost_usd_best AS DOUBLE), 0)
    AS decode_cost_share,
  p.*
FROM s, p;

-- Per workload under the filters: the phase split of time and money (of the headline cost: invoice-true where
-- billed, else estimated), the dominant phases, median tokens, TTFT/ITL percentiles, and the shape, causes,
-- diagnoses and levers of workload_rules.sql over the filtered calls, as `workload_stats` gives them for a period.
-- Two inputs of the rules are of the whole store (the `workloads` row): the ITL contention ratio (medians of
-- concurrency quartiles, which do not add up across rollup rows) and the caching lever (caching_by_workload).
-- `diagnosed` is false (texts NULL) for a workload the build has not diagnosed yet.
CREATE MACRO workload_phases(p_since, p_until, p_providers, p_models, p_workloads, p_teams) AS TABLE
WITH s AS (
  SELECT workload, CAST(sum(calls) AS BIGINT) AS calls, CAST(sum(error_calls) AS BIGINT) AS error_calls,
         CAST(sum(uncached_input_tokens) AS BIGINT) AS uncached_input_tokens,
         CAST(sum(cache_read_tokens) AS BIGINT) AS cache_read_tokens,
         CAST(sum(cache_write_tokens) AS BIGINT) AS cache_write_tokens,
         CAST(sum(output_tokens) AS BIGINT) AS output_tokens,
         sum(prefill_time_s) AS prefill_time_s, sum(decode_time_s) AS decode_time_s, sum(queue_time_s) AS queue_time_s,
         CAST(sum(ttft_queue_s) AS DOUBLE) / nullif(CAST(sum(queued_ttft_s) AS DOUBLE), 0) AS queue_share_of_ttft,
         sum(input_cost_usd) AS input_cost_usd, sum(cache_write_cost_usd) AS cache_write_cost_usd,
         sum(output_cost_usd) AS output_cost_usd, sum(cost_usd) AS cost_usd,
         sum(cost_usd_invoice) AS cost_usd_invoice, CAST(sum(invoice_calls) AS BIGINT) AS invoice_calls,
         sum(input_cost_usd_best) AS input_cost_usd_best, sum(output_cost_usd_best) AS output_cost_usd_best,
         sum(cost_usd_best) AS cost_usd_best, CAST(sum(unpriced_calls) AS BIGINT) AS unpriced_calls,
         count(DISTINCT date_trunc('day', hour)) AS days
  FROM filtered_calls(p_since, p_until, p_providers, p_models, p_workloads, p_teams) GROUP BY workload
),
p AS (
  SELECT series AS workload,
    max(p50) FILTER (WHERE metric = 'input_tokens') AS input_tokens_p50,
    max(p50) FILTER (WHERE metric = 'output_tokens') AS output_tokens_p50,
    max(p50) FILTER (WHERE metric = 'ttft_s') AS ttft_p50_s, max(p95) FILTER (WHERE metric = 'ttft_s') AS ttft_p95_s,
    max(p50) FILTER (WHERE metric = 'itl_s') AS itl_p50_s, max(p95) FILTER (WHERE metric = 'itl_s') AS itl_p95_s,
    max(p50) FILTER (WHERE metric = 'e2e_s') AS e2e_p50_s
  FROM hist_percentiles(p_since, p_until, p_providers, p_models, p_workloads, p_teams, 'all', 'workload')
  GROUP BY series
),
shares AS (
  SELECT s.*, p.* EXCLUDE (workload),
    s.prefill_time_s / nullif(s.prefill_time_s + s.decode_time_s, 0) AS prefill_time_share,
    s.decode_time_s / nullif(s.prefill_time_s + s.decode_time_s, 0) AS decode_time_share,
    CAST(s.input_cost_usd_best AS DOUBLE) / nullif(CAST(s.input_cost_usd_best + s.output_cost_usd_best AS DOUBLE), 0)
      AS prefill_cost_share,
    CAST(s.output_cost_usd_best AS DOUBLE) / nullif(CAST(s.input_cost_usd_best + s.output_cost_usd_best AS DOUBLE), 0)
      AS decode_cost_share,
    w.workload IS NOT NULL AS diagnosed,
    w.itl_contention_ratio, w.concurrency_high, w.concurrency_low, w.reuse_share, w.achieved_share,
    w.cache_usd_saved, w.cache_ttft_saved_p50_s, w.cache_lifetime_s, w.store_days,
    b.*
  FROM s LEFT JOIN p USING (workload)
  LEFT JOIN (SELECT workload, itl_contention_ratio, concurrency_high, concurrency_low, reuse_share, achieved_share,
                    cache_usd_saved, cache_ttft_saved_p50_s, cache_lifetime_s, store_days FROM workloads) w USING (workload)
  LEFT JOIN build_settings b ON true
),
classified AS (
  SELECT *,
    pl_dominant_phase(prefill_time_share) AS dominant_latency_phase,
    pl_dominant_phase(prefill_cost_share) AS dominant_cost_phase,
    pl_shape_class(shares) AS shape_class,
    pl_ttft_cause(shares) AS ttft_cause,
    pl_itl_cause(shares) AS itl_cause,
    pl_cost_cause(shares) AS cost_cause
  FROM shares
)
SELECT
  workload, calls, prefill_time_s, decode_time_s, queue_time_s, input_cost_usd, output_cost_usd, cost_usd,
  cost_usd_invoice, invoice_calls, input_cost_usd_best, output_cost_usd_best, cost_usd_best, unpriced_calls,
  input_tokens_p50, output_tokens_p50, ttft_p50_s, ttft_p95_s, itl_p50_s, itl_p95_s,
  prefill_time_share, prefill_cost_share, dominant_latency_phase, dominant_cost_phase, diagnosed,
  CASE WHEN diagnosed THEN shape_class END AS shape_class,
  CASE WHEN diagnosed THEN pl_latency_cause(classified) END AS cause,
  CASE WHEN diagnosed THEN cost_cause END AS cost_cause,
  CASE WHEN diagnosed THEN pl_latency_diagnosis(classified) END AS diagnosis,
  CASE WHEN diagnosed THEN pl_latency_lever(classified) END AS lever,
  CASE WHEN diagnosed THEN pl_cost_diagnosis(classified) END AS cost_diagnosis,
  CASE WHEN diagnosed THEN pl_cost_lever(classified) END AS cost_lever
FROM classified
ORDER BY cost_usd_best DESC NULLS LAST, calls DESC, workload;

-- Money per time bin and series, split into the four token buckets (estimated at list price) and the
-- invoice-true input/output split where billing is reconciled. USD as DOUBLE, for charts.
CREATE MACRO cost_over_time(p_since, p_until, p_providers, p_models, p_workloads, p_teams, p_bin, p_group) AS TABLE
SELECT time_bin(p_bin, hour) AS t, series_key(p_group, workload, provider, model, team, project) AS series,
  CAST(sum(calls) AS BIGINT) AS calls,
  CAST(sum(uncached_input_cost_usd) AS DOUBLE) AS uncached_input_usd, CAST(sum(cache_read_cost_usd) AS DOUBLE) AS cache_read_usd,
  CAST(sum(cache_write_cost_usd) AS DOUBLE) AS cache_write_usd, CAST(sum(output_cost_usd) AS DOUBLE) AS output_usd,
  CAST(sum(input_cost_usd) AS DOUBLE) AS input_usd, CAST(sum(cost_usd) AS DOUBLE) AS cost_usd,
  CAST(sum(input_cost_usd_invoice) AS DOUBLE) AS input_usd_invoice, CAST(sum(output_cost_usd_invoice) AS DOUBLE) AS output_usd_invoice,
  CAST(sum(cost_usd_invoice) AS DOUBLE) AS cost_usd_invoice, CAST(sum(invoice_calls) AS BIGINT) AS invoice_calls,
  CAST(sum(input_cost_usd_best) AS DOUBLE) AS input_usd_best, CAST(sum(output_cost_usd_best) AS DOUBLE) AS output_usd_best,
  CAST(sum(cost_usd_best) AS DOUBLE) AS cost_usd_best
FROM filtered_calls(p_since, p_until, p_providers, p_models, p_workloads, p_teams)
GROUP BY ALL ORDER BY t, series;

-- Seconds per time bin spent queued, in prefill (time to first token less queueing) and in decode.
CREATE MACRO time_split_over_time(p_since, p_until, p_providers, p_models, p_workloads, p_teams, p_bin) AS TABLE
SELECT t, phase, seconds FROM (
  SELECT time_bin(p_bin, hour) AS t,
    sum(queue_time_s) AS queue, sum(prefill_time_s) - sum(queue_time_s) AS prefill, sum(decode_time_s) AS decode
  FROM filtered_calls(p_since, p_until, p_providers, p_models, p_workloads, p_teams) GROUP BY ALL
) UNPIVOT (seconds FOR phase IN (queue, prefill, decode))
ORDER BY t, phase;

-- Money by one grouping (team, project, workload, model, provider): estimated, invoice-true, and best (invoice-true
-- where billed, else estimated), input vs output.
CREATE MACRO cost_by(p_since, p_until, p_providers, p_models, p_workloads, p_teams, p_group) AS TABLE
SELECT series_key(p_group, workload, provider, model, team, project) AS series,
  CAST(sum(calls) AS BIGINT) AS calls, CAST(sum(unpriced_calls) AS BIGINT) AS unpriced_calls,
  sum(input_cost_usd) AS input_cost_usd, sum(output_cost_usd) AS output_cost_usd, sum(cost_usd) AS cost_usd,
  CAST(sum(invoice_calls) AS BIGINT) AS invoice_calls,
  sum(input_cost_usd_invoice) AS input_cost_usd_invoice, sum(output_cost_usd_invoice) AS output_cost_usd_invoice,
  sum(cost_usd_invoice) AS cost_usd_invoice,
  sum(input_cost_usd_best) AS input_cost_usd_best, sum(output_cost_usd_best) AS output_cost_usd_best,
  sum(cost_usd_best) AS cost_usd_best
FROM filtered_calls(p_since, p_until, p_providers, p_models, p_workloads, p_teams)
GROUP BY ALL ORDER BY cost_usd DESC NULLS LAST, calls DESC;

-- Calls per timing source (measured, events, estimated, none) under the filters.
CREATE MACRO timing_sources(p_since, p_until, p_providers, p_models, p_workloads, p_teams) AS TABLE
SELECT timing_source, CAST(calls AS BIGINT) AS calls FROM (
  SELECT sum(measured_calls) AS measured, sum(events_calls) AS events, sum(estimated_calls) AS estimated,
         sum(untimed_calls) AS none
  FROM filtered_calls(p_since, p_until, p_providers, p_models, p_workloads, p_teams)
) UNPIVOT (calls FOR timing_source IN (measured, events, estimated, none));

-- The sampled calls that pass the filters, latest first.
CREATE MACRO sample_calls(p_since, p_until, p_providers, p_models, p_workloads, p_teams) AS TABLE
SELECT * EXCLUDE (hour) FROM call_sample
WHERE keep_row(hour, provider, model, workload, team, p_since, p_until, p_providers, p_models, p_workloads, p_teams)
ORDER BY started_at DESC NULLS LAST;

-- TTFT, ITL and end-to-end percentiles per time bin and workload (wide), with the calls behind each metric.
CREATE MACRO workload_latency(p_since, p_until, p_providers, p_models, p_workloads, p_teams, p_bin) AS TABLE
SELECT t, series AS workload,
  max(calls) FILTER (WHERE metric = 'ttft_s') AS ttft_calls, max(calls) FILTER (WHERE metric = 'itl_s') AS itl_calls,
  max(calls) FILTER (WHERE metric = 'e2e_s') AS e2e_calls,
  max(p50) FILTER (WHERE metric = 'ttft_s') AS ttft_p50_s, max(p95) FILTER (WHERE metric = 'ttft_s') AS ttft_p95_s,
  max(p50) FILTER (WHERE metric = 'itl_s') AS itl_p50_s, max(p95) FILTER (WHERE metric = 'itl_s') AS itl_p95_s,
  max(p50) FILTER (WHERE metric = 'e2e_s') AS e2e_p50_s, max(p95) FILTER (WHERE metric = 'e2e_s') AS e2e_p95_s
FROM hist_percentiles(p_since, p_until, p_providers, p_models, p_workloads, p_teams, p_bin, 'workload')
GROUP BY ALL ORDER BY t, workload;

-- Latency objectives against their workload's percentile per time bin: p_slos is a list of
-- {workload, metric (ttft_p95_s | ttft_p50_s | itl_p95_s | itl_p50_s | e2e_p95_s | e2e_p50_s), max_s};
-- breached = the observed percentile (seconds) exceeds max_s. Bins where the metric has no calls are left out.
CREATE MACRO slo_status(p_since, p_until, p_providers, p_models, p_workloads, p_teams, p_bin, p_slos) AS TABLE
WITH s AS (SELECT unnest(p_slos, recursive := true)),
l AS (SELECT * FROM workload_latency(p_since, p_until, p_providers, p_models, p_workloads, p_teams, p_bin)),
j AS (
  SELECT s.workload, s.metric AS slo_metric, s.max_s, l.t,
    CASE s.metric WHEN 'ttft_p95_s' THEN l.ttft_p95_s WHEN 'ttft_p50_s' THEN l.ttft_p50_s
                  WHEN 'itl_p95_s' THEN l.itl_p95_s WHEN 'itl_p50_s' THEN l.itl_p50_s
                  WHEN 'e2e_p95_s' THEN l.e2e_p95_s WHEN 'e2e_p50_s' THEN l.e2e_p50_s END AS observed_s,
    CASE split_part(s.metric, '_', 1) WHEN 'ttft' THEN l.ttft_calls WHEN 'itl' THEN l.itl_calls ELSE l.e2e_calls END
      AS calls
  FROM s JOIN l USING (workload)
)
SELECT *, observed_s > max_s AS breached FROM j WHERE observed_s IS NOT NULL
ORDER BY workload, slo_metric, t;
