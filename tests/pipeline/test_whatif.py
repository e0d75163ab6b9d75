"""Routing what-if (pipeline/whatif.py): predictions against known rates, against real held-out calls, and the
sample day's answer through the CLI.

The synthetic calls are drawn with KNOWN per-model rates, and the truth for a moved workload is drawn again from
the target's rates, so the expectations come from those rates, never from the code under test. Money is checked
against tokens x the price book's prices, computed here with Decimal.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal

import numpy as np
import pytest
from typer.testing import CliRunner

from phaselens.cli import app
from phaselens.models.config import Config
from phaselens.models.pricebook import ModelPrice
from phaselens.models.whatif import WhatIfSettings
from phaselens.pipeline.build import build
from phaselens.pipeline.errors import PhaselensError
from phaselens.pipeline.load import ingest
from phaselens.pipeline.store import connect
from phaselens.pipeline.whatif import Target, weighted_quantile, whatif
from tests.conftest import SAMPLE_LOGS, shared_data_dir
from tests.pipeline.test_latency import insert_calls

# model -> (TTFT intercept s, TTFT s per uncached input token, ITL s per output token after the first)
RATES = {"gpt-4o-mini": (0.08, 0.5e-4, 0.012), "gpt-4o": (0.15, 1.2e-4, 0.028)}
NOISE = 0.05
PRICES = {  # USD per million tokens, from the price book below (not genai-prices), so the expectation is ours
    "gpt-4o-mini": {"input": Decimal("0.15"), "cache_read": Decimal("0.075"), "output": Decimal("0.6")},
    "gpt-4o": {"input": Decimal("2.5"), "cache_read": Decimal("1.25"), "output": Decimal("10")},
}
DAY = datetime(2026, 11, 16)


def draw(model: str, inputs: np.ndarray, cached: np.ndarray, outputs: np.ndarray, rng) -> tuple[np.ndarray, np.ndarray]:
    a, b, itl = RATES[model]
    n = len(inputs)
    ttft = (a + b * inputs) * rng.uniform(1 - NOISE, 1 + NOISE, n)
    decode = itl * (outputs - 1) * rng.uniform(1 - NOISE, 1 + NOISE, n)
    return ttft, decode


def calls(model: str, workload: str, n: int, seed: int, inputs=(500, 6000), outputs=(20, 400)) -> tuple[list[dict], dict]:
    rng = np.random.default_rng(seed)
    inp = rng.integers(inputs[0], inputs[1] + 1, n)
    cached = (inp * rng.uniform(0, 0.5, n)).astype(int)
    out = rng.integers(outputs[0], outputs[1] + 1, n)
    ttft, decode = draw(model, inp - cached, cached, out, rng)
    rows = []
    for i in range(n):
        rows.append({
            "call_id": f"{workload}-{model}-{seed}-{i}", "provider": "openai", "model": model, "model_raw": model,
            "workload_hint": workload, "started_at": DAY + timedelta(seconds=int(i * 86_000 / n)),
            "uncached_input_tokens": int(inp[i] - cached[i]), "cache_read_tokens": int(cached[i]),
            "output_tokens": int(out[i]), "e2e_s": float(ttft[i] + decode[i]), "ttft_s": float(ttft[i]),
            "prefill_s": float(ttft[i]), "decode_s": float(decode[i]), "timing_source": "measured",
            "streaming": True,
        })
    return rows, {"inputs": inp, "cached": cached, "outputs": out}


def config() -> Config:
    return Config(prices=[
        ModelPrice(provider="openai", model=m, input=p["input"], cache_read=p["cache_read"], output=p["output"])
        for m, p in PRICES.items()
    ])


@pytest.fixture
def synthetic_store(tmp_path):
    con = connect(tmp_path / "whatif.duckdb")
    moved, shape = calls("gpt-4o-mini", "summarise", 1500, seed=1)
    other, _ = calls("gpt-4o", "chat", 1500, seed=2)  # the target serves another workload over the same range
    insert_calls(con, moved + other)
    build(con, config())
    yield con, moved, shape
    con.close()


def rel(got: float, want: float) -> float:
    return abs(got - want) / abs(want)


def test_moving_a_workload_predicts_the_targets_percentiles_and_exact_cost(synthetic_store):
    con, moved, shape = synthetic_store
    result = whatif(con, "summarise", [Target.parse("openai/gpt-4o")], pricebook=config().pricebook,
                    slos=[("summarise", "ttft_p95_s", 0.5), ("summarise", "itl_p95_s", 0.030)])
    t = result["targets"][0]
    # Truth: the same calls timed by the target's own rates (a fresh draw of its noise).
    ttft, decode = draw("gpt-4o", shape["inputs"] - shape["cached"], shape["cached"], shape["outputs"],
                        np.random.default_rng(99))
    itl = decode / (shape["outputs"] - 1)
    for name, values in (("ttft", ttft), ("itl", itl), ("e2e", ttft + decode)):
        for p in (50, 95):
            want = float(np.quantile(values, p / 100))
            got = t["predicted"][f"{name}_p{p}_s"]
            assert rel(got, want) <= 0.05, (name, p, got, want)
    # Money: tokens x the target's prices, exact to the 12th decimal; gpt-4o offers caching, so reads carry over.
    per = {k: v / Decimal(1_000_000) for k, v in PRICES["gpt-4o"].items()}
    want_cost = sum(
        (Decimal(r["uncached_input_tokens"]) * per["input"]).quantize(Decimal("1e-12"))
        + (Decimal(r["cache_read_tokens"]) * per["cache_read"]).quantize(Decimal("1e-12"))
        + (Decimal(r["output_tokens"]) * per["output"]).quantize(Decimal("1e-12"))
        for r in moved
    )
    assert t["predicted"]["cost_usd"] == want_cost
    assert "carry over" in t["caching"]
    # Goodput: share of the truth's calls meeting both SLOs, within a few points.
    truth_good = float(np.mean((ttft <= 0.5) & (itl <= 0.030)))
    assert abs(t["predicted"]["goodput_share"] - truth_good) <= 0.03
    assert t["predicted"]["usd_per_good_call"] == (want_cost / Decimal(repr(1500 * t["predicted"]["goodput_share"]))
                                                  ).quantize(Decimal("1e-12"))
    # Today's figures are the workload's own, and the delta is the difference.
    today = result["today"]
    assert today["ttft_p50_s"] == pytest.approx(float(np.quantile([r["ttft_s"] for r in moved], 0.5)), rel=1e-12)
    assert t["delta"]["cost_usd"] == t["predicted"]["cost_usd"] - today["cost_usd"]
    assert t["basis"]["latency_model"] == "ttft+decode" and t["basis"]["fit_calls"] > 1000
    assert not any("extrapolation" in w for w in t["warnings"])


def test_outside_the_fitted_range_is_flagged_and_tokenizer_ratio_stated(tmp_path):
    con = connect(tmp_path / "w.duckdb")
    moved, _ = calls("gpt-4o-mini", "agent", 300, seed=3, inputs=(40_000, 90_000))
    other, _ = calls("gpt-4o", "chat", 300, seed=4, inputs=(500, 6000))
    insert_calls(con, moved + other)
    build(con, config())
    settings = WhatIfSettings(token_ratios={"anthropic": 1.2}, families={})
    r = whatif(con, "agent", [Target.parse("openai/gpt-4o")], settings=settings, pricebook=config().pricebook)
    t = r["targets"][0]
    assert any(w.startswith("extrapolation: the workload's input tokens") for w in t["warnings"])
    assert t["token_ratio"] == {"target_family": "openai", "source_families": ["openai"],
                                "ratios": {"openai": 1.0}, "applied": 1.0}
    # The same workload moved to a family with another tokenizer has its tokens scaled, and says so.
    con.execute("UPDATE whatif_calls SET model = 'claude-sonnet-4' WHERE workload = 'agent'")
    r2 = whatif(con, "agent", [Target.parse("openai/gpt-4o")], settings=settings, pricebook=config().pricebook)
    t2 = r2["targets"][0]
    assert t2["token_ratio"]["applied"] == pytest.approx(1 / 1.2)
    assert any("tokenizer ratio" in w for w in t2["warnings"])
    assert t2["predicted"]["cost_usd"] < t["predicted"]["cost_usd"]
    con.close()


def test_a_target_without_caching_or_latency_model_says_what_it_assumed(synthetic_store):
    con, moved, _ = synthetic_store
    r = whatif(con, "summarise", [Target.parse("openai/gpt-3.5-turbo-0125"), Target.parse("mistral_ai/unknown-x")])
    no_cache, unknown = r["targets"]
    assert "no prompt-caching price" in no_cache["caching"]
    assert no_cache["cost_by_bucket_usd"]["cache_read"] == 0
    assert any("no latency model" in w for w in no_cache["warnings"])
    assert no_cache["predicted"]["ttft_p50_s"] is None and no_cache["predicted"]["cost_usd"] > 0
    assert unknown["predicted"]["cost_usd"] is None
    assert any(w.startswith("cost not predicted") for w in unknown["warnings"])
    with pytest.raises(PhaselensError, match="no calls of workload 'nope'"):
        whatif(con, "nope", [Target.parse("openai/gpt-4o")])
    with pytest.raises(PhaselensError, match="PROVIDER/MODEL"):
        Target.parse("gpt-4o")


def test_sampled_days_are_scaled_to_their_call_count(synthetic_store):
    con, moved, _ = synthetic_store
    full = whatif(con, "summarise", [Target.parse("openai/gpt-4o")], pricebook=config().pricebook)
    build(con, config().model_copy(update={"whatif": WhatIfSettings(sample_calls_per_day=500)}))
    sampled = whatif(con, "summarise", [Target.parse("openai/gpt-4o")], pricebook=config().pricebook)
    assert sampled["replayed_calls"] == 500 and sampled["calls"] == full["calls"] == 1500
    f, s = full["targets"][0]["predicted"], sampled["targets"][0]["predicted"]
    assert rel(float(s["cost_usd"]), float(f["cost_usd"])) < 0.05
    assert rel(s["ttft_p95_s"], f["ttft_p95_s"]) < 0.05


def test_weighted_quantile_matches_duckdb_with_equal_weights():
    import duckdb

    x = np.random.default_rng(5).lognormal(size=501)
    want = duckdb.connect().execute("SELECT quantile_cont(v, 0.95) FROM (SELECT unnest(?) AS v)", [x.tolist()]).fetchone()[0]
    assert weighted_quantile(x, np.ones_like(x), 0.95) == pytest.approx(want, rel=1e-12)
    # Doubling every weight of one half moves the median into it.
    w = np.where(x < np.median(x), 3.0, 1.0)
    assert weighted_quantile(x, w, 0.5) < float(np.median(x))


DATA = shared_data_dir()
LLMPERF = DATA / "llmperf_leaderboard" / "individual" if DATA else None


@pytest.mark.skipif(DATA is None, reason="shared real data (../shared/data or PHASELENS_SHARED) is absent")
@pytest.mark.parametrize("source,target", [("anyscale", "fireworks"), ("fireworks", "together"),
                                           ("together", "anyscale")])
def test_held_out_real_calls_of_the_target_match_its_prediction(tmp_path, source, target):
    """LLMPerf runs of Llama-2-70B on three providers serve one shape. Half of the target's calls are renamed away
    before the build, so its latency model never sees them; the prediction for the source's workload on the target
    must match those held-out calls' median TTFT and ITL within 15%."""
    con = connect(tmp_path / "lp.duckdb")
    ingest(con, [str(LLMPERF / f"{source}_70b.json"), str(LLMPERF / f"{target}_70b.json")])
    con.execute("UPDATE raw_calls SET model = 'held-out' WHERE provider = ? AND hash(call_id) % 2 = 0", [target])
    build(con, Config())
    held = con.execute(
        "SELECT median(ttft_s), median(itl_s) FROM requests WHERE provider = ? AND model = 'held-out' AND status = 'ok'",
        [target]).fetchone()
    r = whatif(con, f"{source}/llama-2-70b-chat", [Target(target, "llama-2-70b-chat")])
    p = r["targets"][0]["predicted"]
    assert rel(p["ttft_p50_s"], held[0]) <= 0.15, (p["ttft_p50_s"], held[0])
    assert rel(p["itl_p50_s"], held[1]) <= 0.15, (p["itl_p50_s"], held[1])
    con.close()


def test_sample_day_cli_answers_with_basis_goodput_and_delta(demo_store):
    args = ["whatif", "tab_completion", "--to", "azure.ai.openai/gpt-4.1-mini", "--to", "openai/gpt-4o",
            "--format", "json", "--db", str(demo_store), "--config", str(SAMPLE_LOGS / "phaselens.toml")]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    r = json.loads(out.output)
    assert [t["target"] for t in r["targets"]] == ["azure.ai.openai/gpt-4.1-mini", "openai/gpt-4o"]
    assert r["slos"] == [{"metric": "ttft_p95_s", "max_s": 0.5}]
    for t in r["targets"]:
        p = t["predicted"]
        for k in ("ttft_p50_s", "ttft_p95_s", "itl_p50_s", "itl_p95_s", "cost_per_day_usd", "goodput_share"):
            assert p[k] is not None, k
        assert 0 < p["ttft_p50_s"] < p["ttft_p95_s"] and 0 < p["itl_p50_s"] <= p["itl_p95_s"]
        assert 0 <= p["goodput_share"] <= 1
        assert t["basis"]["latency_model"] and t["basis"]["fit_calls"] > 0
        assert set(t["delta"]) == set(p) and isinstance(t["warnings"], list)
        assert t["token_ratio"]["applied"] == 1.0
    # tab completion runs on a GPU-hour deployment: today's cost is its share of the GPU-hours.
    assert Decimal(r["today"]["cost_usd"]) > 0 and r["today"]["models"] == ["vllm/qwen2.5-coder-7b"]
