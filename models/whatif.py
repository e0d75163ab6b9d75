"""Settings of the routing what-if (`phaselens whatif`, docs/whatif.md): tokenizer ratios and the replay sample."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Model family of a normalised model name: first pattern that matches (searched, case-insensitive).
DEFAULT_FAMILIES: dict[str, str] = {
    "openai": r"^(gpt-|o[1-9]|chatgpt|codex|text-embedding|davinci|babbage)",
    "anthropic": r"^claude",
    "google": r"^(gemini|gemma)",
    "meta": r"llama",
    "mistral": r"(mistral|mixtral|codestral|ministral|magistral|devstral)",
    "qwen": r"qwen",
    "deepseek": r"deepseek",
    "xai": r"^grok",
    "cohere": r"^(command|embed-)",
}


class WhatIfSettings(BaseModel):
    """How the what-if turns a workload's calls into calls on another model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token_ratios: dict[str, float] = Field(
        default_factory=dict,
        description="Model family -> tokens its tokenizer makes of a text, relative to the other families "
        "(default 1.0 each). Moving a call from family A to B scales its tokens by ratio[B] / ratio[A].",
    )
    families: dict[str, str] = Field(
        default_factory=dict,
        description="Extra or replacing family patterns: family -> regular expression searched in the "
        "normalised model name; checked before the built-in ones.",
    )
    sample_calls_per_day: int = Field(
        default=5_000, ge=100,
        description="Most calls per workload and UTC day the what-if replays (chosen by md5 of call_id); "
        "days with more calls are replayed from this sample and scaled to their call count.",
    )

    @field_validator("token_ratios")
    @classmethod
    def _positive(cls, v: dict[str, float]) -> dict[str, float]:
        for family, ratio in v.items():
            if not ratio > 0:
                raise ValueError(f"token ratio of family {family!r} must be above 0, not {ratio}")
        return v

    @field_validator("families")
    @classmethod
    def _patterns(cls, v: dict[str, str]) -> dict[str, str]:
        for family, pattern in v.items():
            try:
                re.compile(pattern)
            except re.error as e:
                raise ValueError(f"family {family!r}: {pattern!r} is not a valid pattern ({e})") from e
        return v

    def family(self, model: str | None) -> str:
        """The family of a normalised model name; the name itself when no pattern matches."""
        name = (model or "").lower()
        for family, pattern in {**self.families, **DEFAULT_FAMILIES}.items():
            if re.search(pattern, name, re.IGNORECASE):
                return family
        return name or "unknown"

    def ratio(self, family: str) -> float:
        return float(self.token_ratios.get(family, 1.0))
