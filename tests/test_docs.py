"""Docs cannot drift: every public column is documented, every command has help with an example."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from phaselens.cli import app

ROOT = Path(__file__).resolve().parents[1]
DOCS = {
    "requests": "store.md", "workloads": "store.md", "invoice_costs": "store.md", "billing_lines": "store.md",
    "rejects": "store.md", "loads": "store.md", "source_gaps": "store.md", "latency_fits": "latency.md", "caching_opportunity": "caching.md",
    "caching_by_workload": "caching.md", "reconciliation": "reconciliation.md", "untraced_costs": "reconciliation.md",
    "allocated_costs": "reconciliation.md", "deployment_costs": "pricebook.md", "whatif_calls": "whatif.md",
}


@pytest.mark.parametrize("relation", sorted(DOCS))
def test_every_public_column_is_documented(demo_store, relation):
    text = (ROOT / "docs" / DOCS[relation]).read_text()
    assert f"`{relation}`" in text, f"{relation} has no section in docs/{DOCS[relation]}"
    con = duckdb.connect(str(demo_store), read_only=True)
    columns = [r[0] for r in con.execute(f"DESCRIBE {relation}").fetchall()]
    con.close()
    missing = [c for c in columns if f"`{c}`" not in text]
    assert not missing, f"docs/{DOCS[relation]} does not document {relation}: {missing}"


def _commands() -> list[str]:
    return sorted(c.name or c.callback.__name__ for c in app.registered_commands)


def test_every_command_has_help_with_an_example():
    runner = CliRunner()
    assert len(_commands()) >= 8
    for name in _commands():
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0, name
        assert re.search(r"Example: phaselens " + re.escape(name), result.output), f"`phaselens {name} --help` has no example"


def test_readme_starts_with_the_two_commands():
    lines = [ln for ln in (ROOT / "README.md").read_text().splitlines() if ln.startswith("./dev.sh")]
    assert lines[0].startswith("./dev.sh demo") and lines[1].startswith("./dev.sh test")
    assert (ROOT / ".ci" / "run").read_text().count("./dev.sh test") == 1
