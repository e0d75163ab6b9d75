"""Model and provider name normalisation, defined in `phaselens.models.vocabulary` and re-exported for adapters."""

from phaselens.models.vocabulary import MODEL_RULES, PROVIDER_ALIASES, normalize_model, normalize_provider, sql_macros

__all__ = ["MODEL_RULES", "PROVIDER_ALIASES", "normalize_model", "normalize_provider", "sql_macros"]
