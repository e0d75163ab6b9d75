"""Ingest each recorded fixture with phaselens and compare the stored calls with the fake servers' truth.

Used by test_conformance.py and by matrix.py (the docs table). Calls are matched to truth by time: the
driver makes one call at a time, so a stored call belongs to the truth call whose interval it overlaps most.
"""

from __future__ import annotations

import functools
import gzip
import json
import shutil
import tempfile
from decimal import Decimal
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
CONFIG = HERE / "phaselens.toml"
CHECKS = ["found", "once", "tokens", "ttft", "e2e", "streaming", "dominant_time", "dominant_money"]


def entries(all_recorded: bool = False) -> list[str]:
    """Fixtures with spans to check (all_recorded: also those whose package could not run or wrote none)."""
    if not FIXTURES.is_dir():
        return []
    names = sorted(p.name for p in FIXTURES.iterdir() if (p / "run.json").exists())
    if all_recorded:
        return names
    return [n for n in names if run_info(n).get("status") == "recorded" and run_info(n).get("otlp_lines", 0) > 0]


def run_info(entry: str) -> dict:
    return json.loads((FIXTURES / entry / "run.json").read_text())


def truth_of(entry: str) -> list[dict]:
    p = FIXTURES / entry / "truth.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []


@functools.lru_cache(maxsize=None)
def stored_calls(entry: str) -> tuple[list[dict], list[dict]]:
    """(calls as phaselens stores them in `requests`, `workloads` rows) for one fixture."""
    from phaselens.models.config import load_config
    from phaselens.pipeline.build import build
    from phaselens.pipeline.load import ingest
    from phaselens.pipeline.store import connect

    tmp = Path(tempfile.mkdtemp(prefix="phaselens-conf-"))
    try:
        spans = tmp / f"{entry}.jsonl"
        with gzip.open(FIXTURES / entry / "spans.jsonl.gz", "rb") as f:
            spans.write_bytes(f.read())
        con = connect(tmp / "store.duckdb")
        try:
            ingest(con, [str(spans)])
            build(con, load_config(CONFIG))
            cur = con.execute("SELECT * FROM requests ORDER BY started_at")
            cols = [d[0] for d in cur.description]
            calls = [dict(zip(cols, r)) for r in cur.fetchall()]
            cur = con.execute("SELECT workload, dominant_latency_phase, dominant_cost_phase FROM workloads")
            cols = [d[0] for d in cur.description]
            wl = [dict(zip(cols, r)) for r in cur.fetchall()]
            # unit prices per model, to price the truth the same way
            cur = con.execute("""SELECT model,
                   max(uncached_input_cost_usd / nullif(uncached_input_tokens, 0)) AS p_in,
                   max(cache_read_cost_usd / nullif(cache_read_tokens, 0)) AS p_read,
                   max(cache_write_cost_usd / nullif(cache_write_tokens, 0)) AS p_write,
                   max(output_cost_usd / nullif(output_tokens, 0)) AS p_out
                 FROM requests GROUP BY model""")
            prices = {r[0]: r[1:] for r in cur.fetchall()}
        finally:
            con.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for c in calls:
        c["_prices"] = prices.get(c["model"])
    return calls, wl


def _ts_ns(ts) -> int:
    from datetime import timezone

    return int(ts.replace(tzinfo=timezone.utc).timestamp() * 1_000_000) * 1000


def match(entry: str) -> list[tuple[dict, list[dict]]]:
    calls, _ = stored_calls(entry)
    truth = truth_of(entry)
    out = [(t, []) for t in truth]
    for c in calls:
        if c["started_at"] is None or c["ended_at"] is None:
            continue
        s, e = _ts_ns(c["started_at"]), _ts_ns(c["ended_at"])
        best, best_ov = None, 0
        for i, t in enumerate(truth):
            ov = min(e, t["end_ns"]) - max(s, t["start_ns"])
            if ov > best_ov:
                best, best_ov = i, ov
        if best is not None:
            out[best][1].append(c)
    return out


TTFT_KEYS = ("gen_ai.response.time_to_first_chunk", "gen_ai.server.time_to_first_token",
             "gen_ai.latency.time_to_first_token", "gen_ai.client.operation.time_to_first_chunk")


def span_ttft(c: dict) -> float | None:
    """The TTFT the span itself records (seconds), if the stored attributes keep one."""
    try:
        attrs = json.loads(c.get("attributes_json") or "{}")
    except ValueError:
        return None
    for k in TTFT_KEYS:
        v = attrs.get(k)
        if isinstance(v, (int, float, str)):
            try:
                return float(v)
            except ValueError:
                pass
    return None


def truth_ttft_s(t: dict) -> float:
    """Server-side TTFT; a non-streamed call's first token is when the timing model computed it."""
    if t["streamed"] or "ready_ns" in t:
        return (t["first_token_ns"] - t["start_ns"]) / 1e9
    from .fake_servers import _ttft_s

    return _ttft_s(t["uncached_input_tokens"] + t["cache_write_tokens"], t["cache_read_tokens"])


def _dominance(truth: list[dict], prices_by_workload: dict) -> dict[str, tuple[str, str | None]]:
    """Truth's dominant phase per workload, as workloads.sql defines it: prefill time = sum of TTFT,
    decode time = sum of (e2e - TTFT); prefill money = input-side cost at the store's unit prices."""
    out = {}
    for w in sorted({t["workload"] for t in truth}):
        ts = [t for t in truth if t["workload"] == w]
        pre = sum(truth_ttft_s(t) for t in ts)
        dec = sum((t["end_ns"] - t["start_ns"]) / 1e9 - truth_ttft_s(t) for t in ts)
        time_phase = "prefill" if pre / (pre + dec) >= 0.5 else "decode"
        p = prices_by_workload.get(w)
        money = None
        if p and p[0] is not None and p[3] is not None:
            p_in, p_read, p_write, p_out = (Decimal(x) if x is not None else Decimal(p[0]) for x in p)
            inp = sum(t["uncached_input_tokens"] * p_in + t["cache_read_tokens"] * p_read
                      + t["cache_write_tokens"] * p_write for t in ts)
            outp = sum(t["output_tokens"] * p_out for t in ts)
            money = "prefill" if inp / (inp + outp) >= Decimal("0.5") else "decode"
        out[w] = (time_phase, money)
    return out


@functools.lru_cache(maxsize=None)
def evaluate(entry: str) -> dict[str, tuple[bool, str]]:
    """check -> (holds, detail) for one fixture."""
    truth = truth_of(entry)
    if not truth:
        return {c: (False, "no calls recorded: " + run_info(entry).get("reason", "")) for c in CHECKS}
    pairs = match(entry)
    calls, wl = stored_calls(entry)
    res: dict[str, tuple[bool, str]] = {}
    missing = sum(1 for _, cs in pairs if not cs)
    res["found"] = (missing == 0, f"{len(truth) - missing}/{len(truth)} calls found")
    multi = sum(1 for _, cs in pairs if len(cs) > 1)
    res["once"] = (multi == 0 and len(calls) == len(truth),
                   f"{len(calls)} stored for {len(truth)} calls; {multi} stored more than once")
    bad_tok, n_tok = [], 0
    bad_ttft, n_ttft = [], 0
    bad_e2e = []
    bad_stream, n_stream = [], 0
    for t, cs in pairs:
        if len(cs) != 1:
            continue
        c = cs[0]
        want = (t["uncached_input_tokens"], t["cache_read_tokens"], t["cache_write_tokens"], t["output_tokens"])
        got = (c["uncached_input_tokens"], c["cache_read_tokens"] or 0, c["cache_write_tokens"] or 0, c["output_tokens"])
        n_tok += 1
        if got != want:
            bad_tok.append(f"{t['id']}: {got} != {want}")
        truth_ttft = truth_ttft_s(t)
        own = span_ttft(c)
        if own is not None and not t["streamed"] and abs(own - truth_ttft) > max(0.15 * truth_ttft, 0.015):
            # a non-streamed call's "TTFT" far from truth (OpenLIT's is the whole call's time) is no first token:
            # phaselens must not keep it as a measured one
            n_ttft += 1
            if c["timing_source"] == "measured" and c["ttft_s"] is not None and abs(c["ttft_s"] - own) <= 0.001:
                bad_ttft.append(f"{t['id']}: kept the span's {own:.4f} as measured, truth {truth_ttft:.4f} (not streamed)")
        elif own is not None:  # the span records its own TTFT: phaselens must carry it within 1 ms
            n_ttft += 1
            if c["ttft_s"] is None or abs(c["ttft_s"] - own) > 0.001:
                bad_ttft.append(f"{t['id']}: {c['ttft_s']} vs the span's {own:.4f}")
        elif t["streamed"]:
            n_ttft += 1
            if c["ttft_s"] is None or abs(c["ttft_s"] - truth_ttft) > max(0.15 * truth_ttft, 0.015):
                bad_ttft.append(f"{t['id']}: {c['ttft_s']} vs {truth_ttft:.4f} ({c['timing_source']})")
        # end-to-end as the caller sees it (the SDK call's wall time) where recorded, else the server's
        truth_e2e = ((t["client_end_ns"] - t["client_start_ns"]) if "client_end_ns" in t
                     else (t["end_ns"] - t["start_ns"])) / 1e9
        if c["e2e_s"] is None or abs(c["e2e_s"] - truth_e2e) > 0.02 * truth_e2e:
            bad_e2e.append(f"{t['id']}: {c['e2e_s']} vs {truth_e2e:.4f}")
        if c["streaming"] is not None:
            n_stream += 1
            if bool(c["streaming"]) != t["streamed"]:
                bad_stream.append(f"{t['id']}: {c['streaming']} vs {t['streamed']}")
    ones = sum(1 for _, cs in pairs if len(cs) == 1)
    res["tokens"] = (ones > 0 and not bad_tok, f"{n_tok - len(bad_tok)}/{n_tok} exact; " + "; ".join(bad_tok[:3]))
    res["ttft"] = (n_ttft > 0 and not bad_ttft,
                   f"{n_ttft - len(bad_ttft)}/{n_ttft} right (span value within 1 ms, else streamed within max(15%, 15 ms) "
                   "of truth; a non-streamed span value far from truth not kept as measured); " + "; ".join(bad_ttft[:3]))
    res["e2e"] = (ones > 0 and not bad_e2e, f"{ones - len(bad_e2e)}/{ones} within 2%; " + "; ".join(bad_e2e[:3]))
    res["streaming"] = (n_stream > 0 and not bad_stream,
                        f"{n_stream - len(bad_stream)}/{n_stream} right ({ones - n_stream} without a flag); "
                        + "; ".join(bad_stream[:3]))
    prices = {}
    for t, cs in pairs:
        if cs and cs[0]["_prices"]:
            prices.setdefault(t["workload"], cs[0]["_prices"])
    truth_dom = _dominance(truth, prices)
    got = {w["workload"]: (w["dominant_latency_phase"], w["dominant_cost_phase"]) for w in wl}
    bt = [f"{w}: {got.get(w, (None,))[0]} vs {d[0]}" for w, d in truth_dom.items() if got.get(w, (None,))[0] != d[0]]
    bm = [f"{w}: {got.get(w, (None, None))[1]} vs {d[1]}" for w, d in truth_dom.items()
          if d[1] is None or got.get(w, (None, None))[1] != d[1]]
    res["dominant_time"] = (not bt, "; ".join(bt) or "all workloads right")
    res["dominant_money"] = (not bm, "; ".join(bm) or "all workloads right")
    return res
