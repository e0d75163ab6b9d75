"""docs/extending.md's worked examples run: the example adapter reads a file through the real helpers and
the real load, and the files and names the examples point to exist."""

from __future__ import annotations

import re
import sys
import textwrap
import types
from pathlib import Path

import pytest

from phaselens.ingest import registry
from phaselens.pipeline.load import ingest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "extending.md"


def code_blocks(lang: str) -> list[str]:
    return [textwrap.dedent(b) for b in re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)]


@pytest.fixture
def acme(monkeypatch):
    """The doc's adapter module, loaded as phaselens.ingest.gateway_acme and placed in the detection order."""
    (source,) = [b for b in code_blocks("python") if "class AcmeAdapter" in b]
    module = types.ModuleType("phaselens.ingest.gateway_acme")
    module.__package__ = "phaselens.ingest"
    exec(compile(source, "docs/extending.md", "exec"), module.__dict__)  # noqa: S102 - our own doc
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(registry, "DETECTION_ORDER", (("gateway_acme", "acme"), *registry.DETECTION_ORDER))
    registry.adapters.cache_clear()
    yield module
    registry.adapters.cache_clear()


def test_the_example_adapter_is_detected_and_loads_calls_and_rejects(acme, store, tmp_path):
    log = tmp_path / "acme.jsonl"
    log.write_text('{"acme_id": "r1", "started": "2026-03-02T12:00:00Z", "model": "GPT-4o-2024-08-06", '
                   '"in": 1200, "out": 80}\n'
                   '{"acme_id": "r2", "started": "", "in": 5, "out": 1}\n')
    assert registry.adapters()[0].name == "acme"
    ingest(store, [str(log)])
    assert store.execute("SELECT call_id, source, model, uncached_input_tokens, output_tokens FROM raw_calls"
                         ).fetchall() == [("acme:r1", "acme", "gpt-4o", 1200, 80)]
    assert store.execute("SELECT reason FROM raw_rejects").fetchall() == [("missing_field",)]


def test_the_paths_the_doc_names_exist():
    text = DOC.read_text()
    for path in set(re.findall(r"`((?:ingest|models|pipeline|app|tests)/[\w/.]+\.(?:py|sql))`", text)):
        if "acme" in path or path.endswith("app_pages/models.py"):
            continue  # the files the examples create
        assert (ROOT / path).exists(), path
    assert "PAGES" in (ROOT / "app" / "streamlit_app.py").read_text()
    assert "class Diagnosis" in (ROOT / "models" / "config.py").read_text()
    assert "def price_rows" in (ROOT / "pipeline" / "pricing.py").read_text()
    assert "AS ttft_cause" in (ROOT / "pipeline" / "sql" / "workloads.sql").read_text()
