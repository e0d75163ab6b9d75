"""The error types, defined in `phaselens.models.errors` (the bottom layer) and re-exported here for callers."""

from phaselens.models.errors import ConfigError, PhaselensError, StoreError

__all__ = ["ConfigError", "PhaselensError", "StoreError"]
