-- workload_stats(since, until): per workload over calls started in [since, until) (NULL = open), the
-- phase split of time and money, which phase dominates, the shape class, a diagnosis with its
-- evidence and the lever, for time (latency_diagnosis/latency_lever; diagnosis/lever are the same) and
-- for money (cost_diagnosis/cost_lever, dollars per day over the days with calls). Grain: one row per workload. Upstream: requests,
-- invoice_costs, build_settings, caching_by_workload. `workloads` is the same over the whole store.
-- The figures every surface shows are computed the way the published rollups compute them, so the dashboard, the
-- CLI and the reports agree: percentiles are the sketch of sketch_macros.sql (within 2.9% of exact), and money
-- has one headline, `cost_usd_best` (invoice-true where reconciled billing covers the call, else the estimate at
-- list or price-book price), with `input_cost_usd_best` / `output_cost_usd_best` its prefill / decode sides; the
-- shares and dominance of money are of the headline. `cost_usd`, `input_cost_usd`, `output_cost_usd` stay the
-- estimate, `cost_usd_invoice` the invoice-true part.
CREATE OR REPLACE MACRO workload_stats(since, until) AS TABLE
WITH calls AS (
  SELECT r.*, i.input_cost_usd_invoice, i.output_cost_usd_invoice, i.cost_usd_invoice
  FROM requests r LEFT JOIN invoice_costs i USING (call_id)
  WHERE (since IS NULL OR r.started_at >= CAST(since AS TIMESTAMP))
    AND (until IS NULL OR r.started_at < CAST(until AS TIMESTAMP))
),
sketch AS (
  -- histogram of each metric per workload: the rollups' buckets (sketch_macros.sql)
  SELECT workload, metric, bucket, count(*) AS n FROM (
    SELECT workload, 'ttft_s' AS metric, pl_hist_bucket(ttft_s) AS bucket FROM calls WHERE ttft_s IS NOT NULL
    UNION ALL SELECT workload, 'itl_s', pl_hist_bucket(itl_s) FROM calls WHERE itl_s IS NOT NULL
    UNION ALL SELECT workload, 'e2e_s', pl_hist_bucket(e2e_s) FROM calls WHERE e2e_s IS NOT NULL
    UNION ALL SELECT workload, 'input_tokens', pl_hist_bucket(input_tokens) FROM calls WHERE input_tokens IS NOT NULL
    UNION ALL SELECT workload, 'output_tokens', pl_hist_bucket(output_tokens) FROM calls WHERE output_tokens IS NOT NULL
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
contention AS (
  -- ITL of the calls that ran with the most company vs the least (top vs bottom concurrency quartile)
  SELECT workload,
         median(itl_s) FILTER (WHERE q = 4) / nullif(median(itl_s) FILTER (WHERE q = 1), 0) AS itl_contention_ratio,
         median(concurrency) FILTER (WHERE q = 4) AS concurrency_high,
         median(concurrency) FILTER (WHERE q = 1) AS concurrency_low
  FROM (SELECT workload, call_id, itl_s, concurrency, ntile(4) OVER (PARTITION BY workload ORDER BY concurrency, call_id) AS q
        FROM calls WHERE itl_s IS NOT NULL AND concurrency IS NOT NULL)
  GROUP BY workload
  HAVING count(*) >= 40 AND max(concurrency) > min(concurrency)
),
store_days AS (
  -- the caching lever is computed over the whole store: its dollars per day use the store's days
  SELECT workload, count(DISTINCT CAST(started_at AS DATE)) AS store_days FROM requests GROUP BY workload
),
agg AS (
  SELECT
    workload,
    count(*) AS calls,
    count(*) FILTER (WHERE status = 'error') AS error_calls,
    string_agg(DISTINCT provider || '/' || model, ', ' ORDER BY provider || '/' || model) AS models,
    min(started_at) AS first_call_at,
    max(started_at) AS last_call_at,
    sum(uncached_input_tokens)::BIGINT AS uncached_input_tokens,
    sum(cache_read_tokens)::BIGINT AS cache_read_tokens,
    sum(cache_write_tokens)::BIGINT AS cache_write_tokens,
    sum(output_tokens)::BIGINT AS output_tokens,
    sum(reasoning_tokens)::BIGINT AS reasoning_tokens,
    -- time in the prefill phase is the time to the first token (queueing included, as the caller sees it)
    -- time sums in fixed point (1e-12 s), so they do not depend on the order parallel threads add them in
    sum(coalesce(ttft_s, prefill_s)::DECIMAL(38, 12)) FILTER (WHERE decode_s IS NOT NULL)::DOUBLE AS prefill_time_s,
    sum(decode_s::DECIMAL(38, 12)) FILTER (WHERE coalesce(ttft_s, prefill_s) IS NOT NULL)::DOUBLE AS decode_time_s,
    sum(queue_s::DECIMAL(38, 12)) FILTER (WHERE ttft_s IS NOT NULL)::DOUBLE
      / nullif(sum(ttft_s::DECIMAL(38, 12)) FILTER (WHERE queue_s IS NOT NULL)::DOUBLE, 0)
      AS queue_share_of_ttft,
    count(*) FILTER (WHERE timing_source IN ('measured', 'events')) AS measured_calls,
    count(*) FILTER (WHERE timing_source = 'estimated') AS estimated_calls,
    sum(input_cost_usd) AS input_cost_usd,
    sum(cache_write_cost_usd) AS cache_write_cost_usd,
    count(DISTINCT CAST(started_at AS DATE)) AS days,
    sum(output_cost_usd) AS output_cost_usd,
    sum(cost_usd) AS cost_usd,
    count(cost_usd_invoice) AS invoice_calls,
    sum(cost_usd_invoice) AS cost_usd_invoice,
    sum(CASE WHEN cost_usd_invoice IS NOT NULL THEN input_cost_usd_invoice ELSE input_cost_usd END) AS input_cost_usd_best,
    sum(CASE WHEN cost_usd_invoice IS NOT NULL THEN output_cost_usd_invoice ELSE output_cost_usd END) AS output_cost_usd_best,
    sum(coalesce(cost_usd_invoice, cost_usd)) AS cost_usd_best,
    count(*) FILTER (WHERE NOT priced) AS unpriced_calls
  FROM calls
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
  SELECT
    *,
    CASE WHEN prefill_time_share IS NULL THEN NULL
         WHEN prefill_time_share >= 0.5 THEN 'prefill' ELSE 'decode' END AS dominant_latency_phase,
    CASE WHEN prefill_cost_share IS NULL THEN NULL
         WHEN prefill_cost_share >= 0.5 THEN 'prefill' ELSE 'decode' END AS dominant_cost_phase,
    CASE
      WHEN input_tokens_p50 IS NULL THEN NULL
      WHEN input_tokens_p50 >= large_context_min_tokens AND output_tokens_p50 >= long_output_min_tokens
        THEN 'large_context_long_output'
      WHEN input_tokens_p50 >= large_context_min_tokens THEN 'large_context_short_answer'
      WHEN output_tokens_p50 >= long_output_min_tokens THEN 'short_prompt_long_output'
      WHEN input_tokens_p50 < short_prompt_max_tokens AND output_tokens_p50 < short_output_max_tokens
        THEN 'short_prompt_short_output'
      ELSE 'medium_prompt_focused_edit'
    END AS shape_class,
    CASE
      WHEN coalesce(decode_time_s, 0) = 0 AND coalesce(output_tokens_p50, 0) = 0 THEN 'no_decode'
      WHEN queue_share_of_ttft >= queue_share_min THEN 'queueing'
      WHEN reuse_share >= cold_cache_reuse_min AND coalesce(achieved_share, 0) < reuse_share / 2 THEN 'cold_cache'
      WHEN input_tokens_p50 >= large_context_min_tokens THEN 'long_context'
      ELSE 'prompt_processing'
    END AS ttft_cause,
    CASE
      WHEN itl_contention_ratio >= contention_ratio_min THEN 'batch_contention'
      WHEN itl_p50_s >= slow_itl_s THEN 'slow_model'
      WHEN output_tokens_p50 >= long_output_min_tokens THEN 'long_outputs'
      ELSE 'output_length'
    END AS itl_cause,
    CAST(cache_write_cost_usd AS DOUBLE) / nullif(CAST(input_cost_usd AS DOUBLE), 0) AS cache_write_cost_share,
    CAST(input_cost_usd_best AS DOUBLE) / nullif(days, 0) AS input_usd_per_day,
    CAST(output_cost_usd_best AS DOUBLE) / nullif(days, 0) AS output_usd_per_day,
    CAST(cache_write_cost_usd AS DOUBLE) / nullif(days, 0) AS cache_write_usd_per_day,
    CAST(cache_usd_saved AS DOUBLE) / nullif(store_days, 0) AS cache_usd_saved_per_day,
    CASE
      WHEN prefill_cost_share IS NULL THEN NULL
      WHEN prefill_cost_share >= 0.5 THEN
        CASE
          WHEN CAST(cache_write_cost_usd AS DOUBLE) / nullif(CAST(input_cost_usd AS DOUBLE), 0) >= cache_write_share_min
            THEN 'cache_writes'
          WHEN cache_usd_saved > 0 AND reuse_share >= cold_cache_reuse_min AND coalesce(achieved_share, 0) < reuse_share
            THEN 'uncached_prefix'
          WHEN input_tokens_p50 >= large_context_min_tokens THEN 'long_context'
          ELSE 'input_spend'
        END
      ELSE 'output_heavy'
    END AS cost_cause
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
  CASE WHEN dominant_latency_phase = 'prefill' THEN ttft_cause WHEN dominant_latency_phase = 'decode' THEN itl_cause END
    AS cause,
  itl_contention_ratio, reuse_share, achieved_share, cache_usd_saved,
  days, cache_write_cost_usd, cache_write_cost_share, cache_usd_saved_per_day, cost_cause,
  CASE
    WHEN dominant_latency_phase IS NULL THEN 'No call of this workload has timing to split.'
    WHEN ttft_cause = 'no_decode' THEN
      printf('Prefill is all there is: embedding calls have no decode phase (e2e p50 %.3f s for a median %,d input tokens).',
             e2e_p50_s, coalesce(input_tokens_p50, 0)::BIGINT)
    WHEN dominant_latency_phase = 'prefill' THEN
      printf('Prefill dominates: %.0f%% of call time is before the first token (TTFT p50 %.3f s, p95 %.3f s). ',
             100 * prefill_time_share, ttft_p50_s, ttft_p95_s) ||
      CASE ttft_cause
        WHEN 'queueing' THEN printf('Cause: queueing; %.0f%% of TTFT is spent waiting in the server queue.', 100 * queue_share_of_ttft)
        WHEN 'cold_cache' THEN printf('Cause: cold cache; %.0f%% of input tokens repeat a prefix seen within %s s, but only %.0f%% were read from cache.',
                                      100 * reuse_share, coalesce(CAST(cache_lifetime_s AS VARCHAR), 'any time'), 100 * coalesce(achieved_share, 0))
        WHEN 'long_context' THEN printf('Cause: long context; the median call sends %,d input tokens.', input_tokens_p50::BIGINT)
        ELSE printf('Cause: prompt processing of a median %,d input tokens before a median %,d output tokens.',
                    input_tokens_p50::BIGINT, output_tokens_p50::BIGINT)
      END
    ELSE
      printf('Decode dominates: %.0f%% of call time is spent generating (ITL p50 %.1f ms/token, median %,d output tokens). ',
             100 * decode_time_share, 1000 * itl_p50_s, output_tokens_p50::BIGINT) ||
      CASE itl_cause
        WHEN 'batch_contention' THEN printf('Cause: batch contention; ITL is %.1fx higher with ~%.0f calls in flight than with ~%.0f.',
                                            itl_contention_ratio, concurrency_high, concurrency_low)
        WHEN 'slow_model' THEN printf('Cause: a slow model; %.1f ms per output token at the median.', 1000 * itl_p50_s)
        WHEN 'long_outputs' THEN printf('Cause: long outputs; %,d tokens at the median, each a sequential decode step.', output_tokens_p50::BIGINT)
        ELSE printf('Cause: output length; %,d tokens at the median.', output_tokens_p50::BIGINT)
      END
  END AS diagnosis,
  CASE
    WHEN dominant_latency_phase IS NULL THEN 'Load traces with timing (TTFT or duration) to see which phase to fix.'
    WHEN dominant_latency_phase = 'prefill' THEN
      CASE ttft_cause
        WHEN 'no_decode' THEN 'Send fewer input tokens: embed only changed chunks and batch inputs; time and cost scale with input tokens.'
        WHEN 'queueing' THEN 'Add prefill capacity (more replicas, or separate prefill from decode) so requests stop waiting in the queue.'
        WHEN 'cold_cache' THEN printf('Turn on prompt caching for the repeated prefix: it would save $%.2f and about %.0f ms of TTFT per call.',
                                      coalesce(cache_usd_saved, 0), 1000 * coalesce(cache_ttft_saved_p50_s, 0))
        WHEN 'long_context' THEN 'Send less context (retrieve fewer files, summarise history) or cache the stable prefix: prefill time grows with every input token.'
        ELSE 'Keep prompts short and the model close: TTFT is the experience here, so trim the prompt and avoid queueing.'
      END
    ELSE
      CASE itl_cause
        WHEN 'batch_contention' THEN 'Reduce batch contention: add decode capacity or cap the batch size at peak, since ITL rises with concurrent calls.'
        WHEN 'slow_model' THEN 'Route generation to a faster model or serving tier: every output token pays the per-token decode time.'
        WHEN 'long_outputs' THEN 'Shorten outputs (tighter max_tokens, terser formats, fewer reasoning tokens): decode time and output cost scale with every token.'
        ELSE 'Cap output length where the answer allows it: decode time scales with output tokens.'
      END
  END AS lever,
  CASE
    WHEN dominant_cost_phase IS NULL THEN 'No call of this workload is priced, so money cannot be split.'
    WHEN dominant_cost_phase = 'prefill' THEN
      printf('Input dominates money: %.0f%% of spend is prefill ($%,.2f of $%,.2f; $%,.2f a day over %d day%s). ',
             100 * prefill_cost_share, input_cost_usd_best, input_cost_usd_best + output_cost_usd_best, input_usd_per_day,
             days, CASE WHEN days = 1 THEN '' ELSE 's' END) ||
      CASE cost_cause
        WHEN 'cache_writes' THEN
          printf('Cause: cache writes; they cost $%,.2f (%.0f%% of input spend), and %,d tokens were read from cache against %,d written (%.1f reads per write).',
                 cache_write_cost_usd, 100 * cache_write_cost_share, coalesce(cache_read_tokens, 0), coalesce(cache_write_tokens, 0),
                 coalesce(cache_read_tokens, 0) / nullif(cache_write_tokens, 0))
        WHEN 'uncached_prefix' THEN
          printf('Cause: repeated uncached prefix; %.0f%% of input tokens repeat a prefix seen within %s s, %.0f%% were read from cache.',
                 100 * reuse_share, coalesce(CAST(cache_lifetime_s AS VARCHAR), 'any time'), 100 * coalesce(achieved_share, 0))
        WHEN 'long_context' THEN printf('Cause: long context; the median call sends %,d input tokens.', input_tokens_p50::BIGINT)
        ELSE printf('Cause: input volume; a median %,d input tokens against %,d output tokens.',
                    coalesce(input_tokens_p50, 0)::BIGINT, coalesce(output_tokens_p50, 0)::BIGINT)
      END
    ELSE
      printf('Output dominates money: %.0f%% of spend is decode ($%,.2f of $%,.2f; $%,.2f a day over %d day%s), median %,d output tokens.',
             100 * decode_cost_share, output_cost_usd_best, input_cost_usd_best + output_cost_usd_best, output_usd_per_day,
             days, CASE WHEN days = 1 THEN '' ELSE 's' END, coalesce(output_tokens_p50, 0)::BIGINT)
  END AS cost_diagnosis,
  CASE
    WHEN dominant_cost_phase IS NULL THEN 'Add prices for its models (phaselens prices) to see which phase to fix for money.'
    WHEN cost_cause = 'cache_writes' THEN
      printf('Write the cache less often: keep the cached prefix stable (no timestamps or reordered tools before the cache mark) and lengthen the cache lifetime, so a prefix is written once and read many times; cache writes cost $%,.2f a day%s.',
             cache_write_usd_per_day,
             CASE WHEN coalesce(cache_read_tokens, 0) < cache_write_tokens THEN ' and are mostly never read back' ELSE '' END)
    WHEN cost_cause = 'uncached_prefix' THEN
      printf('Turn on or extend prompt caching for the repeated prefix: the caching lever saves $%,.2f a day (whole store, %s s cache lifetime).',
             cache_usd_saved_per_day, coalesce(CAST(cache_lifetime_s AS VARCHAR), 'unlimited'))
    WHEN cost_cause = 'long_context' THEN
      printf('Trim the context or retrieve only what the call needs: halving the input would save about $%,.2f a day.',
             input_usd_per_day / 2)
    WHEN cost_cause = 'input_spend' THEN
      printf('Shorten prompts (drop unused instructions and examples): every 10%% fewer input tokens saves about $%,.2f a day.',
             input_usd_per_day / 10)
    ELSE
      printf('Cap outputs (tighter max_tokens, terser formats) or route to a model with a cheaper output price: every 10%% fewer output tokens saves about $%,.2f a day.',
             output_usd_per_day / 10)
  END AS cost_lever
FROM classified
)
SELECT *, diagnosis AS latency_diagnosis, lever AS latency_lever FROM final
ORDER BY cost_usd_best DESC NULLS LAST, calls DESC, workload;

CREATE OR REPLACE VIEW workloads AS SELECT * FROM workload_stats(NULL, NULL);
