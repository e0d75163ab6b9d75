-- audit allocation_conserved: invoice dollars are shared out without loss or gain, in exact DECIMAL.
-- 1. per provider and UTC day: allocated (allocated_costs, per call) + untraced (untraced_costs) equals the
--    invoice dollars of the day's billed cells (reconciliation.billed_cost_usd);
-- 2. per billed cell: the allocated part has the sign of the bill and never exceeds it;
-- 3. per provider: the invoice dollars of the billed cells equal the converted money lines of the provider's
--    billing export (raw_billing_lines, usage quantities excluded), so no line is dropped or counted twice.
-- Returns one row per offending (provider, day) with the amounts and the problem; day is NULL for check 3.
WITH invoiced AS (
  SELECT provider, day, sum(billed_cost_usd) AS invoice_usd
  FROM reconciliation WHERE billed_cost_usd IS NOT NULL GROUP BY ALL
),
allocated AS (
  SELECT provider, day, sum(allocated_cost_usd) AS allocated_usd FROM allocated_costs GROUP BY ALL
),
untraced AS (
  SELECT provider, day, sum(untraced_cost_usd) AS untraced_usd FROM untraced_costs GROUP BY ALL
),
per_day AS (
  SELECT coalesce(i.provider, a.provider, u.provider) AS provider, coalesce(i.day, a.day, u.day) AS day,
    coalesce(i.invoice_usd, 0) AS invoice_usd, coalesce(a.allocated_usd, 0) AS allocated_usd,
    coalesce(u.untraced_usd, 0) AS untraced_usd
  FROM invoiced i
  FULL JOIN allocated a ON a.provider = i.provider AND a.day = i.day
  FULL JOIN untraced u ON u.provider = coalesce(i.provider, a.provider) AND u.day = coalesce(i.day, a.day)
),
cells AS (
  SELECT u.provider, u.day, sum(u.billed_cost_usd) AS invoice_usd, sum(u.allocated_cost_usd) AS allocated_usd,
         sum(u.untraced_cost_usd) AS untraced_usd
  FROM untraced_costs u
  WHERE (u.billed_cost_usd >= 0 AND (u.allocated_cost_usd < 0 OR u.allocated_cost_usd > u.billed_cost_usd))
     OR (u.billed_cost_usd < 0 AND (u.allocated_cost_usd > 0 OR u.allocated_cost_usd < u.billed_cost_usd))
  GROUP BY ALL
),
scope AS (
  SELECT provider FROM raw_billing_lines WHERE token_type <> 'other'
  UNION SELECT provider FROM raw_calls WHERE provider IS NOT NULL
),
exported AS (
  SELECT provider, sum(cost_usd) AS invoice_usd
  FROM raw_billing_lines
  WHERE charge_category <> 'usage_quantity' AND cost_usd IS NOT NULL AND provider IN (SELECT provider FROM scope)
  GROUP BY provider
),
billed AS (SELECT provider, sum(invoice_usd) AS invoice_usd FROM invoiced GROUP BY provider)
SELECT provider, day, invoice_usd, allocated_usd, untraced_usd,
       'allocated + untraced differs from the invoice' AS problem
FROM per_day WHERE allocated_usd + untraced_usd <> invoice_usd
UNION ALL
SELECT provider, day, invoice_usd, allocated_usd, untraced_usd,
       'a cell allocates more than its bill, or against its sign' AS problem
FROM cells
UNION ALL
SELECT coalesce(e.provider, b.provider), NULL, e.invoice_usd, b.invoice_usd, NULL,
       'the billed cells differ from the export''s money lines (allocated_usd: the cells'' sum)' AS problem
FROM exported e FULL JOIN billed b ON b.provider = e.provider
WHERE coalesce(e.invoice_usd, 0) <> coalesce(b.invoice_usd, 0)
ORDER BY provider, day NULLS LAST, problem
