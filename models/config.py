"""The phaselens configuration file (TOML or YAML): price book, workload rules, shape thresholds, SLOs.

Every section is optional; an absent file means the defaults. Documented in docs/config.md with an
example in docs/examples/phaselens.toml.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .caching import CachingSettings
from .latency import LatencySettings
from .pricebook import PriceBook, load_validated
from .reconcile import ReconcileSettings
from .run import RunSettings
from .spark import SparkSettings
from .whatif import WhatIfSettings


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WorkloadRule(_Section):
    """Calls matching every condition given (regular expressions, searched) belong to workload `name`."""

    name: str = Field(description="Workload name assigned to matching calls.")
    feature: str | None = Field(default=None, description="Pattern for the feature/workflow tag on the call.")
    service: str | None = Field(default=None, description="Pattern for `service.name`.")
    provider: str | None = None
    model: str | None = Field(default=None, description="Pattern for the normalised model name.")
    operation: str | None = None
    attributes: dict[str, str] = Field(
        default_factory=dict, description="Attribute key -> pattern, e.g. {\"app.tenant\" = \"^acme$\"}."
    )

    @model_validator(mode="after")
    def _check(self) -> WorkloadRule:
        patterns = [self.feature, self.service, self.provider, self.model, self.operation, *self.attributes.values()]
        if not any(p is not None for p in patterns):
            raise ValueError(f"workload rule {self.name!r} has no condition; add feature, service, model or attributes")
        for p in patterns:
            if p is not None:
                try:
                    re.compile(p)
                except re.error as e:
                    raise ValueError(f"workload rule {self.name!r}: {p!r} is not a valid pattern ({e})") from e
        return self


class Shapes(_Section):
    """Token thresholds of the workload shape classes (median tokens per call)."""

    short_prompt_max_tokens: int = Field(default=8_000, gt=0, description="Below: a short prompt.")
    large_context_min_tokens: int = Field(default=32_000, gt=0, description="At or above: a large context.")
    short_output_max_tokens: int = Field(default=100, gt=0, description="Below: a short output.")
    long_output_min_tokens: int = Field(default=300, gt=0, description="At or above: a long output.")

    @model_validator(mode="after")
    def _ordered(self) -> Shapes:
        if self.short_prompt_max_tokens > self.large_context_min_tokens:
            raise ValueError("short_prompt_max_tokens must not exceed large_context_min_tokens")
        if self.short_output_max_tokens > self.long_output_min_tokens:
            raise ValueError("short_output_max_tokens must not exceed long_output_min_tokens")
        return self


class Diagnosis(_Section):
    """Thresholds the diagnosis uses to name a cause."""

    queue_share_min: float = Field(default=0.25, ge=0, le=1, description="Queue time share of TTFT that counts as queueing.")
    cold_cache_reuse_min: float = Field(
        default=0.3, ge=0, le=1, description="Reusable input share (caching lever) above which a cold cache is named."
    )
    cache_write_share_min: float = Field(
        default=0.3, ge=0, le=1,
        description="Share of input spend on cache writes above which unread cache writes are named (when reads < writes).",
    )
    contention_ratio_min: float = Field(
        default=1.3, gt=1, description="ITL at high vs low concurrency above which batch contention is named."
    )
    slow_itl_s: float = Field(default=0.030, gt=0, description="ITL p50 above which the model is called slow.")


class Slo(_Section):
    """A latency objective for one workload, shown with its breaches on the Latency page."""

    workload: str
    metric: Literal["ttft_p95_s", "ttft_p50_s", "itl_p95_s", "itl_p50_s", "e2e_p95_s", "e2e_p50_s"]
    max_s: float = Field(gt=0)


class Config(PriceBook):
    """The whole configuration file. `prices` and `deployments` are the price book (docs/pricebook.md)."""

    workloads: list[WorkloadRule] = Field(default_factory=list, description="Workload rules, first match wins.")
    shapes: Shapes = Field(default_factory=Shapes)
    diagnosis: Diagnosis = Field(default_factory=Diagnosis)
    slos: list[Slo] = Field(default_factory=list)
    latency: LatencySettings = Field(default_factory=LatencySettings, description="docs/latency.md")
    caching: CachingSettings = Field(default_factory=CachingSettings, description="docs/caching.md")
    reconcile: ReconcileSettings = Field(default_factory=ReconcileSettings, description="docs/reconciliation.md")
    run: RunSettings | None = Field(default=None, description="`phaselens run` (docs/operations.md)")
    whatif: WhatIfSettings = Field(default_factory=WhatIfSettings, description="docs/whatif.md")
    spark: SparkSettings = Field(default_factory=SparkSettings, description="`build --engine spark` (docs/scale-out.md)")

    @property
    def pricebook(self) -> PriceBook:
        return PriceBook(prices=self.prices, deployments=self.deployments)


def load_config(path: Path | str | None) -> Config:
    """The configuration in `path` (TOML or YAML), or the defaults when `path` is None."""
    if path is None:
        return Config()
    return load_validated(path, Config, "configuration", "docs/config.md")
