-- billing_daily: billed USD and tokens per UTC day of the line's period start. Grain: (day, provider, model,
-- token_type, charge_category). Upstream: billing_lines. Lines without a USD amount (no exchange rate) are
-- counted in unconverted_lines, not summed as $0.
CREATE TABLE published.billing_daily AS
SELECT
  CAST(period_start AS DATE) AS day,
  provider, coalesce(model, '(unknown)') AS model, token_type, charge_category,
  count(*) AS lines,
  count(*) FILTER (WHERE cost_usd IS NULL) AS unconverted_lines,
  sum(quantity_tokens) AS quantity_tokens,
  coalesce(sum(cost_usd), 0) AS cost_usd
FROM billing_lines
GROUP BY ALL
ORDER BY day, provider, model, token_type;
