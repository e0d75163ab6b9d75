"""`SourceFile.text_lines` reads a file in blocks and gives exactly the lines of its text stream (`open_text`):
the same line endings (LF, CRLF, a bare CR, never U+2028), the BOM dropped at the start only, bad bytes replaced,
whatever block boundaries fall inside a CRLF, a multi-byte character or the BOM."""

from __future__ import annotations

import gzip
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaselens.ingest.base import SourceFile

PIECES = [b"a", b"{}", b" ", b"\n", b"\r", b"\r\n", b"\n\r", b"\xef\xbb\xbf", b"\xef\xbb", b"\xc3\xa9", b"\xc3",
          b"\xff", b"\xe2\x80\xa8", b"\xf0\x9f\x98\x80", b"\x00", b'"\\ud800"']


def _both(path: Path, block: int) -> tuple[list[str], list[str]]:
    src = SourceFile(path)
    with src.open_text() as f:
        expected = list(f)
    return list(src.text_lines(block=block)), expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.lists(st.sampled_from(PIECES), max_size=40).map(b"".join), block=st.sampled_from([1, 2, 3, 4, 7, 64]),
       zipped=st.booleans())
def test_lines_read_in_blocks_are_the_text_streams_lines(tmp_path, data, block, zipped):
    path = tmp_path / ("f.jsonl.gz" if zipped else "f.jsonl")
    path.write_bytes(gzip.compress(data) if zipped else data)
    got, expected = _both(path, block)
    assert got == expected, (data, block)


def test_a_line_longer_than_many_blocks_and_every_ending(tmp_path):
    data = b"\xef\xbb\xbf" + b"x" * 10_000 + b"\r\n" + b"\xc3\xa9" * 3000 + b"\rlast\n\nend"
    path = tmp_path / "long.jsonl"
    path.write_bytes(data)
    got, expected = _both(path, 1000)
    assert got == expected
    assert [len(x) for x in got] == [10_002, 3001, 5, 1, 3]  # the BOM is gone, CRLF and a bare CR end lines
