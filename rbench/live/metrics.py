"""Prometheus metrics of one executor task, served while the task runs.

Counters and latency histograms are updated once a second from the recorder's new
rows (never per message), and exposed through a custom collector, so the hot path
pays nothing for them. Histograms rather than summaries: quantiles from many
executors cannot be merged, bucket counts can (`histogram_quantile` over a sum).
Exact percentiles still come from the reduce job.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

from rbench.config.types import OPEN_METRICS, MetricsAccess
from rbench.live.metrics_http import serve_registry

BOUNDS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_BOUNDS_NS = np.asarray(BOUNDS_S) * 1e9
COUNTERS = {
    "published": ("rbench_published", "Messages published"),
    "confirmed": ("rbench_confirmed", "Messages acked by the broker (publisher confirms)"),
    "nacked": ("rbench_nacked", "Messages nacked by the broker"),
    "returned": ("rbench_returned", "Mandatory messages returned as unroutable"),
    "consumed": ("rbench_consumed", "Messages received by consumers"),
}
LABELS = ["run_id", "cluster", "step", "task"]


class _Histogram:
    __slots__ = ("counts", "sum_s")

    def __init__(self) -> None:
        self.counts = np.zeros(len(BOUNDS_S) + 1, dtype=np.int64)
        self.sum_s = 0.0

    def add(self, values_ns: np.ndarray) -> None:
        if values_ns.size:
            idx = np.searchsorted(_BOUNDS_NS, values_ns, side="left")
            self.counts += np.bincount(idx, minlength=self.counts.size)
            self.sum_s += float(values_ns.sum()) / 1e9

    def buckets(self) -> list[tuple[str, float]]:
        cumulative = np.cumsum(self.counts)
        return [(repr(b), float(c)) for b, c in zip(BOUNDS_S, cumulative[:-1])] + [("+Inf", float(cumulative[-1]))]


class TaskMetrics:
    """Cumulative metrics of one task, per step; a prometheus_client collector."""

    def __init__(self, run_id: str, cluster: str, task: int) -> None:
        self.base = [run_id, cluster]
        self.task = str(task)
        self._lock = threading.Lock()
        self._counts: dict[int, dict[str, int]] = {}
        self._latency: dict[int, _Histogram] = {}
        self._confirm: dict[int, _Histogram] = {}

    def update(self, step: int, deltas: dict[str, int], e2e_ns: np.ndarray, confirm_ns: np.ndarray) -> None:
        with self._lock:
            counts = self._counts.setdefault(step, dict.fromkeys(COUNTERS, 0))
            for key in COUNTERS:
                counts[key] += deltas.get(key, 0)
            self._latency.setdefault(step, _Histogram()).add(e2e_ns)
            self._confirm.setdefault(step, _Histogram()).add(confirm_ns)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            for key, (name, doc) in COUNTERS.items():
                family = CounterMetricFamily(name, doc, labels=LABELS)
                for step, counts in self._counts.items():
                    family.add_metric([*self.base, str(step), self.task], counts[key])
                yield family
            for name, doc, hists in (
                ("rbench_latency_seconds", "End-to-end latency, receive minus intended send time", self._latency),
                ("rbench_confirm_latency_seconds", "Publisher confirm latency, confirm minus send time", self._confirm),
            ):
                hfamily = HistogramMetricFamily(name, doc, labels=LABELS)
                for step, hist in hists.items():
                    hfamily.add_metric([*self.base, str(step), self.task], hist.buckets(), hist.sum_s)
                yield hfamily


def serve(metrics: TaskMetrics, port: int, access: MetricsAccess = OPEN_METRICS) -> tuple[Any, int]:
    """Serve /metrics on `access.bind`:`port` (0 = any free port), with its auth and TLS; (server, actual port).

    Any address by default: a Prometheus that scrapes the executors of a cluster reaches each on its
    host's address (docs/metrics.md, "Who can read /metrics")."""
    registry = CollectorRegistry()
    registry.register(metrics)
    return serve_registry(registry, port, access)
