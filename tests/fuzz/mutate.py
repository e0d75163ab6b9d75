"""Seeded mutations of a valid input file, each labelled with what the loader must do with it.

Kinds (the rule each one is held to, in tests/fuzz/harness.py):
- `same`: the same data written another way (BOM, CRLF, CR only, leading blank lines, gzip in one or
  several members, an empty first gzip member, re-serialised JSON or CSV). Must load like the seed.
- `cut`: the file truncated at `offset`. Never `empty`/`loaded` when a JSON document is cut; keeps the
  seed's whole records before the cut.
- `gzip_damage`: a gzip stream that cannot be read in full. Must be `failed` or `partial`.
- `bytes`: bytes flipped, NUL, invalid UTF-8, a lone surrogate escape. No crash, every loss accounted for.
- `value`: one value of one record changed (dropped/renamed key or column, wrong type, huge/negative/NaN/
  Infinity number, empty or 10 k string, deep nesting, duplicate key). `first` says whether the first
  record (which format detection reads) was changed; otherwise the file must still load.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

BLANK_LEAD = b"\n" * 300_000  # more than the 256 KB head
HUGE = ["1e30", "1e308", "1e400", "-1e400", "-1", "-0.5", "NaN", "Infinity", "-Infinity", "123456789012345678901234567890"]
VALUE_MUTATIONS = ["drop", "rename", "wrong_type", "huge", "empty", "long", "deep", "duplicate_key", "null"]


@dataclass
class Mutant:
    name: str
    kind: str  # same | cut | gzip_damage | bytes | value
    data: bytes
    meta: dict = field(default_factory=dict)


def shape(data: bytes) -> str:
    """parquet | jsonl | json | csv, judged like the loader does, from content."""
    if data[:4] == b"PAR1":
        return "parquet"
    text = data.decode("utf-8", "replace").lstrip("\ufeff").lstrip()
    if text[:1] in "[{":
        first = text.splitlines()[0] if text else ""
        try:
            json.loads(first)
            return "jsonl" if len([ln for ln in text.splitlines() if ln.strip()]) > 1 else "json"
        except ValueError:
            return "json"
    return "csv"


def _gz(b: bytes) -> bytes:
    return gzip.compress(b, mtime=0)


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def same_mutants(data: bytes, fmt: str) -> Iterator[Mutant]:
    yield Mutant("gzip", "same", _gz(data))
    if fmt == "parquet":
        return
    yield Mutant("bom", "same", b"\xef\xbb\xbf" + data)
    yield Mutant("crlf", "same", data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    yield Mutant("cr_only", "same", data.replace(b"\r\n", b"\n").replace(b"\n", b"\r"))
    yield Mutant("leading_blank", "same", BLANK_LEAD + data)
    yield Mutant("leading_blank_gzip", "same", _gz(BLANK_LEAD + data))
    lines = _lines(data)
    if len(lines) > 1:
        half = len(lines) // 2
        yield Mutant("gzip_members", "same", _gz(b"".join(lines[:half])) + _gz(b"".join(lines[half:])))
    yield Mutant("gzip_empty_first", "same", _gz(b"") + _gz(data))
    yield Mutant("bom_crlf_gzip", "same", _gz(b"\xef\xbb\xbf" + data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")))
    text = data.decode("utf-8")
    if fmt == "json":
        doc = json.loads(text)
        yield Mutant("reserialised_compact", "same", json.dumps(doc, separators=(",", ":")).encode())
        yield Mutant("reserialised_pretty", "same", json.dumps(doc, indent=3, ensure_ascii=True).encode())
    elif fmt == "jsonl":
        out = []
        for line in text.splitlines():
            try:
                out.append(json.dumps(json.loads(line), indent=None, separators=(", ", ": "), ensure_ascii=True))
            except ValueError:
                out.append(line)  # a line the seed itself has as bad stays as it is
        yield Mutant("reserialised_lines", "same", ("\n".join(out) + "\n").encode())
    elif fmt == "csv":
        rows = list(csv.reader(io.StringIO(text, newline="")))
        buf = io.StringIO()
        csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\r\n").writerows(rows)
        yield Mutant("reserialised_quoted", "same", buf.getvalue().encode())


def cut_mutants(data: bytes, fmt: str, rng: random.Random, n: int) -> Iterator[Mutant]:
    size = len(data)
    offsets = set()
    # at line ends, inside lines, and anywhere
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    for _ in range(n):
        offsets.add(rng.randrange(1, size))
    for e in rng.sample(ends, min(len(ends), max(1, n // 3))):
        if e < size:
            offsets.add(e)
    for off in sorted(offsets):
        yield Mutant(f"cut@{off}", "cut", data[:off], {"offset": off})


def gzip_damage_mutants(data: bytes, rng: random.Random, n: int) -> Iterator[Mutant]:
    g = _gz(data)
    yield Mutant("gzip_header_only", "gzip_damage", g[:10])
    yield Mutant("gzip_magic_garbage", "gzip_damage", b"\x1f\x8b\x08\x00" + bytes(rng.randrange(256) for _ in range(200)))
    yield Mutant("gzip_trailing_garbage", "gzip_damage", g + b"trailing garbage, not gzip")
    for _ in range(n):
        off = rng.randrange(11, max(12, len(g) - 1))
        yield Mutant(f"gzip_cut@{off}", "gzip_damage", g[:off], {"offset": off})
    if len(g) > 40:
        pos = rng.randrange(20, len(g) - 9)
        flipped = bytearray(g)
        flipped[pos] ^= 0xFF
        yield Mutant(f"gzip_flip@{pos}", "gzip_damage", bytes(flipped), {"offset": pos, "maybe_whole": True})


def byte_mutants(data: bytes, fmt: str, rng: random.Random, n: int) -> Iterator[Mutant]:
    size = len(data)
    for _ in range(n):
        pos = rng.randrange(size)
        b = bytearray(data)
        b[pos] ^= 1 << rng.randrange(8)
        yield Mutant(f"flip@{pos}", "bytes", bytes(b), {"offset": pos})
    for label, ins in (("nul", b"\x00"), ("invalid_utf8", b"\xff\xfe\xc3\x28")):
        pos = rng.randrange(size)
        yield Mutant(f"{label}@{pos}", "bytes", data[:pos] + ins + data[pos:], {"offset": pos})
    if fmt != "parquet":
        # a lone surrogate escape inside a JSON string (or a CSV cell)
        quotes = [i for i in range(size) if data[i:i + 1] == b'"'] or [0]
        pos = rng.choice(quotes) + 1
        yield Mutant(f"lone_surrogate@{pos}", "bytes", data[:pos] + b"\\ud800" + data[pos:], {"offset": pos})


# ---------------------------------------------------------------- value mutations


def _leaves(obj, path=()) -> Iterator[tuple]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:20]):
            yield from _leaves(v, (*path, i))
    else:
        yield path


def _set(obj, path, value):
    for p in path[:-1]:
        obj = obj[p]
    obj[path[-1]] = value


def _mutate_json_value(obj, rng: random.Random, how: str) -> tuple[object, list[tuple[str, str]]]:
    """Change one leaf of `obj` in place; returns (obj, text replacements to apply after dumping)."""
    leaves = [p for p in _leaves(obj) if p]
    if not leaves:
        return obj, []
    path = rng.choice(leaves)
    parent = obj
    for p in path[:-1]:
        parent = parent[p]
    key = path[-1]
    subs: list[tuple[str, str]] = []
    if how == "drop" and isinstance(parent, dict):
        del parent[key]
    elif how == "rename" and isinstance(parent, dict):
        parent[f"{key}_renamed"] = parent.pop(key)
    elif how == "wrong_type":
        old = parent[key]
        parent[key] = {"value": old} if not isinstance(old, str) else rng.choice([12345, [old], {"text": old}, True])
    elif how == "huge":
        parent[key] = "__NUM__"
        subs.append(('"__NUM__"', rng.choice(HUGE)))
    elif how == "empty":
        parent[key] = ""
    elif how == "long":
        parent[key] = "x" * 10_000
    elif how == "deep":
        parent[key] = "__DEEP__"
        depth = rng.choice([500, 5_000, 50_000])
        subs.append(('"__DEEP__"', "[" * depth + "]" * depth))
    elif how == "null":
        parent[key] = None
    elif how == "duplicate_key" and isinstance(parent, dict):
        parent[key] = parent[key]
        parent["__DUP__"] = "__DUPV__"
        subs.append(('"__DUP__": "__DUPV__"', f'{json.dumps(str(key))}: {json.dumps(rng.choice([0, "", -1, "other"]))}'))
    else:
        parent[key] = None
    return obj, subs


def _dump(obj, subs) -> str:
    text = json.dumps(obj)
    for a, b in subs:
        text = text.replace(a, b, 1)
    return text


def _records(doc) -> list | None:
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict) and isinstance(doc.get("data"), list):
        return doc["data"]
    return None


def value_mutants(data: bytes, fmt: str, rng: random.Random, n: int) -> Iterator[Mutant]:
    text = data.decode("utf-8")
    for j in range(n):
        how = VALUE_MUTATIONS[j % len(VALUE_MUTATIONS)] if j < len(VALUE_MUTATIONS) else rng.choice(VALUE_MUTATIONS)
        if fmt == "jsonl":
            lines = text.splitlines()
            good = [i for i, ln in enumerate(lines) if ln.strip() and _is_json(ln)]
            if not good:
                return
            i = rng.choice(good[1:] or good)
            rec, subs = _mutate_json_value(json.loads(lines[i]), rng, how)
            lines[i] = _dump(rec, subs)
            yield Mutant(f"{how}@line{i + 1}", "value", ("\n".join(lines) + "\n").encode(),
                         {"first": i == good[0], "how": how})
        elif fmt == "json":
            doc = json.loads(text)
            recs = _records(doc)
            if recs and len(recs) > 1:
                i = rng.randrange(1, len(recs))
                recs[i], subs = _mutate_json_value(recs[i], rng, how)
                first = False
            else:
                doc, subs = _mutate_json_value(doc, rng, how)
                first = True
            yield Mutant(f"{how}@json", "value", _dump(doc, subs).encode(), {"first": first, "how": how})
        elif fmt == "csv":
            rows = list(csv.reader(io.StringIO(text, newline="")))
            if len(rows) < 2:
                return
            col = rng.randrange(len(rows[0]))
            first = how in ("drop", "rename")
            if how == "drop":
                rows = [r[:col] + r[col + 1:] for r in rows]
            elif how == "rename":
                rows[0][col] = rows[0][col] + "_renamed"
            else:
                r = rng.randrange(1, len(rows))
                if col < len(rows[r]):
                    rows[r][col] = {"huge": rng.choice(HUGE), "empty": "", "long": "x" * 10_000,
                                    "deep": "[" * 5000 + "]" * 5000, "wrong_type": '{"a": 1}',
                                    "null": "NULL", "duplicate_key": "=HYPERLINK(\"http://x\")"}[how]
            buf = io.StringIO()
            csv.writer(buf, lineterminator="\n").writerows(rows)
            yield Mutant(f"{how}@col{col}", "value", buf.getvalue().encode(), {"first": first, "how": how})


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
        return True
    except ValueError:
        return False


QUICK_SAME = ("bom", "cr_only", "gzip_members", "leading_blank_gzip", "reserialised_compact", "reserialised_lines",
              "reserialised_quoted", "gzip")


def mutants(data: bytes, rng: random.Random, *, cuts: int, flips: int, values: int, gz_cuts: int,
            quick: bool = False) -> Iterator[Mutant]:
    """Every mutant of one seed, in a reproducible order for a given `rng` state (`quick`: fewer `same` ones)."""
    fmt = shape(data)
    for m in same_mutants(data, fmt):
        if not quick or m.name in QUICK_SAME:
            yield m
    yield from cut_mutants(data, fmt, rng, cuts)
    yield from gzip_damage_mutants(data, rng, gz_cuts)
    yield from byte_mutants(data, fmt, rng, flips)
    if fmt != "parquet":
        yield from value_mutants(data, fmt, rng, values)
