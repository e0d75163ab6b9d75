-- dimensions: the values each dashboard filter offers, with their calls. Grain: (dimension, value).
-- Upstream: published.rollup_hourly.
CREATE TABLE published.dimensions AS
SELECT dimension, value, sum(calls)::BIGINT AS calls FROM (
  SELECT 'provider' AS dimension, provider AS value, calls FROM published.rollup_hourly
  UNION ALL SELECT 'model', model, calls FROM published.rollup_hourly
  UNION ALL SELECT 'workload', workload, calls FROM published.rollup_hourly
  UNION ALL SELECT 'team', team, calls FROM published.rollup_hourly
)
GROUP BY ALL ORDER BY dimension, calls DESC, value;
