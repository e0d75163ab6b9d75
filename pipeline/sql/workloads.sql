-- workload_stats(since, until): per workload over calls started in [since, until) (NULL = open), the
-- phase split of time and money, which phase dominates, the shape class, a diagnosis with its
-- evidence and the lever, for time (latency_diagnosis/latency_lever; diagnosis/lever are the same) and
-- for money (cost_diagnosis/cost_lever, dollars per day over the days with calls). Grain: one row per workload. Upstream: requests,
-- invoice_costs, build_settings, caching_by_workload; the rules (dominance, shape, causes, diagnosis and lever
-- texts) are the macros of workload_rules.sql. `workloads` is the same over the whole store.
-- Every figure adds up over days: `workload_day_parts`, `workload_day_hist` and `workload_day_concurrency` are the
-- per (workload, UTC day, model) sums, the per (workload, day) histograms and the per (workload, day, concurrency)
-- ITL histograms, and workload_stats adds them up, so a build keeps them as tables (`workload_days`,
-- `workload_days_hist`, `workload_days_concurrency`) and recomputes only the days whose calls changed. Sums of
-- money are exact decimals, sums of seconds fixed point (1e-12 s): added per day or at once, the same numbers.
-- The figures every surface shows are computed the way the published rollups compute them, so the dashboard, the
-- CLI and the reports agree: percentiles are the sketch of sketch_macros.sql (within 2.9% of exact), and money
-- has one headline, `cost_usd_best` (invoice-true where reconciled billing covers the call, else the estimate at
-- list or price-book price), with `input_cost_usd_best` / `output_cost_usd_best` its prefill / decode sides; the
-- shares and dominance of money are of the headline. `cost_usd`, `input_cost_usd`, `output_cost_usd` stay the
-- estimate, `cost_usd_invoice` the invoice-true part.

-- the calls started in [since, until) with their invoice-true costs (both read the period's row groups only)
CREATE OR REPLACE MACRO workload_calls(since, until, unstarted) AS TABLE
SELECT r.*, i.input_cost_usd_invoice, i.output_cost_usd_invoice, i.cost_usd_invoice
FROM requests_in(since, until, unstarted) r
LEFT JOIN invoice_shares_in(since, until, unstarted) i USING (call_id);

-- workload_day_parts: per (workload, UTC day of the start, provider/model) the counts and sums workload_stats adds
-- up. Grain: workload, day, model (NULL day: the calls without a start).
CREATE OR REPLACE MACRO workload_day_parts(since, until, unstarted) AS TABLE
SELECT
  workload, CAST(started_at AS DATE) AS day, provider || '/' || model AS model,
  count(*) AS calls,
  count(*) FILTER (WHERE status = 'error') AS error_calls,
  min(started_at) AS first_call_at,
  max(started_at) AS last_call_at,
  sum(uncached_input_tokens) AS uncached_input_tokens,
  sum(cache_read_tokens) AS cache_read_tokens,
  sum(cache_write_tokens) AS cache_write_tokens,
  sum(output_tokens) AS output_tokens,
  sum(reasoning_tokens) AS reasoning_tokens,
  -- time in the prefill phase is the time to the first token (queueing included, as the caller sees it)
  -- time sums in fixed point (1e-12 s), so they do not depend on the order parallel threads add them in
  sum(coalesce(ttft_s, prefill_s)::DECIMAL(38, 12)) FILTER (WHERE decode_s IS NOT NULL) AS prefill_time_s,
  sum(decode_s::DECIMAL(38, 12)) FILTER (WHERE coalesce(ttft_s, prefill_s) IS NOT NULL) AS decode_time_s,
  sum(queue_s::DECIMAL(38, 12)) FILTER (WHERE ttft_s IS NOT NULL) AS queue_s,
  sum(ttft_s::DECIMAL(38, 12)) FILTER (WHERE queue_s IS NOT NULL) AS queued_ttft_s,
  count(*) FILTER (WHERE timing_source IN ('measured', 'events')) AS measured_calls,
  count(*) FILTER (WHERE timing_source = 'estimated') AS estimated_calls,
  sum(input_cost_usd) AS input_cost_usd,
  sum(cache_write_cost_usd) AS cache_write_cost_usd,
  sum(output_cost_usd) AS output_cost_usd,
  sum(cost_usd) AS cost_usd,
  count(cost_usd_invoice) AS invoice_calls,
  sum(cost_usd_invoice) AS cost_usd_invoice,
  sum(CASE WHEN cost_usd_invoice IS NOT NULL THEN input_cost_usd_invoice ELSE input_cost_usd END) AS input_cost_usd_best,
  sum(CASE WHEN cost_usd_invoice IS NOT NULL THEN output_cost_usd_invoice ELSE output_cost_usd END) AS output_cost_usd_best,
  sum(coalesce(cost_usd_invoice, cost_usd)) AS cost_usd_best,
  count(*) FILTER (WHERE NOT priced) AS unpriced_calls
FROM workload_calls(since, until, unstarted)
GROUP BY ALL;

-- workload_day_hist: per (workload, day) the histogram of each metric, in the rollups' buckets (sketch_macros.sql).
-- Grain: workload, day, metric, bucket.
CREATE OR REPLACE MACRO workload_day_hist(since, until, unstarted) AS TABLE
WITH calls AS (
  SELECT workload, CAST(started_at AS DATE) AS day, ttft_s, itl_s, e2e_s, input_tokens, output_tokens
  FROM requests_in(since, until, unstarted)
)
SELECT workload, day, metric, bucket, count(*) AS n FROM (
  SELECT workload, day, 'ttft_s' AS metric, pl_hist_bucket(ttft_s) AS bucket FROM calls WHERE ttft_s IS NOT NULL
  UNION ALL SELECT workload, day, 'itl_s', pl_hist_bucket(itl_s) FROM calls WHERE itl_s IS NOT NULL
  UNION ALL SELECT workload, day, 'e2e_s', pl_hist_bucket(e2e_s) FROM calls WHERE e2e_s IS NOT NULL
  UNION ALL SELECT workload, day, 'input_tokens', pl_hist_bucket(input_tokens) FROM calls WHERE input_tokens IS NOT NULL
  UNION ALL SELECT workload, day, 'output_tokens', pl_hist_bucket(output_tokens) FROM calls WHERE output_tokens IS NOT NULL
) GROUP BY ALL;

-- workload_day_concurrency: per (workload, day, concurrency) the histogram of ITL, for the contention ratio (the
-- calls with both). Grain: workload, day, concurrency, bucket.
CREATE OR REPLACE MACRO workload_day_concurrency(since, until, unstarted) AS TABLE
SELECT workload, CAST(started_at AS DATE) AS day, concurrency, pl_hist_bucket(itl_s) AS bucket, count(*) AS n
FROM requests_in(since, until, unstarted)
WHERE itl_s IS NOT NULL AND concurrency IS NOT NULL
GROUP BY ALL;

-- the whole store's parts; a build keeps them as tables and recomputes the days whose calls changed
CREATE OR REPLACE VIEW workload_days AS SELECT * FROM workload_day_parts(NULL, NULL, true);
CREATE OR REPLACE VIEW workload_days_hist AS SELECT * FROM workload_day_hist(NULL, NULL, true);
CREATE OR REPLACE VIEW workload_days_concurrency AS SELECT * FROM workload_day_concurrency(NULL, NULL, true);

CREATE OR REPLACE MACRO workload_stats(since, until) AS TABLE
WITH parts AS (
  -- the whole store's parts as the build keeps them, else the period's
  SELECT * FROM workload_days WHERE since IS NULL AND until IS NULL
  UNION ALL SELECT * FROM workload_day_parts(since, until, false) WHERE since IS NOT NULL OR until IS NOT NULL
),
sketch AS (
  SELECT workload, metric, bucket, sum(n) AS n FROM (
    SELECT * FROM workload_days_hist WHERE since IS NULL AND until IS NULL
    UNION ALL SELECT * FROM workload_day_hist(since, until, false) WHERE since IS NOT NULL OR until IS NOT NULL
  ) GROUP BY ALL
),
sketch_cum AS (
  SELECT *, sum(n) OVER (PARTITION BY workload, metric ORDER BY bucket ROWS UNBOUNDED PRECEDING) AS cum,
         sum(n) OVER (PARTITION BY workload, metric) AS total
  FROM sketch
),
percentiles AS (
  SELECT workload,
    pl_hist_value(min(bucket) FILTER (WHERE metric = 'input_tokens' AND cum >= pl_hist_rank(0.5, total))) AS input_tokens_p50,
    pl_hist_value(min(bucket) FILTER (WHERE metric = 'output_tokens' AND cum >= pl_hist_rank(0.5, total))) AS output_tokens_p50,
    pl_hist_value(min(bucket) FILTER (WHERE metric = 'ttft_s' AND cum >= pl_hist_rank(0.5, total))) AS ttft_p50_s,
    pl_hist_value(min(bucket) FILTER (WHERE metric = 'ttft_s' AND cum >= pl_hist_rank(0.9, total))) AS ttft_p90_s,
    pl_hist_value(min(bucket) FILTER (WHERE metric = 'ttft_s' AND cum >= pl_hist_rank(0.95, total))) AS ttft_p95_s,
    pl_hist_value(min(bucket) FILTER (WHERE metric = 'ttft_s' AND cum >= pl_hist_rank(0.99, total))) AS ttft_p99_s,
    pl_hist_value(min(bucket) FILTER (WHERE metric = 'itl_s' AND cum >= pl_hist_rank(0.5, total))) AS itl_p50_s,
    pl_hist_value(min(bucket) FILTER (WHERE metric = 'itl_s' AND cum >= pl_hist_rank(0.9, total))) AS itl_p90_s,
    pl_hist_value(min(bucket) FILTER (WHERE metric = 'itl_s' AND cum >= pl_hist_rank(0.95, total))) AS itl_p95_s,
    pl_hist_value(min(bucket) FILTER (WHERE metric = 'itl_s' AND cum >= pl_hist_rank(0.99, total))) AS itl_p99_s,
    pl_hist_value(min(bucket) FILTER (WHERE metric = 'e2e_s' AND cum >= pl_hist_rank(0.5, total))) AS e2e_p50_s,
    pl_hist_value(min(bucket) FILTER (WHERE metric = 'e2e_s' AND cum >= pl_hist_rank(0.95, total))) AS e2e_p95_s
  FROM sketch_cum GROUP BY workload
),
itl_by_concurrency AS (
  SELECT workload, concurrency, bucket, sum(n) AS n FROM (
    SELECT * FROM workload_days_concurrency WHERE since IS NULL AND until IS NULL
    UNION ALL SELECT * FROM workload_day_concurrency(since, until, false) WHERE since IS NOT NULL OR until IS NOT NULL
  ) GROUP BY ALL
),
concurrency_cum AS (
  SELECT workload, concurrency,
         sum(n) OVER (PARTITION BY workload ORDER BY concurrency ROWS UNBOUNDED PRECEDING) AS cum,
         sum(n) OVER (PARTITION BY workload) AS total
  FROM (SELECT workload, concurrency, sum(n) AS n FROM itl_by_concurrency GROUP BY ALL)
),
quartiles AS (
  -- the concurrency of the last call of the quietest quarter and of the first call of the busiest (in order of
  -- concurrency, the quarters of ntile(4): the first holds ceil(n / 4) calls, the last floor(n / 4))
  SELECT workload,
         min(concurrency) FILTER (WHERE cum >= ceil(total / 4)) AS low_max,
         min(concurrency) FILTER (WHERE cum >= total - floor(total / 4) + 1) AS high_min
  FROM concurrency_cum
  GROUP BY workload
  HAVING max(total) >= 40 AND max(concurrency) > min(concurrency)
),
sides AS (
  -- the quietest calls (concurrency at most the quietest quarter's highest) and the busiest (at least the
  -- busiest quarter's lowest); calls tied on a boundary concurrency are all on that side
  SELECT i.workload, 'low' AS side, i.concurrency, i.bucket, i.n
  FROM itl_by_concurrency i JOIN quartiles q USING (workload) WHERE i.concurrency <= q.low_max
  UNION ALL
  SELECT i.workload, 'high', i.concurrency, i.bucket, i.n
  FROM itl_by_concurrency i JOIN quartiles q USING (workload) WHERE i.concurrency >= q.high_min
),
side_itl AS (
  -- each side's median ITL from its histogram (the sketch every percentile uses)
  SELECT workload, side, pl_hist_value(min(bucket) FILTER (WHERE cum >= pl_hist_rank(0.5, total))) AS itl_p50_s
  FROM (SELECT workload, side, bucket,
               sum(n) OVER (PARTITION BY workload, side ORDER BY bucket ROWS UNBOUNDED PRECEDING) AS cum,
               sum(n) OVER (PARTITION BY workload, side) AS total
        FROM (SELECT workload, side, bucket, sum(n) AS n FROM sides GROUP BY ALL))
  GROUP BY ALL
),
side_concurrency AS (
  -- each side's median concurrency, exact: the middle value, or the mean of the two middle values
  SELECT workload, side,
         (min(concurrency) FILTER (WHERE cum > floor((total - 1) / 2))
          + min(concurrency) FILTER (WHERE cum > ceil((total - 1) / 2))) / 2 AS concurrency_p50
  FROM (SELECT workload, side, concurrency,
               sum(n) OVER (PARTITION BY workload, side ORDER BY concurrency ROWS UNBOUNDED PRECEDING) AS cum,
               sum(n) OVER (PARTITION BY workload, side) AS total
        FROM (SELECT workload, side, concurrency, sum(n) AS n FROM sides GROUP BY ALL))
  GROUP BY ALL
),
contention AS (
  -- ITL of the calls that ran with the most company vs the least (the busiest vs the quietest quarter)
  SELECT i.workload,
         max(i.itl_p50_s) FILTER (WHERE i.side = 'high') / nullif(max(i.itl_p50_s) FILTER (WHERE i.side = 'low'), 0)
           AS itl_contention_ratio,
         max(c.concurrency_p50) FILTER (WHERE c.side = 'high') AS concurrency_high,
         max(c.concurrency_p50) FILTER (WHERE c.side = 'low') AS concurrency_low
  FROM side_itl i JOIN side_concurrency c USING (workload, side)
  GROUP BY i.workload
),
store_days AS (
  -- the caching lever is computed over the whole store: its dollars per day use the store's days
  SELECT workload, count(DISTINCT day) AS store_days FROM workload_days GROUP BY workload
),
agg AS (
  SELECT
    workload,
    sum(calls)::BIGINT AS calls,
    sum(error_calls)::BIGINT AS error_calls,
    string_agg(DISTINCT model, ', ' ORDER BY model) AS models,
    min(first_call_at) AS first_call_at,
    max(last_call_at) AS last_call_at,
    sum(uncached_input_tokens)::BIGINT AS uncached_input_tokens,
    sum(cache_read_tokens)::BIGINT AS cache_read_tokens,
    sum(cache_write_tokens)::BIGINT AS cache_write_tokens,
    sum(output_tokens)::BIGINT AS output_tokens,
    sum(reasoning_tokens)::BIGINT AS reasoning_tokens,
    sum(prefill_time_s)::DOUBLE AS prefill_time_s,
    sum(decode_time_s)::DOUBLE AS decode_time_s,
    sum(queue_s)::DOUBLE / nullif(sum(queued_ttft_s)::DOUBLE, 0) AS queue_share_of_ttft,
    sum(measured_calls)::BIGINT AS measured_calls,
    sum(estimated_calls)::BIGINT AS estimated_calls,
    sum(input_cost_usd) AS input_cost_usd,
    sum(cache_write_cost_usd) AS cache_write_cost_usd,
    count(DISTINCT day) AS days,
    sum(output_cost_usd) AS output_cost_usd,
    sum(cost_usd) AS cost_usd,
    sum(invoice_calls)::BIGINT AS invoice_calls,
    sum(cost_usd_invoice) AS cost_usd_invoice,
    sum(input_cost_usd_best) AS input_cost_usd_best,
    sum(output_cost_usd_best) AS output_cost_usd_best,
    sum(cost_usd_best) AS cost_usd_best,
    sum(unpriced_calls)::BIGINT AS unpriced_calls
  FROM parts
  GROUP BY workload
),
shares AS (
  SELECT
    a.*,
    a.prefill_time_s / nullif(a.prefill_time_s + a.decode_time_s, 0) AS prefill_time_share,
    a.decode_time_s / nullif(a.prefill_time_s + a.decode_time_s, 0) AS decode_time_share,
    CAST(a.input_cost_usd_best AS DOUBLE) / nullif(CAST(a.input_cost_usd_best + a.output_cost_usd_best AS DOUBLE), 0)
      AS prefill_cost_share,
    CAST(a.output_cost_usd_best AS DOUBLE) / nullif(CAST(a.input_cost_usd_best + a.output_cost_usd_best AS DOUBLE), 0)
      AS decode_cost_share,
    pc.* EXCLUDE (workload),
    k.itl_contention_ratio, k.concurrency_high, k.concurrency_low,
    cw.reuse_share, cw.achieved_share, cw.usd_saved AS cache_usd_saved, cw.ttft_saved_p50_s AS cache_ttft_saved_p50_s,
    cw.lifetime_s AS cache_lifetime_s,
    sd.store_days,
    s.*
  FROM agg a
  LEFT JOIN percentiles pc USING (workload)
  LEFT JOIN store_days sd USING (workload)
  LEFT JOIN contention k USING (workload)
  LEFT JOIN caching_by_workload cw USING (workload)
  CROSS JOIN build_settings s
),
classified AS (
  -- the rules of workload_rules.sql, over each workload's row
  SELECT
    *,
    pl_dominant_phase(prefill_time_share) AS dominant_latency_phase,
    pl_dominant_phase(prefill_cost_share) AS dominant_cost_phase,
    pl_shape_class(shares) AS shape_class,
    pl_ttft_cause(shares) AS ttft_cause,
    pl_itl_cause(shares) AS itl_cause,
    pl_cache_write_share(shares) AS cache_write_cost_share,
    pl_per_day(cache_usd_saved, store_days) AS cache_usd_saved_per_day,
    pl_cost_cause(shares) AS cost_cause
  FROM shares
),
final AS (
SELECT
  workload, calls, error_calls, models, first_call_at, last_call_at,
  uncached_input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens,
  input_tokens_p50, output_tokens_p50,
  ttft_p50_s, ttft_p90_s, ttft_p95_s, ttft_p99_s, itl_p50_s, itl_p90_s, itl_p95_s, itl_p99_s, e2e_p50_s, e2e_p95_s,
  prefill_time_s, decode_time_s, prefill_time_share, decode_time_share, queue_share_of_ttft,
  measured_calls, estimated_calls,
  input_cost_usd, output_cost_usd, cost_usd, invoice_calls, cost_usd_invoice,
  input_cost_usd_best, output_cost_usd_best, cost_usd_best, unpriced_calls, prefill_cost_share, decode_cost_share,
  dominant_latency_phase, dominant_cost_phase, shape_class,
  pl_latency_cause(classified) AS cause,
  itl_contention_ratio, reuse_share, achieved_share, cache_usd_saved,
  days, cache_write_cost_usd, cache_write_cost_share, cache_usd_saved_per_day, cost_cause,
  pl_latency_diagnosis(classified) AS diagnosis,
  pl_latency_lever(classified) AS lever,
  pl_cost_diagnosis(classified) AS cost_diagnosis,
  pl_cost_lever(classified) AS cost_lever,
  -- the whole-store figures a filtered scope's diagnosis takes from here (rollup_macros.sql: workload_phases)
  concurrency_high, concurrency_low, cache_ttft_saved_p50_s, cache_lifetime_s, store_days
FROM classified
)
SELECT *, diagnosis AS latency_diagnosis, lever AS latency_lever FROM final
ORDER BY cost_usd_best DESC NULLS LAST, calls DESC, workload;

CREATE OR REPLACE VIEW workloads AS SELECT * FROM workload_stats(NULL, NULL);
