"""`phaselens ingest --lake`: loaded rows written straight to a Parquet lake, one day partition at a time."""
from __future__ import annotations

from pathlib import Path

import duckdb
from typer.testing import CliRunner

from phaselens.cli import app
from phaselens.pipeline.lake import PENDING_KEY, RAW_RELATIONS, read_relation_sql

BATCH = Path(__file__).resolve().parent / "fixtures" / "batch"
DAY1 = BATCH / "traces" / "litellm.2026-11-16.jsonl"
DAY2 = BATCH / "traces" / "litellm.2026-11-17.jsonl"
BILLING = BATCH / "billing"


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


def _same_as_store(lake: Path, store: Path) -> None:
    """Every raw relation of the lake holds exactly the store's rows."""
    con = duckdb.connect(str(store), read_only=True)
    try:
        for rel in RAW_RELATIONS:
            back = read_relation_sql(str(lake), rel)
            if not any((lake / rel).glob("**/*.parquet")):
                assert con.execute(f"SELECT count(*) FROM {rel}").fetchone()[0] == 0, rel
                continue
            for a, b in ((f"SELECT * FROM {rel}", back), (back, f"SELECT * FROM {rel}")):
                assert con.execute(f"SELECT count(*) FROM (({a}) EXCEPT ALL ({b}))").fetchone()[0] == 0, rel
    finally:
        con.close()


def _parts(lake: Path, day: str) -> set[str]:
    return {p.name for p in (lake / "raw_calls" / f"day={day}").glob("*.parquet")}


def test_ingest_to_a_lake_writes_the_days_the_loads_touched(tmp_path):
    lake = tmp_path / "lake"
    r = _cli("ingest", str(DAY1), str(BILLING), "--lake", str(lake))
    assert r.exit_code == 0, r.output
    store = lake / "phaselens-ingest.duckdb"
    _same_as_store(lake, store)
    first = _parts(lake, "2026-11-16")
    assert first

    r = _cli("ingest", str(DAY2), "--lake", str(lake))
    assert r.exit_code == 0, r.output
    assert "1 day(s) of raw_calls" in r.output
    assert _parts(lake, "2026-11-16") == first  # the earlier day's files are not rewritten
    assert _parts(lake, "2026-11-17")
    _same_as_store(lake, store)
    n = duckdb.connect(str(store), read_only=True).execute("SELECT count(*) FROM raw_calls").fetchone()[0]
    assert n > 0

    r = _cli("ingest", str(DAY2), "--lake", str(lake))  # the same file again: a duplicate, nothing doubles
    assert r.exit_code == 0, r.output
    _same_as_store(lake, store)
    back = duckdb.connect().execute(f"SELECT count(*) FROM ({read_relation_sql(str(lake), 'raw_calls')})").fetchone()[0]
    assert back == n


def test_the_lake_reads_like_one_exported_from_a_store(tmp_path):
    """Ingesting straight to a lake and `ingest` then `export` give the same calls (the load ids differ)."""
    lake, store, exported = tmp_path / "lake", tmp_path / "s.duckdb", tmp_path / "exported"
    for args in (("ingest", str(DAY1), str(BILLING), "--lake", str(lake)), ("ingest", str(DAY2), "--lake", str(lake)),
                 ("ingest", str(DAY1), str(DAY2), str(BILLING), "--db", str(store)),
                 ("export", "--db", str(store), "--lake", str(exported))):
        r = _cli(*args)
        assert r.exit_code == 0, r.output
    con = duckdb.connect()
    for rel in ("raw_calls", "raw_billing_lines"):
        a = f"SELECT * EXCLUDE (load_id) FROM ({read_relation_sql(str(lake), rel)})"
        b = f"SELECT * EXCLUDE (load_id) FROM ({read_relation_sql(str(exported), rel)})"
        assert con.execute(f"SELECT count(*) FROM ({a})").fetchone()[0] > 0, rel
        for x, y in ((a, b), (b, a)):
            assert con.execute(f"SELECT count(*) FROM (({x}) EXCEPT ALL ({y}))").fetchone()[0] == 0, rel


def test_a_lake_written_from_another_store_is_not_mixed(tmp_path):
    store, lake = tmp_path / "a.duckdb", tmp_path / "lake"
    assert _cli("ingest", str(DAY1), "--db", str(store)).exit_code == 0
    assert _cli("export", "--db", str(store), "--lake", str(lake)).exit_code == 0
    r = _cli("ingest", str(DAY2), "--lake", str(lake))  # no --db: the lake's own store, which did not write it
    assert r.exit_code == 2
    assert "would mix two stores" in r.output and str(store.resolve()) in r.output
    assert not (lake / "raw_calls" / "day=2026-11-17").exists()
    r = _cli("ingest", str(DAY2), "--lake", str(lake), "--db", str(store))  # the store it came from: by day
    assert r.exit_code == 0, r.output
    assert "1 day(s) of raw_calls" in r.output
    _same_as_store(lake, store)


def test_an_interrupted_lake_write_is_redone_whole(tmp_path):
    lake = tmp_path / "lake"
    assert _cli("ingest", str(DAY1), "--lake", str(lake)).exit_code == 0
    store = lake / "phaselens-ingest.duckdb"
    # as a write cut off after removing a day's partition and before writing it back leaves things
    for p in (lake / "raw_calls" / "day=2026-11-16").glob("*.parquet"):
        p.unlink()
    con = duckdb.connect(str(store))
    con.execute("INSERT OR REPLACE INTO phaselens_meta VALUES (?, ?)", [PENDING_KEY, str(lake)])
    con.close()
    r = _cli("ingest", str(DAY2), "--lake", str(lake))
    assert r.exit_code == 0, r.output
    assert "wrote the whole lake" in r.output
    _same_as_store(lake, store)
    assert _parts(lake, "2026-11-16")


def test_an_object_store_lake_needs_a_store(tmp_path):
    r = _cli("ingest", str(DAY1), "--lake", "s3://bucket/lake")
    assert r.exit_code == 2
    assert "needs the store" in r.output and "--db" in r.output
