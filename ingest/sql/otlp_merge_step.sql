-- one round of label propagation over otlp_edges: each linked span whose links hold a smaller label takes the
-- smallest (a span without links keeps its own). Run until a round changes nothing (ingest/otlp.py): each round
-- carries a label one link further, so every span of a chain ends with its earliest span's label.
-- A label's fields (start, trace, span) are never NULL (the span passed the checks), so `<` orders labels as min does.
WITH links AS (
  SELECT a_trace AS trace_id, a_span AS span_id, b_trace AS o_trace, b_span AS o_span FROM otlp_edges
  UNION ALL SELECT b_trace, b_span, a_trace, a_span FROM otlp_edges
),
linked AS (
  SELECT k.trace_id, k.span_id, min(o.label) AS label
  FROM links k JOIN otlp_labels o ON o.trace_id = k.o_trace AND o.span_id = k.o_span
  GROUP BY k.trace_id, k.span_id
)
UPDATE otlp_labels l SET label = k.label
FROM linked k
WHERE l.trace_id = k.trace_id AND l.span_id = k.span_id AND k.label < l.label;
