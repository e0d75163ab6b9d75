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
CREATE OR REPLACE VIEW source_gaps AS
WITH raw AS (
  SELECT *, coalesce(instrumentation, source) AS writer FROM raw_calls
),
flag_style AS (   -- per source: does it flag only the streamed calls?
  SELECT source, writer, bool_or(streaming) AND NOT bool_or(NOT streaming) AS flags_only_streamed
  FROM raw GROUP BY ALL
),
calls AS (
  SELECT
    r.source,
    r.writer AS instrumentation,
    convention,
    model,
    started_at,
    operation = 'embeddings' AS is_embedding,
    CASE WHEN streaming IS NULL AND coalesce(f.flags_only_streamed, false) THEN false ELSE streaming END AS streaming,
    uncached_input_tokens IS NULL AS input_missing,
    cache_read_tokens IS NULL AS cache_read_missing,
    cache_write_tokens IS NULL AS cache_write_missing,
    cache_read_tokens IS NULL AND cache_write_tokens IS NULL AS cache_missing,
    coalesce(cache_read_tokens, 0) + coalesce(cache_write_tokens, 0) > 0 AS cache_hit,
    output_tokens IS NULL AS output_missing,
    ttft_s IS NULL AS ttft_missing
  FROM raw r LEFT JOIN flag_style f USING (source, writer)
),
cached_models AS (  -- per source: models whose calls that did not stream mostly record cache hits
  SELECT source, instrumentation, model
  FROM calls
  WHERE streaming = false AND NOT is_embedding AND model IS NOT NULL
  GROUP BY source, instrumentation, model
  HAVING avg(CAST(cache_hit AS INTEGER)) >= 0.5
),
marked AS (
  SELECT c.*, m.model IS NOT NULL AS cached_model
  FROM calls c
  LEFT JOIN cached_models m ON m.source = c.source AND m.instrumentation = c.instrumentation AND m.model = c.model
),
shares AS (
  SELECT
    source, instrumentation,
    string_agg(DISTINCT convention, ', ' ORDER BY convention) AS conventions,
    count(*) AS calls,
    count(*) FILTER (WHERE streaming) AS streamed_calls,
    min(started_at) AS first_call_at,
    max(started_at) AS last_call_at,
    avg(CAST(cache_missing AS INTEGER)) FILTER (WHERE NOT is_embedding) AS cache_counts_missing_share,
    avg(CAST(cache_read_missing AS INTEGER)) FILTER (WHERE NOT is_embedding) AS cache_read_missing_share,
    avg(CAST(cache_write_missing AS INTEGER)) FILTER (WHERE NOT is_embedding) AS cache_write_missing_share,
    avg(CAST(cache_missing AS INTEGER)) FILTER (WHERE streaming AND NOT is_embedding) AS cache_missing_streamed_share,
    avg(CAST(cache_missing AS INTEGER)) FILTER (WHERE streaming IS DISTINCT FROM true AND NOT is_embedding)
      AS cache_missing_unstreamed_share,
    count(*) FILTER (WHERE streaming AND cached_model AND NOT is_embedding) AS cached_model_streamed_calls,
    avg(CAST(NOT cache_missing AND NOT cache_hit AS INTEGER)) FILTER (WHERE streaming AND cached_model AND NOT is_embedding)
      AS cache_zero_streamed_share,
    avg(CAST(input_missing AS INTEGER)) AS input_tokens_missing_share,
    avg(CAST(output_missing AS INTEGER)) FILTER (WHERE NOT is_embedding) AS output_tokens_missing_share,
    avg(CAST(ttft_missing AS INTEGER)) FILTER (WHERE streaming IS DISTINCT FROM false AND NOT is_embedding)
      AS ttft_missing_streamed_share,
    avg(CAST(streaming IS NULL AS INTEGER)) FILTER (WHERE NOT is_embedding) AS streaming_flag_missing_share
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
