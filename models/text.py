"""Names shown as text: a workload, service, model, team or project name is data, never markup or a formula.

`csv_cell` neutralises spreadsheet formulas as OWASP recommends (a leading `'` before a cell that begins with
`=`, `+`, `-`, `@`, tab or carriage return); only text cells are touched, so numbers stay numbers.
`md_text` escapes every character Markdown or inline HTML would read, so a name shows as typed.
`usd`, `pct`, `secs`, `ms` and `num` write figures in the text reports, `phaselens explain` and the dashboard's
headlines (app/ui.py shows a missing one as a dash), one way for each kind of figure: money to the cent (rounded
half up), TTFT and end-to-end seconds with three decimals, inter-token latency in milliseconds with one decimal.
The dashboard's table column formats are in app/ui.py.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
CENT = Decimal("0.01")
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


def usd(x: Any, signed: bool = False, missing: str = "n/a") -> str:
    """USD to the cent, rounded half up, with thousands separators (`$1,234.56`); `signed` puts + or - in front.
    The texts the build writes round money the same way (pl_usd_text, pipeline/sql/text_macros.sql)."""
    if x is None or (isinstance(x, float) and x != x):
        return missing
    x = (Decimal(str(x)) if isinstance(x, float) else Decimal(x)).quantize(CENT, rounding=ROUND_HALF_UP)
    sign = ("+" if x > 0 else "-" if x < 0 else "") if signed else ("-" if x < 0 else "")
    return f"{sign}${abs(x):,.2f}"


def pct(x: float | None, signed: bool = False, decimals: int = 0, missing: str = "n/a") -> str:
    """A share or change as a percentage (whole by default); `signed` puts + or - in front of a non-zero change."""
    if x is None or (isinstance(x, float) and x != x):
        return missing
    if decimals:
        return f"{100 * float(x):+,.{decimals}f}%" if signed else f"{100 * float(x):,.{decimals}f}%"
    whole = round(100 * float(x))
    return f"{whole:+d}%" if signed and whole else f"{abs(whole) if whole == 0 else whole}%"


def secs(x: float | None, missing: str = "n/a") -> str:
    """A duration in seconds with three decimals, `0.546 s` (TTFT, end-to-end, queue), as the diagnosis texts
    write it."""
    return missing if x is None or x != x else f"{float(x):,.3f} s"


def ms(x: float | None, missing: str = "n/a") -> str:
    """Seconds (per token) as milliseconds with one decimal, `14.5 ms` (inter-token latency)."""
    return missing if x is None or x != x else f"{1000 * float(x):,.1f} ms"


def num(x: Any, missing: str = "n/a") -> str:
    """A count with thousands separators."""
    return missing if x is None or (isinstance(x, float) and x != x) else f"{int(x):,}"
