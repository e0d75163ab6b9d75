-- latency_fits: the latency model of each provider, model and kind of call, with its quality and its
-- held-out error. Grain: one row per (provider, model, kind, UTC day) of raw_calls: each day is fitted on its
-- own calls, so a call's estimate changes only when its day's calls change. A configured profile gives a row
-- per day its model has calls, and one with day NULL when it has none (what-if targets).
-- Written by pipeline/latency.py (build_timing); read by latency_call_timing.sql. See docs/latency.md.
-- Prediction (s): prefill = max(ttft_floor_s, ttft_intercept_s + ttft_s_per_uncached_token * t
--   + ttft_s_per_uncached_token_sq * t^2 + ttft_s_per_cached_token * cache_read_tokens, 0) with
--   t = uncached_input_tokens + cache_write_tokens; decode = max(decode_intercept_s
--   + decode_s_per_output_token * (output_tokens - 1), 0). NULL coefficients count as 0.
CREATE OR REPLACE TABLE latency_fits (
  provider VARCHAR,
  model VARCHAR,
  kind VARCHAR,                            -- generation | embeddings
  day DATE,                                -- UTC day of the calls fitted (NULL: calls without a start time)
  method VARCHAR,                          -- ttft+decode | e2e_only | profile | none (not fitted; see note)
  n_fit BIGINT,                            -- calls (profile: profile rows) the published coefficients came from
  n_holdout BIGINT,                        -- calls the held-out error was measured on
  ttft_intercept_s DOUBLE,                 -- s
  ttft_s_per_uncached_token DOUBLE,        -- s per prefilled token (uncached input + cache writes)
  ttft_s_per_uncached_token_sq DOUBLE,     -- s per prefilled token squared (profiles only)
  ttft_s_per_cached_token DOUBLE,          -- s per cache-read token (fitted when cache reads vary)
  ttft_floor_s DOUBLE,                     -- s; the least prefill time (profiles only)
  decode_intercept_s DOUBLE,               -- s
  decode_s_per_output_token DOUBLE,        -- s per output token after the first (= ITL)
  ttft_rel_sd DOUBLE,                      -- robust relative spread of TTFT around the fit (0.1 = 10%)
  decode_rel_sd DOUBLE,                    -- the same for decode; the two share out the gap to an observed e2e
  r2_ttft DOUBLE,                          -- in-sample R² of the TTFT model (profile: on the profile's rows)
  r2_decode DOUBLE,                        -- in-sample R² of the decode model
  r2_e2e DOUBLE,                           -- R² of predicted TTFT + decode against the calls' e2e
  holdout_mape_ttft DOUBLE,                -- mean |predicted - actual| / actual TTFT, held-out measured calls
  holdout_mae_ttft_s DOUBLE,               -- s
  holdout_mape_decode DOUBLE,
  holdout_mae_decode_s DOUBLE,             -- s
  holdout_mape_e2e DOUBLE,                 -- predicted TTFT + decode against e2e
  holdout_mape_ttft_given_e2e DOUBLE,      -- the split as estimated calls with a known e2e get it
  holdout_mape_decode_given_e2e DOUBLE,
  profile VARCHAR,                         -- the profile rows used (method profile)
  profile_mean_rel_err_prompt DOUBLE,      -- profile's own rows: predicted vs profiled prompt_time
  profile_max_rel_err_prompt DOUBLE,
  profile_mean_rel_err_token DOUBLE,       -- ... and token_time
  profile_max_rel_err_token DOUBLE,
  n_estimated BIGINT,                      -- calls whose split this fit estimated
  note VARCHAR                             -- caveats, in words
);
