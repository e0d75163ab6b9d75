-- allocated_costs: each call's invoice-true cost per token type: its cell's billed USD shared out in
-- proportion to the call's tokens of that type. untraced_costs: per cell, what no call explains.
-- invoice_costs: the per-call view (input = uncached + cache read + cache write; output = decode); invoice_shares:
-- its three costs alone, for the calls with a share.
-- Grain: allocated_costs one row per (call_id, token_type) in a cell with billed money; untraced_costs one
-- row per billed cell; invoice_costs one row per raw_calls.call_id.
-- Upstream: reconciliation (billed per cell), rc_call_cells (TEMP, from reconciliation.sql), raw_calls,
-- call_attribution (the workload).
-- Exact: a call's share is billed × call tokens / D, where D = the larger of the cell's traced tokens and
-- its billed tokens (rounded up to whole tokens), so the cost of billed tokens no call sent stays untraced.
-- Shares are floored to 1e-12 USD in integer picodollars and the cell's remaining picodollars go one each
-- to the calls with the largest remainders (ties: call_id), so allocated + untraced = billed exactly.

CREATE OR REPLACE TABLE allocated_costs AS
WITH cells AS (
  SELECT provider, model, day, token_type,
    CAST(billed_cost_usd * 1000000000000 AS HUGEINT) AS billed_units,
    CAST(traced_tokens AS HUGEINT) AS traced_tokens,
    greatest(CAST(traced_tokens AS HUGEINT), CAST(ceil(coalesce(billed_tokens, 0)) AS HUGEINT)) AS denominator
  FROM reconciliation
  WHERE billed_cost_usd IS NOT NULL AND traced_tokens > 0
),
targets AS (  -- the cell's allocated total: billed × traced / D, rounded half up to a picodollar (once per cell)
  SELECT *, rc_fdiv(2 * billed_units * traced_tokens + denominator, 2 * denominator) AS cell_target FROM cells
),
shares AS (
  SELECT k.call_id, k.provider, k.model, k.day, k.token_type, k.tokens, c.denominator,
    c.billed_units * k.tokens AS numerator, c.cell_target
  FROM rc_call_cells k
  JOIN targets c ON c.provider = k.provider AND c.model IS NOT DISTINCT FROM k.model AND c.day = k.day
              AND c.token_type = k.token_type
),
floored AS (
  SELECT *, numerator - floor_units * denominator AS remainder
  FROM (SELECT *, rc_fdiv(numerator, denominator) AS floor_units FROM shares)
),
ranked AS (
  SELECT *,
    cell_target - sum(floor_units) OVER cell AS leftover,
    row_number() OVER (cell ORDER BY remainder DESC, call_id) AS remainder_rank
  FROM floored
  WINDOW cell AS (PARTITION BY provider, model, day, token_type)
)
SELECT
  call_id, provider, model, day, token_type,
  tokens,                                                   -- the call's tokens of this type
  rc_money(floor_units + CASE WHEN remainder_rank <= leftover THEN 1 ELSE 0 END) AS allocated_cost_usd
FROM ranked
ORDER BY day;  -- a period's read (invoice_shares_in) skips the other days' row groups

CREATE OR REPLACE TABLE untraced_costs AS
WITH allocated AS (
  SELECT provider, model, day, token_type, sum(allocated_cost_usd) AS allocated_cost_usd, count(*) AS calls
  FROM allocated_costs GROUP BY ALL
)
SELECT
  r.provider, r.model, r.day, r.token_type,
  r.billed_cost_usd,
  CAST(coalesce(a.allocated_cost_usd, 0) AS DECIMAL(38, 12)) AS allocated_cost_usd,
  CAST(r.billed_cost_usd - coalesce(a.allocated_cost_usd, 0) AS DECIMAL(38, 12)) AS untraced_cost_usd,
  r.billed_tokens, r.traced_tokens,
  coalesce(a.calls, 0) AS allocated_calls,
  r.cause                                                  -- why billed and traced differ (reconciliation)
FROM reconciliation r
LEFT JOIN allocated a ON a.provider = r.provider AND a.model IS NOT DISTINCT FROM r.model AND a.day = r.day
                     AND a.token_type = r.token_type
WHERE r.billed_cost_usd IS NOT NULL
ORDER BY r.provider, r.model NULLS LAST, r.day, r.token_type;

-- invoice_shares_in(since, until, unstarted): per call, the sums of its shares in the cells of the UTC days that
-- overlap [since, until). A call's shares sit in the cell of the day it started, so these are the shares of the calls
-- started in the period (and, when a bound is not midnight, of the other calls of its first and last days: read them
-- joined to the period's calls). A period of whole days gives each day's calls once, so the rows of adjacent periods
-- never overlap. Calls without a start are in no cell (`unstarted` is there for the shape of the period macros).
-- One row per call_id with a share; the per-call sums without the calls themselves, so a reader joining them to
-- `requests_in` does not read the calls twice.
CREATE OR REPLACE MACRO invoice_shares_in(since, until, unstarted) AS TABLE
SELECT
  call_id,
  CAST(sum(allocated_cost_usd) FILTER (WHERE token_type <> 'output') AS DECIMAL(38, 12))
    AS input_cost_usd_invoice,                             -- uncached input + cache read + cache write (prefill)
  CAST(sum(allocated_cost_usd) FILTER (WHERE token_type = 'output') AS DECIMAL(38, 12))
    AS output_cost_usd_invoice,                            -- output, reasoning included (decode)
  CAST(sum(allocated_cost_usd) AS DECIMAL(38, 12)) AS cost_usd_invoice
FROM allocated_costs
WHERE (since IS NULL OR day >= CAST(since AS DATE)) AND (until IS NULL OR CAST(day AS TIMESTAMP) < CAST(until AS TIMESTAMP))
GROUP BY call_id;

-- invoice_costs_in(since, until, unstarted): invoice_costs of the calls started in [since, until) (with
-- `unstarted`, also those without a start, which no cell covers). The calls and their workloads are filtered on
-- their own start (call_attribution keeps the start it was built with) and their shares on the day of their cell,
-- so a period's read skips the other periods' row groups. One row per call: the other columns are the call's own.
CREATE OR REPLACE MACRO invoice_costs_in(since, until, unstarted) AS TABLE
SELECT
  c.call_id, c.started_at, c.provider, c.model,
  coalesce(w.workload, default_workload(c.workload_hint, c.service)) AS workload,
  c.team, c.project,
  a.input_cost_usd_invoice,                                -- NULL: no billed cell covers the call's input
  a.output_cost_usd_invoice,
  a.cost_usd_invoice                                       -- NULL: no billed cell covers the call
FROM (SELECT * FROM raw_calls WHERE pl_started_in(started_at, since, until, unstarted)) c
LEFT JOIN (SELECT call_id, workload FROM call_attribution WHERE pl_started_in(started_at, since, until, unstarted)) w
  ON w.call_id = c.call_id
LEFT JOIN invoice_shares_in(since, until, unstarted) a ON a.call_id = c.call_id;

-- invoice_costs: every call's (read after the attribution stage: the workload is the built one)
CREATE OR REPLACE VIEW invoice_costs AS SELECT * FROM invoice_costs_in(NULL, NULL, true);
-- invoice_shares: every call's shares (the calls with one)
CREATE OR REPLACE VIEW invoice_shares AS SELECT * FROM invoice_shares_in(NULL, NULL, true);
