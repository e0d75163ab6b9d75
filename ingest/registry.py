"""The adapters, in the one order detection asks them, and the choice of the one that reads a file.

To add a source: write its adapter module in `ingest/` (a class with `name`, `kind`, `sniff` and `parse` or
`stage`, listed in the module's `ADAPTERS`), then add it to `DETECTION_ORDER` below, before any adapter
that would also claim its files (docs/extending.md).
"""

from __future__ import annotations

import importlib
from functools import cache

from .base import Adapter, SourceFile, UnreadableFile

DETECTION_ORDER: tuple[tuple[str, str], ...] = (
    # (module in ingest/, adapter name). The first adapter whose sniff accepts a file reads it, so a format
    # whose marker is more specific goes before one that would also accept it.
    ("otlp", "otlp_json"),                  # OTLP spans: `resourceSpans`
    ("billing_focus", "focus"),             # FOCUS before the cloud exports, whose columns a FOCUS file may carry
    ("billing_aws_cur", "aws_cur"),
    ("billing_gcp", "gcp_billing"),
    ("billing_azure", "azure_cost"),        # a Cost Management export with no FOCUS column
    ("billing_openai", "openai_usage"),
    ("billing_openai", "openai_costs"),
    ("billing_anthropic", "anthropic_usage"),
    ("billing_anthropic", "anthropic_cost"),
    ("gateway_litellm", "litellm"),         # gateway logs: records of one call each
    ("gateway_langfuse", "langfuse"),
    ("gateway_helicone", "helicone"),
    ("bench_llmperf", "llmperf"),           # benchmark exports
    ("bench_aiperf", "aiperf"),
    ("bench_vllm", "vllm_bench"),
    ("trace_requests", "azure_trace"),      # request traces last: the fewest columns, exact headers
    ("trace_requests", "mooncake"),
    ("trace_requests", "servegen"),
)
"""Every adapter, in detection order."""


@cache
def adapters() -> tuple[Adapter, ...]:
    """All adapters, in `DETECTION_ORDER`; an adapter a module exposes but the order omits is an error."""
    found: dict[str, Adapter] = {}
    for module_name in dict.fromkeys(m for m, _ in DETECTION_ORDER):
        module = importlib.import_module(f"{__package__}.{module_name}")
        for adapter in getattr(module, "ADAPTERS", ()):
            found[adapter.name] = adapter
    ordered = [found.pop(name) for _, name in DETECTION_ORDER if name in found]
    if len(ordered) != len(DETECTION_ORDER) or found:
        listed = {name for _, name in DETECTION_ORDER}
        raise RuntimeError(
            f"ingest/registry.py DETECTION_ORDER and the modules' ADAPTERS disagree: listed but not exposed "
            f"{sorted(listed - {a.name for a in ordered})}, exposed but not listed {sorted(found)}"
        )
    return tuple(ordered)


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
