"""OTLP JSON ingest: every attribute convention and quirk of docs/formats.md#otlp-json-traces."""

from __future__ import annotations

import gzip
import shutil

import pytest

from tests.conftest import FIXTURES

OTLP = FIXTURES / "otlp"


def one(store, span_id):
    cur = store.execute("SELECT * FROM requests WHERE span_id = ?", [span_id])
    cols = [d[0] for d in cur.description]
    rows = cur.fetchall()
    assert len(rows) == 1, f"expected one call for span {span_id}, got {len(rows)}"
    return dict(zip(cols, rows[0]))


def test_semconv_stream_example(store, load):
    r = load(OTLP / "semconv_stream.jsonl").files[0]
    assert (r.status, r.adapter, r.accepted, r.rejected, r.skipped) == ("loaded", "otlp_json", 1, 0, 0)
    c = one(store, "00f067aa0ba902b7")
    assert c["provider"] == "openai" and c["model"] == "gpt-4o-mini" and c["model_raw"] == "gpt-4o-mini-2024-07-18"
    # OTel input includes cache reads: 1864 - 1536 uncached.
    assert (c["uncached_input_tokens"], c["cache_read_tokens"], c["output_tokens"]) == (328, 1536, 212)
    assert c["e2e_s"] == pytest.approx(3.412)
    assert c["ttft_s"] == pytest.approx(0.412) and c["timing_source"] == "measured"
    assert c["decode_s"] == pytest.approx(3.0)
    assert c["itl_s"] == pytest.approx(3.0 / 211)
    assert c["streaming"] is True and c["service"] == "support-bot" and c["environment"] == "production"
    assert c["call_id"] == "otlp:4bf92f3577b34da6a3ce929d0e0e4736:00f067aa0ba902b7"


def test_openai_v2_default_path_has_no_ttft(store, load):
    load(OTLP / "openai_v2_default.jsonl")
    c = one(store, "1111111111111111")
    assert c["provider"] == "openai" and c["model"] == "gpt-4o"
    assert c["ttft_s"] is None and c["timing_source"] == "none"
    assert c["uncached_input_tokens"] == 5000 and c["cache_read_tokens"] is None
    assert c["e2e_s"] == pytest.approx(6.0)
    assert c["workload"] == "editor-chat"  # no feature attribute: the service names the workload


def test_deprecated_names_and_numeric_int64(store, load):
    r = load(OTLP / "deprecated_numbers.jsonl").files[0]
    assert r.accepted == 1
    c = one(store, "2222222222222222")
    assert (c["uncached_input_tokens"], c["output_tokens"]) == (900, 50)
    assert c["e2e_s"] == pytest.approx(1.0)
    assert str(c["started_at"]).startswith("2025-08-13 10:00:00.123")


def test_openllmetry_chunk_events_give_ttft_and_itl(store, load):
    load(OTLP / "openllmetry_chunks.jsonl")
    c = one(store, "3333333333333333")
    assert c["convention"] == "openllmetry" and c["workload"] == "support-chat"
    assert c["ttft_s"] == pytest.approx(0.412) and c["timing_source"] == "events"
    assert (c["uncached_input_tokens"], c["cache_read_tokens"]) == (328, 1536)  # old cache attribute name
    # 11 chunks 20 ms apart for 11 tokens: one token per chunk, 20 ms per token
    assert c["itl_p50_s"] == pytest.approx(0.020) and c["itl_p95_s"] == pytest.approx(0.020)
    assert c["decode_s"] == pytest.approx(0.220) and c["itl_s"] == pytest.approx(0.022)


def test_openinference_tokens_and_first_token_event(store, load):
    load(OTLP / "openinference.jsonl")
    c = one(store, "4444444444444444")
    assert c["convention"] == "openinference" and c["provider"] == "anthropic" and c["model"] == "claude-sonnet-4"
    assert (c["uncached_input_tokens"], c["cache_read_tokens"], c["cache_write_tokens"], c["output_tokens"]) == (1000, 8000, 3000, 500)
    assert c["ttft_s"] == pytest.approx(0.8) and c["timing_source"] == "events"
    assert float(c["provided_cost_usd"]) == pytest.approx(0.0213)


def test_anthropic_style_input_excluding_cache(store, load):
    load(OTLP / "anthropic_exclusive.jsonl")
    c = one(store, "5555555555555555")
    assert (c["uncached_input_tokens"], c["cache_read_tokens"], c["cache_write_tokens"]) == (328, 1536, 42)
    assert c["input_tokens"] == 328 + 1536 + 42


def test_vllm_server_phase_attributes(store, load):
    load(OTLP / "vllm_llm_request.jsonl")
    c = one(store, "6666666666666666")
    assert c["provider"] == "vllm" and c["convention"] == "vllm" and c["model"] == "qwen2.5-coder-7b-instruct"
    assert c["queue_s"] == pytest.approx(0.0031) and c["prefill_s"] == pytest.approx(0.151)
    assert c["decode_s"] == pytest.approx(3.174) and c["ttft_s"] == pytest.approx(0.182)
    assert c["e2e_s"] == pytest.approx(3.38) and c["timing_source"] == "measured"
    assert c["itl_s"] == pytest.approx(3.174 / 211)


def test_non_model_spans_are_skipped_and_embeddings_kept(store, load):
    r = load(OTLP / "mixed_trace.jsonl").files[0]
    assert (r.accepted, r.skipped, r.rejected) == (1, 4, 0)
    c = one(store, "7777777777777774")
    assert c["operation"] == "embeddings" and c["uncached_input_tokens"] == 2048
    assert c["decode_s"] == 0 and c["ttft_s"] is None and c["itl_s"] is None
    assert c["prefill_s"] == pytest.approx(0.15)


def test_no_prompt_or_completion_text_is_stored(store, load, tmp_path):
    r = load(OTLP / "with_content.jsonl").files[0]
    assert r.accepted == 3
    db_file = tmp_path / "store.duckdb"
    store.execute("CHECKPOINT")
    for table in ("raw_calls", "raw_rejects", "raw_loads"):
        dump = store.execute(f"SELECT string_agg(CAST(t AS VARCHAR), '\n') FROM {table} t").fetchone()[0] or ""
        assert "PHASELENS-SECRET" not in dump and "def add" not in dump, table
    assert b"PHASELENS-SECRET" not in db_file.read_bytes()
    # ...but hashes of the leading blocks are kept for prefix reuse, equal across conventions' shared system block
    rows = store.execute("SELECT span_id, prefix_hashes, prefix_tokens FROM requests ORDER BY span_id").fetchall()
    for span_id, hashes, tokens in rows:
        assert hashes and len(hashes) == len(tokens) >= 2, span_id
        assert tokens == sorted(tokens) and tokens[-1] == 1864 or tokens[-1] == 12000



def _expected_prefixes(path):
    """The prompt blocks of each call span of `path` by the documented rule, hashed independently of the SQL: system
    instructions, then each message of gen_ai.input.messages, then one block per message index of the indexed
    conventions (its attributes as key=value joined by U+001F); a prefix is the first 16 hex digits of the md5 of
    its blocks' md5s, and its tokens are the input tokens shared out by characters."""
    import hashlib
    import json
    import re

    out = {}
    for line in path.read_text().splitlines():
        for r in json.loads(line)["resourceSpans"]:
            for sc in r["scopeSpans"]:
                for sp in sc["spans"]:
                    attrs = [(a["key"], next(iter(a["value"].values()))) for a in sp["attributes"]]
                    blocks = [v for k, v in attrs if k == "gen_ai.system_instructions"]
                    messages = [v for k, v in attrs if k == "gen_ai.input.messages"]
                    if messages:
                        blocks += [json.dumps(m, separators=(",", ":"), ensure_ascii=False) for m in json.loads(messages[0])]
                    indexed: dict[int, list[str]] = {}
                    for k, v in attrs:
                        if m := re.match(r"^(?:gen_ai\.prompt|llm\.input_messages)\.(\d+)\.", k):
                            indexed.setdefault(int(m.group(1)), []).append(f"{k}={v}")
                    blocks += [chr(31).join(indexed[n]) for n in sorted(indexed)]
                    md5s = [hashlib.md5(b.encode()).hexdigest() for b in blocks]
                    hashes = [hashlib.md5("".join(md5s[:i]).encode()).hexdigest()[:16] for i in range(1, len(md5s) + 1)]
                    out[sp["spanId"]] = (hashes, [len(b) for b in blocks])
    return out


def test_prompt_prefix_hashes_follow_the_documented_blocks(store, load):
    load(OTLP / "with_content.jsonl")
    expected = _expected_prefixes(OTLP / "with_content.jsonl")
    rows = store.execute("SELECT span_id, input_tokens, prefix_hashes, prefix_tokens FROM requests").fetchall()
    assert len(rows) == 3 and {r[0] for r in rows} <= set(expected)
    for span_id, input_tokens, hashes, tokens in rows:
        want, sizes = expected[span_id]
        assert len(want) >= 2 and hashes == want, span_id  # each of the three conventions
        assert tokens == [int(input_tokens * sum(sizes[:i]) / sum(sizes) + 0.5) for i in range(1, len(sizes) + 1)]
    # the system block is one text in all three conventions, but not one block: each convention writes it its own way
    assert len({r[2][0] for r in rows}) == 3

def test_bad_records_are_quarantined_and_good_ones_loaded(store, load):
    r = load(OTLP / "bad_records.jsonl").files[0]
    assert r.status == "loaded" and r.accepted == 2 and r.rejected == 4
    reasons = dict(store.execute("SELECT reason, locator FROM rejects").fetchall())
    assert set(reasons) == {"malformed_json", "missing_model", "negative_tokens", "end_before_start"}
    assert reasons["malformed_json"].endswith("bad_records.jsonl:2")
    assert reasons["missing_model"].endswith("#9999999999999991")


def test_single_document_and_gzip(store, load, tmp_path):
    gz = tmp_path / "spans.otlp"  # no telling extension: detected from content
    with open(OTLP / "semconv_stream.jsonl", "rb") as f, gzip.open(gz, "wb") as g:
        shutil.copyfileobj(f, g)
    res = load(OTLP / "single_document.json", gz)
    # the gzip file's span is the document's first call again (same trace and response id, another span id):
    # it joins the stored call, as it would in one file (docs/ingest.md, "Across files, chunks and flushes")
    assert [(f.accepted, f.skipped) for f in res.files] == [(2, 0), (0, 1)]
    assert store.execute("SELECT count(*) FROM requests").fetchone()[0] == 2


def test_unreadable_gzip_empty_and_foreign_files(store, load, tmp_path):
    load(OTLP / "semconv_stream.jsonl")
    broken = tmp_path / "broken.jsonl.gz"
    good = gzip.compress((OTLP / "semconv_stream.jsonl").read_bytes())
    broken.write_bytes(good[: len(good) // 2])
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    foreign = tmp_path / "notes.txt"
    foreign.write_text("hello\nthis is not a trace\n")
    res = load(broken, empty, foreign)
    by = {f.file.rsplit("/", 1)[-1]: f for f in res.files}
    assert by["broken.jsonl.gz"].status == "failed" and "gzip" in by["broken.jsonl.gz"].message
    assert by["empty.jsonl"].status == "empty"
    assert by["notes.txt"].status == "failed" and "not a format" in by["notes.txt"].message
    # nothing stored before was touched
    assert store.execute("SELECT count(*) FROM requests").fetchone()[0] == 1
    statuses = store.execute("SELECT status, count(*) FROM loads GROUP BY 1 ORDER BY 1").fetchall()
    assert statuses == [("empty", 1), ("failed", 2), ("loaded", 1)]


def test_loading_twice_changes_nothing(store, load):
    files = sorted(OTLP.glob("*.json*"))
    load(*files)

    def counts():
        return store.execute(
            "SELECT (SELECT count(*) FROM requests), (SELECT count(*) FROM rejects), "
            "(SELECT sum(accepted) FROM loads), (SELECT sum(output_tokens) FROM requests)"
        ).fetchone()

    before = counts()
    res = load(*files)
    assert {f.status for f in res.files} == {"unchanged"}
    assert counts() == before
    # the same spans from a renamed copy are duplicates, not new calls
    res = load(*files, force=True)
    assert sum(f.accepted for f in res.files) == 0 and sum(f.duplicates for f in res.files) > 0
    assert counts()[:2] == before[:2]


def test_absurd_values_are_rejected_not_fatal(store, load, tmp_path):
    import json

    line = json.loads((OTLP / "semconv_stream.jsonl").read_text().splitlines()[0])
    good = line["resourceSpans"][0]["scopeSpans"][0]["spans"][0]

    def variant(span_id, **changes):
        s = json.loads(json.dumps(good))
        s["spanId"] = span_id
        for key, value in changes.items():
            if key == "attr":
                name, val = value
                s["attributes"] = [a for a in s["attributes"] if a["key"] != name] + [{"key": name, "value": val}]
            else:
                s[key] = value
        return s

    spans = [
        variant("a000000000000001", attr=("gen_ai.response.time_to_first_chunk", {"doubleValue": 1e300})),
        variant("a000000000000002", events=[{"timeUnixNano": "123456789012345678901234567890", "name": "First Token Stream Event"}],
                attr=("gen_ai.response.time_to_first_chunk", {"stringValue": "x"})),
        variant("", ),
        variant("a000000000000004", attr=("gen_ai.usage.output_tokens", {"stringValue": "lots"})),
        variant("a000000000000005", startTimeUnixNano="99999999999999999999999"),
        variant("a000000000000006"),
    ]
    line["resourceSpans"][0]["scopeSpans"][0]["spans"] = spans
    path = tmp_path / "absurd.jsonl"
    path.write_text(json.dumps(line) + "\n")
    r = load(path).files[0]
    assert r.status == "loaded" and r.accepted == 1, r.message
    reasons = sorted(x[0] for x in store.execute("SELECT reason FROM rejects").fetchall())
    assert reasons == ["bad_number", "bad_number", "bad_number", "bad_timestamp", "missing_field"]
