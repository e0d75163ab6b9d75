"""Names shown as text: a workload, service, model, team or project name is data, never markup or a formula.

`csv_cell` neutralises spreadsheet formulas as OWASP recommends (a leading `'` before a cell that begins with
`=`, `+`, `-`, `@`, tab or carriage return); only text cells are touched, so numbers stay numbers.
`md_text` escapes every character Markdown or inline HTML would read, so a name shows as typed.
`usd`, `pct`, `secs`, `ms` and `num` write figures in the text reports and `phaselens explain` (one home;
the dashboard's table formats are in app/ui.py).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

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


def usd(x: Any, signed: bool = False) -> str:
    """USD with 2 decimals from $1 up, 4 below; `signed` puts + or - in front."""
    if x is None:
        return "n/a"
    x = Decimal(str(x)) if isinstance(x, float) else Decimal(x)
    sign = ("+" if x > 0 else "-" if x < 0 else "") if signed else ("-" if x < 0 else "")
    body = f"{abs(x):,.2f}" if abs(x) >= 1 or x == 0 else f"{abs(x):,.4f}"
    return f"{sign}${body}"


def pct(x: float | None, signed: bool = False) -> str:
    """A share or change as a whole percentage; `signed` puts + or - in front of a non-zero change."""
    if x is None:
        return "n/a"
    whole = round(100 * float(x))
    return f"{whole:+d}%" if signed and whole else f"{abs(whole) if whole == 0 else whole}%"


def secs(x: float | None) -> str:
    """Seconds as `350 ms` below one second, `2.40 s` above."""
    return "n/a" if x is None else f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


def ms(x: float | None) -> str:
    """Seconds per token as milliseconds with one decimal."""
    return "n/a" if x is None else f"{x * 1000:.1f} ms"


def num(x: Any) -> str:
    """A count with thousands separators."""
    return "n/a" if x is None else f"{int(x):,}"
