"""Cost per call: list prices, the price book, self-hosted GPU-hours (pipeline/pricing.py + its SQL).

Expected costs are computed by hand in the tests from the providers' PUBLISHED prices, written below as
USD-per-million-token constants with their source, never from the code's own output.
"""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pyarrow as pa
import pytest
from genai_prices import Usage, calc_price

from phaselens.models.pricebook import PriceBook, load_pricebook, pricebook_json_schema
from phaselens.pipeline.errors import ConfigError
from phaselens.pipeline.pricing import build_costs
from phaselens.pipeline.store import connect

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pricing"
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "pricebook.toml"
PICO = Decimal("1e-12")

# --- published list prices, USD per million tokens -------------------------------------------------
# OpenAI, https://openai.com/api/pricing (gpt-4o-mini: input / cached input / output)
GPT_4O_MINI = {"input": Decimal("0.15"), "cached": Decimal("0.075"), "output": Decimal("0.60")}
# OpenAI o3: $10 / $40 at launch (2025-04-16); cut to $2 / $8 on 2025-06-10 (OpenAI pricing page)
O3_BEFORE = {"input": Decimal("10"), "output": Decimal("40")}
O3_AFTER = {"input": Decimal("2"), "output": Decimal("8")}
# Anthropic, https://docs.anthropic.com/en/docs/about-claude/pricing (Claude Sonnet 4)
SONNET_4 = {"input": Decimal("3"), "read": Decimal("0.30"), "write_5m": Decimal("3.75"),
            "write_1h": Decimal("6"), "output": Decimal("15")}
# Same page, Claude Sonnet 4.5 long context: prompts above 200K input tokens are billed entirely at these
SONNET_45_LONG = {"input": Decimal("6"), "read": Decimal("0.60"), "output": Decimal("22.50")}
SONNET_45 = {"input": Decimal("3"), "read": Decimal("0.30"), "output": Decimal("15")}
# DeepSeek, https://api-docs.deepseek.com/quick_start/pricing (deepseek-chat, 2025): standard price, and
# 50% off during the UTC 16:30-00:30 off-peak window
DEEPSEEK_CHAT = {"input": Decimal("0.27"), "output": Decimal("1.10")}
DEEPSEEK_CHAT_OFF_PEAK = {"input": Decimal("0.135"), "output": Decimal("0.55")}
# OpenAI fine-tuned gpt-4o-mini inference (what tests/fixtures/pricing/overrides.toml sets)
FT_4O_MINI = {"input": Decimal("0.30"), "cached": Decimal("0.15"), "output": Decimal("1.20")}


def usd(tokens: int, per_million: Decimal) -> Decimal:
    """Hand-computed cost of `tokens` at a USD-per-million price."""
    return Decimal(tokens) * per_million / Decimal(1_000_000)


RECORD_DEFAULTS = {"source": "test", "operation": "chat", "status": "ok", "timing_source": "none"}


def make_store(calls: list[dict], timing: list[tuple[str, float | None, float | None]] | None = None):
    """An in-memory store holding these raw_calls rows and a call_timing table."""
    con = connect(":memory:")
    keys = sorted({k for c in calls for k in c} | set(RECORD_DEFAULTS))
    rows = [{k: c.get(k, RECORD_DEFAULTS.get(k)) for k in keys} for c in calls]
    con.register("new_calls", pa.Table.from_pylist(rows))
    con.execute("INSERT INTO raw_calls BY NAME SELECT * FROM new_calls")
    con.unregister("new_calls")
    con.execute("CREATE TABLE call_timing (call_id VARCHAR, prefill_s DOUBLE, decode_s DOUBLE)")
    if timing:
        con.executemany("INSERT INTO call_timing VALUES (?, ?, ?)", timing)
    return con


def costs(con) -> dict[str, dict]:
    cur = con.execute("SELECT * FROM call_costs")
    names = [d[0] for d in cur.description]
    return {r[0]: dict(zip(names, r)) for r in cur.fetchall()}


def call(call_id: str, provider: str, model: str, model_raw: str | None = None, at: str = "2025-08-13 10:00:00",
         **tokens) -> dict:
    return {"call_id": call_id, "provider": provider, "model": model, "model_raw": model_raw or model,
            "started_at": datetime.fromisoformat(at), **tokens}


def test_openai_cached_input_matches_published_prices():
    # formats.md's gpt-4o-mini example: 1864 prompt tokens of which 1536 cached, 212 completion tokens
    con = make_store([call("a", "openai", "gpt-4o-mini", "gpt-4o-mini-2024-07-18",
                           uncached_input_tokens=328, cache_read_tokens=1536, output_tokens=212, reasoning_tokens=0)])
    build_costs(con, None)
    c = costs(con)["a"]
    assert c["uncached_input_cost_usd"] == usd(328, GPT_4O_MINI["input"]) == Decimal("0.0000492")
    assert c["cache_read_cost_usd"] == usd(1536, GPT_4O_MINI["cached"]) == Decimal("0.0001152")
    assert c["cache_write_cost_usd"] == 0
    assert c["output_cost_usd"] == usd(212, GPT_4O_MINI["output"]) == Decimal("0.0001272")
    assert c["input_cost_usd"] == Decimal("0.0001644")
    assert c["cost_usd"] == Decimal("0.0002916")  # the total the example's own costDetails report
    assert c["priced"] is True and c["price_source"] == "genai-prices"


def test_anthropic_cache_write_and_read_match_published_prices():
    con = make_store([call("b", "anthropic", "claude-sonnet-4", "claude-sonnet-4-20250514",
                           uncached_input_tokens=1200, cache_read_tokens=30000, cache_write_tokens=5000,
                           cache_write_1h_tokens=2000, output_tokens=800, reasoning_tokens=300)])
    build_costs(con, None)
    c = costs(con)["b"]
    assert c["uncached_input_cost_usd"] == usd(1200, SONNET_4["input"])
    assert c["cache_read_cost_usd"] == usd(30000, SONNET_4["read"])
    assert c["cache_write_cost_usd"] == usd(3000, SONNET_4["write_5m"]) + usd(2000, SONNET_4["write_1h"])
    assert c["output_cost_usd"] == usd(800, SONNET_4["output"])  # reasoning is part of output, not extra
    expected = Decimal("0.0036") + Decimal("0.009") + Decimal("0.01125") + Decimal("0.012") + Decimal("0.012")
    assert c["cost_usd"] == expected
    assert c["input_cost_usd"] == expected - c["output_cost_usd"]


def test_call_day_picks_the_historical_price():
    con = make_store([
        call("before", "openai", "o3", "o3-2025-04-16", at="2025-06-01 12:00:00",
             uncached_input_tokens=10_000, output_tokens=2_000),
        call("after", "openai", "o3", "o3-2025-04-16", at="2025-06-20 12:00:00",
             uncached_input_tokens=10_000, output_tokens=2_000),
    ])
    build_costs(con, None)
    c = costs(con)
    assert c["before"]["cost_usd"] == usd(10_000, O3_BEFORE["input"]) + usd(2_000, O3_BEFORE["output"])
    assert c["after"]["cost_usd"] == usd(10_000, O3_AFTER["input"]) + usd(2_000, O3_AFTER["output"])


def test_long_context_tier_applies_to_all_tokens_above_200k_input():
    con = make_store([
        # 150k uncached + 60k cache read = 210k input > 200k: every token at the long-context price
        call("long", "anthropic", "claude-sonnet-4-5", "claude-sonnet-4-5-20250929",
             uncached_input_tokens=150_000, cache_read_tokens=60_000, output_tokens=1_000),
        # exactly 200k input is not above 200k: standard price
        call("edge", "anthropic", "claude-sonnet-4-5", "claude-sonnet-4-5-20250929",
             uncached_input_tokens=140_000, cache_read_tokens=60_000, output_tokens=1_000),
    ])
    build_costs(con, None)
    c = costs(con)
    assert c["long"]["uncached_input_cost_usd"] == usd(150_000, SONNET_45_LONG["input"])
    assert c["long"]["cache_read_cost_usd"] == usd(60_000, SONNET_45_LONG["read"])
    assert c["long"]["output_cost_usd"] == usd(1_000, SONNET_45_LONG["output"])
    assert c["edge"]["cost_usd"] == (
        usd(140_000, SONNET_45["input"]) + usd(60_000, SONNET_45["read"]) + usd(1_000, SONNET_45["output"])
    )


def test_off_peak_price_follows_the_utc_time_of_day():
    tokens = {"uncached_input_tokens": 100_000, "output_tokens": 10_000}
    con = make_store([
        call("peak", "deepseek", "deepseek-chat", at="2025-08-13 10:00:00", **tokens),
        call("off_peak", "deepseek", "deepseek-chat", at="2025-08-13 18:00:00", **tokens),
    ])
    build_costs(con, None)
    c = costs(con)
    assert c["peak"]["cost_usd"] == usd(100_000, DEEPSEEK_CHAT["input"]) + usd(10_000, DEEPSEEK_CHAT["output"])
    assert c["off_peak"]["cost_usd"] == (
        usd(100_000, DEEPSEEK_CHAT_OFF_PEAK["input"]) + usd(10_000, DEEPSEEK_CHAT_OFF_PEAK["output"])
    )


def test_model_without_price_is_unpriced_never_zero():
    con = make_store([
        call("unknown", "acme", "mystery-1", uncached_input_tokens=500, output_tokens=50),
        call("no_model", "openai", None, None, uncached_input_tokens=500, output_tokens=50),
        call("local", "vllm", "llama-3.1-8b-instruct", uncached_input_tokens=500, output_tokens=50),
        call("no_usage", "openai", "gpt-4o-mini"),
        {**call("failed", "openai", "gpt-4o-mini"), "status": "error", "error_type": "RateLimitError"},
    ])
    build_costs(con, None)
    c = costs(con)
    for call_id, reason in [("unknown", "no_price"), ("no_model", "no_model"),
                            ("local", "self_hosted_no_deployment"), ("no_usage", "no_usage")]:
        assert c[call_id]["priced"] is False, call_id
        assert c[call_id]["unpriced_reason"] == reason
        cost_columns = [v for k, v in c[call_id].items() if k.endswith("_cost_usd")]
        assert cost_columns and all(v is None for v in cost_columns)
    # a failed call with no tokens of a known model costs nothing, and that is a known price
    assert c["failed"]["priced"] is True and c["failed"]["cost_usd"] == 0
    # the public view shows the same flag once the build copies call_costs into call_attribution
    assert con.execute("SELECT count(*) FROM call_costs WHERE NOT priced").fetchone()[0] == 4


def test_price_book_overrides_and_discounts():
    book = load_pricebook(FIXTURES / "overrides.toml")
    con = make_store([
        call("disc", "openai", "gpt-4o-mini", "gpt-4o-mini-2024-07-18",
             uncached_input_tokens=10_000, cache_read_tokens=20_000, output_tokens=1_000),
        call("disc_expired", "openai", "gpt-4o-mini", "gpt-4o-mini-2024-07-18", at="2026-01-05 09:00:00",
             uncached_input_tokens=10_000, cache_read_tokens=20_000, output_tokens=1_000),
        call("ft", "openai", "ft:gpt-4o-mini-2024-07-18:acme::b7c2d9e1", "ft:gpt-4o-mini-2024-07-18:acme::b7c2d9e1",
             uncached_input_tokens=10_000, cache_read_tokens=20_000, output_tokens=1_000),
        call("haiku", "anthropic", "claude-3-haiku", "claude-3-haiku-20240307",
             uncached_input_tokens=1_000, cache_read_tokens=2_000, cache_write_tokens=3_000,
             cache_write_1h_tokens=1_000, output_tokens=400),
        call("mystery", "acme", "mystery-1", uncached_input_tokens=10, output_tokens=10),
    ])
    build_costs(con, book)
    c = costs(con)
    off = Decimal("0.8")
    assert c["disc"]["cost_usd"] == off * (
        usd(10_000, GPT_4O_MINI["input"]) + usd(20_000, GPT_4O_MINI["cached"]) + usd(1_000, GPT_4O_MINI["output"])
    )
    assert c["disc"]["price_source"] == "price_book"
    assert c["disc_expired"]["price_source"] == "genai-prices"
    assert c["disc_expired"]["cost_usd"] == (
        usd(10_000, GPT_4O_MINI["input"]) + usd(20_000, GPT_4O_MINI["cached"]) + usd(1_000, GPT_4O_MINI["output"])
    )
    # the fine-tune's own prices beat the provider-wide discount, undiscounted
    assert c["ft"]["cost_usd"] == (
        usd(10_000, FT_4O_MINI["input"]) + usd(20_000, FT_4O_MINI["cached"]) + usd(1_000, FT_4O_MINI["output"])
    )
    # regex entry with input/output only: every cache bucket is charged at the input price
    assert c["haiku"]["input_cost_usd"] == usd(6_000, Decimal("0.20"))
    assert c["haiku"]["output_cost_usd"] == usd(400, Decimal("1.00"))
    assert c["mystery"]["priced"] is False
    assert c["mystery"]["unpriced_reason"] == "no_list_price_for_discount"


def test_each_bucket_is_rounded_once_to_the_picodollar_whatever_the_price_scale(tmp_path):
    """A bucket's cost is tokens x the per-token price rounded half away from zero to 12 decimals: prices with more
    decimals per token than that (taken through a rounding) and prices with fewer (taken at 12 decimals directly)
    both give it."""
    (tmp_path / "book.toml").write_text(
        '[[prices]]\nprovider = "acme"\nmodel = "fine"\ninput = 0.1234567\ncache_read = 0.0000015\n'
        'cache_write = 0.0000015\ncache_write_1h = 0.0000015\noutput = 2.000000449\n'
        '[[prices]]\nprovider = "acme"\nmodel = "round"\ninput = 3\ncache_read = 0.3\ncache_write = 3.75\noutput = 15\n'
    )
    book = load_pricebook(tmp_path / "book.toml")
    tokens = {"uncached_input_tokens": 987_654_321, "cache_read_tokens": 3, "cache_write_tokens": 7, "output_tokens": 5}
    both_writes = {"uncached_input_tokens": 1, "cache_write_tokens": 2, "cache_write_1h_tokens": 1}
    con = make_store([call("fine", "acme", "fine", **tokens), call("round", "acme", "round", **tokens),
                      call("writes", "acme", "fine", **both_writes)])
    build_costs(con, book)
    c = costs(con)

    def bucket(n: int, per_million: str) -> Decimal:
        from decimal import ROUND_HALF_UP
        return (Decimal(n) * Decimal(per_million) / Decimal(1_000_000)).quantize(PICO, rounding=ROUND_HALF_UP)

    fine = c["fine"]
    assert fine["uncached_input_cost_usd"] == bucket(987_654_321, "0.1234567")  # 13 decimals per token: rounded
    assert fine["cache_read_cost_usd"] == bucket(3, "0.0000015")  # 4.5e-12 USD rounds up to 5e-12
    assert fine["cache_read_cost_usd"] == Decimal("5E-12")
    assert fine["output_cost_usd"] == bucket(5, "2.000000449")  # 1.0000002245e-5 rounds down
    assert fine["output_cost_usd"] != Decimal(5) * Decimal("2.000000449") / Decimal(1_000_000)
    assert fine["cache_write_cost_usd"] == bucket(7, "0.0000015")
    # one 5-minute and one 1-hour write at 1.5e-12 USD each: one bucket, 3e-12 USD (rounding each would give 4e-12)
    assert c["writes"]["cache_write_cost_usd"] == Decimal("3E-12")
    rnd = c["round"]
    for col, n, price in (("uncached_input_cost_usd", 987_654_321, "3"), ("cache_read_cost_usd", 3, "0.3"),
                          ("cache_write_cost_usd", 7, "3.75"), ("output_cost_usd", 5, "15")):
        assert rnd[col] == bucket(n, price) == Decimal(n) * Decimal(price) / Decimal(1_000_000)  # exact, no rounding
    assert fine["cost_usd"] == sum(fine[k] for k in ("uncached_input_cost_usd", "cache_read_cost_usd",
                                                      "cache_write_cost_usd", "output_cost_usd"))


@pytest.mark.parametrize(
    ("provider", "model", "model_raw", "tokens"),
    [
        ("openai", "gpt-4o", "gpt-4o-2024-08-06", (5_000, 7_000, 0, 0, 900)),
        ("anthropic", "claude-opus-4-1", "claude-opus-4-1-20250805", (3_000, 50_000, 8_000, 3_000, 2_000)),
        ("aws.bedrock", "claude-sonnet-4", "global.anthropic.claude-sonnet-4-20250514-v1:0", (100, 900, 400, 100, 50)),
        ("gcp.gemini", "gemini-2.5-pro", "gemini-2.5-pro", (190_000, 30_000, 0, 0, 5_000)),
    ],
)
def test_costs_agree_with_genai_prices_own_calculator(provider, model, model_raw, tokens):
    uncached, read, write, write_1h, out = tokens
    at = datetime(2025, 9, 1, 12)
    con = make_store([call("x", provider, model, model_raw, at=at.isoformat(), uncached_input_tokens=uncached,
                           cache_read_tokens=read, cache_write_tokens=write, cache_write_1h_tokens=write_1h,
                           output_tokens=out)])
    build_costs(con, None)
    c = costs(con)["x"]
    ids = {"openai": "openai", "anthropic": "anthropic", "aws.bedrock": "aws", "gcp.gemini": "google"}
    usage = Usage(input_tokens=uncached + read + write, cache_read_tokens=read, cache_write_tokens=write,
                  cache_write_1h_tokens=write_1h, output_tokens=out)
    ref = calc_price(usage, model_raw, provider_id=ids[provider], genai_request_timestamp=at)
    assert c["priced"] is True
    assert abs(c["input_cost_usd"] - ref.input_price) <= 3 * PICO
    assert abs(c["output_cost_usd"] - ref.output_price) <= PICO


# --- self-hosted GPU-hours --------------------------------------------------------------------------

GPU_CALLS = [
    call("A", "vllm", "qwen2.5-coder-7b", at="2025-08-13 10:05:00", uncached_input_tokens=900, output_tokens=300),
    call("B", "vllm", "qwen2.5-coder-7b", at="2025-08-13 10:40:00", uncached_input_tokens=4000, output_tokens=700),
    call("untimed", "vllm", "qwen2.5-coder-7b", at="2025-08-13 10:50:00", uncached_input_tokens=10, output_tokens=10),
    call("late", "vllm", "qwen2.5-coder-7b", at="2025-08-14 09:00:00", uncached_input_tokens=10, output_tokens=10),
    *[call(f"r{i}", "vllm", "tiny-1b", at=f"2025-08-13 11:0{i}:00", uncached_input_tokens=1, output_tokens=1)
      for i in (1, 2, 3)],
    {**call("K1", "sglang", "llama-3.1-70b-instruct", at="2025-08-13 12:00:19"),
     "ended_at": datetime(2025, 8, 13, 12, 0, 30)},
    {**call("K2", "sglang", "llama-3.1-70b-instruct", at="2025-08-13 12:00:19"),
     "ended_at": datetime(2025, 8, 13, 12, 0, 35)},
    {**call("K3", "sglang", "llama-3.1-70b-instruct", at="2025-08-13 12:09:39"),
     "ended_at": datetime(2025, 8, 13, 12, 10, 0)},
]
GPU_TIMING = [
    ("A", 0.5, 9.5), ("B", 1.5, 28.5), ("late", 0.1, 0.1),
    ("r1", 1.0, 2.0), ("r2", 1.0, 2.0), ("r3", 1.0, 2.0),
    ("K1", 2.0, 8.0), ("K2", 1.0, 14.0), ("K3", 2.0, 18.0),
]


@pytest.fixture(scope="module")
def gpu_store():
    con = make_store(GPU_CALLS, GPU_TIMING)
    build_costs(con, load_pricebook(FIXTURES / "deployments.yaml"))
    return con


def hour_row(con, deployment: str, hour: str) -> dict:
    cur = con.execute("SELECT * FROM deployment_costs WHERE deployment = ? AND hour = ?",
                      [deployment, datetime.fromisoformat(hour)])
    return dict(zip([d[0] for d in cur.description], cur.fetchone()))


def test_gpu_hour_split_by_phase_seconds(gpu_store):
    c = costs(gpu_store)
    # 1 x H100 at $2.49/h; A and B ran 0.5+9.5 s and 1.5+28.5 s in the 10:00 hour: 40 GPU-seconds in all
    assert c["A"]["uncached_input_cost_usd"] == Decimal("2.49") * Decimal("0.5") / 40 == Decimal("0.031125")
    assert c["A"]["output_cost_usd"] == Decimal("2.49") * Decimal("9.5") / 40 == Decimal("0.591375")
    assert c["B"]["uncached_input_cost_usd"] == Decimal("0.093375")
    assert c["B"]["output_cost_usd"] == Decimal("1.774125")
    assert c["A"]["cost_usd"] + c["B"]["cost_usd"] == Decimal("2.49")
    assert c["A"]["cache_read_cost_usd"] == 0 and c["A"]["price_source"] == "gpu_hours"
    assert c["A"]["deployment"] == "coder-h100"
    # a call without phase times is flagged, not charged; one outside the paid period likewise
    assert (c["untimed"]["priced"], c["untimed"]["unpriced_reason"]) == (False, "no_timing")
    assert (c["late"]["priced"], c["late"]["unpriced_reason"]) == (False, "outside_deployment_period")
    row = hour_row(gpu_store, "coder-h100", "2025-08-13 10:00:00")
    assert (row["calls"], row["untimed_calls"], row["gpu_s"]) == (3, 1, 40.0)
    assert (row["cost_usd"], row["allocated_usd"], row["idle_usd"]) == (Decimal("2.49"), Decimal("2.49"), 0)


def test_gpu_hours_without_calls_stay_idle(gpu_store):
    # active 2025-08-13 only: 24 hours at $2.49, of which one (10:00) had calls
    rows = gpu_store.execute(
        "SELECT count(*), sum(cost_usd), sum(allocated_usd), sum(idle_usd), count(*) FILTER (WHERE calls = 0) "
        "FROM deployment_costs WHERE deployment = 'coder-h100'"
    ).fetchone()
    assert rows == (24, Decimal("59.76"), Decimal("2.49"), Decimal("57.27"), 23)


def test_gpu_allocation_is_exact_to_the_picodollar(gpu_store):
    # $1.00 over 3 calls of 1 s prefill + 2 s decode: shares are 1/9 and 2/9, which no decimal writes exactly
    c = costs(gpu_store)
    shares = [c[f"r{i}"][col] for i in (1, 2, 3) for col in ("uncached_input_cost_usd", "output_cost_usd")]
    assert sum(shares) == Decimal("1.000000000000")
    for i in (1, 2, 3):
        assert abs(Fraction(c[f"r{i}"]["uncached_input_cost_usd"]) - Fraction(1, 9)) < Fraction(1, 10**12)
        assert abs(Fraction(c[f"r{i}"]["output_cost_usd"]) - Fraction(2, 9)) < Fraction(1, 10**12)
    # invariant for every deployment-hour: the calls' shares add up to allocated; allocated + idle = cost
    bad = gpu_store.execute("""
        SELECT d.deployment, d.hour FROM deployment_costs d
        LEFT JOIN (SELECT deployment, date_trunc('hour', r.started_at) AS hour, sum(cost_usd) AS charged
                   FROM call_costs JOIN raw_calls r USING (call_id) WHERE priced GROUP BY ALL) s
          ON s.deployment = d.deployment AND s.hour = d.hour
        WHERE d.allocated_usd + d.idle_usd <> d.cost_usd OR coalesce(s.charged, 0) <> d.allocated_usd
    """).fetchall()
    assert bad == []


def test_keep_policy_charges_only_the_busy_part_of_the_hour(gpu_store):
    # 2 x A100 at $1.80/GPU-h = $3.60/h. GPU intervals [end - (prefill+decode), end]:
    # K1 12:00:20-12:00:30 and K2 12:00:20-12:00:35 overlap (15 s busy); K3 12:09:40-12:10:00 (20 s): 35 s busy
    row = hour_row(gpu_store, "batch-a100", "2025-08-13 12:00:00")
    allocated = Fraction(360, 100) * Fraction(35, 3600)
    assert row["busy_s"] == 35.0
    assert Fraction(row["allocated_usd"]) == allocated  # $0.035
    assert row["idle_usd"] == Decimal("3.60") - Decimal("0.035")
    c = costs(gpu_store)
    weights = {"K1": (2, 8), "K2": (1, 14), "K3": (2, 18)}  # 45 phase-seconds in all
    for call_id, (prefill, decode) in weights.items():
        assert abs(Fraction(c[call_id]["uncached_input_cost_usd"]) - allocated * prefill / 45) < Fraction(1, 10**12)
        assert abs(Fraction(c[call_id]["output_cost_usd"]) - allocated * decode / 45) < Fraction(1, 10**12)


def test_rebuild_replaces_the_tables(gpu_store):
    before = gpu_store.execute("SELECT count(*), sum(cost_usd) FROM call_costs").fetchone()
    build_costs(gpu_store, load_pricebook(FIXTURES / "deployments.yaml"))
    assert gpu_store.execute("SELECT count(*), sum(cost_usd) FROM call_costs").fetchone() == before
    assert before[0] == len(GPU_CALLS)


# --- price book files ---------------------------------------------------------------------------------


def test_example_price_book_is_valid_and_exact():
    book = load_pricebook(EXAMPLE)
    (dep,) = book.deployments
    assert (dep.provider, dep.gpus, dep.usd_per_gpu_hour, dep.gpu_type) == ("vllm", 1, Decimal("2.49"), "H100-80GB")
    assert dep.serves("vllm", "qwen2.5-coder-7b", "Qwen/Qwen2.5-Coder-7B")
    assert book.prices[0].discount == Decimal("0.20")  # read from text, not via a binary float
    assert book.prices[1].per_million()["output"] == Decimal("1.20")


def test_yaml_numbers_stay_exact():
    book = load_pricebook(FIXTURES / "deployments.yaml")
    assert [d.usd_per_gpu_hour for d in book.deployments] == [Decimal("2.49"), Decimal("1.00"), Decimal("1.80")]
    assert book.deployments[2].hour_cost_usd == Decimal("3.60")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("bad_discount.toml", ["bad_discount.toml", "prices[1].discount", "less than or equal to 1"]),
        ("bad_deployment.yaml", ["deployments[0].usd_per_gpu_hour", "deployments[0].usd_per_gpu_hr"]),
        ("bad_missing_output.toml", ["prices[0]", "`input` and `output`"]),
        ("bad_self_hosted_tokens.toml", ["prices[0]", "[[deployments]]"]),
        ("bad_syntax.toml", ["bad_syntax.toml", "not valid TOML"]),
        ("bad_regex.yaml", ["prices[0].match", "not a valid regular expression"]),
    ],
)
def test_invalid_price_book_names_file_field_and_fix(name, expected):
    with pytest.raises(ConfigError) as err:
        load_pricebook(FIXTURES / name)
    for text in expected:
        assert text in str(err.value)
    assert err.value.fix


def test_json_schema_describes_both_sections():
    schema = pricebook_json_schema()
    assert set(schema["properties"]) == {"prices", "deployments"}
    assert "usd_per_gpu_hour" in json.dumps(schema)
    assert PriceBook.model_validate({}).prices == []
