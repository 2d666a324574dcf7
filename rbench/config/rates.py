"""How much load, over time: rate steps, body-size steps and the rate search with its SLO."""
from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from rbench.config.base import StrictModel
from rbench.config.connections import Churn
from rbench.config.durations import Seconds


class RateStep(StrictModel):
    """One level of an increasing-intensity run: per-producer rate held for a duration."""

    rate: float | None = Field(description="msg/s per producer; null for unlimited.")
    duration: Seconds = Field(gt=0)
    churn: Churn | None = Field(default=None, description="Connections each task opens and closes during this "
                                "step; overrides the workload's churn (rate: 0 = none in this step).")

    @field_validator("rate")
    @classmethod
    def _positive(cls, rate: float | None) -> float | None:
        if rate is not None and rate <= 0:
            raise ValueError("expected a rate > 0 msg/s per producer, or null for unlimited")
        return rate


class SizeStep(StrictModel):
    """One level of a variable body size: bytes held for a duration (PerfTest -vs SIZE:SECONDS)."""

    size: int = Field(ge=0)
    duration: Seconds = Field(gt=0)


class Slo(StrictModel):
    """What a probe of a rate search must meet (exact figures over the probe's measured messages)."""

    p99: Seconds = Field(default=1.0, gt=0, description="End-to-end latency p99 from intended send time at most this.")
    consume_ratio: float = Field(default=0.98, gt=0, le=1,
                                 description="Achieved consume rate at least this share of the probe's target rate.")


class RateSearch(StrictModel):
    """Find the highest rate that meets the SLO: double from `start` until a probe fails, then bisect."""

    start: float = Field(gt=0, description="First probe's rate, msg/s per producer.")
    max: float = Field(gt=0, description="Highest rate probed, msg/s per producer; meeting it ends the search "
                                         "with 'capacity not reached'.")
    slo: Slo = Field(default_factory=Slo)
    step: Seconds = Field(default=60.0, gt=0, description="Length of each probe (a step of its own).")
    precision: float = Field(default=0.05, gt=0, lt=1, description="Stop when (first fail − last pass) ÷ last pass "
                                                                     "is at most this.")
    max_probes: int = Field(default=20, ge=2, le=100, description="Stop after this many probes whatever the bracket.")

    @model_validator(mode="after")
    def _bounds(self) -> RateSearch:
        if self.max < self.start:
            raise ValueError(f"max: expected at least start ({self.start:g} msg/s per producer), got {self.max:g}")
        return self
