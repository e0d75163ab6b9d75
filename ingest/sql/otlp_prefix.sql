-- otlp_prefix: hashes of the leading prompt blocks of calls that carried prompt text, so prefix reuse can
-- be measured after the text is dropped. Grain: one row per call with content. Upstream: otlp_spans.
-- Blocks: system instructions, then each input message in order (semconv `gen_ai.input.messages`,
-- OpenLLMetry `gen_ai.prompt.N.*`, OpenInference `llm.input_messages.N.message.*`).
CREATE OR REPLACE TEMP TABLE otlp_prefix AS
WITH content AS (
  SELECT
    call_id,
    coalesce(uncached_input_tokens, 0) + coalesce(cache_read_tokens, 0) + coalesce(cache_write_tokens, 0) AS input_tokens,
    list_filter(content_attrs, lambda a: a.key IN ('gen_ai.system_instructions', 'gen_ai.input.messages')
                          OR regexp_matches(a.key, '^(gen_ai\.prompt|llm\.input_messages)\.\d+\.')) AS kv
  FROM otlp_spans
  WHERE _kind = 'call' AND _reason IS NULL AND len(content_attrs) > 0
),
blocks AS (
  SELECT
    call_id, input_tokens,
    list_concat(
      list_transform(list_filter(kv, lambda a: a.key = 'gen_ai.system_instructions'), lambda a: otlp_value(a.value)),
      coalesce(list_transform(
        json_extract(list_filter(kv, lambda a: a.key = 'gen_ai.input.messages')[1].value.stringValue, '$[*]'),
        lambda j: j::VARCHAR), []),
      -- indexed attributes: one block per message index, role and content together
      list_transform(
        list_sort(list_distinct(list_transform(
          list_filter(kv, lambda a: regexp_matches(a.key, '^(gen_ai\.prompt|llm\.input_messages)\.\d+\.')),
          lambda a: TRY_CAST(regexp_extract(a.key, '\.(\d+)\.', 1) AS INTEGER)))),
        lambda n: array_to_string(list_transform(
          list_filter(kv, lambda a: TRY_CAST(regexp_extract(a.key, '\.(\d+)\.', 1) AS INTEGER) = n),
          lambda a: a.key || '=' || otlp_value(a.value)), chr(31)))
    ) AS blocks
  FROM content
),
hashed AS (
  SELECT call_id, input_tokens, list_transform(blocks, lambda b: md5(b)) AS h, list_transform(blocks, lambda b: length(b)) AS n
  FROM blocks
  WHERE len(blocks) > 0
)
SELECT
  call_id,
  list_transform(range(1, len(h) + 1), lambda i: left(md5(array_to_string(h[1:i], '')), 16)) AS prefix_hashes,
  -- size of each prefix in tokens: the call's input tokens shared out in proportion to characters
  list_transform(range(1, len(n) + 1),
    lambda i: round(input_tokens * list_sum(n[1:i]) / greatest(list_sum(n), 1))::BIGINT) AS prefix_tokens
FROM hashed;
