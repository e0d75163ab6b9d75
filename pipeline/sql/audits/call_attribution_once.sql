-- audit call_attribution_once: every raw call appears exactly once in call_attribution, and nothing else does.
-- Returns one row per offending call_id: how many times call_attribution holds it (0: missing; 2 or more:
-- duplicated; a call_id with no raw call is `not_a_raw_call`).
WITH counted AS (
  SELECT call_id, count(*) AS rows_in_call_attribution FROM call_attribution GROUP BY call_id
)
SELECT coalesce(r.call_id, a.call_id) AS call_id,
       coalesce(a.rows_in_call_attribution, 0) AS rows_in_call_attribution,
       CASE WHEN r.call_id IS NULL THEN 'not_a_raw_call'
            WHEN a.call_id IS NULL THEN 'missing'
            ELSE 'duplicated' END AS problem
FROM (SELECT DISTINCT call_id FROM raw_calls) r
FULL JOIN counted a ON a.call_id = r.call_id
WHERE r.call_id IS NULL OR a.call_id IS NULL OR a.rows_in_call_attribution <> 1
ORDER BY call_id
