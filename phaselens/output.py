"""Rendering rows for the terminal (table) and for machines (json, csv)."""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import date, datetime
from decimal import Decimal
from enum import Enum
from typing import Any
from phaselens.models.text import csv_cell


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


def _plain(v: Any) -> Any:
    if isinstance(v, Decimal):
        return str(v.normalize()) if v == v.to_integral() else format(v.normalize(), "f")
    if isinstance(v, datetime | date):
        return v.isoformat()
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


def plain_tree(v: Any) -> Any:
    """A nested result (dicts, lists, Decimals, dates) as JSON-ready values, as `render` writes them."""
    if isinstance(v, dict):
        return {k: plain_tree(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [plain_tree(x) for x in v]
    return _plain(v)


def _cell(v: Any) -> str:
    if v is None:
        return ""
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
    return str(v)


def render(columns: list[str], rows: list[tuple], fmt: Format, *, max_width: int = 60) -> str:
    """Rows as an aligned text table, a JSON array of objects, or CSV with a header."""
    if fmt == Format.json:
        return json.dumps([{c: _plain(v) for c, v in zip(columns, r)} for r in rows], indent=2)
    if fmt == Format.csv:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if v is None else csv_cell(_plain(v)) for v in r])
        return buf.getvalue().rstrip("\n")
    cells = [[_cell(v) for v in r] for r in rows]
    cells = [[c if len(c) <= max_width else c[: max_width - 1] + "…" for c in r] for r in cells]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells]
    return "\n".join(lines)


def query(con, sql: str, params: Any = None) -> tuple[list[str], list[tuple]]:
    cur = con.execute(sql, params) if params is not None else con.execute(sql)
    return [d[0] for d in cur.description], cur.fetchall()
