-- call_costs: what each model call cost in USD, split into the input side (prefill: uncached input, cache
-- read, cache write) and the output side (decode: output tokens, reasoning included).
-- Grain: one row per raw_calls.call_id.
-- Upstream: raw_calls; call_unit_prices (call_unit_prices.sql: each call's row of price_table); pricing_gpu_call_costs (from gpu_costs.sql, for self-hosted deployments).
-- Exact: tokens × DECIMAL unit price, never through DOUBLE, rounded once per bucket to DECIMAL(38, 12).
-- A call without a price keeps NULL costs and priced = false, never $0; unpriced_reason says why:
--   no_model, no_price, no_list_price_for_discount, self_hosted_no_deployment (from price_table),
--   no_usage (a successful call without token counts), price_incomplete (tokens in a bucket the model has
--   no price for), no_timing (a deployment call without phase times), outside_deployment_period.
CREATE OR REPLACE TABLE call_costs AS
WITH calls AS (
  SELECT
    call_id, started_at, provider, model, model_raw, status,
    CAST(started_at AS DATE) AS day,
    coalesce(hour(started_at) * 3600 + minute(started_at) * 60 + second(started_at), 0) AS second_of_day,
    coalesce(uncached_input_tokens, 0) AS uncached_tokens,
    coalesce(cache_read_tokens, 0) AS cache_read_tokens,
    coalesce(cache_write_tokens, 0) - least(coalesce(cache_write_1h_tokens, 0), coalesce(cache_write_tokens, 0))
      AS cache_write_5m_tokens,
    least(coalesce(cache_write_1h_tokens, 0), coalesce(cache_write_tokens, 0)) AS cache_write_1h_tokens,
    coalesce(output_tokens, 0) AS output_tokens,
    coalesce(uncached_input_tokens, 0) + coalesce(cache_read_tokens, 0) + coalesce(cache_write_tokens, 0)
      AS total_input_tokens,
    (uncached_input_tokens IS NOT NULL OR cache_read_tokens IS NOT NULL
      OR cache_write_tokens IS NOT NULL OR output_tokens IS NOT NULL) AS has_usage
  FROM raw_calls
),
-- Each bucket's cost is rounded to 12 decimals; a price with at most 12 decimals (nearly all list prices) gives a
-- product exact at 12 decimals, taken at that scale directly, which skips a slow 38-digit rounding per call and
-- gives the same figure. The scale-12 prices come from the few distinct price rows, not from each call's row.
exact AS (
  SELECT DISTINCT uncached_input, cache_read, cache_write, cache_write_1h, output,
    CASE WHEN uncached_input = round(uncached_input, 12) AND abs(uncached_input) < 1000000
      THEN CAST(uncached_input AS DECIMAL(18, 12)) END AS uncached_input_12,
    CASE WHEN cache_read = round(cache_read, 12) AND abs(cache_read) < 1000000
      THEN CAST(cache_read AS DECIMAL(18, 12)) END AS cache_read_12,
    CASE WHEN cache_write = round(cache_write, 12) AND abs(cache_write) < 1000000
      THEN CAST(cache_write AS DECIMAL(18, 12)) END AS cache_write_12,
    CASE WHEN cache_write_1h = round(cache_write_1h, 12) AND abs(cache_write_1h) < 1000000
      THEN CAST(cache_write_1h AS DECIMAL(18, 12)) END AS cache_write_1h_12,
    CASE WHEN output = round(output, 12) AND abs(output) < 1000000
      THEN CAST(output AS DECIMAL(18, 12)) END AS output_12
  FROM price_table
),
price AS (
  SELECT u.*, e.uncached_input_12, e.cache_read_12, e.cache_write_12, e.cache_write_1h_12, e.output_12
  FROM call_unit_prices u
  LEFT JOIN exact e
    ON e.uncached_input IS NOT DISTINCT FROM u.uncached_input AND e.cache_read IS NOT DISTINCT FROM u.cache_read
   AND e.cache_write IS NOT DISTINCT FROM u.cache_write AND e.cache_write_1h IS NOT DISTINCT FROM u.cache_write_1h
   AND e.output IS NOT DISTINCT FROM u.output
),
token_costs AS (   -- USD, each bucket rounded to 12 decimals; NULL where a bucket has tokens but no price
  SELECT
    c.call_id, c.started_at, c.status, c.has_usage,
    p.price_source, p.matched_model, p.deployment, p.unpriced_reason AS key_reason,
    CASE WHEN c.uncached_tokens = 0 THEN 0
         WHEN p.uncached_input_12 IS NOT NULL THEN c.uncached_tokens * p.uncached_input_12
         ELSE CAST(c.uncached_tokens * p.uncached_input AS DECIMAL(38, 12)) END AS uncached_cost,
    CASE WHEN c.cache_read_tokens = 0 THEN 0
         WHEN p.cache_read_12 IS NOT NULL THEN c.cache_read_tokens * p.cache_read_12
         ELSE CAST(c.cache_read_tokens * p.cache_read AS DECIMAL(38, 12)) END AS cache_read_cost,
    -- the 5-minute and 1-hour writes are one bucket, rounded once
    CASE WHEN (c.cache_write_5m_tokens = 0 OR p.cache_write_12 IS NOT NULL)
          AND (c.cache_write_1h_tokens = 0 OR p.cache_write_1h_12 IS NOT NULL) THEN
           CASE WHEN c.cache_write_5m_tokens = 0 THEN 0 ELSE c.cache_write_5m_tokens * p.cache_write_12 END
           + CASE WHEN c.cache_write_1h_tokens = 0 THEN 0 ELSE c.cache_write_1h_tokens * p.cache_write_1h_12 END
         ELSE CAST(CASE WHEN c.cache_write_5m_tokens = 0 THEN 0 ELSE c.cache_write_5m_tokens * p.cache_write END
                   + CASE WHEN c.cache_write_1h_tokens = 0 THEN 0 ELSE c.cache_write_1h_tokens * p.cache_write_1h END
                   AS DECIMAL(38, 12)) END
      AS cache_write_cost,
    CASE WHEN c.output_tokens = 0 THEN 0 WHEN p.output_12 IS NOT NULL THEN c.output_tokens * p.output_12
         ELSE CAST(c.output_tokens * p.output AS DECIMAL(38, 12)) END AS output_cost
  FROM calls c
  LEFT JOIN price p ON p.call_id = c.call_id
),
judged AS (
  SELECT
    t.*,
    g.prefill_cost_usd, g.decode_cost_usd, g.prefill_deployment, g.decode_deployment,
    CASE
      WHEN t.price_source = 'gpu_hours' THEN
        CASE WHEN NOT coalesce(g.in_period, false) THEN 'outside_deployment_period'
             WHEN NOT g.timed THEN 'no_timing' END
      WHEN t.price_source IS NULL THEN coalesce(t.key_reason, 'no_price')
      WHEN NOT t.has_usage AND coalesce(t.status, 'ok') <> 'error' THEN 'no_usage'
      WHEN t.uncached_cost IS NULL OR t.cache_read_cost IS NULL OR t.cache_write_cost IS NULL
        OR t.output_cost IS NULL THEN 'price_incomplete'
    END AS unpriced_reason
  FROM token_costs t
  LEFT JOIN pricing_gpu_call_costs g ON g.call_id = t.call_id
),
costs AS (
  SELECT
    call_id, started_at, price_source, matched_model, unpriced_reason,
    CASE WHEN price_source = 'gpu_hours' AND prefill_deployment IS NOT NULL THEN
      CASE WHEN prefill_deployment = decode_deployment THEN prefill_deployment END
      ELSE deployment END AS deployment,
    CASE WHEN price_source = 'gpu_hours' THEN coalesce(prefill_deployment, deployment) END AS prefill_deployment,
    CASE WHEN price_source = 'gpu_hours' THEN coalesce(decode_deployment, deployment) END AS decode_deployment,
    CASE WHEN unpriced_reason IS NULL THEN
      CAST(CASE WHEN price_source = 'gpu_hours' THEN prefill_cost_usd ELSE uncached_cost END AS DECIMAL(38, 12))
    END AS uncached_input_cost_usd,
    CASE WHEN unpriced_reason IS NULL THEN
      CAST(CASE WHEN price_source = 'gpu_hours' THEN 0 ELSE cache_read_cost END AS DECIMAL(38, 12))
    END AS cache_read_cost_usd,
    CASE WHEN unpriced_reason IS NULL THEN
      CAST(CASE WHEN price_source = 'gpu_hours' THEN 0 ELSE cache_write_cost END AS DECIMAL(38, 12))
    END AS cache_write_cost_usd,
    CASE WHEN unpriced_reason IS NULL THEN
      CAST(CASE WHEN price_source = 'gpu_hours' THEN decode_cost_usd ELSE output_cost END AS DECIMAL(38, 12))
    END AS output_cost_usd
  FROM judged
)
SELECT
  call_id,
  started_at,                      -- the call's start: an incremental build reads a few days' rows by it
  uncached_input_cost_usd,         -- self-hosted: the call's prefill share of its hour's GPU cost
  cache_read_cost_usd,             -- self-hosted: 0 (cache hits show up as shorter prefill instead)
  cache_write_cost_usd,            -- 5-minute and 1-hour cache writes; self-hosted: 0
  output_cost_usd,                 -- reasoning included; self-hosted: the call's decode share
  CAST(uncached_input_cost_usd + cache_read_cost_usd + cache_write_cost_usd AS DECIMAL(38, 12)) AS input_cost_usd,
  CAST(uncached_input_cost_usd + cache_read_cost_usd + cache_write_cost_usd + output_cost_usd AS DECIMAL(38, 12))
    AS cost_usd,
  unpriced_reason IS NULL AS priced,
  price_source,                    -- genai-prices | price_book | gpu_hours | NULL
  matched_model,                   -- the list-price model or price book entry used
  deployment,                      -- the self-hosted deployment that served the call (NULL: split over two)
  prefill_deployment,              -- self-hosted: the deployment (pool) its prefill ran on and was charged to
  decode_deployment,               -- self-hosted: the deployment (pool) its decode ran on and was charged to
  unpriced_reason
FROM costs;
