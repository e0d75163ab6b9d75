"""Build engines other than the embedded DuckDB one (each imports its engine only when asked for)."""
