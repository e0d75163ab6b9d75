"""The skip-span gate of sql/otlp_spans.sql changes nothing that is kept.

A span with none of `conventions.call_keys()` (and not vLLM's `llm_request`) is read for its ids, name, scope and
times only. Over spans nobody here wrote (the recorded instrumentations of tests/conformance/fixtures, the peers'
cases in ../shared/data/peer_otel_cases) and over the bundled sample day, the spans query is run twice, with the
gate and with every span read whole, and the two must agree: the same spans with the same kind and reject
reason, every column of each call span, and the columns raw_otlp_spans keeps of each skip span.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from phaselens.ingest import otlp, otlp_carry
from phaselens.pipeline.store import connect
from tests.conftest import shared_data_dir

ROOT = Path(__file__).resolve().parents[2]
GATE = "x.name = 'llm_request' OR list_has_any("


def _has_spans(path: Path) -> bool:
    with gzip.open(path, "rt") as f:
        return bool(f.read(1))


# sdk-openai's file is empty: the openai SDK writes no spans of its own
SOURCES = sorted(p for p in (ROOT / "tests" / "conformance" / "fixtures").glob("*/spans.jsonl.gz") if _has_spans(p))
PEERS = (shared_data_dir() or Path("/nonexistent")) / "peer_otel_cases" / "peer_cases.otlp.jsonl"
if PEERS.exists():
    SOURCES.append(PEERS)
SAMPLE = ROOT / "tests" / "fixtures" / "otlp"
SOURCES += sorted(SAMPLE.glob("*.jsonl"))


def _lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return f.readlines()


def _spans(con, lines: list[str], sql: str, table: str) -> None:
    otlp.parse_batches(con, lines, 1)
    con.execute(sql, {"displays": ["f"], "keep": otlp.keep_list(None)})
    con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT * FROM otlp_spans")


def _differ(con, cols: str, where: str) -> int:
    return con.execute(
        f"SELECT count(*) FROM (SELECT {cols} FROM gated WHERE {where} EXCEPT ALL SELECT {cols} FROM whole WHERE {where}) "
        f"UNION ALL SELECT count(*) FROM (SELECT {cols} FROM whole WHERE {where} EXCEPT ALL SELECT {cols} FROM gated WHERE {where})"
    ).fetchall()


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    c = connect(tmp_path_factory.mktemp("gate") / "gate.duckdb")
    for m in otlp._MACROS:
        c.execute(m)
    yield c
    c.close()


def test_the_gate_is_in_the_spans_query():
    assert GATE in otlp.spans_sql()  # the check below opens it by this text


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.parent.name if p.name.startswith("spans") else p.stem)
def test_the_gate_keeps_every_kept_column(con, path):
    gated_sql = otlp.spans_sql()
    _spans(con, _lines(path), gated_sql, "gated")
    _spans(con, _lines(path), gated_sql.replace(GATE, "true OR list_has_any("), "whole")
    n, calls = con.execute("SELECT count(*), count(*) FILTER (WHERE _kind = 'call') FROM gated").fetchall()[0]
    assert n > 0 and calls > 0
    assert _differ(con, "line_no, call_id, _kind, _reason", "true") == [(0,), (0,)]
    assert _differ(con, "*", "_kind = 'call'") == [(0,), (0,)]
    assert _differ(con, ", ".join(otlp_carry._THIN) + ", line_no", "_kind = 'skip'") == [(0,), (0,)]


def test_the_gate_passes_the_spans_of_the_sample_day_unread(con):
    """The sample day's HTTP, tool and agent spans carry no call key: the gate leaves their attributes unread
    (their unkept columns differ from a whole read), and what is kept is the same."""
    lines = []
    for path in sorted((ROOT / "sample_logs" / "traces").glob("*.jsonl*"))[:3]:
        lines += _lines(path)
    assert lines, "the bundled sample traces are missing"
    gated_sql = otlp.spans_sql()
    _spans(con, lines, gated_sql, "gated")
    _spans(con, lines, gated_sql.replace(GATE, "true OR list_has_any("), "whole")
    unread = con.execute(
        "SELECT count(*) FROM gated g JOIN whole w USING (line_no, call_id) "
        "WHERE g._kind = 'skip' AND g.attributes_json IS DISTINCT FROM w.attributes_json").fetchall()[0][0]
    assert unread > 0
    assert _differ(con, "*", "_kind = 'call'") == [(0,), (0,)]
    assert _differ(con, ", ".join(otlp_carry._THIN) + ", line_no, _reason", "_kind = 'skip'") == [(0,), (0,)]
