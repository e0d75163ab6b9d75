-- Read macros over the billing relations of a snapshot; created only when the build has reconciled billing
-- (`reconciliation` and `untraced_costs` present). Filters: period (UTC days of [p_since, p_until)),
-- providers and models (VARCHAR[]; NULL = all). Workload and team do not apply: a bill knows neither.

CREATE MACRO keep_cell(day, provider, model, p_since, p_until, p_providers, p_models) AS
  (p_since IS NULL OR day >= CAST(p_since AS DATE))
  AND (p_until IS NULL OR day < CAST(p_until AS DATE))
  AND (p_providers IS NULL OR list_contains(p_providers, provider))
  AND (p_models IS NULL OR list_contains(p_models, coalesce(model, '(unknown)')));

-- Reconciliation cells (provider, model, day, token type) that pass the filters, gaps first.
CREATE MACRO reconciliation_cells(p_since, p_until, p_providers, p_models) AS TABLE
SELECT * FROM reconciliation WHERE keep_cell(day, provider, model, p_since, p_until, p_providers, p_models)
ORDER BY cause = 'ok', abs(coalesce(cost_delta_usd, 0)) DESC, provider, model, day, token_type;

-- One row: billed vs estimated USD, their difference, coverage, untraced USD and the cells with a gap.
CREATE MACRO reconciliation_summary(p_since, p_until, p_providers, p_models) AS TABLE
WITH r AS (
  SELECT coalesce(sum(billed_cost_usd), 0) AS billed_cost_usd, coalesce(sum(estimated_cost_usd), 0) AS estimated_cost_usd,
         count(*) AS cells, count(*) FILTER (WHERE cause <> 'ok') AS gap_cells
  FROM reconciliation WHERE keep_cell(day, provider, model, p_since, p_until, p_providers, p_models)
),
u AS (
  SELECT coalesce(sum(untraced_cost_usd), 0) AS untraced_cost_usd, coalesce(sum(allocated_cost_usd), 0) AS allocated_cost_usd
  FROM untraced_costs WHERE keep_cell(day, provider, model, p_since, p_until, p_providers, p_models)
)
SELECT r.*, r.billed_cost_usd - r.estimated_cost_usd AS cost_delta_usd,
       CAST(r.estimated_cost_usd AS DOUBLE) / nullif(CAST(r.billed_cost_usd AS DOUBLE), 0) AS cost_coverage, u.*
FROM r, u;

-- Cells and USD per cause (the reason per gap), largest difference first.
CREATE MACRO reconciliation_by_cause(p_since, p_until, p_providers, p_models) AS TABLE
SELECT cause, count(*) AS cells, sum(billed_cost_usd) AS billed_cost_usd, sum(estimated_cost_usd) AS estimated_cost_usd,
       sum(cost_delta_usd) AS cost_delta_usd
FROM reconciliation WHERE keep_cell(day, provider, model, p_since, p_until, p_providers, p_models)
GROUP BY cause ORDER BY abs(coalesce(sum(cost_delta_usd), 0)) DESC;

-- Billed vs estimated USD per UTC day (DOUBLE, for charts).
CREATE MACRO reconciliation_daily(p_since, p_until, p_providers, p_models) AS TABLE
SELECT day, kind, usd FROM (
  SELECT CAST(day AS TIMESTAMP) AS day, CAST(sum(billed_cost_usd) AS DOUBLE) AS billed,
         CAST(sum(estimated_cost_usd) AS DOUBLE) AS estimated
  FROM reconciliation WHERE keep_cell(day, provider, model, p_since, p_until, p_providers, p_models) GROUP BY ALL
) UNPIVOT (usd FOR kind IN (billed, estimated)) ORDER BY day, kind;

-- The untraced bucket: billed USD no traced call explains, per cell with at least half a cent of it
-- (allocation leaves sub-cent remainders where no token type matches exactly; the summary counts them all).
CREATE MACRO untraced_cells(p_since, p_until, p_providers, p_models) AS TABLE
SELECT provider, model, day, token_type, untraced_cost_usd, billed_cost_usd, allocated_cost_usd, billed_tokens,
       traced_tokens, allocated_calls, cause
FROM untraced_costs
WHERE keep_cell(day, provider, model, p_since, p_until, p_providers, p_models) AND abs(untraced_cost_usd) >= 0.005
ORDER BY untraced_cost_usd DESC;
