-- reconciliation_cells: what reconciliation.sql judges, per (provider, model, UTC day, token type): the billed
-- side from the billing lines, the traced side from the calls.
-- Upstream: raw_billing_lines; raw_calls; call_costs (list-price estimate per call); source_gaps (view: which
-- instrumentation loses which counts).
-- Leaves rc_line_days, rc_billed, rc_call_cells (TEMP: each traced call's tokens per cell, which allocation.sql
-- shares the bill out to), reconciliation_traced and reconciliation_sources, and the rc_* macros.
-- Money stays DECIMAL: sums and splits run on integer picodollars (HUGEINT), never through DOUBLE;
-- only ratios (coverage, price deviation) are DOUBLE.

CREATE OR REPLACE TEMP MACRO rc_fdiv(n, d) AS                  -- floor(n / d) for HUGEINT n and d > 0
  CASE WHEN n >= 0 THEN n // d ELSE -((-n + d - 1) // d) END;
CREATE OR REPLACE TEMP MACRO rc_money(u) AS                    -- picodollars -> DECIMAL(38, 12) USD
  CAST(CAST(u AS DECIMAL(38, 0)) * CAST('0.000000000001' AS DECIMAL(38, 12)) AS DECIMAL(38, 12));
CREATE OR REPLACE TEMP MACRO rc_qty(u) AS                      -- micro-tokens -> DECIMAL(38, 6) tokens
  CAST(CAST(u AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(38, 6)) AS DECIMAL(38, 6));
CREATE OR REPLACE TEMP MACRO rc_tok(x) AS                      -- 1234567 -> '1.23 M'
  CASE WHEN x IS NULL THEN 'unknown'
       WHEN abs(x) >= 1e6 THEN printf('%.2f M', x / 1e6)
       WHEN abs(x) >= 1e3 THEN printf('%.1f k', x / 1e3)
       ELSE printf('%d', CAST(round(x) AS BIGINT)) END;
CREATE OR REPLACE TEMP MACRO rc_price(x) AS                    -- a price per M tokens: 1.5 -> '$1.50'; 0.0123 -> '$0.0123'
  CASE WHEN x IS NULL THEN 'unknown'
       WHEN abs(x) >= 1 OR x = 0 THEN printf('$%.2f', x)
       ELSE printf('$%.4g', x) END;

-- Each in-scope billing line as (day, picodollars, micro-tokens) parts. A line of a day or less goes whole
-- to the UTC day holding most of it (ties: the earlier day); a longer line (weekly, monthly) is spread over
-- its days in proportion to overlap, by differences of cumulative floors, so its parts add up exactly.
-- In scope: lines of a provider that has token lines or traced calls (cloud spend such as compute or
-- storage of another provider is not LLM spend and is left out).
CREATE OR REPLACE TEMP TABLE rc_line_days AS
WITH scope AS (
  SELECT provider FROM raw_billing_lines WHERE token_type <> 'other'
  UNION SELECT provider FROM raw_calls WHERE provider IS NOT NULL
),
lines AS (
  SELECT
    b.billing_line_id, b.provider, b.model, b.token_type, b.charge_category, b.currency, b.source,
    CASE WHEN b.cost_usd IS NOT NULL THEN CAST(b.cost_usd * 1000000000000 AS HUGEINT) END AS usd_units,
    CAST(b.cost * 1000000000000 AS HUGEINT) AS local_units,
    CAST(b.quantity_tokens * 1000000 AS HUGEINT) AS qty_units,
    b.period_start, b.period_end,
    CAST(epoch_us(b.period_end) - epoch_us(b.period_start) AS HUGEINT) AS span_us,
    CAST(b.period_start AS DATE) AS first_day
  FROM raw_billing_lines b
  WHERE b.provider IN (SELECT provider FROM scope)
),
short AS (
  SELECT
    * EXCLUDE (first_day),
    CASE WHEN 2 * (epoch_us(least(period_end, CAST(first_day + 1 AS TIMESTAMP))) - epoch_us(period_start))
              >= span_us THEN first_day ELSE first_day + 1 END AS day
  FROM lines WHERE span_us <= 86400000000
),
long_days AS (
  SELECT
    l.*, CAST(d.d AS DATE) AS day,
    CAST(epoch_us(least(l.period_end, d.d + INTERVAL 1 DAY)) - epoch_us(greatest(l.period_start, d.d)) AS HUGEINT)
      AS overlap_us
  FROM lines l,
       LATERAL (SELECT unnest(generate_series(CAST(l.first_day AS TIMESTAMP), l.period_end, INTERVAL 1 DAY)) AS d) d
  WHERE l.span_us > 86400000000 AND d.d < l.period_end
),
long_cum AS (
  SELECT *,
    sum(overlap_us) OVER (PARTITION BY billing_line_id ORDER BY day) AS upto_us
  FROM long_days
)
SELECT billing_line_id, provider, model, token_type, charge_category, currency, source, day,
       usd_units, local_units, qty_units
FROM short
UNION ALL
SELECT billing_line_id, provider, model, token_type, charge_category, currency, source, day,
  rc_fdiv(usd_units * upto_us, span_us) - rc_fdiv(usd_units * (upto_us - overlap_us), span_us),
  rc_fdiv(local_units * upto_us, span_us) - rc_fdiv(local_units * (upto_us - overlap_us), span_us),
  rc_fdiv(qty_units * upto_us, span_us) - rc_fdiv(qty_units * (upto_us - overlap_us), span_us)
FROM long_cum;

-- Billed per cell. Tokens come from usage-quantity lines (usage reports: tokens, no money) when the cell has
-- any, else from the quantities of the money lines, so a cell billed by both counts its tokens once.
-- Money is every converted money line (credits, refunds and corrections included: the net invoice);
-- NULL when the cell has only usage quantities. usage_units is the gross usage part the price test uses.
CREATE OR REPLACE TEMP TABLE rc_billed AS
SELECT
  provider, model, day, token_type,
  CASE WHEN count(*) FILTER (WHERE charge_category = 'usage_quantity' AND qty_units IS NOT NULL) > 0
       THEN sum(qty_units) FILTER (WHERE charge_category = 'usage_quantity')
       ELSE sum(qty_units) FILTER (WHERE charge_category <> 'usage_quantity') END AS billed_qty_units,
  sum(usd_units) FILTER (WHERE charge_category <> 'usage_quantity') AS billed_units,
  sum(usd_units) FILTER (WHERE charge_category = 'usage') AS usage_units,
  count(*) FILTER (WHERE charge_category <> 'usage_quantity') AS money_lines,
  count(*) FILTER (WHERE usd_units IS NULL AND local_units <> 0) AS unconverted_lines,
  string_agg(DISTINCT currency, ', ' ORDER BY currency) FILTER (WHERE usd_units IS NULL AND local_units <> 0)
    AS unconverted_currencies,
  string_agg(DISTINCT source, ', ' ORDER BY source) AS billing_sources
FROM rc_line_days
GROUP BY ALL;

-- Each traced call's tokens and list-price estimate per token type, for the providers and UTC days the
-- loaded bills cover. Calls priced by GPU-hour (self-hosted deployments) have no token bill to meet.
CREATE OR REPLACE TEMP TABLE rc_call_cells AS
WITH covered AS (SELECT provider, min(day) AS first_day, max(day) AS last_day FROM rc_billed GROUP BY provider),
calls AS (
  SELECT c.call_id, c.provider, c.model, CAST(c.started_at AS DATE) AS day,
         c.uncached_input_tokens, c.cache_read_tokens, c.cache_write_tokens, c.output_tokens,
         k.uncached_input_cost_usd, k.cache_read_cost_usd, k.cache_write_cost_usd, k.output_cost_usd,
         coalesce(k.priced, false) AS priced
  FROM raw_calls c
  JOIN covered v ON v.provider = c.provider AND CAST(c.started_at AS DATE) BETWEEN v.first_day AND v.last_day
  LEFT JOIN call_costs k ON k.call_id = c.call_id
  WHERE k.price_source IS DISTINCT FROM 'gpu_hours'
),
typed AS (
  SELECT c.call_id, c.provider, c.model, c.day, t.token_type, c.priced,
    CASE t.token_type WHEN 'uncached_input' THEN c.uncached_input_tokens WHEN 'cache_read' THEN c.cache_read_tokens
         WHEN 'cache_write' THEN c.cache_write_tokens ELSE c.output_tokens END AS tokens,
    CASE t.token_type WHEN 'uncached_input' THEN c.uncached_input_cost_usd WHEN 'cache_read' THEN c.cache_read_cost_usd
         WHEN 'cache_write' THEN c.cache_write_cost_usd ELSE c.output_cost_usd END AS cost_usd
  FROM calls c CROSS JOIN (VALUES ('uncached_input'), ('cache_read'), ('cache_write'), ('output')) t(token_type)
)
SELECT call_id, provider, model, day, token_type, priced, CAST(tokens AS BIGINT) AS tokens,
       CASE WHEN priced THEN cost_usd END AS cost_usd
FROM typed WHERE tokens > 0;

-- reconciliation_traced: the traced side of each cell, from the calls of its day (kept by the build, so an
-- incremental build reads a neighbour day's cells instead of its calls). Grain: (provider, model, day, token_type).
CREATE OR REPLACE TABLE reconciliation_traced AS
-- rc_call_cells holds a call once per token type (call_id is unique in raw_calls): its rows are the calls
SELECT provider, model, day, token_type,
  count(*) AS traced_calls,
  CAST(sum(tokens) AS BIGINT) AS traced_tokens,
  CAST(sum(tokens) FILTER (WHERE priced) AS BIGINT) AS priced_tokens,
  -- a call's cost has 12 decimals, so the sum's picodollars are those of the calls (one conversion per cell)
  CAST((sum(cost_usd) FILTER (WHERE priced)) * 1000000000000 AS DECIMAL(38, 0))
    AS estimated_units,                                    -- picodollars (reconciliation.sql reads them as HUGEINT)
  count(*) FILTER (WHERE NOT priced) AS unpriced_calls
FROM rc_call_cells GROUP BY ALL;

-- reconciliation_sources: the sources of each (provider, model, UTC day)'s calls that lose counts (see
-- source_gaps.sql), by token type (kept by the build, as reconciliation_traced: of every provider's calls, billed
-- or not, so a day's rows depend on its calls alone). Grain: (provider, model, day).
CREATE OR REPLACE TABLE reconciliation_sources AS
WITH per_source AS (  -- the calls counted per source first: the gaps are joined to a few rows, not to every call
  SELECT provider, model, CAST(started_at AS DATE) AS day, source, coalesce(instrumentation, source) AS instrumentation,
         count(*) FILTER (WHERE streaming) AS streamed_calls
  FROM raw_calls
  WHERE started_at IS NOT NULL  -- a call without a start is in no day's cell
  GROUP BY ALL
)
SELECT c.provider, c.model, c.day,
  string_agg(DISTINCT g.instrumentation, ', ' ORDER BY g.instrumentation)
    FILTER (WHERE list_has_any(g.gap_kinds, ['no_cache_counts', 'cache_counts_lost_when_streamed',
                                             'cache_counts_zeroed_when_streamed'])) AS cache_gap_sources,
  string_agg(DISTINCT g.instrumentation, ', ' ORDER BY g.instrumentation)
    FILTER (WHERE list_has_any(g.gap_kinds, ['no_cache_counts', 'cache_counts_lost_when_streamed',
                                             'cache_counts_zeroed_when_streamed', 'no_cache_write_counts']))
    AS cache_write_gap_sources,
  string_agg(DISTINCT g.instrumentation, ', ' ORDER BY g.instrumentation)
    FILTER (WHERE list_has_any(g.gap_kinds, ['no_input_counts'])) AS input_gap_sources,
  string_agg(DISTINCT g.instrumentation, ', ' ORDER BY g.instrumentation)
    FILTER (WHERE list_has_any(g.gap_kinds, ['no_output_counts'])) AS output_gap_sources,
  string_agg(DISTINCT g.instrumentation, ', ' ORDER BY g.instrumentation) AS all_sources,
  CAST(sum(c.streamed_calls) AS BIGINT) AS streamed_calls
FROM per_source c
JOIN source_gaps g ON g.source = c.source AND g.instrumentation = c.instrumentation
GROUP BY c.provider, c.model, c.day;
