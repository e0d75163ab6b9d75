"""The fuzz run as a command: `python -m tests.fuzz.run [--long] [--seed N] [--adapter NAME ...]`.

Prints tried/held per adapter and each mutant that broke a rule; exit 1 when any did. `--long` uses every
seed file of each adapter and more mutants per seed than the bounded run in the test suite.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from .harness import LONG, LONG_FOR, SEEDS, run_adapter, summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__.splitlines()[0])
    ap.add_argument("--long", action="store_true", help="every seed, more mutants per seed")
    ap.add_argument("--seed", type=int, default=11, help="random seed (the run is reproducible per seed)")
    ap.add_argument("--adapter", action="append", choices=sorted(SEEDS), help="only these adapters")
    ap.add_argument("--dump", type=Path, help="write each mutant that broke a rule into this folder")
    args = ap.parse_args(argv)
    reports = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="phaselens-fuzz-") as tmp:
        for name in args.adapter or sorted(SEEDS):
            seeds = SEEDS[name] if args.long else SEEDS[name][:1]
            r = run_adapter(name, Path(tmp) / name, seed=args.seed, sizes=LONG_FOR.get(name, LONG) if args.long else None, seeds=seeds,
                             dump=args.dump / name if args.dump else None)
            reports.append(r)
            print(f"{name:18} tried {r.tried:5d}  held {r.held:5d}", flush=True)
            for f in r.failures:
                print(f"    {f[:500]}", flush=True)
    print(summary(reports))
    print(f"{time.monotonic() - started:.0f} s, seed {args.seed}")
    return 0 if all(r.held == r.tried for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
