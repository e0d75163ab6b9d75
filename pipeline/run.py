"""`phaselens run --config FILE`: one incremental batch, safe to start from cron or a systemd timer.

Steps, under an exclusive lock (`fcntl.flock` on `<db>.lock`, non-blocking, released by the OS even
when the process dies): expand the configured sources; skip, unread, each file whose path, size and
modification time were loaded before (`run_files`); load the rest (the loader skips content it has
already stored); build and publish when anything changed; write the report of the configured period to
`<report_dir>/<period label>/`. One line on stdout, details appended to the log file.

Exit codes (EXIT_CODES): 0 ok, 1 some file failed (the rest is built and reported), 2 configuration
error, 3 another run (or process) holds the lock or the store, 4 the build, publish or report failed.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import logging
import os
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from phaselens.models.config import Config
from phaselens.models.pricebook import load_validated
from phaselens.models.run import RunSettings, resolve_period

from . import telemetry
from .errors import ConfigError, PhaselensError, StoreError
from .load import FileResult, expand_paths
from .store import relation_exists

EXIT_OK, EXIT_FILES_FAILED, EXIT_CONFIG, EXIT_LOCKED, EXIT_FAILED = 0, 1, 2, 3, 4
EXIT_CODES = {
    EXIT_OK: "ok", EXIT_FILES_FAILED: "some file failed; the rest was built and reported",
    EXIT_CONFIG: "configuration error", EXIT_LOCKED: "another run holds the lock, or another process the store",
    EXIT_FAILED: "the build, publish or report failed",
}
RUN_FILES_DDL = """
CREATE TABLE IF NOT EXISTS run_files (
  path VARCHAR PRIMARY KEY,   -- absolute path of a source file
  size_bytes BIGINT,
  mtime_ns BIGINT,            -- modification time when it was last loaded (or found unchanged)
  content_sha256 VARCHAR,     -- the content the ledger has for it
  checked_at TIMESTAMP
)
"""
LOG_FORMAT = "%(asctime)s %(levelname)s %(message)s"


@dataclass(frozen=True)
class RunResult:
    """What one `phaselens run` did; `summary` is the line for stdout and `exit_code` the process status."""

    exit_code: int
    summary: str
    new_files: list[str] = field(default_factory=list)
    unchanged_files: int = 0
    failed_files: list[str] = field(default_factory=list)
    calls: int = 0
    billing_lines: int = 0
    built: bool = False
    report_dir: Path | None = None
    report_files: list[Path] = field(default_factory=list)
    log_file: Path | None = None


class Locked(PhaselensError):
    """Another run holds the lock."""


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


@contextmanager
def hold_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive, non-blocking flock on `path` (pid and start time written in it); raise Locked if taken."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 200).decode(errors="replace").split()
            pid = holder[0] if holder else "unknown"
            since = " ".join(holder[1:3]) + " UTC" if len(holder) >= 3 else "an unknown time"
            raise Locked(f"another phaselens run holds {path} since {since} (pid {pid})",
                         "wait for it to finish; the lock goes away with its process") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {_now():%Y-%m-%d %H:%M:%S}\n".encode())
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def load_run_config(path: Path | str) -> tuple[Config, RunSettings]:
    """The configuration and its `[run]` settings, with relative paths taken from the file's folder."""
    path = Path(path)
    cfg = load_validated(path, Config, "configuration", "docs/operations.md")
    if cfg.run is None:
        raise ConfigError(f"{path} has no [run] section", "add [run] with db and sources (docs/operations.md)")
    return cfg, cfg.run.resolved(path.resolve().parent)


def _logger(path: Path) -> logging.Logger:
    path.parent.mkdir(parents=True, exist_ok=True)
    log = logging.getLogger(f"phaselens.run.{path}")
    log.setLevel(logging.INFO)
    log.propagate = False
    handler = logging.FileHandler(path, encoding="utf-8")
    formatter = logging.Formatter(LOG_FORMAT, "%Y-%m-%dT%H:%M:%SZ")
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    log.addHandler(handler)
    return log


def _close(log: logging.Logger) -> None:
    for h in list(log.handlers):
        h.close()
        log.removeHandler(h)


def _own_file(f: Path, settings: RunSettings, config_path: Path) -> bool:
    """The run's own files (configuration, store, its WAL and snapshots, log, lock, reports) are never sources."""
    f = f.resolve()
    db = settings.db.resolve()
    outputs = (settings.report_dir.resolve(), Path(f"{db}.published"))
    return (f in (config_path.resolve(), settings.log_file.resolve(), settings.lock_file.resolve())
            or (f.parent == db.parent and f.name.startswith(db.name)) or any(f.is_relative_to(o) for o in outputs))


def _source_files(settings: RunSettings, config_path: Path, log: logging.Logger) -> list[Path]:
    """Every file under the sources; a glob that matches nothing yet is fine, a missing folder is not."""
    files: list[Path] = []
    for source in settings.sources:
        try:
            files.extend(expand_paths([source]))
        except PhaselensError as e:
            if glob.has_magic(source):
                log.info("source %s matches no file yet", source)
                continue
            raise ConfigError(f"source {source}: {e.message}", "fix [run].sources in the configuration") from None
    seen: set[Path] = set()
    return [f for f in files if not (_own_file(f, settings, config_path) or f.resolve() in seen or seen.add(f.resolve()))]


def _unchanged_by_stat(con: duckdb.DuckDBPyConnection, files: list[Path]) -> set[Path]:
    """Files whose path, size and mtime match a row of `run_files` whose content the ledger holds as loaded."""
    known = {
        r[0]: (r[1], r[2]) for r in con.execute(
            "SELECT f.path, f.size_bytes, f.mtime_ns FROM run_files f WHERE EXISTS (SELECT 1 FROM raw_loads l "
            "WHERE l.content_sha256 = f.content_sha256 AND l.status IN ('loaded', 'partial', 'empty'))").fetchall()
    }
    same = set()
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue  # gone or unreadable: the loader records why
        if known.get(str(f.resolve())) == (st.st_size, st.st_mtime_ns):
            same.add(f)
    return same


def _stat(f: Path) -> os.stat_result | None:
    try:
        return f.stat()
    except OSError:
        return None


def _remember(
    con: duckdb.DuckDBPyConnection, results: list[FileResult], stats: dict[str, os.stat_result | None]
) -> None:
    """Record path, size and mtime of every file whose content the ledger now holds, for the next run's skip."""
    rows = con.execute(
        "SELECT load_id, content_sha256 FROM raw_loads WHERE load_id IN (SELECT unnest($ids))",
        {"ids": [r.load_id for r in results if r.status in ("loaded", "partial", "empty", "unchanged")]},
    ).fetchall()
    sha = dict(rows)
    for r in results:
        st = stats.get(r.file)
        if r.load_id in sha and st is not None:
            con.execute("INSERT OR REPLACE INTO run_files VALUES (?, ?, ?, ?, ?)",
                        [str(Path(r.file).resolve()), st.st_size, st.st_mtime_ns, sha[r.load_id], _now()])


def _fingerprint(con: duckdb.DuckDBPyConnection, config: Config) -> str:
    """What a build depends on: the configuration (without [run]) and the raw tables' sizes."""
    counts = con.execute(
        "SELECT (SELECT count(*) FROM raw_calls), (SELECT count(*) FROM raw_billing_lines), "
        "(SELECT count(*) FROM raw_loads WHERE status = 'loaded')").fetchall()[0]
    text = config.model_dump_json(exclude={"run"}) + repr(counts)
    return hashlib.sha256(text.encode()).hexdigest()


def _needs_build(con: duckdb.DuckDBPyConnection, fingerprint: str) -> bool:
    built = relation_exists(con, "workloads")
    row = con.execute("SELECT value FROM phaselens_meta WHERE key = 'run_build_fingerprint'").fetchall()
    return not built or not row or row[0][0] != fingerprint


def _build_and_publish(con, cfg: Config, settings: RunSettings, log: logging.Logger, since: str | None = None) -> bool:
    """Build and publish when there is something new; `since` is the store's basis before this run loaded files,
    so the snapshot computes only the days the build recomputed (pipeline/publish.py)."""
    from .build import build
    from .publish import build_days, publish, store_basis

    fingerprint = _fingerprint(con, cfg)
    if not _needs_build(con, fingerprint):
        log.info("build skipped: nothing new since the last build with this configuration")
        return False
    since = store_basis(con) if since is None else since
    b = build(con, cfg)
    log.info("built %s calls into %s workloads (%s estimated timing, %s unpriced)",
             f"{b.calls:,}", b.workloads, f"{b.estimated_calls:,}", f"{b.unpriced_calls:,}")
    if settings.publish:
        log.info("published dashboard snapshot %s",
                 publish(con, settings.db, cfg, days=build_days(b), since=since))
    # recorded last: after a failed publish the next run builds and publishes again
    con.execute("INSERT OR REPLACE INTO phaselens_meta VALUES ('run_build_fingerprint', ?)", [fingerprint])
    return True


def _check_lake(settings: RunSettings) -> None:
    """A run with `engine = "spark"` writes its store's rows to the lake: refused when another store wrote it."""
    from .lake import lake_has_raw_rows, lake_source

    lake, source = settings.lake, lake_source(settings.lake)
    if "://" not in lake and lake_has_raw_rows(lake) and source != str(settings.db.resolve()):
        whose = f"from the store {source}" if source else "by `phaselens export` from a store it does not name"
        raise ConfigError(f"the lake {lake} was written {whose}, not from {settings.db}; the run would mix two "
                          "stores", "point [run].db at the store the lake came from, or [run].lake at a new folder")


def _spark_build_and_publish(con, cfg: Config, settings: RunSettings, log: logging.Logger,
                             load_ids: list[str]) -> tuple[bool, duckdb.DuckDBPyConnection]:
    """With `engine = "spark"`: write the days the new loads touched to the lake, build the lake on Spark when
    there is something new (a full build: the incremental build is DuckDB's), publish its snapshot; returns
    (built, a DuckDB connection over the lake for the report)."""
    from .engines.spark import build_spark, spark_session
    from .lake import open_lake, write_lake
    from .publish import publish

    lake = settings.lake
    how, written = write_lake(con, lake, settings.db, load_ids)
    log.info("lake %s: %s", lake, "written whole" if how == "full" else
             ", ".join(f"{len(d)} day(s) of {rel}" for rel, d in written.items() if d) or "no day partition changed")
    fingerprint = _fingerprint(con, cfg)
    reader, path = open_lake(lake)
    built = relation_exists(reader, "workloads")
    row = reader.execute("SELECT value FROM phaselens_meta WHERE key = 'run_build_fingerprint'").fetchall()
    if built and row and row[0][0] == fingerprint:
        log.info("build skipped: nothing new since the last build with this configuration")
        return False, reader
    reader.close()
    session = spark_session(cfg.spark.master, conf=cfg.spark.conf)
    b = build_spark(session, lake, cfg, meta={"run_build_fingerprint": fingerprint})
    log.info("built %s calls into %s workloads on Spark (%s)", f"{b.calls:,}", b.workloads, cfg.spark.master)
    reader, path = open_lake(lake)
    if settings.publish:
        log.info("published dashboard snapshot %s", publish(reader, path, cfg))
    return True, reader


def _batch(cfg: Config, settings: RunSettings, config_path: Path, log: logging.Logger, now: datetime | None) -> RunResult:
    from .load import ingest
    from .publish import store_basis
    from .report import write_report
    from .store import connect

    files = _source_files(settings, config_path, log)
    if settings.engine == "spark":
        _check_lake(settings)
    con = connect(settings.db)
    reader = con
    try:
        con.execute(RUN_FILES_DDL)
        same = _unchanged_by_stat(con, files) if settings.trust_mtime else set()
        todo = [f for f in files if f not in same]
        log.info("%d source files: %d unchanged since their last load (not read), %d to check",
                 len(files), len(same), len(todo))
        stats = {str(f): _stat(f) for f in todo}  # before loading: a file that grows meanwhile is read again next run
        since = store_basis(con)

        def on_file(r: FileResult, i: int, n: int) -> None:
            counts = f"{r.accepted:,} stored, {r.duplicates:,} duplicate, {r.rejected:,} rejected, {r.skipped:,} skipped"
            message = f": {r.message}" if r.message and r.status != "unchanged" else ""
            log.log(logging.ERROR if r.failed else logging.WARNING if r.status == "partial" else logging.INFO, "[%d/%d] %s %s (%s; %s)%s", i, n, r.status, r.file,
                    r.adapter or "-", counts, message)

        result = ingest(con, todo, options={"fx": dict(settings.fx)}, on_file=on_file)
        _remember(con, result.files, stats)
        loaded = [r for r in result.files if r.status in ("loaded", "partial")]
        failed = [r.file for r in result.failed]
        base = {"new_files": [r.file for r in loaded], "unchanged_files": len(files) - len(loaded) - len(failed),
                "failed_files": failed, "calls": sum(r.accepted for r in loaded if r.kind == "calls"),
                "billing_lines": sum(r.accepted for r in loaded if r.kind == "billing"), "log_file": settings.log_file}
        try:
            if settings.engine == "spark":
                built, reader = _spark_build_and_publish(con, cfg, settings, log, [r.load_id for r in loaded])
            else:
                built, reader = _build_and_publish(con, cfg, settings, log, since), con
            last = reader.execute("SELECT max(started_at) FROM raw_calls").fetchall()[0][0]
            period = resolve_period(settings.report_period, now or _now(), latest=last)
            out = settings.report_dir / period.label
            report_files = write_report(reader, period.start, period.end, out, settings.report_formats)
            log.info("report %s (%s) in %s: %s", period.label, period.describe(), out,
                     ", ".join(p.name for p in report_files))
        except Exception as e:  # any failure here still ends the run with its own exit code and the details logged
            log.error("run failed after loading: %s\n%s", e, traceback.format_exc())
            return RunResult(EXIT_FAILED, f"phaselens run: failed after loading {len(loaded)} new files: {e}", **base)
    finally:
        if reader is not con:
            reader.close()
        con.close()
    parts = [f"{len(loaded)} new file{'' if len(loaded) == 1 else 's'}", f"{base['calls']:,} calls"]
    if base["billing_lines"]:
        parts.append(f"{base['billing_lines']:,} billing lines")
    summary = f"phaselens run: {', '.join(parts)}, {len(failed)} failed, report {out}"
    code = EXIT_FILES_FAILED if failed else EXIT_OK
    return RunResult(code, summary, built=built, report_dir=out, report_files=report_files, **base)


def run_batch(config_path: Path | str, *, now: datetime | None = None) -> RunResult:
    """One incremental batch as `[run]` in `config_path` describes; `now` (naive UTC) fixes relative periods."""
    with telemetry.operation("run", config=str(config_path)) as span:
        try:
            cfg, settings = load_run_config(config_path)
        except PhaselensError as e:
            return RunResult(EXIT_CONFIG, f"phaselens run: {e.message}" + (f" (fix: {e.fix})" if e.fix else ""))
        try:
            log = _logger(settings.log_file)
        except OSError as e:
            return RunResult(EXIT_CONFIG, f"phaselens run: cannot write the log {settings.log_file}: {e.strerror or e} "
                                          "(fix: [run].log_file)")
        started = time.perf_counter()
        try:
            with hold_lock(settings.lock_file):
                log.info("run started (pid %d, config %s, store %s)", os.getpid(), config_path, settings.db)
                result = _batch(cfg, settings, Path(config_path), log, now)
        except Locked as e:
            result = RunResult(EXIT_LOCKED, f"phaselens run: {e.message}", log_file=settings.log_file)
        except StoreError as e:
            code = EXIT_LOCKED if "in use" in e.message else EXIT_CONFIG
            result = RunResult(code, f"phaselens run: {e.message} (fix: {e.fix})", log_file=settings.log_file)
        except ConfigError as e:
            result = RunResult(EXIT_CONFIG, f"phaselens run: {e.message} (fix: {e.fix})", log_file=settings.log_file)
        except Exception as e:  # a run from cron must end with a documented code and the traceback in the log
            log.error("run failed: %s\n%s", e, traceback.format_exc())
            result = RunResult(EXIT_FAILED, f"phaselens run: failed: {e}", log_file=settings.log_file)
        level = logging.INFO if result.exit_code == EXIT_OK else logging.ERROR
        log.log(level, "%s [exit %d, %.1f s]", result.summary, result.exit_code, time.perf_counter() - started)
        _close(log)
        if span is not None:
            span.set_attributes({"exit_code": result.exit_code, "new_files": len(result.new_files)})
        return result

