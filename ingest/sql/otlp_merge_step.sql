-- one round of label propagation over otlp_edges: each span whose links, or the span its label names, hold a
-- smaller label takes the smallest (a span without links keeps its own). Run until a round changes nothing
-- (ingest/otlp.py). Labels only fall, and each is the label of a span linked to it, so every span of a group ends
-- with its earliest span's label. Taking the label of the span one's label names halves a chain's remaining
-- length each round: a call whose spans nest a thousand deep takes about a dozen rounds, not a thousand.
-- A label's fields (start, trace, span) are never NULL (the span passed the checks), so `<` orders labels as min does.
WITH links AS (
  SELECT a_trace AS trace_id, a_span AS span_id, b_trace AS o_trace, b_span AS o_span FROM otlp_edges
  UNION ALL SELECT b_trace, b_span, a_trace, a_span FROM otlp_edges
  UNION ALL SELECT trace_id, span_id, label.t, label.i FROM otlp_labels WHERE label.i <> span_id OR label.t <> trace_id
),
linked AS (
  SELECT k.trace_id, k.span_id, min(o.label) AS label
  FROM links k JOIN otlp_labels o ON o.trace_id = k.o_trace AND o.span_id = k.o_span
  GROUP BY k.trace_id, k.span_id
)
UPDATE otlp_labels l SET label = k.label
FROM linked k
WHERE l.trace_id = k.trace_id AND l.span_id = k.span_id AND k.label < l.label;
