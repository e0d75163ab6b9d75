-- call_concurrency: how many calls of the same provider and model were in flight when each call
-- started (itself included). Grain: call_id. Upstream: raw_calls.
-- A sweep over start (+1) and end (-1) events; ties put ends first so back-to-back calls do not overlap.
CREATE OR REPLACE TABLE call_concurrency AS
WITH events AS (
  SELECT call_id, provider, model, started_at AS t, 1 AS delta, 1 AS is_start
  FROM raw_calls WHERE started_at IS NOT NULL AND ended_at IS NOT NULL
  UNION ALL
  SELECT NULL, provider, model, ended_at, -1, 0
  FROM raw_calls WHERE started_at IS NOT NULL AND ended_at IS NOT NULL
),
running AS (
  SELECT call_id, t, is_start,
         sum(delta) OVER (PARTITION BY provider, model ORDER BY t, is_start, call_id
                          ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS in_flight
  FROM events
)
SELECT call_id, t AS started_at, in_flight::DOUBLE AS concurrency FROM running WHERE is_start = 1;
