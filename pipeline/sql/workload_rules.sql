-- The diagnosis rules, written once: which phase dominates, the shape class, the cause of the dominant phase of
-- time and of money, and the diagnosis and lever texts with their numbers. Two places call them over the same
-- columns: `workload_stats` (workloads.sql, over the store's calls) and `workload_phases` (rollup_macros.sql,
-- over the published rollups under the dashboard's filters), so a filtered page and `phaselens workloads` give
-- the same diagnosis for the same calls.
-- `w` is a row (the macro is called with a relation's name, e.g. `pl_ttft_cause(shares)`) holding per workload:
-- the sums and percentiles of workload_stats (calls' tokens, phase seconds and shares, costs, days), the
-- contention and caching figures (itl_contention_ratio, concurrency_high/low, reuse_share, achieved_share,
-- cache_usd_saved, cache_ttft_saved_p50_s, cache_lifetime_s, store_days) and the build_settings thresholds.
-- The causes and texts also read the columns the earlier rules add (dominant_*_phase, ttft_cause, itl_cause,
-- cost_cause).

-- A phase share of time or money (0-1, the prefill side) names the phase that dominates; a tie goes to prefill;
-- no share (no timing, no price) names none.
CREATE OR REPLACE MACRO pl_dominant_phase(prefill_share) AS
  CASE WHEN prefill_share IS NULL THEN NULL WHEN prefill_share >= 0.5 THEN 'prefill' ELSE 'decode' END;

-- Money in a text is written with pl_usd_text(x) (text_macros.sql): to the cent, half up.

-- Dollars a day over the days with calls.
CREATE OR REPLACE MACRO pl_per_day(usd, days) AS CAST(usd AS DOUBLE) / nullif(days, 0);

-- The share of input spend on cache writes (estimated cost).
CREATE OR REPLACE MACRO pl_cache_write_share(w) AS
  CAST(w.cache_write_cost_usd AS DOUBLE) / nullif(CAST(w.input_cost_usd AS DOUBLE), 0);

CREATE OR REPLACE MACRO pl_shape_class(w) AS
  CASE
    WHEN w.input_tokens_p50 IS NULL THEN NULL
    WHEN w.input_tokens_p50 >= w.large_context_min_tokens AND w.output_tokens_p50 >= w.long_output_min_tokens
      THEN 'large_context_long_output'
    WHEN w.input_tokens_p50 >= w.large_context_min_tokens THEN 'large_context_short_answer'
    WHEN w.output_tokens_p50 >= w.long_output_min_tokens THEN 'short_prompt_long_output'
    WHEN w.input_tokens_p50 < w.short_prompt_max_tokens AND w.output_tokens_p50 < w.short_output_max_tokens
      THEN 'short_prompt_short_output'
    ELSE 'medium_prompt_focused_edit'
  END;

CREATE OR REPLACE MACRO pl_ttft_cause(w) AS
  CASE
    WHEN coalesce(w.decode_time_s, 0) = 0 AND coalesce(w.output_tokens_p50, 0) = 0 THEN 'no_decode'
    WHEN w.queue_share_of_ttft >= w.queue_share_min THEN 'queueing'
    WHEN w.reuse_share >= w.cold_cache_reuse_min AND coalesce(w.achieved_share, 0) < w.reuse_share / 2 THEN 'cold_cache'
    WHEN w.input_tokens_p50 >= w.large_context_min_tokens THEN 'long_context'
    ELSE 'prompt_processing'
  END;

CREATE OR REPLACE MACRO pl_itl_cause(w) AS
  CASE
    WHEN w.itl_contention_ratio >= w.contention_ratio_min THEN 'batch_contention'
    WHEN w.itl_p50_s >= w.slow_itl_s THEN 'slow_model'
    WHEN w.output_tokens_p50 >= w.long_output_min_tokens THEN 'long_outputs'
    ELSE 'output_length'
  END;

CREATE OR REPLACE MACRO pl_cost_cause(w) AS
  CASE
    WHEN w.prefill_cost_share IS NULL THEN NULL
    WHEN w.prefill_cost_share >= 0.5 THEN
      CASE
        WHEN pl_cache_write_share(w) >= w.cache_write_share_min THEN 'cache_writes'
        WHEN w.cache_usd_saved > 0 AND w.reuse_share >= w.cold_cache_reuse_min AND coalesce(w.achieved_share, 0) < w.reuse_share
          THEN 'uncached_prefix'
        WHEN w.input_tokens_p50 >= w.large_context_min_tokens THEN 'long_context'
        ELSE 'input_spend'
      END
    ELSE 'output_heavy'
  END;

-- The cause of the phase that dominates time (w: with dominant_latency_phase, ttft_cause, itl_cause).
CREATE OR REPLACE MACRO pl_latency_cause(w) AS
  CASE WHEN w.dominant_latency_phase = 'prefill' THEN w.ttft_cause WHEN w.dominant_latency_phase = 'decode' THEN w.itl_cause END;

CREATE OR REPLACE MACRO pl_latency_diagnosis(w) AS
  CASE
    WHEN w.dominant_latency_phase IS NULL THEN 'No call of this workload has timing to split.'
    WHEN w.ttft_cause = 'no_decode' THEN
      printf('Prefill is all there is: embedding calls have no decode phase (e2e p50 %,.3f s for a median %,d input tokens).',
             w.e2e_p50_s, coalesce(w.input_tokens_p50, 0)::BIGINT)
    WHEN w.dominant_latency_phase = 'prefill' THEN
      printf('Prefill dominates: %.0f%% of call time is before the first token (TTFT p50 %,.3f s, p95 %,.3f s). ',
             100 * w.prefill_time_share, w.ttft_p50_s, w.ttft_p95_s) ||
      CASE w.ttft_cause
        WHEN 'queueing' THEN printf('Cause: queueing; %.0f%% of TTFT is spent waiting in the server queue.', 100 * w.queue_share_of_ttft)
        WHEN 'cold_cache' THEN printf('Cause: cold cache; %.0f%% of input tokens repeat a prefix seen within %s s, but only %.0f%% were read from cache.',
                                      100 * w.reuse_share, coalesce(CAST(w.cache_lifetime_s AS VARCHAR), 'any time'), 100 * coalesce(w.achieved_share, 0))
        WHEN 'long_context' THEN printf('Cause: long context; the median call sends %,d input tokens.', w.input_tokens_p50::BIGINT)
        ELSE printf('Cause: prompt processing of a median %,d input tokens before a median %,d output tokens.',
                    w.input_tokens_p50::BIGINT, w.output_tokens_p50::BIGINT)
      END
    ELSE
      printf('Decode dominates: %.0f%% of call time is spent generating (ITL p50 %.1f ms/token, median %,d output tokens). ',
             100 * w.decode_time_share, 1000 * w.itl_p50_s, w.output_tokens_p50::BIGINT) ||
      CASE w.itl_cause
        WHEN 'batch_contention' THEN printf('Cause: batch contention; ITL is %.1fx higher with ~%.0f calls in flight than with ~%.0f.',
                                            w.itl_contention_ratio, w.concurrency_high, w.concurrency_low)
        WHEN 'slow_model' THEN printf('Cause: a slow model; %.1f ms per output token at the median.', 1000 * w.itl_p50_s)
        WHEN 'long_outputs' THEN printf('Cause: long outputs; %,d tokens at the median, each a sequential decode step.', w.output_tokens_p50::BIGINT)
        ELSE printf('Cause: output length; %,d tokens at the median.', w.output_tokens_p50::BIGINT)
      END
  END;

CREATE OR REPLACE MACRO pl_latency_lever(w) AS
  CASE
    WHEN w.dominant_latency_phase IS NULL THEN 'Load traces with timing (TTFT or duration) to see which phase to fix.'
    WHEN w.dominant_latency_phase = 'prefill' THEN
      CASE w.ttft_cause
        WHEN 'no_decode' THEN 'Send fewer input tokens: embed only changed chunks and batch inputs; time and cost scale with input tokens.'
        WHEN 'queueing' THEN 'Add prefill capacity (more replicas, or separate prefill from decode) so requests stop waiting in the queue.'
        WHEN 'cold_cache' THEN printf('Turn on prompt caching for the repeated prefix: it would save %s and about %.0f ms of TTFT per call.',
                                      pl_usd_text(coalesce(w.cache_usd_saved, 0)), 1000 * coalesce(w.cache_ttft_saved_p50_s, 0))
        WHEN 'long_context' THEN 'Send less context (retrieve fewer files, summarise history) or cache the stable prefix: prefill time grows with every input token.'
        ELSE 'Keep prompts short and the model close: TTFT is the experience here, so trim the prompt and avoid queueing.'
      END
    ELSE
      CASE w.itl_cause
        WHEN 'batch_contention' THEN 'Reduce batch contention: add decode capacity or cap the batch size at peak, since ITL rises with concurrent calls.'
        WHEN 'slow_model' THEN 'Route generation to a faster model or serving tier: every output token pays the per-token decode time.'
        WHEN 'long_outputs' THEN 'Shorten outputs (tighter max_tokens, terser formats, fewer reasoning tokens): decode time and output cost scale with every token.'
        ELSE 'Cap output length where the answer allows it: decode time scales with output tokens.'
      END
  END;

CREATE OR REPLACE MACRO pl_cost_diagnosis(w) AS
  CASE
    WHEN w.dominant_cost_phase IS NULL THEN 'No call of this workload is priced, so money cannot be split.'
    WHEN w.dominant_cost_phase = 'prefill' THEN
      printf('Input dominates money: %.0f%% of spend is prefill (%s of %s; %s a day over %d day%s). ',
             100 * w.prefill_cost_share, pl_usd_text(w.input_cost_usd_best), pl_usd_text(w.input_cost_usd_best + w.output_cost_usd_best),
             pl_usd_text(pl_per_day(w.input_cost_usd_best, w.days)), w.days, CASE WHEN w.days = 1 THEN '' ELSE 's' END) ||
      CASE w.cost_cause
        WHEN 'cache_writes' THEN
          printf('Cause: cache writes; they cost %s (%.0f%% of input spend), and %,d tokens were read from cache against %,d written (%.1f reads per write).',
                 pl_usd_text(w.cache_write_cost_usd), 100 * pl_cache_write_share(w), coalesce(w.cache_read_tokens, 0), coalesce(w.cache_write_tokens, 0),
                 coalesce(w.cache_read_tokens, 0) / nullif(w.cache_write_tokens, 0))
        WHEN 'uncached_prefix' THEN
          printf('Cause: repeated uncached prefix; %.0f%% of input tokens repeat a prefix seen within %s s, %.0f%% were read from cache.',
                 100 * w.reuse_share, coalesce(CAST(w.cache_lifetime_s AS VARCHAR), 'any time'), 100 * coalesce(w.achieved_share, 0))
        WHEN 'long_context' THEN printf('Cause: long context; the median call sends %,d input tokens.', w.input_tokens_p50::BIGINT)
        ELSE printf('Cause: input volume; a median %,d input tokens against %,d output tokens.',
                    coalesce(w.input_tokens_p50, 0)::BIGINT, coalesce(w.output_tokens_p50, 0)::BIGINT)
      END
    ELSE
      printf('Output dominates money: %.0f%% of spend is decode (%s of %s; %s a day over %d day%s), median %,d output tokens.',
             100 * w.decode_cost_share, pl_usd_text(w.output_cost_usd_best), pl_usd_text(w.input_cost_usd_best + w.output_cost_usd_best),
             pl_usd_text(pl_per_day(w.output_cost_usd_best, w.days)), w.days, CASE WHEN w.days = 1 THEN '' ELSE 's' END,
             coalesce(w.output_tokens_p50, 0)::BIGINT)
  END;

-- What the money lever for the workload's cost cause would save, in dollars a day (the figure its text cites).
CREATE OR REPLACE MACRO pl_cost_lever_saving(w) AS
  CASE
    WHEN w.cost_cause = 'cache_writes' THEN pl_per_day(w.cache_write_cost_usd, w.days)
    WHEN w.cost_cause = 'uncached_prefix' THEN pl_per_day(w.cache_usd_saved, w.store_days)
    WHEN w.cost_cause = 'long_context' THEN pl_per_day(w.input_cost_usd_best, w.days) / 2
    WHEN w.cost_cause = 'input_spend' THEN pl_per_day(w.input_cost_usd_best, w.days) / 10
    ELSE pl_per_day(w.output_cost_usd_best, w.days) / 10
  END;

-- A lever whose saving rounds to $0.00 a day is not worth a sentence of advice: the text says the spend is
-- negligible and names the lever it would otherwise be.
CREATE OR REPLACE MACRO pl_cost_lever(w) AS
  CASE
    WHEN w.dominant_cost_phase IS NULL THEN 'Add prices for its models (phaselens prices) to see which phase to fix for money.'
    WHEN pl_cents(pl_cost_lever_saving(w)) < 0.01 THEN
      printf('No money lever is worth pulling: the workload spends %s a day in all, and %s would save under $0.01 a day; act on its latency lever instead.',
             pl_usd_text(pl_per_day(w.input_cost_usd_best + w.output_cost_usd_best, w.days)),
             CASE w.cost_cause
               WHEN 'cache_writes' THEN 'a stable cached prefix'
               WHEN 'uncached_prefix' THEN 'prompt caching'
               WHEN 'long_context' THEN 'halving the context'
               WHEN 'input_spend' THEN '10% fewer input tokens'
               ELSE '10% fewer output tokens'
             END)
    WHEN w.cost_cause = 'cache_writes' THEN
      printf('Write the cache less often: keep the cached prefix stable (no timestamps or reordered tools before the cache mark) and lengthen the cache lifetime, so a prefix is written once and read many times; cache writes cost %s a day%s.',
             pl_usd_text(pl_per_day(w.cache_write_cost_usd, w.days)),
             CASE WHEN coalesce(w.cache_read_tokens, 0) < w.cache_write_tokens THEN ' and are mostly never read back' ELSE '' END)
    WHEN w.cost_cause = 'uncached_prefix' THEN
      printf('Turn on or extend prompt caching for the repeated prefix: the caching lever saves %s a day (whole store, %s s cache lifetime).',
             pl_usd_text(pl_per_day(w.cache_usd_saved, w.store_days)), coalesce(CAST(w.cache_lifetime_s AS VARCHAR), 'unlimited'))
    WHEN w.cost_cause = 'long_context' THEN
      printf('Trim the context or retrieve only what the call needs: halving the input would save about %s a day.',
             pl_usd_text(pl_per_day(w.input_cost_usd_best, w.days) / 2))
    WHEN w.cost_cause = 'input_spend' THEN
      printf('Shorten prompts (drop unused instructions and examples): every 10%% fewer input tokens saves about %s a day.',
             pl_usd_text(pl_per_day(w.input_cost_usd_best, w.days) / 10))
    ELSE
      printf('Cap outputs (tighter max_tokens, terser formats) or route to a model with a cheaper output price: every 10%% fewer output tokens saves about %s a day.',
             pl_usd_text(pl_per_day(w.output_cost_usd_best, w.days) / 10))
  END;
