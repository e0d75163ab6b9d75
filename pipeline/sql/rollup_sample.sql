-- call_sample: the calls behind a workload, bounded so the snapshot stays small at any store size.
-- Grain: call_id; per workload at most the 100 latest calls, the 50 with the longest TTFT and the 50 most
-- expensive (a call picked twice appears once; ties go to the smaller call_id). Never any prompt or completion text.
-- Two steps, so a publish recomputes only the days it was given: the candidates of each UTC day (the same picks
-- within the day, `call_sample_days`, assembled by pipeline/publish.py from _pl_calls and the previous snapshot),
-- then the picks over all days' candidates. A call among a workload's 100 latest overall is among its day's 100
-- latest, so the second step picks exactly what one pass over every call would.
-- Both steps pick with `_pl_sample_picks`, one grouped pass with a bounded min_by per rule.

CREATE OR REPLACE TEMP MACRO _pl_sample_latest() AS 100;
CREATE OR REPLACE TEMP MACRO _pl_sample_slowest() AS 50;
CREATE OR REPLACE TEMP MACRO _pl_sample_priciest() AS 50;

-- the rules, once: per (pick_day, workload) of `rel`, the call_ids each rule picks. min_by over (descending key,
-- call_id) keeps the top rows, ties to the smaller call_id, a NaN TTFT first as ORDER BY ... DESC puts it
CREATE OR REPLACE TEMP MACRO _pl_sample_picks(rel) AS TABLE
SELECT
  pick_day, workload,
  min_by(call_id, {k: -epoch_us(started_at), c: call_id}, _pl_sample_latest())
    FILTER (WHERE started_at IS NOT NULL) AS latest,
  min_by(call_id, {n: NOT isnan(ttft_s), k: -ttft_s, c: call_id}, _pl_sample_slowest())
    FILTER (WHERE ttft_s IS NOT NULL) AS slowest,
  min_by(call_id, {k: -cost_usd, c: call_id}, _pl_sample_priciest())
    FILTER (WHERE cost_usd IS NOT NULL) AS priciest
FROM query_table(rel)
GROUP BY pick_day, workload;

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

-- each day's candidates: the calls any rule picks within their day
CREATE OR REPLACE TEMP TABLE _pl_part_call_sample_days AS
WITH picks AS (
  SELECT DISTINCT unnest(list_concat(latest, slowest, priciest)) AS call_id FROM _pl_sample_picks('_pl_sample_rows')
)
SELECT * EXCLUDE (pick_day) FROM _pl_sample_rows SEMI JOIN picks USING (call_id);
