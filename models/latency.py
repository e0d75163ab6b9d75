"""Settings of the latency stage: how the per-(provider, model) latency fits are made and checked.

See docs/latency.md for how the fit works and how to read `latency_fits`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .vocabulary import normalize_model, normalize_provider


class LatencyProfile(BaseModel):
    """A per-token latency profile (Splitwise `perf_model.csv` layout) that times one provider and model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str = Field(description="Provider as in the traces (`vllm`, `azure_trace` ...); normalised.")
    model: str = Field(description="Model as in the traces; normalised like every model name.")
    csv: Path = Field(description="Profile CSV with prompt_size, prompt_time (ms), token_time (ms), ...")
    profile_model: str = Field(description="Value of the CSV's `model` column to use, e.g. `llama2-70b`.")
    hardware: str = Field(description="Value of the CSV's `hardware` column, e.g. `h100-80gb`.")
    tensor_parallel: int = Field(ge=1, description="Value of the CSV's `tensor_parallel` column, e.g. 8.")
    batch_size: int = Field(default=1, ge=1, description="Value of the CSV's `batch_size` column.")

    @field_validator("provider")
    @classmethod
    def _provider(cls, v: str) -> str:
        name = normalize_provider(v)
        if not name:
            raise ValueError("give the provider the profiled calls carry")
        return name

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        name = normalize_model(v)
        if not name:
            raise ValueError("give the model the profiled calls carry")
        return name

    def label(self) -> str:
        """A short description of the profile rows used, e.g. `perf_model.csv:llama2-70b/h100-80gb/tp8/bs1`."""
        return f"{self.csv.name}:{self.profile_model}/{self.hardware}/tp{self.tensor_parallel}/bs{self.batch_size}"


class LatencySettings(BaseModel):
    """How latency models are fitted per (provider, model), held out, and seeded from profiles."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    holdout_share: float = Field(
        default=0.2, ge=0, lt=1,
        description="Share of calls (by a hash of call_id) held out to measure the fit's error; 0 = none.",
    )
    min_fit_calls: int = Field(
        default=30, ge=5, description="Fewest usable calls a (provider, model) needs for a fit."
    )
    sample_cap: int = Field(
        default=50_000, ge=100,
        description="About the most calls per (provider, model) and kind of evidence pulled into a fit; the "
        "sample is chosen by md5 of call_id, so it is the same on every run.",
    )
    mape_floor_s: float = Field(
        default=0.01, ge=0,
        description="Held-out calls whose actual time is below this many seconds are left out of the MAPE.",
    )
    huber_k: float = Field(default=1.345, gt=0, description="Huber threshold in robust standard deviations.")
    profiles: list[LatencyProfile] = Field(
        default_factory=list, description="Per-token profiles that time calls of a provider and model."
    )

    @model_validator(mode="after")
    def _unique_profiles(self) -> LatencySettings:
        seen: set[tuple[str, str]] = set()
        for p in self.profiles:
            key = (p.provider, p.model)
            if key in seen:
                raise ValueError(f"two profiles for provider {p.provider!r} and model {p.model!r}; keep one")
            seen.add(key)
        return self

    def profile_for(self, provider: str | None, model: str | None) -> LatencyProfile | None:
        """The profile configured for a provider and (normalised) model, or None."""
        return next((p for p in self.profiles if p.provider == provider and p.model == model), None)
