"""Caching lever: how much input repeats a prefix seen within a cache lifetime, and what a prompt cache
would save in dollars and TTFT (design §7; method in docs/caching.md).

`build_caching` leaves four tables in the store:
- `call_prefix_reuse`   per call and lifetime: blocks seen earlier, reusable tokens, first-write tokens
- `caching_days`        the lever's exact sums per UTC day (and TTFT-saved sketch bucket), which the
                        whole-store rows below add up, so an incremental build recomputes touched days only
- `caching_opportunity` per workload (and per provider and model) and lifetime: reuse, achieved vs
                        possible cache reads, dollars and TTFT saved, and a one-line note
- `caching_by_workload` the workload rows at the headline lifetime, read by the workload diagnosis

Everything is SQL over unnested (call, block, hash) rows with window functions (`pipeline/sql/caching_*.sql`),
so it scales with DuckDB and stays transpilable. Optional upstreams (workload rules, prices and costs,
latency fits) are used when the build made them; without them the matching columns stay NULL.
`what_if` answers the dashboard's question from the published rows alone.
"""

from __future__ import annotations

from decimal import Decimal

import duckdb

from phaselens.models.caching import CachingSettings
from phaselens.models.vocabulary import default_workload_sql

from .errors import PhaselensError
from .store import sql_text, transaction

WRITE_5M_MAX_S = 300
"""Lifetimes up to this many seconds pay the 5-minute cache-write price; longer ones the 1-hour price."""

DEFAULT_WORKLOAD_SQL = default_workload_sql("c.workload_hint", "c.service")
"""The workload of a call when the build made no `call_workload` (the default workload rule)."""

# caching_fits column <- latency_fits column (the prefill terms of docs/latency.md); a missing one is NULL,
# which the SQL reads as 0 except the per-uncached-token slope, without which there is no fit.
FIT_COLUMNS: dict[str, str] = {
    "ttft_intercept_s": "ttft_intercept_s",
    "ttft_s_per_uncached_token": "ttft_s_per_uncached_token",
    "ttft_s_per_uncached_token_sq": "ttft_s_per_uncached_token_sq",
    "ttft_s_per_cached_token": "ttft_s_per_cached_token",
    "ttft_floor_s": "ttft_floor_s",
}
FIT_KIND = "generation"
"""latency_fits rows of this `kind` time prefill; embeddings have no first token."""

# The SQL stages (pipeline/sql/<name>.sql) in build order.
STAGES: tuple[str, ...] = (
    "caching_calls",
    "caching_blocks",
    "caching_call_prefix_reuse",
    "caching_prices",
    "caching_call_savings",
    "caching_days",
    "caching_opportunity",
    "caching_by_workload",
)

EMPTY_PRICES_SQL = """
CREATE OR REPLACE TEMP TABLE caching_prices (
  call_id VARCHAR, uncached_input DECIMAL(38, 18), cache_read DECIMAL(38, 18), cache_write DECIMAL(38, 18),
  cache_write_1h DECIMAL(38, 18), billed_input_usd DECIMAL(38, 12)
)
"""

_TEMP_TABLES = ("caching_calls", "caching_blocks", "caching_prices", "caching_lifetimes")
_TEMP_VIEWS = ("caching_call_savings", "caching_workload", "caching_fits")


def _columns(con: duckdb.DuckDBPyConnection, name: str) -> set[str] | None:
    """The column names of a table or view (registered Arrow data included), or None when it does not exist."""
    rows = con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = ? "
        "UNION ALL SELECT NULL FROM duckdb_views() WHERE view_name = ? AND NOT internal",
        [name, name],
    ).fetchall()
    if not rows:
        return None
    cols = {r[0] for r in rows if r[0] is not None}
    if not cols:  # a registered Arrow view lists no columns in duckdb_columns(): ask the relation itself
        cols = {d[0] for d in con.execute(f'SELECT * FROM "{name}" LIMIT 0').description}
    return cols


def _prepare_inputs(con: duckdb.DuckDBPyConnection, settings: CachingSettings) -> bool:
    """Temp relations the SQL stages read, whatever optional upstreams this store has. Returns whether
    `caching_fits` holds a fit per UTC day (else one per model, for every day)."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE caching_lifetimes AS SELECT unnest(CAST($lifetimes AS BIGINT[])) AS lifetime_s",
        {"lifetimes": list(settings.lifetimes_s)},
    )
    workload = DEFAULT_WORKLOAD_SQL
    join = ""
    if {"call_id", "workload"} <= (_columns(con, "call_workload") or set()):
        workload, join = f"coalesce(w.workload, {DEFAULT_WORKLOAD_SQL})", "LEFT JOIN call_workload w USING (call_id)"
    con.execute(f"CREATE OR REPLACE TEMP VIEW caching_workload AS SELECT c.call_id, {workload} AS workload "
                f"FROM raw_calls c {join}")
    fit_cols = _columns(con, "latency_fits") or set()
    if {"provider", "model", "ttft_s_per_uncached_token"} <= fit_cols:
        picks = ", ".join(
            f"avg(CAST({src} AS DOUBLE)) AS {dst}" if src in fit_cols else f"CAST(NULL AS DOUBLE) AS {dst}"
            for dst, src in FIT_COLUMNS.items()
        )
        where = f"WHERE kind = '{FIT_KIND}' AND " if "kind" in fit_cols else "WHERE "
        # each call is timed by its own day's fit (latency_fits fits every UTC day on its calls); fits without a
        # day column (one fit per model) time every day's calls
        by_day = "day" in fit_cols
        day, by = ("day", ", day") if by_day else ("CAST(NULL AS DATE)", "")
        con.execute(f"CREATE OR REPLACE TEMP VIEW caching_fits AS SELECT provider, model, {day} AS day, {picks} "
                    f"FROM latency_fits {where}ttft_s_per_uncached_token IS NOT NULL GROUP BY provider, model{by}")
        return by_day
    picks = ", ".join(f"CAST(NULL AS DOUBLE) AS {dst}" for dst in FIT_COLUMNS)
    con.execute("CREATE OR REPLACE TEMP VIEW caching_fits AS SELECT CAST(NULL AS VARCHAR) AS provider, "
                f"CAST(NULL AS VARCHAR) AS model, CAST(NULL AS DATE) AS day, {picks} WHERE false")
    return True


def _has_prices(con: duckdb.DuckDBPyConnection) -> bool:
    return _columns(con, "price_table") is not None and _columns(con, "call_costs") is not None


REUSE_STAGES = STAGES[:3]
"""The per-call part (`call_prefix_reuse`): a call's rows depend on the calls within a cache lifetime of it only,
so an incremental build runs it on the touched days and their neighbours."""
DAY_STAGES = STAGES[3:6]
"""The per-day sums (`caching_days`) of the calls in `raw_calls`: a day's rows depend on its own calls only."""
MERGE_STAGES = STAGES[6:]
"""The whole-store rows, summed from `caching_days`."""


def build_caching(
    con: duckdb.DuckDBPyConnection, settings: CachingSettings | None = None, part: str = "all",
) -> None:
    """Measure prefix reuse per call and cache lifetime (seconds) and price it (USD, seconds of TTFT).

    `part`: "all", "reuse" (REUSE_STAGES), "days" (DAY_STAGES), "merge" (MERGE_STAGES) or "savings" (the last
    two)."""
    settings = settings or CachingSettings()
    stages = {"all": STAGES, "reuse": REUSE_STAGES, "days": DAY_STAGES, "merge": MERGE_STAGES,
              "savings": DAY_STAGES + MERGE_STAGES}[part]
    params = {
        "caching_calls": {"scope": settings.scope},
        "caching_call_prefix_reuse": {"min_block_tokens": settings.min_block_tokens},

        "caching_by_workload": {"lifetime_s": settings.headline_lifetime_s},
    }
    with transaction(con):  # inside `phaselens build`, the build's transaction covers this stage
        fit_by_day = _prepare_inputs(con, settings)
        for name in stages:
            if name == "caching_prices" and not _has_prices(con):
                con.execute(EMPTY_PRICES_SQL)
                continue
            if name == "caching_call_savings":  # a view: no prepared parameters, the constant is written in
                con.execute(sql_text(name).replace("$write_5m_max_s", str(int(WRITE_5M_MAX_S)))
                            .replace("$fit_by_day", str(fit_by_day).lower()))
                continue
            con.execute(sql_text(name), params.get(name, {}))
        for name in _TEMP_TABLES:
            con.execute(f"DROP TABLE IF EXISTS {name}")
        for name in _TEMP_VIEWS:
            con.execute(f"DROP VIEW IF EXISTS {name}")


def published_lifetimes(con: duckdb.DuckDBPyConnection) -> list[int | None]:
    """The cache lifetimes (seconds; None = unlimited) the last build measured, shortest first."""
    if _columns(con, "caching_opportunity") is None:
        return []
    rows = con.execute("SELECT DISTINCT lifetime_s FROM caching_opportunity ORDER BY lifetime_s NULLS LAST").fetchall()
    return [r[0] for r in rows]


def _rows(con: duckdb.DuckDBPyConnection, workload: str, level: str, lifetime_s: int | None) -> list[dict]:
    cur = con.execute(
        "SELECT * FROM caching_opportunity WHERE workload = ? AND level = ? "
        "AND coalesce(lifetime_s, -1) = coalesce(CAST(? AS BIGINT), -1) ORDER BY provider, model",
        [workload, level, lifetime_s],
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def _modelled(rows: list[dict], rate: Decimal) -> tuple[Decimal, int, int, bool]:
    """Input USD with `rate` of every model's input tokens read from cache, at each row's prices, with first
    writes in the proportion to hits the prefix hashes showed at the lifetime (none known: no write premium);
    with the hit and written tokens, and whether the writes were known wherever there is a price."""
    usd_with = Decimal(0)
    hit_tokens = write_tokens = 0
    writes_known = True
    for r in rows:
        writes_per_hit = Decimal(r["write_tokens"]) / r["hit_tokens"] if r["hit_tokens"] else Decimal(0)
        writes_known &= bool(r["hit_tokens"]) or not r["priced_calls"]
        w_share = min(rate * writes_per_hit, 1 - rate)  # share of input written; reads and writes fit in it
        hit_tokens += round(rate * r["input_tokens"])
        write_tokens += round(w_share * r["input_tokens"])
        if r["priced_calls"]:
            usd_with += ((1 - rate - w_share) * r["usd_all_uncached"] + rate * r["usd_all_cache_read"]
                         + w_share * r["usd_all_cache_write"])
    return usd_with, hit_tokens, write_tokens, writes_known


def _money(value: Decimal) -> Decimal:
    return value.quantize(Decimal("1e-12"))


def _sentence(parts: list[str]) -> str:
    text = "; ".join(parts)
    return text[:1].upper() + text[1:] + "." if text else ""


def what_if(con: duckdb.DuckDBPyConnection, workload: str, hit_rate: float | None, lifetime_s: int | None) -> dict:
    """Dollars (USD) and TTFT (seconds per call) a prompt cache would save for a workload if `hit_rate` of its
    input tokens were cache reads, or, with `hit_rate` None, the reuse measured at `lifetime_s` seconds."""
    if hit_rate is not None and not 0 <= hit_rate <= 1:
        raise ValueError(f"hit_rate must be between 0 and 1, got {hit_rate}")
    lifetimes = published_lifetimes(con)
    if lifetime_s not in lifetimes:
        shown = ", ".join("unlimited" if v is None else str(v) for v in lifetimes) or "none"
        raise PhaselensError(
            f"no caching figures for a {lifetime_s} s cache lifetime (built: {shown})",
            "add the lifetime to [caching] lifetimes_s in the configuration and run `phaselens build`",
        )
    head = _rows(con, workload, "workload", lifetime_s)
    if not head:
        raise PhaselensError(f"no workload named {workload!r} in caching_opportunity",
                             "pick a workload from `phaselens workloads`")
    w = head[0]
    out = {
        "workload": workload, "lifetime_s": lifetime_s, "measured": hit_rate is None,
        "calls": w["calls"], "priced_calls": w["priced_calls"], "usd_now": w["usd_now"],
    }
    if hit_rate is None:
        return out | {
            "hit_rate": w["reuse_share"], "input_tokens": w["hashed_input_tokens"], "hit_tokens": w["hit_tokens"],
            "write_tokens": w["write_tokens"], "usd_with_cache": w["usd_with_cache"], "usd_saved": w["usd_saved"],
            "ttft_saved_s_mean": w["ttft_saved_s_mean"], "ttft_saved_p50_s": w["ttft_saved_p50_s"], "note": w["note"],
        }
    rows = _rows(con, workload, "model", lifetime_s)
    usd_with, hit_tokens, write_tokens, writes_known = _modelled(rows, Decimal(str(hit_rate)))
    # the change is measured from today's rate by the same model, so today's rate changes nothing and a lower one
    # costs money; the model's own error (its first writes are a proportion, not the writes made) cancels out
    today = w["achieved_share"] or 0.0
    usd_today = _modelled(rows, Decimal(str(today)))[0]
    ttft_total, ttft_calls = 0.0, 0
    for r in rows:
        if r["ttft_s_per_token_saved"] is not None:
            new_hits = max(hit_rate * r["input_tokens"] - (r["cache_read_tokens"] or 0), 0.0)
            ttft_total += r["ttft_s_per_token_saved"] * new_hits
            ttft_calls += r["calls"]
    priced = bool(w["priced_calls"])
    notes = []
    if not priced:
        notes.append("no per-token price, so no dollar figure")
    elif not writes_known:
        notes.append("no measured reuse to size the first writes, so the cache-write premium is left out")
    if not ttft_calls:
        notes.append("no latency fit, so no TTFT figure")
    saved = usd_today - usd_with
    return out | {
        "hit_rate": hit_rate, "today_hit_rate": today, "input_tokens": w["input_tokens"], "hit_tokens": hit_tokens,
        "write_tokens": write_tokens,
        "usd_with_cache": _money(w["usd_now"] - saved) if priced else None,
        "usd_saved": _money(saved) if priced else None,
        "ttft_saved_s_mean": ttft_total / ttft_calls if ttft_calls else None,
        "ttft_saved_p50_s": None,  # a median needs the per-call figures, which only the measured case has
        "note": _sentence(notes),
    }
