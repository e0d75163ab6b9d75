"""Stores for the dashboard tests: the sample day (traces and billing) built and published, and an empty one.

The sample store is built once per test session and copied where a test needs its own.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from phaselens.models.config import load_config
from phaselens.pipeline.build import build
from phaselens.pipeline.load import ingest
from phaselens.pipeline.publish import publish
from phaselens.pipeline.store import connect

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_LOGS = ROOT / "sample_logs"
APP = ROOT / "app" / "streamlit_app.py"
PAGES = ("overview", "workload", "latency", "cost", "reconciliation", "caching", "health")

SAMPLE_CONFIG = SAMPLE_LOGS / "phaselens.toml"
SAMPLE_CONFIG_ARGS = ["--config", str(SAMPLE_CONFIG)] if SAMPLE_CONFIG.exists() else []
"""`phaselens build` options that build with the sample day's configuration, as the demo does."""

_built: dict[str, Path] = {}


def sample_inputs() -> list[Path]:
    """The sample day's trace and billing folders that exist in this checkout."""
    return [p for p in (SAMPLE_LOGS / "traces", SAMPLE_LOGS / "billing") if p.is_dir() and any(p.iterdir())]


def sample_config():
    """The sample day's configuration (price book, workload rules, SLOs), or the defaults."""
    return load_config(SAMPLE_CONFIG if SAMPLE_CONFIG.exists() else None)


def build_sample_store(folder: Path) -> Path:
    """The sample day ingested, built and published under `folder` (once per session; later calls copy it)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "sample.duckdb"
    if "sample" not in _built:
        cfg = sample_config()
        con = connect(target)
        try:
            ingest(con, [str(p) for p in sample_inputs()])
            build(con, cfg)
            publish(con, target, cfg)
        finally:
            con.close()
        _built["sample"] = target
        return target
    if target != _built["sample"]:
        shutil.copyfile(_built["sample"], target)
        con = connect(target)
        try:
            publish(con, target, sample_config())
        finally:
            con.close()
    return target


def build_empty_store(folder: Path) -> Path:
    """A store with nothing loaded, published."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "empty.duckdb"
    con = connect(target)
    try:
        publish(con, target)
    finally:
        con.close()
    return target
