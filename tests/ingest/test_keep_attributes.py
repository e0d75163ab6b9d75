"""Span attributes are kept by allow-list: unknown attributes are dropped, key and value, unless named."""

import json
import subprocess
import sys
from pathlib import Path

import duckdb

FIXTURE = Path(__file__).parents[1] / "fixtures" / "otlp" / "with_content.jsonl"
MARKER = "zq-unknown-attribute-marker-7731"


def _with_extra_attributes(tmp_path: Path) -> Path:
    out = []
    for line in FIXTURE.read_text().splitlines():
        doc = json.loads(line)
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    span["attributes"] += [
                        {"key": "acme.tenant", "value": {"stringValue": "tenant-42"}},
                        {"key": "acme.debug_payload", "value": {"stringValue": MARKER}},
                    ]
        out.append(json.dumps(doc))
    path = tmp_path / "spans.jsonl"
    path.write_text("\n".join(out) + "\n")
    return path


def _ingest(tmp_path: Path, name: str, *extra: str) -> Path:
    db = tmp_path / f"{name}.duckdb"
    src = _with_extra_attributes(tmp_path)
    done = subprocess.run([sys.executable, "-m", "phaselens", "ingest", str(src), "--db", str(db), *extra],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return db


def _attributes(db: Path) -> list[str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [r[0] or "" for r in con.execute("SELECT attributes_json FROM raw_calls").fetchall()]
    finally:
        con.close()


def test_unknown_attributes_are_dropped_by_default(tmp_path):
    db = _ingest(tmp_path, "default")
    attrs = _attributes(db)
    assert attrs, "the fixture's calls were not stored"
    assert not any("acme.tenant" in a for a in attrs)
    wrote = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "spans.jsonl"]
    assert wrote and not any(MARKER.encode() in p.read_bytes() for p in wrote)


def test_keep_attribute_keeps_the_named_key_only(tmp_path):
    db = _ingest(tmp_path, "kept", "--keep-attribute", "acme.tenant")
    attrs = _attributes(db)
    assert attrs and all("tenant-42" in a for a in attrs)
    wrote = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "spans.jsonl"]
    assert not any(MARKER.encode() in p.read_bytes() for p in wrote)
