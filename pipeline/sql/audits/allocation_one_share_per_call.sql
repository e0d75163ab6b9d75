-- audit allocation_one_share_per_call: each call holds at most one share of a billed cell in allocated_costs
-- (one row per call_id and token type), so no call carries its part of the invoice twice.
SELECT call_id, token_type, count(*) AS shares, sum(allocated_cost_usd) AS allocated_usd
FROM allocated_costs
GROUP BY call_id, token_type
HAVING count(*) > 1
ORDER BY call_id, token_type
