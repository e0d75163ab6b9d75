-- call_sample from the days' candidates (rollup_sample.sql): the same picks over all of them, per workload.
CREATE OR REPLACE TEMP VIEW _pl_sample_candidates AS
SELECT *, NULL::TIMESTAMP AS pick_day FROM published.call_sample_days;

CREATE TABLE published.call_sample AS
SELECT c.* EXCLUDE (day, pick_day),
  CASE WHEN list_contains(p.slowest, c.call_id) THEN 'slowest TTFT'
       WHEN list_contains(p.priciest, c.call_id) THEN 'most expensive' ELSE 'latest' END AS picked_as
FROM _pl_sample_candidates c
JOIN _pl_sample_picks('_pl_sample_candidates') p ON p.workload IS NOT DISTINCT FROM c.workload
WHERE list_contains(list_concat(p.latest, p.slowest, p.priciest), c.call_id)
ORDER BY c.workload, c.started_at DESC NULLS LAST, c.call_id;
