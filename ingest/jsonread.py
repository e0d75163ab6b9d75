"""Reading a JSON document that ends early or breaks part way: keep every value that is whole.

`salvage(text)` parses as much of a JSON document as is valid, from the start. Each object or array
that the break cut open is kept with the members it had before the break, as a `PartialDict` or a
`PartialList`, so a caller can keep the whole records and reject the cut one (`is_whole`). A number
that runs into the end of the text is dropped (`12` may be the start of `123`).

Nesting is followed with an explicit stack, not recursion, so a deeply nested document cannot
overflow Python's stack; whole members are read by the standard decoder.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_WS = " \t\r\n"


class PartialDict(dict):
    """An object cut by the end of the document or a syntax error: the members before the break."""


class PartialList(list):
    """An array cut by the end of the document or a syntax error: the elements before the break."""


def is_whole(value: Any) -> bool:
    """False for an object or array that was cut (see `salvage`)."""
    return not isinstance(value, PartialDict | PartialList)


@dataclass(frozen=True)
class Salvaged:
    value: Any  # a PartialDict / PartialList root, or None when not even the first character opens a document
    position: int  # character offset of the break
    why: str  # what is wrong there; empty when the document is whole


def _describe(text: str, pos: int) -> str:
    if pos >= len(text):
        return f"the JSON document ends early (cut after {len(text):,} characters)"
    line = text.count("\n", 0, pos) + 1
    return f"the JSON document is not valid from line {line} (character {pos:,}) on"


def salvage(text: str, *, parse_float=None) -> Salvaged:
    """The valid beginning of a JSON object or array document, with the cut containers marked."""
    decoder = json.JSONDecoder(parse_float=parse_float) if parse_float else json.JSONDecoder()
    text = no_lone_surrogates(text)
    n = len(text)
    pos = 0
    while pos < n and text[pos] in _WS:
        pos += 1
    if pos >= n or text[pos] not in "[{":
        return Salvaged(None, pos, _describe(text, pos))
    # a frame: [container, pending key (objects), state]; states: first | next | key | colon | value
    stack: list[list] = [[PartialDict() if text[pos] == "{" else PartialList(), None, "first"]]
    pos += 1
    root: Any = None
    shallow = [0]  # below this depth the standard decoder hit its recursion limit: containers are entered directly

    def attach(value: Any) -> None:
        frame = stack[-1]
        if isinstance(frame[0], dict):
            frame[0][frame[1]] = value
            frame[1] = None
        else:
            frame[0].append(value)
        frame[2] = "next"

    def close() -> None:
        nonlocal root
        container = stack.pop()[0]
        if len(stack) < shallow[0]:
            shallow[0] = 0
        whole = dict(container) if isinstance(container, dict) else list(container)
        if stack:
            attach(whole)
        else:
            root = whole

    while stack:
        while pos < n and text[pos] in _WS:
            pos += 1
        if pos >= n:
            break
        frame = stack[-1]
        container, _, state = frame
        ch = text[pos]
        is_obj = isinstance(container, dict)
        if state in ("first", "next") and ch == ("}" if is_obj else "]"):
            pos += 1
            close()
            continue
        if state == "next":
            if ch != ",":
                break
            pos += 1
            frame[2] = "key" if is_obj else "value"
            continue
        if is_obj and state in ("first", "key"):
            if ch != '"':
                break
            try:
                key, end = decoder.raw_decode(text, pos)
            except ValueError:
                break
            frame[1], frame[2], pos = key, "colon", end
            continue
        if state == "colon":
            if ch != ":":
                break
            pos += 1
            frame[2] = "value"
            continue
        # a value (state first for arrays, value otherwise)
        if ch in "[{" and shallow[0] and len(stack) >= shallow[0]:
            stack.append([PartialDict() if ch == "{" else PartialList(), None, "first"])
            pos += 1
            continue
        try:
            value, end = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError) as e:
            if isinstance(e, RecursionError):
                shallow[0] = len(stack)
            if ch in "[{":
                stack.append([PartialDict() if ch == "{" else PartialList(), None, "first"])
                pos += 1
                continue
            break
        if end >= n and not isinstance(value, (dict, list, str)):
            pos = n
            break  # a number or literal that the end of the text may have cut
        attach(value)
        pos = end
    if root is not None:
        while pos < n and text[pos] in _WS:
            pos += 1
        extra = f"{n - pos:,} characters after the JSON document were not read" if pos < n else ""
        return Salvaged(root, pos, extra)
    # the break: every open container is kept in part, innermost first
    value: Any = None
    for container, key, _ in reversed(stack):
        if value is not None:
            if isinstance(container, dict):
                if key is not None:
                    container[key] = value
            else:
                container.append(value)
        value = container
    return Salvaged(value, pos, _describe(text, pos))


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# a \\uD800-\\uDFFF escape not in a valid high-low pair (an odd run of backslashes makes it an escape)
_LONE_SURROGATE = re.compile(
    r"(?<!\\)((?:\\\\)*)(\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<![\\]u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2})"
)


def no_lone_surrogates(text: str) -> str:
    """The JSON text with each lone UTF-16 surrogate escape (`\\ud800`) replaced by U+FFFD's escape.

    JSON allows the escape, but it is not a character: it cannot be written as UTF-8 (DuckDB rejects a
    whole line over it; Python fails to encode it later). The value is kept with the replacement.
    """
    if not _SURROGATE_ESCAPE.search(text):
        return text
    return _LONE_SURROGATE.sub(lambda m: m.group(1) + "\\ufffd", text)


def loads(text: str, *, parse_float=None) -> Any:
    """`json.loads` with lone surrogates replaced, and deep nesting a ValueError instead of a RecursionError."""
    text = no_lone_surrogates(text)
    try:
        return json.loads(text, parse_float=parse_float) if parse_float else json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None
