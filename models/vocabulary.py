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


UNASSIGNED_WORKLOAD = "unassigned"
"""The workload of a call that has neither a feature tag nor a service."""


def default_workload_sql(hint: str = "workload_hint", service: str = "service") -> str:
    """The default workload rule as a SQL expression over two columns: the call's feature tag, else its
    service, else `unassigned` (a blank tag or service counts as missing). The workload rules of the
    configuration run first; SQL files write it as `default_workload(hint, service)` (see `sql_text`)."""
    return f"coalesce(nullif({hint}, ''), nullif({service}, ''), '{UNASSIGNED_WORKLOAD}')"


def itl_per_token(decode_s: float | None, output_tokens: int | None) -> float | None:
    """The ITL split: decode time over the output tokens after the first (the first token closes prefill), so
    None for fewer than two output tokens. `itl_split_sql` is the same rule in SQL."""
    if decode_s is None or output_tokens is None or output_tokens <= 1:
        return None
    return decode_s / (output_tokens - 1)


def itl_split_sql(decode: str, output_tokens: str) -> str:
    """The ITL split as a SQL expression over two expressions (see `itl_per_token`)."""
    return f"CASE WHEN {output_tokens} > 1 THEN ({decode}) / ({output_tokens} - 1) END"


SQL_RULES = {"default_workload": default_workload_sql, "itl_split": itl_split_sql}
"""Rules SQL files write as calls, `default_workload(hint, service)` and `itl_split(decode, output_tokens)`;
`expand_sql_rules` writes each out, so one definition serves every SQL file and any engine."""


def _call_args(text: str, start: int) -> tuple[list[str], int]:
    """The top-level comma-separated arguments of the call whose `(` is at `start`, and the index after `)`."""
    depth, args, arg_start = 0, [], start + 1
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                args.append(text[arg_start:i].strip())
                return args, i + 1
        elif ch == "," and depth == 1:
            args.append(text[arg_start:i].strip())
            arg_start = i + 1
    raise ValueError(f"unbalanced parentheses in a call at offset {start}")


_RULE_CALL = re.compile(r"\b(" + "|".join(SQL_RULES) + r")\s*\(")


def expand_sql_rules(text: str) -> str:
    """`text` with every call of a rule in `SQL_RULES` replaced by the rule's SQL (nested calls too)."""
    out, pos = [], 0
    while (m := _RULE_CALL.search(text, pos)) is not None:
        args, end = _call_args(text, m.end() - 1)
        out.append(text[pos:m.start()] + SQL_RULES[m[1]](*(expand_sql_rules(a) for a in args)))
        pos = end
    out.append(text[pos:])
    return "".join(out)


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
