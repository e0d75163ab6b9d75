-- How figures read inside the texts the build writes (diagnoses, levers, caching notes, reconciliation
-- explanations), written once for every relation that writes a text. Every store keeps them (store.ensure_schema),
-- a Spark build runs them first (STORE_SCHEMA_FILES) and so its lake's catalog replays them, and every published
-- snapshot keeps them, so a text reads the same wherever it is computed.

-- Money rounded to the cent, half up, as every surface rounds it (a DECIMAL).
CREATE OR REPLACE MACRO pl_cents(usd) AS round(CAST(usd AS DECIMAL(38, 12)), 2);

-- Money, to the cent, rounded half up with thousands separators, as every surface shows money
-- (models/text.py `usd`): 1234.5 -> '$1,234.50', -12.345 -> '-$12.35'. In a sentence a non-zero amount below half a cent reads
-- 'under $0.01', never '$0.00'; no amount reads 'unknown'.
CREATE OR REPLACE MACRO pl_usd_text(usd) AS
  CASE WHEN usd IS NULL THEN 'unknown'
       WHEN usd <> 0 AND abs(usd) < 0.005 THEN 'under $0.01'
       ELSE CASE WHEN pl_cents(usd) < 0 THEN '-' ELSE '' END || printf('$%,.2f', abs(pl_cents(usd))) END;
