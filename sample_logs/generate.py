"""Sample-data generator: one simulated day of an AI code editor's LLM traffic, as OTLP JSON traces.

Example:
    python -m phaselens.sample_logs.generate --seed 7 --calls 6000 --out sample_logs/traces
    python -m phaselens.sample_logs.generate --seed 7 --spans 1000000 --single-file /tmp/spans.jsonl

`simulate()` gives the ground truth (every call, untraced ones included); `write_traces()` emits the
traced calls through the OpenTelemetry SDK. Keeping the two apart lets billing exports be built from
the same truth.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from datetime import date
from pathlib import Path

from phaselens.sample_logs.simcall import SimCall
from phaselens.sample_logs.simulate import DEFAULT_DAY, iter_simulate, simulate, workload_counts
from phaselens.sample_logs.spans import TraceRenderer
from phaselens.sample_logs.truth import TruthWriter, write_truth
from phaselens.sample_logs.writer import TraceSummary, chunk_traces, write_traces

__all__ = [
    "SimCall", "simulate", "iter_simulate", "workload_counts", "write_traces", "write_truth", "TraceSummary",
    "generate", "calls_for_spans", "main",
]

_PILOT_CALLS = 5_000  # calls simulated (spans created, not encoded) to measure spans per call for --spans
_SPANS_HEADROOM = 1.02  # simulate slightly more calls than needed so the span target is always reached


def spans_per_call(seed: int, day: date = DEFAULT_DAY) -> float:
    """Average spans per simulated call (non-LLM spans included), counted on a pilot day (not encoded)."""
    renderer = TraceRenderer(count_only=True)
    chunks = chunk_traces(iter_simulate(seed, _PILOT_CALLS, day))
    return sum(renderer.render([t for t in chunk if t[0].traced]).spans for chunk in chunks) / _PILOT_CALLS


def calls_for_spans(spans: int, seed: int, day: date = DEFAULT_DAY) -> int:
    """Number of calls to simulate so that writing them yields at least `spans` spans."""
    return max(1, math.ceil(spans / spans_per_call(seed, day) * _SPANS_HEADROOM))


def generate(
    seed: int,
    calls: int | None = None,
    *,
    out_dir: Path | None = None,
    single_file: Path | None = None,
    spans: int | None = None,
    truth: Path | None = None,
    day: date = DEFAULT_DAY,
    batch_spans: int = 256,
    workers: int = 1,
) -> TraceSummary:
    """Simulate and write in one streaming pass; returns what was written (memory stays bounded)."""
    if spans is not None:
        calls = calls_for_spans(spans, seed, day)
    if calls is None:
        raise ValueError("give calls or spans")
    truth_writer = TruthWriter(truth) if truth else None
    try:
        return write_traces(
            iter_simulate(seed, calls, day), out_dir, single_file=single_file, batch_spans=batch_spans,
            max_spans=spans, on_trace=truth_writer.add if truth_writer else None, seed=seed, workers=workers,
        )
    finally:
        if truth_writer:
            truth_writer.close()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m phaselens.sample_logs.generate",
        description="Simulate a day of an AI code editor's LLM traffic and write it as OTLP JSON traces.",
        epilog="Example: python -m phaselens.sample_logs.generate --seed 7 --calls 6000 --out sample_logs/traces",
    )
    p.add_argument("--seed", type=int, default=7, help="random seed; same seed, same bytes (default 7)")
    p.add_argument("--calls", type=int, default=6000, help="LLM calls to simulate, untraced ones included")
    p.add_argument("--spans", type=int, help="instead of --calls: write at least this many spans (benchmarks)")
    p.add_argument("--out", type=Path, help="directory for one file per service")
    p.add_argument("--single-file", type=Path, help="write all spans to this one file (.jsonl or .jsonl.gz)")
    p.add_argument("--truth", type=Path, help="also write the ground truth to this .csv or .parquet file")
    p.add_argument("--day", type=date.fromisoformat, default=DEFAULT_DAY, help="simulated UTC day (YYYY-MM-DD)")
    p.add_argument("--batch-spans", type=int, default=256, help="spans per JSON line (export batch)")
    p.add_argument("--workers", type=int, default=1,
                   help="processes rendering spans (same output for any count; 2 halves the time of big runs)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; prints a one-line summary and returns the exit code."""
    args = _parser().parse_args(argv)
    if (args.out is None) == (args.single_file is None):
        print("Error: give exactly one of --out DIR and --single-file PATH.", file=sys.stderr)
        return 2
    started = time.perf_counter()
    summary = generate(
        args.seed, None if args.spans else args.calls, out_dir=args.out, single_file=args.single_file,
        spans=args.spans, truth=args.truth, day=args.day, batch_spans=args.batch_spans, workers=args.workers,
    )
    where = args.single_file or args.out
    print(
        f"wrote {summary.spans:,} spans ({summary.llm_spans:,} LLM calls in {summary.traces:,} traces; "
        f"{summary.untraced_calls:,} untraced calls left out) to {len(summary.files)} file(s) in {where}, "
        f"{summary.bytes_written / 1e6:.1f} MB, in {time.perf_counter() - started:.1f} s"
        + (f"; truth: {args.truth}" if args.truth else "")
    )
    if args.spans and summary.spans < args.spans:
        print(f"Warning: the simulated day ended at {summary.spans:,} spans, short of {args.spans:,}; size the day "
              f"directly with --calls (a call makes about {summary.spans / max(summary.llm_spans, 1):.1f} spans).",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
