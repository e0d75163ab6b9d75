-- call_attribution: what `phaselens build` derives per call. Grain: one row per raw_calls.call_id.
-- Empty until the first build; `requests` left-joins it so the view works before any build.
CREATE TABLE IF NOT EXISTS call_attribution (
  call_id VARCHAR,
  started_at TIMESTAMP,                  -- the call's start (raw_calls.started_at) when it was built
  workload VARCHAR,                      -- from the workload rules (config), else the default rule
  ttft_s DOUBLE,                         -- measured, or estimated by the latency fit
  prefill_s DOUBLE,
  decode_s DOUBLE,
  itl_s DOUBLE,
  timing_source VARCHAR,                 -- measured | events | estimated | none
  concurrency DOUBLE,                    -- mean number of calls of the same provider+model in flight
  uncached_input_cost_usd DECIMAL(38, 12),
  cache_read_cost_usd DECIMAL(38, 12),
  cache_write_cost_usd DECIMAL(38, 12),
  output_cost_usd DECIMAL(38, 12),
  input_cost_usd DECIMAL(38, 12),        -- prefill side: uncached input + cache read + cache write
  cost_usd DECIMAL(38, 12),              -- input_cost_usd + output_cost_usd
  priced BOOLEAN,                        -- false: no price known; cost columns are NULL, never 0
  price_source VARCHAR                   -- genai-prices | price_book | gpu_hours
);
