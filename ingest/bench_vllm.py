"""vLLM `benchmark_serving` / `vllm bench serve` detailed result JSON -> `LlmCall`, one per request.

The file is one object (written with `--save-result --save-detailed`) whose per-request data are
parallel lists: `input_lens`, `output_lens`, `ttfts` (s), `itls` (a list of chunk gaps per
request, s), `errors` ("" on success), `generated_texts`; plus run fields `date`, `backend`,
`model_id`, `tokenizer_id`, `request_rate`, `max_concurrency`, and aggregate statistics.

Decisions:
- e2e = `e2els[i]` when the file has it, else `ttfts[i] + sum(itls[i])`: the tool measures latency
  as the arrival time of the last chunk, and TTFT and the chunk gaps partition it exactly.
- itl_s = (e2e − TTFT) / (output − 1), which is also vLLM's per-request TPOT. vLLM's ITL metric is
  the gap between chunks, not tokens; the request's mean chunk gap is kept as `source_itl_s`, and its
  p50/p95 become `itl_p50_s`/`itl_p95_s`.
- A failed request (non-empty `errors[i]`, or the tool's zero TTFT with no output) -> status
  error with no timing or tokens; `error_type` is the first line of the error, cut to 120 chars.
- `date` is the local time the result was saved, after the run, in an unknown zone: it is kept as
  `bench_date` in `attributes_json` and `started_at` stays None.
- Provider: the load option `provider`, else the serving engine from `backend` (`BACKEND_PROVIDER`;
  the `openai*` backends are the OpenAI-compatible API of a self-hosted vLLM server, not OpenAI).
- `call_id` = `vllm_bench:<content fingerprint>:<index>`. `generated_texts` is never read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

from phaselens.models import LlmCall

from . import jsonread
from .base import Record, SourceFile
from .normalize import normalize_model, normalize_provider
from .readers import file_fingerprint, hashed_call_id, option_text, reject
from .values import (
    UNKNOWN_MODEL, RecordError, attrs_json, derive_timing, percentile, text_or_none, to_seconds, to_tokens,
)

SOURCE = "vllm_bench"
PER_REQUEST = ("input_lens", "output_lens", "ttfts", "itls", "errors", "e2els")
SNIFF_KEYS = {"ttfts", "itls", "input_lens", "output_lens"}
BACKEND_PROVIDER = {
    "vllm": "vllm", "openai": "vllm", "openai-chat": "vllm", "openai-audio": "vllm", "openai-embeddings": "vllm",
    "tgi": "tgi", "sglang": "sglang", "lmdeploy": "lmdeploy", "tensorrt-llm": "tensorrt_llm",
    "deepspeed-mii": "deepspeed_mii", "scalellm": "scalellm", "llama.cpp": "llama_cpp",
}
RUN_FIELDS = ("backend", "tokenizer_id", "num_prompts", "request_rate", "burstiness", "max_concurrency")


def _at(values: Any, i: int) -> Any:
    return values[i] if isinstance(values, list) and i < len(values) else None


def _scalar(value: Any) -> Any:
    """A run field as stored: an object or array where a scalar belongs is named, not copied (it may be
    nested deeper than JSON encoding reaches)."""
    return f"(not a scalar: {type(value).__name__})" if isinstance(value, dict | list) else value


def _run_attrs(doc: dict) -> dict:
    attrs = {k: _scalar(doc.get(k)) for k in RUN_FIELDS}
    attrs["bench_date"] = text_or_none(doc.get("date"))
    return attrs


def _call(doc: dict, i: int, call_id: str, locator: str, provider: str | None, model_raw: str) -> LlmCall:
    error = text_or_none(_at(doc.get("errors"), i))
    inputs = to_tokens(_at(doc.get("input_lens"), i), f"input_lens[{i}]")
    outputs = to_tokens(_at(doc.get("output_lens"), i), f"output_lens[{i}]")
    ttft = to_seconds(_at(doc.get("ttfts"), i), f"ttfts[{i}]")
    gaps_raw = _at(doc.get("itls"), i)
    if gaps_raw is not None and not isinstance(gaps_raw, list):
        raise RecordError("malformed_row", f"itls[{i}] is not a list")
    gaps = [to_seconds(g, f"itls[{i}]") for g in (gaps_raw or [])]
    e2e = to_seconds(_at(doc.get("e2els"), i), f"e2els[{i}]")
    failed = error is not None or (not ttft and not outputs)
    attrs = _run_attrs(doc)
    if not ttft:  # the tool leaves 0.0 where it saw no first chunk
        ttft = None
    if failed:
        attrs["requested_input_tokens"] = inputs
        inputs, outputs, ttft, e2e, gaps = None, None, None, None, []
    elif e2e is None and ttft is not None:
        e2e = ttft + sum(gaps)
    timing = derive_timing(e2e, ttft, outputs)
    if ttft is not None and timing["ttft_s"] is None:
        attrs["source_ttft_s"] = ttft
    attrs["source_itl_s"] = sum(gaps) / len(gaps) if gaps else None
    attrs["chunks"] = len(gaps) + 1 if gaps else None
    return LlmCall(
        call_id=call_id,
        source=SOURCE,
        source_locator=locator,
        provider=normalize_provider(provider),
        model=normalize_model(model_raw),
        model_raw=model_raw,
        uncached_input_tokens=inputs,
        output_tokens=outputs,
        itl_p50_s=percentile(gaps, 50),
        itl_p95_s=percentile(gaps, 95),
        streaming=True if gaps else None,
        status="error" if failed else "ok",
        error_type=(error.strip().splitlines()[0][:120] if error else "no_output") if failed else None,
        attributes_json=attrs_json(attrs),
        **timing,
    )


class VllmBenchAdapter:
    """Reads a vLLM serving-benchmark result saved with per-request details."""

    name: ClassVar[str] = SOURCE
    kind: ClassVar[str] = "calls"

    def sniff(self, src: SourceFile) -> bool:
        """True for one JSON object with the per-request lists `ttfts`, `itls`, `input_lens`, `output_lens`."""
        head = src.head_text.lstrip()
        if not head.startswith("{"):
            return False
        first = src.first_json()
        if isinstance(first, dict):
            return SNIFF_KEYS <= set(first)
        return all(f'"{k}"' in head for k in SNIFF_KEYS)  # a large result cut at the head

    def parse(self, src: SourceFile) -> Iterator[Record]:
        """One `LlmCall` per request index; a bad entry becomes a Reject, the others go on."""
        with src.open_text() as f:
            text = f.read()
        try:
            doc = jsonread.loads(text)
        except ValueError as e:
            # a result cut short keeps its whole per-request lists; requests past a cut list are rejected below
            cut = jsonread.salvage(text)
            if cut.why:  # empty: the document is whole, only nested deeper than the standard decoder reads
                src.incomplete(cut.why)
                yield reject(src, SOURCE, f"@{cut.position}", "malformed_json", f"{cut.why}: what follows is not read ({e})")
            doc = cut.value
            if not isinstance(doc, dict):
                return
        if not isinstance(doc, dict) or not isinstance(doc.get("ttfts"), list):
            src.incomplete("no per-request `ttfts` list: the requests were not read")
            yield reject(src, SOURCE, 1, "malformed_row", "no per-request `ttfts` list in the result")
            return
        lengths = {k: len(doc[k]) for k in PER_REQUEST if isinstance(doc.get(k), list)}
        # a per-request list cut by the break: its last element (a cut list of ITLs) is not whole
        lengths.update({k: len(doc[k]) - (0 if doc[k] and jsonread.is_whole(doc[k][-1]) else 1)
                        for k in lengths if not jsonread.is_whole(doc[k])})
        count = max(lengths.values())
        fingerprint = file_fingerprint(src)
        provider = option_text(src, "provider") or BACKEND_PROVIDER.get(
            (text_or_none(doc.get("backend")) or "").lower(), text_or_none(doc.get("backend")) or "vllm")
        model_raw = option_text(src, "model") or text_or_none(doc.get("model_id")) or UNKNOWN_MODEL
        for i in range(count):
            where = f"request[{i}]"
            short = [k for k, n in lengths.items() if n <= i]
            if short:
                detail = f"the lists {', '.join(short)} end before request {i}"
                yield reject(src, SOURCE, where, "malformed_row", detail, {k: _at(doc.get(k), i) for k in PER_REQUEST})
                continue
            try:
                yield _call(doc, i, hashed_call_id(SOURCE, fingerprint, i), src.locator(where), provider, model_raw)
            except RecordError as e:
                yield reject(src, SOURCE, where, e.reason, e.detail, {k: _at(doc.get(k), i) for k in PER_REQUEST})
            except (ValueError, TypeError, ArithmeticError, RecursionError, AttributeError) as e:
                yield reject(src, SOURCE, where, "malformed_row", f"cannot read the request ({type(e).__name__}: {e})",
                             {k: _at(doc.get(k), i) for k in PER_REQUEST})


ADAPTERS = [VllmBenchAdapter()]
