"""Shared fixtures: a fresh store per test, and the paths of fixture files and real data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from phaselens.pipeline.load import ingest
from phaselens.pipeline.store import connect
from tests.summary import SUMMARIES, take_from_worker

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
SAMPLE_LOGS = ROOT / "sample_logs"


def shared_data_dir() -> Path | None:
    """`../shared/data` beside the checkout (as CI lays it), or PHASELENS_SHARED/data."""
    for base in (os.environ.get("PHASELENS_SHARED"), ROOT.parent / "shared"):
        if base and (Path(base) / "data").is_dir():
            return Path(base) / "data"
    return None


@pytest.fixture
def store(tmp_path):
    """An empty store in a temporary folder; closed after the test."""
    con = connect(tmp_path / "store.duckdb")
    yield con
    con.close()


@pytest.fixture
def load(store):
    """Load paths into the test store and return the IngestResult."""

    def _load(*paths, **kw):
        return ingest(store, [str(p) for p in paths], **kw)

    return _load


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory):
    """Path of a store built from the bundled sample day with the demo configuration (built once per run)."""
    from phaselens.models.config import load_config
    from phaselens.pipeline.build import build

    path = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    con = connect(path)
    ingest(con, [SAMPLE_LOGS / "traces", SAMPLE_LOGS / "billing"])
    build(con, load_config(SAMPLE_LOGS / "phaselens.toml"))
    con.close()
    return path


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """A pytest-xdist worker ended: keep the summaries its tests added (tests/summary.py)."""
    take_from_worker(node.config, node)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for title, text in sorted(config.stash.get(SUMMARIES, {}).items()):
        terminalreporter.write_sep("=", title)
        terminalreporter.write_line(text.rstrip("\n"))
