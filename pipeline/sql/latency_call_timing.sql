-- call_timing: each call's prefill/decode split. Grain: one row per raw_calls.call_id.
-- Upstream: latency_calls (temp view over raw_calls), latency_fits (one fit per provider, model, kind and day).
-- * measured / events: the source's values as they are; gaps filled by §5's definitions only
--   (prefill = TTFT, decode = e2e - TTFT, itl = decode / (output_tokens - 1)).
-- * embeddings with an e2e time: all of it is prefill, no decode (as the OTLP adapter records them).
-- * otherwise, successful calls of a fitted (provider, model, kind) with known tokens are estimated:
--     prefill = max(ttft_floor_s, ttft_intercept_s + b * prefill_tokens + b2 * prefill_tokens^2 + c * cached_tokens, 0)
--     decode  = max(decode_intercept_s + d * (output_tokens - 1), 0), and 0 for one output token or embeddings
--   When the call's e2e is known the two are made to add up to it: the gap e2e - (prefill + decode) is shared
--   in proportion to each phase's expected error variance (rel_sd * predicted)^2 (rel_sd 1 when the fit has
--   none), then clipped to [0, e2e]; one output token means all of e2e is prefill. When e2e is unknown
--   (request traces without latency) both are the model's prediction. ttft_s = prefill_s.
-- * anything else keeps timing_source 'none' and NULL times (failed calls, unknown tokens, no fit).
CREATE OR REPLACE TEMP TABLE latency_timed AS
WITH joined AS (
  SELECT
    c.*,
    f.method,
    CASE
      WHEN c.measured THEN 'copy'
      WHEN c.kind = 'embeddings' AND c.e2e_s >= 0 THEN 'embeddings'
      WHEN f.method IS NOT NULL AND c.status = 'ok' AND c.prefill_tokens IS NOT NULL
        AND (c.kind = 'embeddings' OR c.output_tokens IS NOT NULL) THEN 'estimate'
      ELSE 'none'
    END AS how,
    greatest(
      coalesce(f.ttft_floor_s, 0),
      coalesce(f.ttft_intercept_s, 0)
        + coalesce(f.ttft_s_per_uncached_token, 0) * c.prefill_tokens
        + coalesce(f.ttft_s_per_uncached_token_sq, 0) * c.prefill_tokens * c.prefill_tokens
        + coalesce(f.ttft_s_per_cached_token, 0) * c.cached_tokens,
      0
    ) AS pred_prefill_s,
    CASE WHEN c.decode_tokens = 0 THEN 0.0
         ELSE greatest(coalesce(f.decode_intercept_s, 0) + coalesce(f.decode_s_per_output_token, 0) * c.decode_tokens, 0)
    END AS pred_decode_s,
    coalesce(f.ttft_rel_sd, 1.0) AS ttft_rel_sd,
    coalesce(f.decode_rel_sd, 1.0) AS decode_rel_sd
  FROM latency_calls c
  LEFT JOIN latency_fits f
    ON f.provider IS NOT DISTINCT FROM c.provider AND f.model = c.model AND f.kind = c.kind
   AND f.day IS NOT DISTINCT FROM c.day AND f.method <> 'none'
),
weighed AS (
  SELECT
    *,
    e2e_s - pred_prefill_s - pred_decode_s AS gap_s,
    (ttft_rel_sd * pred_prefill_s) ** 2 AS var_prefill,
    (decode_rel_sd * pred_decode_s) ** 2 AS var_decode
  FROM joined
),
given_e2e AS (
  SELECT
    *,
    CASE WHEN pred_decode_s = 0 THEN e2e_s
         WHEN var_prefill + var_decode = 0 THEN 0.0
         ELSE least(greatest(pred_prefill_s + gap_s * var_prefill / (var_prefill + var_decode), 0.0), e2e_s)
    END AS fitted_prefill_s
  FROM weighed
),
split AS (
  SELECT
    *,
    CASE how
      WHEN 'copy' THEN coalesce(prefill_s, ttft_s)
      WHEN 'embeddings' THEN e2e_s
      WHEN 'estimate' THEN
        CASE WHEN e2e_s IS NULL OR e2e_s < 0 THEN pred_prefill_s ELSE fitted_prefill_s END
    END AS out_prefill_s,
    CASE how
      WHEN 'copy' THEN coalesce(decode_s, e2e_s - coalesce(ttft_s, prefill_s))
      WHEN 'embeddings' THEN 0.0
      WHEN 'estimate' THEN
        CASE WHEN e2e_s IS NULL OR e2e_s < 0 THEN pred_decode_s ELSE e2e_s - fitted_prefill_s END
    END AS out_decode_s
  FROM given_e2e
)
SELECT
  call_id, started_at, provider, model, kind, day, how,
  CASE how WHEN 'copy' THEN ttft_s
           WHEN 'estimate' THEN CASE WHEN kind = 'generation' THEN out_prefill_s END END AS ttft_s,
  out_prefill_s AS prefill_s,
  out_decode_s AS decode_s,
  CASE WHEN how = 'copy' AND itl_s IS NOT NULL THEN itl_s
       WHEN kind = 'generation' THEN itl_split(out_decode_s, output_tokens) END AS itl_s,
  CASE how WHEN 'copy' THEN timing_source
           WHEN 'embeddings' THEN 'measured'
           WHEN 'estimate' THEN 'estimated'
           ELSE 'none' END AS timing_source
FROM split;

CREATE OR REPLACE TABLE call_timing AS
SELECT
  call_id,
  started_at,      -- the call's start: an incremental build finds a few days' rows by it
  ttft_s,          -- s; estimated calls: the predicted time to first token (= prefill_s)
  prefill_s,       -- s; client view: includes network and queueing before the first token
  decode_s,        -- s; after the first token
  itl_s,           -- s per token: decode_s / (output_tokens - 1)
  timing_source    -- measured | events | estimated | none
FROM latency_timed;

-- latency_fits.n_estimated: how many calls each fit timed.
UPDATE latency_fits f SET n_estimated = t.n
FROM (SELECT provider, model, kind, day, count(*) FILTER (WHERE timing_source = 'estimated') AS n
      FROM latency_timed GROUP BY ALL) t
WHERE f.provider IS NOT DISTINCT FROM t.provider AND f.model = t.model AND f.kind = t.kind
  AND f.day IS NOT DISTINCT FROM t.day;
UPDATE latency_fits SET n_estimated = 0 WHERE n_estimated IS NULL;
DROP TABLE latency_timed;
