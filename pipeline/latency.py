"""Latency split: a latency model per (provider, model), and every call's prefill/decode time from it.

Many traces have no TTFT (OpenTelemetry's own OpenAI instrumentation, every non-streamed call), so the
split of those calls is estimated from a model fitted on the data itself (docs/latency.md):

- `ttft+decode`: fitted on calls that measured TTFT: TTFT = a + b·prefill_tokens (+ c·cached_tokens), and
  decode = d0 + d·(output_tokens − 1), each by robust (Huber) least squares on relative error.
- `e2e_only`: no (or too few) calls measured TTFT:
  e2e = a + b·prefill_tokens (+ c·cached_tokens) + d·(output_tokens − 1), fitted the same way.
  Only the sum is observed, so a constant cannot be told apart between the phases: the intercept a is
  given to prefill (it holds network, queueing and the first token, all of which precede token 2).
- `profile`: a per-token profile (Splitwise `perf_model.csv`) configured for the provider and model:
  prompt_time ≈ max(floor, a + b·prompt_size + q·prompt_size²), token_time ≈ its median. Measured
  calls, where at least `min_fit_calls` exist, win over a profile.

Each fit is checked on a deterministic `holdout_share` of calls (md5 of call_id) it was not fitted on,
then refitted on all of them for use. Fitting runs in Python on a capped sample per group; applying the
coefficients to every call is one SQL statement (`pipeline/sql/latency_call_timing.sql`).

`build_timing` leaves `latency_fits` (one row per provider, model, kind and UTC day: each day is fitted on its
own calls) and `call_timing` (one row per call).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import duckdb
import numpy as np
import pyarrow as pa

from phaselens.models.latency import LatencyProfile, LatencySettings

from .errors import ConfigError
from .store import sql_text, transaction

# Prefill regressors: latency_fits coefficient -> latency_sample column.
PREFILL_TERMS: dict[str, str] = {
    "ttft_s_per_uncached_token": "prefill_tokens",
    "ttft_s_per_cached_token": "cached_tokens",
}
MIN_CACHED_SHARE = 0.05  # cache reads enter the prefill model when at least this share of calls has some
PROFILE_COLUMNS = ("model", "hardware", "tensor_parallel", "batch_size", "prompt_size", "prompt_time", "token_time")
MAX_ITER = 100

Coefs = dict[str, float | None]


@dataclass(frozen=True)
class Sample:
    """One group's sampled calls as arrays: tokens, seconds (NaN = unknown), and flags."""

    prefill_tokens: np.ndarray
    cached_tokens: np.ndarray
    decode_tokens: np.ndarray
    ttft_s: np.ndarray
    decode_s: np.ndarray
    e2e_s: np.ndarray
    has_split: np.ndarray
    holdout: np.ndarray

    def take(self, mask: np.ndarray) -> Sample:
        """The rows where `mask` is true."""
        return Sample(*(getattr(self, f.name)[mask] for f in fields(self)))

    @property
    def has_e2e(self) -> np.ndarray:
        """Which calls have an end-to-end time."""
        return ~np.isnan(self.e2e_s)


def _irls(X: np.ndarray, y: np.ndarray, k: float, beta: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """Huber M-estimate by iteratively reweighted least squares, from `beta` (else least squares); and its scale."""
    if beta is None:
        beta = np.linalg.lstsq(X, y, rcond=None)[0]
    scale = 0.0
    for _ in range(MAX_ITER):
        r = y - X @ beta
        scale = 1.4826 * float(np.median(np.abs(r))) or float(np.mean(np.abs(r)))
        if scale <= 1e-15:
            break
        a = np.abs(r) / (k * scale)
        w = np.sqrt(np.where(a <= 1, 1.0, 1.0 / np.maximum(a, 1e-300)))
        new = np.linalg.lstsq(X * w[:, None], y * w, rcond=None)[0]
        done = np.max(np.abs(new - beta)) <= 1e-10 * (1 + np.max(np.abs(beta)))
        beta = new
        if done:
            break
    return beta, scale


def huber_fit(
    X: np.ndarray, y: np.ndarray, k: float = 1.345, rel_floor: float | None = None
) -> tuple[np.ndarray, float]:
    """Huber-robust least squares: coefficients (y's unit per X's unit) and the residual scale (MAD-based).

    With `rel_floor` the residuals are relative to the fitted value, (y − ŷ) / max(ŷ, rel_floor), as suits
    latencies whose noise grows with their size, and the scale is a relative standard deviation. Weighing by
    the fitted rather than the observed value keeps a freak near-zero observation from steering the fit.
    """
    col = np.abs(X).max(axis=0)
    col[col == 0] = 1.0
    Xs = X / col
    beta, scale = _irls(Xs, y, k)
    if rel_floor is not None:
        for _ in range(MAX_ITER):
            rows = 1.0 / np.maximum(np.abs(Xs @ beta), rel_floor)
            new, scale = _irls(Xs * rows[:, None], y * rows, k, beta)
            done = np.max(np.abs(new - beta)) <= 1e-9 * (1 + np.max(np.abs(beta)))
            beta = new
            if done:
                break
    return beta / col, scale


def _varies(x: np.ndarray) -> bool:
    """Whether token counts spread enough to tell a slope from an intercept (3+ values, p5..p95 ≥ half the median).

    LLMPerf and AIPerf send one prompt length and ask for one output length: there a slope is noise.
    """
    if len(x) < 3 or len(np.unique(x)) < 3:
        return False
    lo, mid, hi = np.percentile(x, [5, 50, 95])
    return hi - lo >= 0.5 * max(abs(mid), 1.0)


def _r2(actual: np.ndarray, pred: np.ndarray) -> float | None:
    if len(actual) < 3:
        return None
    ss_tot = float(np.sum((actual - actual.mean()) ** 2))
    return None if ss_tot == 0 else 1.0 - float(np.sum((actual - pred) ** 2)) / ss_tot


def _mape(actual: np.ndarray, pred: np.ndarray, floor_s: float) -> float | None:
    keep = actual >= max(floor_s, 1e-12)
    return float(np.mean(np.abs(pred[keep] - actual[keep]) / actual[keep])) if keep.any() else None


def _mae(actual: np.ndarray, pred: np.ndarray) -> float | None:
    return float(np.mean(np.abs(pred - actual))) if len(actual) else None


def predict_prefill(c: Coefs, prefill_tokens: np.ndarray, cached_tokens: np.ndarray) -> np.ndarray:
    """Predicted prefill (TTFT) in seconds for token counts, as latency_call_timing.sql computes it."""
    t = ((c.get("ttft_intercept_s") or 0.0) + (c.get("ttft_s_per_uncached_token") or 0.0) * prefill_tokens
         + (c.get("ttft_s_per_uncached_token_sq") or 0.0) * prefill_tokens**2
         + (c.get("ttft_s_per_cached_token") or 0.0) * cached_tokens)
    return np.maximum(np.maximum(t, c.get("ttft_floor_s") or 0.0), 0.0)


def predict_decode(c: Coefs, decode_tokens: np.ndarray) -> np.ndarray:
    """Predicted decode time in seconds for output tokens after the first, as the SQL computes it."""
    d = (c.get("decode_intercept_s") or 0.0) + (c.get("decode_s_per_output_token") or 0.0) * decode_tokens
    return np.where(decode_tokens > 0, np.maximum(d, 0.0), 0.0)


def split_given_e2e(
    c: Coefs, prefill: np.ndarray, decode: np.ndarray, e2e: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A predicted split (s) made to add up to the observed e2e (s), as latency_call_timing.sql does it.

    The gap e2e − (prefill + decode) is shared in proportion to each phase's expected error variance,
    (rel_sd · predicted)², so the phase that is more uncertain takes more of it; the result is clipped to
    [0, e2e]. Without a decode (one output token) all of e2e is prefill.
    """
    vp = ((c.get("ttft_rel_sd") or 1.0) * prefill) ** 2
    vd = ((c.get("decode_rel_sd") or 1.0) * decode) ** 2
    share = np.divide(vp, vp + vd, out=np.zeros_like(vp), where=(vp + vd) > 0)
    out = np.clip(prefill + (e2e - prefill - decode) * share, 0.0, e2e)
    out = np.where(decode > 0, out, e2e)
    return out, e2e - out


def _prefill_terms(s: Sample) -> list[str]:
    terms = [t for t, col in PREFILL_TERMS.items() if _varies(getattr(s, col))]
    if "ttft_s_per_cached_token" in terms and np.mean(s.cached_tokens > 0) < MIN_CACHED_SHARE:
        terms.remove("ttft_s_per_cached_token")
    return terms


def _design(s: Sample, terms: list[str], intercept: bool = True) -> np.ndarray:
    cols = [np.ones(len(s.prefill_tokens))] if intercept else []
    cols += [getattr(s, PREFILL_TERMS.get(t, "decode_tokens")) for t in terms]
    return np.column_stack(cols)


def _fit_terms(s: Sample, y: np.ndarray, terms: list[str], k: float, floor_s: float) -> tuple[dict[str, float], float]:
    """Intercept and per-token slopes of y (s); a slope that comes out negative is dropped and the rest refitted."""
    while True:
        beta, sd = huber_fit(_design(s, terms), y, k, floor_s)
        slopes = dict(zip(terms, (float(b) for b in beta[1:])))
        negative = [t for t, b in slopes.items() if b < 0]
        if not negative:
            return {"intercept": float(beta[0]), **slopes}, sd
        terms = [t for t in terms if t not in negative]


def fit_split(s: Sample, k: float, floor_s: float) -> Coefs:
    """`ttft+decode`: TTFT and decode (s) fitted separately, on relative error, on calls that measured both."""
    m = s.take(s.has_split)
    fit, sd = _fit_terms(m, m.ttft_s, _prefill_terms(m), k, floor_s)
    c: Coefs = {"ttft_intercept_s": fit.pop("intercept"), **fit, "ttft_rel_sd": sd}
    d = m.take(m.decode_tokens > 0)
    if len(d.decode_tokens) == 0:
        return c
    fit, sd = _fit_terms(d, d.decode_s, ["decode_tokens"], k, floor_s) if _varies(d.decode_tokens) else ({}, 0.0)
    if "decode_tokens" not in fit:  # one output length (or no trend): the rate through the origin, ITL-style
        (slope,), sd = huber_fit(_design(d, ["decode_tokens"], intercept=False), d.decode_s, k, floor_s)
        fit = {"intercept": 0.0, "decode_tokens": float(slope)}
    return {**c, "decode_intercept_s": fit["intercept"], "decode_s_per_output_token": fit["decode_tokens"],
            "decode_rel_sd": sd}


def fit_e2e(s: Sample, k: float, floor_s: float, kind: str) -> Coefs | None:
    """`e2e_only`: one robust regression of e2e (s) on prefill and decode tokens; the intercept goes to prefill."""
    m = s.take(s.has_e2e)
    terms = _prefill_terms(m)
    if kind == "generation":
        if not _varies(m.decode_tokens):
            return None
        terms.append("decode_tokens")
    fit, _ = _fit_terms(m, m.e2e_s, terms, k, floor_s)
    if kind == "generation" and "decode_tokens" not in fit:
        return None
    c: Coefs = {"ttft_intercept_s": fit.pop("intercept"), "decode_intercept_s": 0.0 if kind == "generation" else None}
    for t, b in fit.items():
        c["decode_s_per_output_token" if t == "decode_tokens" else t] = b
    return c


def _evaluate(c: Coefs, h: Sample, floor_s: float) -> dict[str, float | None]:
    """Errors of coefficients `c` on calls `h` they were not fitted on."""
    p, d = predict_prefill(c, h.prefill_tokens, h.cached_tokens), predict_decode(c, h.decode_tokens)
    m, e = h.has_split, h.has_e2e
    gp, gd = split_given_e2e(c, p[m & e], d[m & e], h.e2e_s[m & e])
    return {
        "holdout_mape_ttft": _mape(h.ttft_s[m], p[m], floor_s),
        "holdout_mae_ttft_s": _mae(h.ttft_s[m], p[m]),
        "holdout_mape_decode": _mape(h.decode_s[m], d[m], floor_s),
        "holdout_mae_decode_s": _mae(h.decode_s[m], d[m]),
        "holdout_mape_e2e": _mape(h.e2e_s[e], p[e] + d[e], floor_s),
        "holdout_mape_ttft_given_e2e": _mape(h.ttft_s[m & e], gp, floor_s),
        "holdout_mape_decode_given_e2e": _mape(h.decode_s[m & e], gd, floor_s),
    }


def _in_sample(c: Coefs, s: Sample) -> dict[str, float | None]:
    p, d = predict_prefill(c, s.prefill_tokens, s.cached_tokens), predict_decode(c, s.decode_tokens)
    m, e = s.has_split, s.has_e2e
    md = m & (s.decode_tokens > 0)
    return {"r2_ttft": _r2(s.ttft_s[m], p[m]), "r2_decode": _r2(s.decode_s[md], d[md]),
            "r2_e2e": _r2(s.e2e_s[e], p[e] + d[e])}


def _fit_group(s: Sample, evidence: np.ndarray, fit, st: LatencySettings) -> tuple[Coefs | None, dict, list[str]]:
    """Fit on the non-held-out calls, measure the error on the held-out ones, then refit on all for use."""
    notes: list[str] = []
    metrics: dict = {"n_fit": int(evidence.sum()), "n_holdout": 0}
    train, held = evidence & ~s.holdout, evidence & s.holdout
    if held.any() and train.sum() >= st.min_fit_calls:
        trial = fit(s.take(train))
        if trial is not None:
            metrics.update(_evaluate(trial, s.take(held), st.mape_floor_s), n_holdout=int(held.sum()))
    else:
        notes.append("no held-out error: " + ("holdout_share is 0" if st.holdout_share == 0 else "too few calls"))
    coefs = fit(s.take(evidence))
    if coefs is not None:
        metrics.update(_in_sample(coefs, s.take(evidence)))
    return coefs, metrics, notes


def read_profile(p: LatencyProfile) -> dict[str, np.ndarray]:
    """The profile rows (prompt_size tokens, prompt_time and token_time in ms) selected by a LatencyProfile."""
    con = duckdb.connect()
    try:
        try:
            con.read_csv(str(p.csv), header=True).create_view("profile")
            have = {r[0] for r in con.execute("DESCRIBE profile").fetchall()}
        except duckdb.Error as e:
            raise ConfigError(f"cannot read the latency profile {p.csv}: {e}",
                              "check the `csv` path of the profile") from e
        if missing := [c for c in PROFILE_COLUMNS if c not in have]:
            raise ConfigError(f"the latency profile {p.csv} lacks columns {', '.join(missing)}",
                              "use a Splitwise-style perf_model.csv (see docs/latency.md)")
        rows = con.execute(
            "SELECT CAST(prompt_size AS DOUBLE) AS prompt_size, CAST(prompt_time AS DOUBLE) AS prompt_time, "
            "CAST(token_time AS DOUBLE) AS token_time FROM profile WHERE model = ? AND hardware = ? "
            "AND tensor_parallel = ? AND batch_size = ? AND prompt_time > 0 AND token_time > 0 ORDER BY ALL",
            [p.profile_model, p.hardware, p.tensor_parallel, p.batch_size],
        ).fetchnumpy()
    finally:
        con.close()
    if len(rows["prompt_size"]) < 3:
        raise ConfigError(f"the latency profile {p.label()} has fewer than 3 rows",
                          "check profile_model, hardware, tensor_parallel and batch_size against the CSV")
    return {k: np.asarray(v, dtype=float) for k, v in rows.items()}


def _profile_curve(sizes: np.ndarray, times: np.ndarray, k: float) -> tuple[float | None, np.ndarray]:
    """(floor, [a, b, q]) of prompt_time ≈ max(floor, a + b·size + q·size²) over per-size median times."""
    best: tuple[float, float | None, np.ndarray] | None = None
    for knee in [None, *sizes[:-2]]:
        right = sizes >= (knee if knee is not None else sizes[0])
        degree = 2 if right.sum() >= 3 else 1
        X = np.column_stack([sizes[right] ** i for i in range(degree + 1)])
        beta = np.pad(huber_fit(X, times[right], k, rel_floor=1e-9)[0], (0, 2 - degree))
        floor = float(np.median(times[sizes <= knee])) if knee is not None else None
        pred = np.maximum(beta[0] + beta[1] * sizes + beta[2] * sizes**2, floor or 0.0)
        err = float(np.mean(np.abs(pred - times) / times))
        if best is None or err < best[0] - 1e-12:
            best = (err, floor, beta)
    assert best is not None
    return best[1], best[2]


def fit_profile(p: LatencyProfile, k: float = 1.345) -> dict[str, float | str | None]:
    """`profile` coefficients (s, s/token, s/token²) and their relative error on the profile's own rows.

    prompt_time ≈ max(floor, a + b·size + q·size²), fitted on the median time of each profiled prompt size
    (repeat runs do not weigh more): the floor is the median at and below a knee size, the quadratic is
    fitted on relative error at and above it, and the knee (or none) with the least mean relative error
    over the sizes wins. token_time ≈ its median. Errors are stated over every selected row.
    """
    rows = read_profile(p)
    size, prompt, token = rows["prompt_size"], rows["prompt_time"], rows["token_time"]
    sizes = np.unique(size)
    floor, beta = _profile_curve(sizes, np.array([np.median(prompt[size == x]) for x in sizes]), k)
    pred_prompt = np.maximum(beta[0] + beta[1] * size + beta[2] * size**2, floor or 0.0)
    tpot = float(np.median(token))
    rel_prompt, rel_token = np.abs(pred_prompt - prompt) / prompt, np.abs(tpot - token) / token
    return {
        "n_fit": len(size),
        "ttft_intercept_s": float(beta[0]) / 1000, "ttft_s_per_uncached_token": float(beta[1]) / 1000,
        "ttft_s_per_uncached_token_sq": float(beta[2]) / 1000, "ttft_floor_s": None if floor is None else floor / 1000,
        "decode_intercept_s": 0.0, "decode_s_per_output_token": tpot / 1000,
        "r2_ttft": _r2(prompt, pred_prompt), "profile": p.label(),
        "profile_mean_rel_err_prompt": float(rel_prompt.mean()), "profile_max_rel_err_prompt": float(rel_prompt.max()),
        "profile_mean_rel_err_token": float(rel_token.mean()), "profile_max_rel_err_token": float(rel_token.max()),
    }


def _fit_row(key: tuple, s: Sample | None, st: LatencySettings, profiles: dict) -> dict:
    """The latency_fits row of one (provider, model, kind, day)."""
    provider, model, kind, day = key
    row: dict = {"provider": provider, "model": model, "kind": kind, "day": day, "method": "none"}
    notes: list[str] = []
    n_split = int(s.has_split.sum()) if s is not None else 0
    n_e2e = int(s.has_e2e.sum()) if s is not None else 0
    profile = st.profile_for(provider, model) if kind == "generation" else None
    if kind == "generation" and n_split >= st.min_fit_calls:
        coefs, metrics, notes = _fit_group(s, s.has_split, lambda x: fit_split(x, st.huber_k, st.mape_floor_s), st)
        row.update(method="ttft+decode", **coefs, **metrics)
        if profile is not None:
            notes.append("measured calls preferred over the configured profile")
    elif profile is not None:
        row.update(method="profile", **profiles[(provider, model)])
        if s is not None and (s.has_split | s.has_e2e).any():
            every = s.take(s.has_split | s.has_e2e)
            row.update(_evaluate(row, every, st.mape_floor_s), n_holdout=len(every.e2e_s))
            row["r2_e2e"] = _in_sample(row, every)["r2_e2e"]
            notes.append("held-out error: all calls with timing (none were fitted on)")
    elif n_e2e >= st.min_fit_calls:
        coefs, metrics, notes = _fit_group(s, s.has_e2e, lambda x: fit_e2e(x, st.huber_k, st.mape_floor_s, kind), st)
        if coefs is None:
            notes.append("no decode rate shows in e2e (output tokens do not vary, or no upward trend): not split")
        else:
            row.update(method="e2e_only", **coefs, **metrics)
            if kind == "generation":
                notes.append("e2e only: the intercept is counted as prefill")
                m = s.take(s.has_e2e)
                if _varies(m.prefill_tokens) and abs(np.corrcoef(m.prefill_tokens, m.decode_tokens)[0, 1]) > 0.9:
                    notes.append("input and output tokens move together: the split is poorly determined")
    else:
        notes.append(f"fewer than {st.min_fit_calls} calls with timing: not fitted")
    if row["method"] in ("ttft+decode", "e2e_only") and row.get("ttft_s_per_uncached_token") is None:
        notes.append("prefill shows no trend with input tokens (they do not vary, or the slope came out negative): "
                     "a constant")
    if row["method"] != "none":
        for coef in ("ttft_intercept_s", "decode_s_per_output_token", *PREFILL_TERMS):
            if (row.get(coef) or 0) < 0:
                notes.append(f"{coef} < 0: predictions are clipped at 0")
    row["note"] = "; ".join(notes) or None
    return row


def _samples(con: duckdb.DuckDBPyConnection, st: LatencySettings) -> dict[tuple, Sample]:
    con.execute(sql_text("latency_sample"), {"cap": st.sample_cap, "holdout_bp": round(st.holdout_share * 10000)})
    found = con.execute("SELECT DISTINCT grp, provider, model, kind, day FROM latency_sample").fetchall()
    keys = {g: (p, m, k, d) for g, p, m, k, d in found}
    cols = [f.name for f in fields(Sample)]
    nan = ", ".join(f"coalesce({c}, 'NaN'::DOUBLE) AS {c}" if c not in ("has_split", "holdout") else c for c in cols)
    data = con.execute(f"SELECT grp, call_hash, {nan} FROM latency_sample ORDER BY grp, call_hash").fetchnumpy()
    grp, call_hash = np.asarray(data["grp"]), np.asarray(data["call_hash"])
    columns = [np.asarray(data[c]).astype(bool if c in ("has_split", "holdout") else float) for c in cols]
    del data
    _order_hash_ties(grp, call_hash, columns)
    # the rows are in group order: each group is one slice (a mask per group cost a pass over every row per group)
    starts = np.searchsorted(grp, list(keys), side="left")
    ends = np.searchsorted(grp, list(keys), side="right")
    return {key: Sample(*(col[a:b] for col in columns)) for key, a, b in zip(keys.values(), starts, ends)}


def _order_hash_ties(grp: np.ndarray, call_hash: np.ndarray, columns: list[np.ndarray]) -> None:
    """Put the rows of one group whose 32-bit sample hashes collide (sorted by group and hash, so next to each other,
    in whatever order the sort left them) in the order of their values, in place: a build run twice then feeds the
    fit the same rows in the same order, and its float sums agree to the last bit. Sorting every row by its values
    in SQL did the same at the cost of wider sort keys (about 0.5 GB more at 10 M calls); ties are rare."""
    tie = np.flatnonzero((grp[1:] == grp[:-1]) & (call_hash[1:] == call_hash[:-1]))  # row i ties with row i + 1
    if not tie.size:
        return
    for run in np.split(tie, np.flatnonzero(np.diff(tie) > 1) + 1):
        rows = np.arange(run[0], run[-1] + 2)
        order = rows[np.lexsort([c[rows] for c in reversed(columns)])]  # the first column is the primary key
        for c in columns:
            c[rows] = c[order]


def _sort_key(k: tuple) -> tuple:
    return tuple(("", "") if v is None else ("~", str(v)) for v in k)


def build_timing(
    con: duckdb.DuckDBPyConnection, settings: LatencySettings | None = None, *, profile_only_rows: bool = True,
) -> None:
    """Fit latency models per (provider, model, kind, UTC day) into `latency_fits` and time every call (s) into
    `call_timing`. A day's fit learns from that day's calls alone (see docs/latency.md), so the estimate of a call
    changes only when its day's calls change. `profile_only_rows`: add the rows of configured profiles whose
    model has no call (`add_profile_only_fits`); an incremental build adds them over the whole store instead."""
    st = settings or LatencySettings()
    profiles = {(p.provider, p.model): fit_profile(p, st.huber_k) for p in st.profiles}
    with transaction(con):
        con.execute(sql_text("latency_calls"))
        samples = _samples(con, st)
        keys = {tuple(k) for k in con.execute(
            "SELECT DISTINCT provider, model, kind, day FROM latency_calls WHERE model IS NOT NULL").fetchall()}
        keys |= set(samples)
        if profiles:
            keys |= {(p, m, "generation", d) for p, m, d in con.execute(
                "SELECT DISTINCT provider, model, day FROM latency_calls WHERE model IS NOT NULL").fetchall()
                if (p, m) in profiles}
        order = sorted(keys, key=_sort_key)
        rows = [_fit_row(k, samples.get(k), st, profiles) for k in order]
        con.execute(sql_text("latency_fits_ddl"))
        _insert_fits(con, rows)
        con.execute(sql_text("latency_call_timing"))
        con.execute("DROP TABLE latency_sample; DROP VIEW latency_calls")
        if profile_only_rows:
            add_profile_only_fits(con, st, profiles)


def _insert_fits(con: duckdb.DuckDBPyConnection, rows: list[dict]) -> None:
    if rows:
        columns = [c for c, *_ in con.execute("DESCRIBE latency_fits").fetchall()]
        con.register("latency_fit_rows", pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in rows]))
        con.execute("INSERT INTO latency_fits BY NAME SELECT * FROM latency_fit_rows")
        con.unregister("latency_fit_rows")


def add_profile_only_fits(
    con: duckdb.DuckDBPyConnection, settings: LatencySettings | None = None, profiles: dict | None = None,
) -> None:
    """Rows (day NULL, nothing estimated) for configured profiles whose model has no fit row, so a what-if can
    still target it; rows of that kind whose model has since gained calls are dropped."""
    st = settings or LatencySettings()
    if profiles is None:
        profiles = {(p.provider, p.model): fit_profile(p, st.huber_k) for p in st.profiles}
    con.execute(
        "DELETE FROM latency_fits f WHERE f.day IS NULL AND f.method = 'profile' AND f.n_estimated = 0 "
        "AND NOT EXISTS (SELECT 1 FROM raw_calls c WHERE c.started_at IS NULL AND c.model = f.model "
        "AND c.provider IS NOT DISTINCT FROM f.provider)")
    have = {tuple(r) for r in con.execute("SELECT DISTINCT provider, model FROM latency_fits").fetchall()}
    keys = sorted(((p, m, "generation", None) for p, m in profiles if (p, m) not in have), key=_sort_key)
    rows = [_fit_row(k, None, st, profiles) | {"n_estimated": 0} for k in keys]
    _insert_fits(con, rows)
