"""The user price book: negotiated prices, fine-tunes and self-hosted GPU deployments.

A price book is a TOML or YAML file (documented in docs/pricebook.md, example in
docs/examples/pricebook.toml) with two lists:

- `prices`: per-token overrides of the list price, in USD per MILLION tokens, or a `discount`
  fraction off the list price of the matched model.
- `deployments`: self-hosted models priced by the GPU-hour instead of per token.

Numbers are read as exact `Decimal` (TOML floats and YAML floats are parsed from their text, never
through binary floating point).
"""

from __future__ import annotations

import re
import tomllib
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .vocabulary import normalize_provider
from .errors import ConfigError

# Inference engines: their calls are never priced from a provider's list price per token; a
# `Deployment` prices them by the GPU-hour.
SELF_HOSTED_PROVIDERS: frozenset[str] = frozenset(
    {"vllm", "sglang", "tgi", "ollama", "llama.cpp", "lmstudio", "triton", "tensorrt_llm"}
)

UsdPerMillion = Annotated[Decimal, Field(ge=0, decimal_places=12, description="USD per million tokens.")]

# Fix hints for the pydantic error types a price book author meets most often.
_FIXES: dict[str, str] = {
    "missing": "add the field",
    "extra_forbidden": "remove the field or correct its spelling (see {doc} for the allowed fields)",
    "decimal_parsing": "write a plain number such as 2.49",
    "decimal_type": "write a plain number such as 2.49",
    "decimal_max_places": "use at most 12 decimal places",
    "greater_than_equal": "use a value that is not negative",
    "greater_than": "use a value above zero",
    "less_than_equal": "use a fraction between 0 and 1 (0.2 = 20% off)",
    "date_from_datetime_parsing": "write a date as YYYY-MM-DD",
    "date_parsing": "write a date as YYYY-MM-DD",
    "date_type": "write a date as YYYY-MM-DD",
    "literal_error": "use one of the allowed values",
    "int_parsing": "write a whole number",
    "int_type": "write a whole number",
    "list_type": 'write a list, e.g. ["model-a", "model-b"]',
    "string_type": "write a quoted string",
}


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("match", check_fields=False)
    @classmethod
    def _regex_compiles(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as e:
                raise ValueError(f"not a valid regular expression: {e}") from e
        return v

    def _provider_matches(self, provider: str | None) -> bool:
        want = getattr(self, "provider", None)
        return want is None or normalize_provider(want) == provider

    def _regex_matches(self, model: str | None, model_raw: str | None) -> bool:
        pattern = getattr(self, "match", None)
        return pattern is not None and any(
            name is not None and re.search(pattern, name, re.IGNORECASE) for name in (model_raw, model)
        )


def _name_matches(name: str, model: str | None, model_raw: str | None) -> bool:
    """True when a price book model name equals the call's raw name or its normalised name (case-insensitive)."""
    wanted = name.strip().lower()
    return (model_raw is not None and wanted == model_raw.strip().lower()) or (model is not None and wanted == model)


class ModelPrice(_Entry):
    """One override: explicit USD-per-million-token prices, or a discount off the matched model's list price."""

    provider: str | None = Field(default=None, description="Provider as in the traces (`openai`, `anthropic` ...).")
    model: str | None = Field(default=None, description="Exact model name: normalised (all snapshots) or raw (one).")
    match: str | None = Field(default=None, description="Regular expression searched in the raw and normalised name.")
    effective_from: date | None = Field(default=None, description="First UTC day the entry applies (inclusive).")
    effective_to: date | None = Field(default=None, description="Last UTC day the entry applies (inclusive).")
    input: UsdPerMillion | None = Field(default=None, description="Uncached input tokens, USD per million.")
    cache_read: UsdPerMillion | None = Field(default=None, description="Cache-read input tokens; default `input`.")
    cache_write: UsdPerMillion | None = Field(default=None, description="5-minute cache writes; default `input`.")
    cache_write_1h: UsdPerMillion | None = Field(
        default=None, description="1-hour cache writes; default `cache_write`."
    )
    output: UsdPerMillion | None = Field(default=None, description="Output tokens, reasoning included.")
    discount: Annotated[Decimal, Field(ge=0, le=1)] | None = Field(
        default=None, description="Fraction off the list price of the matched model: 0.2 = 20% off."
    )
    note: str | None = Field(default=None, description="Free text, e.g. the contract it comes from.")

    @model_validator(mode="after")
    def _complete(self) -> ModelPrice:
        if self.provider is None and self.model is None and self.match is None:
            raise ValueError("an entry needs at least one of `provider`, `model` or `match`")
        if self.model is not None and self.match is not None:
            raise ValueError("give either `model` or `match`, not both")
        price_fields = ("input", "cache_read", "cache_write", "cache_write_1h", "output")
        explicit = [f for f in price_fields if getattr(self, f) is not None]
        if self.discount is not None and explicit:
            raise ValueError(f"give either `discount` or prices, not both (found {', '.join(explicit)})")
        if self.discount is None and (self.input is None or self.output is None):
            raise ValueError("give `input` and `output` (USD per million tokens), or a `discount`")
        if self.effective_from and self.effective_to and self.effective_to < self.effective_from:
            raise ValueError("`effective_to` is before `effective_from`")
        if self.discount is None and self.provider and normalize_provider(self.provider) in SELF_HOSTED_PROVIDERS:
            raise ValueError(
                f"provider {self.provider!r} is a self-hosted engine, priced by GPU-hour: add a [[deployments]] entry"
            )
        return self

    @property
    def specificity(self) -> int:
        """0 for an exact `model`, 1 for a `match` regex, 2 for a whole provider; the lowest matching entry wins."""
        return 0 if self.model is not None else 1 if self.match is not None else 2

    def applies(self, provider: str | None, model: str | None, model_raw: str | None, day: date | None) -> bool:
        """Whether this entry prices a call of this provider, normalised and raw model name, and UTC day."""
        if not self._provider_matches(provider):
            return False
        if self.model is not None and not _name_matches(self.model, model, model_raw):
            return False
        if self.match is not None and not self._regex_matches(model, model_raw):
            return False
        if self.effective_from or self.effective_to:
            if day is None:
                return False
            if (self.effective_from and day < self.effective_from) or (self.effective_to and day > self.effective_to):
                return False
        return True

    def per_million(self) -> dict[str, Decimal]:
        """The explicit prices in USD per million tokens with their defaults filled in (needs `input`/`output`)."""
        assert self.input is not None and self.output is not None
        cache_write = self.cache_write if self.cache_write is not None else self.input
        return {
            "uncached_input": self.input,
            "cache_read": self.cache_read if self.cache_read is not None else self.input,
            "cache_write": cache_write,
            "cache_write_1h": self.cache_write_1h if self.cache_write_1h is not None else cache_write,
            "output": self.output,
        }

    def label(self) -> str:
        """A short name for the entry in `matched_model`, e.g. `price_book:ft:gpt-4o-mini:acme`."""
        return "price_book:" + (self.model or (f"/{self.match}/" if self.match else f"{self.provider}:*"))


class Deployment(_Entry):
    """A self-hosted deployment priced by the GPU-hour and shared by the calls it served."""

    name: str = Field(description="Unique name, shown in `deployment_costs`.")
    provider: str = Field(default="vllm", description="Provider as in the traces (`vllm`, `sglang` ...).")
    models: list[str] | None = Field(default=None, description="Exact model names served (raw or normalised).")
    match: str | None = Field(default=None, description="Regular expression for the model names served.")
    gpu_type: str = Field(description="GPU model, e.g. `H100-80GB` (informational).")
    gpus: int = Field(default=1, ge=1, description="GPUs the deployment holds for its whole period.")
    usd_per_gpu_hour: Annotated[Decimal, Field(gt=0, decimal_places=12)] = Field(description="USD per GPU per hour.")
    idle: Literal["spread", "keep"] = Field(
        default="spread",
        description="`spread`: an hour's whole cost goes to that hour's calls; `keep`: only the busy part of the "
        "hour does, the rest stays idle. Hours with no calls are idle either way.",
    )
    active_from: date | None = Field(default=None, description="First UTC day the GPUs were paid for (inclusive).")
    active_to: date | None = Field(default=None, description="Last UTC day the GPUs were paid for (inclusive).")
    pool: str | None = Field(
        default=None,
        description="Disaggregated serving: the `service.name` of the engine workers this deployment runs (its "
        "prefill or its decode pool). A call whose prefill ran in this pool pays this deployment for its prefill "
        "seconds; one whose decode ran here, for its decode seconds.",
    )

    @model_validator(mode="after")
    def _complete(self) -> Deployment:
        if not self.models and self.match is None:
            raise ValueError("give `models` (a list of names) or `match` (a regular expression)")
        if self.active_from and self.active_to and self.active_to < self.active_from:
            raise ValueError("`active_to` is before `active_from`")
        return self

    @property
    def hour_cost_usd(self) -> Decimal:
        """What one hour of the deployment costs in USD: gpus × usd_per_gpu_hour."""
        return self.gpus * self.usd_per_gpu_hour

    def serves(self, provider: str | None, model: str | None, model_raw: str | None) -> bool:
        """Whether calls of this provider and model name ran on this deployment."""
        if normalize_provider(self.provider) != provider:
            return False
        if self.models and any(_name_matches(m, model, model_raw) for m in self.models):
            return True
        return self._regex_matches(model, model_raw)


class PriceBook(BaseModel):
    """A whole price book: per-token overrides and self-hosted deployments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prices: list[ModelPrice] = Field(default_factory=list, description="Per-token overrides and discounts.")
    deployments: list[Deployment] = Field(default_factory=list, description="Self-hosted GPU deployments.")

    @field_validator("deployments")
    @classmethod
    def _unique_names(cls, v: list[Deployment]) -> list[Deployment]:
        seen: set[str] = set()
        for d in v:
            if d.name in seen:
                raise ValueError(f"two deployments are named {d.name!r}; names must be unique")
            seen.add(d.name)
        return v

    def override_for(
        self, provider: str | None, model: str | None, model_raw: str | None, day: date | None
    ) -> ModelPrice | None:
        """The most specific entry (exact model, then regex, then provider; ties by file order) for a call, or None."""
        hits = [p for p in self.prices if p.applies(provider, model, model_raw, day)]
        return min(hits, key=lambda p: p.specificity) if hits else None

    def pool_deployments(self, provider: str | None, model: str | None, model_raw: str | None) -> dict[str, Deployment]:
        """pool -> the first deployment (in file order) with that `pool` serving this provider and model."""
        found: dict[str, Deployment] = {}
        for d in self.deployments:
            if d.pool is not None and d.pool not in found and d.serves(provider, model, model_raw):
                found[d.pool] = d
        return found

    def deployment_for(self, provider: str | None, model: str | None, model_raw: str | None) -> Deployment | None:
        """The first deployment (in file order) that served calls of this provider and model, or None."""
        return next((d for d in self.deployments if d.serves(provider, model, model_raw)), None)


class _DecimalYamlLoader(yaml.SafeLoader):
    """YAML loader that reads floats as exact Decimal from their text."""


_DecimalYamlLoader.add_constructor(
    "tag:yaml.org,2002:float", lambda loader, node: Decimal(loader.construct_scalar(node).replace("_", ""))
)


def _read(path: Path) -> Any:
    suffix = path.suffix.lower()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}", "check the path") from e
    try:
        if suffix == ".toml":
            return tomllib.loads(text, parse_float=Decimal)
        if suffix in (".yaml", ".yml"):
            return yaml.load(text, Loader=_DecimalYamlLoader) or {}
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as e:
        raise ConfigError(f"{path} is not valid {suffix[1:].upper()}: {e}", "fix the syntax at the place named") from e
    raise ConfigError(f"{path}: a configuration file must end in .toml, .yaml or .yml", "rename the file")


def _field_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _section_doc(model: type[BaseModel], loc: tuple, doc: str) -> str:
    """The doc that describes the field at `loc`: a section's own doc (its description names `docs/....md`),
    else `doc`, the file's."""
    if loc and str(loc[0]) in ("prices", "deployments"):
        return "docs/pricebook.md"
    field = model.model_fields.get(str(loc[0])) if loc else None
    found = re.search(r"docs/[\w-]+\.md", (field.description or "") if field else "")
    return found.group(0) if found else doc


def load_validated(path: Path | str, model: type[BaseModel], what: str, doc: str) -> Any:
    """Read a TOML or YAML file into `model`; errors name the file, the field path and the fix."""
    path = Path(path)
    data = _read(path)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        lines, fixes = [], []
        for err in e.errors():
            lines.append(f"{path}: {_field_path(err['loc'])}: {err['msg']}")
            where = _section_doc(model, err["loc"], doc)
            fixes.append(_FIXES.get(err["type"], "see {doc}").format(doc=where))
        raise ConfigError(f"invalid {what}\n  " + "\n  ".join(lines), "; ".join(dict.fromkeys(fixes))) from e


def load_pricebook(path: Path | str) -> PriceBook:
    """Read and validate a TOML or YAML price book; errors name the file, the field path and the fix."""
    return load_validated(path, PriceBook, "price book", "docs/pricebook.md")


def pricebook_json_schema() -> dict[str, Any]:
    """The JSON schema of a price book, for editors that validate TOML/YAML against a schema."""
    return PriceBook.model_json_schema()
