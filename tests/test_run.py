"""`phaselens run` (pipeline/run.py): incremental batches over a folder, the lock, exit codes, log and report.

The folder holds the LiteLLM spend logs and the OpenAI bill of tests/fixtures/batch; counts expected here
are counted from those files (one call per JSON line, one billing line per cost result).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import phaselens.pipeline.load as load_mod
from phaselens.pipeline.run import EXIT_CONFIG, EXIT_FILES_FAILED, EXIT_LOCKED, EXIT_OK, hold_lock, run_batch
from phaselens.pipeline.store import connect

BATCH = Path(__file__).resolve().parent / "fixtures" / "batch"
DAY1 = BATCH / "traces" / "litellm.2026-11-16.jsonl"
DAY2 = BATCH / "traces" / "litellm.2026-11-17.jsonl"
BILL = BATCH / "billing" / "openai_costs.2026-11-16_17.json"


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def bill_lines(path: Path) -> int:
    return sum(len(b["results"]) for b in json.loads(path.read_text())["data"])


def write_config(folder: Path, run: str) -> Path:
    """The fixture price book plus a [run] section, in `folder/phaselens.toml`."""
    cfg = folder / "phaselens.toml"
    cfg.write_text((BATCH / "phaselens.toml").read_text() + "\n[run]\n" + run)
    return cfg


@pytest.fixture
def site(tmp_path):
    """A batch site: incoming/ with the first day and the bill, a config whose paths are relative to it."""
    (tmp_path / "incoming").mkdir()
    shutil.copy(DAY1, tmp_path / "incoming")
    shutil.copy(BILL, tmp_path / "incoming")
    cfg = write_config(tmp_path, 'db = "store.duckdb"\nsources = ["incoming"]\nreport_period = "latest_day"\n')
    return tmp_path, cfg


@pytest.fixture
def reads(monkeypatch):
    """The files the loader hashed and the files it loaded, per run (cleared by the test)."""
    seen = {"hashed": [], "loaded": []}
    real_sha, real_load = load_mod.file_sha256, load_mod.load_file

    def sha(path):
        seen["hashed"].append(Path(path).name)
        return real_sha(path)

    def load_file(con, path, run_id, **kw):
        seen["loaded"].append(Path(path).name)
        return real_load(con, path, run_id, **kw)

    monkeypatch.setattr(load_mod, "file_sha256", sha)
    monkeypatch.setattr(load_mod, "load_file", load_file)
    return seen


def store_counts(db: Path) -> tuple[int, int, int]:
    con = connect(db, read_only=True)
    try:
        return con.execute(
            "SELECT (SELECT count(*) FROM requests), (SELECT count(*) FROM billing_lines), "
            "(SELECT count(*) FROM loads WHERE status = 'loaded')").fetchall()[0]
    finally:
        con.close()


def test_runs_read_only_new_or_changed_files_and_never_double_count(site, reads, tmp_path_factory, monkeypatch):
    root, cfg = site
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))  # cron starts in another folder
    db = root / "store.duckdb"

    first = run_batch(cfg)
    assert first.exit_code == EXIT_OK, first.summary
    assert sorted(reads["loaded"]) == sorted([DAY1.name, BILL.name])
    assert store_counts(db) == (lines(DAY1), bill_lines(BILL), 2)
    assert first.summary == (f"phaselens run: 2 new files, {lines(DAY1)} calls, {bill_lines(BILL)} billing lines, "
                             f"0 failed, report {root / 'reports' / '2026-11-16'}")
    assert (root / "reports" / "2026-11-16" / "report.html").exists()
    assert (root / "store.duckdb.published" / "CURRENT").exists()  # the dashboard's snapshot

    reads["hashed"].clear(), reads["loaded"].clear()
    second = run_batch(cfg)
    assert second.exit_code == EXIT_OK
    assert reads == {"hashed": [], "loaded": []}  # nothing read at all: same paths, sizes and mtimes
    assert second.summary.startswith("phaselens run: 0 new files, 0 calls, 0 failed")
    assert not second.built
    assert store_counts(db) == (lines(DAY1), bill_lines(BILL), 2)

    shutil.copy(DAY2, root / "incoming")
    third = run_batch(cfg)
    assert third.exit_code == EXIT_OK
    assert reads["loaded"] == [DAY2.name] and reads["hashed"] == [DAY2.name]
    assert third.summary.startswith(f"phaselens run: 1 new file, {lines(DAY2)} calls, 0 failed")
    assert store_counts(db) == (lines(DAY1) + lines(DAY2), bill_lines(BILL), 3)
    assert third.report_dir == root / "reports" / "2026-11-17"
    md = (third.report_dir / "report.md").read_text()
    assert "Changes against the previous period (2026-11-16)" in md and "**classify**: new this period" in md

    # a changed file is read again; its calls already stored are duplicates, only the new one is added
    reads["hashed"].clear(), reads["loaded"].clear()
    extra = json.loads(DAY1.read_text().splitlines()[0]) | {"request_id": "req-added-later"}
    with (root / "incoming" / DAY1.name).open("a") as f:
        f.write(json.dumps(extra) + "\n")
    fourth = run_batch(cfg)
    assert fourth.exit_code == EXIT_OK and reads["loaded"] == [DAY1.name]
    assert store_counts(db) == (lines(DAY1) + lines(DAY2) + 1, bill_lines(BILL), 4)
    con = connect(db, read_only=True)
    dup = con.execute("SELECT accepted, duplicates FROM loads WHERE status = 'loaded' ORDER BY finished_at DESC "
                      "LIMIT 1").fetchall()[0]
    con.close()
    assert dup == (1, lines(DAY1))

    log = (root / "store.duckdb.run.log").read_text()
    assert log.count("run started") == 4
    assert f"loaded {root / 'incoming' / DAY2.name} (litellm; {lines(DAY2)} stored" in log
    assert "build skipped: nothing new" in log
    assert third.summary in log


def test_without_trust_mtime_files_are_hashed_but_not_loaded_again(site, reads):
    root, cfg = site
    cfg.write_text(cfg.read_text() + "trust_mtime = false\npublish = false\n")
    assert run_batch(cfg).exit_code == EXIT_OK
    reads["hashed"].clear(), reads["loaded"].clear()
    again = run_batch(cfg)
    assert again.exit_code == EXIT_OK and again.new_files == []
    assert sorted(reads["hashed"]) == sorted([DAY1.name, BILL.name])  # content checked...
    assert store_counts(root / "store.duckdb")[:2] == (lines(DAY1), bill_lines(BILL))  # ...nothing doubled


def test_a_second_concurrent_run_exits_3_with_the_holder(site):
    root, cfg = site
    lock = root / "store.duckdb.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; from phaselens.pipeline.run import hold_lock\n"
         f"with hold_lock(Path({str(lock)!r})):\n    print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        second = subprocess.run([sys.executable, "-m", "phaselens", "run", "--config", str(cfg)],
                                capture_output=True, text=True, timeout=120)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert second.returncode == EXIT_LOCKED
    assert re.fullmatch(rf"phaselens run: another phaselens run holds {re.escape(str(lock))} since "
                        rf"\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(pid {holder.pid}\)\n", second.stderr), second.stderr
    assert second.stdout == ""
    assert not (root / "store.duckdb").exists()  # it touched nothing
    assert "another phaselens run holds" in (root / "store.duckdb.run.log").read_text()


def test_lock_is_released_when_the_run_ends(site):
    root, cfg = site
    cfg.write_text(cfg.read_text() + "publish = false\n")
    with hold_lock(root / "store.duckdb.lock"):
        locked = run_batch(cfg)
    assert locked.exit_code == EXIT_LOCKED and f"(pid {os.getpid()})" in locked.summary
    assert run_batch(cfg).exit_code == EXIT_OK


def test_a_failed_file_exits_1_and_the_rest_is_built_and_reported(site):
    root, cfg = site
    cfg.write_text(cfg.read_text() + "publish = false\n")
    shutil.copy(BATCH / "unknown_format.txt", root / "incoming")
    result = run_batch(cfg)
    assert result.exit_code == EXIT_FILES_FAILED
    assert result.failed_files == [str(root / "incoming" / "unknown_format.txt")]
    assert ", 1 failed, report " in result.summary
    assert store_counts(root / "store.duckdb")[:2] == (lines(DAY1), bill_lines(BILL))
    assert (root / "reports" / "2026-11-16" / "report.md").exists()
    assert "not a format phaselens reads" in (root / "store.duckdb.run.log").read_text()


def test_own_files_in_a_source_folder_are_not_sources(tmp_path):
    shutil.copy(DAY1, tmp_path)
    cfg = write_config(tmp_path, 'db = "store.duckdb"\nsources = ["."]\nreport_dir = "out"\n'
                                 'report_period = "latest_day"\nreport_formats = ["md"]\npublish = false\n')
    first = run_batch(cfg)
    assert first.exit_code == EXIT_OK and first.new_files == [str(tmp_path / DAY1.name)]
    second = run_batch(cfg)  # the store, its log, lock and the report now sit in the source folder
    assert second.exit_code == EXIT_OK and second.failed_files == []


@pytest.mark.parametrize(("run", "message"), [
    (None, "has no [run] section"),
    ('db = "s.duckdb"\nsources = ["incoming"]\ncolour = "blue"\n', "run.colour: Extra inputs are not permitted"),
    ('db = "s.duckdb"\nsources = ["missing-folder"]\n', "source "),
    ('db = "s.duckdb"\nsources = ["incoming"]\nreport_period = "fortnight"\n', "is not a period"),
    ('db = "s.duckdb"\nsources = ["incoming"]\nreport_formats = ["pdf"]\n', "report_formats"),
    ('db = "s.duckdb"\nsources = ["incoming"]\nengine = "spark"\n', 'needs lake = "DIR"'),
    ('db = "s.duckdb"\nsources = ["incoming"]\nengine = "dask"\n', "run.engine"),
])
def test_configuration_errors_exit_2(tmp_path, run, message):
    (tmp_path / "incoming").mkdir()
    cfg = tmp_path / "phaselens.toml"
    cfg.write_text((BATCH / "phaselens.toml").read_text() + ("" if run is None else "\n[run]\n" + run))
    result = run_batch(cfg)
    assert result.exit_code == EXIT_CONFIG
    assert result.summary.startswith("phaselens run: ") and message in result.summary
    assert not (tmp_path / "s.duckdb").exists()


def test_a_spark_run_refuses_a_lake_another_store_wrote(tmp_path):
    """Checked before anything is loaded (no Spark needed): the run would mix its rows with the lake's."""
    from typer.testing import CliRunner

    from phaselens.cli import app

    other = tmp_path / "other.duckdb"
    for args in (["ingest", str(DAY1), "--db", str(other)], ["export", "--db", str(other), "--lake", str(tmp_path / "lake")]):
        assert CliRunner().invoke(app, args).exit_code == 0
    (tmp_path / "incoming").mkdir()
    shutil.copy(DAY2, tmp_path / "incoming")
    cfg = write_config(tmp_path, 'db = "store.duckdb"\nsources = ["incoming"]\nengine = "spark"\nlake = "lake"\n')
    result = run_batch(cfg)
    assert result.exit_code == EXIT_CONFIG
    assert "would mix two stores" in result.summary and str(other.resolve()) in result.summary
    assert not (tmp_path / "lake" / "raw_calls" / "day=2026-11-17").exists()
