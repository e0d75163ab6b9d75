"""OpenTelemetry SDK plumbing: seeded ids, deterministic batching, and an OTLP JSON Lines exporter.

The exporter writes what the OpenTelemetry Collector's file exporter writes with `format: json`:
one complete `{"resourceSpans": [...]}` export request per line, lowerCamelCase keys, trace and span
ids as lowercase hex, 64-bit integers as decimal strings, enums as integers, default values omitted.
"""

from __future__ import annotations

import base64
import gzip
import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator

_ID_KEYS = ("traceId", "spanId", "parentSpanId")


class SeededIdGenerator(IdGenerator):
    """Ids from a seeded generator, with the option to pin the next trace or span id to a known value.

    The simulation decides the ids of traces and LLM spans (they are part of the ground truth); the
    writer pins them just before the SDK asks. Every other span id comes from a generator reseeded
    at the start of each trace, so a trace's ids do not depend on what was written before it.
    """

    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)
        self._next_trace: int | None = None
        self._next_span: int | None = None

    def begin_trace(self, trace_id_hex: str) -> None:
        """Make `trace_id_hex` the next root span's trace id and reseed the span ids from it."""
        self._next_trace = int(trace_id_hex, 16)
        self._rng.seed(self._next_trace)

    def pin_span(self, span_id_hex: str) -> None:
        """Make `span_id_hex` the id of the next span started."""
        self._next_span = int(span_id_hex, 16)

    def generate_trace_id(self) -> int:
        """Return the pinned trace id, else a random non-zero 128-bit id."""
        if self._next_trace is not None:
            value, self._next_trace = self._next_trace, None
            return value
        return self._rng.getrandbits(128) or 1

    def generate_span_id(self) -> int:
        """Return the pinned span id, else a random non-zero 64-bit id."""
        if self._next_span is not None:
            value, self._next_span = self._next_span, None
            return value
        return self._rng.getrandbits(64) or 1


class CollectingProcessor(SpanProcessor):
    """Collect ended spans and hand them to an exporter in batches of a fixed size (deterministic)."""

    def __init__(self, exporter: SpanExporter | None, batch_spans: int = 256) -> None:
        self.exporter = exporter
        self.batch_spans = batch_spans
        self.buffer: list[ReadableSpan] = []
        self.exported = 0

    def on_end(self, span: ReadableSpan) -> None:
        """Keep the ended span for the next batch."""
        self.buffer.append(span)

    def flush_full(self) -> None:
        """Export one batch if the buffer holds at least `batch_spans` spans (call between traces)."""
        if len(self.buffer) >= self.batch_spans:
            self.force_flush()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export everything buffered as one batch."""
        if self.buffer:
            if self.exporter is not None:  # None: count spans only
                self.exporter.export(self.buffer)
            self.exported += len(self.buffer)
            self.buffer = []
        return True

    def shutdown(self) -> None:
        """Flush and close the exporter."""
        self.force_flush()
        if self.exporter is not None:
            self.exporter.shutdown()


def export_request_dict(spans: Sequence[ReadableSpan]) -> dict:
    """OTLP/JSON dict of an export request for `spans`, with hex ids as the Collector writes them."""
    request = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for resource_spans in request.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            for span in scope_spans.get("spans", ()):
                _hex_ids(span)
                for link in span.get("links", ()):
                    _hex_ids(link)
    return request


def _hex_ids(obj: dict) -> None:
    for key in _ID_KEYS:
        if key in obj:
            obj[key] = base64.b64decode(obj[key]).hex()


class OtlpJsonLinesExporter(SpanExporter):
    """Hand one OTLP JSON export request per `export()` call, as one text line, to `write_line`."""

    def __init__(self, write_line: Callable[[str], None]) -> None:
        self.write_line = write_line

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Encode the spans as one JSON line (newline included) and pass it on."""
        self.write_line(json.dumps(export_request_dict(spans), separators=(",", ":"), ensure_ascii=False) + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release; the owner of `write_line` closes its file."""


class JsonLinesFile:
    """A `.jsonl` or `.jsonl.gz` file that takes whole lines; gzip output is byte-stable (mtime 0)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.lines = 0
        raw = open(self.path, "wb")
        self._raw = raw
        self._file: IO[bytes] = (
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0)
            if self.path.name.endswith(".gz") else raw
        )

    def write_line(self, line: str) -> None:
        """Append one line (it must end with a newline)."""
        self._file.write(line.encode("utf-8"))
        self.lines += 1

    def close(self) -> None:
        """Close the file."""
        self._file.close()
        self._raw.close()
