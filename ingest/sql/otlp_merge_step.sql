-- one round of label propagation over otlp_edges: every span takes the smallest label among itself and its links.
-- Only linked spans are grouped (most spans have no link and keep their label); a span is one row of otlp_labels,
-- as of otlp_ok, where the chunk's repeated spans are already dropped (otlp_carry.carry_in).
CREATE OR REPLACE TEMP TABLE otlp_labels AS
WITH links AS (
  SELECT a_trace AS trace_id, a_span AS span_id, b_trace AS o_trace, b_span AS o_span FROM otlp_edges
  UNION ALL SELECT b_trace, b_span, a_trace, a_span FROM otlp_edges
),
linked AS (
  SELECT k.trace_id, k.span_id, min(o.label) AS label
  FROM links k JOIN otlp_labels o ON o.trace_id = k.o_trace AND o.span_id = k.o_span
  GROUP BY k.trace_id, k.span_id
)
-- a label's fields (start, trace, span) are never NULL (the span passed the checks), so `<` orders labels as
-- min does; `least` would too, at twice the time
SELECT l.trace_id, l.span_id, CASE WHEN k.label < l.label THEN k.label ELSE l.label END AS label
FROM otlp_labels l
LEFT JOIN linked k USING (trace_id, span_id);
