"""phaselens' own telemetry: spans and metrics for ingest, build, report and the receiver.

Exported over OTLP/HTTP only when the standard `OTEL_EXPORTER_OTLP_ENDPOINT` (or the
`..._TRACES_ENDPOINT` / `..._METRICS_ENDPOINT`) variable is set; otherwise nothing is set up and
every call here is a cheap no-op. `OTEL_SDK_DISABLED=true` turns it off regardless.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

from opentelemetry import metrics, trace

SCOPE = "phaselens"


def enabled() -> bool:
    """True when an OTLP endpoint is configured and the SDK is not disabled."""
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    return any(
        os.environ.get(v)
        for v in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
    )


@cache
def _setup() -> bool:
    if not enabled():
        return False
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from phaselens import __version__

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "phaselens"),
                                "service.version": __version__})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    meter_provider = MeterProvider(resource=resource, metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())])
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)

    def _flush() -> None:
        tracer_provider.shutdown()
        meter_provider.shutdown()

    atexit.register(_flush)
    return True


@cache
def _instruments() -> dict[str, Any]:
    meter = metrics.get_meter(SCOPE)
    return {
        "duration": meter.create_histogram("phaselens.operation.duration", unit="s", description="Duration of a phaselens operation"),
        "records": meter.create_counter("phaselens.records", unit="{record}", description="Records by outcome (accepted, rejected, skipped, duplicate)"),
    }


@contextmanager
def operation(name: str, **attributes: Any) -> Iterator[trace.Span | None]:
    """A span named `phaselens.<name>` and a duration measurement; a no-op when telemetry is off."""
    if not _setup():
        yield None
        return
    import time

    start = time.perf_counter()
    with trace.get_tracer(SCOPE).start_as_current_span(f"phaselens.{name}", attributes=attributes) as span:
        try:
            yield span
        finally:
            _instruments()["duration"].record(time.perf_counter() - start, {"operation": name})


def count(outcome: str, n: int, **attributes: Any) -> None:
    """Add `n` records with `outcome` (accepted, rejected, skipped, duplicate) to the records counter."""
    if n and _setup():
        _instruments()["records"].add(n, {"outcome": outcome, **attributes})
