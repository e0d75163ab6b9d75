"""One call, one row across loads (docs/ingest.md, "Across files, chunks and flushes").

The merge of `sql/otlp_merge.sql` sees the spans it is given. To make it hold when the spans of one call arrive in
different files, different chunks of one file or different receiver flushes, every stored OTLP span is kept in
`raw_otlp_spans`: its normalised row (the allow-listed attributes only, never prompt text; hashes of its leading
prompt blocks), plus `stored_call_id`, the call it is part of when that is not the one it names itself. A call's
only span is kept without its attributes (they are the call row's). Non-call spans are kept thin (ids, parent, name,
times): the merge walks through them to a call's ancestor, and SGLang's stage spans time the phases. A non-call span
with no parent (a trace's HTTP or agent root) is not kept at all: the walk up stops at it, it is nobody's stage span,
and no later span can give it a parent, so no merge can ever need it.

Each chunk, inside the load's transaction:

1. `carry_in`: spans already stored (same trace and span id), or repeated in the chunk, are duplicates and leave
   the chunk. The stored spans the chunk's new spans may merge with are read back into `otlp_spans`: whole
   traces (the chunk's, those of the cross-trace rules' candidates: Logfire's request/stream pair, a provider
   SDK's own root span, a disaggregated request's other worker), closed over calls (every span of a stored call
   that is read back, and every trace those spans are in), so each stored call is re-derived from all its spans.
2. the merge runs over the chunk's spans and the stored ones together, as if they had been one file.
3. `settle`: a call made only of one stored call's spans, untouched by a new span, is dropped (the stored row
   stands). Every other stored call read back is replaced by what the merge made of its spans: its row leaves
   `raw_calls` and the new rows are stored. Each stored row removed is written
   to `raw_calls_replaced` with the load's id, its old times and whether its call id is gone (`retired`: the call
   now starts at an earlier span), so the incremental build recomputes its old days and drops a retired call's
   built rows.

A failure anywhere rolls the whole load back: nothing stored is changed.
"""

from __future__ import annotations

import duckdb

SPANS = "main.raw_otlp_spans"
REPLACED = "main.raw_calls_replaced"

# columns of otlp_spans that are not stored: the chunk's line number, and the call id a span would have on its own
# (its trace and span ids make it again, `_own_call_id`). Prompt text never gets this far: it stays with the parser
# (otlp.parse_chunk), which hands over only its hashes.
_NOT_STORED = ("line_no", "call_id")

# what a non-call span keeps: enough to walk up through it and to time an engine's stages
_THIN = ("trace_id", "span_id", "parent_span_id", "_kind", "_span_name", "_start_ns", "_end_ns", "_scope", "source")
_BUCKET_NS = 60_000_000_000  # candidate search of the cross-trace rules in one-minute buckets
_REACH = 3  # buckets either side: rule 4 pairs spans up to 60 s apart, a competing wrapper up to 60 s before that
DISAGG_NS = 600_000_000_000  # rule 5 pairs a prefill and a decode span that start less than 10 minutes apart


def _own_call_id(a: str) -> str:
    """The call id span `a` would name on its own (sql/otlp_spans.sql)."""
    return f"'otlp:' || {a}.trace_id || ':' || {a}.span_id"


def _stored_call(a: str) -> str:
    """The call stored span `a` is part of: `stored_call_id` is NULL when that is the call the span names itself."""
    return f"coalesce({a}.stored_call_id, CASE WHEN {a}._kind = 'call' THEN {_own_call_id(a)} END)"


def _has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' "
        "AND table_name = ?", [name]).fetchall()[0][0] > 0


def _columns(con: duckdb.DuckDBPyConnection, table: str, temp: bool) -> dict[str, str]:
    where = "database_name = 'temp'" if temp else "database_name = current_database() AND schema_name = 'main'"
    return dict(con.execute(
        f"SELECT column_name, data_type FROM duckdb_columns() WHERE {where} AND table_name = ? ORDER BY column_index",
        [table]).fetchall())


def ensure_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Create `raw_otlp_spans` from the shape of the staged spans, or add the columns a newer version stages."""
    if not _has_table(con, "raw_otlp_spans"):
        con.execute(
            f"CREATE TABLE {SPANS} AS SELECT s.* EXCLUDE ({', '.join(_NOT_STORED)}), "
            "NULL::VARCHAR AS stored_call_id, p.prefix_hashes, p.prefix_tokens "
            "FROM otlp_spans s LEFT JOIN otlp_prefix p USING (call_id) LIMIT 0")
        con.execute(f"COMMENT ON COLUMN {SPANS}.attributes_json IS 'NULL: the span is its call''s only span, "
                    "whose row in raw_calls holds the same attributes_json'")
        return
    have = _columns(con, "raw_otlp_spans", temp=False)
    for name, dtype in _columns(con, "otlp_spans", temp=True).items():
        if name not in have and name not in _NOT_STORED:
            con.execute(f'ALTER TABLE {SPANS} ADD COLUMN "{name}" {dtype}')


def _count(con: duckdb.DuckDBPyConnection, sql: str, params=None) -> int:
    return con.execute(sql, params or {}).fetchall()[0][0]


def _candidates_sql(sdk_expr: str, engines: bool) -> str:
    """Traces of stored call spans that a cross-trace rule (3, 4, 5 of otlp_merge.sql) could link to a seed span.

    Each rule pairs spans that start minutes apart at most, so the store is read only within a margin of the seed's
    times, and a store's older days are skipped by their zone maps: rules 3 and 4 from `$lo_ns` to `$hi_ns` (the
    seed's buckets widened by one), rule 5 strictly between `$lo_engine_ns` and `$hi_engine_ns` (its pairs start
    less than `DISAGG_NS` apart). Rule 5 (the same request id or bootstrap room) is searched only when `engines`,
    the seed has engine spans, listed in `otlp_seed_engine`."""
    rule5 = f"""
UNION
SELECT s.trace_id FROM engine s JOIN otlp_seed_engine k ON s._request_id = k._request_id AND s.model = k.model
UNION                                                              -- 5: disaggregated serving
SELECT s.trace_id FROM engine s JOIN otlp_seed_engine k ON s._room = k._room AND s.model = k.model""" if engines else ""
    return f"""
WITH seed AS (
  SELECT *, {sdk_expr} AS _sdk FROM otlp_seed WHERE _kind = 'call' AND _reason IS NULL
),
seed_b AS (
  SELECT DISTINCT _scope, coalesce(service, '') AS svc, model, coalesce(model_raw, '') AS mraw, _sdk,
         unnest(range((_start_ns // {_BUCKET_NS})::BIGINT - {_REACH},
                      (coalesce(_end_ns, _start_ns) // {_BUCKET_NS})::BIGINT + {_REACH} + 1)) AS b
  FROM seed
  WHERE _sdk OR _scope LIKE 'logfire%' OR EXISTS (SELECT 1 FROM otlp_sdk_keys k WHERE k.svc = coalesce(seed.service, '')
                                                                             AND k.model = seed.model)
),
stored AS (
  SELECT trace_id, _scope, coalesce(service, '') AS svc, model, coalesce(model_raw, '') AS mraw,
         {sdk_expr} AS _sdk, (_start_ns // {_BUCKET_NS})::BIGINT AS b
  FROM {SPANS} WHERE _kind = 'call' AND _start_ns >= $lo_ns AND _start_ns < $hi_ns
),
engine AS (
  SELECT trace_id, model, _request_id, _room FROM {SPANS}
  WHERE _kind = 'call' AND convention IN ('vllm', 'sglang') AND _start_ns > $lo_engine_ns AND _start_ns < $hi_engine_ns
)
SELECT s.trace_id FROM stored s JOIN seed_b k ON s.svc = k.svc AND s.model = k.model AND s.b = k.b
 WHERE s._sdk OR k._sdk                                            -- 4: a provider SDK's own span and its wrapper
UNION
SELECT s.trace_id FROM stored s JOIN seed_b k ON s._scope = k._scope AND s.svc = k.svc AND s.mraw = k.mraw AND s.b = k.b
 WHERE s._scope LIKE 'logfire%'                                    -- 3: Logfire's request and streaming response
{rule5}
"""


def carry_in(con: duckdb.DuckDBPyConnection, sdk_expr: str) -> dict[str, int]:
    """Drop duplicate spans from the chunk and read back the stored spans its new spans may merge with.

    Adds `_stored_call` (the stored call a read-back span belongs to) and `_pulled` (read back) to `otlp_spans`.
    Returns the duplicates (calls already stored, spans repeated in the chunk) and the chunk's new call spans.

    The store is read by trace id (a pass over the ids alone, then whole rows only within the start times of the
    matches), by time (the cross-trace rules' candidates) and by call id (the closure over calls): what it costs
    follows the chunk and the traces it touches, not how much history the store holds.
    """
    ensure_tables(con)
    con.execute("ALTER TABLE otlp_spans ADD COLUMN _stored_call VARCHAR")
    con.execute("ALTER TABLE otlp_spans ADD COLUMN _pulled BOOLEAN DEFAULT false")
    # repeated in the chunk (an exporter's retry): the first occurrence stays
    repeated = con.execute(
        "DELETE FROM otlp_spans WHERE rowid IN (SELECT rowid FROM otlp_spans WHERE _reason IS NULL "
        "AND trace_id IS NOT NULL AND span_id IS NOT NULL "
        "QUALIFY row_number() OVER (PARTITION BY trace_id, span_id ORDER BY line_no, rowid) > 1) "
        "RETURNING _kind").fetchall()
    _traces(con)
    # the stored spans of the chunk's traces: the duplicates among the chunk's spans, and the first spans read back
    con.execute(f"CREATE OR REPLACE TEMP TABLE otlp_pulled AS SELECT * FROM {SPANS} LIMIT 0")
    _fetch(con, "SELECT trace_id FROM otlp_pull_t")
    out = _carry(con, sdk_expr, repeated)
    con.execute("DROP VIEW IF EXISTS otlp_seed")
    for t in ("otlp_pull_t", "otlp_pulled", "otlp_sdk_keys", "otlp_seed_engine"):
        con.execute(f"DROP TABLE IF EXISTS {t}")
    return out


def _traces(con: duckdb.DuckDBPyConnection) -> None:
    """otlp_pull_t: the traces of the chunk's spans, the first traces to read back."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE otlp_pull_t AS "
        "SELECT DISTINCT trace_id FROM otlp_spans WHERE _reason IS NULL AND trace_id IS NOT NULL")


def _carry(con: duckdb.DuckDBPyConnection, sdk_expr: str, repeated: list) -> dict[str, int]:
    """carry_in after the chunk's own repeats are gone and otlp_pulled holds the stored spans of its traces."""
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE otlp_dups AS
        SELECT s.trace_id, s.span_id, s._kind, {_stored_call('r')} AS stored_call_id
        FROM otlp_spans s JOIN otlp_pulled r ON r.trace_id = s.trace_id AND r.span_id = s.span_id
        WHERE s._reason IS NULL""")
    stored_dups = _count(con, "SELECT count(DISTINCT stored_call_id) FROM otlp_dups WHERE _kind = 'call'")
    if _count(con, "SELECT count(*) FROM otlp_dups"):
        con.execute("DELETE FROM otlp_spans s USING otlp_dups d WHERE s.trace_id = d.trace_id AND s.span_id = d.span_id")
        # a trace whose spans here were all duplicates is not the chunk's any more
        _traces(con)
        con.execute("DELETE FROM otlp_pulled WHERE trace_id NOT IN (SELECT trace_id FROM otlp_pull_t)")
    con.execute("DROP TABLE otlp_dups")
    new_calls = _count(con, "SELECT count(*) FROM otlp_spans WHERE _kind = 'call' AND _reason IS NULL")
    out = {"duplicates": stored_dups + sum(1 for (k,) in repeated if k == "call"), "new_call_spans": new_calls}
    if not new_calls and not _count(con, "SELECT count(*) FROM otlp_spans WHERE _kind = 'skip'"):
        return out
    if not _count(con, f"SELECT count(*) FROM (SELECT 1 FROM {SPANS} LIMIT 1)"):
        return out

    # service and model pairs with a provider SDK's own span near the seed in time, in the store or the chunk:
    # only there can rule 4 link
    con.execute(
        "CREATE OR REPLACE TEMP TABLE otlp_sdk_keys AS SELECT DISTINCT coalesce(service, '') AS svc, model FROM "
        f"(SELECT service, model, _scope FROM otlp_spans WHERE _kind = 'call') WHERE {sdk_expr}")
    for _ in range(2):  # the chunk's candidates, then their competitors (the nearest-pair rules rank all of them)
        con.execute(
            "CREATE OR REPLACE TEMP VIEW otlp_seed AS SELECT * EXCLUDE (_stored_call, _pulled) FROM otlp_spans "
            "UNION ALL BY NAME SELECT * EXCLUDE (stored_call_id, prefix_hashes, prefix_tokens) FROM otlp_pulled")
        lo, hi, lo_engine, hi_engine = con.execute(
            f"""SELECT (min(_start_ns // {_BUCKET_NS}) - {_REACH + 1}) * {_BUCKET_NS},
                       (max(coalesce(_end_ns, _start_ns) // {_BUCKET_NS}) + {_REACH + 2}) * {_BUCKET_NS},
                       min(_start_ns) FILTER (WHERE convention IN ('vllm', 'sglang')) - {DISAGG_NS},
                       max(_start_ns) FILTER (WHERE convention IN ('vllm', 'sglang')) + {DISAGG_NS}
                FROM otlp_seed WHERE _kind = 'call' AND _reason IS NULL""").fetchall()[0]
        engines = lo_engine is not None
        if lo is not None:
            con.execute(
                f"INSERT INTO otlp_sdk_keys SELECT DISTINCT coalesce(service, '') AS svc, model FROM {SPANS} WHERE "
                f"_kind = 'call' AND parent_span_id IS NULL AND _start_ns >= $lo AND _start_ns < $hi AND {sdk_expr} "
                "EXCEPT SELECT svc, model FROM otlp_sdk_keys", {"lo": lo, "hi": hi})
            if engines:
                con.execute("CREATE OR REPLACE TEMP TABLE otlp_seed_engine AS SELECT DISTINCT model, _request_id, _room "
                            "FROM otlp_seed WHERE _kind = 'call' AND _reason IS NULL AND convention IN ('vllm', 'sglang')")
            _pull(con, f"SELECT trace_id FROM ({_candidates_sql(sdk_expr, engines)}) c",
                  {"lo_ns": lo, "hi_ns": hi, "lo_engine_ns": lo_engine or 0, "hi_engine_ns": hi_engine or 0})
        _close_over_calls(con)
    # a call's only span is stored without its attributes: they are the call row's in raw_calls
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE otlp_bare AS
        SELECT DISTINCT {_stored_call('s')} AS call_id FROM otlp_pulled s WHERE s.attributes_json IS NULL AND s._kind = 'call'""")
    con.execute(
        f"""INSERT INTO otlp_spans BY NAME
        SELECT s.* EXCLUDE (stored_call_id, prefix_hashes, prefix_tokens) REPLACE (
                 coalesce(s.attributes_json, c.attributes_json) AS attributes_json),
               CASE WHEN s._kind = 'call' THEN {_own_call_id('s')} END AS call_id, {_stored_call('s')} AS _stored_call,
               true AS _pulled
        FROM otlp_pulled s
        LEFT JOIN (SELECT call_id, attributes_json FROM main.raw_calls WHERE call_id IN (SELECT call_id FROM otlp_bare)) c
          ON s.attributes_json IS NULL AND s._kind = 'call' AND c.call_id = {_stored_call('s')}""")
    con.execute("DROP TABLE otlp_bare")
    con.execute(
        f"INSERT INTO otlp_prefix BY NAME SELECT {_own_call_id('otlp_pulled')} AS call_id, prefix_hashes, prefix_tokens "
        "FROM otlp_pulled WHERE prefix_hashes IS NOT NULL")
    return out


def _pull(con: duckdb.DuckDBPyConnection, traces_sql: str, params: dict | None = None) -> int:
    """Read back the stored spans of the traces `traces_sql` selects that are not read back yet."""
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE otlp_pull_new AS SELECT DISTINCT trace_id FROM ({traces_sql}) t "
        "WHERE trace_id NOT IN (SELECT trace_id FROM otlp_pull_t)", params or {})
    added = _count(con, "SELECT count(*) FROM otlp_pull_new")
    if added:
        con.execute("INSERT INTO otlp_pull_t SELECT trace_id FROM otlp_pull_new")
        _fetch(con, "SELECT trace_id FROM otlp_pull_new")
    con.execute("DROP TABLE otlp_pull_new")
    return added


def _fetch(con: duckdb.DuckDBPyConnection, traces_sql: str) -> None:
    """Add the stored spans of the traces `traces_sql` selects to otlp_pulled.

    Two passes: the first reads only the trace ids (and start times) of the store, the second reads whole rows,
    but only of the row groups whose start times span the matches, which are often the newest ones."""
    n, nulls, lo, hi = con.execute(
        f"SELECT count(*), count(*) - count(_start_ns), min(_start_ns), max(_start_ns) FROM {SPANS} "
        f"WHERE trace_id IN ({traces_sql})").fetchall()[0]
    if not n:
        return
    when = "" if nulls else "_start_ns >= $lo AND _start_ns <= $hi AND "
    con.execute(f"INSERT INTO otlp_pulled SELECT * FROM {SPANS} WHERE {when}trace_id IN ({traces_sql})",
                {} if nulls else {"lo": lo, "hi": hi})


def _close_over_calls(con: duckdb.DuckDBPyConnection) -> None:
    """Grow the read-back spans until every stored call with a span among them has all its traces there.

    Only spans of calls made of several spans have a `stored_call_id`: the calls of the pulled traces are those ids
    and the pulled call spans' own ids (a call's first span names it and has none)."""
    if not _count(con, "SELECT count(*) FROM (SELECT 1 FROM otlp_pulled LIMIT 1)"):
        return  # nothing read back: no stored call to close over, and no pass over the store
    while _pull(con, f"""SELECT trace_id FROM {SPANS} WHERE stored_call_id IN (
                           SELECT stored_call_id FROM otlp_pulled WHERE stored_call_id IS NOT NULL
                           UNION SELECT {_own_call_id('otlp_pulled')} FROM otlp_pulled WHERE _kind = 'call')"""):
        pass


def settle(con: duckdb.DuckDBPyConnection, load_id: str) -> dict[str, int]:
    """After the merge: keep unchanged stored calls, replace the changed ones, store the chunk's spans.

    Reads otlp_ok, otlp_labels and otlp_calls (one row per call of the merge); leaves in otlp_calls only the calls
    to store. Returns `calls` (calls to store), `replaced` (rows of earlier loads removed from raw_calls) and
    `unstaged` (rows earlier chunks of this load stored, removed from raw_calls).
    """
    con.execute(
        """CREATE OR REPLACE TEMP TABLE otlp_members AS
        SELECT 'otlp:' || l.label.t || ':' || l.label.i AS group_id, o.trace_id, o.span_id, o._stored_call
        FROM otlp_ok o JOIN otlp_labels l USING (trace_id, span_id)""")
    con.execute(
        """CREATE OR REPLACE TEMP TABLE otlp_changed AS
        WITH new_traces AS (SELECT DISTINCT trace_id FROM otlp_spans WHERE NOT _pulled AND _reason IS NULL),
        sizes AS (SELECT _stored_call, count(*) AS n FROM otlp_members WHERE _stored_call IS NOT NULL GROUP BY 1),
        g AS (
          SELECT group_id, count(*) AS n, count(_stored_call) AS n_stored, count(DISTINCT _stored_call) AS n_calls,
                 any_value(_stored_call) AS stored_call,
                 bool_or(trace_id IN (SELECT trace_id FROM new_traces)) AS touches_new
          FROM otlp_members GROUP BY group_id
        )
        SELECT g.group_id FROM g LEFT JOIN sizes s ON s._stored_call = g.stored_call
        WHERE NOT (g.n_stored = g.n AND g.n_calls = 1 AND s.n = g.n AND NOT g.touches_new AND g.group_id = g.stored_call)""")
    con.execute("DELETE FROM otlp_calls WHERE call_id NOT IN (SELECT group_id FROM otlp_changed)")
    con.execute(
        """CREATE OR REPLACE TEMP TABLE otlp_retire AS
        SELECT DISTINCT _stored_call AS call_id FROM otlp_members
        WHERE _stored_call IS NOT NULL AND group_id IN (SELECT group_id FROM otlp_changed)""")
    replaced = unstaged = 0
    if _count(con, "SELECT count(*) FROM otlp_retire"):
        # the stored rows about to be replaced, with their old times (the incremental build recomputes those days)
        # and whether their call id lives on (`retired`: it does not, its built rows must go)
        # (a row an earlier chunk of this load stored was never there before the load: it is just removed)
        con.execute(
            f"""INSERT INTO {REPLACED}
            SELECT r.call_id, $load_id, r.started_at, r.ended_at, r.call_id NOT IN (SELECT call_id FROM otlp_calls)
            FROM main.raw_calls r WHERE r.call_id IN (SELECT call_id FROM otlp_retire) AND r.load_id <> $load_id""",
            {"load_id": load_id})
        removed = con.execute(
            "DELETE FROM main.raw_calls WHERE call_id IN (SELECT call_id FROM otlp_retire) RETURNING load_id").fetchall()
        unstaged = sum(1 for (owner,) in removed if owner == load_id)
        replaced = len(removed) - unstaged
        # the read-back spans of replaced calls are written again below, with the call they are part of now
        con.execute(
            f"""DELETE FROM {SPANS} r USING otlp_members m
            WHERE m._stored_call IS NOT NULL AND m.group_id IN (SELECT group_id FROM otlp_changed)
              AND r.trace_id = m.trace_id AND r.span_id = m.span_id""")
    thin = ", ".join(_THIN)
    con.execute(
        f"""INSERT INTO {SPANS} BY NAME
        SELECT s.* EXCLUDE (line_no, call_id, _stored_call, _pulled) REPLACE (
                 CASE WHEN s._pulled THEN s.load_id ELSE $load_id END AS load_id,
                 CASE WHEN n.n > 1 THEN s.attributes_json END AS attributes_json),
               nullif(m.group_id, s.call_id) AS stored_call_id, p.prefix_hashes, p.prefix_tokens
        FROM otlp_spans s
        JOIN otlp_members m USING (trace_id, span_id)
        JOIN (SELECT group_id, count(*) AS n FROM otlp_members GROUP BY group_id) n USING (group_id)
        LEFT JOIN otlp_prefix p ON p.call_id = s.call_id
        WHERE m.group_id IN (SELECT group_id FROM otlp_changed)
          AND (NOT s._pulled OR s._stored_call IN (SELECT call_id FROM otlp_retire))
        UNION ALL BY NAME
        SELECT {thin}, $load_id AS load_id FROM otlp_spans
        WHERE _kind = 'skip' AND NOT _pulled AND trace_id IS NOT NULL AND span_id IS NOT NULL
          AND parent_span_id IS NOT NULL""",
        {"load_id": load_id})
    calls = _count(con, "SELECT count(*) FROM otlp_calls")
    for t in ("otlp_members", "otlp_changed", "otlp_retire"):
        con.execute(f"DROP TABLE IF EXISTS {t}")
    return {"calls": calls, "replaced": replaced, "unstaged": unstaged}
