"""Scheduled batch runs: the `[run]` section of the configuration file, and the report periods it names.

A period is a half-open UTC interval [start, end) of call start times. `resolve_period` turns a spec
(`previous_day`, `last_7d`, `2026-11-16`, `2026-W47`, `2026-11`, `2026-11-10..2026-11-17`, ...) into one;
PERIOD_HELP lists them all. Relative paths in RunSettings are taken from the configuration file's folder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ReportFormat = Literal["html", "md", "json", "csv", "parquet"]
REPORT_FORMATS: tuple[str, ...] = ("html", "md", "json", "csv", "parquet")

PERIOD_HELP = (
    "previous_day (alias yesterday), previous_week (ISO, Monday to Monday), previous_month, "
    "last_<N>h / last_<N>d (ending at the current whole hour), latest_day / latest_week (the last UTC day or "
    "ISO week holding a call), latest_complete_day (the last UTC day the calls run past; the default of "
    "`phaselens report`), a UTC day 2026-11-16, an ISO week 2026-W47, a month 2026-11, or START..END "
    "(dates or ISO times, END exclusive)"
)

_DAY = timedelta(days=1)
_LAST = re.compile(r"^last_(\d+)([hd])$")
_WEEK = re.compile(r"^(\d{4})-w(\d{2})$")
_MONTH = re.compile(r"^(\d{4})-(\d{2})$")


@dataclass(frozen=True)
class Period:
    """A half-open UTC interval [start, end) of call start times, with a label fit for a folder name."""

    start: datetime
    end: datetime

    @property
    def label(self) -> str:
        """`2026-11-16` (a day), `2026-W47` (an ISO week), `2026-11` (a month), else `<start>_to_<end>`."""
        s, e = self.start, self.end
        midnight = s == _floor_day(s) and e == _floor_day(e)
        if midnight and e - s == _DAY:
            return s.date().isoformat()
        if midnight and e - s == 7 * _DAY and s.weekday() == 0:
            year, week, _ = s.date().isocalendar()
            return f"{year}-W{week:02d}"
        if midnight and s.day == 1 and e == _next_month(s):
            return f"{s.year}-{s.month:02d}"
        if midnight:
            return f"{s.date().isoformat()}_to_{(e - _DAY).date().isoformat()}"
        return f"{s:%Y-%m-%dT%H-%M}_to_{e:%Y-%m-%dT%H-%M}"

    @property
    def hours(self) -> float:
        """Length of the period in hours."""
        return (self.end - self.start).total_seconds() / 3600

    def previous(self) -> Period:
        """The period of the same length that ends where this one starts (a whole month for a month)."""
        if self.start.day == 1 and self.end == _next_month(self.start) and self.start == _floor_day(self.start):
            first = (self.start - _DAY).replace(day=1)
            return Period(first, self.start)
        return Period(self.start - (self.end - self.start), self.start)

    def describe(self) -> str:
        """`2026-11-16 00:00 to 2026-11-17 00:00 UTC`."""
        return f"{self.start:%Y-%m-%d %H:%M} to {self.end:%Y-%m-%d %H:%M} UTC"


def _floor_day(t: datetime) -> datetime:
    return datetime(t.year, t.month, t.day)


def _next_month(t: datetime) -> datetime:
    return datetime(t.year + (t.month == 12), t.month % 12 + 1, 1)


def _when(text: str) -> datetime:
    """A date or ISO time as naive UTC (an offset, or Z, is converted)."""
    value = datetime.fromisoformat(text.strip().upper().replace("Z", "+00:00"))
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo is not None else value


def resolve_period(spec: str, now: datetime, latest: datetime | None = None, first: datetime | None = None) -> Period:
    """The Period a spec names, relative to `now` (naive UTC) or, for `latest_*`, to the last call time `latest`
    (`latest_complete_day`: the day before the last call's day, when calls began before that day; else the only
    day there is)."""
    key = spec.strip().lower()
    if not key[:1].isdigit():
        key = key.replace("-", "_")  # last-7d and last_7d alike
    today = _floor_day(now)
    hour = now.replace(minute=0, second=0, microsecond=0)
    if key in ("previous_day", "yesterday"):
        return Period(today - _DAY, today)
    if key == "previous_week":
        monday = today - timedelta(days=today.weekday())
        return Period(monday - 7 * _DAY, monday)
    if key == "previous_month":
        first = today.replace(day=1)
        return Period((first - _DAY).replace(day=1), first)
    if key == "latest_complete_day":
        if latest is None:
            raise ValueError(f"{spec!r} needs calls in the store, and there are none")
        day = _floor_day(latest)
        if first is not None and first < day:
            return Period(day - _DAY, day)
        return Period(day, day + _DAY)  # one day of calls: the day so far
    if key in ("latest_day", "latest_week"):
        if latest is None:
            raise ValueError(f"{spec!r} needs calls in the store, and there are none")
        day = _floor_day(latest)
        if key == "latest_day":
            return Period(day, day + _DAY)
        monday = day - timedelta(days=day.weekday())
        return Period(monday, monday + 7 * _DAY)
    if m := _LAST.match(key):
        n = int(m.group(1))
        if n <= 0:
            raise ValueError(f"{spec!r}: the count must be positive")
        return Period(hour - (timedelta(hours=n) if m.group(2) == "h" else n * _DAY), hour)
    if not key[:1].isdigit():
        raise ValueError(f"{spec!r} is not a period; use {PERIOD_HELP}")
    try:
        return _explicit(spec, key)
    except ValueError as e:
        if repr(spec) in str(e):
            raise
        raise ValueError(f"{spec!r} is not a period ({e}); use {PERIOD_HELP}") from None


def _explicit(spec: str, key: str) -> Period:
    """An ISO week, a month, a START..END range or a single UTC day."""
    if m := _WEEK.match(key):
        monday = datetime.combine(date.fromisocalendar(int(m.group(1)), int(m.group(2)), 1), datetime.min.time())
        return Period(monday, monday + 7 * _DAY)
    if m := _MONTH.match(key):
        first = datetime(int(m.group(1)), int(m.group(2)), 1)
        return Period(first, _next_month(first))
    if ".." in key:
        a, _, b = key.partition("..")
        start, end = _when(a), _when(b)
        if end <= start:
            raise ValueError(f"{spec!r}: the end must be after the start")
        return Period(start, end)
    day = _when(key)
    if day != _floor_day(day):
        raise ValueError(f"{spec!r}: a single time is not a period; give a day or START..END")
    return Period(day, day + _DAY)


def check_period_spec(spec: str) -> str:
    """`spec` unchanged when it names a period; raises ValueError with the accepted forms otherwise."""
    resolve_period(spec, datetime(2000, 1, 3), latest=datetime(2000, 1, 1))
    return spec


class RunSettings(BaseModel):
    """`[run]`: what `phaselens run` ingests, where the store, report, log and lock live, and which period."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    db: Path = Field(description="Store file the run writes.")
    sources: list[str] = Field(min_length=1, description="Folders (read recursively), files or globs of traces and bills.")
    report_dir: Path = Field(default=Path("reports"), description="Reports go to <report_dir>/<period label>/.")
    report_formats: list[ReportFormat] = Field(default_factory=lambda: list(REPORT_FORMATS))
    report_period: str = Field(default="previous_day", description=PERIOD_HELP)
    log_file: Path | None = Field(default=None, description="Details of every run, appended; default <db>.run.log.")
    lock_file: Path | None = Field(default=None, description="Held while a run works; default <db>.lock.")
    trust_mtime: bool = Field(
        default=True, description="Skip, without reading, a file whose path, size and modification time were loaded before."
    )
    publish: bool = Field(default=True, description="Publish the dashboard snapshot after each build.")
    fx: dict[str, Decimal] = Field(default_factory=dict, description="USD per unit of a billing currency, e.g. EUR = 1.08.")
    engine: Literal["duckdb", "spark"] = Field(
        default="duckdb", description="Where the build runs: duckdb (the store) or spark (the lake, with [spark]).")
    lake: str | None = Field(
        default=None, description="With engine = spark: the Parquet lake the run writes the loaded days to and builds.")

    @model_validator(mode="after")
    def _spark_needs_a_lake(self) -> RunSettings:
        if self.engine == "spark" and not self.lake:
            raise ValueError("engine = \"spark\" needs lake = \"DIR\" (the Parquet lake the Spark build reads)")
        return self

    @field_validator("report_period")
    @classmethod
    def _period(cls, v: str) -> str:
        return check_period_spec(v)

    @field_validator("report_formats")
    @classmethod
    def _formats(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError(f"give at least one of {', '.join(REPORT_FORMATS)}")
        return [f for f in REPORT_FORMATS if f in v]

    @field_validator("fx")
    @classmethod
    def _currencies(cls, v: dict[str, Decimal]) -> dict[str, Decimal]:
        return {k.strip().upper(): rate for k, rate in v.items()}

    def resolved(self, base: Path) -> RunSettings:
        """These settings with every relative path (and glob) taken from `base`, the configuration file's folder."""

        def rel(p: Path | None) -> Path | None:
            return None if p is None else (p if p.is_absolute() else base / p)

        db = rel(self.db)
        return self.model_copy(update={
            "db": db,
            "sources": [s if Path(s).is_absolute() else str(base / s) for s in self.sources],
            "report_dir": rel(self.report_dir),
            "log_file": rel(self.log_file) or Path(f"{db}.run.log"),
            "lock_file": rel(self.lock_file) or Path(f"{db}.lock"),
            "lake": None if self.lake is None else (self.lake if "://" in self.lake else str(rel(Path(self.lake)))),
        })
