"""OTLP JSON traces: the Collector's file exporter (JSON Lines, one batch a line), a single OTLP JSON
document, and gzip-compressed files of either.

Lines are read in chunks of about 64 MB and parsed by DuckDB (`from_json` with the OTLP structure), not by
a Python loop, so a million spans load in seconds and memory stays flat whatever the file size. Chunks parse on
in-memory connections of their own, in threads, while the load's connection stages the chunk before them
(`ChunkParsers`): parsing reads nothing stored, staging does. A run's small files are parsed ahead of their
loads, several in one pass (`ParseAhead`), so each file does not pay the parse's fixed cost alone. Attribute
conventions (OTel GenAI old and new, OpenLLMetry, OpenInference, vLLM) are mapped to one `LlmCall` row in
`sql/otlp_spans.sql`.

Policy, per record: a span that is not a model call (HTTP, database, tool, agent) is skipped and
counted; a model-call span with a bad value is rejected with its reason; a line that is not JSON is
rejected as `malformed_json` with its line number. Prompt and completion text is never copied: only
hashes of the leading message blocks are kept (`prefix_hashes`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import queue
import threading
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import ClassVar

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from phaselens.models import Settings
from phaselens.models.vocabulary import expand_sql_rules, sql_macros

from . import conventions, jsonread, otlp_carry
from .base import SourceFile, StageCounts, UnreadableFile

_ANY = {
    "stringValue": "VARCHAR",
    "intValue": "VARCHAR",  # int64: a decimal string, or a number from lenient encoders
    "doubleValue": "DOUBLE",
    "boolValue": "BOOLEAN",
    "arrayValue": "JSON",
    "kvlistValue": "JSON",
    "bytesValue": "VARCHAR",
}
_KV = [{"key": "VARCHAR", "value": _ANY}]
_SPAN = {
    "traceId": "VARCHAR",
    "spanId": "VARCHAR",
    "parentSpanId": "VARCHAR",
    "name": "VARCHAR",
    "kind": "INTEGER",
    "startTimeUnixNano": "VARCHAR",
    "endTimeUnixNano": "VARCHAR",
    "attributes": _KV,
    "events": [{"timeUnixNano": "VARCHAR", "name": "VARCHAR"}],  # event attributes (text) are never read
    "droppedEventsCount": "VARCHAR",
    "status": {"code": "INTEGER", "message": "VARCHAR"},
}
STRUCTURE = json.dumps(
    {
        "resourceSpans": [
            {
                "resource": {"attributes": _KV},
                "scopeSpans": [{"scope": {"name": "VARCHAR", "version": "VARCHAR"}, "spans": [_SPAN]}],
            }
        ]
    }
)

# Attribute keys that carry prompt or completion text: never stored, never echoed in rejects.
CONTENT_KEY_PATTERN = (
    r"^(gen_ai\.(input|output)\.messages|gen_ai\.system_instructions|gen_ai\.tool\.definitions"
    r"|gen_ai\.(prompt|completion)(\..*)?|llm\.(input|output)_messages\..*|llm\.prompts?(\..*)?"
    r"|llm\.prompt_template\..*|(input|output)\.value|traceloop\.entity\.(input|output)"
    r"|ai\.(prompt|response\.text|response\.object).*|langfuse\.observation\.(input|output)|.*\.content)$"
)



LINE_BITS = 40  # a line number of a file fits in 40 bits; the file's index in a parse of several files lies above

# A cheap pre-test on the key (LIKE) before the exact pattern keeps this off the hot path.
_MACROS = [
    "CREATE OR REPLACE TEMP MACRO otlp_value(v) AS coalesce(v.stringValue, v.intValue, "
    "CAST(v.doubleValue AS VARCHAR), CAST(v.boolValue AS VARCHAR), CAST(v.arrayValue AS VARCHAR), "
    "CAST(v.kvlistValue AS VARCHAR), v.bytesValue)",
    "CREATE OR REPLACE TEMP MACRO otlp_is_content(k) AS "
    "(k LIKE '%messages%' OR k LIKE '%.content' OR k LIKE '%prompt%' OR k LIKE '%completion%' OR k LIKE '%put%'"
    " OR k LIKE '%instructions' OR k LIKE '%definitions' OR k LIKE 'ai.response.%')"
    f" AND regexp_matches(k, '{CONTENT_KEY_PATTERN}')",
    # a span's time: a count of nanoseconds written as decimal digits (a JSON integer or a string of digits),
    # else NULL; ingest/otlp_http.py `span_problem` answers the same before acknowledging a span
    "CREATE OR REPLACE TEMP MACRO otlp_ns(x) AS "
    "CASE WHEN regexp_full_match(x, '[0-9]{1,20}') THEN TRY_CAST(x AS HUGEINT) END",
    # the value of attribute `name`: the first one when a key repeats
    "CREATE OR REPLACE TEMP MACRO av(keys, vals, name) AS vals[list_position(keys, name)]",
    "CREATE OR REPLACE TEMP MACRO otlp_json_path(x, p) AS "
    "CASE WHEN x IS NOT NULL AND left(ltrim(x), 1) IN ('{', '[') AND json_valid(x) THEN json_extract_string(x, p) END",
    # an ISO 8601 time (Langfuse writes it JSON-quoted) as seconds after the span's start
    "CREATE OR REPLACE TEMP MACRO otlp_iso_after_start(x, start_ns) AS "
    "(epoch_ns(TRY_CAST(trim(x, '\"') AS TIMESTAMPTZ)) - start_ns) / 1e9",
    # a parse of several files numbers each line (file index << LINE_BITS) + its line number in its file
    f"CREATE OR REPLACE TEMP MACRO otlp_file(displays, n) AS displays[(n >> {LINE_BITS}) + 1]",
    f"CREATE OR REPLACE TEMP MACRO otlp_line(n) AS n & {(1 << LINE_BITS) - 1}",
    "CREATE OR REPLACE TEMP MACRO otlp_json_object(keys, vals) AS '{' || array_to_string("
    "list_transform(list_zip(keys, vals), lambda p: to_json(p[1]) || ':' || coalesce(to_json(p[2]), 'null')), ',') || '}'",
]


CHUNK_BYTES = 64 * 1024 * 1024  # lines per DuckDB pass: bounds memory whatever the file size
# Parsing a chunk costs about twice what staging it does, so two parsers keep pace with the load's connection; more
# would only hold more chunks in memory.
PARSE_WORKERS = max(1, min(2, os.cpu_count() or 1))
# A file of at most this many bytes is parsed whole, ahead of its load, while the load stages the files before it
# (`ParseAhead`), together with the next ones up to this many bytes and AHEAD_FILES files: each file costs about
# half a second of fixed work (the parse's planning, the staging's statements), which a run of many small files
# would otherwise pay one file after the other.
AHEAD_BYTES = 16 << 20
AHEAD_FILES = 64


@functools.cache
def _sql(name: str) -> str:
    """ingest/sql/<name>.sql with the product's rules expanded, read once: chunks and merge rounds run it again."""
    return expand_sql_rules(resources.files("phaselens.ingest").joinpath("sql", f"{name}.sql").read_text())


def _in_list(values: tuple[str, ...]) -> str:
    return ", ".join("'" + x.replace("'", "''") + "'" for x in values)


@functools.cache
def spans_sql() -> str:
    """sql/otlp_spans.sql with the column expressions generated from the conventions table."""
    return (_sql("otlp_spans").replace("{{CONVENTION_COLUMNS}}", conventions.sql_columns())
            .replace("{{CONVENTION_RAW_COLUMNS}}", conventions.raw_columns())
            .replace("{{NOT_CALLS}}", _in_list(conventions.NOT_CALLS))
            .replace("{{CALL_KEYS}}", _in_list(tuple(conventions.call_keys())))
            .replace("{{EMBEDDING_OPS}}", _in_list(tuple(x.lower() for x in conventions.EMBEDDING_OPS))))


@functools.cache
def sdk_scope_sql() -> str:
    """A condition on `_scope`: the span is a provider SDK's own (conventions.SDK_SCOPES)."""
    like = " OR ".join("_scope LIKE '" + x.replace("'", "''") + "%'" for x in conventions.SDK_SCOPES) or "false"
    return f"({like})"


@functools.cache
def merge_sql() -> str:
    """sql/otlp_merge.sql with the provider SDKs' own scopes from the conventions table."""
    return (_sql("otlp_merge").replace("{{SDK_SCOPE}}", sdk_scope_sql())
            .replace("{{DISAGG_NS}}", str(otlp_carry.DISAGG_NS)))  # the read-back searches the same window


def keep_list(options: dict | None) -> list[str]:
    """The attribute allow-list for a load: the conventions' keys plus `keep_attributes` from the options."""
    extra = (options or {}).get("keep_attributes") or ()
    return conventions.stored_keys(tuple(extra))


def _looks_like_otlp(src: SourceFile) -> bool:
    text = src.head_text.lstrip()
    return text[:1] in ("{", "[") and '"resourceSpans"' in text[:4096]


def _is_json_lines(src: SourceFile) -> bool:
    """JSON Lines when the first line is a whole JSON value; otherwise one (pretty-printed) document."""
    first = src.first_line().strip()
    if "\n" not in src.head_text.strip() and "\r" not in src.head_text.strip():
        return True  # a single line (or a first line longer than the head): a pretty-printed document has newlines
    try:
        json.loads(first)
        return True
    except (ValueError, RecursionError):
        return False


class OtlpJsonAdapter:
    """OpenTelemetry traces in OTLP JSON (Collector file exporter lines, or one document)."""

    name: ClassVar[str] = "otlp_json"
    kind: ClassVar[str] = "calls"
    # the load's connection stages on the cores the parsers leave: with DuckDB's default (every core) its statements
    # and the parsers contend for the same cores, which cost about 7% more CPU time and 6% more time on 2 cores
    stage_threads: ClassVar[int] = max(1, (os.cpu_count() or 1) - PARSE_WORKERS)
    # the first chunks parse while the load hashes the file: a re-offered file is stopped before its first write
    reads_before_hash: ClassVar[bool] = True

    def sniff(self, src: SourceFile) -> bool:
        return _looks_like_otlp(src)

    def stage(self, con: duckdb.DuckDBPyConnection, src: SourceFile, load_id: str) -> StageCounts:
        progress = src.options.get("progress")
        total, batches = StageCounts(), 0
        cut = None
        keep = keep_list(src.options)
        with contextlib.ExitStack() as stack:
            if (early := _parsed_ahead(src)) is not None:  # the run parsed it while it staged the files before it
                for why in early.problems:
                    src.incomplete(why)
                cut = early.cut
                src.before_first_write()
                parsed_chunks: Iterator[ParsedChunk] = iter(early.parsed)
            else:
                chunks, cut = _chunks(src)
                parsers = stack.enter_context(ChunkParsers(_temp_directory(con)))
                parsed_chunks = parsers.parse_all(chunks, src.display, keep, first=src.before_first_write)
            for parsed in parsed_chunks:
                counts, good = _stage_chunk(con, src.display, parsed, load_id)
                batches += good
                total = total + counts
                if progress:
                    progress(parsed.last_line)
        if not batches:
            raise UnreadableFile(src.display, "no line is an OTLP JSON batch", "check that the file holds OTLP traces")
        if cut is not None:
            con.execute("INSERT INTO stage_rejects (source, locator, reason, detail, raw) VALUES ('otlp', $at, "
                        "'malformed_json', $detail, NULL)", {"at": src.locator(f"@{cut.position}"), "detail": cut.detail})
            total = total + StageCounts(rejected=1)
        return total


@dataclass(frozen=True)
class _Cut:
    position: int  # character offset where the document breaks
    detail: str


def _whole_document(src: SourceFile) -> tuple[str, _Cut | None]:
    """A single OTLP JSON document, as text to stage. When it is cut short or breaks part way, the text holds
    its whole spans before the break (under their whole resource and scope), the file is marked as not read in
    full, and the break is returned to be rejected: one cut span never loses the spans before it."""
    text = src.read_text()
    try:
        json.loads(text)
        return text, None
    except (ValueError, RecursionError):
        pass
    cut = jsonread.salvage(text)
    doc = cut.value
    if not cut.why or not isinstance(doc, dict) or not isinstance(doc.get("resourceSpans"), list):
        return text, None  # not an OTLP document that broke part way: staged as it is, and rejected whole
    src.incomplete(cut.why)
    kept, cut_spans = _whole_spans(doc["resourceSpans"])
    detail = (f"{cut.why}: the spans before the break are kept"
              + (f"; {cut_spans} span{'s' if cut_spans != 1 else ''} cut short or without whole resource or scope "
                 "attributes are not" if cut_spans else ""))
    return json.dumps({"resourceSpans": kept}, ensure_ascii=False), _Cut(cut.position, detail)


def _whole_spans(resource_spans: list) -> tuple[list, int]:
    """The resource and scope entries of a salvaged document with only their whole spans; a cut entry keeps its
    spans only when its resource (and scope) attributes are whole, since those name the service. Returns the
    entries and how many spans were dropped."""
    kept, dropped = [], 0
    for r in resource_spans:
        if jsonread.is_whole(r) or not isinstance(r, dict):
            kept.append(r)
            continue
        scopes = r.get("scopeSpans")
        resource_ok = "resource" in r and jsonread.is_whole(r["resource"])
        out = []
        for sc in scopes if isinstance(scopes, list) else []:
            if not isinstance(sc, dict):
                continue
            spans = sc.get("spans") if isinstance(sc.get("spans"), list) else []
            whole = [sp for sp in spans if jsonread.is_whole(sp)]
            scope_ok = "scope" not in sc or jsonread.is_whole(sc["scope"])
            if resource_ok and scope_ok:
                out.append({**sc, "spans": whole})
                dropped += len(spans) - len(whole)
            else:
                dropped += len(spans)
        if out:
            kept.append({**r, "scopeSpans": out})
    return kept, dropped


def _chunks(src: SourceFile) -> tuple[Iterator[tuple[int, list[str]]], _Cut | None]:
    """The file's chunks to parse (`_line_chunks` of JSON Lines, else the one document whole), and where a single
    document breaks (to be rejected), if it does."""
    if _is_json_lines(src):
        return _line_chunks(src), None
    text, cut = _whole_document(src)
    return iter([(1, [text])]), cut


def _line_chunks(src: SourceFile) -> Iterator[tuple[int, list[str]]]:
    """The file's lines in chunks of about CHUNK_BYTES, with the number of each chunk's first line."""
    lines: list[str] = []
    size, first, n = 0, 1, 0
    try:
        for n, line in enumerate(src.text_lines(), 1):
            lines.append(line)
            size += len(line)
            if size >= CHUNK_BYTES:
                yield first, lines
                lines, size, first = [], 0, n + 1
    except (OSError, EOFError, zlib.error) as e:
        raise UnreadableFile(src.display, f"not a readable gzip file ({e})", "check the file is complete") from e
    if lines:
        yield first, lines


Columns = tuple[tuple[str, str], ...]
Exported = tuple[pa.Table, Columns]  # a parser's table as Arrow, with its DuckDB column types


@dataclass
class ParsedChunk:
    """One chunk of lines parsed into spans, apart from the store: what `_stage_chunk` stages. The prompt text the
    spans carried stays behind; only its block hashes (`prefix`) come along."""

    first_line: int
    last_line: int
    # each table as Arrow with its DuckDB column types (Arrow has no HUGEINT)
    spans: tuple[pa.Table, Columns]  # otlp_spans without content_attrs
    prefix: tuple[pa.Table, Columns]  # otlp_prefix (with the line of each call, which `parse_files` splits by)
    # rejects of lines that are not OTLP batches and of entries whose spans are lost (with their line, as above)
    line_rejects: tuple[pa.Table, Columns]
    batches: int  # lines that are OTLP batches


_BATCHES = """
CREATE OR REPLACE TEMP TABLE otlp_batches AS
SELECT line_no, j,
       CASE WHEN NOT ok THEN 'malformed_json' WHEN j.resourceSpans IS NULL THEN 'unsupported_record' END AS bad,
       CASE WHEN NOT ok OR j.resourceSpans IS NULL THEN
         -- never the line itself: any string in it may be prompt text
         '[withheld: ' || strlen(line) || ' bytes, md5 ' || left(md5(line), 12) || ']'
       END AS raw,
       -- the text of a batch with an entry whose span list is missing or not a list, kept to name that entry's keys
       -- (otlp_lost); no other line is kept
       CASE WHEN ok AND list_bool_or(list_transform(j.resourceSpans, lambda r: r IS NOT NULL AND (r.scopeSpans IS NULL
              OR list_bool_or(list_transform(r.scopeSpans, lambda s: s IS NOT NULL AND s.spans IS NULL)))))
            THEN line END AS lost_line
FROM (
  SELECT line_no, line, ok, CASE WHEN ok THEN from_json(line, $structure) END AS j
  -- blank lines are not records; a match that stops at the first other character, not a trimmed copy of each line
  FROM (SELECT line_no, line, {ok} AS ok
        FROM (SELECT {numbers} AS line_no, unnest($lines) AS line)
        WHERE NOT regexp_full_match(line, '[ \t\r\n]*'))
)
"""


def parse_batches(con: duckdb.DuckDBPyConnection, lines: list[str], first_line: int,
                  numbers: list[int] | None = None) -> None:
    """otlp_batches(line_no, j, bad, raw, lost_line): `lines` (numbered from `first_line`, or each by `numbers`)
    parsed, or why not.

    The lines reach DuckDB as a list parameter, read where they are parsed: they are not copied into a table first.
    (Not a registered Arrow table: DuckDB can keep an Arrow scan's buffers alive after unregister, which made memory
    grow with every chunk.) Each line is parsed once, with no validity check first; only when a line of the chunk
    is not JSON (the parse fails) is the chunk parsed again with each line checked, so that line is rejected and
    the others kept."""
    params = {"structure": STRUCTURE, "lines": lines}
    if numbers is None:
        params["first"], numbering = first_line, "$first + generate_subscripts($lines, 1) - 1"
    else:
        params["numbers"], numbering = numbers, "unnest($numbers)"
    try:
        con.execute(_BATCHES.format(ok="true", numbers=numbering), params)
    except duckdb.InvalidInputException:
        con.execute(_BATCHES.format(ok="json_valid(line)", numbers=numbering), params)


def parser_connection(temp_directory: str | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection that parses chunks (`parse_chunk`): it holds no store, so chunks parse in
    threads beside the load's own connection."""
    config = {"threads": 1, "memory_limit": Settings().memory_limit}
    if temp_directory:
        config["temp_directory"] = temp_directory
    con = duckdb.connect(config=config)
    for m in (*_MACROS, *sql_macros()):
        con.execute(m)
    return con


def parse_chunk(con: duckdb.DuckDBPyConnection, lines: list[str], first_line: int, display: str,
                keep: list[str]) -> ParsedChunk:
    """Parse OTLP JSON lines (numbered from `first_line`) on a parser connection into spans, prompt-prefix hashes
    and the rejects of lines and entries that hold no readable spans. Reads nothing stored."""
    spans, prefix, rejects, batches = _parse_tables(con, lines, [display], keep, first_line=first_line)
    return ParsedChunk(first_line=first_line, last_line=first_line + len(lines) - 1, spans=spans, prefix=prefix,
                       line_rejects=rejects, batches=batches.get(0, 0))


def parse_files(con: duckdb.DuckDBPyConnection, files: list[tuple[str, list[str]]],
                keep: list[str]) -> list[ParsedChunk]:
    """Several small files parsed in one pass, each `(display, its lines)` whole: the parse's fixed cost (mostly
    the planning of the spans' columns) is paid once for them all. Returns each file's chunk, as `parse_chunk` of
    that file alone would make it (its lines numbered from 1)."""
    lines = [line for _, ls in files for line in ls]
    numbers = [(k << LINE_BITS) + n for k, (_, ls) in enumerate(files) for n in range(1, len(ls) + 1)]
    tables = _parse_tables(con, lines, [d for d, _ in files], keep, numbers=numbers)
    parts = [_by_file(t, len(files)) for t in tables[:3]]
    return [ParsedChunk(first_line=1, last_line=len(ls), spans=parts[0][k], prefix=parts[1][k],
                        line_rejects=parts[2][k], batches=tables[3].get(k, 0))
            for k, (_, ls) in enumerate(files)]


def _by_file(part: Exported, files: int) -> list[Exported]:
    """A parse of several files' table split by file, each with its own line numbers."""
    table, types = part
    numbers = table.column("line_no")
    which = pc.shift_right(numbers, LINE_BITS)
    own = pc.bit_wise_and(numbers, (1 << LINE_BITS) - 1)
    table = table.set_column(table.schema.get_field_index("line_no"), "line_no", own)
    return [(table.filter(pc.equal(which, k)), types) for k in range(files)]


def _parse_tables(con: duckdb.DuckDBPyConnection, lines: list[str], displays: list[str], keep: list[str], *,
                  first_line: int = 1, numbers: list[int] | None = None
                  ) -> tuple[Exported, Exported, Exported, dict[int, int]]:
    """The spans, prefix hashes and line rejects of `lines` (of the files `displays`, numbered as `parse_batches`
    numbers them), and how many lines of each file (by index) are OTLP batches."""
    lines = [jsonread.no_lone_surrogates(line) for line in lines]  # one bad value must not lose the line
    parse_batches(con, lines, first_line, numbers)
    # An entry whose span list is missing (a misspelled or mangled key) or not a list holds spans that
    # cannot be read: each such entry is rejected, so a file that lost spans this way says so.
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE otlp_lost AS
        WITH r AS (
          SELECT line_no, unnest(j.resourceSpans) AS r, generate_subscripts(j.resourceSpans, 1) - 1 AS ri
          FROM otlp_batches
          WHERE lost_line IS NOT NULL  -- the entries of lines that lost one, found without copying every line's entries
        )
        SELECT line_no, ri, NULL::INTEGER AS si FROM r WHERE r IS NOT NULL AND r.scopeSpans IS NULL
        UNION ALL
        SELECT line_no, ri, si FROM (
          SELECT line_no, ri, unnest(r.scopeSpans) AS s, generate_subscripts(r.scopeSpans, 1) - 1 AS si FROM r
        ) WHERE s IS NOT NULL AND s.spans IS NULL
        """
    )
    con.execute(spans_sql(), {"displays": displays, "keep": keep})
    con.execute(_sql("otlp_prefix"))
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE otlp_line_rejects AS
        SELECT 'otlp' AS source, otlp_file($displays, line_no) || ':' || otlp_line(line_no) AS locator, bad AS reason,
               CASE bad WHEN 'malformed_json' THEN 'line is not valid JSON'
                        ELSE 'valid JSON but not an OTLP batch (no resourceSpans)' END AS detail,
               raw, line_no
        FROM otlp_batches WHERE bad IS NOT NULL
        UNION ALL
        SELECT 'otlp', otlp_file($displays, line_no) || ':' || otlp_line(line_no) || '/resourceSpans[' || ri || ']'
                 || coalesce('/scopeSpans[' || si || ']', ''), 'missing_field',
               CASE WHEN si IS NULL
                    THEN 'a resourceSpans entry has no scopeSpans list (the key is missing or misspelled, or not a list): its spans cannot be read'
                    ELSE 'a scopeSpans entry has no spans list (the key is missing or misspelled, or not a list): its spans cannot be read' END,
               -- the entry's key names (never its values): which one is misspelled
               left('keys: ' || array_to_string(json_keys(c.lost_line, '$.resourceSpans[' || ri || ']'
                      || coalesce('.scopeSpans[' || si || ']', '')), ', '), 500), line_no
        FROM otlp_lost JOIN otlp_batches c USING (line_no)
        """,
        {"displays": displays},
    )
    tables = (_export(con, "otlp_spans", without="content_attrs"), _export(con, "otlp_prefix"),
              _export(con, "otlp_line_rejects"),
              dict(con.execute(f"SELECT line_no >> {LINE_BITS}, count(*) FROM otlp_batches WHERE bad IS NULL "
                               "GROUP BY ALL").fetchall()))
    _drop_parse_tables(con)
    return tables


def _drop_parse_tables(con: duckdb.DuckDBPyConnection) -> None:
    for t in ("otlp_line_rejects", "otlp_prefix", "otlp_spans", "otlp_lost", "otlp_batches"):
        con.execute(f"DROP TABLE IF EXISTS {t}")


def parse_fitting(con: duckdb.DuckDBPyConnection, lines: list[str], first_line: int, display: str,
                  keep: list[str]) -> list[ParsedChunk]:
    """`parse_chunk`, in parts when the chunk does not fit in the parser's memory limit: a chunk that runs out of
    memory is parsed again as two halves (each split again while it does not fit), so a low `memory_limit` or a
    dense chunk costs passes, not the load. Only a single line too large for the limit stops the file."""
    try:
        return [parse_chunk(con, lines, first_line, display, keep)]
    except duckdb.OutOfMemoryException as e:
        _drop_parse_tables(con)  # what the failed pass made, before the halves need the memory
        if len(lines) < 2:
            limit = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
            why = str(e).splitlines()[0]  # DuckDB's own advice after it names SQL settings, not phaselens's
            raise UnreadableFile(
                display, f"line {first_line} cannot be parsed within the memory limit of {limit} ({why})",
                "raise PHASELENS_MEMORY_LIMIT, e.g. PHASELENS_MEMORY_LIMIT=4GB") from e
    half = len(lines) // 2
    return (parse_fitting(con, lines[:half], first_line, display, keep)
            + parse_fitting(con, lines[half:], first_line + half, display, keep))


def _export(con: duckdb.DuckDBPyConnection, table: str, without: str = "") -> tuple[pa.Table, Columns]:
    """Temp table `table` of a parser connection as Arrow (less the column `without`), with its DuckDB types."""
    types = tuple(con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = 'temp' AND table_name = ? "
        "AND column_name <> ? ORDER BY column_index", [table, without]).fetchall())
    columns = ", ".join(f'"{c}"' for c, _ in types)
    return con.sql(f"SELECT {columns} FROM {table}").to_arrow_table(), types


class ChunkParsers:
    """Chunks parsed in threads, each on a parser connection of its own, ahead of the chunk being staged: while
    the load's connection stages one chunk (inside its transaction), the next ones parse. DuckDB releases the
    interpreter while it works, so parsing and staging share the machine's cores. Results come back in file order;
    at most `workers + 1` chunks are read ahead, so memory stays bounded whatever the file size."""

    def __init__(self, temp_directory: str | None = None, workers: int | None = None):
        self.workers = workers or PARSE_WORKERS
        self._temp_directory = temp_directory
        self._free: queue.SimpleQueue[duckdb.DuckDBPyConnection] = queue.SimpleQueue()
        self._opened: list[duckdb.DuckDBPyConnection] = []
        self._lock = threading.Lock()
        self._stopping = False
        self._pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> ChunkParsers:
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="phaselens-otlp-parse")
        return self

    def __exit__(self, exc_type, *exc) -> None:
        assert self._pool is not None
        if exc_type is not None:  # the load stops (an error, or content loaded before): so do the parses under way
            with self._lock:
                self._stopping = True
                for con in self._opened:
                    con.interrupt()
        self._pool.shutdown(wait=True, cancel_futures=True)
        for con in self._opened:
            con.close()

    def _parse(self, first_line: int, lines: list[str], display: str, keep: list[str]) -> list[ParsedChunk]:
        try:
            con = self._free.get_nowait()
        except queue.Empty:
            con = parser_connection(self._temp_directory)
            with self._lock:
                self._opened.append(con)
        with self._lock:
            if self._stopping:  # no result is waited for any more
                self._free.put(con)
                return []
        try:
            return parse_fitting(con, lines, first_line, display, keep)
        finally:
            self._free.put(con)

    def parse_all(self, chunks: Iterator[tuple[int, list[str]]], display: str, keep: list[str],
                  first: Callable[[], None] | None = None) -> Iterator[ParsedChunk]:
        """The chunks parsed, in file order. `first` is called once the first chunks are handed to the parsers,
        before the first result is waited for (the load's content check: a known file stops there, while its
        first chunks are still parsing)."""
        assert self._pool is not None, "use ChunkParsers as a context manager"
        pending: deque[Future[list[ParsedChunk]]] = deque()

        def next_result() -> list[ParsedChunk]:
            nonlocal first
            if first is not None:
                first, check = None, first
                check()
            return pending.popleft().result()

        for first_line, lines in chunks:
            pending.append(self._pool.submit(self._parse, first_line, lines, display, keep))
            del lines  # the parser holds the chunk now: not this frame while the consumer stages
            if len(pending) > self.workers:
                yield from next_result()
        while pending:
            yield from next_result()


def _temp_directory(con: duckdb.DuckDBPyConnection) -> str | None:
    """Where the load's connection spills: the parsers spill there too (not into the working directory)."""
    return con.execute("SELECT current_setting('temp_directory')").fetchall()[0][0] or None


def _file_state(path: Path) -> tuple[int, int, int, int] | None:
    """(device, inode, size, modification time in ns) of a file, or None when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


@dataclass
class ParsedAhead:
    """A whole file parsed by `ParseAhead`: what `OtlpJsonAdapter.stage` would have parsed itself."""

    parsed: list[ParsedChunk]
    cut: _Cut | None  # where a single document breaks (rejected by the stage)
    problems: list[str]  # why the file was not read in full (`SourceFile.incomplete`)
    state: tuple[int, int, int, int]  # `_file_state` while it was read: the load uses the parse only if it still holds


def _parsed_ahead(src: SourceFile) -> ParsedAhead | None:
    """The parse the run made of `src` ahead of its load, when there is one and the file has not changed since."""
    if src.read_ahead is None:
        return None
    early = src.read_ahead()
    if not isinstance(early, ParsedAhead) or early.state != _file_state(src.path):
        return None
    return early


class ParseAhead:
    """The next small OTLP JSON files of a run (each at most AHEAD_BYTES on disk) parsed ahead of their loads, in
    a thread and on a parser connection kept for the run, while the load's connection stages the files before
    them. They are parsed several at once (`parse_files`: up to AHEAD_BYTES and AHEAD_FILES files a pass), so the
    parse's fixed cost is paid once a pass, not once a file; a pass starts when the load takes the first file of
    the pass before it, so at most two passes are held. Parsing reads nothing stored, so the order of the loads and
    what they store are those of a run without it.

    The parse is only a head start: anything unexpected (not OTLP, more than one chunk, an error, the file changed
    while or after it was read) leaves a file's parse unused, and its load reads the file itself, with its own
    errors."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self._temp_directory = _temp_directory(con)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="phaselens-otlp-ahead")
        self._lock = threading.Lock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._closed = False
        self._options: dict = {}
        self._queue: deque[tuple[Path, int]] = deque()  # offered, not yet in a pass: (path, size)
        self._passes: dict[Path, Future[dict[Path, ParsedAhead | None]]] = {}
        self._last: Future | None = None  # the pass submitted last

    def __enter__(self) -> ParseAhead:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop a parse under way (the run ends, or stops) and close the parser connection."""
        with self._lock:
            self._closed = True
            if self._con is not None:
                self._con.interrupt()
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._con is not None:
            self._con.close()

    def offer(self, paths: list[Path], options: dict) -> None:
        """The files whose loads may use a parse made ahead, in the order they are loaded (a file too large to be
        parsed ahead is left out); the first pass starts at once."""
        self._options = options
        for path in paths:
            state = _file_state(path)
            if state is not None and state[2] <= AHEAD_BYTES:
                self._queue.append((path, state[2]))
        self._next_pass()

    def take(self, path: Path) -> Callable[[], ParsedAhead | None] | None:
        """What the run parsed of `path` ahead of its load, to wait for (`SourceFile.read_ahead`), or None."""
        done = self._passes.pop(path, None)
        if done is None:
            return None
        if done is self._last:  # the load reached this pass: the next one parses while it stages
            self._next_pass()
        return lambda: done.result().get(path)

    def _next_pass(self) -> None:
        batch: list[Path] = []
        size = 0
        while self._queue and len(batch) < AHEAD_FILES and (not batch or size + self._queue[0][1] <= AHEAD_BYTES):
            path, n = self._queue.popleft()
            batch.append(path)
            size += n
        if batch:
            self._last = self._pool.submit(self._read, batch, self._options)
            for path in batch:
                self._passes[path] = self._last

    def _connection(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            if self._con is None:
                self._con = parser_connection(self._temp_directory)
            return self._con

    def _read(self, batch: list[Path], options: dict) -> dict[Path, ParsedAhead | None]:
        results: dict[Path, ParsedAhead | None] = dict.fromkeys(batch)
        files: list[tuple[Path, tuple, SourceFile, list[str], _Cut | None]] = []
        size = 0
        for path in batch:
            if self._closed:
                return results
            state = _file_state(path)
            src = SourceFile(path, display=str(path), options=options)
            try:
                if state is None or src.is_empty or not _looks_like_otlp(src):
                    continue
                chunks, cut = _chunks(src)
                first = next(chunks, None)
                if first is None or next(chunks, None) is not None:  # more than one chunk: the load's parsers share it
                    continue
                lines = first[1]
            except Exception:  # noqa: BLE001 - the load reads the file itself and reports what is wrong with it
                continue
            size += sum(map(len, lines))
            if size > CHUNK_BYTES:  # what a compressed file holds: the rest of the pass is parsed by its loads
                break
            files.append((path, state, src, lines, cut))
        if not files:
            return results
        try:
            parsed = parse_files(self._connection(), [(str(path), lines) for path, _, _, lines, _ in files],
                                 keep_list(options))
        except Exception:  # noqa: BLE001 - as above; also a pass that does not fit the memory limit, or stopped
            return results
        for (path, state, src, _, cut), chunk in zip(files, parsed, strict=True):
            if _file_state(path) == state:  # not written to while it was read
                results[path] = ParsedAhead([chunk], cut, list(src.problems), state)
        return results


def _import(con: duckdb.DuckDBPyConnection, name: str, part: tuple[pa.Table, Columns]) -> None:
    """Temp table `name` on the load's connection from a parsed chunk's Arrow table, with its DuckDB types.

    The Arrow table is inserted as a relation, not registered: a registered view is a catalog entry, which the load's
    transaction keeps (with the Arrow buffers behind it) until it ends, so memory would grow with every chunk."""
    table, types = part
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} (" + ", ".join(f'"{c}" {t}' for c, t in types) + ")")
    if table.num_rows:
        con.from_arrow(table).project(", ".join(f'CAST("{c}" AS {t}) AS "{c}"' for c, t in types)).insert_into(name)


def _stage_chunk(con: duckdb.DuckDBPyConnection, display: str, parsed: ParsedChunk,
                 load_id: str) -> tuple[StageCounts, int]:
    """Stage one parsed chunk inside the load's transaction: the chunk's spans are merged with the stored spans of
    the same calls (otlp_carry), and are stored under `load_id`. Returns the counts and how many of its lines were
    OTLP batches."""
    _import(con, "otlp_spans", parsed.spans)
    _import(con, "otlp_prefix", parsed.prefix)
    _import(con, "otlp_line_rejects", parsed.line_rejects)
    rejected, skipped = con.execute(
        "SELECT count(*) FILTER (WHERE _reason IS NOT NULL), count(*) FILTER (WHERE _kind = 'skip') FROM otlp_spans"
    ).fetchall()[0]
    carried = otlp_carry.carry_in(con, sdk_scope_sql())  # duplicates out, stored spans of the same calls in
    con.execute(merge_sql())
    # label propagation until no label moves: it ends, as each round only lowers labels (a pair: one round and a check)
    while con.execute(_sql("otlp_merge_step")).fetchone()[0]:
        pass
    con.execute(_sql("otlp_calls"))
    settled = otlp_carry.settle(con, load_id)  # only new or changed calls stay in otlp_calls
    # straight into raw_calls (not through stage_calls): the merge and settle above already made each call once,
    # and a row written here is written while the next chunks parse, not after the last one
    con.execute(
        """
        INSERT INTO main.raw_calls BY NAME
        SELECT c.* EXCLUDE (n_spans, merged_ids) REPLACE ($load_id AS load_id), p.prefix_hashes, p.prefix_tokens
        FROM otlp_calls c
        LEFT JOIN (  -- prompt hashes of the call's first span that had prompt text
          SELECT c2.call_id, arg_min(p.prefix_hashes, len(p.prefix_hashes) = 0) AS prefix_hashes,
                 arg_min(p.prefix_tokens, len(p.prefix_hashes) = 0) AS prefix_tokens
          FROM otlp_calls c2, unnest(list_prepend(c2.call_id, list_transform(c2.merged_ids, lambda m: 'otlp:' || m))) AS u(member)
          JOIN otlp_prefix p ON p.call_id = u.member
          GROUP BY c2.call_id
        ) p USING (call_id)
        """,
        {"load_id": load_id},
    )
    con.execute(
        """
        INSERT INTO stage_rejects BY NAME
        SELECT 'otlp' AS source, source_locator AS locator, _reason AS reason,
               CASE _reason
                 WHEN 'bad_timestamp' THEN 'startTimeUnixNano is missing, zero or not a number, or endTimeUnixNano is not a time'
                 WHEN 'end_before_start' THEN 'endTimeUnixNano is earlier than startTimeUnixNano'
                 WHEN 'missing_model' THEN 'model-call span names no model (gen_ai.request.model / llm.model_name)'
                 WHEN 'negative_tokens' THEN 'a token count is below zero'
                 WHEN 'missing_field' THEN 'the span has no traceId or spanId'
                 WHEN 'bad_number' THEN 'a token count, TTFT or duration is not a number or out of range'
               END AS detail,
               left(attributes_json, 500) AS raw
        FROM otlp_spans WHERE _reason IS NOT NULL AND NOT _pulled
        UNION ALL
        SELECT source, locator, reason, detail, raw FROM otlp_line_rejects
        """
    )
    # spans merged into another span's call count as skipped: they describe a call stored once. Across loads the
    # chunk's new call spans made `net` more calls (a stored call they joined is replaced, not added to)
    net = settled["calls"] - settled["replaced"] - settled["unstaged"]
    skipped += max(0, carried["new_call_spans"] - net)
    con.execute("DROP VIEW IF EXISTS otlp_ok")
    for t in ("otlp_line_rejects", "otlp_calls", "otlp_stages", "otlp_labels", "otlp_edges", "otlp_prefix", "otlp_spans"):
        con.execute(f"DROP TABLE IF EXISTS {t}")
    counts = StageCounts(accepted=max(0, net), rejected=rejected + parsed.line_rejects[0].num_rows, skipped=skipped,
                         duplicates=carried["duplicates"], replaced=settled["replaced"])
    return counts, parsed.batches


ADAPTERS = [OtlpJsonAdapter()]
