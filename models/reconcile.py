"""Settings of the billing reconciliation (`[reconcile]` in the configuration file; docs/reconciliation.md)."""

from __future__ import annotations

from decimal import Decimal

from pydantic import BaseModel, ConfigDict, Field


class ReconcileSettings(BaseModel):
    """Tolerances of the reconciliation: how far billed and traced may differ and still agree."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token_tolerance: float = Field(
        default=0.01, ge=0, lt=1, description="Token gap, as a share of the larger side, still counted as agreement."
    )
    min_gap_tokens: int = Field(default=1000, ge=0, description="Token gaps of this many tokens or fewer always agree.")
    cost_tolerance: float = Field(
        default=0.02, ge=0, lt=1, description="USD gap, as a share of the larger side, that still counts as agreement."
    )
    min_gap_usd: Decimal = Field(default=Decimal("0.01"), ge=0, description="USD gaps this small always agree.")
    price_tolerance: float = Field(
        default=0.02, ge=0, lt=1, description="Relative difference of billed vs list unit price that is the same price."
    )
    edge_tolerance: float = Field(
        default=0.25, ge=0, lt=1,
        description="How closely (share of the gap) the neighbouring days' opposite gap must match a bucket edge.",
    )
