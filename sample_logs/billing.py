"""Billing exports for the simulated day, built from `simulate()`'s ground truth with three planted gaps.

Example:
    python -m phaselens.sample_logs.billing --seed 7 --calls 6000 --out sample_logs/billing

Every token-billed call of the day (traced or not; the self-hosted vLLM server has no token bill) is
billed at the provider's published price, in four formats the billing adapters read:

| file | format | provider | money / tokens |
|---|---|---|---|
| `openai_costs.json` | OpenAI Costs API page (1-day UTC buckets, by project and line item) | openai | money |
| `openai_usage.jsonl` | OpenAI Usage API pages, completions and embeddings (1-day UTC buckets) | openai | tokens |
| `anthropic_cost.json` | Anthropic cost report (by workspace and description), amounts in cents | anthropic | money |
| `anthropic_usage.json` | Anthropic messages usage report (by workspace and model) | anthropic | tokens |

Each provider's money appears exactly once (the usage reports carry tokens only), so nothing is
billed twice. The planted gaps, each with the cause `phaselens reconcile` should name:

1. `untraced_traffic`: the `batch-summarizer` service calls gpt-4o-mini without instrumentation;
   its calls are billed (project `proj_batch`) but absent from the traces.
2. `price_mismatch`: from 12:00 UTC the provider bills o4-mini at a new price (`PRICE_CHANGE`),
   while phaselens prices calls at the list price it knows.
3. `time_zone_or_bucket_edge`: the Anthropic reports were pulled with daily buckets starting at
   America/Los_Angeles midnight (08:00 UTC), so the calls of 00:00-08:00 UTC are billed on the
   previous day's bucket.

A fourth, unplanted but realistic gap comes from the traces themselves: half of the chat spans are
written by an instrumentation that records no cache tokens, so gpt-4o and gpt-4.1-mini show
`missing_cache_tokens`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

from phaselens.sample_logs.simcall import SimCall
from phaselens.sample_logs.simulate import DEFAULT_DAY, simulate

MILLION = Decimal(1_000_000)
TOKEN_TYPES = ("uncached_input", "cache_read", "cache_write", "output")

# Published prices, USD per million tokens, as the providers bill them:
# OpenAI https://openai.com/api/pricing, Anthropic https://docs.anthropic.com/en/docs/about-claude/pricing
# (cache_write is Anthropic's 5-minute cache write).
PRICE_SHEET: dict[tuple[str, str], dict[str, Decimal]] = {
    ("openai", "gpt-4o"): {"uncached_input": Decimal("2.50"), "cache_read": Decimal("1.25"),
                           "output": Decimal("10.00")},
    ("openai", "gpt-4.1-mini"): {"uncached_input": Decimal("0.40"), "cache_read": Decimal("0.10"),
                                 "output": Decimal("1.60")},
    ("openai", "o4-mini"): {"uncached_input": Decimal("1.10"), "cache_read": Decimal("0.275"),
                            "output": Decimal("4.40")},
    ("openai", "gpt-4o-mini"): {"uncached_input": Decimal("0.15"), "cache_read": Decimal("0.075"),
                                "output": Decimal("0.60")},
    ("openai", "text-embedding-3-small"): {"uncached_input": Decimal("0.02")},
    ("anthropic", "claude-sonnet-4-20250514"): {
        "uncached_input": Decimal("3.00"), "cache_read": Decimal("0.30"), "cache_write": Decimal("3.75"),
        "output": Decimal("15.00"),
    },
}


@dataclass(frozen=True)
class PriceChange:
    """From `from_hour` (UTC, on the simulated day) on, `model` is billed at `per_million` instead."""

    provider: str
    model: str
    from_hour: int
    per_million: dict[str, Decimal]


# Planted gap 2: o4-mini billed 50% above its list price from noon UTC.
PRICE_CHANGE = PriceChange(
    "openai", "o4-mini", 12,
    {"uncached_input": Decimal("1.65"), "cache_read": Decimal("0.4125"), "output": Decimal("6.60")},
)
# Planted gap 3: the provider whose exports use daily buckets of this time zone instead of UTC.
LOCAL_BUCKETS = ("anthropic", ZoneInfo("America/Los_Angeles"))
UNTRACED_PROJECT = "proj_batch"  # planted gap 1: the OpenAI project of the uninstrumented batch job
OPENAI_PROJECTS = {"batch-summarizer": UNTRACED_PROJECT}  # service -> project; others: proj_editor
DEFAULT_OPENAI_PROJECT = "proj_editor"
ANTHROPIC_WORKSPACE = "wrkspc_01EditorProd"

# Anthropic cost report: our token type -> (token_type field, description suffix)
ANTHROPIC_COST_TYPES = {
    "uncached_input": ("uncached_input_tokens", "Input Tokens"),
    "cache_read": ("cache_read_input_tokens", "Cache Read Input Tokens"),
    "cache_write": ("cache_creation.ephemeral_5m_input_tokens", "Cache Write (5m) Input Tokens"),
    "output": ("output_tokens", "Output Tokens"),
}
ANTHROPIC_NAMES = {"claude-sonnet-4-20250514": "Claude Sonnet 4"}
# OpenAI Costs API line-item direction per token type
OPENAI_DIRECTIONS = {"uncached_input": "input", "cache_read": "cached input", "cache_write": "cache write",
                     "output": "output"}


@dataclass
class Bucket:
    """Tokens, money (USD) and request count of one (bucket start, group key) cell."""

    tokens: dict[str, int]
    usd: dict[str, Decimal]
    requests: int = 0


def unit_prices(call: SimCall, day: date) -> dict[str, Decimal]:
    """USD per million tokens the provider bills for this call of simulated `day`, price change included."""
    prices = PRICE_SHEET[(call.provider, call.model)]
    change = PRICE_CHANGE
    if (call.provider, call.model) == (change.provider, change.model):
        if call.started_at >= datetime.combine(day, time(change.from_hour)):
            prices = {**prices, **change.per_million}
    return prices


def _zone(provider: str):
    return LOCAL_BUCKETS[1] if provider == LOCAL_BUCKETS[0] else UTC


def bucket_start(call: SimCall) -> datetime:
    """Naive-UTC start of the daily bucket the provider's export puts this call in (its local midnight)."""
    zone = _zone(call.provider)
    local = call.started_at.replace(tzinfo=UTC).astimezone(zone)
    return datetime.combine(local.date(), time(0), tzinfo=zone).astimezone(UTC).replace(tzinfo=None)


def bucket_end(start: datetime, provider: str) -> datetime:
    """Naive-UTC end of the daily bucket starting at `start`: the provider's next local midnight."""
    zone = _zone(provider)
    local = start.replace(tzinfo=UTC).astimezone(zone)
    nxt = datetime.combine(local.date() + timedelta(days=1), time(0), tzinfo=zone)
    return nxt.astimezone(UTC).replace(tzinfo=None)


def billed_calls(calls: Iterable[SimCall]) -> list[SimCall]:
    """The calls a provider bills by the token: hosted providers, calls that used tokens."""
    return [c for c in calls if (c.provider, c.model) in PRICE_SHEET and tokens_of(c)]


def tokens_of(call: SimCall) -> dict[str, int]:
    """Disjoint token buckets of a call, zero buckets left out."""
    values = {"uncached_input": call.uncached_input_tokens, "cache_read": call.cache_read_tokens,
              "cache_write": call.cache_write_tokens, "output": call.output_tokens}
    return {k: v for k, v in values.items() if v}


def aggregate(calls: Iterable[SimCall], key, day: date) -> dict[tuple, Bucket]:
    """(bucket start, *key(call)) -> summed tokens and USD billed for simulated `day`'s calls, in a stable order."""
    out: dict[tuple, Bucket] = defaultdict(lambda: Bucket(defaultdict(int), defaultdict(Decimal)))
    for c in calls:
        b = out[(bucket_start(c), *key(c))]
        b.requests += 1
        prices = unit_prices(c, day)
        for token_type, n in tokens_of(c).items():
            b.tokens[token_type] += n
            b.usd[token_type] += Decimal(n) * prices[token_type] / MILLION
    return dict(sorted(out.items(), key=lambda kv: tuple(str(x) for x in kv[0])))


def openai_project(call: SimCall) -> str:
    """The OpenAI project a call is billed to: one per calling service group."""
    return OPENAI_PROJECTS.get(call.service, DEFAULT_OPENAI_PROJECT)


def _unix(ts: datetime) -> int:
    return int(ts.replace(tzinfo=UTC).timestamp())


def _rfc3339(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ")


def _dollars(value: Decimal) -> float:
    """A JSON number for a dollar amount (nanodollar precision, few enough digits to round-trip exactly)."""
    return float(value.quantize(Decimal("1e-9")))


def _buckets(buckets: dict[tuple, Bucket], results, provider: str, fmt, keys: tuple[str, str]) -> list[dict]:
    """A report's `data`: buckets ordered by start, each holding the results `results(key, bucket)` yields."""
    by_start: dict[datetime, list] = defaultdict(list)
    for (start, *key), b in buckets.items():
        by_start[start].extend(results(tuple(key), b))
    return [{"object": "bucket", keys[0]: fmt(s), keys[1]: fmt(bucket_end(s, provider)), "results": r}
            for s, r in sorted(by_start.items())]


def openai_usage(calls: list[SimCall], day: date) -> list[dict]:
    """OpenAI Usage API pages: completions and embeddings, grouped by project and model."""
    def completions(key: tuple, b: Bucket) -> list[dict]:
        proj, model = key
        t = b.tokens
        return [{
            "object": "organization.usage.completions.result",
            "input_tokens": t["uncached_input"] + t["cache_read"] + t["cache_write"],
            "input_cached_tokens": t["cache_read"], "input_cache_write_tokens": t["cache_write"],
            "input_uncached_tokens": t["uncached_input"], "output_tokens": t["output"],
            "input_audio_tokens": 0, "output_audio_tokens": 0, "num_model_requests": b.requests,
            "project_id": proj, "user_id": None, "api_key_id": None, "model": model, "batch": False,
            "service_tier": "default",
        }]

    def embeddings(key: tuple, b: Bucket) -> list[dict]:
        proj, model = key
        return [{"object": "organization.usage.embeddings.result", "input_tokens": b.tokens["uncached_input"],
                 "num_model_requests": b.requests, "project_id": proj, "user_id": None, "api_key_id": None,
                 "model": model, "batch": False}]

    openai = [c for c in calls if c.provider == "openai"]
    pages = []
    for operation, results in (("chat", completions), ("embeddings", embeddings)):
        subset = [c for c in openai if (c.operation == "embeddings") == (operation == "embeddings")]
        buckets = aggregate(subset, lambda c: (openai_project(c), c.response_model), day)
        data = _buckets(buckets, results, "openai", _unix, ("start_time", "end_time"))
        pages.append({"object": "page", "data": data, "has_more": False, "next_page": None})
    return pages


def openai_costs(calls: list[SimCall], day: date) -> dict:
    """OpenAI Costs API page: dollars per project and line item (`<model>, <direction>`) and UTC day."""
    def results(key: tuple, b: Bucket) -> list[dict]:
        proj, model = key
        return [
            {"object": "organization.costs.result", "amount": {"value": _dollars(b.usd[t]), "currency": "usd"},
             "line_item": f"{model}, {OPENAI_DIRECTIONS[t]}", "project_id": proj, "api_key_id": None,
             "quantity": b.tokens[t], "quantity_unit": "tokens"}
            for t in TOKEN_TYPES if b.tokens.get(t)
        ]

    openai = [c for c in calls if c.provider == "openai"]
    buckets = aggregate(openai, lambda c: (openai_project(c), c.response_model), day)
    data = _buckets(buckets, results, "openai", _unix, ("start_time", "end_time"))
    return {"object": "page", "data": data, "has_more": False, "next_page": None}


def anthropic_usage(calls: list[SimCall], day: date) -> dict:
    """Anthropic messages usage report: tokens per workspace and model, in the export's local-day buckets."""
    def results(key: tuple, b: Bucket) -> list[dict]:
        (model,) = key
        t = b.tokens
        return [{
            "uncached_input_tokens": t["uncached_input"], "cache_read_input_tokens": t["cache_read"],
            "cache_creation": {"ephemeral_5m_input_tokens": t["cache_write"], "ephemeral_1h_input_tokens": 0},
            "output_tokens": t["output"], "server_tool_use": {"web_search_requests": 0}, "api_key_id": None,
            "workspace_id": ANTHROPIC_WORKSPACE, "model": model, "service_tier": "standard",
            "context_window": "0-200k", "inference_geo": "global",
        }]

    buckets = aggregate([c for c in calls if c.provider == "anthropic"], lambda c: (c.response_model,), day)
    data = _strip_object(_buckets(buckets, results, "anthropic", _rfc3339, ("starting_at", "ending_at")))
    return {"data": data, "has_more": False, "next_page": None}


def anthropic_cost(calls: list[SimCall], day: date) -> dict:
    """Anthropic cost report: amounts in cents (decimal strings) per workspace and description."""
    def results(key: tuple, b: Bucket) -> list[dict]:
        (model,) = key
        out = []
        for t in TOKEN_TYPES:
            if not b.tokens.get(t):
                continue
            field, label = ANTHROPIC_COST_TYPES[t]
            cents = (b.usd[t] * 100).quantize(Decimal("1e-7"))
            out.append({
                "currency": "USD", "amount": format(cents.normalize(), "f"), "workspace_id": ANTHROPIC_WORKSPACE,
                "description": f"{ANTHROPIC_NAMES[model]} Usage - {label}", "cost_type": "tokens",
                "token_type": field, "model": model, "service_tier": "standard", "context_window": "0-200k",
                "inference_geo": "global",
            })
        return out

    buckets = aggregate([c for c in calls if c.provider == "anthropic"], lambda c: (c.response_model,), day)
    data = _strip_object(_buckets(buckets, results, "anthropic", _rfc3339, ("starting_at", "ending_at")))
    return {"data": data, "has_more": False, "next_page": None}


def _strip_object(data: list[dict]) -> list[dict]:
    """Anthropic buckets carry no `object` field."""
    return [{k: v for k, v in b.items() if k != "object"} for b in data]


def _dump(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def write_billing(calls: Iterable[SimCall], out_dir: Path, day: date = DEFAULT_DAY) -> dict[str, int]:
    """Write the four exports of simulated `day` into `out_dir`; returns bytes written per file name."""
    billed = billed_calls(calls)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "openai_costs.json": _dump(openai_costs(billed, day)) + "\n",
        "openai_usage.jsonl": "".join(_dump(p) + "\n" for p in openai_usage(billed, day)),
        "anthropic_cost.json": _dump(anthropic_cost(billed, day)) + "\n",
        "anthropic_usage.json": _dump(anthropic_usage(billed, day)) + "\n",
    }
    for name, text in files.items():
        (out_dir / name).write_text(text, encoding="utf-8")
    return {name: len(text.encode()) for name, text in files.items()}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m phaselens.sample_logs.billing",
        description="Write billing exports for the simulated day (four formats, three planted gaps).",
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
