"""The read model: the named queries every surface reads, so one figure is one number everywhere.

Two places hold the same figures, computed the same way:

- the built store: `workload_stats(since, until)` (pipeline/sql/workloads.sql), read by `phaselens workloads`,
  `explain`, `report` (every format) through `workload_rows` / `workload_row` below;
- the published snapshot: the read macros of pipeline/sql/rollup_macros.sql over the rollups, read by the
  dashboard (app/queries.py) through `snapshot_sql` below.

Both use one percentile method and one cost headline, so for the same period and filters they give the same
calls, cost, phase shares and TTFT/ITL percentiles (tests/test_read_model.py reads them off every surface):

- percentiles: the log-bucket histogram sketch of pipeline/sql/sketch_macros.sql (nearest rank, read at the
  bucket's geometric centre, within 2.9% of the exact value). Chosen over exact quantiles because histograms merge:
  the dashboard answers any period, provider, model, team and workload filter from small rollups without reading
  every call, and the store computes the same buckets over the calls themselves.
- money: `cost_usd_best` (with its prefill side `input_cost_usd_best` and decode side `output_cost_usd_best`) is
  the headline: invoice-true where reconciled billing covers the call (billed cost allocated by tokens), the
  estimate at list or price-book price otherwise. Shares and dominance of money are of the headline.
  `cost_usd` is the estimate, shown beside it where a page compares the two.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import duckdb

from .errors import PhaselensError

PERCENTILE_METHOD = ("log-histogram sketch: the nearest-rank value's bucket (40 per decade) read at its centre, "
                     "within 2.9% of exact")
PERCENTILE_ERROR = 10 ** (1 / 80) - 1
COST_HEADLINE = "invoice-true where billed, else estimated"
# What a diagnosis under filters takes from the whole store (rollup_macros.sql: workload_phases).
SCOPE_NOTE = "the batch-contention ratio and the caching lever's savings are of the whole store"

# The headline figures per workload, by the column name every surface reads them under.
HEADLINE_FIELDS: tuple[str, ...] = (
    "calls", "cost_usd_best", "input_cost_usd_best", "output_cost_usd_best", "prefill_time_share",
    "prefill_cost_share", "ttft_p50_s", "ttft_p95_s", "itl_p50_s", "itl_p95_s",
)

WORKLOADS_SQL = "SELECT * FROM workload_stats($since, $until) ORDER BY cost_usd_best DESC NULLS LAST, calls DESC, workload"

# Calls of the store with their headline cost (invoice-true where billed, else the estimate), for per-call sums
# (cost by day and phase). Needs a built store (`invoice_costs` comes from the reconciliation stage).
CALLS_WITH_HEADLINE_COST = """(
  SELECT r.*,
    CASE WHEN i.cost_usd_invoice IS NOT NULL THEN i.input_cost_usd_invoice ELSE r.input_cost_usd END AS input_cost_usd_best,
    CASE WHEN i.cost_usd_invoice IS NOT NULL THEN i.output_cost_usd_invoice ELSE r.output_cost_usd END AS output_cost_usd_best,
    coalesce(i.cost_usd_invoice, r.cost_usd) AS cost_usd_best,
    i.cost_usd_invoice IS NOT NULL AS invoice_true
  FROM requests r LEFT JOIN invoice_costs i USING (call_id)
)"""

# Reconciliation cells whose UTC day overlaps [$since, $until) (NULL = open): `reconcile`, the report and the
# dashboard's reconciliation macros (which take whole days) select the same cells.
RECONCILIATION_PERIOD = ("($since IS NULL OR CAST(day AS TIMESTAMP) + INTERVAL 1 DAY > $since) "
                         "AND ($until IS NULL OR CAST(day AS TIMESTAMP) < $until)")
RECONCILIATION_SQL = (f"SELECT * FROM reconciliation WHERE {RECONCILIATION_PERIOD} "
                      "ORDER BY provider, model NULLS LAST, day, token_type")

# Snapshot read macros that take the shared filter arguments, with the extra arguments each one adds.
FILTER_ARGS = "$since, $until, $providers, $models, $workloads, $teams"
SNAPSHOT_MACROS: dict[str, tuple[str, ...]] = {
    "totals": (), "workload_phases": (), "hist_percentiles": ("bin", "grp"), "hist_distribution": ("metric",),
    "cost_over_time": ("bin", "grp"), "time_split_over_time": ("bin",), "cost_by": ("grp",), "timing_sources": (),
    "sample_calls": (), "workload_latency": ("bin",), "slo_status": ("bin", "slos"),
}


def snapshot_sql(name: str) -> str:
    """The SELECT of snapshot macro `name` with its named parameters ($since ... $teams, then its own)."""
    extra = SNAPSHOT_MACROS[name]
    args = FILTER_ARGS + "".join(f", ${a}" for a in extra)
    return f"SELECT * FROM {name}({args})"


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: dict) -> list[dict[str, Any]]:
    cur = con.cursor()  # its own result: one the caller left open on `con` does not get in the way
    try:
        res = cur.execute(sql, params)
        cols = [d[0] for d in res.description]
        return [dict(zip(cols, r, strict=True)) for r in res.fetchall()]
    finally:
        cur.close()


def workload_columns(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The columns of `workload_stats`, in order."""
    cur = con.cursor()
    try:
        return [d[0] for d in cur.execute("SELECT * FROM workload_stats(NULL, NULL) LIMIT 0").description]
    finally:
        cur.close()


def workload_rows(con: duckdb.DuckDBPyConnection, since: datetime | None = None,
                  until: datetime | None = None) -> list[dict[str, Any]]:
    """Per workload over calls started in [since, until) (None = open): every `workload_stats` column, headline
    cost first (largest), then calls, then name."""
    return _rows(con, WORKLOADS_SQL, {"since": since, "until": until})


def workload_row(con: duckdb.DuckDBPyConnection, workload: str, since: datetime | None = None,
                 until: datetime | None = None) -> dict[str, Any]:
    """The row of one workload; raises with the known names when it has no call in the period."""
    rows = workload_rows(con, since, until)
    for r in rows:
        if r["workload"] == workload:
            return r
    names = ", ".join(r["workload"] for r in rows) or "none (load traces and run `phaselens build`)"
    raise PhaselensError(f"no workload named {workload!r} in this period", f"known workloads: {names}")


def headline(row: dict[str, Any]) -> dict[str, Any]:
    """The headline figures of a workload row (HEADLINE_FIELDS), as the row holds them."""
    return {k: row.get(k) for k in HEADLINE_FIELDS}
