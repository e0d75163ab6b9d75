-- call_sample: the calls behind a workload, bounded so the snapshot stays small at any store size.
-- Grain: call_id; per workload at most the 100 latest calls, the 50 with the longest TTFT and the 50 most
-- expensive (a call picked twice appears once). Upstream: requests. Never any prompt or completion text.
CREATE TABLE published.call_sample AS
WITH picks AS (
  SELECT workload,
    max_by(call_id, started_at, 100) AS latest,
    max_by(call_id, ttft_s, 50) AS slowest,
    max_by(call_id, cost_usd, 50) AS priciest
  FROM requests GROUP BY workload
),
ids AS (
  SELECT unnest(list_distinct(latest || coalesce(slowest, []) || coalesce(priciest, []))) AS call_id, slowest, priciest
  FROM picks
)
SELECT
  r.call_id, r.trace_id, r.started_at, r.workload,
  coalesce(r.provider, '(unknown)') AS provider, coalesce(r.model, '(unknown)') AS model,
  coalesce(r.team, '(none)') AS team, coalesce(r.project, '(none)') AS project,
  date_trunc('hour', r.started_at) AS hour,
  r.status, r.streaming, r.input_tokens, r.cache_read_tokens, r.output_tokens,
  r.ttft_s, r.itl_s, r.e2e_s, r.queue_s, r.timing_source, r.cost_usd, r.priced, r.source, r.source_locator,
  CASE WHEN list_contains(i.slowest, r.call_id) THEN 'slowest TTFT'
       WHEN list_contains(i.priciest, r.call_id) THEN 'most expensive' ELSE 'latest' END AS picked_as
FROM requests r JOIN ids i USING (call_id)
ORDER BY r.workload, r.started_at DESC NULLS LAST, r.call_id;
