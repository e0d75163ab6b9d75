"""NVIDIA AIPerf / GenAI-Perf per-request export (`profile_export.jsonl`) -> `LlmCall`.

Reference: docs/formats.md#aiperf-profile-export. Each line: `metadata` (`x_request_id`, `timestamp_ns`, ...),
`metrics` (each `{value, unit}`), `error` (null or `{code, type, message}`).

Decisions:
- Metric units are read from each metric's `unit` (`ms`, `ns`, `s`, `tokens`), not assumed.
- output_tokens = `output_sequence_length` (= `output_token_count` + `reasoning_token_count`:
  reasoning tokens are decoded and billed as output); reasoning_tokens = `reasoning_token_count`.
- uncached input = `input_sequence_length` (a benchmark reports no prefix-cache hits).
- e2e = `request_latency`, TTFT = `ttft`; decode = e2e − TTFT; itl_s = decode / (osl − 1).
  AIPerf's own `inter_token_latency` is kept as `source_itl_s`, `ttst` as `ttst_s`.
- `inter_chunk_latency` (a list, one gap per chunk after the first) gives the per-call
  `itl_p50_s` / `itl_p95_s` (linear interpolation, as numpy).
- started_at = `metadata.timestamp_ns` (else `min_request_timestamp`), ended_at =
  `max_response_timestamp`; `call_id` = `aiperf:<x_request_id>`.
- `error` not null (e.g. code 499 `RequestCancellationError`) -> status error, `error_type` = its
  type; such records carry no token or timing metrics.
- Model and provider: the export names neither per record; `metadata.model_name`/`model` if
  present, else the load options `model`/`provider`, else model `unknown` and provider `aiperf`.
- The aggregate exports (`profile_export_aiperf.json`: an object of `records` statistics;
  `profile_export_aiperf.csv`: a `Metric,avg,...` table) hold no calls: each is one `Skip`
  (kind `aiperf_aggregate`), as its requests are in `profile_export.jsonl`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from phaselens.models import LlmCall, Skip

from .base import Record, SourceFile
from .normalize import normalize_model, normalize_provider
from .readers import build_all, file_fingerprint, hashed_call_id, iter_json_records, option_text, peek_record
from .values import (
    UNKNOWN_MODEL, RecordError, after, attrs_json, derive_timing, first_of, parse_time, percentile, text_or_none,
    to_float, to_tokens,
)

SOURCE = "aiperf"
TIME_UNITS = {"ns": 1e9, "us": 1e6, "µs": 1e6, "ms": 1e3, "s": 1.0, "sec": 1.0}
MODEL_FIELDS = ("metadata.model_name", "metadata.model")
AGGREGATE_CSV_HEADER = ("Metric", "avg")
KEPT_METADATA = ("conversation_id", "turn_index", "worker_id", "credit_phase", "x_correlation_id")


def _metric(metrics: dict, name: str) -> tuple[Any, str]:
    m = metrics.get(name)
    if isinstance(m, dict):
        return m.get("value"), str(m.get("unit") or "")
    return m, ""


def _seconds(metrics: dict, name: str) -> float | None:
    value, unit = _metric(metrics, name)
    number = to_float(value, f"metrics.{name}")
    if number is None:
        return None
    if unit not in TIME_UNITS:
        raise RecordError("bad_number", f"metrics.{name} has unknown time unit {unit!r}")
    if number < 0:
        raise RecordError("bad_number", f"metrics.{name} is a negative duration")
    return number / TIME_UNITS[unit]


def _chunk_gaps_s(metrics: dict) -> list[float]:
    value, unit = _metric(metrics, "inter_chunk_latency")
    if not isinstance(value, list) or not value:
        return []
    scale = TIME_UNITS.get(unit)
    if scale is None:
        raise RecordError("bad_number", f"metrics.inter_chunk_latency has unknown time unit {unit!r}")
    gaps = [to_float(v, "metrics.inter_chunk_latency") for v in value if v is not None]
    if any(g is None for g in gaps):
        raise RecordError("bad_number", "metrics.inter_chunk_latency holds an empty value")
    return [g / scale for g in gaps]


def _builder(src: SourceFile):
    fingerprint: list[str] = []  # computed only if some record lacks its request id
    model_opt, provider_opt = option_text(src, "model"), option_text(src, "provider")

    def build(rec: dict, index: int, locator: str) -> LlmCall:
        meta = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}
        metrics = rec.get("metrics") if isinstance(rec.get("metrics"), dict) else {}
        error = rec.get("error")
        request_id = text_or_none(meta.get("x_request_id"))
        if request_id is None:
            fingerprint or fingerprint.append(file_fingerprint(src))
            call_id = hashed_call_id(SOURCE, fingerprint[0], index)
        else:
            call_id = f"{SOURCE}:{request_id}"
        started = parse_time(meta.get("timestamp_ns"), "metadata.timestamp_ns") or parse_time(
            _metric(metrics, "min_request_timestamp")[0], "metrics.min_request_timestamp")
        ended = parse_time(_metric(metrics, "max_response_timestamp")[0], "metrics.max_response_timestamp")
        outputs = to_tokens(_metric(metrics, "output_sequence_length")[0], "metrics.output_sequence_length")
        reasoning = to_tokens(_metric(metrics, "reasoning_token_count")[0], "metrics.reasoning_token_count")
        timing = derive_timing(_seconds(metrics, "request_latency"), _seconds(metrics, "ttft"), outputs)
        gaps = _chunk_gaps_s(metrics)
        attrs = {k: meta.get(k) for k in KEPT_METADATA}
        attrs.update({
            "source_itl_s": _seconds(metrics, "inter_token_latency"),
            "ttst_s": _seconds(metrics, "ttst"),
            "output_token_count": _metric(metrics, "output_token_count")[0],
            "chunks": len(gaps) + 1 if gaps else None,
        })
        failed = isinstance(error, dict) or (error is not None and error != "")
        if failed and isinstance(error, dict):
            attrs["error_code"] = error.get("code")
        model_raw = text_or_none(first_of(rec, MODEL_FIELDS)) or model_opt or UNKNOWN_MODEL
        return LlmCall(
            call_id=call_id,
            source=SOURCE,
            source_locator=locator,
            started_at=started,
            first_token_at=after(started, timing["ttft_s"]),
            ended_at=ended,
            provider=normalize_provider(provider_opt or SOURCE),
            model=normalize_model(model_raw),
            model_raw=model_raw,
            uncached_input_tokens=to_tokens(_metric(metrics, "input_sequence_length")[0],
                                            "metrics.input_sequence_length"),
            output_tokens=outputs,
            reasoning_tokens=reasoning,
            itl_p50_s=percentile(gaps, 50),
            itl_p95_s=percentile(gaps, 95),
            streaming=True if gaps else None,
            status="error" if failed else "ok",
            error_type=(text_or_none(error.get("type")) if isinstance(error, dict) else str(error)) if failed else None,
            attributes_json=attrs_json(attrs),
            **timing,
        )

    return build


def _is_aggregate(src: SourceFile) -> bool:
    first = src.first_json()
    if isinstance(first, dict) and isinstance(first.get("records"), dict):
        stats = next(iter(first["records"].values()), None)
        return isinstance(stats, dict) and {"tag", "unit", "avg"} <= set(stats)
    header = src.csv_header()
    return bool(header) and tuple(header[:2]) == AGGREGATE_CSV_HEADER and "p50" in header


class AIPerfAdapter:
    """Reads AIPerf `profile_export.jsonl`; the aggregate JSON/CSV exports are skipped whole."""

    name: ClassVar[str] = SOURCE
    kind: ClassVar[str] = "calls"

    def sniff(self, src: SourceFile) -> bool:
        """True for per-request records (`metadata` + `metrics` of `{value, unit}`) or an aggregate export."""
        rec = peek_record(src)
        if isinstance(rec, dict) and isinstance(rec.get("metadata"), dict) and isinstance(rec.get("metrics"), dict):
            values = list(rec["metrics"].values())
            # `error` is optional (some exporters leave it out when null): metadata + metrics of {value} decide
            return bool(values) and all(isinstance(v, dict) and "value" in v for v in values)
        return _is_aggregate(src)

    def parse(self, src: SourceFile) -> Iterator[Record]:
        """One `LlmCall` per request record (cancelled ones as status error), or one `Skip` for an aggregate."""
        if _is_aggregate(src):
            yield Skip(source=SOURCE, locator=src.locator(1), kind="aiperf_aggregate")
            return
        yield from build_all(src, SOURCE, iter_json_records(src, SOURCE), _builder(src))


ADAPTERS = [AIPerfAdapter()]
