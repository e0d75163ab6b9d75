-- audit calls_priced_or_flagged: every call is either priced (a price source and every cost column set) or
-- flagged unpriced (priced = false and every cost column NULL, never 0). Returns each call that is neither.
SELECT call_id, priced, price_source, cost_usd, input_cost_usd, output_cost_usd,
  CASE WHEN priced IS NULL THEN 'priced_flag_missing'
       WHEN priced AND price_source IS NULL THEN 'priced_without_price_source'
       WHEN priced THEN 'priced_without_cost'
       ELSE 'unpriced_with_cost' END AS problem
FROM call_attribution
WHERE priced IS NULL
   OR (priced AND (price_source IS NULL OR cost_usd IS NULL OR input_cost_usd IS NULL OR output_cost_usd IS NULL))
   OR (NOT priced AND (cost_usd IS NOT NULL OR input_cost_usd IS NOT NULL OR output_cost_usd IS NOT NULL))
ORDER BY call_id
