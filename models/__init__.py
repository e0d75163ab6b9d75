"""Record types and settings shared by every stage."""

from .records import REJECT_REASONS, BillingLine, LlmCall, Reject, RejectReason, Skip, TimingSource, TokenType
from .settings import Settings, resolve_db

__all__ = [
    "REJECT_REASONS",
    "BillingLine",
    "LlmCall",
    "Reject",
    "RejectReason",
    "Settings",
    "Skip",
    "TimingSource",
    "TokenType",
    "resolve_db",
]
