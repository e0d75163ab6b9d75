"""Settings of the caching lever: which cache lifetimes to measure, how far a cache is shared, and the
smallest prefix a cache stores. See docs/caching.md for the method and how to read its tables.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

UNLIMITED = None
"""A lifetime of `None` (written `0` in a configuration file) means the cache never expires."""


class CachingSettings(BaseModel):
    """How prefix reuse is measured and priced (`[caching]` in the configuration file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lifetimes_s: list[int | None] = Field(
        default=[300, 3600],
        min_length=1,
        description="Cache lifetimes to measure, in seconds (0 or None = unlimited). The first is the headline "
        "one that the workload diagnosis and `caching_by_workload` use; each lifetime restarts on every use.",
    )
    scope: Literal["model", "workload"] = Field(
        default="model",
        description="Which earlier calls can warm the cache of a call: `model` = any call of the same provider "
        "and model (a provider's cache is per model); `workload` = only those of the same workload too.",
    )
    min_block_tokens: int = Field(
        default=1024,
        ge=0,
        description="Shortest prefix, in tokens, a cache stores: a shorter reused prefix counts as no reuse "
        "(OpenAI and Anthropic cache prompts from 1,024 tokens). 0 counts every reused block.",
    )

    @field_validator("lifetimes_s")
    @classmethod
    def _lifetimes(cls, values: list[int | None]) -> list[int | None]:
        out: list[int | None] = []
        for v in values:
            if v is not None and v < 0:
                raise ValueError(f"a cache lifetime cannot be negative ({v} s); use 0 for unlimited")
            v = UNLIMITED if v == 0 else v
            if v in out:
                raise ValueError(f"the lifetime {v if v is not None else 'unlimited'} is given twice; keep one")
            out.append(v)
        return out

    @property
    def headline_lifetime_s(self) -> int | None:
        """The lifetime (seconds; None = unlimited) the diagnosis and `caching_by_workload` report."""
        return self.lifetimes_s[0]
