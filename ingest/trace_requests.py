"""Request traces without latency splits -> `LlmCall`: token shapes for what-if analysis.

Three public traces (docs/formats.md#azure-llm-inference-trace, docs/formats.md#mooncake-trace,
docs/formats.md#servegen-trace):
- `azure_trace`: Azure LLM inference trace CSV `TIMESTAMP,ContextTokens,GeneratedTokens`. TIMESTAMP
  is wall-clock with 7 fraction digits and no zone, read as UTC (truncated to microseconds).
  No latency: `timing_source` none.
- `mooncake`: Mooncake JSON Lines `timestamp` (ms relative to the trace start), `input_length`,
  `output_length`, `hash_ids` (one id per 512-token prompt block; equal ids = reusable prefix KV
  blocks). started_at = anchor + timestamp, where the anchor is the load option `anchor` (ISO time)
  or `DEFAULT_ANCHOR`. prefix_hashes = the hash ids, scoped to their file (`<content fingerprint>:<id>`); prefix_tokens = the cumulative
  prompt size at the end of each block (512, 1024, ..., the last = input_length). The load option
  `block_size` overrides 512 for traces cut in other block sizes.
- `servegen`: ServeGen offline stat CSV `request_id,type,input_length,output_length,duration`.
  `duration` is the end-to-end time in ms -> e2e_s; no TTFT, so no prefill/decode split
  (`timing_source` none); no arrival time, so started_at is None. `type` is kept as `request_type`.

All three: provider = the load option `provider`, else the source name (`azure_trace`, `mooncake`,
`servegen`); model = the option `model`, else `unknown`. Input tokens are uncached (the traces
report no cache hits). `call_id` = `<source>:<content fingerprint>:<row index>`.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import ClassVar

from phaselens.models import LlmCall

from .base import Record, SourceFile, UnreadableFile
from .normalize import normalize_model, normalize_provider
from .readers import (
    build_all, file_fingerprint, hashed_call_id, iter_csv_records, iter_json_records, option_text, peek_record,
)
from .values import (
    UNKNOWN_MODEL, RecordError, after, attrs_json, derive_timing, parse_time, to_float, to_seconds, to_tokens,
)

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
MOONCAKE_KEYS = {"timestamp", "input_length", "output_length"}
SERVEGEN_COLUMNS = ("request_id", "type", "input_length", "output_length", "duration")
DEFAULT_ANCHOR = datetime(2024, 1, 1)
DEFAULT_BLOCK_TOKENS = 512


def _labels(src: SourceFile, source: str) -> dict:
    model_raw = option_text(src, "model") or UNKNOWN_MODEL
    return {
        "source": source,
        "provider": normalize_provider(option_text(src, "provider") or source),
        "model": normalize_model(model_raw),
        "model_raw": model_raw,
    }


def _anchor(src: SourceFile) -> datetime:
    raw = src.options.get("anchor")
    if raw is None:
        return DEFAULT_ANCHOR
    try:
        return parse_time(raw, "anchor") or DEFAULT_ANCHOR
    except RecordError as e:
        raise UnreadableFile(src.display, f"the `anchor` option is not a time: {raw!r}",
                             "pass an ISO 8601 time such as 2024-01-01T00:00:00") from e


def _block_tokens(src: SourceFile) -> int:
    raw = src.options.get("block_size", DEFAULT_BLOCK_TOKENS)
    try:
        size = int(raw)
    except (TypeError, ValueError):
        size = 0
    if size <= 0:
        raise UnreadableFile(src.display, f"the `block_size` option is not a positive integer: {raw!r}",
                             "pass the trace's tokens per hash block, e.g. 512")
    return size


def prefix_tokens(input_tokens: int, blocks: int, block_tokens: int) -> list[int]:
    """Cumulative prompt tokens at the end of each of `blocks` hash blocks; the last equals `input_tokens`."""
    sizes = [min(block_tokens * (i + 1), input_tokens) for i in range(blocks)]
    if sizes:
        sizes[-1] = input_tokens
    return sizes


class _TraceAdapter:
    """Shared parse loop: a per-file setup, then one `LlmCall` per record."""

    name: ClassVar[str]
    kind: ClassVar[str] = "calls"

    def rows(self, src: SourceFile):
        """The file's records (CSV rows here; JSON Lines for Mooncake) with their locators."""
        return iter_csv_records(src, self.name)

    def builder(self, src: SourceFile, labels: dict, fingerprint: str):  # pragma: no cover - overridden
        """A function turning one record into an `LlmCall`; each trace defines its own."""
        raise NotImplementedError

    def parse(self, src: SourceFile) -> Iterator[Record]:
        """One `LlmCall` per trace row; unusable rows become Rejects."""
        build = self.builder(src, _labels(src, self.name), file_fingerprint(src))
        return build_all(src, self.name, self.rows(src), build)


class AzureTraceAdapter(_TraceAdapter):
    """Reads the Azure LLM inference trace CSV (arrival time, context tokens, generated tokens)."""

    name: ClassVar[str] = "azure_trace"

    def sniff(self, src: SourceFile) -> bool:
        """True when the CSV header is exactly `TIMESTAMP,ContextTokens,GeneratedTokens`."""
        return tuple(src.csv_header() or ()) == AZURE_COLUMNS

    def builder(self, src: SourceFile, labels: dict, fingerprint: str):
        """Azure row -> call: arrival time, context tokens (uncached input), generated tokens."""

        def build(row: dict, index: int, locator: str) -> LlmCall:
            started = parse_time(row["TIMESTAMP"], "TIMESTAMP")
            if started is None:
                raise RecordError("missing_field", "TIMESTAMP is empty")
            return LlmCall(
                call_id=hashed_call_id(self.name, fingerprint, index),
                source_locator=locator,
                started_at=started,
                uncached_input_tokens=to_tokens(row["ContextTokens"], "ContextTokens"),
                output_tokens=to_tokens(row["GeneratedTokens"], "GeneratedTokens"),
                **labels,
            )

        return build


class MooncakeAdapter(_TraceAdapter):
    """Reads Mooncake request traces (JSON Lines with relative arrival time and prefix-block hashes)."""

    name: ClassVar[str] = "mooncake"

    def sniff(self, src: SourceFile) -> bool:
        """True when the first JSON record has Mooncake's `timestamp`, `input_length` and `output_length`."""
        rec = peek_record(src)
        return isinstance(rec, dict) and MOONCAKE_KEYS <= set(rec) and "resourceSpans" not in rec

    def rows(self, src: SourceFile):
        """The trace's JSON Lines records with their line numbers."""
        return iter_json_records(src, self.name)

    def builder(self, src: SourceFile, labels: dict, fingerprint: str):
        """Mooncake record -> call: anchor + offset, tokens, prefix-block hashes and their cumulative sizes."""
        anchor, block_tokens = _anchor(src), _block_tokens(src)

        def build(rec: dict, index: int, locator: str) -> LlmCall:
            offset_ms = to_float(rec.get("timestamp"), "timestamp")
            if offset_ms is None:
                raise RecordError("missing_field", "timestamp is empty")
            inputs = to_tokens(rec.get("input_length"), "input_length")
            hashes = rec.get("hash_ids")
            if hashes is not None and not isinstance(hashes, list):
                raise RecordError("malformed_row", "hash_ids is not a list")
            attrs = {"trace_offset_ms": offset_ms}
            attrs.update({k: rec[k] for k in ("chat_id", "parent_chat_id", "turn", "type") if k in rec})
            return LlmCall(
                call_id=hashed_call_id(self.name, fingerprint, index),
                source_locator=locator,
                started_at=after(anchor, offset_ms / 1000.0),
                uncached_input_tokens=inputs,
                output_tokens=to_tokens(rec.get("output_length"), "output_length"),
                # ids are numbered per trace file: scope them to the file so two traces never share a block
                prefix_hashes=[f"{fingerprint[:12]}:{h}" for h in hashes] if hashes else None,
                prefix_tokens=prefix_tokens(inputs or 0, len(hashes), block_tokens) if hashes else None,
                attributes_json=attrs_json(attrs),
                **labels,
            )

        return build


class ServeGenAdapter(_TraceAdapter):
    """Reads ServeGen offline stat traces (per-request token counts and end-to-end duration)."""

    name: ClassVar[str] = "servegen"

    def sniff(self, src: SourceFile) -> bool:
        """True when the CSV header is exactly `request_id,type,input_length,output_length,duration`."""
        return tuple(src.csv_header() or ()) == SERVEGEN_COLUMNS

    def builder(self, src: SourceFile, labels: dict, fingerprint: str):
        """ServeGen row -> call: tokens and end-to-end duration (ms -> s), no arrival time."""

        def build(row: dict, index: int, locator: str) -> LlmCall:
            outputs = to_tokens(row["output_length"], "output_length")
            timing = derive_timing(to_seconds(row["duration"], "duration", per_second=1000), None, outputs)
            attrs = {"request_id": row["request_id"], "request_type": row["type"]}
            return LlmCall(
                call_id=hashed_call_id(self.name, fingerprint, index),
                source_locator=locator,
                uncached_input_tokens=to_tokens(row["input_length"], "input_length"),
                output_tokens=outputs,
                attributes_json=attrs_json(attrs),
                **labels,
                **timing,
            )

        return build


ADAPTERS = [AzureTraceAdapter(), MooncakeAdapter(), ServeGenAdapter()]
