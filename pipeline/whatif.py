"""Routing what-if: replay a workload's calls on another provider and model, before moving it (docs/whatif.md).

For each target the calls of the period (`whatif_calls`: a bounded, fixed sample per workload and day) are
turned into calls on the target:

- tokens: scaled by the tokenizer ratio of the two model families (configurable, default 1.0); cache reads and
  writes carry over only where the target offers prompt caching (else they are read as uncached input);
- latency: the target's latency model (`latency_fits`: fitted on its own calls, or a configured profile) gives
  each call's TTFT and decode time; the spread around the model is the target's own, taken from the ratios of
  its measured calls to their predictions (none when the target has no measured calls: then the percentiles are
  those of the point predictions, and the basis says so);
- money: the target's price per token bucket on each call's day (genai-prices or the price book), exact DECIMAL;
  a day replayed from a sample is scaled to its call count;
- goodput: the share of calls meeting the workload's SLOs, and the dollars per call that met them.

The same function answers `phaselens whatif` on the store and the dashboard's panel on a published snapshot:
both hold `whatif_calls` and `latency_fits`, so the two agree to the digit.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal

import duckdb
import numpy as np

from phaselens.models.pricebook import PriceBook
from phaselens.models.whatif import WhatIfSettings

from .errors import PhaselensError
from .store import relation_exists

MIN_RESIDUALS = 20  # measured calls a target needs before its own spread is used
MAX_RESIDUALS = 200  # residual pairs kept (the replay is calls x residuals)
MAX_LATENCY_CALLS = 20_000  # calls of the period whose latency is replayed
EDGE_SLACK = 0.05  # token range beyond what the target's fit saw, by this share, counts as extrapolation
MONEY_QUANTUM = Decimal("1e-12")
PERCENTILES = (50, 95)
SLO_METRICS = {"ttft": "ttft_s", "itl": "itl_s", "e2e": "e2e_s"}
CALL_COLUMNS = (
    "call_id", "started_at", "day", "provider", "model", "uncached_input_tokens", "cache_read_tokens",
    "cache_write_tokens", "cache_write_1h_tokens", "output_tokens", "ttft_s", "decode_s", "itl_s", "e2e_s",
    "timing_source", "cost_usd", "priced", "day_calls",
)
MEASURED_SOURCES = ("measured", "events", "events_extrapolated")


@dataclass(frozen=True)
class Target:
    """A provider and normalised model to move a workload to: `provider/model`."""

    provider: str
    model: str

    @classmethod
    def parse(cls, text: str) -> Target:
        provider, sep, model = text.strip().partition("/")
        if not sep or not provider or not model:
            raise PhaselensError(
                f"target {text!r} is not PROVIDER/MODEL",
                "write it as phaselens names them, e.g. openai/gpt-4o or azure.ai.openai/gpt-4.1-mini "
                "(`phaselens workloads --all` lists the models in use)",
            )
        return cls(provider.lower(), model.lower())

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.model}"


@dataclass(frozen=True)
class Calls:
    """The replayed calls of one workload and period as arrays (tokens as int64, seconds as float64)."""

    rows: list[dict]
    weight: np.ndarray  # calls of the whole day each replayed call stands for
    uncached: np.ndarray
    cache_read: np.ndarray
    cache_write: np.ndarray
    cache_write_1h: np.ndarray
    output: np.ndarray
    ttft: np.ndarray
    decode: np.ndarray
    itl: np.ndarray
    e2e: np.ndarray

    @classmethod
    def of(cls, rows: list[dict]) -> Calls:
        sampled: dict[date, int] = defaultdict(int)
        for r in rows:
            sampled[r["day"]] += 1
        weight = np.array([r["day_calls"] / sampled[r["day"]] for r in rows], dtype=float)

        def ints(k: str) -> np.ndarray:
            return np.array([r[k] or 0 for r in rows], dtype=np.int64)

        def floats(k: str) -> np.ndarray:
            return np.array([np.nan if r[k] is None else r[k] for r in rows], dtype=float)

        return cls(rows, weight, ints("uncached_input_tokens"), ints("cache_read_tokens"), ints("cache_write_tokens"),
                   ints("cache_write_1h_tokens"), ints("output_tokens"), floats("ttft_s"), floats("decode_s"),
                   floats("itl_s"), floats("e2e_s"))


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float | None:
    """The q-quantile (0–1) of `values` with `weights`; with equal weights it equals DuckDB's quantile_cont."""
    keep = ~np.isnan(values)
    v, w = values[keep], weights[keep]
    if not len(v):
        return None
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    if np.allclose(w, w[0]):
        return float(np.quantile(v, q))
    # Linear interpolation between weighted ranks: rank of value i is the cumulative weight before its centre.
    cum = np.cumsum(w) - w / 2
    cum = (cum - cum[0]) / (cum[-1] - cum[0]) if cum[-1] > cum[0] else np.zeros_like(cum)
    return float(np.interp(q, cum, v))


def _money(x: Decimal | None) -> Decimal | None:
    return None if x is None else x.quantize(MONEY_QUANTUM, rounding=ROUND_HALF_EVEN)


def _scaled_sum(rows: list[dict], values: list[Decimal | None]) -> Decimal | None:
    """Sum per day of the replayed calls' values, scaled to the day's call count (exact when nothing was sampled)."""
    per_day: dict[date, list] = defaultdict(lambda: [Decimal(0), 0, 0, False])
    for r, v in zip(rows, values):
        d = per_day[r["day"]]
        if v is None:
            d[3] = True
        else:
            d[0] += v
        d[1] += 1
        d[2] = r["day_calls"]
    total = Decimal(0)
    for s, sampled, day_calls, _ in per_day.values():
        total += s if sampled == day_calls else s * Decimal(day_calls) / Decimal(sampled)
    return _money(total)


def _slo_checks(slos: list[tuple[str, str, float]], workload: str) -> list[tuple[str, float]]:
    """(call column, max seconds) a call must meet: each configured SLO of the workload, read per call."""
    checks = []
    for w, metric, max_s in slos:
        if w == workload:
            checks.append((SLO_METRICS[metric.split("_", 1)[0]], float(max_s)))
    return checks


def _goodput(values: dict[str, np.ndarray], weight: np.ndarray, checks: list[tuple[str, float]]) -> float | None:
    if not checks:
        return None
    met = np.ones(values["ttft_s"].shape, dtype=bool)
    for col, max_s in checks:
        v = values[col]
        met &= np.isnan(v) | (v <= max_s)  # a call with no value (one output token has no ITL) is not a breach
    w = np.broadcast_to(weight, met.shape)
    return float((w * met).sum() / w.sum()) if w.sum() else None


def _latency_summary(values: dict[str, np.ndarray], weight: np.ndarray) -> dict[str, float | None]:
    w = np.broadcast_to(weight, values["ttft_s"].shape).ravel()
    out: dict[str, float | None] = {}
    for name, col in SLO_METRICS.items():
        v = values[col].ravel()
        for p in PERCENTILES:
            out[f"{name}_p{p}_s"] = weighted_quantile(v, w, p / 100)
    return out


def _fit(con: duckdb.DuckDBPyConnection, target: Target) -> dict | None:
    cur = con.execute(
        "SELECT * FROM latency_fits WHERE provider = ? AND model = ? AND kind = 'generation' AND method <> 'none' "
        "ORDER BY n_fit DESC, day DESC NULLS LAST LIMIT 1",
        [target.provider, target.model],
    )
    cols = [d[0] for d in cur.description]
    row = cur.fetchone()
    return dict(zip(cols, row)) if row else None


def _coef(fit: dict, name: str) -> float:
    v = fit.get(name)
    return 0.0 if v is None else float(v)


def predict(fit: dict, uncached: np.ndarray, cache_read: np.ndarray, cache_write: np.ndarray,
            output: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TTFT and decode seconds of calls with these tokens under a `latency_fits` row (its documented formula)."""
    t = (uncached + cache_write).astype(float)
    prefill = (_coef(fit, "ttft_intercept_s") + _coef(fit, "ttft_s_per_uncached_token") * t
               + _coef(fit, "ttft_s_per_uncached_token_sq") * t * t
               + _coef(fit, "ttft_s_per_cached_token") * cache_read.astype(float))
    prefill = np.maximum(prefill, max(_coef(fit, "ttft_floor_s"), 0.0))
    decode = _coef(fit, "decode_intercept_s") + _coef(fit, "decode_s_per_output_token") * (output - 1).astype(float)
    decode = np.where(output >= 1, np.maximum(decode, 0.0), 0.0)
    return prefill, decode


def _residuals(target_calls: Calls | None, fit: dict) -> tuple[np.ndarray, np.ndarray, str]:
    """Ratios actual / predicted (TTFT, decode) of the target's own measured calls, and what they are."""
    if target_calls is None or not target_calls.rows:
        return np.ones(1), np.ones(1), "point predictions (the target has no calls of its own to take a spread from)"
    c = target_calls
    pt, pd = predict(fit, c.uncached, c.cache_read, c.cache_write, c.output)
    measured = np.array([r["timing_source"] in MEASURED_SOURCES for r in c.rows])
    ok = measured & (pt > 0) & (pd > 0) & (c.output > 1) & ~np.isnan(c.ttft) & ~np.isnan(c.decode)
    if ok.sum() >= MIN_RESIDUALS:
        rt, rd = c.ttft[ok] / pt[ok], c.decode[ok] / pd[ok]
        what = f"spread of {int(ok.sum())} measured calls of the target around its model"
    else:
        ok = (pt + pd > 0) & ~np.isnan(c.e2e)
        if ok.sum() < MIN_RESIDUALS:
            return np.ones(1), np.ones(1), "point predictions (fewer than 20 timed calls of the target)"
        rt = rd = c.e2e[ok] / (pt[ok] + pd[ok])
        what = f"end-to-end spread of {int(ok.sum())} calls of the target around its model (no measured TTFT)"
    finite = np.isfinite(rt) & np.isfinite(rd)
    rt, rd = rt[finite], rd[finite]
    if len(rt) > MAX_RESIDUALS:
        pick = np.linspace(0, len(rt) - 1, MAX_RESIDUALS).round().astype(int)
        rt, rd = rt[pick], rd[pick]
    return rt, rd, what


def _range(x: np.ndarray, lo: float, hi: float) -> tuple[float, float]:
    return float(np.percentile(x, lo)), float(np.percentile(x, hi))


def _cache_offered(book: PriceBook, target: Target, day: date | None) -> bool | None:
    """Whether the target has a price of its own for cache reads (prompt caching); None when it has no known price."""
    from .pricing import _genai_model, list_price

    override = book.override_for(target.provider, target.model, None, day)
    if override is not None and override.discount is None:
        return override.cache_read is not None
    found = _genai_model(target.provider, target.model)
    if found is None or list_price(target.provider, target.model, None, day) is None:
        return None
    prices = found[1].get_prices(datetime.combine(day or date.today(), datetime.min.time()))
    return getattr(prices, "cache_read_mtok", None) is not None


def _price_for(rows: list[dict], second_of_day: int, total_input: int) -> dict | None:
    best = None
    for p in rows:
        if p["window_start_s"] <= second_of_day < p["window_end_s"] and p["tier_start_input_tokens"] <= total_input:
            if best is None or p["tier_start_input_tokens"] > best["tier_start_input_tokens"]:
                best = p
    return best


def _bucket_cost(tokens: int, price: Decimal | None) -> Decimal | None:
    if tokens == 0:
        return Decimal(0)
    return None if price is None else _money(Decimal(tokens) * price)


def _costs(book: PriceBook, target: Target, calls: Calls, tokens: dict[str, np.ndarray]) -> tuple[dict, str | None]:
    """Exact cost per bucket of the replayed calls on the target (scaled to whole days), or why there is none."""
    from .pricing import price_rows

    by_day: dict[date, list[dict]] = {}
    buckets: dict[str, list[Decimal | None]] = {k: [] for k in ("uncached_input", "cache_read", "cache_write", "output")}
    reason = None
    for i, r in enumerate(calls.rows):
        day = r["day"]
        if day not in by_day:
            by_day[day] = price_rows(book, target.provider, target.model, None, day)
        started: datetime | None = r["started_at"]
        second = started.hour * 3600 + started.minute * 60 + started.second if started else 0
        u, cr, cw, cw1h, out = (int(tokens[k][i]) for k in ("uncached", "cache_read", "cache_write",
                                                              "cache_write_1h", "output"))
        p = _price_for(by_day[day], second, u + cr + cw)
        if p is None or p["price_source"] is None or p["price_source"] == "gpu_hours":
            reason = (p or {}).get("unpriced_reason") or ("priced by GPU-hours" if p else "no_price")
            if p and p["price_source"] == "gpu_hours":
                reason = "self-hosted deployment priced by GPU-hours: a move there has no per-token price"
            return {}, reason
        buckets["uncached_input"].append(_bucket_cost(u, p["uncached_input"]))
        buckets["cache_read"].append(_bucket_cost(cr, p["cache_read"]))
        cw5 = _bucket_cost(cw - cw1h, p["cache_write"])
        cw1 = _bucket_cost(cw1h, p["cache_write_1h"])
        buckets["cache_write"].append(None if cw5 is None or cw1 is None else cw5 + cw1)
        buckets["output"].append(_bucket_cost(out, p["output"]))
    out: dict[str, Decimal | None] = {}
    for k, vals in buckets.items():
        if any(v is None for v in vals):
            return {}, f"the target has no price for {k.replace('_', ' ')} tokens"
        out[k] = _scaled_sum(calls.rows, vals)
    return out, reason


def _read_calls(con: duckdb.DuckDBPyConnection, where: str, params: dict) -> list[dict]:
    cur = con.execute(f"SELECT {', '.join(CALL_COLUMNS)} FROM whatif_calls WHERE {where} ORDER BY day, call_id", params)
    return [dict(zip(CALL_COLUMNS, r)) for r in cur.fetchall()]


def _thin(calls: Calls, cap: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of at most `cap` calls spread evenly over the replay (fixed), and each one's weight."""
    n = len(calls.rows)
    if n <= cap:
        return np.arange(n), calls.weight
    idx = np.linspace(0, n - 1, cap).round().astype(int)
    return idx, calls.weight[idx] * (calls.weight.sum() / calls.weight[idx].sum())


def _delta(pred: dict, today: dict) -> dict:
    out = {}
    for k, v in pred.items():
        t = today.get(k)
        if v is None or t is None:
            out[k] = None
        elif isinstance(v, Decimal) or isinstance(t, Decimal):
            out[k] = _money(Decimal(v) - Decimal(t))
        else:
            out[k] = v - t
    return out


def _period_days(since: datetime | None, until: datetime | None, rows: list[dict]) -> int:
    if since is not None and until is not None:
        return max(1, -(-(until - since) // timedelta(days=1)))
    return max(1, len({r["day"] for r in rows}))


def whatif(
    con: duckdb.DuckDBPyConnection,
    workload: str,
    targets: list[Target],
    since: datetime | None = None,
    until: datetime | None = None,
    *,
    settings: WhatIfSettings | None = None,
    slos: list[tuple[str, str, float]] | None = None,
    pricebook: PriceBook | None = None,
) -> dict:
    """What `workload`'s calls of [since, until) would take and cost on each target, beside what they got."""
    settings = settings or WhatIfSettings()
    book = pricebook or PriceBook()
    if not relation_exists(con, "whatif_calls"):
        raise PhaselensError("the store has no what-if replay set yet", "run `phaselens build` (it writes whatif_calls)")
    if not targets:
        raise PhaselensError("no target given", "add --to PROVIDER/MODEL, e.g. --to openai/gpt-4o")
    rows = _read_calls(
        con, "workload = $w AND ($s IS NULL OR started_at >= $s) AND ($u IS NULL OR started_at < $u)",
        {"w": workload, "s": since, "u": until},
    )
    if not rows:
        names = [r[0] for r in con.execute("SELECT DISTINCT workload FROM whatif_calls ORDER BY 1").fetchall()]
        raise PhaselensError(
            f"no calls of workload {workload!r} in this period",
            f"known workloads: {', '.join(names) or 'none (ingest traces, then phaselens build)'}",
        )
    calls = Calls.of(rows)
    checks = _slo_checks(slos or [], workload)
    days = _period_days(since, until, rows)
    n_calls = int(round(calls.weight.sum()))

    today_vals = {"ttft_s": calls.ttft, "itl_s": calls.itl, "e2e_s": calls.e2e}
    today = _latency_summary(today_vals, calls.weight)
    priced = [r["priced"] for r in rows]
    today_cost = _scaled_sum(rows, [r["cost_usd"] if r["priced"] else Decimal(0) for r in rows])
    today["cost_usd"] = today_cost
    today["cost_per_day_usd"] = _money(today_cost / days) if today_cost is not None else None
    today["goodput_share"] = _goodput(today_vals, calls.weight, checks)
    today["usd_per_good_call"] = (
        _money(today_cost / Decimal(repr(n_calls * today["goodput_share"])))
        if today_cost is not None and today["goodput_share"] else None
    )
    models = sorted({f"{r['provider']}/{r['model']}" for r in rows})
    result: dict = {
        "workload": workload,
        "since": since, "until": until, "days": days,
        "calls": n_calls, "replayed_calls": len(rows),
        "slos": [{"metric": m, "max_s": x} for w, m, x in (slos or []) if w == workload],
        "today": {"models": models, **today,
                  "unpriced_calls": sum(1 for p in priced if not p)},
        "targets": [],
    }

    for target in targets:
        result["targets"].append(_one_target(con, target, calls, rows, checks, days, n_calls, today, settings, book))
    return result


def _one_target(con, target: Target, calls: Calls, rows: list[dict], checks, days: int, n_calls: int, today: dict,
                settings: WhatIfSettings, book: PriceBook) -> dict:
    warnings: list[str] = []
    target_family = settings.family(target.model)
    families = [settings.family(r["model"]) for r in rows]
    ratio = np.array([settings.ratio(target_family) / settings.ratio(f) for f in families])
    source_families = sorted(set(families))
    offered = _cache_offered(book, target, max((r["day"] for r in rows if r["day"]), default=None))
    scale = lambda x: np.rint(x * ratio).astype(np.int64)  # noqa: E731
    if offered:
        tokens = {"uncached": scale(calls.uncached), "cache_read": scale(calls.cache_read),
                  "cache_write": scale(calls.cache_write)}
        tokens["cache_write_1h"] = np.minimum(scale(calls.cache_write_1h), tokens["cache_write"])
        caching = ("the target offers prompt caching: cache reads and writes carry over as the workload has them, "
                   "at the target's cache prices")
    else:
        tokens = {"uncached": scale(calls.uncached + calls.cache_read + calls.cache_write),
                  "cache_read": np.zeros(len(rows), dtype=np.int64), "cache_write": np.zeros(len(rows), dtype=np.int64),
                  "cache_write_1h": np.zeros(len(rows), dtype=np.int64)}
        caching = ("the target has no prompt-caching price: every input token is read uncached"
                   if offered is False else "the target's prices are unknown: every input token is counted uncached")
    tokens["output"] = scale(calls.output)
    applied = sorted({round(float(x), 6) for x in ratio})
    token_ratio = {
        "target_family": target_family, "source_families": source_families,
        "ratios": {f: settings.ratio(f) for f in sorted(set(source_families) | {target_family})},
        "applied": applied[0] if len(applied) == 1 else applied,
    }
    if applied != [1.0]:
        warnings.append(f"token counts scaled by the tokenizer ratio {token_ratio['applied']} "
                        f"({', '.join(source_families)} -> {target_family})")

    fit = _fit(con, target)
    predicted: dict = {f"{m}_p{p}_s": None for m in SLO_METRICS for p in PERCENTILES}
    basis: dict = {"latency_model": None}
    goodput = None
    if fit is None:
        warnings.append(f"no latency model for {target.label}: load calls of it, or configure a profile for it "
                        "([[latency.profiles]] in the configuration), then phaselens build; latency not predicted")
    else:
        target_rows = _read_calls(con, "provider = $p AND model = $m", {"p": target.provider, "m": target.model})
        target_calls = Calls.of(target_rows) if target_rows else None
        rt, rd, spread = _residuals(target_calls, fit)
        idx, w = _thin(calls, MAX_LATENCY_CALLS)
        pt, pd = predict(fit, tokens["uncached"][idx], tokens["cache_read"][idx], tokens["cache_write"][idx],
                         tokens["output"][idx])
        ttft = pt[:, None] * rt[None, :]
        decode = pd[:, None] * rd[None, :]
        out = tokens["output"][idx][:, None]
        itl = np.where(out > 1, decode / np.maximum(out - 1, 1), np.nan)
        values = {"ttft_s": ttft, "itl_s": itl, "e2e_s": ttft + decode}
        predicted = _latency_summary(values, w[:, None] / len(rt))
        goodput = _goodput(values, w[:, None] / len(rt), checks)
        basis = {
            "latency_model": fit["method"], "fit_calls": fit["n_fit"], "holdout_calls": fit["n_holdout"],
            "holdout_mape_ttft": fit["holdout_mape_ttft"], "holdout_mape_decode": fit["holdout_mape_decode"],
            "holdout_mape_e2e": fit["holdout_mape_e2e"], "spread": spread,
        }
        if fit["method"] == "e2e_only":
            warnings.append(f"{target.label} has no calls with a measured TTFT: its split between TTFT and decode is "
                            "itself estimated from end-to-end times")
        if target_calls is not None:
            seen_in = target_calls.uncached + target_calls.cache_write
            seen_out = target_calls.output
            want_in = tokens["uncached"] + tokens["cache_write"]
            for what, want, seen in (("input", want_in, seen_in), ("output", tokens["output"], seen_out)):
                lo, hi = _range(want, 5, 95)
                slo, shi = float(seen.min()), float(seen.max())
                if hi > shi * (1 + EDGE_SLACK) or lo < slo * (1 - EDGE_SLACK):
                    warnings.append(
                        f"extrapolation: the workload's {what} tokens (p5–p95 {lo:,.0f}–{hi:,.0f}) lie outside what "
                        f"{target.label}'s model was fitted on ({slo:,.0f}–{shi:,.0f})")
        else:
            warnings.append(f"{target.label} is timed from a configured profile: the token range it covers is not "
                            "checked")

    costs, unpriced = _costs(book, target, calls, tokens)
    if unpriced:
        warnings.append(f"cost not predicted: {unpriced}")
    total = sum(costs.values(), Decimal(0)) if costs else None
    predicted["cost_usd"] = _money(total) if total is not None else None
    predicted["cost_per_day_usd"] = _money(total / days) if total is not None else None
    predicted["goodput_share"] = goodput
    predicted["usd_per_good_call"] = (
        _money(total / Decimal(repr(n_calls * goodput))) if total is not None and goodput else None
    )
    return {
        "target": target.label,
        "predicted": predicted,
        "cost_by_bucket_usd": costs or None,
        "delta": _delta(predicted, today),
        "basis": basis,
        "token_ratio": token_ratio,
        "caching": caching,
        "warnings": warnings,
    }


def snapshot_inputs(con: duckdb.DuckDBPyConnection) -> tuple[WhatIfSettings, PriceBook, list[tuple[str, str, float]]]:
    """The what-if settings, price book and SLOs a published snapshot was made with (defaults where absent)."""
    import json

    settings, book = WhatIfSettings(), PriceBook()
    row = con.execute("SELECT config_json FROM whatif_config").fetchone()
    if row and row[0]:
        data = json.loads(row[0])
        settings = WhatIfSettings.model_validate(data.get("whatif") or {})
        book = PriceBook.model_validate({k: data.get(k) or [] for k in ("prices", "deployments")})
    slos = [tuple(r) for r in con.execute("SELECT workload, metric, max_s FROM slos").fetchall()]
    return settings, book, slos


ROW_COLUMNS = (
    "option", "ttft_p50_s", "ttft_p95_s", "itl_p50_s", "itl_p95_s", "e2e_p50_s", "e2e_p95_s",
    "cost_per_day_usd", "goodput_share", "usd_per_good_call", "delta_cost_per_day_usd", "delta_ttft_p95_s",
    "delta_itl_p95_s", "latency_model", "warnings",
)


def result_rows(result: dict) -> tuple[list[str], list[tuple]]:
    """One row for what the workload got and one per target: the figures the table, CSV and dashboard show."""
    today = result["today"]
    rows = [(
        "today: " + ", ".join(today["models"]), *(today[c] for c in ROW_COLUMNS[1:10]), None, None, None,
        "measured", "",
    )]
    for t in result["targets"]:
        p, d = t["predicted"], t["delta"]
        rows.append((
            t["target"], *(p[c] for c in ROW_COLUMNS[1:10]), d["cost_per_day_usd"], d["ttft_p95_s"], d["itl_p95_s"],
            t["basis"].get("latency_model") or "none", "; ".join(t["warnings"]),
        ))
    return list(ROW_COLUMNS), rows
