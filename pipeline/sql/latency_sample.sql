-- latency_sample (temp table): the calls a latency fit learns from. Grain: one row per sampled call.
-- Upstream: latency_calls. Parameters: $cap (about the most calls per group and evidence), $holdout_bp
-- (holdout share in 1/10000). Successful calls of a named model with known tokens only.
-- evidence: has_split = a measured TTFT and decode time; otherwise only the end-to-end time.
-- Fits are per UTC day (a call's estimate depends on its own day's calls only, so a build after new loads
-- refits the touched days alone). The cap applies per (provider, model, kind, day, evidence): a group of n calls keeps those whose 32-bit md5
-- bucket lies below cap / n of the range (about cap calls, never a sort of the whole table), so measured
-- calls are never crowded out by unmeasured ones and the same store always yields the same sample.
CREATE OR REPLACE TEMP TABLE latency_sample AS
WITH usable AS (
  SELECT
    *,
    (kind = 'generation' AND measured AND output_tokens IS NOT NULL
      AND ttft_obs_s >= 0 AND decode_obs_s >= 0) AS has_split
  FROM latency_calls
  WHERE status = 'ok' AND model IS NOT NULL AND prefill_tokens IS NOT NULL
    AND (kind = 'embeddings' OR output_tokens IS NOT NULL)
),
evidence AS (
  SELECT * FROM usable WHERE has_split OR e2e_s > 0
),
sizes AS (
  SELECT
    provider, model, kind, day, has_split, count(*) AS n,
    dense_rank() OVER (ORDER BY provider NULLS FIRST, model, kind, day NULLS FIRST) AS grp
  FROM evidence
  GROUP BY provider, model, kind, day, has_split
),
sampled AS (
  SELECT e.*, s.grp
  FROM evidence e
  JOIN sizes s
    ON s.provider IS NOT DISTINCT FROM e.provider AND s.model = e.model AND s.kind = e.kind
   AND s.day IS NOT DISTINCT FROM e.day AND s.has_split = e.has_split
  WHERE s.n <= $cap OR e.call_hash < 4294967296.0 * $cap / s.n
)
SELECT
  grp,
  provider, model, kind, day,
  has_split,
  CAST(prefill_tokens AS DOUBLE) AS prefill_tokens,
  CAST(cached_tokens AS DOUBLE) AS cached_tokens,
  CAST(decode_tokens AS DOUBLE) AS decode_tokens,
  CASE WHEN has_split THEN ttft_obs_s END AS ttft_s,
  CASE WHEN has_split THEN decode_obs_s END AS decode_s,
  CASE WHEN e2e_s > 0 THEN e2e_s END AS e2e_s,
  call_hash % 10000 < $holdout_bp AS holdout,
  call_hash
FROM sampled;
