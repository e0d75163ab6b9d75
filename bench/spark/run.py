#!/usr/bin/env python3
"""The build on Spark local[2] against the DuckDB build in the same run, and Spark's growth with size.

    bench/spark/run.py                                  # 1,000,000 calls; then 4,000,000 on Spark (growth)
    bench/spark/run.py --calls 200000 --grow 0          # smaller, no growth step
    bench/spark/run.py --master local[4]

The calls are synthesised with bench/build's SQL (a day of five workloads on six models). Steps, each in
its own process (wall seconds, peak RSS of the phaselens process; Spark's JVM is a child and not counted):

1. `phaselens build --db` of N calls (DuckDB, the baseline);
2. `phaselens export --lake`, then `phaselens build --engine spark --lake --spark-master local[2]` of the same
   calls: the ratio Spark / DuckDB;
3. with --grow M: the same Spark build of M calls: Spark's time at M over its time at N, beside M / N.

The point is parity and a path to scale, not beating DuckDB on two cores: Spark pays a JVM start, a
scheduler and a checkpoint per relation, which more machines amortise.
"""
from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
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


def _bench_build():
    loader = importlib.machinery.SourceFileLoader("bench_build", str(HERE.parent / "build"))
    spec = importlib.util.spec_from_loader("bench_build", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def timed(argv: list[str], log: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of a command; its stderr goes to `log`."""
    t = time.perf_counter()
    with open(log, "wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(argv)}\n{log.read_text()[-3000:]}")
    return time.perf_counter() - t, usage.ru_maxrss / 1024


def spark_build(work: Path, n: int, master: str, bb) -> tuple[float, float, float, float]:
    """(DuckDB build s, Spark build s, DuckDB MB, driver MB) for n synthesised calls."""
    db, lake = work / f"store-{n}.duckdb", work / f"lake-{n}"
    bb.make_store(db, n)
    duck_s, duck_mb = timed([PY, "-m", "phaselens", "build", "--db", str(db), "--full"], work / f"duck-{n}.log")
    timed([PY, "-m", "phaselens", "export", "--db", str(db), "--lake", str(lake)], work / f"export-{n}.log")
    spark_s, spark_mb = timed([PY, "-m", "phaselens", "build", "--engine", "spark", "--lake", str(lake),
                               "--spark-master", master], work / f"spark-{n}.log")
    return duck_s, spark_s, duck_mb, spark_mb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--grow", type=int, default=4_000_000, help="a second, larger Spark build (0: none)")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    bb = _bench_build()
    work = Path(tempfile.mkdtemp(prefix="phaselens-bench-spark-"))
    try:
        duck_s, spark_s, duck_mb, spark_mb = spark_build(work, args.calls, args.master, bb)
        print(f"{args.calls:>10,} calls: DuckDB build {duck_s:.1f} s ({duck_mb:,.0f} MB) | Spark {args.master} build "
              f"{spark_s:.1f} s (driver {spark_mb:,.0f} MB) | Spark / DuckDB {spark_s / duck_s:.2f}x")
        if args.grow:
            duck_big, spark_big, duck_big_mb, spark_big_mb = spark_build(work, args.grow, args.master, bb)
            print(f"{args.grow:>10,} calls: DuckDB build {duck_big:.1f} s ({duck_big_mb:,.0f} MB) | Spark {args.master} "
                  f"build {spark_big:.1f} s (driver {spark_big_mb:,.0f} MB) | Spark / DuckDB {spark_big / duck_big:.2f}x")
            print(f"growth for {args.grow / args.calls:.1f}x the calls: Spark {spark_big / spark_s:.2f}x, "
                  f"DuckDB {duck_big / duck_s:.2f}x")
        for log in sorted(work.glob("spark-*.log")):  # the Spark builds' stage times, slowest first
            stages = [ln.split() for ln in log.read_text().splitlines() if ln.strip().endswith(" s") and len(ln.split()) == 3]
            slow = sorted(((float(t), name) for name, t, _ in stages if t.replace(".", "", 1).isdigit()), reverse=True)[:5]
            print(f"{log.stem}: slowest stages " + ", ".join(f"{name} {t:.1f} s" for t, name in slow))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
