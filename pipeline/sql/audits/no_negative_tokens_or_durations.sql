-- audit no_negative_tokens_or_durations: no stored call has a token count below zero, and no call has a
-- negative duration, measured (raw_calls) or derived by the build (call_attribution: estimated timings too).
-- Returns one row per (call_id, column) below zero.
WITH negatives AS (
  UNPIVOT (
    SELECT call_id, 'raw_calls' AS relation,
      CAST(uncached_input_tokens AS DOUBLE) AS uncached_input_tokens, CAST(cache_read_tokens AS DOUBLE) AS cache_read_tokens,
      CAST(cache_write_tokens AS DOUBLE) AS cache_write_tokens, CAST(cache_write_1h_tokens AS DOUBLE) AS cache_write_1h_tokens,
      CAST(output_tokens AS DOUBLE) AS output_tokens, CAST(reasoning_tokens AS DOUBLE) AS reasoning_tokens,
      e2e_s, ttft_s, queue_s, prefill_s, decode_s, itl_s, itl_p50_s, itl_p95_s
    FROM raw_calls
  ) ON COLUMNS(* EXCLUDE (call_id, relation)) INTO NAME "column" VALUE value
  UNION ALL BY NAME
  UNPIVOT (
    SELECT call_id, 'call_attribution' AS relation, ttft_s, prefill_s, decode_s, itl_s FROM call_attribution
  ) ON COLUMNS(* EXCLUDE (call_id, relation)) INTO NAME "column" VALUE value
)
SELECT relation, call_id, "column", value
FROM negatives
WHERE value < 0
ORDER BY relation DESC, call_id, "column"
