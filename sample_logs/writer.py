"""Write simulated calls as OTLP JSON Lines trace files: chunked, optionally on several processes.

Traces are cut into chunks of a fixed number of traces; each chunk is rendered to JSON lines (in
this process or a worker) and written in order, so the bytes do not depend on the worker count.
At most a few chunks are in flight, which keeps memory flat however many calls stream through.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from phaselens.sample_logs.otlp_json import JsonLinesFile
from phaselens.sample_logs.simcall import SimCall
from phaselens.sample_logs.spans import ChunkResult, TraceRenderer

GZIP_SERVICES = frozenset({"editor-tab", "editor-inline", "editor-chat"})  # plain, the 6,000-call day is ~11 MB
CHUNK_TRACES = 400  # traces per rendering task


@dataclass
class TraceSummary:
    """What `write_traces` wrote."""

    files: list[Path] = field(default_factory=list)
    traces: int = 0
    spans: int = 0
    llm_spans: int = 0
    untraced_calls: int = 0
    bytes_written: int = 0


def write_traces(
    calls: Iterable[SimCall],
    out_dir: Path | None = None,
    *,
    single_file: Path | None = None,
    batch_spans: int = 256,
    gzip_services: frozenset[str] = GZIP_SERVICES,
    max_spans: int | None = None,
    on_trace: Callable[[list[SimCall]], None] | None = None,
    seed: int = 0,
    workers: int = 1,
) -> TraceSummary:
    """Write the traced calls as OTLP JSON Lines: one file per calling service, or all in `single_file`.

    `calls` may be any iterable (a generator keeps memory flat); a trace's calls must be adjacent.
    Untraced calls are not written. With `max_spans`, writing stops at the end of the first chunk
    that reaches that many spans. `on_trace` gets every group of calls that was written or skipped
    as untraced, in order. `workers` > 1 renders on that many processes; the output is the same.
    """
    if (out_dir is None) == (single_file is None):
        raise ValueError("give exactly one of out_dir and single_file")
    summary = TraceSummary()
    files: dict[str, JsonLinesFile] = {}

    def file_for(group: str) -> JsonLinesFile:
        if group not in files:
            if single_file is not None:
                path = Path(single_file)
            else:
                path = Path(out_dir) / (f"{group}.jsonl.gz" if group in gzip_services else f"{group}.jsonl")
            files[group] = JsonLinesFile(path)
        return files[group]

    params = (batch_spans, single_file is not None, seed)
    results = _render_all(chunk_traces(calls), params, workers)
    try:
        for chunk, result in results:
            for group, lines in result.lines.items():
                out = file_for(group)
                for line in lines:
                    out.write_line(line)
            summary.traces += result.traces
            summary.spans += result.spans
            summary.llm_spans += result.llm_spans
            summary.untraced_calls += sum(len(trace) for trace in chunk if not trace[0].traced)
            if on_trace is not None:
                for trace in chunk:
                    on_trace(trace)
            if max_spans is not None and summary.spans >= max_spans:
                break
    finally:
        results.close()  # stops the worker pool, if any
        for out in files.values():
            out.close()
            summary.files.append(out.path)
            summary.bytes_written += out.path.stat().st_size
    return summary


def chunk_traces(calls: Iterable[SimCall]) -> Iterator[list[list[SimCall]]]:
    """Group adjacent calls into traces (untraced calls become single-call groups), CHUNK_TRACES at a time."""
    chunk: list[list[SimCall]] = []
    group: list[SimCall] = []
    for call in calls:
        key = call.trace_id or call.call_id
        if group and key != (group[0].trace_id or group[0].call_id):
            chunk.append(group)
            group = []
            if len(chunk) >= CHUNK_TRACES:
                yield chunk
                chunk = []
        group.append(call)
    if group:
        chunk.append(group)
    if chunk:
        yield chunk


_RENDERER: TraceRenderer | None = None


def _render(chunk: list[list[SimCall]], params: tuple) -> ChunkResult:
    """Render one chunk with this process's renderer (created on first use)."""
    global _RENDERER
    if _RENDERER is None or _RENDERER.params != params:  # renderers carry no state from trace to trace
        _RENDERER = TraceRenderer(*params)
    return _RENDERER.render([trace for trace in chunk if trace[0].traced])


def _fresh_renderer() -> None:
    """Drop a renderer inherited through fork: the SDK stamps a random `service.instance.id` on
    tracer providers that live through a fork, which would make the output differ from a serial run."""
    global _RENDERER
    _RENDERER = None


def _render_all(chunks: Iterator[list[list[SimCall]]], params: tuple, workers: int):
    """Yield (chunk, result) in order, rendering on `workers` processes with a bounded queue."""
    if workers <= 1:
        for chunk in chunks:
            yield chunk, _render(chunk, params)
        return
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with context.Pool(workers, initializer=_fresh_renderer) as pool:
        pending: deque = deque()
        for chunk in chunks:
            pending.append((chunk, pool.apply_async(_render, (chunk, params))))
            if len(pending) >= 2 * workers:
                done_chunk, job = pending.popleft()
                yield done_chunk, job.get()
        while pending:
            done_chunk, job = pending.popleft()
            yield done_chunk, job.get()
