-- call_sample from the days' candidates (rollup_sample.sql): the same picks over all of them, per workload.
CREATE OR REPLACE TEMP VIEW _pl_sample_candidates AS
SELECT *, NULL::TIMESTAMP AS pick_day FROM published.call_sample_days;

CREATE TABLE published.call_sample AS
SELECT * EXCLUDE (day, pick_day, latest_rank, slowest_rank, priciest_rank),
  CASE WHEN slowest_rank <= _pl_sample_slowest() THEN 'slowest TTFT'
       WHEN priciest_rank <= _pl_sample_priciest() THEN 'most expensive' ELSE 'latest' END AS picked_as
FROM _pl_sample_picks('_pl_sample_candidates')
ORDER BY workload, started_at DESC NULLS LAST, call_id;
