-- reconciliation: what the provider billed against what the traces say, per (provider, model, UTC day,
-- token type), with the likely cause of every gap and an explanation that cites the numbers.
-- Grain: provider, model (NULL where the bill names none), day (UTC date), token_type.
-- Upstream: reconciliation_cells.sql (rc_billed, reconciliation_traced, reconciliation_sources, and its macros),
-- reconcile_settings (tolerances, one row), reconcile_list_prices (USD per token for billed cells no priced call
-- explains). Money stays DECIMAL: sums run on integer picodollars (HUGEINT); only ratios are DOUBLE.

CREATE OR REPLACE TABLE reconciliation AS
WITH traced AS (
  SELECT provider, model, day, token_type, traced_calls, traced_tokens, priced_tokens,
         CAST(estimated_units AS HUGEINT) AS estimated_units, unpriced_calls
  FROM reconciliation_traced
),
keys AS (
  SELECT provider, model, day, token_type FROM rc_billed
  UNION SELECT provider, model, day, token_type FROM traced
),
cells AS (
  SELECT
    k.provider, k.model, k.day, k.token_type,
    b.billed_qty_units, b.billed_units, b.usage_units, coalesce(b.money_lines, 0) AS money_lines,
    coalesce(b.unconverted_lines, 0) AS unconverted_lines, b.unconverted_currencies, b.billing_sources,
    coalesce(t.traced_calls, 0) AS traced_calls, coalesce(t.traced_tokens, 0) AS traced_tokens,
    coalesce(t.priced_tokens, 0) AS priced_tokens,
    CASE WHEN coalesce(t.traced_calls, 0) = 0 THEN 0 WHEN t.priced_tokens > 0 THEN t.estimated_units END
      AS estimated_units,
    coalesce(t.unpriced_calls, 0) AS unpriced_calls,
    p.usd_per_token AS looked_up_usd_per_token,
    CASE k.token_type WHEN 'cache_read' THEN g.cache_gap_sources WHEN 'cache_write' THEN g.cache_write_gap_sources
         WHEN 'uncached_input' THEN coalesce(g.input_gap_sources, g.cache_gap_sources)
         WHEN 'output' THEN g.output_gap_sources END AS gap_sources,
    g.all_sources, coalesce(g.streamed_calls, 0) AS streamed_calls
  FROM keys k
  LEFT JOIN rc_billed b ON b.provider = k.provider AND b.model IS NOT DISTINCT FROM k.model AND b.day = k.day
                       AND b.token_type = k.token_type
  LEFT JOIN traced t ON t.provider = k.provider AND t.model IS NOT DISTINCT FROM k.model AND t.day = k.day
                    AND t.token_type = k.token_type
  LEFT JOIN reconcile_list_prices p ON p.provider = k.provider AND p.model = k.model AND p.day = k.day
                                   AND p.token_type = k.token_type
  LEFT JOIN reconciliation_sources g ON g.provider = k.provider AND g.model IS NOT DISTINCT FROM k.model AND g.day = k.day
),
measured AS (
  SELECT
    c.*,
    rc_qty(billed_qty_units) AS billed_tokens,
    CASE WHEN money_lines > 0 THEN rc_money(billed_units) END AS billed_cost_usd,  -- NULL if none converted
    rc_money(estimated_units) AS estimated_cost_usd,
    CAST(billed_qty_units AS DOUBLE) / 1e6 AS b_tok,            -- DOUBLE copies for the tolerance tests below
    CAST(traced_tokens AS DOUBLE) AS t_tok,
    CAST(billed_units AS DOUBLE) / 1e12 AS b_usd,
    CAST(estimated_units AS DOUBLE) / 1e12 AS e_usd,
    CASE WHEN billed_qty_units > 0 AND usage_units IS NOT NULL
         THEN rc_fdiv(2 * usage_units * 1000000 + billed_qty_units, 2 * billed_qty_units) END AS billed_micro_per_mtok,
    CASE WHEN priced_tokens > 0 THEN rc_fdiv(2 * estimated_units + priced_tokens, 2 * CAST(priced_tokens AS HUGEINT))
         WHEN looked_up_usd_per_token IS NOT NULL
         THEN CAST(round(looked_up_usd_per_token * 1000000000000) AS HUGEINT) END AS list_micro_per_mtok
  FROM cells c
),
judged AS (
  SELECT
    m.*,
    b_tok - t_tok AS tok_gap,
    coalesce(b_usd, 0) - coalesce(e_usd, 0) AS usd_gap,
    b_tok IS NOT NULL AND abs(b_tok - t_tok) > greatest(s.token_tolerance * greatest(b_tok, t_tok), s.min_gap_tokens)
      AS tok_sig,
    abs(coalesce(b_usd, 0) - coalesce(e_usd, 0))
      > greatest(s.cost_tolerance * greatest(abs(coalesce(b_usd, 0)), abs(coalesce(e_usd, 0))), s.min_gap_usd)
      AS usd_sig,
    CAST(billed_micro_per_mtok AS DOUBLE) / nullif(CAST(list_micro_per_mtok AS DOUBLE), 0) - 1 AS price_dev,
    s.*
  FROM measured m CROSS JOIN reconcile_settings s
),
neighbours AS (   -- opposite, significant gaps of the same provider, model and token type one day either side
  SELECT j.provider, j.model, j.day, j.token_type,
    sum(abs(n.tok_gap)) FILTER (WHERE n.tok_sig AND sign(n.tok_gap) = -sign(j.tok_gap)) AS opp_tok,
    sum(abs(n.usd_gap)) FILTER (WHERE n.b_tok IS NULL AND n.usd_sig AND sign(n.usd_gap) = -sign(j.usd_gap)) AS opp_usd,
    string_agg(CAST(n.day AS VARCHAR), ' and ' ORDER BY n.day)
      FILTER (WHERE (n.tok_sig AND sign(n.tok_gap) = -sign(j.tok_gap))
                 OR (n.b_tok IS NULL AND n.usd_sig AND sign(n.usd_gap) = -sign(j.usd_gap))) AS opp_days
  FROM judged j
  JOIN judged n ON n.provider = j.provider AND n.model IS NOT DISTINCT FROM j.model AND n.token_type = j.token_type
               AND abs(date_diff('day', j.day, n.day)) = 1
  GROUP BY ALL
),
grouped AS (      -- input-side totals of the cell's (provider, model, day), for the missing-cache test
  SELECT j.*, x.opp_tok, x.opp_usd, x.opp_days,
    sum(j.b_tok) FILTER (WHERE j.token_type IN ('uncached_input', 'cache_read', 'cache_write')) OVER g AS b_input,
    sum(j.t_tok) FILTER (WHERE j.token_type IN ('uncached_input', 'cache_read', 'cache_write')) OVER g AS t_input,
    sum(coalesce(j.b_tok, 0) - j.t_tok) FILTER (WHERE j.token_type IN ('cache_read', 'cache_write')) OVER g
      AS cache_short,
    -- the day's uncached input is billed and traced alike: the traffic is traced, so a cache gap is the source's
    coalesce(bool_or(j.token_type = 'uncached_input' AND j.b_tok IS NOT NULL AND NOT j.tok_sig AND j.t_tok > 0) OVER g,
             false) AS input_traced
  FROM judged j
  LEFT JOIN neighbours x ON x.provider = j.provider AND x.model IS NOT DISTINCT FROM j.model AND x.day = j.day
                        AND x.token_type = j.token_type
  WINDOW g AS (PARTITION BY j.provider, j.model, j.day)
),
caused AS (
  SELECT g.*,
    CASE
      WHEN unconverted_lines > 0 THEN 'unconverted_currency'
      WHEN tok_sig AND abs(coalesce(opp_tok, 0) - abs(tok_gap)) <= edge_tolerance * abs(tok_gap)
        THEN 'time_zone_or_bucket_edge'
      WHEN b_tok IS NULL AND usd_sig AND abs(coalesce(opp_usd, 0) - abs(usd_gap)) <= edge_tolerance * abs(usd_gap)
        THEN 'time_zone_or_bucket_edge'
      WHEN tok_sig AND token_type IN ('uncached_input', 'cache_read', 'cache_write')
        AND abs(b_input - t_input) <= greatest(token_tolerance * b_input, min_gap_tokens)
        AND cache_short > greatest(token_tolerance * b_input, min_gap_tokens)
        THEN 'missing_cache_tokens'
      -- counts the instrumentation itself does not record (source_gaps): billed cache tokens the traces lack
      WHEN tok_sig AND tok_gap > 0 AND token_type IN ('cache_read', 'cache_write') AND gap_sources IS NOT NULL
        AND input_traced
        THEN 'not_recorded_by_source'
      -- an output count off by one at the source: the gap is one token per traced call, or per streamed call
      WHEN tok_sig AND token_type = 'output' AND traced_calls > 0
        AND (abs(abs(tok_gap) - traced_calls) <= greatest(0.02 * traced_calls, 1)
             OR (streamed_calls > 0 AND abs(abs(tok_gap) - streamed_calls) <= greatest(0.02 * streamed_calls, 1)))
        THEN 'not_recorded_by_source'
      WHEN tok_sig AND tok_gap > 0 THEN 'untraced_traffic'
      WHEN tok_sig AND tok_gap < 0 THEN 'unbilled_traffic'
      WHEN (b_tok IS NULL OR t_tok = 0) AND usd_sig AND usd_gap > 0 THEN 'untraced_traffic'
      WHEN b_tok IS NULL AND usd_sig AND usd_gap < 0 AND b_usd IS NOT NULL THEN 'unbilled_traffic'
      WHEN b_tok IS NULL AND money_lines = 0 AND t_tok > 0 THEN 'unbilled_traffic'
      WHEN abs(price_dev) > price_tolerance AND usd_sig THEN 'price_mismatch'
      ELSE 'ok'
    END AS cause
  FROM grouped g
)
SELECT
  provider, model, day, token_type,
  billed_tokens,                                           -- tokens the bill counts (NULL: the bill gives none)
  billed_cost_usd,                                         -- net USD billed (NULL: no money line, only usage)
  traced_calls,                                            -- traced calls with tokens of this type
  CAST(traced_tokens AS BIGINT) AS traced_tokens,
  estimated_cost_usd,                                      -- list-price cost of the traced tokens (call_costs)
  unpriced_calls,                                          -- traced calls without a list price (not in the estimate)
  CAST(billed_tokens - traced_tokens AS DECIMAL(38, 6)) AS token_delta,
  CAST(billed_cost_usd - estimated_cost_usd AS DECIMAL(38, 12)) AS cost_delta_usd,
  t_tok / nullif(b_tok, 0) AS token_coverage,              -- traced / billed tokens
  e_usd / nullif(b_usd, 0) AS cost_coverage,               -- estimated / billed USD
  CAST(CAST(billed_micro_per_mtok AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(38, 6)) AS DECIMAL(38, 6))
    AS billed_usd_per_mtok,                                -- effective billed price of usage lines, USD per 1 M
  CAST(CAST(list_micro_per_mtok AS DECIMAL(38, 0)) * CAST('0.000001' AS DECIMAL(38, 6)) AS DECIMAL(38, 6))
    AS list_usd_per_mtok,                                  -- list price, USD per 1 M tokens
  CASE
    WHEN cause = 'ok' THEN 'ok'
    WHEN cause = 'unconverted_currency' THEN 'cost_unknown'
    WHEN cause = 'price_mismatch' THEN 'cost_differs'
    WHEN t_tok = 0 THEN 'not_traced'
    WHEN money_lines = 0 AND coalesce(b_tok, 0) = 0 THEN 'not_billed'
    WHEN (CASE WHEN tok_sig THEN tok_gap ELSE usd_gap END) > 0 THEN 'billed_above_traced'
    ELSE 'traced_above_billed'
  END AS status,
  cause,
  CASE cause
    WHEN 'ok' THEN
      CASE WHEN money_lines = 0 AND b_tok IS NULL THEN 'nothing billed and nothing traced beyond tolerance'
           WHEN b_tok IS NULL THEN printf('money agrees within tolerance: %s billed, %s at list price for %s traced tokens; the bill gives no token counts (load the usage report to compare tokens)', pl_usd_text(b_usd), pl_usd_text(e_usd), rc_tok(t_tok))
           WHEN money_lines = 0 THEN printf('tokens agree (%s billed, %s traced); the bill has no money for this cell, only usage quantities', rc_tok(b_tok), rc_tok(t_tok))
           WHEN list_micro_per_mtok IS NULL AND t_tok > 0 THEN printf('tokens agree (%s billed, %s traced); no list price to check the billed %s against', rc_tok(b_tok), rc_tok(t_tok), pl_usd_text(b_usd))
           WHEN abs(price_dev) > price_tolerance THEN printf('tokens agree (%s billed, %s traced); the billed price differs from the list by %+.1f%%, but the money gap (%s billed, %s at list price) is within the %s tolerance', rc_tok(b_tok), rc_tok(t_tok), 100 * price_dev, pl_usd_text(b_usd), pl_usd_text(e_usd), pl_usd_text(min_gap_usd))
           ELSE printf('billed and traced agree within tolerance: %s tokens billed, %s traced; %s billed, %s at list price', rc_tok(b_tok), rc_tok(t_tok), pl_usd_text(b_usd), pl_usd_text(e_usd)) END
    WHEN 'unconverted_currency' THEN
      printf('%d billing line(s) in %s have no USD rate, so the billed cost is incomplete: ingest the export again with --fx %s=RATE (USD per unit)', unconverted_lines, unconverted_currencies, split_part(unconverted_currencies, ', ', 1))
    WHEN 'time_zone_or_bucket_edge' THEN
      CASE WHEN tok_sig THEN
        printf('billed %s tokens %s than traced (%s billed, %s traced) while %s show(s) %s the other way: the export''s daily buckets do not start at UTC midnight (another time zone) or calls near midnight fall in the neighbouring bucket', rc_tok(abs(tok_gap)), CASE WHEN tok_gap > 0 THEN 'more' ELSE 'fewer' END, rc_tok(b_tok), rc_tok(t_tok), opp_days, rc_tok(opp_tok))
      ELSE
        printf('billed %s %s than the list-price estimate (%s billed, %s estimated) while %s show(s) %s the other way: the export''s daily buckets do not start at UTC midnight (another time zone) or calls near midnight fall in the neighbouring bucket', pl_usd_text(abs(usd_gap)), CASE WHEN usd_gap > 0 THEN 'more' ELSE 'less' END, pl_usd_text(b_usd), pl_usd_text(e_usd), opp_days, pl_usd_text(opp_usd))
      END
    WHEN 'missing_cache_tokens' THEN
      CASE WHEN token_type = 'uncached_input' THEN
        printf('traced %s more uncached input tokens than billed (%s traced, %s billed) while the bill has %s more cache tokens than the traces and total input agrees (%s billed, %s traced): traces count cached tokens as uncached input (%s), so the list-price estimate is too high', rc_tok(-tok_gap), rc_tok(t_tok), rc_tok(b_tok), rc_tok(cache_short), rc_tok(b_input), rc_tok(t_input),
          coalesce('cache counts not recorded by ' || gap_sources, 'an instrumentation that records no cache attributes'))
      ELSE
        printf('billed %s %s tokens but traces report %s, while total input agrees (%s billed, %s traced): traces count cached tokens as uncached input (%s)', rc_tok(b_tok), replace(token_type, '_', '-'), rc_tok(t_tok), rc_tok(b_input), rc_tok(t_input),
          coalesce('cache counts not recorded by ' || gap_sources, 'an instrumentation that records no cache attributes'))
      END
    WHEN 'not_recorded_by_source' THEN
      CASE WHEN token_type = 'output' THEN
        CASE WHEN abs(abs(tok_gap) - traced_calls) <= greatest(0.02 * traced_calls, 1) THEN
          printf('billed %s output tokens %s than traced (%s billed, %s traced) over %d traced call(s), one token per call: the output count of %s is off by one', rc_tok(abs(tok_gap)), CASE WHEN tok_gap > 0 THEN 'more' ELSE 'fewer' END, rc_tok(b_tok), rc_tok(t_tok), traced_calls, coalesce(all_sources, 'the instrumentation'))
        ELSE
          printf('billed %s output tokens %s than traced (%s billed, %s traced), one token per streamed call (%d of %d traced calls streamed): the output count of %s is off by one on streamed calls', rc_tok(abs(tok_gap)), CASE WHEN tok_gap > 0 THEN 'more' ELSE 'fewer' END, rc_tok(b_tok), rc_tok(t_tok), streamed_calls, traced_calls, coalesce(all_sources, 'the instrumentation'))
        END
      ELSE
        printf('billed %s %s tokens but traces report %s: %s not recorded by %s (see `phaselens loads --gaps`), so the traced estimate misses them', rc_tok(b_tok), replace(token_type, '_', '-'), rc_tok(t_tok), CASE token_type WHEN 'cache_write' THEN 'cache writes' ELSE 'cache reads' END, gap_sources)
      END
    WHEN 'untraced_traffic' THEN
      CASE WHEN token_type = 'other' THEN
        printf('billed %s of non-token charges (tools, storage, fees) that no traced call explains', pl_usd_text(b_usd))
      WHEN model IS NULL THEN
        printf('billed %s the bill names no model for; export it grouped by model (line item or description) to reconcile per model', pl_usd_text(b_usd))
      WHEN b_tok IS NULL THEN
        printf('billed %s more than the %d traced call(s) cost at list price (%s billed, %s estimated) and the bill gives no token counts: traffic with no traces, or a price difference (load the provider''s usage report to tell them apart)', pl_usd_text(usd_gap), traced_calls, pl_usd_text(b_usd), pl_usd_text(e_usd))
      ELSE
        printf('billed %s tokens more than traced (%s billed, %s traced)%s: traffic with no traces (e.g. a service that is not instrumented)%s%s', rc_tok(tok_gap), rc_tok(b_tok), rc_tok(t_tok),
          CASE WHEN billed_micro_per_mtok IS NOT NULL AND list_micro_per_mtok IS NOT NULL
                 THEN printf(' at %s/M against a list price of %s/M', rc_price(CAST(billed_micro_per_mtok AS DOUBLE) / 1e6), rc_price(CAST(list_micro_per_mtok AS DOUBLE) / 1e6))
               WHEN billed_micro_per_mtok IS NOT NULL THEN printf(' at %s/M (no list price known)', rc_price(CAST(billed_micro_per_mtok AS DOUBLE) / 1e6))
               WHEN list_micro_per_mtok IS NOT NULL THEN printf(' (no money line prices them; %s/M at list price)', rc_price(CAST(list_micro_per_mtok AS DOUBLE) / 1e6))
               ELSE '' END,
          CASE WHEN b_usd IS NOT NULL THEN printf('; %s of the bill stays untraced', pl_usd_text(b_usd * tok_gap / nullif(b_tok, 0))) ELSE '' END,
          CASE WHEN abs(price_dev) > price_tolerance THEN printf('; the billed price also differs from the list by %+.1f%%', 100 * price_dev) ELSE '' END)
      END
    WHEN 'unbilled_traffic' THEN
      CASE WHEN money_lines = 0 AND coalesce(b_tok, 0) = 0 THEN
        printf('%d traced call(s) with %s tokens (%s at list price) that no bill line covers: another account or project, a bill not loaded for this day, or free or credit usage', traced_calls, rc_tok(t_tok), pl_usd_text(e_usd))
      WHEN b_tok IS NULL THEN
        printf('billed %s less than the %d traced call(s) cost at list price (%s billed, %s estimated) and the bill gives no token counts: calls the bill does not cover, or a discount', pl_usd_text(-usd_gap), traced_calls, pl_usd_text(b_usd), pl_usd_text(e_usd))
      ELSE
        printf('traced %s tokens more than billed (%s traced, %s billed): calls no bill line covers (another account or project, a bill not loaded for this day, or free or credit usage)', rc_tok(-tok_gap), rc_tok(t_tok), rc_tok(b_tok))
      END
    WHEN 'price_mismatch' THEN
      printf('tokens agree (%s billed, %s traced) but money does not: billed %s against %s at list price, an effective %s/M against the list %s/M (%+.1f%%): a price change, discount or tier the price book does not have', rc_tok(b_tok), rc_tok(t_tok), pl_usd_text(b_usd), pl_usd_text(e_usd), rc_price(CAST(billed_micro_per_mtok AS DOUBLE) / 1e6), rc_price(CAST(list_micro_per_mtok AS DOUBLE) / 1e6), 100 * price_dev)
  END AS explanation,
  billing_sources,                                         -- billing adapters whose lines make up the cell
  unconverted_lines,                                       -- non-USD lines without a conversion rate
  gap_sources                                              -- sources of the cell's calls that lose this token type
FROM caused
ORDER BY provider, model NULLS LAST, day, token_type;
