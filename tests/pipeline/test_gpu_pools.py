"""GPU-hour cost of disaggregated calls, by pool (pipeline/sql/gpu_costs.sql, docs/pricebook.md#disaggregated-pools).

The calls are ingested from vLLM `llm_request` spans of a prefill worker and a decode worker (the engine fixture
of tests/ingest/test_otlp_engines.py), so the pools come from the workers' `service.name` as ingest keeps them.
Expected dollars are computed here by hand from the price book and the phase times the spans state.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from phaselens.models.config import Config
from phaselens.pipeline.build import build
from tests.ingest.test_otlp_engines import MODEL, batch, disagg_lines, vllm_llm_request

PICO = Decimal("1e-12")

# prefill pool: 2 GPUs at $3.00/h; decode pool: 4 GPUs at $2.00/h; a plain (one-process) deployment: 1 at $2.49
PREFILL = dict(name="qwen-prefill", provider="vllm", models=[MODEL], gpu_type="H100-80GB", gpus=2,
               usd_per_gpu_hour="3.00", pool="vllm-prefill")
DECODE = dict(name="qwen-decode", provider="vllm", models=[MODEL], gpu_type="L40S-48GB", gpus=4,
              usd_per_gpu_hour="2.00", pool="vllm-decode")
MONO = dict(name="qwen-mono", provider="vllm", models=[MODEL], gpu_type="H100-80GB", gpus=1,
            usd_per_gpu_hour="2.49")

# the two disaggregated requests of disagg_lines(): (prefill_s on the prefill worker, decode_s on the decode worker)
A = (Fraction("0.310"), Fraction("1.8"))
B = (Fraction("0.120"), Fraction("0.54"))
SOLO = (Fraction("0.200"), Fraction("0.9"))  # a request served by one worker, no disaggregation


def solo_lines() -> str:
    return batch("vllm-solo", "vllm.llm_engine", [vllm_llm_request(
        "s0", "s0", 2000, request_id="chatcmpl-solo-0000-2b3c-4d5e-8f90-123456789abc", prompt=800, out=100,
        cached=0, queue_ms=2, prefill_ms=200, decode_ms=900)])


@pytest.fixture
def built(store, load, tmp_path):
    def _build(*deployments):
        p = tmp_path / "engines.jsonl"
        p.write_text(disagg_lines() + solo_lines())
        if not store.execute("SELECT count(*) FROM raw_calls").fetchone()[0]:
            load(p)
        build(store, Config(deployments=list(deployments)), full=True)  # runs the audits (conservation)
        cur = store.execute("SELECT c.*, r.attributes_json FROM call_costs c JOIN raw_calls r USING (call_id) "
                            "ORDER BY r.started_at")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
        a, solo, b = rows  # started at 0 ms, 2,000 ms, 5,000 ms
        return a, b, solo
    return _build


def hours(store) -> dict[str, tuple]:
    return {r[0]: r[1:] for r in store.execute(
        "SELECT deployment, count(*), sum(calls), sum(cost_usd), sum(allocated_usd), sum(idle_usd), sum(gpu_s) "
        "FROM deployment_costs GROUP BY deployment").fetchall()}


def share(hour_usd: Decimal, seconds: Fraction, total: Fraction) -> Fraction:
    return Fraction(hour_usd) * seconds / total


def close(got: Decimal, want: Fraction) -> bool:
    """Equal to the picodollar (the largest-remainder split rounds each share to a whole picodollar)."""
    return abs(Fraction(got) - want) <= Fraction(PICO)


def test_each_phase_is_charged_to_its_pool(built, store):
    a, b, solo = built(MONO, PREFILL, DECODE)
    prefill_hour, decode_hour = Decimal("6.00"), Decimal("8.00")
    prefill_total, decode_total = A[0] + B[0], A[1] + B[1]
    for c, (pre_s, dec_s) in ((a, A), (b, B)):
        assert (c["prefill_deployment"], c["decode_deployment"]) == ("qwen-prefill", "qwen-decode")
        assert c["deployment"] is None  # split over two deployments: each phase names its own
        assert c["priced"] and c["price_source"] == "gpu_hours"
        assert close(c["uncached_input_cost_usd"], share(prefill_hour, pre_s, prefill_total))
        assert close(c["output_cost_usd"], share(decode_hour, dec_s, decode_total))
        assert c["cache_read_cost_usd"] == 0 and c["cache_write_cost_usd"] == 0
    # a prefill second costs 6 / 0.43 = $13.95 in the prefill pool, a decode second 8 / 2.34 = $3.42 in the decode pool
    assert a["uncached_input_cost_usd"] / Decimal("0.310") > 4 * (a["output_cost_usd"] / Decimal("1.8"))
    # each pool's hour is fully allocated to the phases spent in it, to the picodollar
    h = hours(store)
    assert h["qwen-prefill"] == (1, 2, prefill_hour, prefill_hour, 0, pytest.approx(0.430))
    assert h["qwen-decode"] == (1, 2, decode_hour, decode_hour, 0, pytest.approx(2.34))
    assert a["uncached_input_cost_usd"] + b["uncached_input_cost_usd"] == prefill_hour
    assert a["output_cost_usd"] + b["output_cost_usd"] == decode_hour
    # the one-worker call stays on the deployment its model matches, alone in that deployment's hour
    assert (solo["deployment"], solo["prefill_deployment"], solo["decode_deployment"]) == ("qwen-mono",) * 3
    assert solo["cost_usd"] == Decimal("2.49")
    assert h["qwen-mono"] == (1, 1, Decimal("2.49"), Decimal("2.49"), 0, pytest.approx(1.1))


def test_a_call_in_one_deployment_is_unchanged(built, store):
    """Without pool deployments every call is priced as before: both phases on the deployment its model matches."""
    a_pools, b_pools, solo_pools = built(MONO, PREFILL, DECODE)
    a, b, solo = built(MONO)
    total = A[0] + A[1] + B[0] + B[1] + SOLO[0] + SOLO[1]
    for c, (pre_s, dec_s) in ((a, A), (b, B), (solo, SOLO)):
        assert (c["deployment"], c["prefill_deployment"], c["decode_deployment"]) == ("qwen-mono",) * 3
        assert close(c["uncached_input_cost_usd"], share(Decimal("2.49"), pre_s, total))
        assert close(c["output_cost_usd"], share(Decimal("2.49"), dec_s, total))
    assert a["cost_usd"] + b["cost_usd"] + solo["cost_usd"] == Decimal("2.49")
    # pool deployments that match none of a call's pools leave it exactly as it was
    solo_only = built(dict(MONO), dict(PREFILL, pool="other-prefill"), dict(DECODE, pool="other-decode"))
    assert [c["cost_usd"] for c in solo_only] == [a["cost_usd"], b["cost_usd"], solo["cost_usd"]]
    # ... and those deployments, serving no phase, have no traffic and so no hours of their own
    assert set(hours(store)) == {"qwen-mono"}


def test_a_phase_whose_pool_has_no_deployment_stays_with_the_model_deployment(built, store):
    a, b, solo = built(MONO, DECODE)
    assert (a["prefill_deployment"], a["decode_deployment"]) == ("qwen-mono", "qwen-decode")
    # the mono hour: both prefills and the solo call's whole time; the decode pool: the two decodes
    mono_total = A[0] + B[0] + SOLO[0] + SOLO[1]
    assert close(a["uncached_input_cost_usd"], share(Decimal("2.49"), A[0], mono_total))
    assert close(a["output_cost_usd"], share(Decimal("8.00"), A[1], A[1] + B[1]))
    assert close(solo["cost_usd"], share(Decimal("2.49"), SOLO[0] + SOLO[1], mono_total))
    h = hours(store)
    assert h["qwen-mono"][2:5] == (Decimal("2.49"), Decimal("2.49"), 0)
    assert h["qwen-decode"][2:5] == (Decimal("8.00"), Decimal("8.00"), 0)


def test_keep_policy_counts_each_pool_busy_only_while_its_phase_ran(built, store):
    """idle = keep: the prefill pool is busy for the prefill seconds (from the call's start), the decode pool for
    the decode seconds (up to its end); the rest of each hour stays idle."""
    a, b, _ = built(MONO, dict(PREFILL, idle="keep"), dict(DECODE, idle="keep"))
    busy = dict(store.execute("SELECT deployment, busy_s FROM deployment_costs").fetchall())
    assert busy["qwen-prefill"] == pytest.approx(0.430)  # the two prefills do not overlap
    assert busy["qwen-decode"] == pytest.approx(2.34)
    h = hours(store)
    alloc = Fraction(6) * Fraction("0.430") / 3600
    assert close(h["qwen-prefill"][3], alloc)
    assert h["qwen-prefill"][3] + h["qwen-prefill"][4] == Decimal("6.00")
    assert a["uncached_input_cost_usd"] + b["uncached_input_cost_usd"] == h["qwen-prefill"][3]
