"""Write the ground truth (every simulated call, untraced ones included) as CSV or Parquet, in chunks."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from phaselens.sample_logs.simcall import TRUTH_COLUMNS, SimCall

_CHUNK = 20_000  # rows per Parquet row group; columns are buffered, so memory stays small
_INT = pa.int64()
_FLOAT = pa.float64()
_STR = pa.string()
_TS = pa.timestamp("us")
TRUTH_SCHEMA = pa.schema([  # column -> Arrow type; names equal TRUTH_COLUMNS
    ("call_id", _STR), ("trace_id", _STR), ("span_id", _STR), ("service", _STR), ("span_service", _STR),
    ("workload", _STR), ("provider", _STR), ("model", _STR), ("response_model", _STR), ("operation", _STR),
    ("convention", _STR), ("traced", pa.bool_()), ("streaming", pa.bool_()), ("status", _STR),
    ("error_type", _STR), ("start_ns", _INT), ("first_token_ns", _INT), ("end_ns", _INT),
    ("uncached_input_tokens", _INT), ("cache_read_tokens", _INT), ("cache_write_tokens", _INT),
    ("output_tokens", _INT), ("reasoning_tokens", _INT), ("network_s", _FLOAT), ("queue_s", _FLOAT),
    ("prefill_s", _FLOAT), ("decode_s", _FLOAT), ("ttft_s", _FLOAT), ("itl_s", _FLOAT), ("concurrency", _INT),
    ("response_id", _STR), ("repo", _STR), ("session_id", _STR), ("step", _INT), ("tool_after", _STR),
    ("tool_s", _FLOAT), ("content_captured", pa.bool_()), ("e2e_s", _FLOAT), ("input_tokens", _INT),
    ("started_at", _TS), ("first_token_at", _TS), ("ended_at", _TS),
])
if tuple(TRUTH_SCHEMA.names) != TRUTH_COLUMNS:  # the schema must follow SimCall's fields
    raise RuntimeError("TRUTH_SCHEMA is out of date with SimCall")


def truth_row(call: SimCall) -> dict:
    """One truth row: every SimCall field plus e2e, total input tokens and UTC datetimes."""
    return {name: getattr(call, name) for name in TRUTH_COLUMNS}


class TruthWriter:
    """Append SimCalls to a `.csv` or `.parquet` file without holding them all in memory."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rows = 0
        self._parquet = self.path.suffix == ".parquet"
        if not self._parquet and self.path.suffix != ".csv":
            raise ValueError(f"truth file must end in .csv or .parquet: {self.path}")
        self._pending: dict[str, list] = {name: [] for name in TRUTH_COLUMNS}
        self._pending_rows = 0
        self._pq_writer: pq.ParquetWriter | None = None
        self._csv_file = None if self._parquet else open(self.path, "w", newline="", encoding="utf-8")
        self._csv = None if self._csv_file is None else csv.DictWriter(self._csv_file, fieldnames=TRUTH_COLUMNS)
        if self._csv is not None:
            self._csv.writeheader()

    def add(self, calls: Iterable[SimCall]) -> None:
        """Append calls (any number)."""
        for call in calls:
            row = truth_row(call)
            self.rows += 1
            if self._csv is not None:
                self._csv.writerow({k: _csv_value(v) for k, v in row.items()})
                continue
            for name, value in row.items():
                self._pending[name].append(value)
            self._pending_rows += 1
            if self._pending_rows >= _CHUNK:
                self._flush()

    def _flush(self) -> None:
        if not self._pending_rows:
            return
        table = pa.Table.from_pydict(self._pending, schema=TRUTH_SCHEMA)
        if self._pq_writer is None:
            self._pq_writer = pq.ParquetWriter(self.path, TRUTH_SCHEMA)
        self._pq_writer.write_table(table)
        self._pending = {name: [] for name in TRUTH_COLUMNS}
        self._pending_rows = 0

    def close(self) -> None:
        """Flush and close the file (an empty Parquet file still gets the schema)."""
        if self._parquet:
            self._flush()
            if self._pq_writer is None:
                self._pq_writer = pq.ParquetWriter(self.path, TRUTH_SCHEMA)
            self._pq_writer.close()
        elif self._csv_file is not None:
            self._csv_file.close()


def _csv_value(value):
    if value is None:
        return ""
    if hasattr(value, "isoformat"):
        return value.isoformat(sep=" ")
    return value


def write_truth(calls: Iterable[SimCall], path: Path) -> int:
    """Write all `calls` to `path` (.csv or .parquet); returns the number of rows."""
    writer = TruthWriter(path)
    try:
        writer.add(calls)
    finally:
        writer.close()
    return writer.rows
