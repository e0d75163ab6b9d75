"""The layers of the code: `models/` is the bottom layer, so it imports nothing above it.

Records, configuration, vocabulary and errors (`phaselens.models`) are read by every other part; an import
from `models/` into ingest, pipeline, app, the CLI or the sample generator would make the bottom layer depend
on the layers built on it. The walk reads every import statement (top level and inside functions).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
ABOVE = ("phaselens.ingest", "phaselens.pipeline", "phaselens.app", "phaselens.cli", "phaselens.output",
         "phaselens.sample_logs", "phaselens.__main__")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in a file of phaselens.models."""
    package = "phaselens.models"
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: `.x` is phaselens.models.x, `..x` is phaselens.x
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names = [module] if node.module else [f"{module}.{a.name}" for a in node.names]
            found += [(node.lineno, m) for m in names]
    return found


def test_the_walk_sees_relative_absolute_and_nested_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import json\nfrom . import records\nfrom ..pipeline import store\n"
                     "def f():\n    from phaselens.ingest.otlp import x\n")
    assert imported_modules(probe) == [(1, "json"), (2, "phaselens.models.records"), (3, "phaselens.pipeline"),
                                       (5, "phaselens.ingest.otlp")]


def test_models_imports_nothing_above_it():
    files = sorted(MODELS.glob("*.py"))
    assert files, "models/ not found"
    violations = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in files
        for line, module in imported_modules(path)
        if module == "phaselens" or module.startswith(ABOVE) or module.split(".")[0] in {"ingest", "pipeline", "app"}
    ]
    assert violations == []


LIBRARY = [ROOT / d for d in ("models", "ingest", "pipeline", "app")]


def test_no_library_module_carries_its_own_command_line():
    """Command lines live in phaselens/cli.py (and bench/ or sample_logs/ scripts), not in library modules."""
    found = []
    for folder in LIBRARY:
        for path in sorted(folder.rglob("*.py")):
            tree = ast.parse(path.read_text())
            if any(m == "argparse" for _, m in imported_modules(path)):
                found.append(f"{path.relative_to(ROOT)} imports argparse")
            for node in tree.body:
                test = getattr(node, "test", None)
                if isinstance(node, ast.If) and isinstance(test, ast.Compare) and ast.unparse(test.left) == "__name__":
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} has a __main__ block")
    assert found == []
