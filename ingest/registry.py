"""Finds every adapter in `ingest/` and picks the one that recognises a file's content."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from .base import Adapter, SourceFile, UnreadableFile


@cache
def adapters() -> tuple[Adapter, ...]:
    """All adapters, by priority. A module in `ingest/` exposes `ADAPTERS = [...]` to be found."""
    import phaselens.ingest as pkg

    found: list[Adapter] = []
    for info in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"{pkg.__name__}.{info.name}")
        found.extend(getattr(module, "ADAPTERS", ()))
    return tuple(sorted(found, key=lambda a: (a.priority, a.name)))


def by_name(name: str) -> Adapter:
    for a in adapters():
        if a.name == name:
            return a
    known = ", ".join(a.name for a in adapters())
    raise KeyError(f"no adapter named {name!r}; known: {known}")


def detect(src: SourceFile) -> Adapter:
    """The first adapter whose `sniff` accepts the file, judged from content, never the file name."""
    for adapter in adapters():
        try:
            if adapter.sniff(src):
                return adapter
        except UnreadableFile:
            raise
        except Exception as e:  # noqa: BLE001 - a sniffer error is this file's failure, not the run's
            raise UnreadableFile(
                src.display,
                f"format detection failed in the {adapter.name} reader ({type(e).__name__}: {str(e)[:200]})",
                "check the file is whole and in a format listed in docs/formats.md#how-a-file-is-recognised",
            ) from e
    known = ", ".join(a.name for a in adapters())
    raise UnreadableFile(
        src.display,
        "not a format phaselens reads",
        f"expected one of: {known}; see docs/formats.md#how-a-file-is-recognised",
    )
