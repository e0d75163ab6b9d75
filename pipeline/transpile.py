"""DuckDB SQL -> Spark SQL: sqlglot's transpiler plus a small rewrite layer, and a lint.

The relations in ``pipeline/sql/`` stay DuckDB SQL (one source of truth). ``to_spark`` parses a
statement with sqlglot (read="duckdb"), applies the rewrites below to the syntax tree, and
writes Spark SQL. ``lint`` says what in a file cannot be translated faithfully, so a construct
that would run on Spark with a different answer is caught before it is ever run.

Rewrite rules (each one fixes something sqlglot fails on or gets silently wrong):
- ``quantile_cont(x, p)`` -> ``percentile(x, p)``: Spark's exact percentile with linear
  interpolation, the same definition as DuckDB's ``quantile_cont``. Never ``percentile_approx``.
- ``len(list)`` -> ``size(list)`` where sqlglot leaves it as an unknown function.
- ``CAST(x AS HUGEINT)`` -> ``CAST(x AS DECIMAL(38, 0))``: Spark has no 128-bit integer.

Lint findings (a statement with any of these is not portable yet):
- ``x[a:b]`` slices and ``len``/``length`` (list or string: sqlglot has no types here);
- sqlglot cannot parse or generate it (``unsupported``);
- the Spark output contains ``PERCENTILE_APPROX`` (an approximate percentile, unlabelled);
- the Spark output contains ``COLLECT_LIST``/``COLLECT_SET`` not wrapped in a sort (order lost);
- DuckDB-only statements with no Spark equivalent: ``CREATE MACRO`` (macros), lambdas (``->``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError


@dataclass(frozen=True)
class Finding:
    statement: int          # 0-based index of the statement in the file
    rule: str               # unsupported | percentile_approx | unordered_collect | macro | lambda
    detail: str


def _rewrite(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.PercentileCont) and node.expression is not None \
            and not isinstance(node.parent, exp.WithinGroup):
        return exp.Anonymous(this="percentile", expressions=[node.this, node.expression])
    if isinstance(node, exp.Anonymous):
        name = node.name.lower()
        if name == "quantile_cont" and len(node.expressions) == 2:
            return exp.Anonymous(this="percentile", expressions=list(node.expressions))
        if name == "len" and len(node.expressions) == 1:
            return exp.Anonymous(this="size", expressions=list(node.expressions))
    if isinstance(node, exp.DataType) and node.this == exp.DataType.Type.INT128:
        return exp.DataType.build("DECIMAL(38, 0)")
    return node


def _parse(sql: str) -> list[exp.Expression]:
    return [s for s in sqlglot.parse(sql, read="duckdb") if s is not None]


def to_spark(sql: str) -> list[str]:
    """Spark SQL for each statement of a DuckDB SQL text (raises ``SqlglotError`` if it cannot)."""
    out = []
    for stmt in _parse(sql):
        stmt = stmt.transform(_rewrite)
        out.append(stmt.sql(dialect="spark", unsupported_level=sqlglot.ErrorLevel.RAISE))
    return out


_COLLECT = re.compile(r"\b(COLLECT_LIST|COLLECT_SET)\s*\(", re.I)
_SORTED_COLLECT = re.compile(r"\b(ARRAY_SORT|SORT_ARRAY)\s*\(\s*(COLLECT_LIST|COLLECT_SET)\s*\(", re.I)


def lint(sql: str) -> list[Finding]:
    """Every construct in ``sql`` that the rewrite layer cannot translate faithfully to Spark."""
    try:
        stmts = _parse(sql)
    except SqlglotError as e:
        return [Finding(-1, "unsupported", f"sqlglot cannot parse: {str(e).splitlines()[0]}")]
    findings: list[Finding] = []
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, exp.Create) and str(stmt.args.get("kind", "")).upper() == "MACRO":
            findings.append(Finding(i, "macro", "CREATE MACRO has no Spark equivalent"))
            continue
        if any(True for _ in stmt.find_all(exp.Slice)):
            findings.append(Finding(i, "slice", "x[a:b] slices are not translated yet"))
        if any(True for _ in stmt.find_all(exp.Length)):
            findings.append(Finding(i, "length", "len()/length() is ambiguous (list or string) without types"))
        if any(True for _ in stmt.find_all(exp.Lambda)):
            findings.append(Finding(i, "lambda", "lambda expressions are not translated yet"))
        try:
            spark = stmt.transform(_rewrite).sql(dialect="spark", unsupported_level=sqlglot.ErrorLevel.RAISE)
        except SqlglotError as e:
            findings.append(Finding(i, "unsupported", str(e).splitlines()[0]))
            continue
        if re.search(r"\bPERCENTILE_APPROX\b|\bAPPROX_PERCENTILE\b", spark, re.I):
            findings.append(Finding(i, "percentile_approx", "approximate percentile in Spark output"))
        if len(_COLLECT.findall(spark)) > len(_SORTED_COLLECT.findall(spark)):
            findings.append(Finding(i, "unordered_collect", "COLLECT_LIST/SET without a sort: order lost"))
    return findings
