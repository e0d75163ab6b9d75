-- calls_by_model_day: calls, unpriced calls and their tokens per UTC day of started_at × provider × model (calls
-- without a start time share one NULL day). Upstream: _pl_calls (the `requests` rows of the days being
-- published; pipeline/publish.py assembles the snapshot's table). `unpriced_models` and `freshness` sum it.
CREATE OR REPLACE TEMP TABLE _pl_part_calls_by_model_day AS
SELECT date_trunc('day', started_at) AS day,
       coalesce(provider, '(unknown)') AS provider, coalesce(model, '(unknown)') AS model,
       count(*) FILTER (WHERE NOT priced) AS unpriced_calls, count(*) AS calls,
       sum(input_tokens) FILTER (WHERE NOT priced) AS unpriced_input_tokens,
       sum(output_tokens) FILTER (WHERE NOT priced) AS unpriced_output_tokens,
       min(started_at) AS first_call_at, max(started_at) AS last_call_at
FROM _pl_calls GROUP BY ALL;
