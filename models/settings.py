"""Runtime settings: where the store lives and how phaselens behaves."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DB = Path("phaselens.duckdb")


class Settings(BaseSettings):
    """Settings from the environment (prefix `PHASELENS_`); CLI flags override them."""

    model_config = SettingsConfigDict(env_prefix="PHASELENS_", extra="ignore")

    db: Path = Field(default=DEFAULT_DB, description="DuckDB store file (`--db`, else PHASELENS_DB).")
    config: Path | None = Field(default=None, description="Configuration file (TOML or YAML), docs/config.md.")
    memory_limit: str = Field(
        default="1GB", description="Memory DuckDB may use when loading files; it spills to disk beyond it."
    )
    build_memory_limit: str = Field(
        default="3GB",
        description="Memory DuckDB may use during `phaselens build` (large joins and windows); it spills to disk beyond it.",
    )


def resolve_db(db: Path | None) -> Path:
    """`--db` if given, else PHASELENS_DB, else ./phaselens.duckdb."""
    return db if db is not None else Settings().db
