-- whatif_calls: the calls the routing what-if replays (pipeline/whatif.py, docs/whatif.md), bounded so it stays
-- small at any store size: per workload and UTC day at most $cap calls, the same ones on every build (lowest md5
-- of call_id); `day_calls` is how many calls that workload had that day, so a replay can be scaled to the whole
-- day. Generation calls only (embeddings have no decode phase to move). Never any prompt or completion text.
-- Grain: one row per replayed call. Upstream: requests. Copied into the dashboard's snapshot by publish.
CREATE OR REPLACE TABLE whatif_calls AS
WITH picked AS (
  -- the $cap lowest md5 per (workload, UTC day) as a top-N aggregate, and the day's count (no sort of every call)
  SELECT workload, CAST(started_at AS DATE) AS day, min_by(call_id, md5(call_id), $cap) AS ids, count(*) AS day_calls
  FROM requests
  WHERE operation <> 'embeddings'
  GROUP BY ALL
),
keep AS (
  SELECT workload, day, day_calls, unnest(ids) AS call_id FROM picked
)
SELECT
  r.workload, r.call_id, r.started_at, CAST(r.started_at AS DATE) AS day,
  r.provider, r.model, r.status,
  coalesce(r.uncached_input_tokens, 0) AS uncached_input_tokens,
  coalesce(r.cache_read_tokens, 0) AS cache_read_tokens,
  coalesce(r.cache_write_tokens, 0) AS cache_write_tokens,
  least(coalesce(r.cache_write_1h_tokens, 0), coalesce(r.cache_write_tokens, 0)) AS cache_write_1h_tokens,
  coalesce(r.output_tokens, 0) AS output_tokens,
  r.ttft_s, r.decode_s, r.itl_s, r.e2e_s, r.timing_source,
  r.cost_usd, r.priced,
  k.day_calls
FROM requests r
JOIN keep k USING (call_id)
ORDER BY r.workload, day, r.call_id;
