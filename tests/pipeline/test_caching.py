"""Caching lever (pipeline/caching.py + pipeline/sql/caching_*.sql): prefix reuse, achieved vs possible
cache reads, dollars and TTFT a prompt cache would save, and the dashboard's what-if.

Expected numbers come from the Mooncake traces recomputed here in plain Python, and from a hand-made set
of calls (tests/fixtures/caching/prefix_calls.json) whose reuse, dollars and TTFT are worked out by hand
in the comments below.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal
from itertools import groupby

import pyarrow as pa
import pytest

from pydantic import ValidationError

from phaselens.models import LlmCall
from phaselens.models.caching import CachingSettings
from phaselens.models.pricebook import ModelPrice, PriceBook
from phaselens.pipeline.caching import build_caching, published_lifetimes, what_if
from phaselens.pipeline.errors import PhaselensError
from phaselens.pipeline.pricing import build_costs
from phaselens.pipeline.read_model import PERCENTILE_ERROR

from tests.conftest import FIXTURES, shared_data_dir

CALLS_FIXTURE = FIXTURES / "caching" / "prefix_calls.json"
MOONCAKE_BLOCK = 512  # tokens per hash block (SOURCES.md §2)

# Stated prices for provider `acme` in the fixture, USD per million tokens (Anthropic's published Claude
# Sonnet 4 prices: input 3, cache read 0.30, 5-minute cache write 3.75, 1-hour cache write 6, output 15).
PER_M = {"input": Decimal("3"), "cache_read": Decimal("0.30"), "cache_write": Decimal("3.75"),
         "cache_write_1h": Decimal("6"), "output": Decimal("15")}
# Latency fit of acme/m1 (none for m2 or m3): 0.2 ms per uncached input token, 0.02 ms per cached one.
TTFT_UNCACHED, TTFT_CACHED = 0.0002, 0.00002


def per_token(name: str) -> Decimal:
    return PER_M[name] / Decimal(1_000_000)


# ----------------------------------------------------------------------------------------- helpers


def insert_calls(con, calls: list[dict]) -> None:
    """Validate rows as LlmCall records and append them to raw_calls."""
    rows = [LlmCall.model_validate(c).model_dump() for c in calls]
    con.register("_calls", pa.Table.from_pylist(rows))
    con.execute("INSERT INTO raw_calls BY NAME SELECT * FROM _calls")
    con.unregister("_calls")


def fixture_store(store, *, fits: bool = True, cached_fit: bool = True):
    """The fixture calls, priced with the stated acme prices, with a latency fit for acme/m1."""
    insert_calls(store, json.loads(CALLS_FIXTURE.read_text()))
    book = PriceBook(prices=[ModelPrice(provider="acme", **PER_M)])
    build_costs(store, book)
    if fits:
        cached_col = ", ttft_s_per_cached_token DOUBLE" if cached_fit else ""
        store.execute("CREATE TABLE latency_fits (provider VARCHAR, model VARCHAR, "
                      f"ttft_s_per_uncached_token DOUBLE{cached_col})")
        values = [("acme", "m1", TTFT_UNCACHED, TTFT_CACHED)] if cached_fit else [("acme", "m1", TTFT_UNCACHED)]
        store.executemany(f"INSERT INTO latency_fits VALUES ({', '.join('?' * len(values[0]))})", values)
    return store


def reuse(con, lifetime_s: int | None) -> dict[str, tuple[int, int, int, int]]:
    """call_id -> (total_blocks, seen_blocks, reusable_tokens, write_tokens) at one lifetime."""
    rows = con.execute(
        "SELECT call_id, total_blocks, seen_blocks, reusable_tokens, write_tokens FROM call_prefix_reuse "
        "WHERE coalesce(lifetime_s, -1) = coalesce(CAST(? AS BIGINT), -1)", [lifetime_s]
    ).fetchall()
    return {r[0]: tuple(r[1:]) for r in rows}


def opportunity(con, workload: str, lifetime_s: int | None, model: str | None = None) -> dict:
    level = "workload" if model is None else "model"
    cur = con.execute(
        "SELECT * FROM caching_opportunity WHERE workload = ? AND level = ? AND model IS NOT DISTINCT FROM ? "
        "AND coalesce(lifetime_s, -1) = coalesce(CAST(? AS BIGINT), -1)", [workload, level, model, lifetime_s]
    )
    names = [d[0] for d in cur.description]
    (row,) = cur.fetchall()
    return dict(zip(names, row))


# --------------------------------------------------------------------------- the Mooncake traces


def mooncake_rows(name: str) -> list[dict]:
    data = shared_data_dir()
    if data is None or not (data / "mooncake_fast25" / name).is_file():
        pytest.skip(f"shared data mooncake_fast25/{name} not found (set PHASELENS_SHARED or place ../shared/data)")
    with open(data / "mooncake_fast25" / name) as f:
        return [json.loads(line) for line in f if line.strip()]


def load_mooncake(store, load, name: str) -> None:
    """Load a Mooncake trace through its adapter, or insert the rows directly when there is no adapter."""
    from phaselens.ingest.registry import by_name

    path = shared_data_dir() / "mooncake_fast25" / name
    try:
        by_name("mooncake")
    except KeyError:
        anchor = datetime(2024, 1, 1)
        calls = []
        for i, r in enumerate(mooncake_rows(name)):
            n = len(r["hash_ids"])
            sizes = [min(MOONCAKE_BLOCK * (k + 1), r["input_length"]) for k in range(n)]
            calls.append({
                "call_id": f"mooncake:{i}", "source": "mooncake", "provider": "mooncake", "model": "unknown",
                "started_at": anchor + timedelta(milliseconds=r["timestamp"]),
                "uncached_input_tokens": r["input_length"], "output_tokens": r["output_length"],
                "prefix_hashes": [str(h) for h in r["hash_ids"]] or None,
                "prefix_tokens": (sizes[:-1] + [r["input_length"]]) if n else None,
            })
        insert_calls(store, calls)
        return
    result = load(path)
    assert [(f.status, f.adapter) for f in result.files] == [("loaded", "mooncake")]


def seen_blocks_by_hand(rows: list[dict], lifetime_ms: int | None) -> tuple[int, int]:
    """(blocks seen in a strictly earlier request within the lifetime, all blocks), in plain Python."""
    last_seen: dict[int, int] = {}
    seen = total = 0
    for ts, group in groupby(rows, key=lambda r: r["timestamp"]):  # the traces are sorted by timestamp
        group = list(group)
        for r in group:
            total += len(r["hash_ids"])
            seen += sum(1 for h in r["hash_ids"]
                        if h in last_seen and (lifetime_ms is None or ts - last_seen[h] <= lifetime_ms))
        for r in group:
            last_seen.update(dict.fromkeys(r["hash_ids"], ts))
    return seen, total


def reused_token_share_by_hand(rows: list[dict]) -> float:
    """Tokens of blocks seen in an earlier request / all input tokens, unlimited lifetime, in plain Python."""
    seen_ids: set[int] = set()
    reused = inputs = 0
    for _, group in groupby(rows, key=lambda r: r["timestamp"]):
        group = list(group)
        for r in group:
            inputs += r["input_length"]
            for k, h in enumerate(r["hash_ids"]):
                block = min(MOONCAKE_BLOCK, r["input_length"] - MOONCAKE_BLOCK * k)
                reused += block if h in seen_ids else 0
        for r in group:
            seen_ids.update(r["hash_ids"])
    return reused / inputs


def test_mooncake_conversation_block_reuse_is_36_6_percent(store, load):
    rows = mooncake_rows("conversation_trace.jsonl")
    load_mooncake(store, load, "conversation_trace.jsonl")
    build_caching(store, CachingSettings(lifetimes_s=[None, 300], min_block_tokens=0))

    seen, total = store.execute(
        "SELECT sum(seen_blocks), sum(total_blocks) FROM call_prefix_reuse WHERE lifetime_s IS NULL"
    ).fetchone()
    assert (seen, total) == seen_blocks_by_hand(rows, None)
    assert seen / total == pytest.approx(0.366, abs=0.0005)  # SOURCES.md §2: 36.6%

    # a 5-minute lifetime counts only blocks whose last use was at most 300 s before
    seen_5m, _ = store.execute(
        "SELECT sum(seen_blocks), sum(total_blocks) FROM call_prefix_reuse WHERE lifetime_s = 300"
    ).fetchone()
    assert seen_5m == seen_blocks_by_hand(rows, 300_000)[0]
    assert seen_5m < seen

    # the seen blocks of every call form an unbroken run from its first block, at both lifetimes, so the
    # reusable tokens are the size of the longest reused prefix
    broken = store.execute(
        "SELECT count(*) FROM call_prefix_reuse r JOIN raw_calls c USING (call_id) "
        "WHERE r.reusable_tokens <> CASE WHEN r.seen_blocks = 0 THEN 0 ELSE c.prefix_tokens[r.seen_blocks] END"
    ).fetchone()[0]
    assert broken == 0

    (row,) = store.execute(
        "SELECT reuse_share, seen_blocks, total_blocks, hashed_calls FROM caching_opportunity "
        "WHERE level = 'workload' AND lifetime_s IS NULL"
    ).fetchall()
    assert row[0] == pytest.approx(reused_token_share_by_hand(rows), rel=1e-12)
    assert row[1:] == (seen, total, len(rows))


def test_mooncake_synthetic_block_reuse_is_64_percent(store, load):
    rows = mooncake_rows("synthetic_trace.jsonl")
    load_mooncake(store, load, "synthetic_trace.jsonl")
    build_caching(store, CachingSettings(lifetimes_s=[None], min_block_tokens=0))
    seen, total = store.execute("SELECT sum(seen_blocks), sum(total_blocks) FROM call_prefix_reuse").fetchone()
    assert (seen, total) == seen_blocks_by_hand(rows, None)
    assert seen / total == pytest.approx(0.64, abs=0.005)  # SOURCES.md §2: 64%


# ------------------------------------------------------------------- hand-made cumulative hashes
#
# Fixture (provider acme; prefix_hashes[i] names the prompt up to block i; times in s after 10:00:00):
#   A  0    m1 repo-qa  S(2000) S|R(6000) S|R|Q1(6500)
#   B  60   m1 repo-qa  S(2000) S|R(6000) S|R|Q2(6800)
#   C  500  m1 repo-qa  S(2000) S|R(6000) S|R|Q3(6300)   440 s after B: outside 5 min, inside 1 h
#   D  520  m2 repo-qa  S(2000) S|R(6000) S|R|Q4(6100)   same prefix, other model: its own cache
#   E  530  m1 chat     S(2000) S|X(2600)                 30 s after C sent S
#   F  540  m1 chat     T(800)
#   G  550  m1 chat     T(800) T|Y(1500)                  reuses 800 tokens: under the 1,024 minimum
#   P1..P3 m3 agent, 1000/1030/1060 s, K(3000) + own tail; provider reports cache reads 0, 0, 3000
#   P4  1090 m3 agent, no hashes, 1000 uncached + 1000 cache read


def test_reuse_respects_lifetime_model_and_minimum(store):
    fixture_store(store)
    build_caching(store, CachingSettings(lifetimes_s=[300, 3600]))
    five = reuse(store, 300)
    # (blocks, seen, reusable tokens, first-write tokens)
    assert five["A"] == (3, 0, 0, 6000)      # writes S|R (6000 tokens), which B reuses 60 s later
    assert five["B"] == (3, 2, 6000, 0)      # reads the 6000-token prefix A sent
    assert five["C"] == (3, 0, 0, 2000)      # B's use is 440 s old: expired; writes S, which E reuses
    assert five["D"] == (3, 0, 0, 0)         # m1's cache does not serve m2
    assert five["E"] == (2, 1, 2000, 0)      # S from C, 30 s earlier
    assert five["F"] == (1, 0, 0, 0)         # T is reused by G, but 800 tokens is too short to cache
    assert five["G"] == (2, 1, 0, 0)         # the seen block counts, its 800 tokens do not
    assert "P4" not in five                  # no hashes: not measured
    hour = reuse(store, 3600)
    assert hour["C"] == (3, 2, 6000, 0)      # within an hour B's prefix is still cached
    assert hour["A"][3] == 6000 and hour["B"][3] == 0


def test_workload_scope_keeps_caches_apart(store):
    fixture_store(store)
    build_caching(store, CachingSettings(lifetimes_s=[300], scope="workload"))
    five = reuse(store, 300)
    assert five["E"] == (2, 0, 0, 0)         # C (repo-qa) no longer warms E (chat)
    assert five["C"][3] == 0                 # ... so C writes nothing a later call of its workload reads
    assert five["B"] == (3, 2, 6000, 0)


def test_dollars_and_ttft_saved_by_hand(store):
    fixture_store(store)
    build_caching(store, CachingSettings(lifetimes_s=[300, 3600]))
    u, r, w5, w1h = (per_token(k) for k in ("input", "cache_read", "cache_write", "cache_write_1h"))

    # 5 minutes, repo-qa. Input as billed: all uncached. With the cache (uncached, read, write):
    #   A 500 / 0 / 6000 (5-min write price), B 800 / 6000 / 0, C 4300 / 0 / 2000, D unchanged
    now = (6500 + 6800 + 6300 + 6100) * u
    with_cache = (500 * u + 6000 * w5) + (800 * u + 6000 * r) + (4300 * u + 2000 * w5) + 6100 * u
    repo = opportunity(store, "repo-qa", 300)
    assert repo["usd_now"] == now == Decimal("0.0771")
    assert repo["usd_with_cache"] == with_cache == Decimal("0.0669")
    assert repo["usd_saved"] == Decimal("0.0102")
    assert repo["reuse_share"] == pytest.approx(6000 / 25700)
    # TTFT: only m1 has a fit; B reads 6000 tokens at 0.18 ms saved each; A and C save nothing
    assert repo["ttft_fitted_calls"] == 3
    assert repo["ttft_saved_s_mean"] == pytest.approx(6000 * (TTFT_UNCACHED - TTFT_CACHED) / 3)
    assert repo["ttft_saved_p50_s"] == pytest.approx(0.0)

    # the per-model rows split it: m2 saves nothing and has no fit
    m2 = opportunity(store, "repo-qa", 300, model="m2")
    assert (m2["usd_saved"], m2["ttft_saved_s_mean"], m2["reusable_tokens"]) == (Decimal(0), None, 0)

    # 1 hour: C reads 6000 too, and A's write is priced at the 1-hour rate
    with_1h = (500 * u + 6000 * w1h) + (800 * u + 6000 * r) + (300 * u + 6000 * r) + 6100 * u
    repo_1h = opportunity(store, "repo-qa", 3600)
    assert repo_1h["usd_saved"] == now - with_1h == Decimal("0.0144")
    # the median is the sketch every percentile uses (pipeline/read_model.py): within 2.9% of the exact value
    assert repo_1h["ttft_saved_p50_s"] == pytest.approx(6000 * (TTFT_UNCACHED - TTFT_CACHED), rel=PERCENTILE_ERROR)

    # chat: E reads 2000 tokens; F and G gain nothing
    chat = opportunity(store, "chat", 300)
    assert chat["usd_saved"] == 2000 * (u - r) == Decimal("0.0054")
    assert chat["ttft_saved_s_mean"] == pytest.approx(2000 * (TTFT_UNCACHED - TTFT_CACHED) / 3)

    # the diagnosis reads the headline (first) lifetime
    rows = dict(store.execute("SELECT workload, lifetime_s FROM caching_by_workload").fetchall())
    assert rows == {"repo-qa": 300, "chat": 300, "agent": 300}


def test_ttft_without_a_cached_token_fit_counts_cached_tokens_as_free(store):
    fixture_store(store, cached_fit=False)
    build_caching(store, CachingSettings(lifetimes_s=[300]))
    assert opportunity(store, "chat", 300)["ttft_saved_s_mean"] == pytest.approx(2000 * TTFT_UNCACHED / 3)


def test_ttft_saved_reads_the_fit_of_the_calls_own_day(store):
    """With a fit per UTC day (as the latency stage writes them), a call's TTFT saved comes from its own day's fit
    only: not another day's, nor the fit of calls without a start (day NULL)."""
    fixture_store(store, fits=False)  # the fixture's calls all start on 2025-03-03
    store.execute("CREATE TABLE latency_fits (provider VARCHAR, model VARCHAR, day DATE, "
                  "ttft_s_per_uncached_token DOUBLE, ttft_s_per_cached_token DOUBLE)")
    store.execute("INSERT INTO latency_fits VALUES "
                  "('acme', 'm1', DATE '2025-03-02', 0.01, 0), ('acme', 'm1', DATE '2025-03-03', ?, ?), "
                  "('acme', 'm1', DATE '2025-03-04', 0.03, 0), ('acme', 'm1', NULL, 0.05, 0)",
                  [TTFT_UNCACHED, TTFT_CACHED])
    build_caching(store, CachingSettings(lifetimes_s=[300]))
    repo = opportunity(store, "repo-qa", 300)
    assert repo["ttft_fitted_calls"] == 3
    assert repo["ttft_saved_s_mean"] == pytest.approx(6000 * (TTFT_UNCACHED - TTFT_CACHED) / 3)


def test_ttft_saved_follows_the_latency_model_shape(store):
    # latency_fits as the latency stage writes it: prefill = max(floor, a + b·t + q·t² + k·cached), per kind
    fixture_store(store, fits=False)
    store.execute("CREATE TABLE latency_fits (provider VARCHAR, model VARCHAR, kind VARCHAR, ttft_intercept_s DOUBLE, "
                  "ttft_s_per_uncached_token DOUBLE, ttft_s_per_uncached_token_sq DOUBLE, "
                  "ttft_s_per_cached_token DOUBLE, ttft_floor_s DOUBLE)")
    store.execute("INSERT INTO latency_fits VALUES ('acme', 'm1', 'generation', 0.1, 0.0002, 1e-8, 0.00002, 0.5), "
                  "('acme', 'm1', 'embeddings', 0, 0.5, 0, 0, 0)")
    build_caching(store, CachingSettings(lifetimes_s=[300]))

    def prefill(t: int, cached: int) -> float:
        return max(0.5, 0.1 + 0.0002 * t + 1e-8 * t * t + 0.00002 * cached)

    b_saved = prefill(6800, 0) - prefill(800, 6000)   # 1.9224 - max(0.5, 0.3864) = 1.4224
    e_saved = prefill(2600, 0) - prefill(600, 2000)   # 0.6876 - max(0.5, 0.2636) = 0.1876
    assert b_saved == pytest.approx(1.4224) and e_saved == pytest.approx(0.1876)
    assert opportunity(store, "repo-qa", 300)["ttft_saved_s_mean"] == pytest.approx(b_saved / 3)
    assert opportunity(store, "chat", 300)["ttft_saved_s_mean"] == pytest.approx(e_saved / 3)
    # the what-if's rate per newly cached token is the one measured: E saved e_saved over 2000 tokens
    assert opportunity(store, "chat", 300, model="m1")["ttft_s_per_token_saved"] == pytest.approx(e_saved / 2000)


def test_achieved_vs_possible_where_cache_reads_are_reported(store):
    fixture_store(store)
    build_caching(store, CachingSettings(lifetimes_s=[300]))
    agent = opportunity(store, "agent", 300)
    # reported: P1 0 of 3500, P2 0 of 3400, P3 3000 of 3600, P4 1000 of 2000
    assert agent["reads_reported_calls"] == 4
    assert agent["cache_read_tokens"] == 4000
    assert agent["achieved_share"] == pytest.approx(4000 / 12500)
    # possible, on the three calls that also have hashes: P2 and P3 could each read K (3000 tokens)
    assert agent["comparable_calls"] == 3
    assert agent["possible_share"] == pytest.approx(6000 / 10500)
    # with the cache: P1 writes K (3000) for P2; P2 reads 3000 instead of 0; P3 and P4 as billed
    u, r, w5 = per_token("input"), per_token("cache_read"), per_token("cache_write")
    now = 3500 * u + 3400 * u + (600 * u + 3000 * r) + (1000 * u + 1000 * r)
    with_cache = (500 * u + 3000 * w5) + (400 * u + 3000 * r) + (600 * u + 3000 * r) + (1000 * u + 1000 * r)
    assert agent["usd_now"] == now
    assert agent["usd_saved"] == now - with_cache == Decimal("0.00585")
    assert agent["ttft_saved_s_mean"] is None  # no latency fit for m3
    assert "32.0% of input where 57.1% was possible" in agent["note"]
    assert "no latency fit" in agent["note"]
    # money in the note to the cent, half up, as every surface writes it ($0.00585 -> $0.01)
    assert "a prompt cache would save $0.01 of $" in agent["note"]


def test_without_prices_or_fits_the_money_and_time_stay_unknown(store):
    insert_calls(store, json.loads(CALLS_FIXTURE.read_text()))
    build_caching(store)  # no price_table, call_costs, latency_fits or call_workload in this store
    chat = opportunity(store, "chat", 300)
    assert chat["reusable_tokens"] == 2000
    assert (chat["usd_now"], chat["usd_saved"], chat["ttft_saved_s_mean"]) == (None, None, None)
    assert "no dollar figure" in chat["note"] and "no TTFT figure" in chat["note"]
    # the build left no temporary relations behind
    temp = store.execute("SELECT table_name FROM duckdb_tables() WHERE temporary UNION ALL "
                         "SELECT view_name FROM duckdb_views() WHERE temporary AND view_name LIKE 'caching%'")
    assert [n for (n,) in temp.fetchall() if n.startswith("caching")] == []


def test_an_empty_store_builds_empty_tables(store):
    build_caching(store)
    assert store.execute("SELECT count(*) FROM caching_opportunity").fetchone() == (0,)
    assert published_lifetimes(store) == []


def test_rebuild_is_idempotent(store):
    fixture_store(store)
    build_caching(store)
    first = store.execute("SELECT * FROM caching_opportunity ORDER BY ALL").fetchall()
    build_caching(store)
    assert store.execute("SELECT * FROM caching_opportunity ORDER BY ALL").fetchall() == first


# --------------------------------------------------------------------------------------- what-if


def test_what_if_measured_returns_the_published_row(store):
    fixture_store(store)
    build_caching(store, CachingSettings(lifetimes_s=[300, 3600]))
    assert published_lifetimes(store) == [300, 3600]
    result = what_if(store, "repo-qa", None, 3600)
    assert result["measured"] is True
    assert result["usd_saved"] == Decimal("0.0144")
    assert result["hit_rate"] == pytest.approx(12000 / 25700)


def test_what_if_hit_rate_by_hand(store):
    fixture_store(store)
    build_caching(store, CachingSettings(lifetimes_s=[300]))
    u, r = per_token("input"), per_token("cache_read")
    # chat at 5 minutes: 4900 input tokens (E 2600, F 800, G 1500), no first writes measured (E reads C's S)
    result = what_if(store, "chat", 0.5, 300)
    assert result["usd_now"] == 4900 * u
    assert result["usd_with_cache"] == 2450 * u + 2450 * r
    assert result["usd_saved"] == 2450 * (u - r) == Decimal("0.006615")
    assert result["ttft_saved_s_mean"] == pytest.approx(2450 * (TTFT_UNCACHED - TTFT_CACHED) / 3)
    # at the measured share the what-if reproduces the measured saving
    share = opportunity(store, "chat", 300)["reuse_share"]
    assert what_if(store, "chat", share, 300)["usd_saved"] == pytest.approx(Decimal("0.0054"), abs=Decimal("1e-12"))
    # a lower hit rate than the provider already achieves costs money
    assert what_if(store, "agent", 0.0, 300)["usd_saved"] < 0


def test_what_if_rejects_an_unbuilt_lifetime_or_unknown_workload(store):
    fixture_store(store)
    build_caching(store, CachingSettings(lifetimes_s=[300]))
    with pytest.raises(PhaselensError, match="lifetime"):
        what_if(store, "chat", 0.5, 900)
    with pytest.raises(PhaselensError, match="no workload"):
        what_if(store, "nope", 0.5, 300)
    with pytest.raises(ValueError):
        what_if(store, "chat", 1.5, 300)


# -------------------------------------------------------------------------------------- settings


def test_settings_validate():
    assert CachingSettings(lifetimes_s=[0, 300]).lifetimes_s == [None, 300]
    assert CachingSettings().headline_lifetime_s == 300
    for bad in ({"lifetimes_s": [300, 300]}, {"lifetimes_s": [-1]}, {"lifetimes_s": []}, {"scope": "team"},
                {"min_block_tokens": -5}, {"lifetime": 300}):
        with pytest.raises(ValidationError):
            CachingSettings(**bad)
