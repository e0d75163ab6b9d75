"""Billing name vocabularies: what a Bedrock usage type, an Azure meter or a Vertex SKU says about tokens.

Each parser returns a `NameInfo`: the token type (`None` when the name is not a token charge), the
model as a normalised name (`None` when the name does not carry one), and qualifier tags (routing,
tier, context, modality). They are shared by the cloud adapters and by FOCUS, whose rows carry the
same names in `SkuId`, `SkuMeter` and `ChargeDescription`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from phaselens.models.records import TokenType

from .normalize import normalize_model


@dataclass(frozen=True)
class NameInfo:
    """What a billing name says: token type, normalised model, the model as written, qualifiers."""

    token_type: TokenType | None = None
    model: str | None = None
    model_raw: str | None = None
    tags: dict[str, object] = field(default_factory=dict)


# --- free text (FOCUS SkuMeter / ChargeDescription, OpenAI line items): first match wins -------------
TEXT_RULES: list[tuple[re.Pattern[str], TokenType]] = [
    (re.compile(r"\bstorage\b", re.I), "other"),
    (re.compile(r"cache[ _.-]?(?:write|creation)|cached?[ _-]?wr\b|\bcd[ _-]wr\b", re.I), "cache_write"),
    (re.compile(r"cache[ _.-]?read|cached[ _-]?input|cache[ _-]?hit|input[ _-]?caching|\bcached\b", re.I), "cache_read"),
    (re.compile(r"\b(?:input|prompt|inp)\b", re.I), "uncached_input"),
    (re.compile(r"\b(?:output|completion|outp|thinking|reasoning)\b", re.I), "output"),
]


def token_type_from_text(text: str | None) -> TokenType | None:
    """`Claude Sonnet 4 input tokens` -> uncached_input; `Cache Read Input Tokens` -> cache_read; None if silent."""
    if not text:
        return None
    for pattern, token_type in TEXT_RULES:
        if pattern.search(text):
            return token_type
    return None


# --- AWS Bedrock usage types (CUR line_item_usage_type, FOCUS SkuId) ----------------------------------
BEDROCK_KINDS: dict[str, TokenType] = {
    "cache-read-input-token-count": "cache_read",
    "cache-write-input-token-count": "cache_write",
    "cache-read-input-tokens": "cache_read",
    "cache-write-input-tokens": "cache_write",
    "cache-read-tokens": "cache_read",
    "cache-write-tokens": "cache_write",
    "input-tokens": "uncached_input",
    "output-tokens": "output",
}
_BEDROCK_USAGE = re.compile(
    r"(?:(?P<region>[A-Z]{2,5}\d{0,2})-)?(?P<model>.+?)(?P<mantle>-mantle)?-(?P<kind>(?i:"
    + "|".join(re.escape(k) for k in BEDROCK_KINDS)
    + r"))(?:-(?P<route>.+))?"
)
_CAMEL_MODEL = re.compile(r"(?P<family>[A-Za-z]+?)(?P<ver>\d+(?:\.\d+)*)?(?P<variant>(?:[A-Z][a-z]+|[A-Z]+\d*)*)")
_ARN_MODEL = re.compile(r"^arn:aws:bedrock:[^:]*:[^:]*:(?:foundation-model|inference-profile)/(?P<id>[a-z0-9-]+\.[^/]+)$")


def bedrock_model_from_arn(arn: str | None) -> str | None:
    """The model of a foundation-model or system inference-profile ARN; None for opaque (application) ids."""
    if arn and _ARN_MODEL.match(arn.strip()):
        return normalize_model(arn)
    return None


def bedrock_model_name(part: str) -> str | None:
    """`Claude4Sonnet` -> `claude-sonnet-4`, `Claude3.5Sonnet` -> `claude-3-5-sonnet`, `Nova2.0Lite` -> `nova-2.0-lite`."""
    if "-" in part or part.islower():
        return normalize_model(part)  # already an id: anthropic.claude-opus-4-8, meta.llama3-1-70b
    m = _CAMEL_MODEL.fullmatch(part)
    if not m:
        return normalize_model(part)
    family, ver = m["family"].lower(), m["ver"]
    variant = [w.lower() for w in re.findall(r"[A-Z][a-z]+|[A-Z]+\d*", m["variant"] or "")]
    if family == "claude" and ver and variant:
        major = int(ver.split(".")[0])
        dashed = ver.replace(".", "-")
        words = ["claude", *variant, dashed] if major >= 4 else ["claude", dashed, *variant]
    else:
        words = [family, *([ver] if ver else []), *variant]
    return normalize_model("-".join(words))


def bedrock_usage_type(usage_type: str | None) -> NameInfo:
    """Token type, model and routing of a Bedrock usage type such as `USE1-Claude4Sonnet-input-tokens-cross-region-global`."""
    if not usage_type:
        return NameInfo()
    m = _BEDROCK_USAGE.fullmatch(usage_type.strip())
    if not m:
        return NameInfo()
    tags: dict[str, object] = {}
    if m["region"]:
        tags["region_code"] = m["region"]
    if m["route"]:
        tags["routing"] = m["route"].lower()
    return NameInfo(BEDROCK_KINDS[m["kind"].lower()], bedrock_model_name(m["model"]), m["model"], tags)


# --- Azure OpenAI meter names (Cost Management meterName, FOCUS SkuMeter) ------------------------------
AZURE_DIRECTIONS: dict[str, TokenType] = {
    "inp": "uncached_input", "input": "uncached_input", "in": "uncached_input",
    "outp": "output", "opt": "output", "out": "output", "output": "output",
}
AZURE_CACHED = frozenset({"cached", "cchd", "ccchd", "cd", "cache"})
AZURE_WRITE = frozenset({"wr", "write"})
AZURE_QUALIFIERS: dict[str, tuple[str, str]] = {
    "glbl": ("deployment", "global"), "gl": ("deployment", "global"), "global": ("deployment", "global"),
    "dzone": ("deployment", "data_zone"), "dz": ("deployment", "data_zone"),
    "regnl": ("deployment", "regional"), "rg": ("deployment", "regional"), "regional": ("deployment", "regional"),
    "batch": ("tier", "batch"), "pp": ("tier", "priority"), "std": ("tier", "standard"),
    "shortco": ("context", "short"), "longco": ("context", "long"),
}
AZURE_NOISE = frozenset({"tokens", "token", "1k", "1m", "tok"})


def azure_meter(meter_name: str | None) -> NameInfo:
    """`gpt-4o-0806-Inp-glbl Tokens` -> uncached_input of gpt-4o (global); `5.4 mini cd Inp Gl 1M Tokens` -> cache_read of gpt-5.4-mini."""
    if not meter_name or "token" not in meter_name.lower():
        return NameInfo()
    words = [w for w in re.split(r"[\s\-]+", meter_name.strip()) if w]
    direction: TokenType | None = None
    cached = write = False
    tags: dict[str, object] = {}
    model_words: list[str] = []
    i = 0
    while i < len(words):
        low = words[i].lower()
        if low == "data" and i + 1 < len(words) and words[i + 1].lower() == "zone":
            tags["deployment"] = "data_zone"
            i += 2
            continue
        if low in AZURE_DIRECTIONS:
            direction = AZURE_DIRECTIONS[low]
        elif low in AZURE_CACHED:
            cached = True
        elif low in AZURE_WRITE:
            write = True
        elif low in AZURE_QUALIFIERS:
            key, value = AZURE_QUALIFIERS[low]
            tags[key] = value
        elif low not in AZURE_NOISE:  # model words, snapshot (0806) included: normalize_model drops it
            model_words.append(low)
        i += 1
    model_raw = "-".join(model_words) or None
    if model_raw and model_raw[0].isdigit():
        model_raw = "gpt-" + model_raw  # `5.4 mini` meters name GPT models by version only
    if write:
        token_type: TokenType | None = "cache_write"
    elif cached:
        token_type = "cache_read"
    elif direction:
        token_type = direction
    elif model_raw and "embedding" in model_raw:
        token_type = "uncached_input"  # embedding meters have no direction: they are all input
    else:
        token_type = None
    return NameInfo(token_type, normalize_model(model_raw), model_raw, tags)


# --- Vertex AI Gemini SKUs (GCP billing export sku.description) ----------------------------------------
_GEMINI = re.compile(
    r"^Gemini\s+(?P<ver>\d+(?:\.\d+)?)\s+(?P<mid>.*?)\b(?P<modality>Text|Image|Audio|Video)\s+"
    r"(?P<dir>Input|Output)\b(?P<tail>.*)$",
    re.I,
)
GEMINI_QUALIFIERS: dict[str, tuple[str, object]] = {
    "ga": ("stage", "ga"), "preview": ("stage", "preview"), "global": ("location", "global"),
    "batch": ("tier", "batch"), "thinking": ("thinking", True), "priority": ("tier", "priority"),
    "flex": ("tier", "flex"), "long": ("context", "long"), "short": ("context", "short"), "context": ("", ""),
}


def gemini_sku(description: str | None) -> NameInfo:
    """`Gemini 2.5 Flash GA Thinking Text Output - Predictions` -> output of gemini-2.5-flash (thinking)."""
    m = _GEMINI.match((description or "").strip())
    if not m:
        return NameInfo()
    tags: dict[str, object] = {"modality": m["modality"].lower()}
    family: list[str] = []
    for word in m["mid"].split():
        low = word.lower()
        if low in GEMINI_QUALIFIERS:
            key, value = GEMINI_QUALIFIERS[low]
            if key:
                tags[key] = value
        else:
            family.append(low)
    tail = m["tail"].lower()
    if "caching storage" in tail or "storage" in tail:
        token_type: TokenType = "other"  # cache storage is billed per token-hour, not per token
    elif "caching" in tail:
        token_type = "cache_read"
    else:
        token_type = "uncached_input" if m["dir"].lower() == "input" else "output"
    for word in tail.replace("-", " ").split():
        if word in ("batch", "global", "priority", "flex"):
            tags.update([GEMINI_QUALIFIERS[word]])
    model_raw = "-".join(["gemini", m["ver"], *family])
    return NameInfo(token_type, normalize_model(model_raw), model_raw, tags)
