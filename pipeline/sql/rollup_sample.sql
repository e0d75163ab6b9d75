-- call_sample: the calls behind a workload, bounded so the snapshot stays small at any store size.
-- Grain: call_id; per workload at most the 100 latest calls, the 50 with the longest TTFT and the 50 most
-- expensive (a call picked twice appears once; ties go to the smaller call_id). Never any prompt or completion text.
-- Two steps, so a publish recomputes only the days it was given: the candidates of each UTC day (the same picks
-- within the day, `call_sample_days`, assembled by pipeline/publish.py from _pl_calls and the previous snapshot),
-- then the picks over all days' candidates. A call among a workload's 100 latest overall is among its day's 100
-- latest, so the second step picks exactly what one pass over every call would.
-- The day's candidates are found in one grouped pass (a bounded min_by per rule); the ranks that name why a call was
-- picked are computed on the candidates only.

CREATE OR REPLACE TEMP MACRO _pl_sample_latest() AS 100;
CREATE OR REPLACE TEMP MACRO _pl_sample_slowest() AS 50;
CREATE OR REPLACE TEMP MACRO _pl_sample_priciest() AS 50;

CREATE OR REPLACE TEMP MACRO _pl_sample_picks(rel) AS TABLE
SELECT * FROM (
  SELECT *,
    CASE WHEN started_at IS NOT NULL THEN row_number() OVER (
      PARTITION BY pick_day, workload ORDER BY started_at IS NULL, started_at DESC, call_id) END AS latest_rank,
    CASE WHEN ttft_s IS NOT NULL THEN row_number() OVER (
      PARTITION BY pick_day, workload ORDER BY ttft_s IS NULL, ttft_s DESC, call_id) END AS slowest_rank,
    CASE WHEN cost_usd IS NOT NULL THEN row_number() OVER (
      PARTITION BY pick_day, workload ORDER BY cost_usd IS NULL, cost_usd DESC, call_id) END AS priciest_rank
  FROM query_table(rel)
)
WHERE latest_rank <= _pl_sample_latest() OR slowest_rank <= _pl_sample_slowest() OR priciest_rank <= _pl_sample_priciest();

CREATE OR REPLACE TEMP VIEW _pl_sample_rows AS
SELECT
  CAST(date_trunc('day', r.started_at) AS TIMESTAMP) AS day, date_trunc('day', r.started_at) AS pick_day,
  r.call_id, r.trace_id, r.started_at, r.workload,
  coalesce(r.provider, '(unknown)') AS provider, coalesce(r.model, '(unknown)') AS model,
  coalesce(r.team, '(none)') AS team, coalesce(r.project, '(none)') AS project,
  date_trunc('hour', r.started_at) AS hour,
  r.status, r.streaming, r.input_tokens, r.cache_read_tokens, r.output_tokens,
  r.ttft_s, r.itl_s, r.e2e_s, r.queue_s, r.timing_source, r.cost_usd, r.priced, r.source, r.source_locator
FROM _pl_calls r;

-- the rows _pl_sample_picks would keep of each day, in one grouped pass instead of ranking every call of the day
-- three times: min_by over (descending key, call_id) keeps the same top rows, ties to the smaller call_id, with a
-- NaN first as ORDER BY ... DESC puts it
CREATE OR REPLACE TEMP TABLE _pl_part_call_sample_days AS
WITH picks AS (
  SELECT DISTINCT unnest(list_concat(
    min_by(call_id, {k: -epoch_us(started_at), c: call_id}, _pl_sample_latest()) FILTER (WHERE started_at IS NOT NULL),
    min_by(call_id, {n: NOT isnan(ttft_s), k: -ttft_s, c: call_id}, _pl_sample_slowest()) FILTER (WHERE ttft_s IS NOT NULL),
    min_by(call_id, {k: -cost_usd, c: call_id}, _pl_sample_priciest()) FILTER (WHERE cost_usd IS NOT NULL)
  )) AS call_id
  FROM _pl_sample_rows
  GROUP BY pick_day, workload
)
SELECT * EXCLUDE (pick_day) FROM _pl_sample_rows SEMI JOIN picks USING (call_id);
