-- Data-health relations of the snapshot. Upstream: loads, rejects, published.calls_by_model_day, phaselens_meta.

-- loads: the ingest ledger, latest 5,000 files. Grain: one row per file per ingest run.
CREATE TABLE published.loads AS
SELECT finished_at, file, adapter, kind, status, accepted, duplicates, rejected, skipped, message, run_id, load_id
FROM loads ORDER BY finished_at DESC NULLS LAST LIMIT 5000;

-- reject_summary: quarantined records per source and reason. Grain: (source, reason).
CREATE TABLE published.reject_summary AS
SELECT source, reason, count(*) AS records, min(rejected_at) AS first_rejected_at, max(rejected_at) AS last_rejected_at
FROM rejects GROUP BY ALL ORDER BY records DESC, source, reason;

-- reject_sample: the latest 20 rejects per reason with their locator and detail (raw input is left out).
CREATE TABLE published.reject_sample AS
SELECT source, reason, locator, detail, rejected_at
FROM rejects
QUALIFY row_number() OVER (PARTITION BY reason ORDER BY rejected_at DESC NULLS LAST, locator) <= 20
ORDER BY reason, rejected_at DESC NULLS LAST;

-- unpriced_models: models with calls that have no known price. Grain: (provider, model).
-- Upstream: published.calls_by_model_day (rollup_calls_by_day.sql).
CREATE TABLE published.unpriced_models AS
SELECT provider, model,
       sum(unpriced_calls)::BIGINT AS unpriced_calls, sum(calls)::BIGINT AS calls,
       sum(unpriced_input_tokens)::BIGINT AS unpriced_input_tokens,
       sum(unpriced_output_tokens)::BIGINT AS unpriced_output_tokens,
       min(first_call_at) AS first_call_at, max(last_call_at) AS last_call_at
FROM published.calls_by_model_day GROUP BY ALL HAVING sum(unpriced_calls) > 0
ORDER BY unpriced_calls DESC, provider, model;

-- freshness: one row; how current the data behind this snapshot is (UTC).
CREATE TABLE published.freshness AS
SELECT
  (SELECT coalesce(sum(calls), 0)::BIGINT FROM published.calls_by_model_day) AS calls,
  (SELECT min(first_call_at) FROM published.calls_by_model_day) AS first_call_at,
  (SELECT max(last_call_at) FROM published.calls_by_model_day) AS last_call_at,
  (SELECT max(finished_at) FROM loads) AS last_load_at,
  (SELECT count(*) FROM loads) AS loaded_files,
  (SELECT try_cast(max(value) AS TIMESTAMP) FROM phaselens_meta WHERE key = 'built_at') AS built_at,
  CAST(now() AT TIME ZONE 'UTC' AS TIMESTAMP) AS published_at;

-- source_gaps: per source and instrumentation, what it does not record (the store's `source_gaps` view).
CREATE TABLE published.source_gaps AS SELECT * FROM source_gaps;
