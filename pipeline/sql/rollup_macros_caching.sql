-- Read macros over `caching_opportunity`; created only when the build has made it.

-- Totals over the workload rows at one cache lifetime (seconds; NULL = unlimited): input USD now, USD saved at the
-- measured reuse, and how many workloads show any reuse.
CREATE MACRO caching_totals(p_lifetime_s, p_workloads) AS TABLE
SELECT sum(usd_now) AS usd_now, sum(usd_saved) AS usd_saved, count(*) FILTER (WHERE reuse_share > 0) AS workloads_with_reuse,
       count(*) AS workloads
FROM caching_opportunity
WHERE level = 'workload' AND coalesce(lifetime_s, -1) = coalesce(CAST(p_lifetime_s AS BIGINT), -1)
  AND (p_workloads IS NULL OR list_contains(p_workloads, workload));
