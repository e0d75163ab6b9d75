"""Cost per call: unit prices per (provider, model, raw model, UTC day), then exact DECIMAL costs in SQL.

`price_table` resolves, once per distinct key in `raw_calls` (never per call), the USD-per-token prices
from the user's price book or from genai-prices' bundled data at that day's historical price. Tiered
prices (long-context tiers by input tokens) become one row per tier, and time-of-day prices (off-peak
discounts) one row per window, so SQL picks the right row per call. Self-hosted engines and any model a
`Deployment` serves get no per-token price: `pipeline/sql/gpu_costs.sql` shares their GPU-hours out.

`build_costs` runs it all and leaves `call_costs` and `deployment_costs` in the store.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from functools import lru_cache

import duckdb
import pyarrow as pa
from genai_prices import types as genai
from genai_prices.data_snapshot import find_provider_by_id, get_snapshot

from phaselens.models.pricebook import SELF_HOSTED_PROVIDERS, PriceBook

from .store import relation_exists, sql_text, transaction

# phaselens provider name (see models/vocabulary.py) -> genai-prices provider id.
GENAI_PROVIDER_IDS: dict[str, str] = {
    "openai": "openai",
    "azure.ai.openai": "azure",
    "azure.ai.inference": "azure",
    "anthropic": "anthropic",
    "aws.bedrock": "aws",
    "gcp.vertex_ai": "google",
    "gcp.gemini": "google",
    "gcp.gen_ai": "google",
    "mistral_ai": "mistral",
    "x_ai": "x-ai",
    "cohere": "cohere",
    "groq": "groq",
    "deepseek": "deepseek",
}

# price_table column -> genai-prices price keys, first one present wins. The fallbacks mirror genai-prices'
# own arithmetic: a cache bucket the model has no price for is charged as ordinary input, and 1-hour cache
# writes without their own price are charged as cache writes.
GENAI_PRICE_KEYS: dict[str, tuple[str, ...]] = {
    "uncached_input": ("input_mtok",),
    "cache_read": ("cache_read_mtok", "input_mtok"),
    "cache_write": ("cache_write_mtok", "cache_write_5m_mtok", "input_mtok"),
    "cache_write_1h": ("cache_write_1h_mtok", "cache_write_mtok", "input_mtok"),
    "output": ("output_mtok",),
}
PRICE_COLUMNS: tuple[str, ...] = tuple(GENAI_PRICE_KEYS)

TOKENS_PER_MILLION = Decimal(1_000_000)
PER_TOKEN_QUANTUM = Decimal("1e-18")  # scale of decimal128(38, 18)
DAY_SECONDS = 86_400
UNIT_PRICE = pa.decimal128(38, 18)
MONEY = pa.decimal128(38, 12)

PRICE_TABLE_SCHEMA = pa.schema(
    [
        ("provider", pa.string()),
        ("model", pa.string()),
        ("model_raw", pa.string()),
        ("day", pa.date32()),  # UTC day of started_at; NULL when the call has no start time
        ("window_start_s", pa.int32()),  # seconds after UTC midnight this row starts to apply (inclusive)
        ("window_end_s", pa.int32()),  # ... and stops (exclusive); 0..86400 unless time-of-day pricing
        ("tier_start_input_tokens", pa.int64()),  # smallest total input (uncached + cache) this row applies to
        *[(c, UNIT_PRICE) for c in PRICE_COLUMNS],  # USD per token
        ("price_source", pa.string()),  # price_book | genai-prices | gpu_hours | NULL (unknown)
        ("matched_model", pa.string()),  # genai-prices `provider/model id`, or `price_book:<entry>`
        ("deployment", pa.string()),  # the Deployment that served the key (price_source = gpu_hours)
        ("unpriced_reason", pa.string()),  # why no price: no_model | no_price | self_hosted_no_deployment | ...
    ]
)

DEPLOYMENTS_SCHEMA = pa.schema(
    [
        ("deployment", pa.string()),
        ("provider", pa.string()),
        ("gpu_type", pa.string()),
        ("gpus", pa.int32()),
        ("usd_per_gpu_hour", MONEY),
        ("hour_cost_usd", MONEY),
        ("idle", pa.string()),
        ("active_from", pa.date32()),
        ("active_to", pa.date32()),
    ]
)

# Disaggregated serving: for each distinct call key, the deployments named by their `pool` (the engine workers'
# service.name); gpu_costs.sql charges a call's prefill seconds to its prefill pool's deployment and its decode
# seconds to its decode pool's.
POOLS_SCHEMA = pa.schema(
    [
        ("provider", pa.string()),
        ("model", pa.string()),
        ("model_raw", pa.string()),
        ("day", pa.date32()),
        ("pool", pa.string()),
        ("deployment", pa.string()),
    ]
)

PriceMap = dict[str, Decimal | None]  # price column -> USD per token


@dataclass(frozen=True)
class PriceWindow:
    """Per-token prices valid from `start_s` to `end_s` seconds after UTC midnight, one map per input tier."""

    start_s: int
    end_s: int
    tiers: tuple[tuple[int, PriceMap], ...]  # (tier_start_input_tokens, prices), ascending


@dataclass(frozen=True)
class ListPrice:
    """A model's list price on one UTC day, as genai-prices publishes it."""

    matched_model: str
    windows: tuple[PriceWindow, ...]


def _per_token(usd_per_million: Decimal) -> Decimal:
    return (usd_per_million / TOKENS_PER_MILLION).quantize(PER_TOKEN_QUANTUM)


@lru_cache(maxsize=4096)
def _genai_model(provider: str | None, ref: str) -> tuple[genai.Provider, genai.ModelInfo] | None:
    """genai-prices' provider and model for a phaselens provider and model reference, or None."""
    snapshot = get_snapshot()
    provider_id = GENAI_PROVIDER_IDS.get(provider or "")
    if provider_id is None and provider and find_provider_by_id(snapshot.providers, provider):
        provider_id = provider  # a provider genai-prices knows under our own name (together, fireworks ...)
    try:
        # An unknown provider (a gateway, a proxy) is inferred from the model name, as genai-prices does.
        return snapshot.find_provider_model(ref, None, provider_id, None)
    except LookupError:
        return None


def _price_at(value: Decimal | genai.TieredPrices | None, total_input_tokens: int) -> Decimal | None:
    if isinstance(value, genai.TieredPrices):
        # genai-prices' cliff rule: a tier applies to every token once total input exceeds its start.
        for tier in reversed(value.tiers):
            if total_input_tokens > tier.start:
                return _per_token(tier.price)
        return _per_token(value.base)
    return None if value is None else _per_token(value)


def _tiers(model_price: genai.ModelPrice) -> tuple[tuple[int, PriceMap], ...]:
    raw: dict[str, Decimal | genai.TieredPrices | None] = {
        col: next((v for k in keys if (v := getattr(model_price, k, None)) is not None), None)
        for col, keys in GENAI_PRICE_KEYS.items()
    }
    starts = sorted(
        {0} | {t.start + 1 for v in raw.values() if isinstance(v, genai.TieredPrices) for t in v.tiers}
    )
    return tuple((s, {col: _price_at(v, s) for col, v in raw.items()}) for s in starts)


def _window_bounds(model: genai.ModelInfo) -> list[int]:
    """Seconds after UTC midnight where a time-of-day price of this model starts or ends."""
    bounds = {0, DAY_SECONDS}
    for cond in model.prices if isinstance(model.prices, list) else []:
        if isinstance(cond.constraint, genai.TimeOfDateConstraint):
            for t in (cond.constraint.start_time, cond.constraint.end_time):
                if t.tzinfo is not None:
                    t = datetime.combine(date(1970, 1, 1), t).astimezone(UTC).time()
                bounds.add(t.hour * 3600 + t.minute * 60 + t.second)
    return sorted(bounds)


def list_price(provider: str | None, model: str | None, model_raw: str | None, day: date | None) -> ListPrice | None:
    """genai-prices' list price (USD per token) for a call key on a UTC day, raw name first; None if unknown."""
    found = None
    for ref in dict.fromkeys(r for r in (model_raw, model) if r):
        if found := _genai_model(provider, ref):
            break
    if found is None:
        return None
    gp, info = found
    midnight = datetime.combine(day or datetime.now(UTC).date(), time(0), tzinfo=UTC)
    bounds = _window_bounds(info)
    windows: list[PriceWindow] = []
    for start, end in zip(bounds, bounds[1:]):
        tiers = _tiers(info.get_prices(midnight + timedelta(seconds=start)))
        if windows and windows[-1].tiers == tiers:
            windows[-1] = replace(windows[-1], end_s=end)
        else:
            windows.append(PriceWindow(start, end, tiers))
    if all(p["uncached_input"] is None and p["output"] is None for w in windows for _, p in w.tiers):
        return None  # not a text-token model (images, audio by the hour, searches)
    return ListPrice(f"{gp.id}/{info.id}", tuple(windows))


def _discounted(windows: tuple[PriceWindow, ...], discount: Decimal) -> tuple[PriceWindow, ...]:
    keep = 1 - discount
    return tuple(
        replace(
            w,
            tiers=tuple(
                (s, {c: None if v is None else (v * keep).quantize(PER_TOKEN_QUANTUM) for c, v in p.items()})
                for s, p in w.tiers
            ),
        )
        for w in windows
    )


def price_rows(
    book: PriceBook, provider: str | None, model: str | None, model_raw: str | None, day: date | None
) -> list[dict]:
    """The price_table rows (USD per token, one per time window and input tier) for one distinct call key."""
    key = {"provider": provider, "model": model, "model_raw": model_raw, "day": day}
    unpriced = dict.fromkeys(PRICE_COLUMNS)

    def rows(windows, source=None, matched=None, deployment=None, reason=None) -> list[dict]:
        windows = windows or (PriceWindow(0, DAY_SECONDS, ((0, unpriced),)),)
        return [
            {**key, "window_start_s": w.start_s, "window_end_s": w.end_s, "tier_start_input_tokens": start,
             **prices, "price_source": source, "matched_model": matched, "deployment": deployment,
             "unpriced_reason": reason}
            for w in windows
            for start, prices in w.tiers
        ]

    if model is None and model_raw is None:
        return rows(None, reason="no_model")
    if deployment := book.deployment_for(provider, model, model_raw):
        return rows(None, source="gpu_hours", deployment=deployment.name)
    if provider in SELF_HOSTED_PROVIDERS:
        return rows(None, reason="self_hosted_no_deployment")
    override = book.override_for(provider, model, model_raw, day)
    if override is not None and override.discount is None:
        prices = {c: _per_token(v) for c, v in override.per_million().items()}
        return rows((PriceWindow(0, DAY_SECONDS, ((0, prices),)),), "price_book", override.label())
    listed = list_price(provider, model, model_raw, day)
    if listed is None:
        return rows(None, reason="no_list_price_for_discount" if override is not None else "no_price")
    if override is not None:
        return rows(_discounted(listed.windows, override.discount), "price_book", listed.matched_model)
    return rows(listed.windows, "genai-prices", listed.matched_model)


def price_table(con: duckdb.DuckDBPyConnection, pricebook: PriceBook | None = None) -> pa.Table:
    """Unit prices in USD per token for each distinct (provider, model, model_raw, UTC day) in raw_calls."""
    book = pricebook or PriceBook()
    keys = con.execute(
        "SELECT DISTINCT provider, model, model_raw, CAST(started_at AS DATE) AS day FROM raw_calls"
    ).fetchall()
    rows = [row for key in keys for row in price_rows(book, *key)]
    return pa.Table.from_pylist(rows, schema=PRICE_TABLE_SCHEMA)


def deployments_table(pricebook: PriceBook | None = None) -> pa.Table:
    """One row per self-hosted Deployment with its hour cost in USD (gpus × usd_per_gpu_hour)."""
    book = pricebook or PriceBook()
    rows = [
        {"deployment": d.name, "provider": d.provider, "gpu_type": d.gpu_type, "gpus": d.gpus,
         "usd_per_gpu_hour": d.usd_per_gpu_hour, "hour_cost_usd": d.hour_cost_usd, "idle": d.idle,
         "active_from": d.active_from, "active_to": d.active_to}
        for d in book.deployments
    ]
    return pa.Table.from_pylist(rows, schema=DEPLOYMENTS_SCHEMA)


def pools_table(con: duckdb.DuckDBPyConnection, pricebook: PriceBook | None = None) -> pa.Table:
    """One row per distinct call key and deployment `pool` serving it (empty when no deployment names a pool)."""
    book = pricebook or PriceBook()
    rows: list[dict] = []
    if any(d.pool is not None for d in book.deployments):
        keys = con.execute(
            "SELECT DISTINCT provider, model, model_raw, CAST(started_at AS DATE) AS day FROM raw_calls"
        ).fetchall()
        for provider, model, model_raw, day in keys:
            for pool, d in book.pool_deployments(provider, model, model_raw).items():
                rows.append({"provider": provider, "model": model, "model_raw": model_raw, "day": day,
                             "pool": pool, "deployment": d.name})
    return pa.Table.from_pylist(rows, schema=POOLS_SCHEMA)


_TEMP_TABLES = ("pricing_gpu_calls", "pricing_gpu_hours", "pricing_gpu_shares", "pricing_gpu_call_costs")


def _unit_prices_sql(con: duckdb.DuckDBPyConnection) -> str:
    """call_unit_prices.sql; without its QUALIFY (a window over every call) when no price key has two rows
    (no input-token tiers or time-of-day windows), where a call can join one row at most anyway."""
    sql = sql_text("call_unit_prices")
    unique = con.execute("SELECT count(*) = count(DISTINCT (provider, model, model_raw, day)) FROM price_table").fetchone()[0]
    head, sep, _ = sql.partition("\nQUALIFY ")
    return head + ";" if unique and sep else sql


def build_costs(con: duckdb.DuckDBPyConnection, pricebook: PriceBook | None) -> None:
    """Price every call (USD, DECIMAL) into `call_costs` and every deployment-hour into `deployment_costs`."""
    con.register("price_table", price_table(con, pricebook))
    con.register("pricing_deployments", deployments_table(pricebook))
    con.register("pricing_deployment_pools", pools_table(con, pricebook))
    # Without the latency stage, phase times come from what the sources measured (vLLM reports them).
    own_timing = not relation_exists(con, "call_timing")
    with transaction(con):
        if own_timing:
            con.execute("CREATE TEMP VIEW call_timing AS SELECT call_id, prefill_s, decode_s FROM raw_calls")
        con.execute(sql_text("gpu_costs"))
        con.execute(_unit_prices_sql(con))
        con.execute(sql_text("call_costs"))
        for name in _TEMP_TABLES:
            con.execute(f"DROP TABLE IF EXISTS {name}")
        if own_timing:
            con.execute("DROP VIEW call_timing")
