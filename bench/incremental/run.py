#!/usr/bin/env python3
"""Incremental build and publish at scale: a store of D days x N calls/day, each step against a baseline of the
same run.

    bench/incremental/run.py                                   # 30 days x 330,000 calls (about 10 M)
    bench/incremental/run.py --days 5 --calls-per-day 100000   # smaller
    bench/incremental/run.py --json                            # the figures as JSON

The calls are synthesised in DuckDB SQL with the shapes of bench/build (the sample day's five workloads on six
models, a third without TTFT, prefix hashes on agent calls), one load per day, each day with billing lines per
(provider, model, token type) so reconciliation has work. Steps, each in its own process (wall time, peak RSS):

1. full build of the D-day store, then a full publish of its snapshot;
2. one more day loaded, then an incremental build and an incremental publish;
3. one late file (N/30 calls) for an old day, then an incremental build and an incremental publish;
4. a full build of that one new day alone (a store holding only it), the yardstick of step 2's build.

Baselines, in the same run: a plain DuckDB aggregate (one GROUP BY with the sums and percentiles a workload
report needs) over the same calls as each step: all calls, the new day's, the late file's. The full build is also
set beside a write floor: the per-call tables it made, copied as they are into new tables of the same store (what
writing its outputs costs, with none of the work that computes them). The store's file size is given per million
calls beside the raw calls alone in a DuckDB file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV_PY = HERE.parent.parent / ".venv" / "bin" / "python"
if VENV_PY.exists() and Path(sys.prefix).resolve() != VENV_PY.parent.parent.resolve():
    os.execv(str(VENV_PY), [str(VENV_PY), __file__, *sys.argv[1:]])  # run inside the project's environment
PY = sys.executable
START = "2026-10-01"

# Calls $first_day .. $first_day + $days - 1, $n per day (or $n calls of day $first_day when $late), spread
# evenly over each day; one load per day (`bench-d<k>`, or `bench-late-d<k>`).
SYNTH = """
INSERT INTO raw_calls BY NAME
WITH base AS (
  SELECT i, $first_day + i // $n AS d, i % $n AS j,
         (hash(i + $seed) % 1000003)::BIGINT AS h, (hash(i * 7 + 3 + $seed) % 1000003)::BIGINT AS h2
  FROM range($n * $days) r(i)
),
shaped AS (
  SELECT *,
    TIMESTAMP '{start}' + to_microseconds((d * 86400000000 + (j * 86400000000 + CASE WHEN $late THEN 43 ELSE 0 END) // $n)::BIGINT) AS t,
    ['tab_completion', 'tab_completion', 'tab_completion', 'inline_edit', 'chat', 'chat', 'agent', 'indexing'][1 + h % 8] AS workload,
    (h2 % 1000) / 1000.0 AS u
  FROM base
),
typed AS (
  SELECT *,
    CASE workload WHEN 'tab_completion' THEN 'vllm' WHEN 'inline_edit' THEN 'anthropic' WHEN 'agent' THEN
      CASE WHEN h % 4 = 0 THEN 'openai' ELSE 'anthropic' END ELSE 'openai' END AS provider,
    CASE workload WHEN 'tab_completion' THEN 'qwen2.5-coder-7b' WHEN 'inline_edit' THEN 'claude-sonnet-4-20250514'
      WHEN 'agent' THEN CASE WHEN h % 4 = 0 THEN 'o4-mini-2025-04-16' ELSE 'claude-sonnet-4-20250514' END
      WHEN 'indexing' THEN 'text-embedding-3-small'
      ELSE CASE WHEN h % 2 = 0 THEN 'gpt-4o-2024-08-06' ELSE 'gpt-4.1-mini-2025-04-14' END END AS model_raw,
    CASE workload WHEN 'tab_completion' THEN 1500 + (u * 6500)::BIGINT WHEN 'inline_edit' THEN 2000 + (u * 6000)::BIGINT
      WHEN 'agent' THEN 20000 + (u * 100000)::BIGINT WHEN 'indexing' THEN 500 + (u * 7500)::BIGINT
      ELSE 1000 + (u * 19000)::BIGINT END AS input_tokens,
    CASE workload WHEN 'tab_completion' THEN 4 + (u * 36)::BIGINT WHEN 'inline_edit' THEN 80 + (u * 420)::BIGINT
      WHEN 'agent' THEN 200 + (u * 2800)::BIGINT WHEN 'indexing' THEN 0 ELSE 200 + (u * 1300)::BIGINT END AS out_tokens
  FROM shaped
),
timed AS (
  SELECT *,
    0.05 + input_tokens / 12000.0 AS ttft, greatest(out_tokens - 1, 0) * 0.015 AS decode,
    CASE WHEN workload = 'agent' THEN (input_tokens * 0.7)::BIGINT ELSE 0 END AS cached
  FROM typed
)
SELECT
  'bench:' || CASE WHEN $late THEN 'late:' ELSE '' END || d || ':' || j AS call_id, 'bench' AS source,
  CASE WHEN $late THEN 'bench-late-d' ELSE 'bench-d' END || d AS load_id,
  'synth-day-' || d || '.jsonl:' || j AS source_locator,
  t AS started_at, t + to_microseconds(((ttft + decode) * 1e6)::BIGINT) AS ended_at,
  normalize_provider(provider) AS provider, normalize_model(model_raw) AS model, model_raw,
  CASE WHEN workload = 'indexing' THEN 'embeddings' ELSE 'chat' END AS operation,
  'editor-' || workload AS service, workload AS workload_hint,
  input_tokens - cached AS uncached_input_tokens, cached AS cache_read_tokens, 0 AS cache_write_tokens,
  out_tokens AS output_tokens,
  ttft + decode AS e2e_s,
  CASE WHEN h % 3 = 0 OR workload = 'indexing' THEN NULL ELSE ttft END AS ttft_s,
  CASE WHEN workload = 'indexing' THEN ttft + decode WHEN h % 3 = 0 THEN NULL ELSE ttft END AS prefill_s,
  CASE WHEN workload = 'indexing' THEN 0 WHEN h % 3 = 0 THEN NULL ELSE decode END AS decode_s,
  CASE WHEN workload = 'indexing' OR h % 3 <> 0 THEN 'measured' ELSE 'none' END AS timing_source,
  'ok' AS status,
  CASE WHEN workload = 'agent' THEN ['r' || (h % 40), 'r' || (h % 40) || ':' || (h2 % 5)] END AS prefix_hashes,
  CASE WHEN workload = 'agent' THEN [(input_tokens * 0.6)::BIGINT, input_tokens] END AS prefix_tokens
FROM timed
""".replace("{start}", START)

# Billing lines of the API providers per (day, provider, model, token type) of the calls just loaded, at a flat
# USD 2 per M uncached input, 0.2 per M cache read, 8 per M output tokens: a bill like the providers' daily exports.
BILLING = """
INSERT INTO raw_billing_lines BY NAME
WITH c AS (
  SELECT date_trunc('day', started_at) AS day, provider, model, model_raw,
         sum(uncached_input_tokens) AS uncached_input, sum(cache_read_tokens) AS cache_read, sum(output_tokens) AS output
  FROM raw_calls WHERE load_id LIKE $load AND provider IN ('openai', 'anthropic') GROUP BY ALL
),
l AS (
  SELECT day, provider, model, model_raw, 'uncached_input' AS token_type, uncached_input AS q, 2.0 AS usd_per_m FROM c
  UNION ALL SELECT day, provider, model, model_raw, 'cache_read', cache_read, 0.2 FROM c
  UNION ALL SELECT day, provider, model, model_raw, 'output', output, 8.0 FROM c
)
SELECT md5(concat_ws('|', $load, day, provider, model, token_type)) AS billing_line_id,
       day AS period_start, day + INTERVAL 1 DAY AS period_end, provider, model, model_raw, token_type,
       CAST(q AS DECIMAL(38, 0)) AS quantity_tokens, CAST(q * usd_per_m / 1e6 AS DECIMAL(38, 12)) AS cost,
       'USD' AS currency, CAST(q * usd_per_m / 1e6 AS DECIMAL(38, 12)) AS cost_usd, 'usage' AS charge_category,
       'bench' AS source, $load AS load_id, 'synth-billing' AS source_locator
FROM l
"""

LEDGER = """
INSERT INTO raw_loads (load_id, run_id, file, adapter, kind, started_at, finished_at, accepted, duplicates, rejected,
                       skipped, status, message)
SELECT load_id, 'bench', any_value(split_part(source_locator, ':', 1)), 'bench', 'calls', now()::TIMESTAMP,
       now()::TIMESTAMP, count(*), 0, 0, 0, 'loaded', NULL
FROM raw_calls WHERE load_id LIKE $load GROUP BY load_id
"""

BASELINE = """
CREATE OR REPLACE TEMP TABLE baseline AS
SELECT coalesce(workload_hint, service) AS workload, count(*) AS calls,
       sum(uncached_input_tokens), sum(cache_read_tokens), sum(output_tokens),
       quantile_cont(ttft_s, [0.5, 0.9, 0.95, 0.99]), quantile_cont(e2e_s, [0.5, 0.95]),
       sum(prefill_s), sum(decode_s)
FROM raw_calls WHERE load_id LIKE ? GROUP BY ALL
"""

# One step in its own process: argv = step, db, [args]; prints a JSON line with what the step returns.
STEP = r"""
import json, sys, time
import duckdb
from phaselens.models.config import Config
from phaselens.pipeline.store import connect
step, db = sys.argv[1], sys.argv[2]
t = time.perf_counter()
out = {}
if step == "synth":
    first, days, n, late, seed = (int(x) for x in sys.argv[3:8])
    con = connect(db)
    load = ("bench-late-d" if late else "bench-d") + ("%" if days > 1 else str(first))
    con.execute(SYNTH, {"first_day": first, "days": days, "n": n, "late": bool(late), "seed": seed})
    con.execute(LEDGER, {"load": load})
    con.execute(BILLING, {"load": load})
    out["calls"] = con.execute("SELECT count(*) FROM raw_calls").fetchall()[0][0]
elif step == "basis":  # what the store stands at before a load: the publish after it names this basis
    from phaselens.pipeline.publish import store_basis
    out["basis"] = store_basis(connect(db))
elif step == "baseline":
    con = duckdb.connect(db)
    con.execute(BASELINE, [sys.argv[3]])
elif step == "build":
    from phaselens.pipeline.build import build
    from phaselens.pipeline.publish import store_basis
    con = connect(db)
    out["basis"] = store_basis(con)
    import inspect
    if "full" in inspect.signature(build).parameters:
        result = build(con, Config(), full=sys.argv[3] == "full")
    else:  # a build without the incremental mode rebuilds everything
        result = build(con, Config())
        out["build_mode"] = "full (no incremental build)"
    out["seconds"] = {k: round(v, 2) for k, v in result.seconds.items()}
    from phaselens.pipeline.publish import build_days
    days = build_days(result)  # None after a full build: the publish computes every day
    out["days"] = None if days is None else sorted(str(d) for d in days)
    out["full"], out["reason"] = getattr(result, "full", True), getattr(result, "reason", "")
elif step == "floor":  # the build's per-call tables copied as they are: what writing its outputs alone costs
    from phaselens.pipeline.incremental import BY_START_COLUMN
    con = connect(db)
    names = sorted(BY_START_COLUMN | {"allocated_costs", "whatif_calls"})
    copy_t = time.perf_counter()  # the copies and their commit, not the clean-up below
    con.execute("BEGIN")
    for name in names:
        con.execute(f"CREATE TABLE floor_{name} AS SELECT * FROM {name}")
    con.execute("COMMIT")
    out["copy_s"] = time.perf_counter() - copy_t
    out["rows"] = {n: con.execute(f"SELECT count(*) FROM floor_{n}").fetchall()[0][0] for n in names}
    for name in names:
        con.execute(f"DROP TABLE floor_{name}")
    con.execute("CHECKPOINT")
elif step == "publish":
    from datetime import date
    from phaselens.pipeline.publish import publish
    con = connect(db)
    days = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
    since = sys.argv[4] if len(sys.argv) > 4 else None
    path = publish(con, db, Config(), days=None if days is None else [date.fromisoformat(d) for d in days], since=since)
    with duckdb.connect(str(path), read_only=True) as s:
        meta = dict(s.execute("SELECT key, value FROM published_meta").fetchall())
    out["computed_days"] = meta.get("computed_days")
    out["snapshot_mb"] = round(path.stat().st_size / 1e6, 1)
out["wall_s"] = time.perf_counter() - t
print("RESULT " + json.dumps(out))
""".replace("SYNTH", repr(SYNTH)).replace("LEDGER", repr(LEDGER)).replace("BILLING", repr(BILLING)).replace(
    "BASELINE", repr(BASELINE))


def measured(*argv: str) -> dict:
    """A step measured with os.wait4, so the peak RSS is that process's own."""
    t = time.perf_counter()
    proc = subprocess.Popen([PY, "-c", STEP, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    out, err = proc.stdout.read(), proc.stderr.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"step {' '.join(argv[:1])} failed:\n{err[-3000:]}")
    line = next(x for x in out.splitlines() if x.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))
    result["process_s"] = round(wall, 2)
    result["peak_mb"] = round(usage.ru_maxrss / 1024)
    return result


def mb(path: Path) -> float:
    return path.stat().st_size / 1e6


def run(days: int, n: int, seed: int, log) -> dict:
    work = Path(tempfile.mkdtemp(prefix="phaselens-bench-incr-"))
    r: dict = {"days": days, "calls_per_day": n}
    try:
        db, one, raw = work / "store.duckdb", work / "one-day.duckdb", work / "raw.duckdb"
        late_day, late_n = days // 2, max(n // 30, 1)

        s = measured("synth", str(db), "0", str(days), str(n), "0", str(seed))
        r["calls"] = s["calls"]
        r["synth_s"] = round(s["wall_s"], 1)
        log(f"synthesised {s['calls']:,} calls ({days} days) in {s['wall_s']:.1f} s")
        shutil.copy(db, raw)  # the raw calls alone, before any build: the size baseline
        r["raw_mb_per_m_calls"] = round(mb(raw) / (s["calls"] / 1e6), 1)
        raw.unlink()

        # 1. full build and full publish of the D-day store
        r["baseline_all_s"] = measured("baseline", str(db), "bench-d%")["wall_s"]
        b = measured("build", str(db), "full")
        r["full_build_s"], r["full_build_peak_mb"], r["full_build_stages"] = b["wall_s"], b["peak_mb"], b["seconds"]
        r["build_mode"] = b.get("build_mode", "incremental")
        log(f"full build {b['wall_s']:.1f} s, peak {b['peak_mb']:,} MB (baseline {r['baseline_all_s']:.2f} s)")
        f = measured("floor", str(db))
        r["write_floor_s"], r["write_floor_rows"] = f["copy_s"], f["rows"]
        log(f"the build's per-call tables copied as they are: {f['copy_s']:.1f} s ({sum(f['rows'].values()):,} rows)")
        p = measured("publish", str(db))
        r["full_publish_s"], r["full_publish_peak_mb"], r["snapshot_mb"] = p["wall_s"], p["peak_mb"], p["snapshot_mb"]
        log(f"full publish {p['wall_s']:.1f} s")
        r["store_mb_per_m_calls"] = round(mb(db) / (r["calls"] / 1e6), 1)

        # 2. one more day, incremental build and publish (the basis is read before the load changes the store)
        basis = measured("basis", str(db))["basis"]
        measured("synth", str(db), str(days), "1", str(n), "0", str(seed))
        r["baseline_day_s"] = measured("baseline", str(db), f"bench-d{days}")["wall_s"]
        b = measured("build", str(db), "incremental")
        r["day_build_s"], r["day_build_peak_mb"], r["day_build_days"] = b["wall_s"], b["peak_mb"], b["days"]
        r["day_build_stages"], r["day_build_full"], r["day_build_reason"] = b["seconds"], b["full"], b["reason"]
        p = measured("publish", str(db), json.dumps(b["days"]), basis) if b["days"] is not None else \
            measured("publish", str(db))
        r["day_publish_s"], r["day_publish_computed"] = p["wall_s"], p["computed_days"]
        log(f"new day: build {b['wall_s']:.1f} s (days {b['days']}), publish {p['wall_s']:.1f} s "
            f"(computed {p['computed_days']}; baseline {r['baseline_day_s']:.2f} s)")

        # 3. a late file for an old day, incremental build and publish
        basis = measured("basis", str(db))["basis"]
        measured("synth", str(db), str(late_day), "1", str(late_n), "1", str(seed + 1))
        r["late_calls"] = late_n
        r["baseline_late_s"] = measured("baseline", str(db), f"bench-late-d{late_day}")["wall_s"]
        b = measured("build", str(db), "incremental")
        r["late_build_s"], r["late_build_peak_mb"], r["late_build_days"] = b["wall_s"], b["peak_mb"], b["days"]
        r["late_build_stages"], r["late_build_full"] = b["seconds"], b["full"]
        p = measured("publish", str(db), json.dumps(b["days"]), basis) if b["days"] is not None else \
            measured("publish", str(db))
        r["late_publish_s"], r["late_publish_computed"] = p["wall_s"], p["computed_days"]
        log(f"late file: build {b['wall_s']:.1f} s (days {b['days']}), publish {p['wall_s']:.1f} s")
        r["total_calls"] = r["calls"] + n + late_n

        # 4. the new day alone, fully built: the yardstick of the incremental build of step 2
        measured("synth", str(one), str(days), "1", str(n), "0", str(seed))
        b = measured("build", str(one), "full")
        r["one_day_full_build_s"] = b["wall_s"]
        log(f"one day alone: full build {b['wall_s']:.1f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    r["ratios"] = {
        "full_build_vs_aggregate": round(r["full_build_s"] / r["baseline_all_s"], 1),
        "write_floor_vs_aggregate": round(r["write_floor_s"] / r["baseline_all_s"], 1),
        "full_build_vs_write_floor": round(r["full_build_s"] / r["write_floor_s"], 2),
        "day_build_vs_one_day_full_build": round(r["day_build_s"] / r["one_day_full_build_s"], 2),
        "day_build_vs_day_aggregate": round(r["day_build_s"] / r["baseline_day_s"], 1),
        "late_build_vs_late_aggregate": round(r["late_build_s"] / r["baseline_late_s"], 1),
        "day_publish_vs_full_publish": round(r["day_publish_s"] / r["full_publish_s"], 3),
        "store_size_vs_raw_calls": round(r["store_mb_per_m_calls"] / r["raw_mb_per_m_calls"], 2),
    }
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--calls-per-day", type=int, default=330_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    r = run(args.days, args.calls_per_day, args.seed, lambda m: print(m, file=sys.stderr, flush=True))
    if args.json:
        print(json.dumps(r, indent=2))
        return
    q = r["ratios"]
    print(f"{r['days']} days x {r['calls_per_day']:,} calls ({r['calls']:,}); build mode: {r['build_mode']}")
    print(f"  full build        {r['full_build_s']:8.1f} s  peak {r['full_build_peak_mb']:,} MB | plain aggregate "
          f"{r['baseline_all_s']:.2f} s | {q['full_build_vs_aggregate']}x")
    print(f"  write floor       {r['write_floor_s']:8.1f} s  (its per-call tables copied) | "
          f"{q['write_floor_vs_aggregate']}x the aggregate; the full build is {q['full_build_vs_write_floor']}x it")
    print(f"  + one day, build  {r['day_build_s']:8.1f} s  peak {r['day_build_peak_mb']:,} MB | that day alone, full "
          f"build {r['one_day_full_build_s']:.1f} s | {q['day_build_vs_one_day_full_build']}x "
          f"(day aggregate {r['baseline_day_s']:.2f} s, {q['day_build_vs_day_aggregate']}x)")
    print(f"  + late file, build {r['late_build_s']:7.1f} s  peak {r['late_build_peak_mb']:,} MB | aggregate of its "
          f"{r['late_calls']:,} calls {r['baseline_late_s']:.2f} s | {q['late_build_vs_late_aggregate']}x")
    print(f"  publish full      {r['full_publish_s']:8.1f} s | incremental after the day {r['day_publish_s']:.1f} s "
          f"({q['day_publish_vs_full_publish']}x), after the late file {r['late_publish_s']:.1f} s "
          f"(snapshot {r['snapshot_mb']} MB)")
    print(f"  store file        {r['store_mb_per_m_calls']:8.1f} MB per M calls | raw calls alone "
          f"{r['raw_mb_per_m_calls']} MB per M | {q['store_size_vs_raw_calls']}x")


if __name__ == "__main__":
    main()
