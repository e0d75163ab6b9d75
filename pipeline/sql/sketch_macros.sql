-- The one percentile method of every surface (dashboard, `workloads`, `explain`, reports): a log-bucket histogram
-- sketch. Bucket b holds values in [10^(b/40), 10^((b+1)/40)): 40 buckets per decade, each 5.9% wide. A
-- percentile p of n values is the bucket holding the nearest-rank value (the ceil(p * n)-th smallest), read at
-- the bucket's geometric centre, so it is within 10^(1/80) - 1 = 2.9% of the exact nearest-rank value. Values
-- <= 0 go to bucket -32768 (read as 0). Histograms merge by adding counts, so the published rollups give the same
-- percentile under any filter as the store gives over the calls themselves.
-- Created in every store (store.ensure_schema; a Spark build runs them first) and in every published snapshot; `publish` creates them as temporary macros on
-- the connection that writes the rollups.
CREATE OR REPLACE MACRO pl_hist_bucket(x) AS
  CASE WHEN x <= 0 THEN -32768 ELSE CAST(floor(log10(x) * 40) AS INTEGER) END::SMALLINT;

CREATE OR REPLACE MACRO pl_hist_value(b) AS CASE WHEN b = -32768 THEN 0.0 ELSE pow(10, (b + 0.5) / 40) END;

-- The nearest rank of percentile p (0-1) among n values: a bucket whose running count reaches it holds the value.
CREATE OR REPLACE MACRO pl_hist_rank(p, n) AS ceil(p * n);
