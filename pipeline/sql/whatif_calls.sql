-- whatif_calls: the calls the routing what-if replays (pipeline/whatif.py, docs/whatif.md), bounded so it stays
-- small at any store size: per workload and UTC day at most $cap calls, the same ones on every build (lowest md5
-- of call_id); `day_calls` is how many calls that workload had that day, so a replay can be scaled to the whole
-- day. Generation calls only (embeddings have no decode phase to move). Never any prompt or completion text.
-- Grain: one row per replayed call. Upstream: requests. Copied into the dashboard's snapshot by publish.
CREATE OR REPLACE TABLE whatif_calls AS
WITH calls AS (
  SELECT
    workload, call_id, started_at, CAST(started_at AS DATE) AS day,
    provider, model, status,
    coalesce(uncached_input_tokens, 0) AS uncached_input_tokens,
    coalesce(cache_read_tokens, 0) AS cache_read_tokens,
    coalesce(cache_write_tokens, 0) AS cache_write_tokens,
    least(coalesce(cache_write_1h_tokens, 0), coalesce(cache_write_tokens, 0)) AS cache_write_1h_tokens,
    coalesce(output_tokens, 0) AS output_tokens,
    ttft_s, decode_s, itl_s, e2e_s, timing_source,
    cost_usd, priced,
    count(*) OVER (PARTITION BY workload, CAST(started_at AS DATE)) AS day_calls
  FROM requests
  WHERE operation <> 'embeddings'
)
SELECT *
FROM calls
QUALIFY row_number() OVER (PARTITION BY workload, day ORDER BY md5(call_id)) <= $cap
ORDER BY workload, day, call_id;
