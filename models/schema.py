"""DuckDB column types derived from the record models, so the store and the records never drift."""

from __future__ import annotations

import types
import typing
from datetime import datetime
from decimal import Decimal

from pydantic import BaseModel

MONEY = "DECIMAL(38, 12)"
QUANTITY = "DECIMAL(38, 6)"

_SCALARS: dict[object, str] = {
    str: "VARCHAR",
    int: "BIGINT",
    float: "DOUBLE",
    bool: "BOOLEAN",
    datetime: "TIMESTAMP",
}


def _duck_type(name: str, annotation: object) -> str:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _duck_type(name, args[0])
    if origin is typing.Literal:
        return "VARCHAR"
    if origin is list:
        (inner,) = typing.get_args(annotation)
        return _duck_type(name, inner) + "[]"
    if annotation is Decimal:
        return QUANTITY if name.startswith("quantity") else MONEY
    return _SCALARS[annotation]


def columns(model: type[BaseModel]) -> dict[str, str]:
    """Column name -> DuckDB type for a record model, in field order."""
    return {name: _duck_type(name, f.annotation) for name, f in model.model_fields.items()}


def create_table_sql(table: str, model: type[BaseModel], *, temp: bool = False, extra: str = "") -> str:
    """CREATE TABLE IF NOT EXISTS for a record model (optionally TEMP, with extra column defs)."""
    cols = ",\n  ".join(f'"{c}" {t}' for c, t in columns(model).items())
    if extra:
        cols += ",\n  " + extra
    kind = "TEMP TABLE" if temp else "TABLE"
    return f"CREATE {kind} IF NOT EXISTS {table} (\n  {cols}\n)"
