-- latency_calls (temp view): what the latency stage reads of each call. Grain: one row per raw_calls.call_id.
-- Upstream: raw_calls. Read by latency_sample.sql (the fit) and latency_call_timing.sql (the estimate).
-- prefill_tokens = tokens the model had to compute (uncached input + cache writes); cached_tokens = cache reads;
-- decode_tokens = output tokens after the first (the first token ends prefill, as in ITL = decode / (n - 1)).
CREATE OR REPLACE TEMP VIEW latency_calls AS
SELECT
  call_id,
  started_at,
  provider,
  model,
  CASE WHEN operation = 'embeddings' THEN 'embeddings' ELSE 'generation' END AS kind,
  coalesce(status, 'ok') AS status,
  coalesce(timing_source, 'none') AS timing_source,
  coalesce(timing_source IN ('measured', 'events'), false) AS measured,
  output_tokens,
  CASE WHEN uncached_input_tokens IS NOT NULL OR cache_write_tokens IS NOT NULL OR cache_read_tokens IS NOT NULL
       THEN coalesce(uncached_input_tokens, 0) + coalesce(cache_write_tokens, 0) END AS prefill_tokens,
  CASE WHEN uncached_input_tokens IS NOT NULL OR cache_write_tokens IS NOT NULL OR cache_read_tokens IS NOT NULL
       THEN coalesce(cache_read_tokens, 0) END AS cached_tokens,
  CASE WHEN operation <> 'embeddings' AND output_tokens > 1 THEN output_tokens - 1 ELSE 0 END AS decode_tokens,
  e2e_s,
  ttft_s,
  prefill_s,
  decode_s,
  itl_s,
  coalesce(ttft_s, prefill_s) AS ttft_obs_s,                              -- client-view prefill phase
  coalesce(decode_s, e2e_s - coalesce(ttft_s, prefill_s)) AS decode_obs_s,
  CAST(started_at AS DATE) AS day,                                        -- UTC day: each day has its own fit
  CAST('0x' || md5(call_id)[1:8] AS BIGINT) AS call_hash                -- 32 bits of md5(call_id): sample and holdout order
FROM raw_calls;
