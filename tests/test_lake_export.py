"""`phaselens export`: the raw relations as a day-partitioned Parquet lake that reads back row for row."""
import duckdb

from phaselens.pipeline.lake import RAW_RELATIONS, export_lake, read_relation_sql


def test_export_reads_back_identical(demo_store, tmp_path):
    lake = tmp_path / "lake"
    con = duckdb.connect(str(demo_store), read_only=True)
    counts = export_lake(con, str(lake))
    assert counts["raw_calls"] > 0 and counts["raw_billing_lines"] > 0
    days = sorted(p.name for p in (lake / "raw_calls").iterdir())
    assert days and all(d.startswith("day=") for d in days)
    for rel in RAW_RELATIONS:
        back = read_relation_sql(str(lake), rel)
        cols = [r[0] for r in con.execute(f"DESCRIBE {rel}").fetchall()]
        assert [r[0] for r in con.execute(f"DESCRIBE {back}").fetchall()] == cols, rel
        for a, b in ((f"SELECT * FROM {rel}", back), (back, f"SELECT * FROM {rel}")):
            extra = con.execute(f"SELECT count(*) FROM (({a}) EXCEPT ALL ({b}))").fetchone()[0]
            assert extra == 0, rel
        assert con.execute(f"SELECT count(*) FROM ({back})").fetchone()[0] == counts[rel]
    con.close()


def test_cli_export(demo_store, tmp_path):
    from typer.testing import CliRunner

    from phaselens.cli import app

    lake = tmp_path / "cli-lake"
    r = CliRunner().invoke(app, ["export", "--db", str(demo_store), "--lake", str(lake)])
    assert r.exit_code == 0, r.output
    con = duckdb.connect()
    n = con.execute(f"SELECT count(*) FROM ({read_relation_sql(str(lake), 'raw_calls')})").fetchone()[0]
    want = duckdb.connect(str(demo_store), read_only=True).execute("SELECT count(*) FROM raw_calls").fetchone()[0]
    assert n == want > 0


def test_cli_export_unwritable_lake_is_a_clear_error(demo_store, tmp_path):
    from typer.testing import CliRunner

    from phaselens.cli import app

    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    r = CliRunner().invoke(app, ["export", "--db", str(demo_store), "--lake", str(blocker / "lake")])
    assert r.exit_code == 1
    assert "cannot write the lake" in r.output


def test_a_lake_without_a_relation_folder_reads_it_as_empty(demo_store, tmp_path):
    """A lake written before `raw_calls_replaced` existed (or with no rejects) opens, with the store's columns."""
    import shutil

    from phaselens.pipeline.lake import open_lake
    from phaselens.pipeline.publish import store_basis

    lake = tmp_path / "lake"
    store = duckdb.connect(str(demo_store), read_only=True)
    export_lake(store, str(lake))
    shutil.rmtree(lake / "raw_calls_replaced")
    shutil.rmtree(lake / "raw_rejects")
    con, _ = open_lake(str(lake))
    for rel in ("raw_calls_replaced", "raw_rejects"):
        assert con.execute(f"DESCRIBE {rel}").fetchall() == store.execute(f"DESCRIBE {rel}").fetchall(), rel
        assert con.execute(f"SELECT count(*) FROM {rel}").fetchone()[0] == 0
    assert store_basis(con).endswith("|replaced=0")
    con.close()
    store.close()
