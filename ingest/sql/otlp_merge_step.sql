-- one round of label propagation over otlp_edges: every span takes the smallest label among itself and its links
CREATE OR REPLACE TEMP TABLE otlp_labels AS
WITH links AS (
  SELECT a_trace AS trace_id, a_span AS span_id, b_trace AS o_trace, b_span AS o_span FROM otlp_edges
  UNION ALL SELECT b_trace, b_span, a_trace, a_span FROM otlp_edges
)
SELECT l.trace_id, l.span_id, least(l.label, min(o.label)) AS label
FROM otlp_labels l
LEFT JOIN links k ON k.trace_id = l.trace_id AND k.span_id = l.span_id
LEFT JOIN otlp_labels o ON o.trace_id = k.o_trace AND o.span_id = k.o_span
GROUP BY l.trace_id, l.span_id, l.label;
