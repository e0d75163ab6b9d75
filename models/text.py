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
