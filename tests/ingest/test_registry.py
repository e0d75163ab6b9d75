"""The adapter list (ingest/registry.py): one explicit order that detection walks, and nothing left out of it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from phaselens.ingest.registry import DETECTION_ORDER, adapters

ROOT = Path(__file__).resolve().parents[2]


def modules_exposing_adapters() -> set[str]:
    """The modules of ingest/ that assign `ADAPTERS` at top level (read from source, not imported)."""
    found = set()
    for path in (ROOT / "ingest").glob("*.py"):
        tree = ast.parse(path.read_text())
        if any(isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "ADAPTERS" for t in n.targets)
               for n in tree.body):
            found.add(path.stem)
    return found


def test_every_module_with_adapters_is_in_the_order():
    assert modules_exposing_adapters() == {m for m, _ in DETECTION_ORDER}


def test_detection_walks_the_order_with_every_adapter_once():
    names = [a.name for a in adapters()]
    assert names == [n for _, n in DETECTION_ORDER]
    assert len(set(names)) == len(names)
    assert not any(hasattr(a, "priority") for a in adapters())  # the order is the list, not numbers


def test_the_formats_doc_table_lists_the_same_order():
    text = (ROOT / "docs" / "formats.md").read_text()
    table = text[text.index("| order | adapter |"):]
    table = table[: table.index("\n\n")]
    documented = [n for row in table.splitlines()[2:] for n in re.findall(r"`(\w+)`", row.split("|")[2])]
    assert documented == [n for _, n in DETECTION_ORDER]
