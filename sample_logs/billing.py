"""Billing exports for the simulated day, built from `simulate()`'s ground truth with three planted gaps.

Example:
    python -m phaselens.sample_logs.billing --seed 7 --calls 6000 --out sample_logs/billing

Every token-billed call of the day (traced or not; the self-hosted vLLM server has no token bill) is
billed at its provider's published price (`billing_core.PRICE_SHEET`), in four format families:

| file | format | provider | money / tokens |
|---|---|---|---|
| `openai_costs.json` | OpenAI Costs API page (1-day UTC buckets, by project and line item) | openai | money |
| `openai_usage.jsonl` | OpenAI Usage API pages, completions and embeddings (1-day UTC buckets) | openai | tokens |
| `anthropic_cost.json` | Anthropic cost report (by workspace and description), amounts in cents | anthropic | money |
| `anthropic_usage.json` | Anthropic messages usage report (by workspace and model) | anthropic | tokens |
| `bedrock_focus.csv` | FOCUS 1.2 (hourly rows per token type, Bedrock usage types) | aws.bedrock | both |
| `azure_openai_cost.csv` | Azure cost export, MCA actual cost (daily rows per meter) | azure.ai.openai | both |

OpenAI bills chat on gpt-4o, the agent's o4-mini, indexing and the batch job; Anthropic the agent's
Claude calls; Amazon Bedrock the inline edits (Claude Sonnet 4); Azure OpenAI chat on gpt-4.1-mini.

Each provider's money appears exactly once (the OpenAI and Anthropic usage reports carry tokens only),
so nothing is billed twice. The planted gaps, each with the cause `phaselens reconcile` should name:

1. `untraced_traffic`: the `batch-summarizer` service calls gpt-4o-mini on OpenAI without
   instrumentation; its calls are billed (project `proj_batch`) but absent from the traces.
2. `price_mismatch`: from 12:00 UTC OpenAI bills o4-mini at a new price (`PRICE_CHANGE`), while
   phaselens prices calls at the list price it knows.
3. `time_zone_or_bucket_edge`: the Anthropic reports were pulled with daily buckets starting at
   America/Los_Angeles midnight (08:00 UTC), so the calls of 00:00-08:00 UTC are billed on the
   previous day's bucket.

A fourth, unplanted but realistic gap comes from the traces themselves: half of the chat spans are
written by an instrumentation that records no cache tokens, so gpt-4o (OpenAI) and gpt-4.1-mini
(Azure OpenAI) show `missing_cache_tokens`. Bedrock and Azure bill at the list price in UTC buckets,
so apart from that, their cells reconcile.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from datetime import date
from pathlib import Path

from phaselens.sample_logs.billing_api import anthropic_cost, anthropic_usage, openai_costs, openai_usage
from phaselens.sample_logs.billing_cloud import AZURE_COLUMNS, FOCUS_COLUMNS, azure_cost, csv_text, focus_bedrock
from phaselens.sample_logs.billing_core import billed_calls
from phaselens.sample_logs.simcall import SimCall
from phaselens.sample_logs.simulate import DEFAULT_DAY, simulate

# export file -> the adapter (`phaselens.ingest`) that reads it
EXPORT_ADAPTERS = {
    "openai_costs.json": "openai_costs", "openai_usage.jsonl": "openai_usage",
    "anthropic_cost.json": "anthropic_cost", "anthropic_usage.json": "anthropic_usage",
    "bedrock_focus.csv": "focus", "azure_openai_cost.csv": "azure_cost",
}


def _dump(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def export_texts(calls: Iterable[SimCall], day: date = DEFAULT_DAY) -> dict[str, str]:
    """File name -> text of every export of simulated `day` (the keys of EXPORT_ADAPTERS)."""
    billed = billed_calls(calls)
    return {
        "openai_costs.json": _dump(openai_costs(billed, day)) + "\n",
        "openai_usage.jsonl": "".join(_dump(p) + "\n" for p in openai_usage(billed, day)),
        "anthropic_cost.json": _dump(anthropic_cost(billed, day)) + "\n",
        "anthropic_usage.json": _dump(anthropic_usage(billed, day)) + "\n",
        "bedrock_focus.csv": csv_text(focus_bedrock(billed, day), FOCUS_COLUMNS),
        "azure_openai_cost.csv": csv_text(azure_cost(billed, day), AZURE_COLUMNS),
    }


def write_billing(calls: Iterable[SimCall], out_dir: Path, day: date = DEFAULT_DAY) -> dict[str, int]:
    """Write the six exports of simulated `day` into `out_dir`; returns bytes written per file name."""
    files = export_texts(calls, day)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out_dir / name).write_text(text, encoding="utf-8", newline="")
    return {name: len(text.encode()) for name, text in files.items()}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m phaselens.sample_logs.billing",
        description="Write billing exports for the simulated day (four format families, three planted gaps).",
        epilog="Example: python -m phaselens.sample_logs.billing --seed 7 --calls 6000 --out sample_logs/billing",
    )
    p.add_argument("--seed", type=int, default=7, help="random seed of the simulated day (default 7)")
    p.add_argument("--calls", type=int, default=6000, help="LLM calls simulated, untraced ones included")
    p.add_argument("--day", type=date.fromisoformat, default=DEFAULT_DAY, help="simulated UTC day (YYYY-MM-DD)")
    p.add_argument("--out", type=Path, required=True, help="directory for the export files")
    return p


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; prints one line per file written and returns the exit code."""
    args = _parser().parse_args(argv)
    sizes = write_billing(simulate(args.seed, args.calls, args.day), args.out, args.day)
    for name, size in sizes.items():
        print(f"wrote {args.out / name} ({size / 1000:.1f} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
