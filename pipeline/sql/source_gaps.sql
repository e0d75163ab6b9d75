-- source_gaps: what each source of calls fails to record, derived from the calls it wrote.
-- Grain: (source, instrumentation); `instrumentation` is the OTLP instrumentation scope (`name version`), or
-- the adapter name for sources that are their own writer (gateway logs, benchmark exports).
-- Upstream: raw_calls. A view: it needs no build and always reflects what is loaded.
-- Shares are of the calls each gap can apply to: cache, output, TTFT and streaming exclude embeddings;
-- TTFT counts streamed calls and calls that do not say (a call known not to stream has no first token to
-- time). A share of at least
-- `gap_share` (0.5) names the gap in `gaps`; every share is kept so smaller losses stay visible.
-- A source that writes the streaming flag only on streamed calls (some `true`, never `false`) says `false` by
-- its silence: its unflagged calls count as not streamed (the Anthropic SDK's own spans and OpenLLMetry do so).
-- Cache counts zeroed on streamed calls (OpenLIT 1.45.0's Anthropic instrumentation resets them to 0 when the
-- stream's last usage omits them) are present, so not "missing": they are found per model instead. Of the models
-- whose calls that did not stream record cache hits on at least half of them, every streamed call records 0
-- (at least 3 such calls): the source zeroes them.
-- source_gap_parts(since, until, unstarted): the counts the shares are made of, per source, instrumentation,
-- convention, model, UTC day of the start, streaming flag (as written) and whether the call is an embedding, for the
-- calls started in [since, until) (with `unstarted`, also those without a start). Every figure below is a sum of
-- them, so the build keeps them per day (`source_gap_days`), its reconciliation reads this view's query over those
-- (pipeline/incremental.py, `source_gaps_sql`) and an incremental build recounts the touched days only.
CREATE OR REPLACE MACRO source_gap_parts(since, until, unstarted) AS TABLE
SELECT
  source, coalesce(instrumentation, source) AS instrumentation, convention, model,
  CAST(started_at AS DATE) AS day, streaming, operation = 'embeddings' AS is_embedding,
  count(*) AS calls,
  min(started_at) AS first_call_at, max(started_at) AS last_call_at,
  count(*) FILTER (WHERE uncached_input_tokens IS NULL) AS input_missing,
  count(*) FILTER (WHERE cache_read_tokens IS NULL) AS cache_read_missing,
  count(*) FILTER (WHERE cache_write_tokens IS NULL) AS cache_write_missing,
  count(*) FILTER (WHERE cache_read_tokens IS NULL AND cache_write_tokens IS NULL) AS cache_missing,
  count(*) FILTER (WHERE coalesce(cache_read_tokens, 0) + coalesce(cache_write_tokens, 0) > 0) AS cache_hit,
  count(*) FILTER (WHERE (cache_read_tokens IS NOT NULL OR cache_write_tokens IS NOT NULL)
                     AND coalesce(cache_read_tokens, 0) + coalesce(cache_write_tokens, 0) <= 0) AS cache_zero,
  count(*) FILTER (WHERE output_tokens IS NULL) AS output_missing,
  count(*) FILTER (WHERE ttft_s IS NULL) AS ttft_missing
FROM raw_calls
WHERE pl_started_in(started_at, since, until, unstarted)
GROUP BY ALL;

CREATE OR REPLACE VIEW source_gaps AS
WITH parts AS (
  SELECT * FROM source_gap_parts(NULL, NULL, true)
),
flag_style AS (   -- per source: does it flag only the streamed calls?
  SELECT source, instrumentation, bool_or(streaming) AND NOT bool_or(NOT streaming) AS flags_only_streamed
  FROM parts GROUP BY ALL
),
calls AS (
  SELECT
    p.* EXCLUDE (streaming),
    CASE WHEN p.streaming IS NULL AND coalesce(f.flags_only_streamed, false) THEN false ELSE p.streaming END AS streaming
  FROM parts p LEFT JOIN flag_style f USING (source, instrumentation)
),
cached_models AS (  -- per source: models whose calls that did not stream mostly record cache hits
  SELECT source, instrumentation, model
  FROM calls
  WHERE streaming = false AND NOT is_embedding AND model IS NOT NULL
  GROUP BY source, instrumentation, model
  HAVING sum(cache_hit) / sum(calls) >= 0.5
),
marked AS (
  SELECT c.*, m.model IS NOT NULL AS cached_model
  FROM calls c
  LEFT JOIN cached_models m ON m.source = c.source AND m.instrumentation = c.instrumentation AND m.model = c.model
),
shares AS (  -- each share: the calls it counts over the calls it can apply to (NULL when there are none)
  SELECT
    source, instrumentation,
    string_agg(DISTINCT convention, ', ' ORDER BY convention) AS conventions,
    CAST(sum(calls) AS BIGINT) AS calls,
    CAST(coalesce(sum(calls) FILTER (WHERE streaming), 0) AS BIGINT) AS streamed_calls,
    min(first_call_at) AS first_call_at,
    max(last_call_at) AS last_call_at,
    sum(cache_missing) FILTER (WHERE NOT is_embedding) / sum(calls) FILTER (WHERE NOT is_embedding)
      AS cache_counts_missing_share,
    sum(cache_read_missing) FILTER (WHERE NOT is_embedding) / sum(calls) FILTER (WHERE NOT is_embedding)
      AS cache_read_missing_share,
    sum(cache_write_missing) FILTER (WHERE NOT is_embedding) / sum(calls) FILTER (WHERE NOT is_embedding)
      AS cache_write_missing_share,
    sum(cache_missing) FILTER (WHERE streaming AND NOT is_embedding)
      / sum(calls) FILTER (WHERE streaming AND NOT is_embedding) AS cache_missing_streamed_share,
    sum(cache_missing) FILTER (WHERE streaming IS DISTINCT FROM true AND NOT is_embedding)
      / sum(calls) FILTER (WHERE streaming IS DISTINCT FROM true AND NOT is_embedding) AS cache_missing_unstreamed_share,
    CAST(coalesce(sum(calls) FILTER (WHERE streaming AND cached_model AND NOT is_embedding), 0) AS BIGINT)
      AS cached_model_streamed_calls,
    sum(cache_zero) FILTER (WHERE streaming AND cached_model AND NOT is_embedding)
      / sum(calls) FILTER (WHERE streaming AND cached_model AND NOT is_embedding) AS cache_zero_streamed_share,
    sum(input_missing) / sum(calls) AS input_tokens_missing_share,
    sum(output_missing) FILTER (WHERE NOT is_embedding) / sum(calls) FILTER (WHERE NOT is_embedding)
      AS output_tokens_missing_share,
    sum(ttft_missing) FILTER (WHERE streaming IS DISTINCT FROM false AND NOT is_embedding)
      / sum(calls) FILTER (WHERE streaming IS DISTINCT FROM false AND NOT is_embedding) AS ttft_missing_streamed_share,
    coalesce(sum(calls) FILTER (WHERE streaming IS NULL AND NOT is_embedding), 0)
      / sum(calls) FILTER (WHERE NOT is_embedding) AS streaming_flag_missing_share
  FROM marked
  GROUP BY source, instrumentation
),
flagged AS (
  SELECT
    *,
    list_filter([
      CASE WHEN cache_counts_missing_share >= 0.5 AND coalesce(cache_missing_streamed_share, 1) >= 0.5
                AND coalesce(cache_missing_unstreamed_share, 1) >= 0.5 THEN 'no_cache_counts' END,
      CASE WHEN cache_missing_streamed_share >= 0.5 AND cache_missing_unstreamed_share < 0.5
           THEN 'cache_counts_lost_when_streamed' END,
      CASE WHEN cache_zero_streamed_share = 1 AND cached_model_streamed_calls >= 3 THEN 'cache_counts_zeroed_when_streamed' END,
      CASE WHEN cache_read_missing_share < 0.5 AND cache_write_missing_share >= 0.5 THEN 'no_cache_write_counts' END,
      CASE WHEN input_tokens_missing_share >= 0.5 THEN 'no_input_counts' END,
      CASE WHEN output_tokens_missing_share >= 0.5 THEN 'no_output_counts' END,
      CASE WHEN ttft_missing_streamed_share >= 0.5 THEN 'no_ttft' END,
      CASE WHEN streaming_flag_missing_share >= 0.5 THEN 'no_streaming_flag' END
    ], lambda g: g IS NOT NULL) AS gap_kinds
  FROM shares
)
SELECT
  source,                            -- adapter family (`otlp`, `litellm`, ...)
  instrumentation,                   -- OTLP scope `name version`, or the adapter for self-written sources
  conventions,                       -- attribute conventions its spans used
  calls,
  streamed_calls,
  first_call_at, last_call_at,
  cache_counts_missing_share,        -- calls with neither a cache-read nor a cache-write count
  cache_read_missing_share,
  cache_write_missing_share,
  cache_missing_streamed_share,      -- of streamed calls, those with no cache count
  cache_zero_streamed_share,         -- of streamed calls of models whose unstreamed calls hit the cache, those with 0
  input_tokens_missing_share,
  output_tokens_missing_share,
  ttft_missing_streamed_share,       -- of streamed (or not-said) calls, those with no TTFT: it is then estimated
  streaming_flag_missing_share,      -- of non-embedding calls, those that do not say whether they streamed
  gap_kinds,                         -- machine names of the gaps, in the order below
  array_to_string(list_transform(gap_kinds, lambda g: CASE g
    WHEN 'no_cache_counts' THEN printf('no cache counts on %.0f%% of calls',
                                       100 * cache_counts_missing_share)
    WHEN 'cache_counts_lost_when_streamed' THEN printf('cache counts lost on %.0f%% of streamed calls',
                                                       100 * cache_missing_streamed_share)
    WHEN 'cache_counts_zeroed_when_streamed' THEN printf(
      'cache counts 0 on all %d streamed calls of models whose other calls record cache hits (zeroed at the source)',
      cached_model_streamed_calls)
    WHEN 'no_cache_write_counts' THEN printf('cache writes not recorded on %.0f%% of calls', 100 * cache_write_missing_share)
    WHEN 'no_input_counts' THEN printf('no input token count on %.0f%% of calls', 100 * input_tokens_missing_share)
    WHEN 'no_output_counts' THEN printf('no output token count on %.0f%% of calls', 100 * output_tokens_missing_share)
    WHEN 'no_ttft' THEN printf('TTFT missing on %.0f%% of streamed calls%s (estimated instead)', 100 * ttft_missing_streamed_share,
                               CASE WHEN streamed_calls = 0 THEN ' or calls that do not say whether they streamed' ELSE '' END)
    WHEN 'no_streaming_flag' THEN printf('streaming flag missing on %.0f%% of calls', 100 * streaming_flag_missing_share)
  END), '; ') AS gaps                -- the gaps in words; '' when the source records everything checked
FROM flagged
ORDER BY source, instrumentation;
