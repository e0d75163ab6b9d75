"""LLMPerf per-request results (`individual_responses` JSON arrays) -> `LlmCall`.

Reference: docs/formats.md#llmperf-results (ray-project/llmperf-leaderboard `raw_data/individual/*.json`).

Decisions:
- One call per array element. `call_id` = `llmperf:<content fingerprint>:<index>`, so the same file
  loaded under another name dedupes.
- Timing: `ttft_s`, `end_to_end_latency_s` (seconds); prefill = TTFT, decode = e2e − TTFT,
  itl_s = decode / (output − 1). LLMPerf's own `inter_token_latency_s` is e2e / output tokens (it
  INCLUDES TTFT), so it is kept as `source_itl_s` in `attributes_json`, never as `itl_s`.
- `error_code` set -> status error (`error_type` = the code). LLMPerf writes 0 for the timings and
  the sent prompt size / 1 output token for a request that got no response (e.g. 429); such a
  record carries no measurement, so its timing and token counts are None. Records that did get a
  response (e.g. -100 "Output too few tokens") keep their measured values.
- `GEN_TEXT` (completion text) is never read.
- No timestamps exist in the file: `started_at` is None.
- Provider and model are labels, never used to detect the format: a `provider`/`model` key of the
  record if any, else the load options `provider`/`model`, else the file name as the leaderboard
  names it, `<provider>_<size>.json`: provider = the first `_` token, model =
  `llama-2-<size>-chat` (the leaderboard benchmarks only Llama-2 chat models; see `LEADERBOARD_MODEL`).
- A run summary (`summary/*.json`: one object with `results_*` statistics) holds no calls: the whole
  file is one `Skip` (kind `llmperf_summary`), since its requests are in the matching individual file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import ClassVar

from phaselens.models import LlmCall, Skip

from .base import Record, SourceFile
from .normalize import normalize_model, normalize_provider
from .readers import (
    build_all, file_fingerprint, file_label, hashed_call_id, iter_json_records, option_text, peek_record,
)
from .values import attrs_json, derive_timing, text_or_none, to_float, to_seconds, to_tokens

SOURCE = "llmperf"
RECORD_KEYS = {"ttft_s", "end_to_end_latency_s", "number_input_tokens", "number_output_tokens"}
SUMMARY_KEYS = {"results_ttft_s_mean", "num_concurrent_requests"}
LEADERBOARD_MODEL = "llama-2-{size}-chat"
LEADERBOARD_SIZE = re.compile(r"^\d+(?:\.\d+)?b$", re.IGNORECASE)
KEPT_FIELDS = ("request_output_throughput_token_per_s", "number_total_tokens", "error_msg")


def _labels(src: SourceFile) -> tuple[str | None, str | None]:
    """Provider and model labels from the options, else from the leaderboard file naming."""
    provider, model = option_text(src, "provider"), option_text(src, "model")
    head, _, rest = file_label(src).partition("_")
    if provider is None and head:
        provider = head
    if model is None and LEADERBOARD_SIZE.match(rest):
        model = LEADERBOARD_MODEL.format(size=rest.lower())
    return provider, model


def _builder(src: SourceFile):
    fingerprint = file_fingerprint(src)
    file_provider, file_model = _labels(src)

    def build(rec: dict, index: int, locator: str) -> LlmCall:
        error_code = rec.get("error_code")
        failed = error_code is not None and str(error_code).strip() != ""
        e2e = to_seconds(rec.get("end_to_end_latency_s"), "end_to_end_latency_s")
        ttft = to_seconds(rec.get("ttft_s"), "ttft_s")
        source_itl = to_float(rec.get("inter_token_latency_s"), "inter_token_latency_s")
        inputs = to_tokens(rec.get("number_input_tokens"), "number_input_tokens")
        outputs = to_tokens(rec.get("number_output_tokens"), "number_output_tokens")
        attrs = {k: rec.get(k) for k in KEPT_FIELDS}
        attrs["source_itl_s"] = source_itl
        if failed and not e2e:  # no response: LLMPerf's zeros and placeholder counts are not measurements
            e2e = ttft = None
            inputs = outputs = None
            attrs["no_response"] = True
        timing = derive_timing(e2e, ttft, outputs)
        if ttft is not None and timing["ttft_s"] is None:
            attrs["source_ttft_s"] = ttft
        provider = text_or_none(rec.get("provider")) or file_provider
        model_raw = text_or_none(rec.get("model")) or file_model
        return LlmCall(
            call_id=hashed_call_id(SOURCE, fingerprint, index),
            source=SOURCE,
            source_locator=locator,
            provider=normalize_provider(provider),
            model=normalize_model(model_raw),
            model_raw=model_raw,
            workload_hint=f"{normalize_provider(provider)}/{normalize_model(model_raw)}",  # one benchmark run
            uncached_input_tokens=inputs,
            output_tokens=outputs,
            streaming=True,
            status="error" if failed else "ok",
            error_type=str(error_code) if failed else None,
            attributes_json=attrs_json(attrs),
            **timing,
        )

    return build


class LLMPerfAdapter:
    """Reads LLMPerf `individual_responses` arrays; a run summary file is skipped whole."""

    name: ClassVar[str] = SOURCE
    kind: ClassVar[str] = "calls"

    def sniff(self, src: SourceFile) -> bool:
        """True for an array of LLMPerf request records, or an LLMPerf run summary object."""
        first = src.first_json()
        if isinstance(first, dict) and SUMMARY_KEYS <= set(first):
            return True
        rec = peek_record(src) if isinstance(first, list) else None
        return rec is not None and RECORD_KEYS <= set(rec)

    def parse(self, src: SourceFile) -> Iterator[Record]:
        """One `LlmCall` per request record (errors included, as status error), or one `Skip` for a summary."""
        first = src.first_json()
        if isinstance(first, dict) and SUMMARY_KEYS <= set(first):
            yield Skip(source=SOURCE, locator=src.locator(1), kind="llmperf_summary")
            return
        yield from build_all(src, SOURCE, iter_json_records(src, SOURCE), _builder(src))


ADAPTERS = [LLMPerfAdapter()]
