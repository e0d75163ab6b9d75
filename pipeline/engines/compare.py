"""Row-by-row comparison of two builds of the same relation (DuckDB store vs a Spark-built lake).

Rules: the same column names in the same order; the same number of rows; after sorting both sides
by every column (exact columns first, floats last), each pair of rows equal: DECIMAL exactly and at
the same scale, integers, strings, booleans, dates and timestamps exactly, floats within 1e-9
relative (1e-12 absolute near zero; NaN equals NaN), lists and structs element by element.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import duckdb

REL_TOL = 1e-9
ABS_TOL = 1e-12


@dataclass
class Difference:
    relation: str
    detail: str

    def __str__(self) -> str:
        return f"{self.relation}: {self.detail}"


def _is_float_type(t: str) -> bool:
    return t.upper() in ("DOUBLE", "FLOAT", "REAL")


def _scale(t: str) -> int | None:
    t = t.upper()
    if t.startswith("DECIMAL("):
        return int(t[len("DECIMAL("):-1].split(",")[1])
    return None


def values_equal(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, (int, float, Decimal)) or not isinstance(b, (int, float, Decimal)):
            return False
        a, b = float(a), float(b)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    if isinstance(a, Decimal) and isinstance(b, Decimal):
        return a == b and a.as_tuple().exponent == b.as_tuple().exponent
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k]) for k in a)
    return a == b


def _sort_key(row: tuple, order: list[int]) -> tuple:
    def k(v: Any) -> tuple:
        if v is None:
            return (1, "")
        if isinstance(v, float):
            return (0, "nan" if math.isnan(v) else f"{v:.6e}")
        return (0, repr(v))
    return tuple(k(row[i]) for i in order)


def compare_relation(con: duckdb.DuckDBPyConnection, name: str, left_sql: str, right_sql: str,
                     max_shown: int = 5) -> list[Difference]:
    """Differences between two SELECTs of one relation, run on one DuckDB connection."""
    diffs: list[Difference] = []
    ldesc = con.execute(f"DESCRIBE ({left_sql})").fetchall()
    rdesc = con.execute(f"DESCRIBE ({right_sql})").fetchall()
    lcols, rcols = [r[0] for r in ldesc], [r[0] for r in rdesc]
    if lcols != rcols:
        return [Difference(name, f"columns differ: {lcols} vs {rcols}")]
    ltypes, rtypes = [r[1] for r in ldesc], [r[1] for r in rdesc]
    for c, lt, rt in zip(lcols, ltypes, rtypes):
        if (_scale(lt) is None) != (_scale(rt) is None) or _is_float_type(lt) != _is_float_type(rt):
            diffs.append(Difference(name, f"column {c}: type {lt} vs {rt}"))
        elif _scale(lt) is not None and _scale(lt) != _scale(rt):
            diffs.append(Difference(name, f"column {c}: DECIMAL scale {lt} vs {rt}"))
    left = con.execute(left_sql).fetchall()
    right = con.execute(right_sql).fetchall()
    if len(left) != len(right):
        return diffs + [Difference(name, f"{len(left)} rows vs {len(right)} rows")]
    floats = [i for i, t in enumerate(ltypes) if _is_float_type(t) or _is_float_type(rtypes[i])]
    order = [i for i in range(len(lcols)) if i not in floats] + floats
    left.sort(key=lambda r: _sort_key(r, order))
    right.sort(key=lambda r: _sort_key(r, order))
    shown = 0
    for lrow, rrow in zip(left, right):
        for c, a, b in zip(lcols, lrow, rrow):
            if not values_equal(a, b):
                diffs.append(Difference(name, f"column {c}: {a!r} vs {b!r} (row {dict(zip(lcols, lrow))})"[:800]))
                shown += 1
                break
        if shown >= max_shown:
            diffs.append(Difference(name, "... more rows differ"))
            break
    return diffs
