-- audit shares_within_unit_range: every share the build publishes per workload (time, cost, queue, cache
-- reuse, cache writes: the `workloads` columns ending in `_share`) lies within [0, 1]. Returns one row per
-- (workload, share) outside it; NULL shares (nothing to divide) are not an error.
SELECT workload, share, value
FROM (UNPIVOT workloads ON COLUMNS('.*_share$') INTO NAME share VALUE value)
WHERE value < 0 OR value > 1 OR isnan(value)
ORDER BY workload, share
