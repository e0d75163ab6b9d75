"""Names shown as text: a workload, service, model, team or project name is data, never markup or a formula.

`csv_cell` neutralises spreadsheet formulas as OWASP recommends (a leading `'` before a cell that begins with
`=`, `+`, `-`, `@`, tab or carriage return); only text cells are touched, so numbers stay numbers.
`md_text` escapes every character Markdown or inline HTML would read, so a name shows as typed.
"""

from __future__ import annotations

import re

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$=:&])")


def csv_cell(v: object) -> object:
    """`v` unchanged unless it is text a spreadsheet would run as a formula; then prefixed with `'`."""
    if isinstance(v, str) and v.startswith(FORMULA_START):
        return "'" + v
    return v


def md_text(v: object) -> str:
    """`v` as literal text inside Markdown (newlines become spaces)."""
    return _MD_SPECIAL.sub(r"\\\1", str(v)).replace("\r", " ").replace("\n", " ")


def short_path(path: object, width: int = 48) -> str:
    """`path` in at most `width` characters, cut in the middle (`/work/…/traces/editor-tab.jsonl.gz`) so the file
    name, the end that tells files apart, is always whole; a file name longer than `width` keeps its end."""
    text = str(path)
    if len(text) <= width:
        return text
    name = text.replace("\\", "/").rsplit("/", 1)[-1]
    if len(name) + 2 >= width:
        return "…" + text[-(width - 1):]
    head = width - len(name) - 2  # the ellipsis and the separator before the name
    return text[:head] + "…/" + name
