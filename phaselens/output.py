"""Rendering rows for the terminal (table) and for machines (json, csv).

One form per kind of number, in every command (docs/cli.md):
- money (any field naming `usd` or ending in `cost`, and every other exact decimal) is a JSON string holding the exact
  decimal in US dollars, e.g. "94.52225977": what the store holds, to the micro-dollar, with no float rounding
  (read it with `Decimal(value)`);
- counts (tokens, calls, records, deltas of tokens) are JSON integers, even where the store keeps them as
  DECIMAL (billed token quantities);
- shares and durations are JSON numbers (floats); a missing value is null.
CSV writes the same text as JSON. The text table shows money columns (`*_usd`) to the cent with thousands
separators, keeps every cell on one line (a newline shows as `\\n`), and shortens long paths in the middle so
the file name stays whole.
"""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import date, datetime
from decimal import Decimal
from enum import Enum
from typing import Any
from phaselens.models.text import csv_cell, short_path, usd


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


def is_money(name: str) -> bool:
    """Whether a field or column named `name` holds money (USD)."""
    name = name.lower().rsplit(".", 1)[-1] if "usd" not in name.lower() else name.lower()
    return "usd" in name or name.endswith("cost")


def _decimal_text(v: Decimal) -> str:
    return str(v.normalize()) if v == v.to_integral() else format(v.normalize(), "f")


def _plain(v: Any, name: str = "") -> Any:
    if isinstance(v, Decimal):
        if not v.is_finite():
            return None
        if v == v.to_integral() and not is_money(name):
            return int(v)  # a count the store keeps as DECIMAL (billed tokens)
        return _decimal_text(v)
    if isinstance(v, float) and is_money(name) and not (math.isnan(v) or math.isinf(v)):
        return _decimal_text(Decimal(repr(v)))
    if isinstance(v, datetime | date):
        return v.isoformat()
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, list | tuple):
        return [_plain(x, name) for x in v]
    return v


def plain_tree(v: Any, name: str = "") -> Any:
    """A nested result (dicts, lists, Decimals, dates) as JSON-ready values, as `render` writes them; a value
    under a money key (`cost_by_bucket_usd: {output: ...}`) is money too."""
    if isinstance(v, dict):
        return {k: plain_tree(x, f"{name}.{k}" if is_money(name) else str(k)) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [plain_tree(x, name) for x in v]
    return _plain(v, name)


_CONTROL = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _one_line(text: str) -> str:
    """`text` on one line: newlines, tabs and other control characters written as escapes."""
    if text.isprintable():
        return text
    return "".join(_CONTROL.get(ch, ch if ch.isprintable() else f"\\x{ord(ch):02x}") for ch in text)


def _money(v: Any) -> str:
    """Dollars to the cent, `$1,234.57`; a negative amount as `-$0.12` (models/text.py `usd`)."""
    return usd(v)


def _fit(text: str, width: int) -> str:
    """`text` in `width` characters: a path is cut in the middle (its file name kept), other text at the end."""
    if len(text) <= width:
        return text
    if "/" in text and " " not in text:
        return short_path(text, width)
    return text[: width - 1] + "…"


def _cell(v: Any, column: str = "") -> str:
    if v is None:
        return ""
    if column.endswith("_usd") and isinstance(v, Decimal | float | int) and not isinstance(v, bool):  # to the cent
        if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
            return ""
        return _money(v)
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1000 else f"{v:,.0f}"
    if isinstance(v, Decimal):
        if v == v.to_integral_value():
            return f"{v:,.0f}"
        return f"{v:,.4f}" if abs(v) >= Decimal("0.0001") else f"{v:.2e}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    return _one_line(str(v))


def render(columns: list[str], rows: list[tuple], fmt: Format, *, max_width: int = 60) -> str:
    """Rows as an aligned text table, a JSON array of objects, or CSV with a header."""
    if fmt == Format.json:
        return json.dumps([{c: _plain(v, c) for c, v in zip(columns, r)} for r in rows], indent=2)
    if fmt == Format.csv:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            # a number we wrote (money as exact decimal text included) is never a formula; text cells are neutralised
            w.writerow(["" if v is None else _plain(v, c) if isinstance(v, Decimal | float | int)
                        else csv_cell(_plain(v, c)) for c, v in zip(columns, r)])
        return buf.getvalue().rstrip("\n")
    cells = [[_fit(_cell(v, col), max_width) for v, col in zip(r, columns)] for r in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells]
    return "\n".join(lines)


def query(con, sql: str, params: Any = None) -> tuple[list[str], list[tuple]]:
    cur = con.execute(sql, params) if params is not None else con.execute(sql)
    return [d[0] for d in cur.description], cur.fetchall()
