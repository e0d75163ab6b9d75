"""Latency split (pipeline/latency.py): fitted latency models, estimated splits, profiles, golden traces.

Synthetic calls are drawn with KNOWN rates (TTFT = 0.05 s + 0.1 ms per input token, ITL 15 ms, bounded
±5% noise), so every expectation below comes from those rates, never from the code's own output. The
golden tests recompute their expectation with plain Python (csv/json modules) from the raw public files.
"""

from __future__ import annotations

import csv
import json
import statistics
from bisect import bisect_left
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pydantic import ValidationError

from phaselens.ingest.registry import by_name
from phaselens.models.latency import LatencyProfile, LatencySettings
from phaselens.models.pricebook import ModelPrice, PriceBook
from phaselens.pipeline.errors import ConfigError
from phaselens.pipeline.latency import build_timing
from phaselens.pipeline.load import ingest
from phaselens.pipeline.pricing import build_costs
from phaselens.pipeline.store import connect
from tests.conftest import FIXTURES, shared_data_dir

TTFT_INTERCEPT_S = 0.05
TTFT_S_PER_TOKEN = 1 / 10_000
ITL_S = 0.015
NOISE = 0.05  # each phase is multiplied by a uniform factor in [0.95, 1.05]
SPLIT_TOLERANCE = 0.10

DATA = shared_data_dir()
needs_data = pytest.mark.skipif(DATA is None, reason="shared real data (../shared/data or PHASELENS_SHARED) is absent")
PROFILE_FILTER = {"model": "llama2-70b", "hardware": "h100-80gb", "tensor_parallel": "8", "batch_size": "1"}


def insert_calls(con, rows: list[dict]) -> None:
    """Write call rows into raw_calls (absent columns stay NULL)."""
    base = {"source": "test", "operation": "chat", "status": "ok", "timing_source": "none"}
    keys = sorted({k for r in rows for k in r} | set(base))
    table = pa.Table.from_pylist([{k: r.get(k, base.get(k)) for k in keys} for r in rows])
    con.register("new_calls", table)
    con.execute("INSERT INTO raw_calls BY NAME SELECT * FROM new_calls")
    con.unregister("new_calls")


def synthetic(n: int, seed: int, measured_share: float, *, queued_share: float = 0.0, model: str = "gpt-4o",
              outputs: tuple[int, int] = (2, 600)) -> tuple[list[dict], dict[str, tuple[float, float]]]:
    """Calls with independent input and output sizes; returns the rows and each call's true (prefill, decode) in s."""
    rng = np.random.default_rng(seed)
    inputs = rng.integers(100, 8001, n)
    outs = rng.integers(outputs[0], outputs[1] + 1, n)
    ttft = (TTFT_INTERCEPT_S + TTFT_S_PER_TOKEN * inputs) * rng.uniform(1 - NOISE, 1 + NOISE, n)
    decode = ITL_S * (outs - 1) * rng.uniform(1 - NOISE, 1 + NOISE, n)
    measured = rng.random(n) < measured_share
    queued = measured & (rng.random(n) < queued_share)  # queueing outliers only where TTFT is measured
    ttft = ttft + np.where(queued, rng.uniform(1, 3, n), 0.0)
    rows, truth = [], {}
    for i in range(n):
        call_id = f"{model}-{seed}-{i}"
        row = {"call_id": call_id, "provider": "openai", "model": model, "uncached_input_tokens": int(inputs[i]),
               "output_tokens": int(outs[i]), "e2e_s": float(ttft[i] + decode[i])}
        if measured[i]:
            row.update(ttft_s=float(ttft[i]), prefill_s=float(ttft[i]), decode_s=float(decode[i]),
                       timing_source="measured")
        rows.append(row)
        truth[call_id] = (float(ttft[i]), float(decode[i]))
    return rows, truth


def fit_row(con, provider: str, model: str, kind: str = "generation") -> dict:
    cur = con.execute("SELECT * FROM latency_fits WHERE provider = ? AND model = ? AND kind = ?",
                      [provider, model, kind])
    names = [d[0] for d in cur.description]
    rows = cur.fetchall()
    assert len(rows) == 1
    return dict(zip(names, rows[0]))


def timing(con) -> dict[str, dict]:
    cur = con.execute("SELECT * FROM call_timing")
    names = [d[0] for d in cur.description]
    return {r[0]: dict(zip(names, r)) for r in cur.fetchall()}


def rel(got: float, want: float) -> float:
    return abs(got - want) / abs(want)


def assert_split_recovered(rows: list[dict], truth: dict, got: dict[str, dict]) -> None:
    """Each estimated call: prefill and decode within 10% of the truth, adding up to its e2e."""
    estimated = [r for r in rows if r.get("timing_source", "none") == "none"]
    assert estimated
    for r in estimated:
        t = got[r["call_id"]]
        true_prefill, true_decode = truth[r["call_id"]]
        assert t["timing_source"] == "estimated"
        assert rel(t["prefill_s"], true_prefill) <= SPLIT_TOLERANCE, (r, t, true_prefill)
        assert rel(t["decode_s"], true_decode) <= SPLIT_TOLERANCE, (r, t, true_decode)
        assert t["prefill_s"] + t["decode_s"] == pytest.approx(r["e2e_s"], abs=1e-9)
        assert t["ttft_s"] == t["prefill_s"]
        assert t["itl_s"] == pytest.approx(t["decode_s"] / (r["output_tokens"] - 1))


# ---------------------------------------------------------------- 1. fits on the data itself


def test_fit_on_measured_calls_recovers_rates_and_splits_the_rest(store):
    rows, truth = synthetic(3000, seed=1, measured_share=0.3, queued_share=0.04)
    # calls with tokens but no timing at all (request traces): both phases come from the model
    untimed = [{"call_id": f"untimed-{i}", "provider": "openai", "model": "gpt-4o", "uncached_input_tokens": u,
                "output_tokens": o} for i, (u, o) in enumerate([(200, 2), (1000, 50), (4000, 400), (7900, 600)])]
    insert_calls(store, rows + untimed)
    build_timing(store)

    fit = fit_row(store, "openai", "gpt-4o")
    measured = [r for r in rows if r.get("timing_source") == "measured"]
    assert fit["method"] == "ttft+decode"
    assert rel(fit["ttft_intercept_s"], TTFT_INTERCEPT_S) <= 0.10
    assert rel(fit["ttft_s_per_uncached_token"], TTFT_S_PER_TOKEN) <= 0.10
    assert rel(fit["decode_s_per_output_token"], ITL_S) <= 0.10
    assert abs(fit["decode_intercept_s"]) <= 0.1 * ITL_S
    assert fit["n_fit"] == len(measured)
    assert 0.1 * len(measured) <= fit["n_holdout"] <= 0.3 * len(measured)  # md5 buckets: about 20%
    # held-out error: ±5% noise gives ~2.5% MAPE; 4% queueing outliers add at most ~4 points to TTFT. Given
    # e2e, part of an outlier's queueing lands in decode, so the held-out split stays within the 10% tolerance.
    assert fit["holdout_mape_ttft"] <= 0.08 and fit["holdout_mape_decode"] <= 0.05
    assert fit["holdout_mape_ttft_given_e2e"] <= SPLIT_TOLERANCE
    assert fit["holdout_mape_decode_given_e2e"] <= SPLIT_TOLERANCE
    # R² is not robust: TTFT's spread from input sizes is var = (1e-4 s × 2280 tokens)² ≈ 0.05 s², the outliers
    # (4% × +U(1, 3) s) add ≈ 0.17 s², so R² ≈ 0.05 / 0.22 ≈ 0.24. Decode has no outliers: R² near 1.
    assert 0.1 <= fit["r2_ttft"] <= 0.4
    assert fit["r2_decode"] >= 0.99

    got = timing(store)
    assert len(got) == len(rows) + len(untimed)
    assert_split_recovered(rows, truth, got)
    for r in measured:  # measured calls are copied as they are
        t = got[r["call_id"]]
        assert (t["timing_source"], t["ttft_s"], t["prefill_s"], t["decode_s"]) == (
            "measured", r["ttft_s"], r["prefill_s"], r["decode_s"])
    for r in untimed:  # no e2e: the model's own prediction, against the noise-free rates
        t = got[r["call_id"]]
        assert t["timing_source"] == "estimated"
        want_prefill = TTFT_INTERCEPT_S + TTFT_S_PER_TOKEN * r["uncached_input_tokens"]
        assert rel(t["prefill_s"], want_prefill) <= SPLIT_TOLERANCE
        assert rel(t["decode_s"], ITL_S * (r["output_tokens"] - 1)) <= SPLIT_TOLERANCE
    assert fit["n_estimated"] == len(rows) - len(measured) + len(untimed)


def test_e2e_only_fit_recovers_split_when_input_and_output_vary_independently(store):
    rows, truth = synthetic(3000, seed=2, measured_share=0.0)
    insert_calls(store, rows)
    build_timing(store)

    fit = fit_row(store, "openai", "gpt-4o")
    assert fit["method"] == "e2e_only"
    assert "intercept is counted as prefill" in fit["note"]
    assert rel(fit["ttft_intercept_s"], TTFT_INTERCEPT_S) <= 0.10
    assert rel(fit["ttft_s_per_uncached_token"], TTFT_S_PER_TOKEN) <= 0.10
    assert rel(fit["decode_s_per_output_token"], ITL_S) <= 0.10
    assert fit["holdout_mape_ttft"] is None  # nothing measured TTFT to hold out
    assert fit["holdout_mape_e2e"] <= 0.05
    assert_split_recovered(rows, truth, timing(store))


def test_e2e_only_refuses_a_split_it_cannot_identify(store):
    rows, _ = synthetic(300, seed=3, measured_share=0.0, outputs=(100, 100))  # every call asks for 100 tokens
    insert_calls(store, rows)
    build_timing(store)
    fit = fit_row(store, "openai", "gpt-4o")
    assert fit["method"] == "none" and "not split" in fit["note"]
    assert {t["timing_source"] for t in timing(store).values()} == {"none"}


def test_embeddings_failures_and_unknown_models(store):
    rows, _ = synthetic(400, seed=4, measured_share=0.5)
    extra = [
        {"call_id": "embed", "provider": "openai", "model": "text-embedding-3-small", "operation": "embeddings",
         "uncached_input_tokens": 900, "output_tokens": 0, "e2e_s": 0.12},
        {"call_id": "failed", "provider": "openai", "model": "gpt-4o", "status": "error",
         "uncached_input_tokens": 900, "output_tokens": 10, "e2e_s": 30.0},
        {"call_id": "no-model", "provider": "openai", "uncached_input_tokens": 900, "output_tokens": 10, "e2e_s": 1.0},
        {"call_id": "no-tokens", "provider": "openai", "model": "gpt-4o", "e2e_s": 1.0},
        {"call_id": "one-token", "provider": "openai", "model": "gpt-4o", "uncached_input_tokens": 3000,
         "output_tokens": 1, "e2e_s": 0.4},
    ]
    insert_calls(store, rows + extra)
    build_timing(store)
    got = timing(store)
    assert (got["embed"]["prefill_s"], got["embed"]["decode_s"], got["embed"]["ttft_s"]) == (0.12, 0.0, None)
    assert got["embed"]["timing_source"] == "measured"  # the whole measured e2e is prefill, nothing estimated
    for call_id in ("failed", "no-model", "no-tokens"):
        assert got[call_id]["timing_source"] == "none" and got[call_id]["prefill_s"] is None
    assert (got["one-token"]["prefill_s"], got["one-token"]["decode_s"]) == (0.4, 0.0)  # no token after the first


def test_fits_are_deterministic_and_sampled_within_the_cap(store):
    rows, _ = synthetic(3000, seed=5, measured_share=1.0)
    insert_calls(store, rows)
    settings = LatencySettings(sample_cap=500, holdout_share=0.25)
    build_timing(store, settings)
    first = store.execute("SELECT * FROM latency_fits").fetchall()
    build_timing(store, settings)
    assert store.execute("SELECT * FROM latency_fits").fetchall() == first
    fit = fit_row(store, "openai", "gpt-4o")
    assert 350 <= fit["n_fit"] <= 650  # md5 buckets keep about 500 of 3000 calls
    assert 0.15 * fit["n_fit"] <= fit["n_holdout"] <= 0.35 * fit["n_fit"]
    assert rel(fit["decode_s_per_output_token"], ITL_S) <= 0.10


# two call ids whose md5 starts with the same 32 bits (6a46ce0e): the sample orders calls by those bits
HASH_TIE = ("tie-223878", "tie-237608")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fits_do_not_depend_on_the_order_calls_with_the_same_hash_come_in(seed):
    """Calls whose 32-bit sample hashes collide reach the fit in the same order whatever order the store holds them
    in, so a build run twice (whose parallel reads may order them differently) gives bit-identical fits."""
    rows, _ = synthetic(400, seed=seed, measured_share=0.5)
    rows[0]["call_id"], rows[1]["call_id"] = HASH_TIE
    fits = []
    for order in (rows, [rows[1], rows[0], *rows[2:]]):
        con = connect(":memory:")
        insert_calls(con, order)
        build_timing(con, LatencySettings(sample_cap=10_000))
        fits.append(con.execute("SELECT * FROM latency_fits ORDER BY ALL").fetchall())
        con.close()
    assert fits[0] == fits[1]


def test_runs_inside_the_callers_transaction(store):
    rows, _ = synthetic(200, seed=6, measured_share=0.5)
    insert_calls(store, rows)
    store.execute("BEGIN TRANSACTION")
    build_timing(store)
    assert store.execute("SELECT count(*) FROM call_timing").fetchone()[0] == len(rows)
    store.execute("ROLLBACK")  # the caller's rollback takes the stage's tables with it
    assert store.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name IN ('call_timing', 'latency_fits')"
                         ).fetchone()[0] == 0


def test_settings_are_validated():
    with pytest.raises(ValidationError):
        LatencySettings(holdout=0.2)  # unknown field
    with pytest.raises(ValidationError):
        LatencySettings(holdout_share=1.0)
    twice = {"provider": "vLLM", "model": "Llama-2-70B", "csv": "p.csv", "profile_model": "llama2-70b",
             "hardware": "h100-80gb", "tensor_parallel": 8}
    assert LatencyProfile(**twice).provider == "vllm"  # names normalised like the traces'
    with pytest.raises(ValidationError):
        LatencySettings(profiles=[twice, twice])


def test_profile_file_problems_name_the_fix(store):
    bad = FIXTURES / "latency" / "not_a_profile.csv"
    profile = LatencyProfile(provider="vllm", model="llama-2-70b", csv=bad, profile_model="llama2-70b",
                             hardware="h100-80gb", tensor_parallel=8)
    with pytest.raises(ConfigError, match="lacks columns prompt_time, token_time"):
        build_timing(store, LatencySettings(profiles=[profile]))
    with pytest.raises(ConfigError, match="cannot read"):
        build_timing(store, LatencySettings(profiles=[profile.model_copy(update={"csv": bad.with_name("absent.csv")})]))


# ---------------------------------------------------------------- 2. the Splitwise profile


def profile_rows(data: Path) -> list[dict]:
    """Splitwise rows of llama2-70b on h100-80gb, TP8, batch 1, read with the csv module."""
    with open(data / "splitwise_perf_model" / "perf_model.csv", newline="") as f:
        return [r for r in csv.DictReader(f) if all(r[k] == v for k, v in PROFILE_FILTER.items())]


def splitwise(data: Path, provider: str = "azure_trace", model: str = "unknown") -> LatencyProfile:
    return LatencyProfile(provider=provider, model=model, csv=data / "splitwise_perf_model" / "perf_model.csv",
                          profile_model="llama2-70b", hardware="h100-80gb", tensor_parallel=8, batch_size=1)


@needs_data
def test_splitwise_profile_matches_its_own_rows(store):
    build_timing(store, LatencySettings(profiles=[splitwise(DATA, "vllm", "llama-2-70b")]))
    fit = fit_row(store, "vllm", "llama-2-70b")
    assert fit["method"] == "profile" and fit["n_fit"] == 75

    def prompt_ms(size: float) -> float:
        s = (fit["ttft_intercept_s"] + fit["ttft_s_per_uncached_token"] * size
             + fit["ttft_s_per_uncached_token_sq"] * size**2)
        return 1000 * max(s, fit["ttft_floor_s"] or 0.0)

    rows = profile_rows(DATA)
    prompt_err = [rel(prompt_ms(float(r["prompt_size"])), float(r["prompt_time"])) for r in rows]
    token_err = [rel(1000 * fit["decode_s_per_output_token"], float(r["token_time"])) for r in rows]
    # Stated bound (docs/latency.md): prompt_time within 6% on average and 30% at worst (the repeats of one
    # size alone spread 322-418 ms at 4096 tokens); token_time within 3% on average and 10% at worst.
    assert statistics.mean(prompt_err) <= 0.06 and max(prompt_err) <= 0.30
    assert statistics.mean(token_err) <= 0.03 and max(token_err) <= 0.10
    assert fit["profile_mean_rel_err_prompt"] == pytest.approx(statistics.mean(prompt_err))
    assert fit["profile_max_rel_err_prompt"] == pytest.approx(max(prompt_err))
    assert fit["profile_max_rel_err_token"] == pytest.approx(max(token_err))
    for size in sorted({int(r["prompt_size"]) for r in rows}):  # each size's median within 25%
        median = statistics.median(float(r["prompt_time"]) for r in rows if int(r["prompt_size"]) == size)
        assert rel(prompt_ms(size), median) <= 0.25, size


# ---------------------------------------------------------------- 3. golden: Azure traces timed by the profile


def independent_split(data: Path, trace: Path) -> tuple[float, Decimal]:
    """Decode share of time and input share of cost at $1/M in, $4/M out, from the raw rows alone."""
    rows = profile_rows(data)
    by_size: dict[int, list[float]] = {}
    for r in rows:
        by_size.setdefault(int(r["prompt_size"]), []).append(float(r["prompt_time"]) / 1000)
    sizes = sorted(by_size)
    times = [statistics.mean(by_size[s]) for s in sizes]
    token_s = statistics.mean(float(r["token_time"]) for r in rows) / 1000

    def prefill_s(ctx: int) -> float:  # piecewise-linear through the mean of each size, extended at the ends
        if ctx <= sizes[0]:
            return times[0]
        i = min(max(bisect_left(sizes, ctx), 1), len(sizes) - 1)
        return times[i - 1] + (times[i] - times[i - 1]) * (ctx - sizes[i - 1]) / (sizes[i] - sizes[i - 1])

    prefill = decode = 0.0
    tokens_in = tokens_out = 0
    with open(trace, newline="") as f:
        for r in csv.DictReader(f):
            ctx, gen = int(r["ContextTokens"]), int(r["GeneratedTokens"])
            prefill += prefill_s(ctx)
            decode += max(gen - 1, 0) * token_s
            tokens_in, tokens_out = tokens_in + ctx, tokens_out + gen
    return decode / (prefill + decode), Decimal(tokens_in) / (Decimal(tokens_in) + 4 * Decimal(tokens_out))


def load_azure(con, trace: Path) -> None:
    """Through the `azure_trace` adapter when it exists, else straight from the CSV into raw_calls."""
    try:
        by_name("azure_trace")
    except KeyError:
        with open(trace, newline="") as f:
            insert_calls(con, [{"call_id": f"azure:{i}", "source": "azure_trace", "provider": "azure_trace",
                                "model": "unknown", "uncached_input_tokens": int(r["ContextTokens"]),
                                "output_tokens": int(r["GeneratedTokens"])} for i, r in enumerate(csv.DictReader(f))])
        return
    result = ingest(con, [trace])
    assert not result.failed and result.files[0].adapter == "azure_trace"


@needs_data
@pytest.mark.parametrize(
    ("trace", "decode_band", "input_band"),
    [("code", (0.75, 0.85), (0.93, 0.96)), ("conv", (0.95, 1.0), (0.50, 0.65))],
)
def test_azure_traces_timed_by_splitwise_are_decode_heavy_and_priced_prefill_heavy(
    store, trace, decode_band, input_band
):
    path = DATA / "azure_llm_inference_2023" / f"AzureLLMInferenceTrace_{trace}.csv"
    want_decode, want_input = independent_split(DATA, path)
    assert decode_band[0] <= want_decode <= decode_band[1]  # "about 80% of time in decode" for code
    assert input_band[0] <= want_input <= input_band[1]  # "~95% of cost on input" for code

    load_azure(store, path)
    build_timing(store, LatencySettings(profiles=[splitwise(DATA)]))
    n, estimated, share = store.execute(
        "SELECT count(*), count(*) FILTER (WHERE timing_source = 'estimated'), "
        "sum(decode_s) / sum(prefill_s + decode_s) FROM call_timing").fetchone()
    assert estimated == n > 0
    # The fitted curve stays within ~12% of the interpolated profile in aggregate prefill; at a decode
    # share near 0.8 that moves the share by at most 0.8 × 0.2 × 0.12 ≈ 0.02.
    assert abs(share - want_decode) <= 0.02

    build_costs(store, PriceBook(prices=[ModelPrice(provider="azure_trace", model="unknown", input=1, output=4)]))
    priced, input_usd, total_usd = store.execute(
        "SELECT count(*) FILTER (WHERE priced), sum(input_cost_usd), sum(cost_usd) FROM call_costs").fetchone()
    assert priced == n
    assert input_usd / total_usd == pytest.approx(want_input, abs=Decimal("1e-12"))


# ---------------------------------------------------------------- real measured calls: LLMPerf


@needs_data
def test_llmperf_fixed_prompt_gives_constant_ttft_and_the_median_itl(store):
    path = DATA / "llmperf_leaderboard" / "individual" / "fireworks_70b.json"
    ok = [r for r in json.loads(path.read_text()) if r.get("error_code") is None]
    itl = statistics.median((r["end_to_end_latency_s"] - r["ttft_s"]) / (r["number_output_tokens"] - 1) for r in ok)
    ttft = statistics.median(r["ttft_s"] for r in ok)

    assert not ingest(store, [path]).failed
    build_timing(store)
    fit = fit_row(store, "fireworks", "llama-2-70b-chat")
    assert fit["method"] == "ttft+decode" and fit["n_fit"] == len(ok)
    assert fit["ttft_s_per_uncached_token"] is None and "no trend with input tokens" in fit["note"]
    assert rel(fit["decode_s_per_output_token"], itl) <= 0.05
    assert rel(fit["ttft_intercept_s"], ttft) <= 0.10
