-- gpu_costs: self-hosted deployments priced by the GPU-hour and shared out to the calls they served.
-- Grain: deployment_costs = one row per deployment and UTC hour of its period; pricing_gpu_call_costs
-- (temp, read by call_costs.sql) = one row per call a deployment served.
-- Upstream: raw_calls, call_timing(call_id, prefill_s, decode_s), price_table (its `deployment` column names
-- the deployment serving a provider + model), pricing_deployments (one row per Deployment of the price book),
-- pricing_deployment_pools (per provider + model + day, the deployments that name a `pool`).
--
-- Disaggregated serving: a call joined from a prefill worker's and a decode worker's span carries the two
-- workers' service.name in attributes_json (`phaselens.prefill_pool`, `phaselens.decode_pool`). Where a
-- deployment serving the call's model names that pool, the phase is charged there: the prefill seconds to the
-- prefill pool's deployment, the decode seconds to the decode pool's; a phase whose pool no deployment names
-- stays with the deployment the model matches. Each deployment's hours are then shared over the phase-seconds
-- spent in it, so an hour of either pool is allocated in full. Every other call has one deployment, as before.
--
-- How an hour's cost (gpus × usd_per_gpu_hour) is shared:
-- * A call belongs to the UTC hour it started in.
-- * Concurrency: with continuous batching the calls in flight share the GPUs at once, so a call's GPU time
--   is its own phase time (prefill_s + decode_s), whatever ran beside it. The hour's cost is split in
--   proportion to phase-seconds: a call's prefill seconds buy its input side, its decode seconds its
--   output side. A busy hour therefore makes every second cheaper; a quiet hour makes it dearer.
-- * idle = 'spread': the whole hour is paid by that hour's calls, so idle minutes inside an hour with
--   traffic are spread over its calls. idle = 'keep': only the busy part of the hour (wall-clock time at
--   least one of its calls was on the GPU, the union of [end - (prefill_s + decode_s), end]; for a split
--   call's prefill part [start, start + prefill_s]) is
--   shared out; the rest stays idle. Hours with no calls are idle under both policies.
-- * Exactness: money is split as integer picodollars (1e-12 USD, the scale of DECIMAL(38, 12)); the
--   largest-remainder method hands out the last picodollars, so per hour the calls' shares add up to
--   allocated_usd exactly and allocated_usd + idle_usd = cost_usd exactly.

CREATE OR REPLACE TEMP TABLE pricing_gpu_calls AS
WITH base AS (
  SELECT
    c.call_id,
    coalesce(pp.deployment, k.deployment) AS prefill_deployment,
    coalesce(pd.deployment, k.deployment) AS decode_deployment,
    date_trunc('hour', c.started_at) AS hour,
    c.started_at,
    c.ended_at,
    (t.prefill_s IS NOT NULL OR t.decode_s IS NOT NULL) AS timed,
    CAST(round(greatest(coalesce(t.prefill_s, 0), 0) * 1000000) AS BIGINT) AS prefill_us,
    CAST(round(greatest(coalesce(t.decode_s, 0), 0) * 1000000) AS BIGINT) AS decode_us
  FROM raw_calls c
  JOIN (SELECT DISTINCT provider, model, model_raw, day, deployment FROM price_table WHERE deployment IS NOT NULL) k
    ON k.provider IS NOT DISTINCT FROM c.provider
   AND k.model IS NOT DISTINCT FROM c.model
   AND k.model_raw IS NOT DISTINCT FROM c.model_raw
   AND k.day IS NOT DISTINCT FROM CAST(c.started_at AS DATE)
  LEFT JOIN call_timing t ON t.call_id = c.call_id
  LEFT JOIN pricing_deployment_pools pp
    ON pp.provider IS NOT DISTINCT FROM c.provider
   AND pp.model IS NOT DISTINCT FROM c.model
   AND pp.model_raw IS NOT DISTINCT FROM c.model_raw
   AND pp.day IS NOT DISTINCT FROM CAST(c.started_at AS DATE)
   AND pp.pool = json_extract_string(c.attributes_json, '$."phaselens.prefill_pool"')
  LEFT JOIN pricing_deployment_pools pd
    ON pd.provider IS NOT DISTINCT FROM c.provider
   AND pd.model IS NOT DISTINCT FROM c.model
   AND pd.model_raw IS NOT DISTINCT FROM c.model_raw
   AND pd.day IS NOT DISTINCT FROM CAST(c.started_at AS DATE)
   AND pd.pool = json_extract_string(c.attributes_json, '$."phaselens.decode_pool"')
),
parts AS (   -- one row per call and deployment it ran on: 'both' phases, or a split call's 'prefill' / 'decode'
  SELECT call_id, prefill_deployment, decode_deployment, prefill_deployment AS deployment,
    CASE WHEN decode_deployment = prefill_deployment THEN 'both' ELSE 'prefill' END AS part,
    hour, started_at, ended_at, timed, prefill_us + decode_us AS call_us, prefill_us,
    CASE WHEN decode_deployment = prefill_deployment THEN decode_us ELSE 0 END AS decode_us
  FROM base
  UNION ALL
  SELECT call_id, prefill_deployment, decode_deployment, decode_deployment AS deployment, 'decode' AS part,
    hour, started_at, ended_at, timed, prefill_us + decode_us AS call_us, 0 AS prefill_us, decode_us
  FROM base
  WHERE decode_deployment <> prefill_deployment
),
periods AS (
  SELECT p.*,
    CASE WHEN coalesce(
      p.started_at >= CAST(coalesce(d.active_from, DATE '0001-01-01') AS TIMESTAMP)
      AND p.started_at < CAST(coalesce(d.active_to, DATE '9999-12-30') AS TIMESTAMP) + INTERVAL 1 DAY,
      false) THEN 1 ELSE 0 END AS part_in_period
  FROM parts p
  JOIN pricing_deployments d ON d.deployment = p.deployment
)
-- a split call is inside the paid period only if both of its deployments are (else it is charged to neither)
SELECT
  call_id, prefill_deployment, decode_deployment, deployment, part, hour, started_at, ended_at, timed,
  call_us, prefill_us, decode_us,
  min(part_in_period) OVER (PARTITION BY call_id) = 1 AS in_period
FROM periods;

-- Every hour of each deployment's period: active_from..active_to when given, else first..last call hour.
CREATE OR REPLACE TEMP TABLE pricing_gpu_hours AS
WITH span AS (
  SELECT
    d.deployment,
    coalesce(CAST(d.active_from AS TIMESTAMP), min(g.hour)) AS first_hour,
    coalesce(CAST(d.active_to AS TIMESTAMP) + INTERVAL 23 HOUR, max(g.hour)) AS last_hour
  FROM pricing_deployments d
  LEFT JOIN pricing_gpu_calls g ON g.deployment = d.deployment AND g.in_period
  GROUP BY d.deployment, d.active_from, d.active_to
),
hours AS (
  SELECT deployment, unnest(range(first_hour, last_hour + INTERVAL 1 HOUR, INTERVAL 1 HOUR)) AS hour
  FROM span
  WHERE first_hour IS NOT NULL AND last_hour IS NOT NULL
),
traffic AS (
  SELECT
    deployment, hour,
    count(*) AS calls,
    count(*) FILTER (WHERE NOT timed) AS untimed_calls,
    coalesce(sum(prefill_us + decode_us) FILTER (WHERE timed), 0) AS weight_us
  FROM pricing_gpu_calls
  WHERE in_period
  GROUP BY deployment, hour
),
intervals AS (   -- a split call's prefill runs from its start, its decode (like a whole call) up to its end
  SELECT
    deployment, hour,
    CASE WHEN part = 'prefill' THEN epoch_us(started_at)
         ELSE epoch_us(coalesce(ended_at, started_at + to_microseconds(call_us))) - (prefill_us + decode_us)
    END AS s_us,
    CASE WHEN part = 'prefill' THEN epoch_us(started_at) + prefill_us
         ELSE epoch_us(coalesce(ended_at, started_at + to_microseconds(call_us)))
    END AS e_us
  FROM pricing_gpu_calls
  WHERE in_period AND timed AND prefill_us + decode_us > 0
),
reach AS (
  SELECT *,
    max(e_us) OVER (PARTITION BY deployment, hour ORDER BY s_us, e_us
                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach_us
  FROM intervals
),
islands AS (
  SELECT *,
    sum(CASE WHEN reach_us IS NULL OR s_us > reach_us THEN 1 ELSE 0 END)
      OVER (PARTITION BY deployment, hour ORDER BY s_us, e_us ROWS UNBOUNDED PRECEDING) AS island
  FROM reach
),
busy AS (
  SELECT deployment, hour, least(sum(island_us), 3600000000) AS busy_us
  FROM (SELECT deployment, hour, island, max(e_us) - min(s_us) AS island_us FROM islands GROUP BY ALL)
  GROUP BY ALL
)
SELECT
  h.deployment,
  h.hour,
  d.hour_cost_usd,
  d.idle,
  coalesce(t.calls, 0) AS calls,
  coalesce(t.untimed_calls, 0) AS untimed_calls,
  coalesce(t.weight_us, 0) AS weight_us,
  coalesce(b.busy_us, 0) AS busy_us,
  CASE
    WHEN coalesce(t.weight_us, 0) = 0 THEN CAST(0 AS HUGEINT)
    WHEN d.idle = 'spread' THEN CAST(d.hour_cost_usd * 1000000000000 AS HUGEINT)
    ELSE CAST(d.hour_cost_usd * 1000000000000 AS HUGEINT) * coalesce(b.busy_us, 0) // 3600000000
  END AS alloc_pusd
FROM hours h
JOIN pricing_deployments d ON d.deployment = h.deployment
LEFT JOIN traffic t ON t.deployment = h.deployment AND t.hour = h.hour
LEFT JOIN busy b ON b.deployment = h.deployment AND b.hour = h.hour;

-- Each timed call's prefill and decode share, in picodollars, by largest remainder within its hour: one row per
-- call and deployment (a split call has a prefill share in one deployment and a decode share in the other).
CREATE OR REPLACE TEMP TABLE pricing_gpu_shares AS
WITH items AS (
  SELECT call_id, deployment, hour, 'prefill' AS side, prefill_us AS w_us
  FROM pricing_gpu_calls WHERE in_period AND timed AND part <> 'decode'
  UNION ALL
  SELECT call_id, deployment, hour, 'decode' AS side, decode_us AS w_us
  FROM pricing_gpu_calls WHERE in_period AND timed AND part <> 'prefill'
),
shares AS (
  SELECT
    i.call_id, i.deployment, i.hour, i.side,
    a.alloc_pusd,
    a.alloc_pusd * i.w_us // a.weight_us AS floor_pusd,
    a.alloc_pusd * i.w_us % a.weight_us AS remainder
  FROM items i
  JOIN pricing_gpu_hours a ON a.deployment = i.deployment AND a.hour = i.hour
  WHERE a.weight_us > 0
),
ranked AS (
  SELECT *,
    alloc_pusd - sum(floor_pusd) OVER (PARTITION BY deployment, hour) AS leftover,
    row_number() OVER (PARTITION BY deployment, hour ORDER BY remainder DESC, call_id, side) AS rank
  FROM shares
)
SELECT
  call_id, deployment, hour,
  sum(CASE WHEN side = 'prefill' THEN floor_pusd + CASE WHEN rank <= leftover THEN 1 ELSE 0 END END) AS prefill_pusd,
  sum(CASE WHEN side = 'decode' THEN floor_pusd + CASE WHEN rank <= leftover THEN 1 ELSE 0 END END) AS decode_pusd
FROM ranked
GROUP BY call_id, deployment, hour;

-- One row per call a deployment served: its prefill and decode shares and the deployment of each phase.
CREATE OR REPLACE TEMP TABLE pricing_gpu_call_costs AS
WITH per_call AS (
  SELECT call_id, sum(prefill_pusd) AS prefill_pusd, sum(decode_pusd) AS decode_pusd
  FROM pricing_gpu_shares
  GROUP BY call_id
),
calls AS (
  SELECT call_id, prefill_deployment, decode_deployment, hour, in_period, timed
  FROM pricing_gpu_calls
  WHERE part <> 'decode'
)
SELECT
  g.call_id,
  g.prefill_deployment,
  g.decode_deployment,
  g.hour,
  g.in_period,
  g.timed,
  CAST(CAST(coalesce(p.prefill_pusd, 0) AS DECIMAL(38, 0)) * CAST(0.000000000001 AS DECIMAL(38, 12)) AS DECIMAL(38, 12))
    AS prefill_cost_usd,
  CAST(CAST(coalesce(p.decode_pusd, 0) AS DECIMAL(38, 0)) * CAST(0.000000000001 AS DECIMAL(38, 12)) AS DECIMAL(38, 12))
    AS decode_cost_usd
FROM calls g
LEFT JOIN per_call p ON p.call_id = g.call_id;

-- deployment_costs: one row per deployment and UTC hour. allocated_usd is what that hour's calls were
-- charged (the sum of their shares); idle_usd is the rest. allocated_usd + idle_usd = cost_usd exactly.
CREATE OR REPLACE TABLE deployment_costs AS
SELECT
  h.deployment,
  d.provider,
  d.gpu_type,
  d.gpus,
  d.usd_per_gpu_hour,
  h.idle AS idle_policy,                                    -- spread | keep
  h.hour,                                                   -- UTC hour start
  h.calls,                                                  -- calls that started in the hour
  h.untimed_calls,                                          -- of which without phase times (not charged)
  CAST(h.weight_us AS DOUBLE) / 1e6 AS gpu_s,               -- sum of the calls' prefill_s + decode_s
  CAST(h.busy_us AS DOUBLE) / 1e6 AS busy_s,                -- wall-clock seconds with a call in flight
  h.hour_cost_usd AS cost_usd,
  CAST(coalesce(s.allocated_usd, 0) AS DECIMAL(38, 12)) AS allocated_usd,
  CAST(h.hour_cost_usd - coalesce(s.allocated_usd, 0) AS DECIMAL(38, 12)) AS idle_usd
FROM pricing_gpu_hours h
JOIN pricing_deployments d ON d.deployment = h.deployment
LEFT JOIN (
  SELECT deployment, hour,
    CAST(CAST(sum(coalesce(prefill_pusd, 0) + coalesce(decode_pusd, 0)) AS DECIMAL(38, 0))
      * CAST(0.000000000001 AS DECIMAL(38, 12)) AS DECIMAL(38, 12)) AS allocated_usd
  FROM pricing_gpu_shares
  GROUP BY deployment, hour
) s ON s.deployment = h.deployment AND s.hour = h.hour
ORDER BY h.deployment, h.hour;
