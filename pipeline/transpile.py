"""DuckDB SQL -> Spark SQL: sqlglot's transpiler plus a small rewrite layer, and a lint.

The relations in ``pipeline/sql/`` stay DuckDB SQL (one source of truth). ``to_spark`` parses a
statement with sqlglot (read="duckdb"), expands DuckDB macros, binds parameters as literals, applies
the rewrites below to the syntax tree, and writes Spark SQL. ``lint`` says what in a file cannot be
translated faithfully, so a construct that would run on Spark with a different answer is caught
before it is ever run. docs/scale-out.md lists the same rules for users.

Rewrite rules (each one fixes something sqlglot fails on or gets silently wrong):
- macros: ``CREATE MACRO f(a) AS expr`` and ``... AS TABLE query`` are expanded at every call
  (``f(x)`` becomes ``(expr)`` with ``a`` replaced by ``x``; ``FROM f(x)`` becomes a subquery). A parameter
  read as a row (``a.col``) is called with a relation's name (``f(t)``: DuckDB passes the row as a struct) and
  becomes that relation's column (``t.col``).
- ``quantile_cont(x, p)`` -> ``percentile(x, p)``: Spark's exact percentile with linear
  interpolation, the same definition as DuckDB's ``quantile_cont``. Never ``percentile_approx``.
- ``len(list)`` -> ``size(list)``: in the relation SQL ``len`` is the list length (the tokenizer
  renames it before parsing); ``length`` stays the string length. Spark's analyser rejects either on
  the wrong type, so a mistake fails loudly.
- ``CAST(x AS HUGEINT)`` -> ``CAST(x AS DECIMAL(38, 0))``: Spark has no 128-bit integer.
- ``a // b`` -> ``CAST((A - A % B) / B AS DECIMAL(38, 0))`` with ``A``, ``B`` as ``DECIMAL(38, 0)``:
  exact truncating division of 128-bit values (Spark's ``DIV`` returns a 64-bit integer).
- ``a / b`` -> ``CAST(a AS DOUBLE) / CAST(b AS DOUBLE)``: DuckDB's ``/`` is DOUBLE for every numeric
  type (DECIMAL included); Spark's would be a DECIMAL rounded to 6 places.
- ``avg(x)`` -> ``avg(CAST(x AS DOUBLE))``: DuckDB's ``avg`` of a DECIMAL is DOUBLE, Spark's DECIMAL.
- ``arg_min(x, key, n)`` / ``arg_max(x, key, n)`` (also ``min_by``/``max_by``) -> the ``x`` of the ``n``
  lowest/highest non-NULL keys via ``slice(array_sort(collect_list(struct(key, x))))``; ties on the
  key are broken by ``x``.
- several ``unnest(list)`` in one SELECT (DuckDB zips them) -> one ``inline(arrays_zip(...)) AS (...)``
  (Spark allows one generator per SELECT; ``arrays_zip`` pads with NULL as DuckDB does).
- ``x[a:b]`` -> ``substring(x, a, b - a + 1)`` when ``x`` is a string expression (md5, concat, a
  string cast or literal), else ``slice(x, a, b - a + 1)``.
- ``CAST('0x' || h AS BIGINT)`` -> ``CAST(conv(h, 16, 10) AS BIGINT)``: Spark does not read hex literals.
- ``epoch_us(t)``/``epoch_ms(t)`` -> ``unix_micros``/``unix_millis``; ``to_microseconds(n)`` ->
  ``n * INTERVAL 1 MICROSECOND``; ``list_has_any(a, b)`` -> ``arrays_overlap(a, b)``;
  ``hash(...)`` -> ``xxhash64(...)`` (a key only: equal inputs, equal hashes, on each engine).
- ``x[i]`` -> ``try_element_at(x, i)``: 1-based and NULL out of range as in DuckDB (sqlglot shifts a
  literal index to 0-based but not an expression such as ``x[i - 1]``, which would read the wrong element).
- ``row_number() OVER ()`` (an arbitrary numbering) -> ``monotonically_increasing_id()``: unique but
  not dense, and without a single-partition sort; the relation SQL uses it only as a join key.
- ``WINDOW w AS (...)`` is inlined into each ``OVER w``/``OVER (w ORDER BY ...)`` (Spark cannot extend a
  named window); ``string_agg([DISTINCT] x, sep ORDER BY k) [FILTER (WHERE c)]`` -> ``array_join`` of a
  sorted ``collect_set``/``collect_list`` (NULL over no rows, as DuckDB).
- ``range(a, b[, s])``/``generate_series(a, b[, s])`` -> ``sequence`` with DuckDB's bounds (exclusive end
  for ``range``) and an empty list where start > end (Spark's ``sequence`` would raise).
- ``printf(fmt, ...)``: ``%d`` arguments are cast to BIGINT and ``%f``/``%e`` ones to DOUBLE (Java's
  formatter rejects Spark's decimals there; DuckDB formats a DECIMAL through DOUBLE too), and
  ``%.Ng`` is written as C's ``%g`` (N significant digits, trailing zeros dropped), which Java's
  ``%g`` is not.

The Spark session must run with ``spark.sql.decimalOperations.allowPrecisionLoss=false`` (DECIMAL
products keep their scale up to 38 digits as in DuckDB) and ``spark.sql.session.timeZone=UTC``;
``pipeline/engines/spark.py`` sets both.

Lint findings (a statement with any of these is not portable):
- ``x[:b]``/``x[a:]`` open slices;
- sqlglot cannot parse or generate it (``unsupported``);
- the Spark output contains ``PERCENTILE_APPROX`` (an approximate percentile, unlabelled);
- the Spark output contains ``COLLECT_LIST``/``COLLECT_SET`` not wrapped in a sort (order lost);
- a macro called with the wrong number of arguments (``macro``), a lambda sqlglot cannot write
  (``lambda``); unnests that are not adjacent in the SELECT list (``unnest``).
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType


@dataclass(frozen=True)
class Finding:
    statement: int          # 0-based index of the statement in the file
    rule: str               # unsupported | percentile_approx | unordered_collect | macro | lambda | slice | unnest
    detail: str


class NotPortable(SqlglotError):
    """A construct the rewrite layer cannot translate faithfully."""

    def __init__(self, rule: str, detail: str):
        super().__init__(detail)
        self.rule = rule


@dataclass
class Macro:
    name: str
    params: list[str]
    body: exp.Expression
    table: bool               # a table macro (AS TABLE query)
    temp: bool                # TEMP: lives for the session only
    sql: str = ""             # the DuckDB definition, for a DuckDB catalog that reads the results


@dataclass
class Macros:
    defs: dict[str, Macro] = field(default_factory=dict)


# --- parsing ---------------------------------------------------------------------------------------

def _rename_len(sql: str) -> str:
    """``len(`` -> ``array_length(`` outside strings and comments (``len`` is the list length here)."""
    tokens = sqlglot.Dialect.get_or_raise("duckdb").tokenize(sql)
    out, last = [], 0
    for tok, nxt in zip(tokens, tokens[1:]):
        if tok.text.lower() == "len" and tok.token_type == TokenType.VAR and nxt.token_type == TokenType.L_PAREN:
            out.append(sql[last:tok.start])
            out.append("array_length")
            last = tok.end + 1
    out.append(sql[last:])
    return "".join(out)


def _parse(sql: str) -> list[exp.Expression]:
    return [s for s in sqlglot.parse(_rename_len(sql), read="duckdb") if s is not None]


def split_statements(sql: str) -> list[tuple[str, exp.Expression]]:
    """Each statement of a DuckDB SQL text as (its original text, its parsed tree).

    The original text is kept because sqlglot's DuckDB output is not always DuckDB 2.x SQL (it
    writes lambdas as ``x -> ...``); a DuckDB catalog over Spark's results replays the original.
    """
    tokens = sqlglot.Dialect.get_or_raise("duckdb").tokenize(sql)
    cuts, start = [], 0
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            cuts.append((start, tok.start))
            start = tok.end + 1
    cuts.append((start, len(sql)))
    out = []
    for a, b in cuts:
        text = sql[a:b].strip()
        if not text:
            continue
        for stmt in _parse(text):
            out.append((text, stmt))
    return out


def macro_of(stmt: exp.Expression) -> Macro | None:
    """The macro a ``CREATE [TEMP] MACRO`` statement defines, else None."""
    if not (isinstance(stmt, exp.Create) and str(stmt.args.get("kind", "")).upper() == "MACRO"):
        return None
    udf = stmt.this
    name = udf.this.name if isinstance(udf, exp.UserDefinedFunction) else udf.name
    params = [e.name for e in (udf.expressions if isinstance(udf, exp.UserDefinedFunction) else [])]
    body = stmt.expression
    temp = any(isinstance(p, exp.TemporaryProperty) for p in (stmt.args.get("properties") or exp.Properties()).expressions)
    table = isinstance(body, exp.Query)
    return Macro(name.lower(), params, body, table, temp, stmt.sql(dialect="duckdb"))


# --- macro expansion and parameters ------------------------------------------------------------------

def _substitute(body: exp.Expression, params: list[str], args: list[exp.Expression]) -> exp.Expression:
    values = dict(zip(params, args))

    def sub(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column) and not n.table and n.name in values:
            return exp.paren(values[n.name].copy(), copy=False)
        if isinstance(n, exp.Column) and n.table in values and not n.args.get("db"):
            # a row parameter (`w.col`, the macro called with a relation's name: DuckDB passes its row as a
            # struct) reads that relation's column: `t.col`
            row = values[n.table]
            while isinstance(row, exp.Paren):  # a row passed on by an enclosing macro arrives in parentheses
                row = row.this
            if not (isinstance(row, exp.Column) and not row.table):
                raise NotPortable("macro", f"{n.table}.{n.name}: a row parameter takes a relation's name, got {row.sql()}")
            return exp.column(n.name, table=row.name, quoted=n.this.quoted)
        return n

    return body.copy().transform(sub)


def expand_macros(stmt: exp.Expression, macros: Macros) -> exp.Expression:
    """``stmt`` with every call of a known macro replaced by its body (nested calls too)."""
    if not macros.defs:
        return stmt
    for _ in range(20):
        changed = False

        def expand(n: exp.Expression) -> exp.Expression:
            nonlocal changed
            if isinstance(n, exp.Table) and isinstance(n.this, exp.Anonymous) and n.this.name.lower() in macros.defs:
                m = macros.defs[n.this.name.lower()]
                if not m.table or len(n.this.expressions) != len(m.params):
                    raise NotPortable("macro", f"{m.name}: called with {len(n.this.expressions)} arguments")
                changed = True
                alias = n.alias or m.name
                return exp.Subquery(this=_substitute(m.body, m.params, list(n.this.expressions)),
                                    alias=exp.TableAlias(this=exp.to_identifier(alias)))
            if isinstance(n, exp.Func) and not isinstance(n, exp.Table):
                name = n.name.lower() if isinstance(n, exp.Anonymous) else (n.sql_name() or "").lower()
                m = macros.defs.get(name)
                if m is not None and not m.table:
                    args = list(n.expressions) if isinstance(n, exp.Anonymous) else \
                        [a for a in n.args.values() if isinstance(a, exp.Expression)]
                    if len(args) != len(m.params):
                        raise NotPortable("macro", f"{m.name}: called with {len(args)} arguments")
                    changed = True
                    return exp.paren(_substitute(m.body, m.params, args), copy=False)
            return n

        stmt = stmt.transform(expand)
        if not changed:
            return stmt
    raise NotPortable("macro", "macros nest more than 20 deep")


def _literal(value: Any) -> exp.Expression:
    if value is None:
        return exp.null()
    if isinstance(value, bool):
        return exp.true() if value else exp.false()
    if isinstance(value, int):
        return exp.Literal.number(value)
    if isinstance(value, float):
        return exp.cast(exp.Literal.string(repr(value)), "DOUBLE")
    if isinstance(value, Decimal):
        t = value.as_tuple()
        scale = max(-t.exponent, 0)
        return exp.cast(exp.Literal.string(str(value)), f"DECIMAL(38, {min(scale, 38)})")
    if isinstance(value, datetime):
        v = value.replace(tzinfo=None) if value.tzinfo is None else value.astimezone(tz=None).replace(tzinfo=None)
        return exp.cast(exp.Literal.string(v.isoformat(sep=" ")), "TIMESTAMP")
    if isinstance(value, date):
        return exp.cast(exp.Literal.string(value.isoformat()), "DATE")
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, (list, tuple)):
        return exp.Array(expressions=[_literal(v) for v in value])
    raise NotPortable("unsupported", f"cannot bind a parameter of type {type(value).__name__}")


def bind(stmt: exp.Expression, params: Mapping[str, Any] | Sequence[Any] | None) -> exp.Expression:
    """``$name`` and ``?`` parameters replaced by literals (Spark SQL has no DuckDB-style binding)."""
    if not params:
        return stmt
    positional = list(params) if not isinstance(params, Mapping) else []
    pos = iter(positional)

    def sub(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Placeholder):
            name = n.this if isinstance(n.this, str) else None
            if name:
                if not isinstance(params, Mapping) or name not in params:
                    raise NotPortable("unsupported", f"no value for parameter ${name}")
                return _literal(params[name])
            try:
                return _literal(next(pos))
            except StopIteration:
                raise NotPortable("unsupported", "fewer parameter values than ? placeholders") from None
        return n

    return stmt.transform(sub)


# --- rewrites ------------------------------------------------------------------------------------------

_STRING_FUNCS = (exp.MD5, exp.Substring, exp.Lower, exp.Upper, exp.Concat, exp.DPipe, exp.Trim, exp.SHA,
                 exp.SHA2, exp.Replace if hasattr(exp, "Replace") else exp.Concat)


def _is_string(e: exp.Expression) -> bool:
    if isinstance(e, _STRING_FUNCS):
        return True
    if isinstance(e, exp.Literal) and e.is_string:
        return True
    if isinstance(e, exp.Cast) and e.to.this in exp.DataType.TEXT_TYPES:
        return True
    if isinstance(e, exp.Anonymous) and e.name.lower() in {"md5", "sha256", "printf", "format", "lower", "upper"}:
        return True
    return False


def _dec38(e: exp.Expression) -> exp.Expression:
    return exp.cast(exp.paren(e.copy(), copy=False), "DECIMAL(38, 0)")


def _double(e: exp.Expression) -> exp.Expression:
    return exp.cast(exp.paren(e.copy(), copy=False), "DOUBLE")


def _fn(name: str, *args: exp.Expression) -> exp.Anonymous:
    return exp.Anonymous(this=name, expressions=list(args))


def _top_n(value: exp.Expression, key: exp.Expression, n: exp.Expression, highest: bool) -> exp.Expression:
    """The ``value`` of the n lowest (highest) non-NULL keys, as Spark SQL."""
    pair = exp.Case(ifs=[exp.If(this=exp.Not(this=exp.Is(this=key.copy(), expression=exp.null())),
                                true=_fn("named_struct", exp.Literal.string("k"), key.copy(),
                                         exp.Literal.string("v"), value.copy()))])
    arr = _fn("sort_array", _fn("collect_list", pair), exp.false() if highest else exp.true())
    picked = _fn("slice", arr, exp.Literal.number(1), n.copy())
    return exp.Transform(this=picked, expression=exp.Lambda(
        this=exp.Dot(this=exp.column("_pl_s"), expression=exp.to_identifier("v")),
        expressions=[exp.to_identifier("_pl_s")]))


_SPEC = re.compile(r"%(?P<flags>[-+ #0,]*)(?P<width>\d+)?(?:\.(?P<prec>\d+))?(?P<conv>[a-zA-Z%])")


def _c_g(x: exp.Expression, prec: int) -> exp.Expression:
    """C's ``%.<prec>g`` of ``x`` as Spark SQL (Java's ``%g`` keeps trailing zeros and switches to
    exponents at other bounds)."""
    p = max(prec, 1)
    xd = _double(x)
    exp10 = sqlglot.parse_one(f"CAST(floor(log10(abs({xd.sql('spark')}))) AS INT)", read="spark")
    fixed_prec = sqlglot.parse_one(f"greatest({p - 1} - {exp10.sql('spark')}, 0)", read="spark")
    fixed = _fn("format_string", exp.DPipe(this=exp.DPipe(this=exp.Literal.string("%."), expression=exp.cast(fixed_prec, "STRING")),
                                           expression=exp.Literal.string("f")), xd)
    strip_fixed = _fn("regexp_replace", fixed, exp.Literal.string(r"(\.[0-9]*?)0+$"), exp.Literal.string("$1"))
    strip_fixed = _fn("regexp_replace", strip_fixed, exp.Literal.string(r"\.$"), exp.Literal.string(""))
    sci = _fn("format_string", exp.Literal.string(f"%.{p - 1}e"), xd)
    strip_sci = _fn("regexp_replace", sci, exp.Literal.string(r"\.?0+e"), exp.Literal.string("e"))
    is_sci = sqlglot.parse_one(
        f"{xd.sql('spark')} <> 0 AND ({exp10.sql('spark')} < -4 OR {exp10.sql('spark')} >= {p})", read="spark")
    return exp.Case(ifs=[exp.If(this=exp.Is(this=xd.copy(), expression=exp.null()), true=exp.Literal.string("null")),
                         exp.If(this=is_sci, true=strip_sci)], default=strip_fixed)


def _printf_arg(m: re.Match, a: exp.Expression) -> exp.Expression:
    """Java's formatter takes %d only of integers and %f/%e only of floating point (not Spark's Decimal)."""
    conv = m.group("conv").lower()
    if conv in "dxo":
        return exp.cast(exp.paren(a.copy(), copy=False), "BIGINT")
    if conv in "fe":
        return _double(a)
    return a


def _printf(fmt: str, args: list[exp.Expression]) -> exp.Expression:
    """``printf(fmt, args...)`` as Spark SQL with C semantics for %d and %g."""
    specs = [m for m in _SPEC.finditer(fmt) if m.group("conv") != "%"]
    if len(specs) != len(args):
        raise NotPortable("unsupported", f"printf format {fmt!r} takes {len(specs)} arguments, got {len(args)}")
    if not any(m.group("conv") in "gG" for m in specs):
        return _fn("format_string", exp.Literal.string(fmt), *[_printf_arg(m, a) for m, a in zip(specs, args)])
    parts: list[exp.Expression] = []
    last = 0
    for m, a in zip(specs, args):
        lead = fmt[last:m.start()]
        if lead:
            parts.append(exp.Literal.string(lead.replace("%%", "%")))
        if m.group("conv") in "gG":
            if m.group("flags") or m.group("width"):
                raise NotPortable("unsupported", f"printf %g with flags or width: {fmt!r}")
            parts.append(_c_g(a, int(m.group("prec") or 6)))
        else:
            parts.append(_fn("format_string", exp.Literal.string(m.group(0)), _printf_arg(m, a)))
        last = m.end()
    if fmt[last:]:
        parts.append(exp.Literal.string(fmt[last:].replace("%%", "%")))
    return exp.Concat(expressions=parts, safe=False, coalesce=False)


def _zip_unnests(select: exp.Select) -> exp.Select:
    projections = select.expressions
    idx = [i for i, p in enumerate(projections) if isinstance(p.unalias(), exp.Explode)]
    if len(idx) < 2:
        return select
    if idx != list(range(idx[0], idx[0] + len(idx))):
        raise NotPortable("unnest", "several unnest() in one SELECT must be adjacent")
    names = []
    for i in idx:
        p = projections[i]
        if not isinstance(p, exp.Alias):
            raise NotPortable("unnest", "each of several unnest() in one SELECT needs an alias")
        names.append(p.alias)
    zipped = _fn("arrays_zip", *[projections[i].unalias().this.copy() for i in idx])
    gen = exp.Aliases(this=_fn("inline", zipped), expressions=[exp.to_identifier(n) for n in names])
    new = projections[:idx[0]] + [gen] + projections[idx[-1] + 1:]
    select.set("expressions", new)
    return select


def _rewrite(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.PercentileCont) and node.expression is not None \
            and not isinstance(node.parent, exp.WithinGroup):
        return _fn("percentile", node.this, node.expression)
    if isinstance(node, exp.Anonymous):
        name = node.name.lower()
        args = list(node.expressions)
        if name == "quantile_cont" and len(args) == 2:
            return _fn("percentile", *args)
        if name in ("len", "array_length") and len(args) == 1:
            return _fn("size", *args)
        if name == "epoch_us" and len(args) == 1:
            return _fn("unix_micros", exp.cast(args[0], "TIMESTAMP"))
        if name == "epoch_ms" and len(args) == 1:
            return _fn("unix_millis", exp.cast(args[0], "TIMESTAMP"))
        if name == "to_microseconds" and len(args) == 1:
            return exp.Mul(this=exp.paren(args[0], copy=False),
                           expression=exp.Interval(this=exp.Literal.string("1"), unit=exp.var("MICROSECOND")))
        if name == "hash":
            return _fn("xxhash64", *args)
        if name == "printf" and args and isinstance(args[0], exp.Literal) and args[0].is_string:
            return _printf(args[0].this, args[1:])
        if name == "printf" and args and isinstance(args[0], exp.Case) and all(
                isinstance(b, exp.Literal) and b.is_string
                for b in [i.args["true"] for i in args[0].args["ifs"]] + [args[0].args.get("default")]):
            case = args[0].copy()   # a choice of literal formats: one printf per branch
            for i in case.args["ifs"]:
                i.set("true", _printf(i.args["true"].this, [a.copy() for a in args[1:]]))
            case.set("default", _printf(case.args["default"].this, [a.copy() for a in args[1:]]))
            return case
        if name == "printf":
            raise NotPortable("unsupported", "printf with a format that is not a literal")
        if name == "list_has_any" and len(args) == 2:
            return _fn("arrays_overlap", *args)
    if isinstance(node, exp.GenerateSeries):
        return _series(node)
    if isinstance(node, exp.Window) and isinstance(node.this, exp.RowNumber) and not node.args.get("partition_by") \
            and node.args.get("order") is None and node.args.get("alias") is None:
        return _fn("monotonically_increasing_id")
    if isinstance(node, exp.Grouping) and len(node.expressions) > 1:
        # DuckDB's bit vector (first argument most significant); Spark's grouping_id needs every grouping column
        n = len(node.expressions)
        terms = [exp.Mul(this=exp.cast(_fn("grouping", e), "BIGINT"), expression=exp.Literal.number(2 ** (n - 1 - i)))
                 for i, e in enumerate(node.expressions)]
        total = terms[0]
        for t in terms[1:]:
            total = exp.Add(this=total, expression=t)
        return exp.paren(total, copy=False)
    if isinstance(node, exp.ArraySize):
        return _fn("size", node.this)
    if isinstance(node, exp.ArrayOverlaps):
        return _fn("arrays_overlap", node.this, node.expression)
    if isinstance(node, exp.DataType) and node.this == exp.DataType.Type.INT128:
        return exp.DataType.build("DECIMAL(38, 0)")
    if isinstance(node, exp.IntDiv):
        a, b = _dec38(node.this), _dec38(node.expression)
        num = exp.Sub(this=a, expression=exp.paren(exp.Mod(this=a.copy(), expression=b), copy=False))
        return exp.cast(exp.Div(this=exp.paren(num, copy=False), expression=b.copy(), typed=True), "DECIMAL(38, 0)")
    if isinstance(node, exp.Div) and not node.args.get("typed"):
        return exp.Div(this=_double(node.this), expression=_double(node.expression), typed=True)
    if isinstance(node, exp.Avg):
        return exp.Avg(this=_double(node.this))
    if isinstance(node, (exp.ArgMin, exp.ArgMax)) and node.args.get("count") is not None:
        return _top_n(node.this, node.expression, node.args["count"], isinstance(node, exp.ArgMax))
    if isinstance(node, exp.Bracket) and len(node.expressions) == 1 and isinstance(node.expressions[0], exp.Slice):
        sl = node.expressions[0]
        lo, hi = sl.this, sl.expression
        if lo is None or hi is None:
            raise NotPortable("slice", "x[:b] and x[a:] slices are not translated")
        length = exp.Add(this=exp.Sub(this=exp.paren(hi.copy(), copy=False), expression=exp.paren(lo.copy(), copy=False)),
                         expression=exp.Literal.number(1))
        if _is_string(node.this):
            return exp.Substring(this=node.this, start=lo, length=length)
        return _fn("slice", node.this, lo, length)
    if isinstance(node, exp.Bracket) and len(node.expressions) == 1 and not isinstance(node.expressions[0], exp.Slice):
        # sqlglot lowers a literal DuckDB index to 0-based but leaves an expression index 1-based (so
        # ``xs[i - 1]`` would read the wrong element in Spark); ``try_element_at`` is 1-based and NULL out of
        # range, as DuckDB is.
        idx = node.expressions[0]
        if isinstance(idx, exp.Literal) and not idx.is_string:
            idx = exp.Literal.number(int(idx.this) + 1) if int(idx.this) >= 0 else idx
        return _fn("try_element_at", node.this, idx)
    if isinstance(node, exp.Cast) and node.to.this == exp.DataType.Type.BIGINT and isinstance(node.this, exp.DPipe) \
            and isinstance(node.this.this, exp.Literal) and node.this.this.this.lower() == "0x":
        return exp.cast(_fn("conv", node.this.expression, exp.Literal.number(16), exp.Literal.number(10)), "BIGINT")
    if isinstance(node, exp.Select):
        return _zip_unnests(node)
    return node


def _positive_step(step: exp.Expression | None) -> bool:
    if step is None:
        return True
    if isinstance(step, exp.Interval):
        v = step.this
        return isinstance(v, exp.Literal) and float(v.this) > 0
    return isinstance(step, exp.Literal) and not step.is_string and float(step.this) > 0


def _series(node: exp.GenerateSeries) -> exp.Expression:
    """DuckDB ``range``/``generate_series`` (end exclusive/inclusive; empty when start > end) as Spark's
    ``sequence`` (always inclusive, and an error when start > end with a positive step)."""
    start, end, step = node.args["start"], node.args["end"], node.args.get("step")
    if not _positive_step(step):
        raise NotPortable("unsupported", "range/generate_series needs a positive literal step")
    if node.args.get("is_end_exclusive"):
        one = exp.Interval(this=exp.Literal.string("1"), unit=exp.var("MICROSECOND")) \
            if isinstance(step, exp.Interval) else exp.Literal.number(1)
        end = exp.Sub(this=exp.paren(end.copy(), copy=False), expression=one)
    args = [start.copy(), end.copy()] + ([step.copy()] if step is not None else [])
    return exp.If(this=exp.GT(this=start.copy(), expression=end.copy()), true=exp.Array(expressions=[]),
                  false=_fn("sequence", *args))


def _group_concat(gc: exp.GroupConcat, cond: exp.Expression | None) -> exp.Expression:
    """``string_agg([DISTINCT] x, sep [ORDER BY k]) [FILTER (WHERE c)]`` with DuckDB's order and NULL (not '')
    over no rows: ``array_join`` of a sorted ``collect_set``/``collect_list`` (Spark's ``listagg`` with
    DISTINCT and FILTER fails in its planner)."""
    sep = gc.args.get("separator") or exp.Literal.string(",")
    this = gc.this
    order = None
    if isinstance(this, exp.Order):
        order = this.expressions
        this = this.this
    distinct = isinstance(this, exp.Distinct)
    value = this.expressions[0] if distinct else this
    if order and (len(order) != 1 or order[0].args.get("desc")):
        raise NotPortable("unsupported", "string_agg ORDER BY more than one key, or descending")

    def when(e: exp.Expression, extra: exp.Expression | None = None) -> exp.Expression:
        test = exp.Not(this=exp.Is(this=value.copy(), expression=exp.null()))
        if cond is not None:
            test = exp.and_(exp.paren(cond.copy(), copy=False), test)
        return exp.Case(ifs=[exp.If(this=test, true=e)])

    if distinct:
        if order and order[0].this != value:
            raise NotPortable("unsupported", "string_agg(DISTINCT x ORDER BY y) with y other than x")
        arr = _fn("collect_set", when(exp.cast(value.copy(), "STRING")))
        arr = _fn("array_sort", arr) if order else arr
    elif order:
        pair = _fn("named_struct", exp.Literal.string("k"), order[0].this.copy(), exp.Literal.string("v"),
                   exp.cast(value.copy(), "STRING"))
        arr = exp.Transform(this=_fn("array_sort", _fn("collect_list", when(pair))), expression=exp.Lambda(
            this=exp.Dot(this=exp.column("_pl_s"), expression=exp.to_identifier("v")),
            expressions=[exp.to_identifier("_pl_s")]))
    else:
        arr = _fn("collect_list", when(exp.cast(value.copy(), "STRING")))
    return exp.If(this=exp.EQ(this=_fn("size", arr.copy()), expression=exp.Literal.number(0)),
                  true=exp.null(), false=_fn("array_join", arr, sep.copy()))


def _inline_windows(select: exp.Select) -> exp.Select:
    """``WINDOW w AS (...)`` inlined into every ``OVER w`` / ``OVER (w ORDER BY ...)``: Spark cannot
    extend a named window."""
    named = {w.this.name: w for w in select.args.get("windows") or []}
    if not named:
        return select
    for win in list(select.find_all(exp.Window)):
        ref = win.args.get("alias")
        if ref is None or ref.name not in named or win.find_ancestor(exp.Select) is not select:
            continue
        base = named[ref.name]
        win.set("alias", None)
        if not win.args.get("partition_by"):
            win.set("partition_by", [e.copy() for e in base.args.get("partition_by") or []])
        if win.args.get("order") is None and base.args.get("order") is not None:
            win.set("order", base.args["order"].copy())
        if win.args.get("spec") is None and base.args.get("spec") is not None:
            win.set("spec", base.args["spec"].copy())
    select.set("windows", None)
    return select


def _pre(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Select):
        return _inline_windows(node)
    if isinstance(node, exp.Filter) and isinstance(node.this, exp.GroupConcat):
        return _group_concat(node.this, node.expression.this)
    if isinstance(node, exp.GroupConcat):
        return _group_concat(node, None)
    return node


def _post_order(node: exp.Expression) -> exp.Expression:
    """Apply ``_rewrite`` children first, so each rule sees already-rewritten arguments, once."""
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expression):
            node.set(key, _post_order(value))
        elif isinstance(value, list):
            node.set(key, [_post_order(v) if isinstance(v, exp.Expression) else v for v in value])
    return _rewrite(node)


def spark_statement(stmt: exp.Expression, macros: Macros | None = None,
                    params: Mapping[str, Any] | Sequence[Any] | None = None) -> str:
    """Spark SQL for one parsed DuckDB statement (raises ``SqlglotError``/``NotPortable`` if it cannot)."""
    stmt = bind(expand_macros(stmt.copy(), macros or Macros()), params)
    stmt = _post_order(stmt.transform(_pre))
    return stmt.sql(dialect="spark", unsupported_level=sqlglot.ErrorLevel.RAISE)


def to_spark(sql: str, params: Mapping[str, Any] | Sequence[Any] | None = None) -> list[str]:
    """Spark SQL for each statement of a DuckDB SQL text; macros it defines are expanded, not emitted."""
    macros = Macros()
    out = []
    for stmt in _parse(sql):
        m = macro_of(stmt)
        if m is not None:
            macros.defs[m.name] = m
            continue
        out.append(spark_statement(stmt, macros, params))
    return out


_COLLECT = re.compile(r"\b(COLLECT_LIST|COLLECT_SET)\s*\(", re.I)
_SORTED_COLLECT = re.compile(r"\b(ARRAY_SORT|SORT_ARRAY)\s*\(\s*(COLLECT_LIST|COLLECT_SET)\s*\(", re.I)
_UNORDERED_OK = re.compile(r"\bARRAY_JOIN\s*\(\s*COLLECT_(LIST|SET)\s*\(", re.I)   # string_agg without ORDER BY


def _check(i: int, stmt: exp.Expression, macros: Macros, findings: list[Finding]) -> None:
    try:
        spark = spark_statement(stmt, macros)
    except NotPortable as e:
        findings.append(Finding(i, e.rule, str(e)))
        return
    except SqlglotError as e:
        findings.append(Finding(i, "unsupported", str(e).splitlines()[0]))
        return
    if re.search(r"\bPERCENTILE_APPROX\b|\bAPPROX_PERCENTILE\b", spark, re.I):
        findings.append(Finding(i, "percentile_approx", "approximate percentile in Spark output"))
    if len(_COLLECT.findall(spark)) > len(_SORTED_COLLECT.findall(spark)) + len(_UNORDERED_OK.findall(spark)):
        findings.append(Finding(i, "unordered_collect", "COLLECT_LIST/SET without a sort: order lost"))
    if re.search(r"\b(LIST_|ARRAY_TRANSFORM|LIST_TRANSFORM)\w*\(", spark) and "->" not in spark:
        findings.append(Finding(i, "lambda", "a DuckDB list function left untranslated"))


def lint(sql: str) -> list[Finding]:
    """Every construct in ``sql`` that the rewrite layer cannot translate faithfully to Spark.

    Macro definitions are checked through their body (parameters read as columns), with the
    file's other macros expanded inside it, so a macro file is linted even if nothing calls it.
    """
    try:
        stmts = _parse(sql)
    except SqlglotError as e:
        return [Finding(-1, "unsupported", f"sqlglot cannot parse: {str(e).splitlines()[0]}")]
    macros = Macros()
    findings: list[Finding] = []
    for i, stmt in enumerate(stmts):
        m = macro_of(stmt)
        if m is not None:
            macros.defs[m.name] = m
            body = m.body if m.table else exp.select(exp.alias_(m.body.copy(), "v"))
            _check(i, body, macros, findings)
            continue
        _check(i, stmt, macros, findings)
    return findings
