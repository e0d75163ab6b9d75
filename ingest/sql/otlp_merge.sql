-- otlp_merge: one row per model call when several spans describe it (docs/ingest.md, "One call, one row").
-- Input: otlp_spans (one row per span). Output: otlp_edges(a, b) linking spans of one call, consumed by
-- otlp_groups (below, after label propagation in ingest/otlp.py) and otlp_calls.
-- Links, all within one trace unless said otherwise:
--   1. same gen_ai.response.id;
--   2. a call span and its nearest call ancestor (through non-call spans, at most 8 levels up) when their
--      times overlap, they name the same model (or the same response id), and the ancestor has no other such child;
--   3. Logfire: a "streaming response" log span (its own trace) and the latest request span of the same
--      scope, service and model that ended by the time the stream started (+50 ms), carrying no usage;
--   4. a provider SDK's own span (scopes: conventions.SDK_SCOPES) that is the root of its own trace (the instrumentation's
--      context did not reach it) and the instrumentation span of another trace, same service and model, that
--      encloses it (started no later, ended no more than 50 ms before it), no conflicting response id: each
--      takes the other as nearest (the SDK span the latest-started enclosing span, that span the
--      earliest-started SDK span it encloses), so each call pairs once even under concurrency;
--   5. disaggregated serving: an engine span on a prefill worker (vLLM `llm_request` with one output token,
--      SGLang "prefill Req ...") and one of the same model on a decode worker with the same request id
--      (`gen_ai.request.id`) or bootstrap room, in any trace: each decode span takes the nearest such prefill span.
-- a view: the merge and otlp_calls read the call spans where they lie (nothing changes otlp_spans after this),
-- rather than from a copy of their wide rows
CREATE OR REPLACE TEMP VIEW otlp_ok AS
SELECT *, {{SDK_SCOPE}} AS _sdk FROM otlp_spans WHERE _kind = 'call' AND _reason IS NULL;

CREATE OR REPLACE TEMP TABLE otlp_edges AS
WITH RECURSIVE up(span_id, trace_id, cur, lvl) AS (
  SELECT span_id, trace_id, parent_span_id, 1 FROM otlp_ok WHERE parent_span_id IS NOT NULL
  UNION ALL
  SELECT u.span_id, u.trace_id, s.parent_span_id, u.lvl + 1
  FROM up u JOIN otlp_spans s ON s.trace_id = u.trace_id AND s.span_id = u.cur
  WHERE s._kind <> 'call' AND u.lvl < 8 AND s.parent_span_id IS NOT NULL
),
nearest AS (
  SELECT c.span_id AS child, p.span_id AS anc, c.trace_id
  FROM up u
  JOIN otlp_ok c ON c.trace_id = u.trace_id AND c.span_id = u.span_id
  JOIN otlp_ok p ON p.trace_id = u.trace_id AND p.span_id = u.cur
  WHERE c._start_ns < p._end_ns AND c._end_ns > p._start_ns
    AND (c.model = p.model OR c._response_id = p._response_id)
    AND NOT (c._response_id IS NOT NULL AND p._response_id IS NOT NULL AND c._response_id <> p._response_id)
),
chain AS (
  SELECT trace_id, child, anc FROM nearest
  QUALIFY count(*) OVER (PARTITION BY trace_id, anc) = 1
),
by_response AS (  -- same response id and overlapping times (a client may reuse ids across calls)
  SELECT a.trace_id, a.span_id, b.span_id AS root
  FROM otlp_ok a JOIN otlp_ok b
    ON a.trace_id = b.trace_id AND a._response_id = b._response_id AND a.span_id < b.span_id
   AND a._start_ns <= b._end_ns AND a._end_ns >= b._start_ns
),
streams AS (
  SELECT trace_id, span_id, _scope, coalesce(service, '') AS service, coalesce(model_raw, '') AS model_raw, _start_ns
  FROM otlp_ok WHERE _is_stream_log
),
requests AS (
  SELECT trace_id, span_id, _scope, coalesce(service, '') AS service, coalesce(model_raw, '') AS model_raw, _end_ns
  FROM otlp_ok WHERE NOT _is_stream_log AND _scope LIKE 'logfire%' AND _token_fields = 0
),
stream_req AS (
  SELECT s.trace_id AS s_trace, s.span_id AS s_span, r.trace_id AS r_trace, r.span_id AS r_span, r._end_ns, s._start_ns
  FROM streams s ASOF JOIN requests r
    ON s._scope = r._scope AND s.service = r.service AND s.model_raw = r.model_raw AND s._start_ns + 50000000 >= r._end_ns
  WHERE s._start_ns - r._end_ns < 5000000000
  QUALIFY row_number() OVER (PARTITION BY r.trace_id, r.span_id ORDER BY s._start_ns) = 1
),
engine AS (
  SELECT * FROM otlp_ok WHERE convention IN ('vllm', 'sglang')
),
disagg AS (
  SELECT p.trace_id AS p_trace, p.span_id AS p_span, d.trace_id AS d_trace, d.span_id AS d_span
  FROM engine p JOIN engine d
    ON p._prefill_side AND NOT d._prefill_side AND p.model = d.model
   AND (p._request_id = d._request_id OR p._room = d._room)
   AND d._end_ns >= p._start_ns AND abs(d._start_ns - p._start_ns) < {{DISAGG_NS}}
  QUALIFY row_number() OVER (PARTITION BY d.trace_id, d.span_id ORDER BY abs(d._start_ns - p._start_ns), p.span_id) = 1
),
sdk_own AS (
  SELECT * FROM otlp_ok WHERE _sdk AND parent_span_id IS NULL
),
sdk_pairs AS (
  SELECT s.trace_id AS s_trace, s.span_id AS s_span, w.trace_id AS w_trace, w.span_id AS w_span,
         row_number() OVER (PARTITION BY s.trace_id, s.span_id ORDER BY w._start_ns DESC, w.span_id) AS s_rank,
         row_number() OVER (PARTITION BY w.trace_id, w.span_id ORDER BY s._start_ns, s.span_id) AS w_rank
  FROM sdk_own s JOIN otlp_ok w
    ON w.trace_id <> s.trace_id AND NOT w._sdk
   AND coalesce(w.service, '') = coalesce(s.service, '') AND w.model = s.model
   AND w._start_ns <= s._start_ns AND w._end_ns + 50000000 >= s._end_ns
   AND s._start_ns - w._start_ns < 60000000000
   AND NOT (w._response_id IS NOT NULL AND s._response_id IS NOT NULL AND w._response_id <> s._response_id)
)
SELECT trace_id AS a_trace, child AS a_span, trace_id AS b_trace, anc AS b_span FROM chain
UNION ALL
SELECT trace_id, span_id, trace_id, root FROM by_response
UNION ALL
SELECT s_trace, s_span, r_trace, r_span FROM stream_req
UNION ALL
SELECT s_trace, s_span, w_trace, w_span FROM sdk_pairs WHERE s_rank = 1 AND w_rank = 1
UNION ALL
SELECT p_trace, p_span, d_trace, d_span FROM disagg;

-- Engine stage spans (SGLang: `prefill_waiting`, `prefill_forward`, `prefill_chunked_forward`, `decode_loop`, ...)
-- below each engine call span (through its thread span), summed per phase: they time the phases where the
-- request span carries no latency attributes.
CREATE OR REPLACE TEMP TABLE otlp_stages AS
WITH RECURSIVE down(trace_id, root, span_id, lvl) AS (
  SELECT trace_id, span_id, span_id, 0 FROM otlp_ok WHERE convention = 'sglang'
  UNION ALL
  SELECT d.trace_id, d.root, s.span_id, d.lvl + 1
  FROM down d JOIN otlp_spans s ON s.trace_id = d.trace_id AND s.parent_span_id = d.span_id
  WHERE d.lvl < 4 AND s._kind = 'skip'
)
SELECT d.trace_id, d.root AS span_id,
       sum(s._end_ns - s._start_ns) FILTER (WHERE s._span_name IN ('prefill_forward', 'prefill_chunked_forward')) / 1e9
         AS stage_prefill_s,
       sum(s._end_ns - s._start_ns) FILTER (WHERE s._span_name = 'decode_loop') / 1e9 AS stage_decode_s,
       sum(s._end_ns - s._start_ns) FILTER (WHERE s._span_name IN ('prefill_waiting', 'decode_waiting')) / 1e9
         AS stage_queue_s,
       max(s._end_ns) FILTER (WHERE s._span_name IN ('prefill_forward', 'prefill_chunked_forward')) AS stage_first_token_ns
FROM down d JOIN otlp_spans s ON s.trace_id = d.trace_id AND s.span_id = d.span_id
WHERE d.lvl > 0
GROUP BY d.trace_id, d.root;

-- Each span starts as its own group, labelled by (start, trace, span): the earliest span names the call.
CREATE OR REPLACE TEMP TABLE otlp_labels AS
SELECT trace_id, span_id, struct_pack(s := _start_ns, t := trace_id, i := span_id) AS label FROM otlp_ok;
