"""Simulate one day of an AI code editor's LLM traffic: the ground truth, before any span is written.

The day is cut into 1,440 one-minute slots. Each workload's call budget is spread over the slots by
its daily curve (a seeded multinomial draw), so the total is exactly the number of calls asked for.
Slots are simulated in time order, which keeps memory bounded (`iter_simulate` yields as it goes)
and lets the vLLM server's running batch be tracked call by call.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterator
from datetime import UTC, date, datetime

import numpy as np

from phaselens.sample_logs import profile as P
from phaselens.sample_logs.simcall import SimCall

DEFAULT_DAY = date(2026, 11, 16)  # a Monday
NS = 1_000_000_000
TOOL_GAP_NS = 2_000_000  # agent bookkeeping between a model call and a tool, each side
_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
# Message id prefix of Claude responses, per provider that serves Claude (22 base-62 characters follow)
CLAUDE_ID_PREFIX = {"anthropic": "msg_01", "aws.bedrock": "msg_bdrk_01"}


def simulate(seed: int, calls: int, day: date = DEFAULT_DAY) -> list[SimCall]:
    """All `calls` LLM calls of the simulated day (traced and untraced), in simulation order."""
    return list(iter_simulate(seed, calls, day))


def iter_simulate(seed: int, calls: int, day: date = DEFAULT_DAY) -> Iterator[SimCall]:
    """Yield the simulated calls one by one, trace by trace, in order of trace start (bounded memory)."""
    return _Simulator(seed, calls, day).run()


def workload_counts(calls: int) -> dict[str, int]:
    """Exact number of calls per workload for a total (largest remainder), untraced batch included."""
    openai_share = P.provider_share("openai")
    untraced_per_traced = P.UNTRACED_SHARE_OF_OPENAI * openai_share / (1 - P.UNTRACED_SHARE_OF_OPENAI)
    traced_total = calls / (1 + untraced_per_traced)
    wanted = {w.name: w.share * traced_total for w in P.WORKLOADS.values()}
    wanted[P.UNTRACED.name] = calls - traced_total
    counts = {k: math.floor(v) for k, v in wanted.items()}
    by_remainder = sorted(wanted, key=lambda k: (counts[k] - wanted[k], k))
    for k in by_remainder[: calls - sum(counts.values())]:
        counts[k] += 1
    return counts


class _Simulator:
    def __init__(self, seed: int, calls: int, day: date) -> None:
        if calls < 0:
            raise ValueError("calls must be >= 0")
        self.rng = random.Random(seed)
        self.day0_ns = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()) * NS
        counts = workload_counts(calls)
        np_rng = np.random.default_rng(seed)
        self.order = [*P.WORKLOADS, P.UNTRACED.name]
        self.slot_counts = {}
        for name in self.order:
            weights = np.asarray(P.minute_weights(_workload(name).curve))
            self.slot_counts[name] = np_rng.multinomial(counts[name], weights / weights.sum()).tolist()
        self.n = 0
        self.vllm_running: list[int] = []  # heap of end times (ns) of traced vLLM calls in flight
        self.cache_seen: dict[tuple[str, str], int] = {}  # (provider, prefix key) -> last use (ns)
        self.builders = {
            "tab_completion": self._tab, "inline_edit": self._inline, "chat": self._chat_session,
            "agent": self._agent, "indexing": self._indexing, P.UNTRACED.name: self._batch,
        }

    # ---- the day ---------------------------------------------------------------------------------
    def run(self) -> Iterator[SimCall]:
        owed = dict.fromkeys(self.order, 0)
        pending: dict[str, int | None] = dict.fromkeys(self.order)
        for slot in range(P.MINUTES_PER_DAY):
            last = slot == P.MINUTES_PER_DAY - 1
            seeds = []
            for name in self.order:
                owed[name] += self.slot_counts[name][slot]
                while owed[name] > 0:
                    if pending[name] is None:
                        pending[name] = self.rng.randint(*_workload(name).calls_per_trace)
                    size = pending[name]
                    if size > owed[name]:
                        if not last:
                            break  # wait for budget from later slots
                        size = owed[name]
                    start = self.day0_ns + slot * 60 * NS + self.rng.randrange(60 * NS)
                    seeds.append((start, len(seeds), name, size))
                    owed[name] -= size
                    pending[name] = None
            seeds.sort()
            for start, _, name, size in seeds:
                yield from self.builders[name](start, size)

    # ---- helpers ---------------------------------------------------------------------------------
    def _new(self, **fields) -> SimCall:
        self.n += 1
        base = dict(
            call_id=f"call-{self.n:07d}", concurrency=None, response_id=None, repo=None, session_id=None,
            step=0, tool_after=None, tool_s=None, content_captured=False, traced=True,
        )
        base.update(fields)
        if not base["traced"]:
            base.update(trace_id=None, span_id=None, span_service=None, convention=None)
        return SimCall(**base)

    def _logu(self, key: str) -> int:
        return self._logu_range(P.TOKENS[key])

    def _logu_range(self, bounds: tuple[int, int]) -> int:
        lo, hi = bounds
        return int(round(math.exp(self.rng.uniform(math.log(lo), math.log(hi)))))

    def _choose(self, rows: tuple[tuple[str, float], ...]) -> str:
        return self.rng.choices([r[0] for r in rows], weights=[r[1] for r in rows])[0]

    def _hex(self, bits: int) -> str:
        return f"{self.rng.getrandbits(bits):0{bits // 4}x}"

    def _load(self, ns: int) -> float:
        return P.load_at((ns - self.day0_ns) / (60 * NS))

    def _noise(self, sigma: float) -> float:
        return math.exp(self.rng.gauss(0.0, sigma))

    def _response_id(self, provider: str, operation: str) -> str | None:
        if operation == "embeddings":
            return None
        if provider in CLAUDE_ID_PREFIX:
            return CLAUDE_ID_PREFIX[provider] + "".join(self.rng.choice(_B62) for _ in range(22))
        if provider == "vllm":
            return "cmpl-" + self._hex(128)
        return "chatcmpl-" + "".join(self.rng.choice(_B62) for _ in range(29))

    def _timing(self, start: int, network: float, queue: float, prefill: float, itl: float,
                out: int, reasoning: int, has_first_token: bool) -> dict:
        """Phase durations rounded to whole ns so that the parts add up exactly to the span."""
        net_ns, q_ns, p_ns = round(network * NS), round(queue * NS), round(prefill * NS)
        itl_ns = round(itl * NS) if out > 0 else 0
        decode_ns = (out - 1) * itl_ns if out > 1 else 0
        first = start + net_ns + q_ns + p_ns + reasoning * itl_ns if has_first_token else None
        return dict(
            start_ns=start, first_token_ns=first, end_ns=start + net_ns + q_ns + p_ns + decode_ns,
            network_s=net_ns / NS, queue_s=q_ns / NS, prefill_s=p_ns / NS, decode_s=decode_ns / NS,
            ttft_s=None if first is None else (first - start) / NS, itl_s=itl_ns / NS if out > 1 else None,
        )

    def _api_call(self, model: str, start: int, uncached: int, read: int, write: int, out: int,
                  reasoning: int = 0, operation: str = "chat") -> dict:
        """Tokens and timing of a call to a hosted API, or of its failure (no tokens billed)."""
        spec = P.MODELS[model]
        load = self._load(start)
        if self.rng.random() < P.ERROR_RATE[0] + P.ERROR_RATE[1] * load:
            error = self._choose(P.ERROR_TYPES)
            timing = self._timing(start, self.rng.uniform(*P.ERROR_SECONDS[error]), 0.0, 0.0, 0.0, 0, 0, False)
            return dict(status="error", error_type=error, uncached_input_tokens=0, cache_read_tokens=0,
                        cache_write_tokens=0, output_tokens=0, reasoning_tokens=0, response_id=None, **timing)
        network = self.rng.uniform(*spec.network_s)
        queue = self.rng.expovariate(1.0 / (P.API_QUEUE_MEAN_S[0] + P.API_QUEUE_MEAN_S[1] * load))
        prefill = ((uncached + write) / spec.prefill_tok_s + read / (10 * spec.prefill_tok_s)) * self._noise(0.1)
        itl = spec.itl_s * self._noise(0.15)
        timing = self._timing(start, network, queue, prefill, itl, out, reasoning, out > 0)
        return dict(status="ok", error_type=None, uncached_input_tokens=uncached, cache_read_tokens=read,
                    cache_write_tokens=write, output_tokens=out, reasoning_tokens=reasoning,
                    response_id=self._response_id(spec.provider, operation), **timing)

    def _ident(self, workload: str, model: str, convention: str | None, operation: str = "chat") -> dict:
        spec = P.MODELS[model]
        service = _workload(workload).service
        return dict(service=service, span_service=service, workload=workload, provider=spec.provider,
                    model=model, response_model=spec.response_model, operation=operation,
                    convention=convention)

    # ---- workloads -------------------------------------------------------------------------------
    def _tab(self, start: int, size: int) -> Iterator[SimCall]:
        model = P.TAB_MODEL
        spec = P.MODELS[model]
        prompt, out = self._logu("tab_prompt"), self._logu("tab_output")
        while self.vllm_running and self.vllm_running[0] <= start:
            heapq.heappop(self.vllm_running)
        background = round(P.VLLM_BACKGROUND_PEAK * self._load(start) * self.rng.uniform(0.8, 1.2))
        running = background + len(self.vllm_running)
        over = running - P.VLLM_MAX_RUNNING
        queue = (self.rng.expovariate(1.0 / (P.VLLM_QUEUE_MEAN_PER_SEQ_S * (over + 1))) if over >= 0
                 else self.rng.uniform(0.0002, 0.001))
        itl = spec.itl_s * (1 + P.VLLM_ITL_PER_SEQ * min(running, P.VLLM_MAX_RUNNING)) * self._noise(0.06)
        prefill = prompt / spec.prefill_tok_s * self._noise(0.1)
        timing = self._timing(start, self.rng.uniform(*P.VLLM_FRONTEND_S), queue, prefill, itl, out, 0, True)
        heapq.heappush(self.vllm_running, timing["end_ns"])
        ident = self._ident("tab_completion", model, P.CONV_VLLM, "text_completion")
        ident["span_service"] = P.VLLM_SERVICE
        yield self._new(
            trace_id=self._hex(128), span_id=self._hex(64), **ident, streaming=True, status="ok",
            error_type=None, uncached_input_tokens=prompt, cache_read_tokens=0, cache_write_tokens=0,
            output_tokens=out, reasoning_tokens=0, concurrency=running,
            response_id=self._response_id("vllm", "text_completion"), **timing,
        )

    def _inline(self, start: int, size: int) -> Iterator[SimCall]:
        model = P.INLINE_MODEL
        prompt, out = self._logu("inline_prompt"), self._logu("inline_output")
        prefix = int(prompt * self.rng.uniform(0.5, 0.85))  # system prompt + the open file
        read, write = (prefix, 0) if self.rng.random() < 0.75 else (0, prefix)
        call = self._api_call(model, start, prompt - prefix, read, write, out)
        yield self._new(trace_id=self._hex(128), span_id=self._hex(64),
                        **self._ident("inline_edit", model, P.CONV_SEMCONV), streaming=True, **call)

    def _chat_session(self, start: int, size: int) -> Iterator[SimCall]:
        model, convention = self._choose(P.CHAT_MODELS), self._choose(P.CHAT_CONVENTIONS)
        capture = self.rng.random() < P.CONTENT_CAPTURE_SHARE.get(convention, 0.0)
        session = "sess-" + self._hex(64)
        prompt, cap = self._logu("chat_first_prompt"), P.TOKENS["chat_max_prompt"][1]
        cached_upto, last_end, t = 0, None, start
        system_key = (P.MODELS[model].provider, f"chat-system:{model}")  # each provider caches per model
        for turn in range(size):
            system_warm = self.cache_seen.get(system_key, -(10**20)) >= t - P.CACHE_TTL_S * NS
            if last_end is not None and t - last_end <= P.CACHE_TTL_S * NS and cached_upto >= 1024:
                read = min(cached_upto // 128 * 128, prompt)
            elif system_warm and prompt >= 1024:
                read = 1024
            else:
                read = 0
            call = self._api_call(model, t, prompt - read, read, 0, self._logu("chat_output"))
            yield self._new(
                trace_id=self._hex(128), span_id=self._hex(64), **self._ident("chat", model, convention),
                streaming=self.rng.random() < P.STREAMING_SHARE_CHAT, session_id=session, step=turn,
                content_captured=capture, **call,
            )
            last_end = call["end_ns"]
            if call["status"] == "ok":
                self.cache_seen[system_key] = last_end
                grown = prompt + call["output_tokens"] + self._logu("chat_user_msg")
                cached_upto = prompt if grown <= cap else 1024  # history truncated: only the system prefix stays
                prompt = min(grown, cap)
                t = last_end + round(math.exp(self.rng.uniform(math.log(20), math.log(400))) * NS)
            else:
                t = last_end + round(self.rng.uniform(1.0, 5.0) * NS)  # the user retries

    def _agent(self, start: int, size: int) -> Iterator[SimCall]:
        model = self._choose(P.AGENT_MODELS)
        provider = P.MODELS[model].provider
        convention = P.CONV_OPENINFERENCE if provider == "anthropic" else P.CONV_SEMCONV
        repo, repo_tokens = self.rng.choices(P.REPOS, weights=[1 / (i + 1) for i in range(len(P.REPOS))])[0]
        capture = self.rng.random() < P.CONTENT_CAPTURE_SHARE[convention]
        trace_id = self._hex(128)
        base = P.AGENT_SYSTEM_TOKENS + repo_tokens
        prompt, cap = base + self._logu("agent_task"), P.TOKENS["agent_max_prompt"][1]
        warm = self.cache_seen.get((provider, repo), -(10**20)) >= start - P.CACHE_TTL_S * NS
        cached_upto, t = (base if warm else 0), start
        for step in range(size):
            out = self._logu("agent_output")
            if provider == "anthropic":  # explicit breakpoints: read the cached prefix, write up to the last one
                tail = min(self.rng.randint(20, 300), prompt - cached_upto)
                read, write, uncached, reasoning = cached_upto, prompt - cached_upto - tail, tail, 0
            else:  # automatic prefix caching in 128-token units from 1,024 tokens
                read = cached_upto // 128 * 128 if cached_upto >= 1024 else 0
                write, uncached = 0, prompt - read
                reasoning = min(int(out * self.rng.uniform(0.3, 0.75)), out - 1)
            call = self._api_call(model, t, uncached, read, write, out, reasoning)
            tool = tool_s = None
            if call["status"] == "ok":
                cached_upto = prompt - uncached if provider == "anthropic" else prompt
                self.cache_seen[(provider, repo)] = call["end_ns"]
                if step < size - 1:
                    tool = self._choose(P.AGENT_TOOLS)
                    tool_s = round(self.rng.uniform(*P.TOOL_SECONDS[tool]) * NS) / NS
                    result = self._logu_range(P.TOOL_RESULT_TOKENS[tool])
                    prompt = min(prompt + (out - reasoning) + result + 40, cap)
                next_t = call["end_ns"] + 2 * TOOL_GAP_NS + round((tool_s or 0.0) * NS)
            else:
                next_t = call["end_ns"] + round(self.rng.uniform(1.0, 4.0) * NS)  # back off, retry the same prompt
            yield self._new(
                trace_id=trace_id, span_id=self._hex(64), **self._ident("agent", model, convention),
                streaming=True, repo=repo, step=step, tool_after=tool, tool_s=tool_s,
                content_captured=capture, **call,
            )
            t = next_t

    def _indexing(self, start: int, size: int) -> Iterator[SimCall]:
        model = P.EMBEDDING_MODEL
        call = self._api_call(model, start, self._logu("index_input"), 0, 0, 0, operation="embeddings")
        yield self._new(trace_id=self._hex(128), span_id=self._hex(64),
                        **self._ident("indexing", model, P.CONV_SEMCONV, "embeddings"), streaming=False, **call)

    def _batch(self, start: int, size: int) -> Iterator[SimCall]:
        model = P.BATCH_MODEL
        prompt = self._logu("batch_prompt")
        warm = self.cache_seen.get(("openai", "batch-system"), -(10**20)) >= start - P.CACHE_TTL_S * NS
        read = P.BATCH_SYSTEM_TOKENS if warm else 0
        call = self._api_call(model, start, prompt - read, read, 0, self._logu("batch_output"))
        if call["status"] == "ok":
            self.cache_seen[("openai", "batch-system")] = call["end_ns"]
        ident = self._ident(P.UNTRACED.name, model, None)
        yield self._new(**ident, traced=False, trace_id=None, span_id=None, streaming=False, **call)


def _workload(name: str) -> P.Workload:
    return P.UNTRACED if name == P.UNTRACED.name else P.WORKLOADS[name]
