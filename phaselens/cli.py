"""The `phaselens` command: a thin skin over `pipeline/`; every command has an example in its help."""

from __future__ import annotations

import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Optional

import typer

from phaselens.models import resolve_db
from phaselens.models.config import load_config
from phaselens.output import Format, query, render
from phaselens.pipeline.errors import PhaselensError

app = typer.Typer(
    help="phaselens: split every LLM request's time and money into prefill and decode.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)

DbOpt = Annotated[
    Optional[Path], typer.Option("--db", help="Store file; default $PHASELENS_DB, else ./phaselens.duckdb.")
]
ConfigOpt = Annotated[
    Optional[Path],
    typer.Option("--config", help="Configuration (TOML/YAML): price book, workload rules; default $PHASELENS_CONFIG."),
]
LakeOpt = Annotated[
    Optional[str],
    typer.Option("--lake", help="Read a Parquet lake (a folder or s3://...) instead of a store; see docs/scale-out.md. Default: none (read the store)."),
]
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="Output format: table for people; json and csv for programs (money as exact decimal strings in USD, counts as integers; docs/cli.md).")]
SinceOpt = Annotated[Optional[datetime], typer.Option("--since", help="Only calls started at or after (UTC). Default: the first call.")]
UntilOpt = Annotated[Optional[datetime], typer.Option("--until", help="Only calls started before (UTC). Default: after the last call.")]



def _sample_logs() -> Path:
    """The bundled sample day (a folder in a checkout, package data in an installed wheel)."""
    from importlib import resources

    return Path(str(resources.files("phaselens.sample_logs")))


def _err(msg: str) -> None:
    typer.echo(msg, err=True)


def _fail(e: PhaselensError, code: int = 1) -> None:
    _err(f"Error: {e.message}")
    if e.fix:
        _err(f"  fix: {e.fix}")
    raise typer.Exit(code)


def _open(db: Path | None, read_only: bool = False, lake: str | None = None):
    if lake is not None:  # DuckDB views over the lake's raw and built relations
        from phaselens.pipeline.lake import open_lake

        return open_lake(lake)[0]
    from phaselens.pipeline.store import connect

    return connect(resolve_db(db), read_only=read_only)


def _publish(con, db: Path | None, config=None, *, days=None, since: str | None = None) -> None:
    """Give the dashboard a fresh snapshot of what this command wrote (it never reads the store itself); with
    `days` and `since` (the store's basis before the command changed it) only those days' rollups are computed."""
    from phaselens.pipeline.publish import publish

    publish(con, resolve_db(db), config, days=days, since=since)


def _config(config: Path | None):
    from phaselens.models import Settings

    return load_config(config or Settings().config)


@app.command()
def ingest(
    paths: Annotated[list[str], typer.Argument(help="Files, folders or globs of traces and billing exports.")],
    db: DbOpt = None,
    force: Annotated[bool, typer.Option(help="Read files again even when their content was loaded before.")] = False,
    fx: Annotated[
        Optional[list[str]], typer.Option(help="Exchange rate for a billing currency, as CUR=USD_PER_UNIT, e.g. "
                                          "EUR=1.08 (repeatable). Default: none (no rate is ever assumed).")
    ] = None,
    keep_attribute: Annotated[
        Optional[list[str]],
        typer.Option("--keep-attribute", help="Also keep this span attribute (repeatable); by default only the "
                     "attributes phaselens reads are kept, everything else is dropped."),
    ] = None,
    lake: Annotated[
        Optional[str], typer.Option("--lake", help="Also write the loaded raw rows to this Parquet lake (the days "
                                    "they touched), for `build --engine spark`. The ledger lives in --db, default "
                                    "<lake>/phaselens-ingest.duckdb. Default: none.")
    ] = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """Load traces and billing exports into the store; the format is detected from each file's content.

    Folders are walked for data files: code, docs and config found there (.py, .md, .toml, .yaml, ...) are
    skipped and counted; a file named on the command line is always read.

    Example: phaselens ingest sample_logs/ --db demo.duckdb
    Example: phaselens ingest traces/ billing/ --lake lake/   (then `phaselens build --engine spark --lake lake/`)
    """
    from decimal import Decimal, InvalidOperation

    from phaselens.pipeline.load import ingest as run_ingest
    from phaselens.pipeline.publish import loaded_days, store_basis

    rates = {}
    for item in fx or []:
        cur, _, rate = item.partition("=")
        try:
            rates[cur.strip().upper()] = Decimal(rate)
        except InvalidOperation:
            _fail(PhaselensError(f"--fx {item!r} is not CUR=RATE", "write it like EUR=1.08"), 2)
    if lake is not None:
        db = _lake_ingest_store(lake, db)
    try:
        con = _open(db)
        since = store_basis(con)

        def progress(r, i, n):
            counts = f"{r.accepted:,} stored, {r.duplicates:,} duplicate, {r.rejected:,} rejected, {r.skipped:,} skipped"
            line = f"[{i}/{n}] {r.status:9} {r.file} ({r.adapter or '-'}; {counts}; {r.seconds:.1f} s)"
            _err(line + (f"\n          {r.message}" if r.message and r.status != "unchanged" else ""))

        def within_file(lines_done: int) -> None:  # large OTLP files report each 64 MB chunk
            _err(f"          ... {lines_done:,} lines read")

        result = run_ingest(con, paths, options={"fx": rates, "progress": within_file, "keep_attributes": list(keep_attribute or [])}, force=force, on_file=progress)
        if lake is None:
            _publish(con, db, days=loaded_days(con, [f.load_id for f in result.files if f.accepted]), since=since)
    except PhaselensError as e:
        _fail(e, 2)
    if lake is not None and result.files:
        _write_lake(con, lake, db, result)
    if not result.files:  # nothing to read is said plainly, and is not a success
        skipped = (f": it holds only {len(result.not_data):,} code, docs or config file(s) (e.g. "
                   f"{result.not_data[0].name}), which are skipped" if result.not_data else ": it is empty")
        _err(f"Error: no data file found in {', '.join(paths)}{skipped}.")
        _err("  fix: point at trace, gateway-log, benchmark or billing files (.json, .jsonl, .csv, .parquet, "
             "optionally .gz), or a folder holding them")
        raise typer.Exit(1)
    cols = ["file", "status", "adapter", "accepted", "duplicates", "rejected", "skipped", "seconds", "message"]
    rows = [(f.file, f.status, f.adapter, f.accepted, f.duplicates, f.rejected, f.skipped, round(f.seconds, 3), f.message)
            for f in result.files]
    typer.echo(render(cols, rows, fmt))
    if fmt == Format.table:
        _err(
            f"{len(result.files)} file(s): {result.total('accepted'):,} records stored, {result.total('rejected'):,} "
            f"rejected (see `phaselens rejects`), {result.total('skipped'):,} skipped, {len(result.failed)} failed. "
            "Next: `phaselens build`."
        )
    if result.not_data:
        _err(f"{len(result.not_data):,} code, docs or config file(s) in the folders were not read "
             f"(e.g. {result.not_data[0].name}).")
    if result.failed:
        raise typer.Exit(1)


def _lake_ingest_store(lake: str, db: Path | None) -> Path:
    """The store that `ingest --lake` loads into before writing the lake: --db, else the lake's own."""
    from phaselens.pipeline.lake import lake_has_raw_rows, lake_source, lake_store_path

    store = db if db is not None else lake_store_path(lake)
    if store is None:
        _fail(PhaselensError(f"an object-store lake ({lake}) needs the store that keeps its ledger",
                             "give --db FILE: a local store that ingest loads into before writing the lake"), 2)
    source = lake_source(lake)
    if lake_has_raw_rows(lake) and "://" not in lake and source != str(store.resolve()):
        whose = f"from the store {source}" if source else "by `phaselens export` from a store it does not name"
        _fail(PhaselensError(f"the lake {lake} was written {whose}, not from {store}; writing this store's rows to "
                             "it would mix two stores", "give the store the lake was written from with --db "
                             "(or write the lake again from this store with `phaselens export`)"), 2)
    if db is None:
        store.parent.mkdir(parents=True, exist_ok=True)
    return store


def _write_lake(con, lake: str, store: Path, result) -> None:
    from phaselens.pipeline.lake import write_lake

    try:
        how, written = write_lake(con, lake, store, [f.load_id for f in result.files if f.accepted])
    except Exception as e:  # duckdb.Error, OSError: a lake it cannot write; the store holds every row
        _err(f"Error: the rows are in {store}, but writing the lake at {lake} failed: {e}")
        _err(f"  fix: make the lake writable, then run `phaselens export --db {store} --lake {lake}` (or ingest again)")
        raise typer.Exit(1)
    if how == "full":
        _err(f"wrote the whole lake {lake} from {store}")
    else:
        parts = [f"{len(d):,} day(s) of {rel}" for rel, d in written.items() if d]
        _err(f"wrote {', '.join(parts) or 'no day partition'} to the lake {lake} (the ledger is in {store})")


@app.command()
def rejects(
    db: DbOpt = None,
    reason: Annotated[Optional[str], typer.Option(help="Only this reason, e.g. malformed_json. Default: every reason.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many rows (0 = all).")] = 50,
    summary: Annotated[bool, typer.Option(help="Counts per source and reason instead of rows.")] = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Show quarantined records with their reason and where they came from.

    Example: phaselens rejects --summary
    """
    try:
        con = _open(db, read_only=True)
    except PhaselensError as e:
        _fail(e)
    if summary:
        cols, rows = query(con, "SELECT source, reason, count(*) AS records FROM rejects GROUP BY ALL ORDER BY records DESC")
    else:
        sql = "SELECT source, reason, locator, detail, raw, load_id FROM rejects WHERE ($r IS NULL OR reason = $r) ORDER BY rejected_at, locator"
        if limit:
            sql += f" LIMIT {int(limit)}"
        cols, rows = query(con, sql, {"r": reason})
    typer.echo(render(cols, rows, fmt))


@app.command()
def loads(
    db: DbOpt = None, limit: Annotated[int, typer.Option(help="Most recent N files.")] = 50, fmt: FormatOpt = Format.table,
    gaps: Annotated[bool, typer.Option("--gaps", help="Per source: what its instrumentation does not record. Default: off (the ledger of files).")] = False,
) -> None:
    """Show the ingest ledger: each file per run with its counts and status; --gaps: what each source loses.

    Example: phaselens loads --gaps --format json
    """
    try:
        con = _open(db, read_only=True)
    except PhaselensError as e:
        _fail(e)
    if gaps:
        from phaselens.pipeline.store import relation_exists

        if not relation_exists(con, "source_gaps"):
            from phaselens.pipeline.errors import StoreError

            _fail(StoreError("the store predates source gaps", "run `phaselens ingest` or `phaselens build` once to add them"))
        # table: the shares and the gaps in words; json/csv: every column of the view (docs/store.md)
        sql = ("SELECT source, instrumentation, calls, streamed_calls, round(cache_counts_missing_share, 3) AS no_cache, "
               "round(ttft_missing_streamed_share, 3) AS no_ttft, round(streaming_flag_missing_share, 3) AS no_stream_flag, "
               "gaps FROM source_gaps" if fmt == Format.table else "SELECT * FROM source_gaps")
        cols, rows = query(con, sql)
        typer.echo(render(cols, rows, fmt))
        return
    cols, rows = query(
        con,
        "SELECT finished_at, file, adapter, status, accepted, duplicates, rejected, skipped, message FROM loads "
        f"ORDER BY finished_at DESC LIMIT {int(limit)}",
    )
    typer.echo(render(cols, rows, fmt))


@app.command()
def build(
    db: DbOpt = None,
    config: ConfigOpt = None,
    full: Annotated[bool, typer.Option("--full", help="Re-derive every day, not only those new loads touched. Default: off (incremental).")] = False,
    engine: Annotated[str, typer.Option("--engine", help="duckdb (the store) or spark (a Parquet lake, --lake). Default: duckdb.")] = "duckdb",
    lake: LakeOpt = None,
    spark_master: Annotated[str | None, typer.Option("--spark-master", help="local[N], spark://..., yarn, or sc://host:15002. Default: [spark] master in --config, else local[2].")]
    = None,
    spark_conf: Annotated[list[str] | None, typer.Option("--spark-conf", help="A Spark setting KEY=VALUE (repeatable), over the config's [spark] conf, e.g. spark.driver.memory=8g. Default: none; in local mode the driver gets half the machine's memory, at most 16g.")]
    = None,
) -> None:
    """Derive timing, costs, workloads and rollups from what is loaded; safe to run again.

    Incremental: after an earlier build with the same configuration, only the UTC days that new loads touched
    are recomputed; a changed configuration or --full rebuilds everything. With --engine spark the whole build
    runs on Spark over a lake written by `phaselens export --lake` and its relations are written back to it.

    Example: phaselens build --config phaselens.toml
    Example: phaselens build --engine spark --lake lake/ --spark-master local[2] --config phaselens.toml
    """
    from phaselens.pipeline.build import build as run_build
    from phaselens.pipeline.publish import build_days, store_basis

    if engine not in ("duckdb", "spark"):
        _fail(PhaselensError(f"unknown engine {engine!r}", "use --engine duckdb or --engine spark"), 2)
    if engine == "spark":
        _build_spark(lake, spark_master, spark_conf or [], config)
        return
    try:
        cfg = _config(config)
        con = _open(db)
        since = store_basis(con)
        result = run_build(con, cfg, full, on_stage=lambda name, s: _err(f"  {name:16} {s:6.2f} s"))
        _publish(con, db, cfg, days=build_days(result), since=since)
    except PhaselensError as e:
        _fail(e)
    what = (f"full build ({result.reason})" if result.full
            else f"incremental build: {len(result.days_rebuilt)} day(s) recomputed from {result.new_loads} new load(s)")
    _err(what)
    _err(
        f"built {result.calls:,} calls into {result.workloads} workloads "
        f"({result.estimated_calls:,} with estimated timing, {result.unpriced_calls:,} unpriced)."
    )


def _build_spark(lake: str | None, master: str | None, conf_args: list[str], config: Path | None) -> None:
    if not lake:
        _fail(PhaselensError("--engine spark needs --lake", "write one with `phaselens export --db FILE --lake DIR`"), 2)
    from phaselens.models.spark import parse_conf_args
    from phaselens.pipeline.engines.spark import build_spark, spark_session
    from phaselens.pipeline.lake import open_lake
    from phaselens.pipeline.publish import publish

    try:
        cfg = _config(config)
        conf = {**cfg.spark.conf, **parse_conf_args(conf_args)}
    except ValueError as e:
        _fail(PhaselensError(str(e), "give each Spark setting as --spark-conf spark.KEY=VALUE"), 2)
    except PhaselensError as e:
        _fail(e)
    master = master or cfg.spark.master
    try:
        open_lake(lake)[0].close()  # fails early and clearly when there is no lake
        session = spark_session(master, conf=conf)
        result = build_spark(session, lake, cfg, on_stage=lambda name, s: _err(f"  {name:16} {s:6.2f} s"))
        con, path = open_lake(lake)
        publish(con, path, cfg)
    except PhaselensError as e:
        _fail(e)
    _err(f"full build on Spark ({master}), written to {lake}")
    _err(
        f"built {result.calls:,} calls into {result.workloads} workloads "
        f"({result.estimated_calls:,} with estimated timing, {result.unpriced_calls:,} unpriced)."
    )


@app.command()
def export(
    db: DbOpt = None,
    lake: Annotated[str, typer.Option("--lake", help="Lake root: a folder, or an object-store URI (s3://...).")] = ...,
) -> None:
    """Write the store's raw relations as a Parquet lake partitioned by UTC day (for `--engine spark`).

    Example: phaselens export --db phaselens.duckdb --lake lake/
    """
    from phaselens.pipeline.lake import export_lake

    try:
        con = _open(db, read_only=True)
    except PhaselensError as e:
        _fail(e)
    try:
        counts = export_lake(con, lake, store=resolve_db(db))
    except Exception as e:  # duckdb.Error: a path it cannot write, a missing object-store extension
        _err(f"Error: cannot write the lake at {lake}: {e}")
        _err("  fix: give a writable folder, or for an object-store URI load DuckDB's httpfs extension and credentials")
        raise typer.Exit(1)
    _err("exported " + ", ".join(f"{n:,} {rel}" for rel, n in counts.items()) + f" to {lake}")


def _need_build(con) -> None:
    from phaselens.pipeline.errors import StoreError

    from phaselens.pipeline.store import relation_exists

    if not relation_exists(con, "workloads"):
        raise StoreError("the store has not been built yet", "run `phaselens build` after `phaselens ingest`")


@app.command()
def workloads(
    db: DbOpt = None, lake: LakeOpt = None, since: SinceOpt = None, until: UntilOpt = None, fmt: FormatOpt = Format.table,
    all_columns: Annotated[bool, typer.Option("--all", help="Every column of the view (json/csv always have all). Default: off (the headline columns).")] = False,
) -> None:
    """Per workload: the phase that dominates time and money, its shape, and a diagnosis and lever for each.

    Cost is cost_usd_best: invoice-true where billed, else estimated (cost_usd is the estimate); percentiles come
    from a log-histogram sketch within 2.9% of exact, the same numbers the dashboard and reports show.

    Example: phaselens workloads --since 2026-11-16 --format json
    """
    try:
        con = _open(db, read_only=True, lake=lake)
        _need_build(con)
    except PhaselensError as e:
        _fail(e)
    from phaselens.pipeline.read_model import workload_columns, workload_rows

    cols = workload_columns(con)
    rows = [tuple(r[c] for c in cols) for r in workload_rows(con, since, until)]
    if fmt == Format.table and not all_columns:
        keep = ["workload", "calls", "ttft_p50_s", "itl_p50_s", "prefill_time_share", "prefill_cost_share",
                "cost_usd_best", "dominant_latency_phase", "dominant_cost_phase", "shape_class", "latency_lever", "cost_lever"]
        idx = [cols.index(c) for c in keep]
        cols, rows = keep, [tuple(r[i] for i in idx) for r in rows]
    typer.echo(render(cols, rows, fmt, max_width=90))


@app.command()
def explain(
    workload: Annotated[str, typer.Argument(help="Workload name, as `phaselens workloads` lists it.")],
    db: DbOpt = None, since: SinceOpt = None, until: UntilOpt = None,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="table: sentences; json: the figures and sentences.")]
    = Format.table,
) -> None:
    """Say in plain words where a workload's time and money go, why, and what would fix it.

    Example: phaselens explain agent --format json
    """
    from phaselens.pipeline.explain import explain as run_explain
    from phaselens.pipeline.explain import explain_data

    try:
        con = _open(db, read_only=True)
        _need_build(con)
        if fmt == Format.json:
            import json

            from phaselens.output import plain_tree

            typer.echo(json.dumps(plain_tree(explain_data(con, workload, since, until)), indent=2))
        else:
            typer.echo(run_explain(con, workload, since, until))
    except PhaselensError as e:
        _fail(e)


@app.command()
def whatif(
    workload: Annotated[str, typer.Argument(help="Workload name, as `phaselens workloads` lists it.")],
    to: Annotated[list[str], typer.Option("--to", help="Target PROVIDER/MODEL; repeat for several.")],
    db: DbOpt = None, config: ConfigOpt = None,
    period: Annotated[Optional[str], typer.Option(
        help="YYYY-MM-DD, YYYY-Www, YYYY-MM, latest_day ...; default: every call of the store.")] = None,
    since: SinceOpt = None, until: UntilOpt = None, fmt: FormatOpt = Format.table,
) -> None:
    """Replay a workload on other models: predicted TTFT, ITL, cost and goodput beside what it got.

    Example: phaselens whatif tab_completion --to openai/gpt-4o --to azure.ai.openai/gpt-4.1-mini --format json
    """
    from phaselens.pipeline.whatif import Target, result_rows
    from phaselens.pipeline.whatif import whatif as run_whatif

    try:
        targets = [Target.parse(t) for t in to]
        cfg = _config(config)
        con = _open(db, read_only=True)
        _need_build(con)
        if period is not None:
            from phaselens.pipeline.report import report_period

            p = report_period(con, period, since, until)
            since, until = p.start, p.end
        result = run_whatif(con, workload, targets, since, until, settings=cfg.whatif,
                            slos=[(s.workload, s.metric, s.max_s) for s in cfg.slos], pricebook=cfg.pricebook)
    except PhaselensError as e:
        _fail(e)
    if fmt == Format.json:
        import json

        from phaselens.output import plain_tree

        typer.echo(json.dumps(plain_tree(result), indent=2))
        return
    cols, rows = result_rows(result)
    typer.echo(render(cols, rows, fmt, max_width=120))
    if fmt == Format.table:
        _err(f"{result['calls']:,} calls of {workload} over {result['days']} day(s); "
             "`--format json` gives each prediction's basis, caching and tokenizer assumptions.")


@app.command()
def reconcile(
    db: DbOpt = None, since: SinceOpt = None, until: UntilOpt = None, fmt: FormatOpt = Format.table,
    all_columns: Annotated[bool, typer.Option("--all", help="Every column (json/csv always have all). Default: off (the headline columns).")] = False,
    fail_on_gap: Annotated[bool, typer.Option(help="Exit 1 when any cell is not ok (for scheduled checks).")] = False,
) -> None:
    """Billed vs trace-estimated tokens and cost per provider, model, day and token type, with the cause of each gap.

    Example: phaselens reconcile --since 2026-11-16 --format json
    """
    from phaselens.pipeline.reconcile import TABLE_COLUMNS, reconcile_rows

    try:
        con = _open(db, read_only=True)
        cols, rows = reconcile_rows(con, since, until)
    except PhaselensError as e:
        _fail(e)
    if not rows:
        _err("No billing lines in this period: load a provider export with `phaselens ingest`, then `phaselens build`.")
    gaps = [r for r in rows if r[cols.index("cause")] != "ok"]
    if fmt == Format.table and not all_columns:
        idx = [cols.index(c) for c in TABLE_COLUMNS]
        cols, rows = list(TABLE_COLUMNS), [tuple(r[i] for i in idx) for r in rows]
    typer.echo(render(cols, rows, fmt))
    if fmt == Format.table and rows:
        _err(f"{len(gaps)} of {len(rows)} cells have a gap; `--format json` gives each its explanation.")
    if fail_on_gap and gaps:
        raise typer.Exit(1)


@app.command()
def collect(
    db: DbOpt = None,
    host: Annotated[str, typer.Option(help="Address to bind; 127.0.0.1 keeps it on this machine.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (4318 is the OTLP/HTTP default).")] = 4318,
    token: Annotated[
        Optional[str], typer.Option(envvar="PHASELENS_COLLECT_TOKEN", show_envvar=True, help="Require `Authorization: Bearer TOKEN`. Default: none (no token asked; loopback only by default).")
    ] = None,
    max_body_bytes: Annotated[int, typer.Option(help="Largest request body, before and after decompression.")] = 20 * 1024 * 1024,
    flush_seconds: Annotated[float, typer.Option(help="Load spooled spans into the store this often.")] = 2.0,
    flush_spans: Annotated[int, typer.Option(help="...or as soon as this many spans are spooled.")] = 5000,
    spool_dir: Annotated[Optional[Path], typer.Option(help="Durable spool for acknowledged spans; default <db>.spool.")] = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "info",
) -> None:
    """Receive OTLP/HTTP traces on /v1/traces (protobuf or JSON, gzip) and feed them to the store in small batches.

    Example: phaselens collect --db live.duckdb --port 4318 --token s3cret
    """
    import logging

    from phaselens.pipeline.receiver import serve

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    try:
        serve(resolve_db(db), host, port, token, max_body_bytes, flush_seconds, flush_spans, spool_dir)
    except PhaselensError as e:
        _fail(e)


@app.command()
def run(
    config: Annotated[Path, typer.Option("--config", help="Configuration file with a run section: db, sources, reports.")],
) -> None:
    """One incremental batch for cron: ingest new or changed files, build, publish, write the reports.

    Exit codes: 0 ok, 1 some file failed, 2 configuration error, 3 another run holds the lock, 4 build or report failed.
    Example: phaselens run --config /etc/phaselens/phaselens.toml
    """
    from phaselens.pipeline.run import run_batch

    try:
        result = run_batch(config)
    except PhaselensError as e:
        _fail(e, 2)
    typer.echo(result.summary, err=result.exit_code >= 2)
    raise typer.Exit(result.exit_code)


@app.command()
def report(
    db: DbOpt = None,
    lake: LakeOpt = None,
    period: Annotated[
        Optional[str], typer.Option(help="previous_day, previous_week, last_7d, latest_day, 2026-11-16, 2026-W47, 2026-11, "
                                         "START..END. Default: the last complete UTC day (the last day the calls "
                                         "run past), never a partial last day.")
    ] = None,
    since: SinceOpt = None, until: UntilOpt = None,
    out: Annotated[Optional[Path], typer.Option(help="Folder for the report; default reports/<period>.")] = None,
    formats: Annotated[str, typer.Option("--format", help="Comma-separated: html, md, json, csv, parquet.")]
    = "html,md,json,csv,parquet",
) -> None:
    """Write the period's report: per workload the dominant phase and its lever, the changes, then the detail.

    Example: phaselens report --period 2026-11-16 --out reports/ --format html,md
    """
    from phaselens.pipeline.report import report_period, write_report

    try:
        con = _open(db, read_only=True, lake=lake)
        _need_build(con)
        p = report_period(con, period, since, until)
        if period is None and since is None and until is None:
            _err(f"period: {p.label} (the last complete UTC day in the store; --period chooses another)")
        files = write_report(con, p.start, p.end, out or Path("reports") / p.label, formats)
    except PhaselensError as e:
        _fail(e)
    for f in files:
        typer.echo(str(f))


def _exec(cmd: list[str], open_browser_at: str | None = None) -> None:
    """Become the dashboard server, so a signal to this process (Ctrl+C, SIGTERM) reaches it."""
    if open_browser_at:
        # The server always runs headless (otherwise Streamlit's first-run e-mail prompt blocks on stdin);
        # a short-lived helper opens the browser once the server is up.
        import subprocess

        subprocess.Popen([sys.executable, "-c", f"import time, webbrowser; time.sleep(3); webbrowser.open({open_browser_at!r})"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(cmd[0], cmd)


def _streamlit_cmd(db: Path, port: int) -> list[str]:
    script = Path(__file__).resolve().parent.parent / "app" / "streamlit_app.py"
    if not script.exists():  # installed without the source tree
        from importlib import resources

        script = Path(str(resources.files("phaselens.app").joinpath("streamlit_app.py")))
    # The app reads only published snapshots (pipeline/publish.py), so it never locks the store a batch run writes.
    return [
        sys.executable, "-m", "streamlit", "run", str(script),
        "--server.port", str(port), "--server.address", "localhost", "--server.headless", "true",
        "--server.fileWatcherType", "none", "--client.toolbarMode", "minimal",
        "--browser.gatherUsageStats", "false", "--", "--db", str(db),
    ]


@app.command()
def dashboard(
    db: DbOpt = None,
    lake: LakeOpt = None,
    port: Annotated[int, typer.Option(help="Port to serve on (localhost).")] = 8501,
    headless: Annotated[bool, typer.Option(help="Do not open a browser.")] = False,
) -> None:
    """Start the Streamlit dashboard on a store.

    Example: phaselens dashboard --db demo.duckdb --port 8501 --headless
    Example: phaselens dashboard --lake lake/ --headless   (after `phaselens build --engine spark --lake lake/`)
    """
    if lake is not None:
        from phaselens.pipeline.lake import catalog_db_path

        path = catalog_db_path(lake)  # `build --engine spark` published the snapshot next to the lake's views
    else:
        path = resolve_db(db)
    if not path.exists():
        _fail(PhaselensError(f"no store at {path}", "run `phaselens demo` or `phaselens ingest PATH` first"))
    _err(f"dashboard on http://localhost:{port} (store {path}); Ctrl+C to stop")
    _exec(_streamlit_cmd(path, port), None if headless else f"http://localhost:{port}")


@app.command()
def demo(
    db: Annotated[Path, typer.Option("--db", help="Store file for the demo.")] = Path("phaselens-demo.duckdb"),
    port: Annotated[int, typer.Option(help="Dashboard port.")] = 8501,
    headless: Annotated[bool, typer.Option(help="Do not open a browser.")] = False,
    no_dashboard: Annotated[bool, typer.Option("--no-dashboard", help="Ingest and build only. Default: off (the dashboard opens).")] = False,
) -> None:
    """Ingest the bundled sample day, build the store and open the dashboard.

    Example: phaselens demo --headless --port 8501
    """
    from phaselens.pipeline.build import build as run_build
    from phaselens.pipeline.load import ingest as run_ingest

    sample_logs = _sample_logs()
    if not (sample_logs / "traces").is_dir():
        _fail(PhaselensError(f"sample data not found at {sample_logs}", "reinstall phaselens, or run the demo from a checkout"))
    try:
        con = _open(db)
        example = sample_logs / "phaselens.toml"
        cfg = load_config(example if example.exists() else None)
        data = [d for d in (sample_logs / "traces", sample_logs / "billing") if d.is_dir()]
        result = run_ingest(
            con, data, on_file=lambda r, i, n: _err(f"[{i}/{n}] {r.status:9} {r.file} ({r.accepted:,} stored)")
        )
        b = run_build(con, cfg)
        _publish(con, db, cfg)
        con.close()
    except PhaselensError as e:
        _fail(e)
    _err(f"demo store {db}: {result.total('accepted'):,} records from {len(result.files)} files; {b.workloads} workloads.")
    if not no_dashboard:
        _err(f"dashboard on http://localhost:{port}; Ctrl+C to stop")
        _exec(_streamlit_cmd(db, port), None if headless else f"http://localhost:{port}")


@app.command()
def publish(db: DbOpt = None, config: ConfigOpt = None) -> None:
    """Publish the dashboard's snapshot of the store by hand (ingest, build and run publish by themselves).

    Opens the store read-only and prints the snapshot's path.
    Example: phaselens publish --db phaselens.duckdb
    """
    from phaselens.pipeline.publish import publish_store

    try:
        path = publish_store(resolve_db(db), _config(config))
    except PhaselensError as e:
        _fail(e)
    typer.echo(str(path))


def main() -> None:
    try:
        app()
    except PhaselensError as e:
        _err(f"Error: {e.message}")
        if e.fix:
            _err(f"  fix: {e.fix}")
        sys.exit(1)
