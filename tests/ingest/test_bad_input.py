"""Bad input: each case names a way a file was lost, a good record was lost with a bad one, or the run stopped.

Rules checked here (and over many mutants in tests/fuzz): a file that could not be read in full is
`failed` or `partial` with its reason, never `empty` or `loaded`; one bad record is rejected alone; a
truncated file keeps its whole records before the cut; a sniffer error fails that file only.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pytest

from phaselens.ingest.base import SourceFile
from phaselens.ingest.registry import detect
from phaselens.pipeline.load import ingest
from phaselens.pipeline.store import connect

FIX = Path(__file__).resolve().parents[1] / "fixtures"
SAMPLE = Path(__file__).resolve().parents[2] / "sample_logs"

LITELLM = [json.loads(line) for line in (FIX / "gateways/litellm.spendlogs.jsonl").read_text().splitlines()
           if line.strip().startswith("{") and line.strip().endswith("}")]


def _write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    p = tmp_path / name
    p.write_bytes(data.encode() if isinstance(data, str) else data)
    return p


def _ledger(store, path: Path) -> dict:
    row = store.execute(
        "SELECT status, message, adapter, accepted, rejected, skipped FROM raw_loads WHERE file = ? "
        "ORDER BY started_at DESC LIMIT 1", [str(path)]).fetchone()
    assert row is not None, f"no ledger row for {path}"
    return dict(zip(("status", "message", "adapter", "accepted", "rejected", "skipped"), row))


def _rejects(store, path: Path) -> list[tuple[str, str]]:
    return store.execute("SELECT reason, detail FROM raw_rejects WHERE locator LIKE ? || '%' ORDER BY locator",
                         [str(path)]).fetchall()


def _gzip_bytes(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _litellm_lines(n: int) -> list[dict]:
    out = []
    for i in range(n):
        rec = dict(LITELLM[0])
        rec["request_id"] = f"req-{i}"
        out.append(rec)
    return out


def _jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


# ------------------------------------------------------------------ silent loss


def test_gzip_cut_to_its_header_fails_not_empty(store, tmp_path):
    whole = _gzip_bytes((FIX / "gateways/litellm.spendlogs.jsonl").read_bytes())
    p = _write(tmp_path, "cut.jsonl.gz", whole[:10])
    ingest(store, [p])
    led = _ledger(store, p)
    assert led["status"] == "failed"
    assert "gzip" in led["message"]


def test_gzip_magic_then_garbage_fails_not_empty(store, tmp_path):
    p = _write(tmp_path, "garbage.gz", b"\x1f\x8b\x08\x00" + b"this is not deflate data at all" * 10)
    ingest(store, [p])
    led = _ledger(store, p)
    assert led["status"] == "failed"
    assert "gzip" in led["message"]


def test_gzip_with_an_empty_first_member_reads_the_rest(store, tmp_path):
    body = _jsonl(_litellm_lines(3)).encode()
    p = _write(tmp_path, "members.jsonl.gz", _gzip_bytes(b"") + _gzip_bytes(body))
    ingest(store, [p])
    led = _ledger(store, p)
    assert (led["status"], led["accepted"]) == ("loaded", 3)


def test_gzip_of_several_members_reads_them_all(store, tmp_path):
    recs = _litellm_lines(4)
    p = _write(tmp_path, "many.jsonl.gz", b"".join(_gzip_bytes(_jsonl([r]).encode()) for r in recs))
    ingest(store, [p])
    assert _ledger(store, p)["accepted"] == 4


def test_gzip_cut_mid_stream_keeps_the_lines_before_and_is_partial(store, tmp_path):
    body = _jsonl(_litellm_lines(400)).encode()
    whole = _gzip_bytes(body)
    p = _write(tmp_path, "cut.jsonl.gz", whole[: len(whole) * 2 // 3])
    ingest(store, [p])
    led = _ledger(store, p)
    assert led["status"] == "partial"
    assert "cut short" in led["message"]
    assert 100 < led["accepted"] < 400


def test_gzip_with_trailing_garbage_is_partial(store, tmp_path):
    p = _write(tmp_path, "trail.jsonl.gz", _gzip_bytes(_jsonl(_litellm_lines(2)).encode()) + b"garbage after it")
    ingest(store, [p])
    led = _ledger(store, p)
    assert (led["status"], led["accepted"]) == ("partial", 2)
    assert "after the last gzip member" in led["message"]


@pytest.mark.parametrize("compress", [False, True])
def test_more_than_256_kb_of_leading_blank_lines_still_loads(store, tmp_path, compress):
    body = ("\n" * 300_000 + _jsonl(_litellm_lines(2))).encode()
    p = _write(tmp_path, "blank.jsonl" + (".gz" if compress else ""), _gzip_bytes(body) if compress else body)
    ingest(store, [p])
    led = _ledger(store, p)
    assert (led["status"], led["adapter"], led["accepted"]) == ("loaded", "litellm", 2)


def test_a_file_of_blank_lines_only_is_empty(store, tmp_path):
    p = _write(tmp_path, "blank.jsonl", "\n" * 300_000 + "  \r\n")
    ingest(store, [p])
    assert _ledger(store, p)["status"] == "empty"


def test_a_token_count_that_is_an_object_is_rejected_not_dropped(store, tmp_path):
    doc = json.loads((FIX / "billing/anthropic_usage.nested.json").read_text())
    first = doc["data"][0]["results"][0]
    first["cache_creation"]["ephemeral_5m_input_tokens"] = {"tokens": 42000}
    p = _write(tmp_path, "anthropic_usage.json", json.dumps(doc))
    ingest(store, [p])
    rejects = _rejects(store, p)
    assert [r for r, d in rejects if "ephemeral_5m_input_tokens" in d] == ["bad_number"]
    assert _ledger(store, p)["accepted"] > 0


# ------------------------------------------------------------------ one bad record fails a whole file


@pytest.mark.parametrize("value", ["1e30", "1e308", "1e400", "-1e400"])
def test_huge_token_count_rejects_one_call(store, tmp_path, value):
    lines = [json.dumps(r) for r in _litellm_lines(3)]
    lines[1] = lines[1].replace('"completion_tokens": 212', f'"completion_tokens": {value}', 1)
    assert value in lines[1]
    p = _write(tmp_path, "spend.jsonl", "\n".join(lines) + "\n")
    ingest(store, [p])
    led = _ledger(store, p)
    assert (led["status"], led["accepted"], led["rejected"]) == ("loaded", 2, 1)


@pytest.mark.parametrize("value", ["1e30", "1e308", "1e400"])
def test_huge_cost_rejects_one_call(store, tmp_path, value):
    lines = [json.dumps(r) for r in _litellm_lines(3)]
    lines[1] = lines[1].replace('"spend": 0.0002916', f'"spend": {value}', 1)
    assert value in lines[1]
    p = _write(tmp_path, "spend.jsonl", "\n".join(lines) + "\n")
    ingest(store, [p])
    led = _ledger(store, p)
    assert (led["status"], led["accepted"], led["rejected"]) == ("loaded", 2, 1)


@pytest.mark.parametrize("value", ["1e30", "1e308", "1e400"])
def test_huge_billing_numbers_reject_one_line(store, tmp_path, value):
    lines = (FIX / "billing/openai_usage.pages.jsonl").read_text().splitlines()
    clean = ingest(store, [_write(tmp_path, "clean.jsonl", "\n".join(lines) + "\n")]).files[0]
    lines[0] = lines[0].replace('"output_tokens":300', f'"output_tokens":{value}', 1)
    assert value in lines[0]
    p = _write(tmp_path, "usage.jsonl", "\n".join(lines) + "\n")
    r = ingest(store, [p]).files[0]
    assert r.status == "loaded"
    assert r.rejected == clean.rejected + 1  # the one result, whose lines are all kept back
    assert 0 < r.accepted + r.duplicates < clean.accepted


@pytest.mark.parametrize("value", ["1e30", "1e308"])
def test_huge_cost_in_a_csv_rejects_one_row(store, tmp_path, value):
    lines = (FIX / "billing/focus.llm_tokens.csv").read_text().splitlines()
    header = lines[0].split(",")
    col = header.index("BilledCost")
    import csv
    import io
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    rows[1][col] = value
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    p = _write(tmp_path, "focus.csv", buf.getvalue())
    ingest(store, [p])
    led = _ledger(store, p)
    assert led["status"] == "loaded"
    assert led["rejected"] >= 1 and led["accepted"] > 0


@pytest.mark.parametrize("metric,value", [("request_latency", ""), ("ttft", ""), ("inter_chunk_latency", [""]),
                                          ("inter_chunk_latency", [10.0, "", 30.0])])
def test_aiperf_empty_latency_rejects_or_keeps_one_record(store, tmp_path, metric, value):
    lines = (FIX / "bench/aiperf.profile_export.jsonl").read_text().splitlines()
    clean = ingest(store, [_write(tmp_path, "clean.jsonl", "\n".join(lines) + "\n")]).files[0]
    assert clean.accepted >= 2
    rec = json.loads(lines[0])
    rec["metrics"][metric]["value"] = value
    lines[0] = json.dumps(rec)
    p = _write(tmp_path, "profile_export.jsonl", "\n".join(lines) + "\n")
    r = ingest(store, [p], force=True).files[0]
    assert r.status == "loaded", r.message
    assert r.accepted + r.duplicates + r.rejected + r.skipped == clean.accepted + clean.rejected + clean.skipped
    assert r.accepted + r.duplicates >= clean.accepted - 1
    if metric == "inter_chunk_latency":  # the changed record: rejected for its value, not for a crash
        assert ("bad_number", "metrics.inter_chunk_latency holds an empty value") in _rejects(store, p)


def test_aiperf_first_record_without_an_optional_key_is_still_aiperf(store, tmp_path):
    lines = (FIX / "bench/aiperf.profile_export.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    del rec["error"]
    lines[0] = json.dumps(rec)
    p = _write(tmp_path, "profile_export.jsonl", "\n".join(lines) + "\n")
    ingest(store, [p])
    led = _ledger(store, p)
    assert (led["status"], led["adapter"]) == ("loaded", "aiperf")


def test_deep_nesting_in_one_json_line_rejects_that_line(store, tmp_path):
    recs = _litellm_lines(3)
    deep = "[" * 100_000 + "]" * 100_000
    lines = [json.dumps(recs[0]), json.dumps(recs[1])[:-1] + f', "metadata2": {deep}}}', json.dumps(recs[2])]
    p = _write(tmp_path, "spend.jsonl", "\n".join(lines) + "\n")
    ingest(store, [p])
    led = _ledger(store, p)
    assert (led["status"], led["accepted"], led["rejected"]) == ("loaded", 2, 1)


def test_deep_nesting_in_one_billing_line_rejects_that_line(store, tmp_path):
    lines = (FIX / "billing/openai_usage.pages.jsonl").read_text().splitlines()
    clean = ingest(store, [_write(tmp_path, "clean.jsonl", "\n".join(lines) + "\n")]).files[0]
    lines.insert(1, '{"object":"page","data":' + "[" * 100_000 + "]" * 100_000 + "}")
    p = _write(tmp_path, "usage.jsonl", "\n".join(lines) + "\n")
    r = ingest(store, [p]).files[0]
    assert r.status == "loaded"
    assert (r.accepted + r.duplicates, r.rejected) == (clean.accepted, clean.rejected + 1)


@pytest.mark.parametrize("at", [0, 1])
def test_one_non_json_line_in_billing_json_lines_rejects_that_line(store, tmp_path, at):
    lines = (FIX / "billing/openai_usage.pages.jsonl").read_text().splitlines()
    clean = ingest(store, [_write(tmp_path, "clean.jsonl", "\n".join(lines) + "\n")]).files[0]
    clean_count, clean_rejected = clean.accepted, clean.rejected
    lines.insert(at, '{"object":"page", this is not json')
    p = _write(tmp_path, "usage.jsonl", "\n".join(lines) + "\n")
    r = ingest(store, [p], force=True).files[0]
    assert r.status == "loaded"
    assert r.rejected == clean_rejected + 1
    assert r.accepted + r.duplicates == clean_count


def _cut_document(text: str, marker: str, occurrence: int) -> str:
    """The text cut just after the `occurrence`-th `marker` (1-based)."""
    pos = -1
    for _ in range(occurrence):
        pos = text.index(marker, pos + 1)
    return text[: pos + len(marker)]


@pytest.mark.parametrize("fixture,adapter,marker,whole_before", [
    ("gateways/helicone.requests.json", "helicone", '"request_id"', 1),
    ("gateways/langfuse.observations.json", "langfuse", '"traceId"', 1),
])
def test_truncated_gateway_export_keeps_the_records_before_the_cut(store, tmp_path, fixture, adapter, marker,
                                                                    whole_before):
    text = (FIX / fixture).read_text()
    p = _write(tmp_path, Path(fixture).name, _cut_document(text, marker, whole_before + 1) + ' "abc')
    ingest(store, [p])
    led = _ledger(store, p)
    assert (led["status"], led["adapter"]) == ("partial", adapter)
    assert led["accepted"] + led["skipped"] == whole_before
    assert any(r == "malformed_json" for r, _ in _rejects(store, p))


def test_truncated_billing_document_keeps_the_whole_results_before_the_cut(store, tmp_path):
    doc = json.loads((FIX / "billing/anthropic_usage.nested.json").read_text())
    text = json.dumps(doc, indent=1)
    p = _write(tmp_path, "anthropic_usage.json", _cut_document(text, '"output_tokens"', 2))
    ingest(store, [p])
    led = _ledger(store, p)
    assert (led["status"], led["adapter"]) == ("partial", "anthropic_usage")
    # the first result is whole (4 non-zero buckets), the second is cut and not kept in part
    assert led["accepted"] == 4
    assert store.execute("SELECT count(DISTINCT source_locator) FROM raw_billing_lines").fetchone()[0] == 1


def test_truncated_vllm_bench_keeps_the_whole_requests(store, tmp_path):
    doc = json.loads((FIX / "bench/vllm_bench.detailed.json").read_text())
    n = len(doc["ttfts"])
    text = json.dumps(doc)
    # cut inside the last per-request list: every list but the last is whole
    last_key = list(doc)[-1]
    cut = text[: text.index(f'"{last_key}"') + len(last_key) + 4]
    p = _write(tmp_path, "bench.json", cut)
    ingest(store, [p])
    led = _ledger(store, p)
    assert (led["status"], led["adapter"]) == ("partial", "vllm_bench")
    assert led["accepted"] + led["rejected"] >= 1
    assert led["accepted"] <= n


# ------------------------------------------------------------------ OTLP reading


def _otlp_line() -> dict:
    return json.loads((FIX / "otlp/openai_v2_default.jsonl").read_text().splitlines()[0])


def _spans(batch: dict) -> list[dict]:
    return [s for rs in batch["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def test_single_otlp_document_with_a_bom_loads(store, tmp_path):
    raw = (FIX / "otlp/single_document.json").read_bytes()
    ref = ingest(store, [_write(tmp_path, "ref.json", raw)]).files[0]
    p = _write(tmp_path, "bom.json", b"\xef\xbb\xbf" + raw)
    r = ingest(store, [p], force=True).files[0]
    assert r.status == "loaded" and r.rejected == 0
    assert r.accepted + r.duplicates == ref.accepted > 0


def test_lone_surrogate_in_one_attribute_keeps_the_line_s_other_spans(store, tmp_path):
    batch = _otlp_line()
    n = len(_spans(batch))
    text = json.dumps(batch)
    # a lone surrogate in the value of the first span's first string attribute
    text = text.replace('"stringValue": "', '"stringValue": "\\ud800', 1)
    p = _write(tmp_path, "surrogate.jsonl", text + "\n")
    ingest(store, [p])
    led = _ledger(store, p)
    assert led["status"] == "loaded"
    assert led["accepted"] + led["skipped"] + led["rejected"] >= n
    assert led["accepted"] >= 1
    assert not [r for r, _ in _rejects(store, p) if r == "malformed_json"]


@pytest.mark.parametrize("end", ['"garbage"', '"NaN"', '{"x": 1}', '"1e400"', "[1, 2]"])
def test_otlp_garbage_end_time_is_rejected(store, tmp_path, end):
    batch = _otlp_line()
    span = next(s for s in _spans(batch) if any(a["key"].startswith("gen_ai.") for a in s.get("attributes", [])))
    span["endTimeUnixNano"] = "__END__"
    text = json.dumps(batch).replace('"__END__"', end)
    p = _write(tmp_path, "end.jsonl", text + "\n")
    ingest(store, [p])
    reasons = [r for r, _ in _rejects(store, p)]
    assert "bad_timestamp" in reasons
    assert store.execute("SELECT count(*) FROM raw_calls WHERE span_id = ?", [span["spanId"].lower()]).fetchone()[0] == 0


# ------------------------------------------------------------------ crashes that abort the run


def test_cr_only_csv_is_read_like_its_lf_version(store, tmp_path):
    text = (FIX / "billing/focus.llm_tokens.csv").read_text()
    lf = ingest(store, [_write(tmp_path, "lf.csv", text)]).files[0]
    p = _write(tmp_path, "cr.csv", text.replace("\r\n", "\n").replace("\n", "\r"))
    cr = ingest(store, [p], force=True).files[0]
    assert cr.status == "loaded", cr.message
    assert cr.adapter == lf.adapter
    assert cr.accepted + cr.duplicates == lf.accepted


def test_sniffer_errors_fail_one_file_and_later_files_still_load(store, tmp_path):
    bad = [
        _write(tmp_path, "a_comma_cr.txt", b"a,b\rc,d\r\x00\x01"),
        _write(tmp_path, "b_parquet.parquet", b"PAR1" + b"x,y\rz" * 50 + b"PAR1"),
        _write(tmp_path, "c_deep.json", "[" * 200_000 + "]" * 200_000),
        _write(tmp_path, "d_deep_obj.json", '{"a":' * 100_000 + "1" + "}" * 100_000),
    ]
    good = _write(tmp_path, "z_spend.jsonl", _jsonl(_litellm_lines(2)))
    result = ingest(store, [tmp_path])
    by_name = {Path(f.file).name: f for f in result.files}
    for b in bad:
        r = by_name[b.name]
        assert r.status == "failed", (b.name, r.status, r.message)
        assert b.name in r.message
    assert by_name[good.name].status == "loaded" and by_name[good.name].accepted == 2


def test_detect_wraps_a_sniffer_that_raises(tmp_path, monkeypatch):
    from phaselens.ingest import registry
    from phaselens.ingest.base import UnreadableFile

    class Boom:
        name, kind, priority = "boom", "calls", 0

        def sniff(self, src):
            raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(registry, "adapters", lambda: (Boom(),))
    p = _write(tmp_path, "x.jsonl", "{}\n")
    with pytest.raises(UnreadableFile) as e:
        detect(SourceFile(p))
    assert "boom" in str(e.value) and "x.jsonl" in str(e.value)


def test_partial_status_is_documented():
    ops = (Path(__file__).resolve().parents[2] / "docs/operations.md").read_text()
    assert "`partial`" in ops


def test_an_empty_but_complete_gzip_is_empty(tmp_path):
    # an empty but complete gzip is empty; the same stream without its trailer is cut
    whole = _gzip_bytes(b"")
    assert zlib.decompress(whole, 16 + zlib.MAX_WBITS) == b""
    assert SourceFile(_write(tmp_path, "e.gz", whole)).is_empty


# ------------------------------------------------------------------ found by tests/fuzz


@pytest.mark.parametrize("fixture,runs_on", [("bench/traces/azure.small.csv", True),
                                             ("billing/focus.llm_tokens.csv", False)])  # its own quotes close it
def test_a_stray_quote_in_a_csv_row_rejects_that_row_only(store, tmp_path, fixture, runs_on):
    lines = (FIX / fixture).read_text().splitlines(keepends=True)
    clean = ingest(store, [_write(tmp_path, "clean.csv", "".join(lines))]).files[0]
    lines[2] = '"' + lines[2]  # an opening quote that never closes on its line
    p = _write(tmp_path, "quote.csv", "".join(lines))
    r = ingest(store, [p]).files[0]
    assert r.status == "loaded"
    assert r.rejected == clean.rejected + 1
    assert r.accepted + r.duplicates >= clean.accepted - 3  # a row gives up to 3 billing lines
    assert any("runs on to line" in d for _, d in _rejects(store, p)) == runs_on


def test_json_lines_with_crs_only_load_like_lf(store, tmp_path):
    text = _jsonl(_litellm_lines(3))
    p = _write(tmp_path, "cr.jsonl", text.replace("\n", "\r"))
    r = ingest(store, [p]).files[0]
    assert (r.status, r.adapter, r.accepted) == ("loaded", "litellm", 3)


def test_blank_lines_before_a_csv_header(store, tmp_path):
    text = (FIX / "bench/traces/azure.small.csv").read_text()
    ref = ingest(store, [_write(tmp_path, "ref.csv", text)]).files[0]
    r = ingest(store, [_write(tmp_path, "blank.csv", "\n\n\r\n" + text)]).files[0]
    assert (r.status, r.accepted + r.duplicates, r.rejected) == ("loaded", ref.accepted, ref.rejected)


# ------------------------------------------------------------------ OTLP spans lost to a mangled key


def _otlp_two_resources() -> dict:
    """The recorded batch with its resource entry twice, the copy's spans under other ids."""
    batch = _otlp_line()
    copy = json.loads(json.dumps(batch["resourceSpans"][0]))
    for ss in copy["scopeSpans"]:
        for s in ss["spans"]:
            s["spanId"] = s["spanId"][::-1]
            s["traceId"] = s["traceId"][::-1]
            if s.get("parentSpanId"):
                s["parentSpanId"] = s["parentSpanId"][::-1]
    batch["resourceSpans"].append(copy)
    return batch


def test_a_lone_surrogate_in_the_scopespans_key_rejects_that_entry_not_silently(store, tmp_path):
    # the fuzz run's mutant: `"\ud800scopeSpans"` (a lone surrogate escape after the key's quote)
    raw = (FIX / "otlp/openai_v2_default.jsonl").read_bytes()
    p = _write(tmp_path, "surrogate_key.jsonl", raw.replace(b'"scopeSpans"', b'"\\ud800scopeSpans"', 1))
    ingest(store, [p])
    led = _ledger(store, p)
    assert led["accepted"] == 0
    rejects = store.execute("SELECT reason, detail, raw FROM raw_rejects WHERE locator LIKE ? || '%'",
                            [str(p)]).fetchall()
    assert [r[0] for r in rejects] == ["missing_field"]
    assert "scopeSpans" in rejects[0][1] and "\ufffdscopeSpans" in rejects[0][2]
    assert led["rejected"] == 1


def test_a_misspelled_spans_key_rejects_that_scope_and_keeps_the_whole_ones(store, tmp_path):
    batch = _otlp_two_resources()
    whole = len(batch["resourceSpans"][1]["scopeSpans"][0]["spans"])
    text = json.dumps(batch, indent=2)  # a single pretty-printed document, like single_document.json
    p = _write(tmp_path, "spens.json", text.replace('"spans"', '"spens"', 1))
    ref = ingest(store, [_write(tmp_path, "ref.json", json.dumps({"resourceSpans": batch["resourceSpans"][1:]}))]).files[0]
    assert ref.accepted > 0 and ref.accepted + ref.skipped == whole
    r = ingest(store, [p]).files[0]
    assert r.status == "loaded"
    assert r.accepted + r.duplicates == ref.accepted  # the whole entry's spans are kept
    locators = [x[0] for x in store.execute(
        "SELECT locator FROM raw_rejects WHERE load_id = ? AND reason = 'missing_field'", [r.load_id]).fetchall()]
    assert locators == [f"{p}:1/resourceSpans[0]/scopeSpans[0]"]


@pytest.mark.parametrize("where", ["inside_a_span", "inside_the_second_resource"])
def test_a_cut_otlp_document_keeps_its_whole_spans_before_the_cut(store, tmp_path, where):
    batch = _otlp_two_resources()
    first = batch["resourceSpans"][0]
    ref = ingest(store, [_write(tmp_path, "ref.json", json.dumps({"resourceSpans": [first]}, indent=2))]).files[0]
    assert ref.accepted > 0
    text = json.dumps(batch, indent=2)
    second = text.index('"resource"', text.index('"scopeSpans"'))  # the second resource entry starts here
    if where == "inside_a_span":  # in the last span's attributes: every other span is whole
        cut = text[: text.rindex('"key"') + 3]
    else:  # inside the second entry's resource attributes: its spans cannot be told apart by service
        cut = text[: second + 40]
    p = _write(tmp_path, f"cut_{where}.json", cut)
    r = ingest(store, [p], force=True).files[0]
    assert r.status == "partial" and r.message.startswith("not read in full: the JSON document")
    # the first entry's spans are all kept (duplicates of the reference load), the cut is one reject
    assert r.accepted + r.duplicates >= ref.accepted
    assert r.rejected == 1
    (reason, detail), = _rejects(store, p)
    assert reason == "malformed_json" and "the spans before the break are kept" in detail
    if where == "inside_the_second_resource":
        assert r.accepted + r.duplicates == ref.accepted


def test_a_recorded_document_with_a_flipped_byte_in_spans_is_not_a_silent_loss(store, tmp_path):
    raw = (FIX / "otlp/single_document.json").read_bytes()
    i = raw.index(b'"spans"') + 3  # the fuzz run's flip@701: "spans" -> "spens"
    flipped = raw[:i] + bytes([raw[i] ^ 0x04]) + raw[i + 1:]
    assert b'"spens"' in flipped
    r = ingest(store, [_write(tmp_path, "flip.json", flipped)]).files[0]
    assert r.accepted == 0
    assert r.rejected >= 1 or r.status in ("partial", "failed")
    assert "missing_field" in [x[0] for x in _rejects(store, tmp_path / "flip.json")]


def test_an_empty_span_list_is_not_a_reject(store, tmp_path):
    batch = _otlp_two_resources()
    batch["resourceSpans"][0]["scopeSpans"][0]["spans"] = []
    batch["resourceSpans"][1]["scopeSpans"] = []
    r = ingest(store, [_write(tmp_path, "empty_lists.jsonl", json.dumps(batch) + "\n")]).files[0]
    assert r.status == "loaded" and r.rejected == 0


# ------------------------------------------------------------------ one bad file never fails the next


@pytest.mark.parametrize("ending", ["ROLLBACK", "COMMIT"])
def test_a_file_whose_error_ended_the_transaction_does_not_fail_later_files(store, tmp_path, monkeypatch, ending):
    from phaselens.ingest.otlp import OtlpJsonAdapter

    real = OtlpJsonAdapter.stage

    def stage(self, con, src, load_id):
        if src.path.name.startswith("a_"):
            con.execute(ending)  # the transaction is over when the error reaches the loader
            raise RuntimeError("stage failed after its transaction ended")
        return real(self, con, src, load_id)

    monkeypatch.setattr(OtlpJsonAdapter, "stage", stage)
    raw = (FIX / "otlp/openai_v2_default.jsonl").read_bytes()
    bad = _write(tmp_path, "a_bad.jsonl", raw)
    later = [_write(tmp_path, "b_good.jsonl", raw), _write(tmp_path, "c_good.jsonl", (FIX / "otlp/openllmetry_chunks.jsonl").read_bytes())]
    result = ingest(store, [bad, *later])
    assert [f.status for f in result.files] == ["failed", "loaded", "loaded"], [f.message for f in result.files]
    assert "stage failed" in result.files[0].message
    assert all(f.accepted > 0 for f in result.files[1:])


def test_an_error_that_aborts_the_transaction_is_reported_as_itself_and_later_files_load(store, tmp_path, monkeypatch):
    from phaselens.ingest import otlp

    real = otlp._stage_chunk

    def chunk(con, display, *rest):
        if "a_bad" in display:
            con.execute("SELECT error('the first error')")
        return real(con, display, *rest)

    monkeypatch.setattr(otlp, "_stage_chunk", chunk)
    raw = (FIX / "otlp/openai_v2_default.jsonl").read_bytes()
    result = ingest(store, [_write(tmp_path, "a_bad.jsonl", raw), _write(tmp_path, "b_good.jsonl", raw)])
    assert [f.status for f in result.files] == ["failed", "loaded"]
    assert "the first error" in result.files[0].message, result.files[0].message
    assert result.files[1].accepted > 0


def test_deep_nesting_in_a_vllm_bench_text_field_keeps_the_requests(store, tmp_path):
    # the fuzz run's mutant (seed 12): `backend` of a recorded result replaced by 5,000 nested arrays
    doc = json.loads((FIX / "bench/vllm_bench.e2els_short_list.json").read_text())
    ref = ingest(store, [_write(tmp_path, "ref.json", json.dumps(doc))]).files[0]
    doc["backend"] = "__DEEP__"
    p = _write(tmp_path, "deep_backend.json", json.dumps(doc).replace('"__DEEP__"', "[" * 5000 + "]" * 5000))
    r = ingest(store, [p], force=True).files[0]
    assert r.status == "loaded", r.message
    assert r.accepted + r.duplicates + r.rejected == ref.accepted + ref.rejected
    assert r.accepted + r.duplicates > 0



def _stored_locators(store, path: Path) -> set[str]:
    rows = store.execute("SELECT DISTINCT source_locator FROM raw_billing_lines b JOIN raw_loads l USING (load_id) "
                         "WHERE l.file = ?", [str(path)]).fetchall()
    return {loc[len(str(path)) + 1:] for (loc,) in rows}


@pytest.mark.parametrize("fixture,adapter", [("billing/openai_costs.pages.json", "openai_costs"),
                                             ("billing/openai_usage.page.json", "openai_usage")])
def test_a_bucket_without_its_results_list_is_one_reject_and_the_file_partial(store, tmp_path, fixture, adapter):
    text = (FIX / fixture).read_text()
    doc = json.loads(text)
    pages = doc if isinstance(doc, list) else [doc]
    bucket = pages[-1]["data"][-1]
    bucket["r%sults"] = bucket.pop("results")
    whole = _write(tmp_path, "whole.json", text)
    p = _write(tmp_path, "damaged.json", json.dumps(doc))
    ref = connect(":memory:")  # the seed in a store of its own: its lines would make the damaged file's duplicates
    try:
        ingest(ref, [whole])
        assert _ledger(ref, whole)["status"] == "loaded"
        kept = _stored_locators(ref, whole)
    finally:
        ref.close()
    ingest(store, [p])
    led = _ledger(store, p)
    assert (led["status"], led["adapter"]) == ("partial", adapter)
    assert "`results` list" in led["message"]
    # the bucket is one reject (its locator names the file); the other buckets' results are kept as they were
    assert [r for r, d in _rejects(store, p) if "results" in d] == ["malformed_row"]
    at = (f"[{len(pages) - 1}]" if isinstance(doc, list) else "1") + f"#data[{len(pages[-1]['data']) - 1}]"
    assert any(loc.startswith(at + ".") for loc in kept)
    assert _stored_locators(store, p) == {loc for loc in kept if not loc.startswith(at + ".")}


def test_a_page_without_its_data_list_is_partial(store, tmp_path):
    pages = json.loads((FIX / "billing/openai_costs.pages.json").read_text())
    pages[-1]["d%ta"] = pages[-1].pop("data")
    p = _write(tmp_path, "openai_costs.json", json.dumps(pages))
    ingest(store, [p])
    led = _ledger(store, p)
    assert (led["status"], led["adapter"]) == ("partial", "openai_costs")
    assert "`data` list" in led["message"]
    assert [r for r, d in _rejects(store, p) if "report page" in d] == ["malformed_row"]


def test_a_vllm_bench_result_without_its_per_request_lists_is_partial(store, tmp_path):
    doc = json.loads((FIX / "bench/vllm_bench.detailed.json").read_text())
    doc["ttfts"] = {"not": "a list"}
    p = _write(tmp_path, "vllm_bench.json", json.dumps(doc))
    ingest(store, [p])
    led = _ledger(store, p)
    assert (led["status"], led["adapter"], led["accepted"], led["rejected"]) == ("partial", "vllm_bench", 0, 1)


def test_a_parquet_row_group_that_reads_as_no_rows_marks_the_file_partial(store, tmp_path):
    # the fuzz run's mutant (seed 23, flip@1438): one byte of a column chunk's header changed, after which
    # pyarrow yields no batch for the row group and raises nothing; its three rows must not vanish silently
    raw = bytearray((FIX / "billing/aws_cur.bedrock.parquet").read_bytes())
    raw[1438] ^= 0x0A
    p = _write(tmp_path, "cur.parquet", bytes(raw))
    led = ingest(store, [p]).files[0]
    assert led.status == "partial", led
    assert "row group 1 (rows 1 to 3) is corrupt: 0 of its 3 rows could be read" in led.message
