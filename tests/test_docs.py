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
    "workload_days": "store.md", "workload_days_hist": "store.md", "workload_days_concurrency": "store.md",
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


# ---- docs/formats.md: a section per adapter, and every citation of it lands on a real section ------------------
FORMATS = ROOT / "docs" / "formats.md"
CITING = ("ingest", "pipeline", "app", "models", "phaselens", "sample_logs", "tests", "bench", "docs")
CITED_SUFFIXES = {".py", ".sql", ".md", ".toml", ".txt"}


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown text (lower case, punctuation dropped, spaces to
    hyphens, `-1`, `-2` ... for repeats); fenced code is not a heading."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fenced or not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).replace("`", "").lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def _citing_files() -> list[Path]:
    files = []
    for top in CITING:
        for p in (ROOT / top).rglob("*"):
            if (p.is_file() and p.suffix in CITED_SUFFIXES and ".venv" not in p.parts and "__pycache__" not in p.parts
                    and p != Path(__file__).resolve()):
                files.append(p)
    return [*files, ROOT / "README.md"]


def test_every_adapter_has_a_section_in_the_formats_doc():
    from phaselens.ingest.registry import adapters

    text = FORMATS.read_text()
    sections = re.split(r"^## ", text, flags=re.M)
    for adapter in adapters():
        owning = [s.splitlines()[0] for s in sections if re.search(rf"^Adapters? `{adapter.name}`", s, re.M)]
        assert owning, f"docs/formats.md has no section whose text starts `Adapter `{adapter.name}`.`"
        assert f"| `{adapter.name}` |" in text or f"`{adapter.name}`," in text or f", `{adapter.name}` |" in text, (
            f"{adapter.name} is missing from the detection table of docs/formats.md")


def test_every_citation_of_the_formats_doc_points_to_a_section():
    anchors = github_anchors(FORMATS.read_text())
    cited: dict[str, list[str]] = {}
    unanchored: list[str] = []
    for path in _citing_files():
        text = path.read_text(errors="replace")
        rel = str(path.relative_to(ROOT))
        for anchor in re.findall(r"formats\.md#([\w\-]+)", text):
            cited.setdefault(anchor, []).append(rel)
        unanchored += [f"{rel}: {m}" for m in re.findall(r"formats(?:\.md)?\s*(?:§|section)\s*[\d.]+", text)]
    for anchor in re.findall(r"\]\(#([\w\-]+)\)", FORMATS.read_text()):  # the doc's own links
        cited.setdefault(anchor, []).append("docs/formats.md")
    assert cited, "nothing cites docs/formats.md#..., so this test would prove nothing"
    missing = {a: sorted(set(f)) for a, f in cited.items() if a not in anchors}
    assert not missing, f"citations of docs/formats.md sections that do not exist: {missing}"
    assert not unanchored, f"cite docs/formats.md by anchor (docs/formats.md#section), not by number: {unanchored}"


def test_github_anchors_follow_githubs_rules():
    assert github_anchors("# AWS CUR 2.0 for Bedrock\n## `focus`: FOCUS 1.3\n# A\n# A\n```\n# not a heading\n```") == {
        "aws-cur-20-for-bedrock", "focus-focus-13", "a", "a-1"}
