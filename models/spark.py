"""`[spark]`: where `phaselens build --engine spark` runs and with which Spark settings (docs/scale-out.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

LOCAL_DRIVER_MEMORY_CAP_GB = 16
"""In local mode the whole build runs in the driver's JVM; without a `spark.driver.memory` setting it gets half
of the machine's memory, at most this many gigabytes (Spark's own default, 1g, fails at a few million calls)."""


class SparkSettings(BaseModel):
    """The Spark master and any Spark settings (`spark.*` keys) the session starts with."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    master: str = Field(
        default="local[2]", description="local[N], spark://host:7077, yarn, or a Spark Connect URL sc://host:15002."
    )
    conf: dict[str, str] = Field(
        default_factory=dict,
        description="Spark settings, e.g. {\"spark.driver.memory\" = \"8g\"}; --spark-conf KEY=VALUE adds or overrides.",
    )

    @field_validator("conf", mode="before")
    @classmethod
    def _conf(cls, v: object) -> object:
        if isinstance(v, dict):
            bad = [k for k in v if not str(k).startswith("spark.")]
            if bad:
                raise ValueError(f"Spark settings start with 'spark.': {', '.join(map(str, bad))}")
            return {str(k): str(val).lower() if isinstance(val, bool) else str(val) for k, val in v.items()}
        return v


def parse_conf_args(pairs: list[str]) -> dict[str, str]:
    """`KEY=VALUE` strings (from --spark-conf) as a mapping; a ValueError names the first malformed one."""
    out: dict[str, str] = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        key = key.strip()
        if not sep or not key.startswith("spark.") or not value.strip():
            raise ValueError(f"--spark-conf {p!r} is not KEY=VALUE with a spark.* key, e.g. spark.driver.memory=8g")
        out[key] = value.strip()
    return out
