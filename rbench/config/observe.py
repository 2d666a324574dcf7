"""What is watched and judged around the load: status lines, broker sampling and regression thresholds."""
from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from rbench.config.base import StrictModel
from rbench.config.durations import Seconds


class Regress(StrictModel):
    """Thresholds of `rbench regress` for this workload's nightly history (docs/history.md); flags override."""

    alpha: float = Field(default=0.01, gt=0, lt=0.5,
                         description="False-alarm rate of the same-morning gate, per series (cluster, step, metric) per night.")
    change_point_alpha: float = Field(default=0.01, gt=0, lt=0.5,
                                      description="Permutation-test level of each change point over the whole series.")
    baseline_nights: int = Field(default=30, ge=5, description="At most this many nights before the recent ones are the baseline.")
    recent_nights: int = Field(default=3, ge=1, le=10, description="Tonight and up to this many - 1 nights before it are tested.")
    min_throughput_drop: float = Field(default=0.03, ge=0, lt=1,
                                       description="Smallest relative throughput drop reported as a regression (0.03 = 3 %).")
    min_latency_rise: float = Field(default=0.10, ge=0,
                                    description="Smallest relative latency rise reported as a regression (0.10 = 10 %).")
    metrics: list[str] | None = Field(default=None, description="steps.parquet columns to check; default rates and e2e/confirm percentiles.")


class Progress(StrictModel):
    """What the driver prints (and writes) while a run goes."""

    interval: Seconds = Field(default=1.0, ge=1.0, description="Seconds per status line and CSV row (PerfTest -i).")
    csv: str | None = Field(default=None, description="Write PerfTest's CSV columns to this file, one row per interval (PerfTest -o).")
    format: Literal["rbench", "default", "compact"] = Field(
        default="rbench", description="Status line: rbench's, or PerfTest's default or compact format (PerfTest -mf).")
    id: str | None = Field(default=None, description="Test id in PerfTest-format lines and the CSV id column (PerfTest -d); default: the workload name.")
    latency_unit: Literal["us", "ms"] = Field(default="us", description="Latency unit of PerfTest-format lines and the CSV (PerfTest -ms: ms).")


class BrokerMetrics(StrictModel):
    """What the coordinator samples on each cluster's broker while its stage runs (docs/broker.md)."""

    enabled: bool = Field(default=True, description="Sample the broker at all.")
    interval: Seconds = Field(default=1.0, ge=0.2, description="Seconds between samples.")
    source: Literal["management", "prometheus", "both"] = Field(
        default="both", description="management (HTTP API, port 15672), prometheus (port 15692) or both.")
    management_port: int = Field(default=15672, gt=0, lt=65536)
    prometheus_port: int = Field(default=15692, gt=0, lt=65536)
    management_scheme: Literal["http", "https"] = "http"
    management_urls: list[str] | None = Field(
        default=None, min_length=1,
        description="Management API bases (http://HOST:PORT/api), the first that answers speaks for the cluster; "
                    "default: each URI host at management_port.")
    prometheus_urls: list[str] | None = Field(
        default=None, min_length=1,
        description="Every node's metrics endpoint (http://HOST:PORT/metrics); default: each URI host at "
                    "prometheus_port. List them when nodes share a host on different ports.")

    @field_validator("management_urls", "prometheus_urls")
    @classmethod
    def _http_urls(cls, urls: list[str] | None) -> list[str] | None:
        for url in urls or []:
            if not re.match(r"^https?://[^/\s]+", url):
                raise ValueError(f"expected http:// or https:// URLs, got {url!r}")
        return urls
