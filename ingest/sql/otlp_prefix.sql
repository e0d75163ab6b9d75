-- otlp_prefix: hashes of the leading prompt blocks of calls that carried prompt text, so prefix reuse can
-- be measured after the text is dropped. Grain: one row per call with content. Upstream: otlp_spans.
-- Blocks: system instructions, then each input message in order (semconv `gen_ai.input.messages`,
-- OpenLLMetry `gen_ai.prompt.N.*`, OpenInference `llm.input_messages.N.message.*`).
-- Each step reads the one before it once: a list computed in one CTE and tested in the next would be computed
-- again for the test (the filter is pushed below the projection that makes it).
CREATE OR REPLACE TEMP TABLE otlp_prefix AS
WITH content AS (  -- each prompt attribute once: key, value, and the message index of an indexed one
  SELECT
    call_id, line_no,
    coalesce(uncached_input_tokens, 0) + coalesce(cache_read_tokens, 0) + coalesce(cache_write_tokens, 0) AS input_tokens,
    list_filter(
      list_transform(content_attrs, lambda a: {
        k: a.key, v: otlp_value(a.value), s: a.value.stringValue,
        -- the message index of an indexed key; NULL for any other key ('' does not cast)
        i: TRY_CAST(regexp_extract(a.key, '^(?:gen_ai\.prompt|llm\.input_messages)\.(\d+)\.', 1) AS INTEGER)}),
      lambda a: a.k IN ('gen_ai.system_instructions', 'gen_ai.input.messages') OR a.i IS NOT NULL) AS kv
  FROM otlp_spans
  WHERE _kind = 'call' AND _reason IS NULL AND len(content_attrs) > 0
),
blocks AS (
  SELECT
    call_id, line_no, input_tokens,
    list_concat(
      list_transform(list_filter(kv, lambda a: a.k = 'gen_ai.system_instructions'), lambda a: a.v),
      coalesce(list_transform(
        json_extract(list_filter(kv, lambda a: a.k = 'gen_ai.input.messages')[1].s, '$[*]'),
        lambda j: j::VARCHAR), []),
      -- indexed attributes: one block per message index, role and content together
      list_transform(
        list_sort(list_distinct(list_transform(kv, lambda a: a.i))),
        lambda n: array_to_string(list_transform(list_filter(kv, lambda a: a.i = n), lambda a: a.k || '=' || a.v), chr(31)))
    ) AS blocks
  FROM content
),
hashed AS (
  SELECT call_id, line_no, input_tokens, list_transform(blocks, lambda b: md5(b)) AS h, list_transform(blocks, lambda b: length(b)) AS n
  FROM blocks
)
SELECT
  call_id,
  line_no,  -- which file of a parse of several files (otlp_file) the call is from
  list_transform(range(1, len(h) + 1), lambda i: left(md5(array_to_string(h[1:i], '')), 16)) AS prefix_hashes,
  -- size of each prefix in tokens: the call's input tokens shared out in proportion to characters
  list_transform(range(1, len(n) + 1),
    lambda i: round(input_tokens * list_sum(n[1:i]) / greatest(list_sum(n), 1))::BIGINT) AS prefix_tokens
FROM hashed
WHERE len(h) > 0;
