"""Load mutants of each adapter's seed files and check the loader's rules on every one.

The rules (issue: bad input must never be lost silently):
- never a traceback: `ingest` returns, the file has one ledger row, and no message is an unexpected error
  or a format-detection crash;
- the ledger tells the truth: `accepted` rows are stored under the file's load id, `rejected` rows are in
  `rejects` with a reason and a detail; a failed file's message names the file;
- a file not read in full is `failed` or `partial`, never `empty` or `loaded` (a damaged gzip, a cut JSON
  document); `empty` only for content that is blank;
- one bad record never fails a file (a change past the first line or record of a multi-record file);
- a truncated file keeps the seed's whole records before the cut;
- a record not stored is in `rejects` or counted as skipped (fewer kept means more rejected or skipped);
- variants that mean the same data (BOM, CRLF, CR, leading blank lines, gzip, re-serialised) load the same.

Mutants of one adapter go into one store (each under its own file name); a `same` mutant, whose content
is compared with the seed's, gets a store of its own in memory.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from phaselens.pipeline.load import ingest
from phaselens.pipeline.store import connect

from .mutate import Mutant, mutants, shape

ROOT = Path(__file__).resolve().parents[2]

# Valid seed files per adapter: fixtures and sample inputs (small ones, so a run stays short).
SEEDS: dict[str, list[str]] = {
    "otlp_json": ["tests/fixtures/otlp/openai_v2_default.jsonl", "tests/fixtures/otlp/bad_records.jsonl",
                  "tests/fixtures/otlp/single_document.json", "tests/fixtures/otlp/openllmetry_chunks.jsonl",
                  "tests/fixtures/otlp/anthropic_exclusive.jsonl"],
    "focus": ["tests/fixtures/billing/focus13.draft_token_type.csv", "tests/fixtures/billing/focus.llm_tokens.csv",
              "tests/fixtures/billing/focus.llm_tokens.parquet"],
    "aws_cur": ["tests/fixtures/billing/aws_cur.legacy_cur1.csv", "tests/fixtures/billing/aws_cur.bedrock.csv",
                "tests/fixtures/billing/aws_cur.bedrock.parquet"],
    "gcp_billing": ["tests/fixtures/billing/gcp_billing.flat_dotted.csv", "tests/fixtures/billing/gcp_billing.vertex.jsonl"],
    "azure_cost": ["tests/fixtures/billing/azure_cost.ea.csv", "sample_logs/billing/azure_openai_cost.csv"],
    "openai_usage": ["tests/fixtures/billing/openai_usage.pages.jsonl", "tests/fixtures/billing/openai_usage.page.json",
                     "tests/fixtures/billing/openai_usage.spec_examples.jsonl"],
    "openai_costs": ["tests/fixtures/billing/openai_costs.pages.json", "sample_logs/billing/openai_costs.json"],
    "anthropic_usage": ["tests/fixtures/billing/anthropic_usage.nested.json",
                        "tests/fixtures/billing/anthropic_usage.flattened.jsonl", "sample_logs/billing/anthropic_usage.json"],
    "anthropic_cost": ["tests/fixtures/billing/anthropic_cost.json", "sample_logs/billing/anthropic_cost.json"],
    "litellm": ["tests/fixtures/gateways/litellm.spendlogs.jsonl", "tests/fixtures/gateways/litellm.spendlogs.json",
                "tests/fixtures/gateways/litellm.spendlogs.csv"],
    "langfuse": ["tests/fixtures/gateways/langfuse.observations.jsonl", "tests/fixtures/gateways/langfuse.observations.json",
                 "tests/fixtures/gateways/langfuse.observations.csv"],
    "helicone": ["tests/fixtures/gateways/helicone.requests.json", "tests/fixtures/gateways/helicone.clickhouse.csv"],
    "llmperf": ["tests/fixtures/bench/llmperf/groq_8b.json"],
    "aiperf": ["tests/fixtures/bench/aiperf.profile_export.jsonl"],
    "vllm_bench": ["tests/fixtures/bench/vllm_bench.detailed.json", "tests/fixtures/bench/vllm_bench.e2els_short_list.json"],
    "azure_trace": ["tests/fixtures/bench/traces/azure.small.csv"],
    "mooncake": ["tests/fixtures/bench/traces/mooncake.small.jsonl"],
    "servegen": ["tests/fixtures/bench/traces/servegen.small.csv"],
}

BOUNDED = {"cuts": 3, "flips": 1, "values": 6, "gz_cuts": 1, "quick": True}
# an OTLP file takes seconds to stage whatever its size (one DuckDB pass over the span SQL): fewer mutants
BOUNDED_FOR = {"otlp_json": {"cuts": 2, "flips": 0, "values": 3, "gz_cuts": 0, "quick": True}}
LONG = {"cuts": 24, "flips": 12, "values": 27, "gz_cuts": 4}
LONG_FOR = {"otlp_json": {"cuts": 8, "flips": 4, "values": 9, "gz_cuts": 2}}
CRASH_WORDS = ("unexpected error while reading", "format detection failed", "Traceback")


@dataclass
class Outcome:
    status: str
    message: str
    adapter: str | None
    kept: int
    rejected: int
    skipped: int
    problems: list[str] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)  # line numbers of the kept records (from their locators)
    digest: tuple = ()
    kind: str | None = None
    records: int = 0  # input records behind the stored rows (a billing record may give several lines)


@dataclass
class Report:
    adapter: str
    tried: int = 0
    held: int = 0
    failures: list[str] = field(default_factory=list)


def _table(kind: str | None) -> str:
    return "raw_billing_lines" if kind == "billing" else "raw_calls"


def _digest(con, load_id: str, kind: str | None) -> tuple:
    if kind == "billing":
        rows = con.execute(
            "SELECT period_start, period_end, provider, model, token_type, quantity_tokens, cost, currency, charge_category "
            "FROM raw_billing_lines WHERE load_id = ? ORDER BY ALL", [load_id]).fetchall()
    else:
        rows = con.execute(
            "SELECT provider, model, started_at, uncached_input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, "
            "round(e2e_s, 6), round(ttft_s, 6), provided_cost_usd, status FROM raw_calls WHERE load_id = ? ORDER BY ALL",
            [load_id]).fetchall()
    reasons = sorted(r[0] for r in con.execute("SELECT reason FROM raw_rejects WHERE load_id = ?", [load_id]).fetchall())
    return tuple(rows), tuple(reasons)


_LINE = re.compile(r"^(\d+)")


def load_one(con, path: Path, *, digest: bool = False) -> Outcome:
    """Load `path` into `con` and check the rules every load must keep."""
    problems: list[str] = []
    try:
        result = ingest(con, [path])
    except BaseException as e:  # noqa: BLE001 - the rule under test
        if isinstance(e, KeyboardInterrupt):
            raise
        return Outcome("raised", f"{type(e).__name__}: {e}", None, 0, 0, 0, [f"ingest raised {type(e).__name__}: {e}"])
    if len(result.files) != 1:
        return Outcome("?", "", None, 0, 0, 0, [f"{len(result.files)} ledger results for one file"])
    r = result.files[0]
    kept = r.accepted + r.duplicates
    if any(w in r.message for w in CRASH_WORDS):
        problems.append(f"crash: {r.message[:300]}")
    n_loads = con.execute("SELECT count(*) FROM raw_loads WHERE load_id = ?", [r.load_id]).fetchone()[0]
    if n_loads != 1:
        problems.append(f"{n_loads} ledger rows")
    table = _table(r.kind)
    stored = con.execute(f"SELECT count(*) FROM {table} WHERE load_id = ?", [r.load_id]).fetchone()[0]
    # the load's rows: its new calls, and the stored calls it re-derived because later spans of their trace
    # arrived (docs/store.md: `load_id` is the load that last wrote the row; `replaced` counts those)
    if r.kind and stored != r.accepted + r.replaced:
        problems.append(f"ledger says {r.accepted} accepted and {r.replaced} replaced, {stored} stored")
    rej = con.execute("SELECT count(*), count(*) FILTER (WHERE coalesce(detail, '') = '') FROM raw_rejects "
                      "WHERE load_id = ?", [r.load_id]).fetchone()
    if rej[0] != r.rejected:
        problems.append(f"ledger says {r.rejected} rejected, {rej[0]} in rejects")
    if rej[1]:
        problems.append(f"{rej[1]} rejects without a detail")
    if r.status == "failed" and str(path) not in r.message:
        problems.append(f"a failure message that does not name the file: {r.message[:200]}")
    if r.status in ("failed", "partial") and not r.message:
        problems.append(f"{r.status} without a reason")
    lines = []
    if r.kind:
        prefix = str(path) + ":"
        for (loc,) in con.execute(f"SELECT source_locator FROM {table} WHERE load_id = ?", [r.load_id]).fetchall():
            m = _LINE.match(loc[len(prefix):]) if loc and loc.startswith(prefix) else None
            if m:
                lines.append(int(m.group(1)))
    records = con.execute(f"SELECT count(DISTINCT source_locator) FROM {table} WHERE load_id = ?",
                          [r.load_id]).fetchone()[0] if r.kind else 0
    return Outcome(r.status, r.message, r.adapter, kept, r.rejected, r.skipped, problems, lines,
                   _digest(con, r.load_id, r.kind) if digest and r.kind else (), r.kind, records)


def _blank_content(data: bytes) -> bool:
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error):
            return False
    return not data.strip(b" \t\r\n\xef\xbb\xbf")


def _line_end_offsets(data: bytes) -> list[int]:
    """Offset just past line n (1-based index n-1), splitting on LF, CRLF and bare CR like the readers."""
    ends, i, n = [], 0, len(data)
    while i < n:
        c = data[i]
        if c == 0x0D:
            i += 2 if i + 1 < n and data[i + 1] == 0x0A else 1
            ends.append(i)
            continue
        if c == 0x0A:
            ends.append(i + 1)
        i += 1
    if not ends or ends[-1] != n:
        ends.append(n)
    return ends


_WS = b" \t\r\n"


def _element_ends(data: bytes) -> dict[tuple, list[int]]:
    """For each array of a JSON document, by its path (keys, `*` for an index), the byte offset just past each
    element. Empty when the document cannot be scanned (the rule below is then not applied)."""
    ends: dict[tuple, list[int]] = {}
    n = len(data)

    def skip(i: int) -> int:
        while i < n and data[i] in _WS:
            i += 1
        return i

    def string(i: int) -> int:  # data[i] is the opening quote; returns the offset past the closing one
        i += 1
        while i < n:
            c = data[i]
            if c == 0x5C:
                i += 2
                continue
            if c == 0x22:
                return i + 1
            i += 1
        raise ValueError("unterminated string")

    def value(i: int, path: tuple, depth: int) -> int:
        if depth > 200:
            raise ValueError("too deep")
        i = skip(i)
        c = data[i:i + 1]
        if c == b"{":
            i = skip(i + 1)
            if data[i:i + 1] == b"}":
                return i + 1
            while True:
                i = skip(i)
                k_end = string(i)
                key = data[i + 1:k_end - 1].decode("utf-8", "replace")
                i = skip(k_end)
                if data[i:i + 1] != b":":
                    raise ValueError("no colon")
                i = skip(value(i + 1, path + (key,), depth + 1))
                if data[i:i + 1] == b",":
                    i += 1
                    continue
                if data[i:i + 1] == b"}":
                    return i + 1
                raise ValueError("bad object")
        if c == b"[":
            i = skip(i + 1)
            if data[i:i + 1] == b"]":
                return i + 1
            while True:
                i = value(i, path + ("*",), depth + 1)
                ends.setdefault(path, []).append(i)
                i = skip(i)
                if data[i:i + 1] == b",":
                    i += 1
                    continue
                if data[i:i + 1] == b"]":
                    return i + 1
                raise ValueError("bad array")
        if c == b'"':
            return string(i)
        j = i
        while j < n and data[j] not in b" \t\r\n,]}":
            j += 1
        if j == i:
            raise ValueError("no value")
        return j

    start = 3 if data[:3] == b"\xef\xbb\xbf" else 0
    try:
        value(start, (), 0)
    except (ValueError, IndexError):
        return {}
    return ends


def _whole_before(seed_data: bytes, count: int, off: int) -> int | None:
    """How many of the seed's records end before byte `off`: its records are the elements of the array (or arrays
    at one path, `*` for each index) holding as many elements as the seed read records (stored or rejected); the
    fewest when several paths qualify. None when no array does (a document of parallel columns, one record)."""
    if count <= 1:
        return None
    found = [sum(1 for e in es if e <= off) for path, es in _element_ends(seed_data).items() if len(es) == count]
    return min(found) if found else None


def judge(m: Mutant, out: Outcome, seed: Outcome, seed_data: bytes) -> list[str]:
    """The rules a mutant of this kind must keep, given the seed's own outcome."""
    bad = list(out.problems)
    fmt = shape(seed_data)
    lined = fmt in ("jsonl", "csv")
    if out.status == "empty" and not _blank_content(m.data):
        bad.append("reported empty, but the content is not blank")
    if m.kind == "same":
        if out.status != seed.status or out.adapter != seed.adapter:
            bad.append(f"status {out.status}/{out.adapter} where the seed is {seed.status}/{seed.adapter}: {out.message[:200]}")
        elif (out.kept, out.rejected, out.skipped) != (seed.kept, seed.rejected, seed.skipped):
            bad.append(f"kept/rejected/skipped {out.kept}/{out.rejected}/{out.skipped}, seed {seed.kept}/{seed.rejected}/{seed.skipped}")
        elif out.digest != seed.digest:
            bad.append("the stored records differ from the seed's")
    elif m.kind == "gzip_damage":
        if out.status not in ("failed", "partial"):
            bad.append(f"a damaged gzip is {out.status}, not failed or partial")
    elif m.kind == "cut":
        off = m.meta["offset"]
        rest = seed_data[off:]
        if fmt == "json" and rest.strip() and out.status not in ("failed", "partial"):
            bad.append(f"a cut JSON document is {out.status}, not partial or failed")
        if fmt == "json" and rest.strip():
            # the records before the cut are whole: the file is partial and keeps each of them (or rejects it
            # with its reason, as the seed may have); the seed's records are those it stored or rejected
            seed_count = (seed.records if seed.kind == "billing" else seed.kept) + seed.rejected
            whole = _whole_before(seed_data, seed_count, off)
            held = (out.records if seed.kind == "billing" else out.kept) + out.rejected
            if whole and out.status == "failed":
                bad.append(f"a JSON document cut after {whole} whole records failed as a whole: {out.message[:200]}")
            elif whole and held < whole:
                bad.append(f"kept or rejected {held} records, the seed has {whole} whole ones before the cut")
        if lined and seed.lines:
            ends = _line_end_offsets(seed_data)
            if out.status != "failed":
                whole = sum(1 for ln in seed.lines if ln - 1 < len(ends) and ends[ln - 1] <= off)
                if out.kept < whole:
                    bad.append(f"kept {out.kept} records, the seed has {whole} whole ones before the cut")
            elif seed.kept and off >= ends[min(1 if fmt == "csv" else 0, len(ends) - 1)]:
                bad.append(f"a file cut after its first record failed as a whole: {out.message[:200]}")
    elif m.kind == "bytes":
        ends = _line_end_offsets(seed_data)
        past_first = lined and len(ends) > 2 and m.meta["offset"] >= ends[1 if fmt == "csv" else 0]
        if past_first and out.status == "failed" and seed.status != "failed":
            bad.append(f"one damaged record failed the whole file: {out.message[:200]}")
    elif m.kind == "value":
        if out.status == "failed" and not m.meta.get("first") and seed.status != "failed":
            bad.append(f"one changed value ({m.meta.get('how')}) failed the whole file: {out.message[:200]}")
    # a record not stored is rejected or skipped: fewer records kept means more rejected or skipped. Billing
    # records are counted by their locators (a result gives one line per non-zero token bucket), in a fresh store.
    kept, seed_kept = (out.records, seed.records) if seed.kind == "billing" else (out.kept, seed.kept)
    # A flipped line separator joins two records into one line, which can only be rejected as one: the mutant
    # holds one record fewer than the seed.
    joined = (m.name.startswith("flip@") and lined and seed_data[m.meta["offset"]:m.meta["offset"] + 1] in (b"\n", b"\r")
              and m.data[m.meta["offset"]:m.meta["offset"] + 1] not in (b"\n", b"\r"))
    if m.kind in ("bytes", "value") and out.status == "loaded" and kept < seed_kept:
        if joined and kept + out.rejected + out.skipped >= seed_kept + seed.rejected + seed.skipped - 1:
            pass
        elif out.rejected + out.skipped <= seed.rejected + seed.skipped:
            bad.append(f"kept {kept} of the seed's {seed_kept} records with no more rejected or skipped "
                       f"({out.rejected}+{out.skipped} vs {seed.rejected}+{seed.skipped})")
    return bad


def run_adapter(adapter: str, work: Path, *, seed: int = 11, sizes: dict | None = None,
                seeds: list[str] | None = None, dump: Path | None = None) -> Report:
    """Every mutant of the adapter's seeds, loaded into one store under `work`; the rules checked on each.

    `dump`: a folder where each mutant that broke a rule is written (named after its seed and mutant), so it
    can be loaded again by hand.
    """
    sizes = sizes or BOUNDED_FOR.get(adapter, BOUNDED)
    report = Report(adapter)
    work.mkdir(parents=True, exist_ok=True)
    con = connect(work / f"{adapter}.duckdb")
    tried: set[bytes] = set()  # mutants already loaded into this store, by content
    try:
        for s_i, rel in enumerate(seeds if seeds is not None else SEEDS[adapter]):
            seed_path = ROOT / rel
            data = seed_path.read_bytes()
            ref = connect(":memory:")
            try:
                seed_out = load_one(ref, seed_path, digest=True)
            finally:
                ref.close()
            if seed_out.adapter != adapter or seed_out.problems:
                report.tried += 1
                report.failures.append(f"{rel}: seed itself is {seed_out.status}/{seed_out.adapter} {seed_out.problems}")
                continue
            rng = random.Random(f"{seed}:{adapter}:{rel}")
            for k, m in enumerate(mutants(data, rng, **sizes)):
                # the same bytes twice (two random offsets that agree) would be `unchanged` the second time
                key = hashlib.sha256(m.data).digest()
                if key in tried:
                    continue
                tried.add(key)
                if m.kind == "same":  # under the seed's own name: some sources label records by file name
                    path = work / f"same.{s_i}.{k:03d}" / seed_path.name
                    path.parent.mkdir()
                else:
                    path = work / f"{adapter}.{s_i}.{k:03d}.{m.name.replace('@', '_at_')}"
                path.write_bytes(m.data)
                # billing lines are unique by content across files: in the shared store an earlier mutant's lines
                # would count as duplicates, so these are judged in a store of their own
                if m.kind == "same" or (seed_out.kind == "billing" and m.kind in ("bytes", "value", "cut")):
                    mem = connect(":memory:")
                    try:
                        out = load_one(mem, path, digest=True)
                    finally:
                        mem.close()
                else:
                    out = load_one(con, path)
                report.tried += 1
                bad = judge(m, out, seed_out, data)
                if bad:
                    report.failures.append(f"{rel} {m.name} ({m.kind}): {'; '.join(bad)}")
                    if dump is not None:
                        dump.mkdir(parents=True, exist_ok=True)
                        (dump / f"{k:03d}.{seed_path.name}.{m.name.replace('@', '_at_')}").write_bytes(m.data)
                else:
                    report.held += 1
                path.unlink()
                if m.kind == "same":
                    path.parent.rmdir()
    finally:
        con.close()
    return report


def summary(reports: list[Report]) -> str:
    lines = [f"{'adapter':18} {'tried':>6} {'held':>6}"]
    for r in reports:
        lines.append(f"{r.adapter:18} {r.tried:6d} {r.held:6d}")
    lines.append(f"{'all':18} {sum(r.tried for r in reports):6d} {sum(r.held for r in reports):6d}")
    return "\n".join(lines)


def to_json(reports: list[Report]) -> str:
    return json.dumps([r.__dict__ for r in reports], indent=1)
