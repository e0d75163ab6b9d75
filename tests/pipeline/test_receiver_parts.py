"""The receiver's parts on their own: protobuf to OTLP JSON, bounded decompression, the spool, and a loader refusal."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from phaselens.pipeline.errors import PhaselensError
from phaselens.ingest.otlp_http import BadRequest, decompress, to_otlp_json
from phaselens.pipeline.receiver_spool import Spool
from phaselens.pipeline.store import connect
from tests.test_receiver import FIX, T0, chat_span, pb_request, query, segments


def test_a_request_the_store_refuses_does_not_hold_back_the_others(tmp_path, monkeypatch):
    from phaselens.pipeline import receiver_flush
    from phaselens.pipeline.load import FileResult, IngestResult

    real_ingest = receiver_flush.ingest

    def refuses_poison(con, paths):  # a loader that fails any file holding the poisoned span
        if "deadbeefdeadbeef" in Path(paths[0]).read_text():
            return IngestResult("run", [FileResult(str(paths[0]), "load", "failed", message="refused")])
        return real_ingest(con, paths)

    monkeypatch.setattr(receiver_flush, "ingest", refuses_poison)
    good = json.dumps(json.loads((FIX / "chat_request.json").read_text()), separators=(",", ":"))
    poison = good.replace("00f067aa0ba902b7", "deadbeefdeadbeef")
    spool = Spool(tmp_path / "spool")
    for line in (good, poison):
        spool.append(line, 2, [])
    assert receiver_flush.Flusher(tmp_path / "store.duckdb", spool, 1.0).flush()
    spool.close()
    assert [r[0] for r in query(tmp_path / "store.duckdb", "SELECT span_id FROM requests")] == ["00f067aa0ba902b7"]
    assert [p.read_text() for p in (tmp_path / "spool" / "failed").iterdir()] == [poison + "\n"]
    assert segments(tmp_path / "spool") == []


def test_protobuf_becomes_otlp_json_with_hex_ids_and_int64_strings():
    body = pb_request(chat_span("ABCDEF0123456789abcdef0123456789", "0123456789abcdef", T0, 2.5)).SerializeToString()
    span = to_otlp_json(body, "protobuf")["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert (span["traceId"], span["spanId"]) == ("abcdef0123456789abcdef0123456789", "0123456789abcdef")
    assert (span["startTimeUnixNano"], span["endTimeUnixNano"]) == (str(T0), str(T0 + 2_500_000_000))
    assert span["kind"] == 3  # SPAN_KIND_CLIENT, as an integer (docs/formats.md#otlp-json-traces)
    tokens = {a["key"]: a["value"] for a in span["attributes"]}["gen_ai.usage.input_tokens"]
    assert tokens == {"intValue": "900"}


def test_decompression_is_bounded():
    text = b'{"resourceSpans":[]}'
    assert decompress(gzip.compress(text), "gzip", len(text)) == text  # exactly at the limit
    assert decompress(gzip.compress(text) + gzip.compress(text), "gzip", 2 * len(text)) == text * 2  # two members
    with pytest.raises(BadRequest) as e:
        decompress(gzip.compress(b"\0" * 10_000_000), "gzip", 1024)
    assert e.value.status == 413
    with pytest.raises(BadRequest) as e:
        decompress(gzip.compress(text)[:-9], "gzip", 1024)
    assert e.value.status == 400
    with pytest.raises(BadRequest) as e:
        decompress(text, "br", 1024)
    assert e.value.status == 415


def test_spool_belongs_to_one_receiver_and_drops_torn_lines(tmp_path):
    spool = Spool(tmp_path / "spool")
    with pytest.raises(PhaselensError, match="another `phaselens collect`"):
        Spool(tmp_path / "spool")
    spool.append('{"resourceSpans":[]}', 0, [])
    [segment] = list((tmp_path / "spool").glob("*.otlp.jsonl"))
    with open(segment, "a") as f:
        f.write('{"resourceSpans":[{"scope')
    spool.close()
    reopened = Spool(tmp_path / "spool")
    assert [s.data for s in reopened.pending()] == [segment]
    assert segment.read_text() == '{"resourceSpans":[]}\n'
    reopened.close()


def test_a_spooled_protobuf_body_expands_to_the_json_the_slow_path_writes():
    from phaselens.ingest.otlp_http import check_spans, clean_protobuf, expand_line, protobuf_line

    body = pb_request(*[chat_span(f"{i + 1:032x}", f"{i + 1:016x}", T0 + i, 1.5) for i in range(3)]).SerializeToString()
    assert clean_protobuf(body) == (3, True)
    slow = check_spans(to_otlp_json(body, "protobuf"), "ref")
    assert not slow.rejects
    assert json.loads(expand_line(protobuf_line(body))) == json.loads(slow.line())
    bad = pb_request(chat_span("c" * 32, "1" * 16, 5 * 10**18, 1.0), chat_span("a" * 32, "b" * 16, T0, 1.0)).SerializeToString()
    assert clean_protobuf(bad) == (1, False)  # a start after 2100 sends the request down the path that names it
    assert len(check_spans(to_otlp_json(bad, "protobuf"), "ref").rejects) == 1
    with pytest.raises(BadRequest):
        clean_protobuf(b"\xff\xff\xff")


def test_a_call_whose_spans_arrive_in_two_flushes_is_one_call(tmp_path, monkeypatch):
    """The recorded OpenLLMetry + anthropic SDK spans, the SDK's in one flush and the instrumentation's in the next:
    the same calls as one file loaded at once, and the second flush republishes what it changed."""
    from phaselens.pipeline import receiver_flush
    from tests.ingest.test_otlp_merge import _recorded_pair_lines, fingerprint, one_file_truth

    inst, sdk = _recorded_pair_lines()
    truth, _ = one_file_truth(tmp_path, *inst, *sdk)
    db = tmp_path / "store.duckdb"
    spool = Spool(tmp_path / "spool")
    flusher = receiver_flush.Flusher(db, spool, 1.0)
    published = []
    monkeypatch.setattr(receiver_flush, "_publish", lambda con, db, load_ids, since: published.append(load_ids))
    for half in (sdk, inst):
        for line in half:
            spool.append(line.rstrip("\n"), 1, [])
        assert flusher.flush()
    spool.close()
    assert segments(tmp_path / "spool") == []
    con = connect(db)
    try:
        assert fingerprint(con) == truth and len(truth) == 12
        assert con.execute("SELECT count(*), count(*) FILTER (WHERE retired) FROM raw_calls_replaced").fetchone() == (12, 12)
    finally:
        con.close()
    assert len(published) == 2  # the second flush stored no new call but changed twelve
