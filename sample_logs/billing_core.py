"""What the providers bill for the simulated day: price sheet, planted price change, export buckets, sums.

Every export writer (`billing_api`, `billing_cloud`) sums calls with `aggregate`, so all formats share
one price sheet and one rounding-free arithmetic: tokens times USD per million, as exact Decimals.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from phaselens.sample_logs import profile as P
from phaselens.sample_logs.simcall import SimCall

MILLION = Decimal(1_000_000)
TOKEN_TYPES = ("uncached_input", "cache_read", "cache_write", "output")


def _usd(**per_million: str) -> dict[str, Decimal]:
    return {k: Decimal(v) for k, v in per_million.items()}


# Published prices, USD per million tokens, as each provider bills them, keyed by (provider, request model):
# OpenAI https://openai.com/api/pricing; Anthropic https://docs.anthropic.com/en/docs/about-claude/pricing
# (cache_write is the 5-minute cache write); Amazon Bedrock https://aws.amazon.com/bedrock/pricing (Claude
# Sonnet 4 through the global cross-region inference profile, the same price as Anthropic's); Azure OpenAI
# https://azure.microsoft.com/pricing/details/cognitive-services/openai-service (gpt-4.1-mini, Global
# deployment, the same price as OpenAI's).
PRICE_SHEET: dict[tuple[str, str], dict[str, Decimal]] = {
    ("openai", "gpt-4o"): _usd(uncached_input="2.50", cache_read="1.25", output="10.00"),
    ("openai", "o4-mini"): _usd(uncached_input="1.10", cache_read="0.275", output="4.40"),
    ("openai", P.BATCH_MODEL): _usd(uncached_input="0.15", cache_read="0.075", output="0.60"),
    ("openai", P.EMBEDDING_MODEL): _usd(uncached_input="0.02"),
    ("anthropic", P.AGENT_CLAUDE): _usd(uncached_input="3.00", cache_read="0.30", cache_write="3.75", output="15.00"),
    ("aws.bedrock", P.INLINE_MODEL): _usd(uncached_input="3.00", cache_read="0.30", cache_write="3.75",
                                          output="15.00"),
    ("azure.ai.openai", "gpt-4.1-mini"): _usd(uncached_input="0.40", cache_read="0.10", output="1.60"),
}


@dataclass(frozen=True)
class PriceChange:
    """From `from_hour` (UTC, on the simulated day) on, `model` is billed at `per_million` instead."""

    provider: str
    model: str
    from_hour: int
    per_million: dict[str, Decimal]


# Planted gap 2: o4-mini billed 50% above its list price from noon UTC.
PRICE_CHANGE = PriceChange("openai", "o4-mini", 12, _usd(uncached_input="1.65", cache_read="0.4125", output="6.60"))
# Planted gap 3: the provider whose exports use daily buckets of this time zone instead of UTC.
LOCAL_BUCKETS = ("anthropic", ZoneInfo("America/Los_Angeles"))


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


def hour_start(call: SimCall) -> datetime:
    """Naive-UTC start of the hour the call started in (hourly cloud exports)."""
    return call.started_at.replace(minute=0, second=0, microsecond=0)


def tokens_of(call: SimCall) -> dict[str, int]:
    """Disjoint token buckets of a call, zero buckets left out."""
    values = {"uncached_input": call.uncached_input_tokens, "cache_read": call.cache_read_tokens,
              "cache_write": call.cache_write_tokens, "output": call.output_tokens}
    return {k: v for k, v in values.items() if v}


def billed_calls(calls: Iterable[SimCall]) -> list[SimCall]:
    """The calls a provider bills by the token: hosted providers, calls that used tokens."""
    return [c for c in calls if (c.provider, c.model) in PRICE_SHEET and tokens_of(c)]


def aggregate(calls: Iterable[SimCall], key: Callable[[SimCall], tuple], day: date,
              start: Callable[[SimCall], datetime] = bucket_start) -> dict[tuple, Bucket]:
    """(bucket start, *key(call)) -> summed tokens and USD billed for simulated `day`'s calls, in a stable order."""
    out: dict[tuple, Bucket] = defaultdict(lambda: Bucket(defaultdict(int), defaultdict(Decimal)))
    for c in calls:
        b = out[(start(c), *key(c))]
        b.requests += 1
        prices = unit_prices(c, day)
        for token_type, n in tokens_of(c).items():
            b.tokens[token_type] += n
            b.usd[token_type] += Decimal(n) * prices[token_type] / MILLION
    return dict(sorted(out.items(), key=lambda kv: tuple(str(x) for x in kv[0])))


def of_provider(calls: Iterable[SimCall], provider: str) -> list[SimCall]:
    """The calls billed by `provider`."""
    return [c for c in calls if c.provider == provider]
