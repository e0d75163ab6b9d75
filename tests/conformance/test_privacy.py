"""No prompt text of the recorded spans reaches any file phaselens writes.

The driver's prompts are made of distinctive words (`chatq0t1`, `ragctx5`, `agentq3t9`, ...), and the real
instrumentations copy them into many different attribute keys (messages, inputs, tool payloads, request
bodies). Each fixture is ingested and built into its own store; the bytes of every file written are searched.
"""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance import evaluate as E

PROMPT_WORD = re.compile(rb"(?:chat|rag|agent)(?:q\d+t\d+|ctx\d+)")
ENTRIES = E.entries()


@pytest.mark.skipif(not ENTRIES, reason="no recorded conformance fixtures")
@pytest.mark.parametrize("entry", ENTRIES)
def test_no_prompt_text_in_written_files(entry, tmp_path):
    spans = gzip.decompress((E.FIXTURES / entry / "spans.jsonl.gz").read_bytes())
    assert PROMPT_WORD.search(spans) or entry.startswith(("otel-openai-v2", "sdk-", "litellm")), (
        f"{entry}: the recorded spans carry no prompt text, so this check would prove nothing")
    src = tmp_path / "in" / "spans.jsonl"
    src.parent.mkdir()
    src.write_bytes(spans)
    out = tmp_path / "out"
    out.mkdir()
    db = out / "store.duckdb"
    for args in (["ingest", str(src)], ["build", "--config", str(E.HERE / "phaselens.toml")]):
        done = subprocess.run([sys.executable, "-m", "phaselens", *args, "--db", str(db)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    leaked = [p.name for p in out.rglob("*") if p.is_file() and PROMPT_WORD.search(p.read_bytes())]
    assert not leaked, f"{entry}: prompt text found in {leaked}"
