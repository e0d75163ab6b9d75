"""One error root; every message says what went wrong and what to do about it."""

from __future__ import annotations


class PhaselensError(Exception):
    """Base of every error phaselens reports to a user (the CLI prints it as `Error: ...`)."""

    def __init__(self, message: str, fix: str = "") -> None:
        self.message, self.fix = message, fix
        super().__init__(message + (f"\n  fix: {fix}" if fix else ""))


class StoreError(PhaselensError):
    """The DuckDB store cannot be opened, is locked, or is from an incompatible version."""


class ConfigError(PhaselensError):
    """A configuration file (price book, workload rules, run config) is invalid."""
