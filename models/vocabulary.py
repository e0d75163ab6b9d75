"""Model and provider names as every source writes them, mapped to one normalised spelling.

The same rules run in Python (for record adapters) and as DuckDB macros (for the SQL adapters),
generated from the one table below so traces and billing lines always meet on the same name.
"""

from __future__ import annotations

import re

# (pattern, replacement), applied in order to the lowercased, trimmed name.
MODEL_RULES: list[tuple[str, str]] = [
    (r"^arn:aws:bedrock:[^/]*/", ""),  # inference-profile / foundation-model ARNs
    (r"^(?:[a-z0-9_.-]+/)+", ""),  # openai/gpt-4o, models/gemini-2.5-flash, meta-llama/llama-2-70b-chat-hf
    (r"^(?:us|eu|apac|global|us-gov)\.", ""),  # Bedrock cross-region profile prefix
    (r"^(?:anthropic|meta|amazon|mistral|cohere|ai21|deepseek|openai|qwen)\.", ""),  # Bedrock vendor prefix
    (r"-v\d+(?::\d+)?$", ""),  # Bedrock version suffix -v1:0
    (r"[@-](?:\d{4}-\d{2}-\d{2}|\d{8})$", ""),  # -2024-07-18, -20250514, @20240620
    (r"-(?:0[1-9]|1[0-2])(?:[0-2]\d|3[01])$", ""),  # -0613, -0806 (OpenAI MMDD snapshots)
    (r"-latest$", ""),
]

PROVIDER_ALIASES: dict[str, str] = {
    "openai": "openai",
    "azure": "azure.ai.openai",
    "azure_openai": "azure.ai.openai",
    "az.ai.openai": "azure.ai.openai",
    "azure.ai.openai": "azure.ai.openai",
    "azure.ai.inference": "azure.ai.inference",
    "anthropic": "anthropic",
    "bedrock": "aws.bedrock",
    "aws.bedrock": "aws.bedrock",
    "amazonbedrock": "aws.bedrock",
    "aws": "aws.bedrock",
    "vertex_ai": "gcp.vertex_ai",
    "vertex": "gcp.vertex_ai",
    "gcp.vertex_ai": "gcp.vertex_ai",
    "gcp.gemini": "gcp.gemini",
    "gemini": "gcp.gemini",
    "google": "gcp.gemini",
    "gcp.gen_ai": "gcp.gen_ai",
    "mistral": "mistral_ai",
    "mistral_ai": "mistral_ai",
    "cohere": "cohere",
    "groq": "groq",
    "deepseek": "deepseek",
    "x_ai": "x_ai",
    "xai": "x_ai",
    "vllm": "vllm",
}

_COMPILED = [(re.compile(p), r) for p, r in MODEL_RULES]


def normalize_model(raw: str | None) -> str | None:
    """`gpt-4o-mini-2024-07-18` -> `gpt-4o-mini`; `global.anthropic.claude-sonnet-4-20250514-v1:0` -> `claude-sonnet-4`."""
    if raw is None:
        return None
    name = raw.strip().lower()
    if not name:
        return None
    if name.startswith("ft:"):  # fine-tunes keep their whole id: they are priced by the user's price book
        return name
    for pattern, repl in _COMPILED:
        name = pattern.sub(repl, name)
    return name or None


def normalize_provider(raw: str | None) -> str | None:
    """`OPENAI`, `az.ai.openai`, `bedrock` -> `openai`, `azure.ai.openai`, `aws.bedrock`; unknown names are lowercased."""
    if raw is None:
        return None
    key = raw.strip().lower()
    if not key:
        return None
    return PROVIDER_ALIASES.get(key, key)


def _sql_string(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def sql_macros() -> list[str]:
    """CREATE MACRO statements for `normalize_model(x)` and `normalize_provider(x)` in DuckDB."""
    expr = "lower(trim(x))"
    for pattern, repl in MODEL_RULES:
        expr = f"regexp_replace({expr}, {_sql_string(pattern)}, {_sql_string(repl)})"
    model = (
        "CREATE OR REPLACE TEMP MACRO normalize_model(x) AS "
        f"CASE WHEN x IS NULL OR trim(x) = '' THEN NULL WHEN lower(trim(x)) LIKE 'ft:%' THEN lower(trim(x)) "
        f"ELSE nullif({expr}, '') END"
    )
    cases = " ".join(f"WHEN {_sql_string(k)} THEN {_sql_string(v)}" for k, v in PROVIDER_ALIASES.items())
    provider = (
        "CREATE OR REPLACE TEMP MACRO normalize_provider(x) AS "
        f"CASE WHEN x IS NULL OR trim(x) = '' THEN NULL ELSE CASE lower(trim(x)) {cases} ELSE lower(trim(x)) END END"
    )
    return [model, provider]
