"""Live with batch runs: the dashboard keeps answering from its snapshot while `phaselens ingest` and
`phaselens build` write the store in other processes, and shows the new calls after the run, without a restart."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import duckdb
from streamlit.testing.v1 import AppTest

from tests.app.stores import APP, SAMPLE_CONFIG_ARGS, SAMPLE_LOGS

COPIES = 6
ID = re.compile(r'"(traceId|spanId|parentSpanId)":"([0-9a-f]+)"')
PHASELENS = Path(sys.executable).with_name("phaselens")


def new_calls_file(path: Path) -> Path:
    """The sample agent traces COPIES times over, each copy with fresh trace and span ids (so: new calls)."""
    lines = (SAMPLE_LOGS / "traces" / "editor-agent.jsonl").read_text().splitlines()
    with path.open("w") as out:
        for k in range(COPIES):
            def fresh(m: re.Match, k: int = k) -> str:
                digest = hashlib.sha256(f"{k}:{m.group(2)}".encode()).hexdigest()[: len(m.group(2))]
                return f'"{m.group(1)}":"{digest}"'

            for line in lines:
                out.write(ID.sub(fresh, line) + "\n")
    return path


def holds_open(pid: int, path: Path) -> bool:
    """Whether process `pid` has `path` open (DuckDB keeps its write lock for as long as it does)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                return True
        except OSError:
            continue
    return False


def calls_shown(at: AppTest) -> str:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return next(m.value for m in at.metric if m.label == "Calls")


def test_dashboard_answers_during_a_batch_run_and_shows_new_calls_after(sample_db, tmp_path, monkeypatch):
    db = tmp_path / "live.duckdb"
    db.write_bytes(sample_db.read_bytes())
    subprocess.run([sys.executable, "-m", "phaselens", "publish", "--db", str(db)], check=True, capture_output=True)
    with duckdb.connect(str(db), read_only=True) as con:
        before = con.execute("SELECT count(*) FROM requests").fetchone()[0]
    monkeypatch.setenv("PHASELENS_DB", str(db))
    at = AppTest.from_file(str(APP), default_timeout=60)
    assert calls_shown(at) == f"{before:,}"

    traces = new_calls_file(tmp_path / "more-agent.jsonl")
    # the batch job: load (one file, one transaction), then derive; each publishes a snapshot when it ends
    batch = [
        [str(PHASELENS), "ingest", str(traces), "--db", str(db)],
        [str(PHASELENS), "build", "--db", str(db), *SAMPLE_CONFIG_ARGS],
    ]
    shown_while_writing: list[str] = []
    for argv in batch:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        while proc.poll() is None:
            if holds_open(proc.pid, db):
                shown = calls_shown(at)
                if holds_open(proc.pid, db):  # the writer held the store for the whole render
                    shown_while_writing.append(shown)
            else:
                time.sleep(0.02)
        out = proc.stdout.read()
        assert proc.returncode == 0, f"{argv[1:3]} failed while the dashboard was reading:\n{out[-3000:]}"
    assert len(shown_while_writing) >= 2, "the dashboard should have rendered while the store was being written"

    with duckdb.connect(str(db), read_only=True) as con:
        after = con.execute("SELECT count(*) FROM requests").fetchone()[0]
    assert after > before
    # only published states are ever shown: before the load, or after it; never a half-loaded store
    assert set(shown_while_writing) <= {f"{before:,}", f"{after:,}"}, shown_while_writing
    assert calls_shown(at) == f"{after:,}", "the same running dashboard shows the new calls"
