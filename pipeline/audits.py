"""Audits: invariants of a built store, each a SQL query in `pipeline/sql/audits/<name>.sql` returning its bad rows.

`build` runs every audit at the end, inside its transaction, so a store that breaks one is never committed:
the build rolls back (the previous store stays as it was) and raises `AuditError` naming the audit and its
first offending rows. An audit that returns no rows holds. Add one by dropping a `.sql` file in the folder.
"""

from __future__ import annotations

from importlib import resources

import duckdb

from .errors import PhaselensError

SHOWN_ROWS = 5
"""How many offending rows an audit failure quotes."""


class AuditError(PhaselensError):
    """A built relation breaks an invariant (an audit returned rows); the build was rolled back."""

    def __init__(self, audit: str, columns: list[str], rows: list[tuple], total: int) -> None:
        self.audit, self.columns, self.rows, self.total = audit, columns, rows, total
        shown = "\n".join("    " + ", ".join(f"{c}={v!r}" for c, v in zip(columns, row)) for row in rows)
        more = f"\n    ... and {total - len(rows)} more" if total > len(rows) else ""
        super().__init__(
            f"build audit `{audit}` failed: {total} offending row(s), so the build was rolled back and the store "
            f"is unchanged:\n{shown}{more}",
            f"see pipeline/sql/audits/{audit}.sql for what it checks; the rows name the calls or cells to inspect",
        )


def audit_names() -> list[str]:
    """The audits, in the order they run (file name order)."""
    folder = resources.files("phaselens.pipeline").joinpath("sql", "audits")
    return sorted(p.name.removesuffix(".sql") for p in folder.iterdir() if p.name.endswith(".sql"))


def audit_sql(name: str) -> str:
    return resources.files("phaselens.pipeline").joinpath("sql", "audits", f"{name}.sql").read_text()


def audit_rows(con: duckdb.DuckDBPyConnection, name: str) -> tuple[list[str], list[tuple], int]:
    """The columns, first offending rows and number of offending rows of one audit."""
    sql = audit_sql(name).strip().rstrip(";")
    cur = con.execute(sql)
    columns = [d[0] for d in cur.description]
    rows = cur.fetchmany(SHOWN_ROWS)
    total = con.execute(f"SELECT count(*) FROM ({sql})").fetchone()[0] if rows else 0
    return columns, rows, total


def run_audits(con: duckdb.DuckDBPyConnection, names: list[str] | None = None) -> None:
    """Run every audit (or those in `names`); raise `AuditError` for the first that returns rows."""
    for name in audit_names() if names is None else names:
        columns, rows, total = audit_rows(con, name)
        if total:
            raise AuditError(name, columns, rows, total)
