"""One Prometheus scrape target for a whole run, served by the coordinator (the Spark driver).

Every task already sends the driver, once a second, its counter deltas and a log-bucket
histogram of the end-to-end latencies it saw (rbench.live.control). This collector adds them up
per (run, cluster, step), so a single target carries the run's merged figures beside the
per-task endpoints (rbench.live.metrics), and a dashboard needs no ``sum`` over a changing set of
executors. Histograms, not summaries: counts of the same buckets add up exactly, so
``histogram_quantile`` over the merged buckets is the quantile of every task's latencies.

Buckets: the control channel's edges are 20 per decade (rbench.live.histogram); every
second one of them is exported, 10 per decade from 10 µs to 100 s (71 bounds + ``+Inf``). A
coarse bucket is a union of whole fine buckets, so merging stays exact. ``histogram_quantile``
interpolates linearly inside the bucket that holds the rank, so its answer and the true
quantile share a bucket: the error is below one bucket width, a factor 10**0.1 (< 26 %), and
in practice a few per cent (docs/metrics.md gives the measured figure). Latencies under 10 µs
count in the first bucket, over 100 s only in ``+Inf``.

Steps are labelled as people read them (``step="1"`` is the first step, like the status line).
The rate gauges are the last complete wall-clock second, as the status line shows them.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, push_to_gateway
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from rbench import __version__
from rbench.config.types import OPEN_METRICS, MetricsAccess
from rbench.config.uri import mask_uri
from rbench.errors import ConfigError, RbenchError
from rbench.live import histogram
from rbench.live.control.wire import Progress
from rbench.live.metrics_http import serve_registry

EXPORT_EVERY = 2                    # every 2nd control edge: 10 buckets per decade
LOW_S, HIGH_S = 1e-5, 100.0
EDGE_INDEX = np.array([i for i in range(0, len(histogram.EDGES_NS), EXPORT_EVERY)
                       if LOW_S * 0.999e9 <= histogram.EDGES_NS[i] <= HIGH_S * 1.001e9])
BOUNDS_S: tuple[float, ...] = tuple(float(f"{histogram.EDGES_NS[i] / 1e9:.6g}") for i in EDGE_INDEX)
BUCKET_RATIO = 10 ** (EXPORT_EVERY / histogram.PER_DECADE)      # upper / lower bound of one bucket

COUNTERS = {
    "published": ("rbench_run_published", "Messages published, all tasks of the run"),
    "confirmed": ("rbench_run_confirmed", "Messages acked by the broker (publisher confirms), all tasks"),
    "nacked": ("rbench_run_nacked", "Messages nacked by the broker, all tasks"),
    "returned": ("rbench_run_returned", "Mandatory messages returned as unroutable, all tasks"),
    "consumed": ("rbench_run_consumed", "Messages received by consumers, all tasks"),
}
HISTOGRAMS = {
    "e2e": ("rbench_run_latency_seconds", "End-to-end latency (receive minus intended send time), merged over tasks",
            "hist", "e2e_sum_ns"),
    "confirm": ("rbench_run_confirm_latency_seconds", "Publisher confirm latency (confirm minus send time), merged over tasks",
                "confirm_hist", "confirm_sum_ns"),
}
LABELS = ["run_id", "cluster", "step"]


class _Step:
    __slots__ = ("counts", "hists", "sums")

    def __init__(self) -> None:
        self.counts = dict.fromkeys(COUNTERS, 0)
        self.hists = {k: np.zeros(histogram.N_BUCKETS, dtype=np.int64) for k in HISTOGRAMS}
        self.sums = dict.fromkeys(HISTOGRAMS, 0.0)


def _cumulative(fine: np.ndarray) -> list[tuple[str, float]]:
    """Prometheus buckets from control-channel bucket counts: fine bucket b holds [EDGES[b-1], EDGES[b])."""
    cum = np.cumsum(fine)
    return [(repr(b), float(cum[i])) for b, i in zip(BOUNDS_S, EDGE_INDEX)] + [("+Inf", float(cum[-1]))]


class RunMetrics:
    """Merged counters, histograms and per-second rate gauges of one run; a prometheus_client collector.

    ``add`` is the ProgressBoard hook: it sees every progress line every task sends."""

    def __init__(self, run_id: str, workload: Any = None, driver: str = "") -> None:
        self.run_id = run_id
        self._lock = threading.Lock()
        self._steps: dict[tuple[str, int], _Step] = {}
        self._seconds: dict[tuple[str, int], dict[str, int]] = {}
        self._tasks: dict[str, set[int]] = {}
        self._targets: dict[tuple[str, int], float] = {}
        self._info = {"workload": getattr(workload, "name", ""), "driver": driver, "version": __version__}
        if workload is not None:
            for cluster in workload.clusters:
                for index, s in enumerate(workload.steps()):
                    if s.rate is not None:
                        self._targets[(cluster.name, index)] = float(s.rate) * workload.producers
        self.registry = CollectorRegistry()
        self.registry.register(self)
        self._server: Any = None
        self.port: int | None = None
        self.tls = False

    # ---- fed by rbench.live.control.ProgressBoard ------------------------------------------------
    def add(self, line: Progress) -> None:
        cluster, step = line.cluster, line.step
        with self._lock:
            self._tasks.setdefault(cluster, set()).add(line.task)
            s = self._steps.setdefault((cluster, step), _Step())
            sec = self._seconds.setdefault((cluster, line.second), dict.fromkeys(COUNTERS, 0))
            for key in COUNTERS:
                v = getattr(line, key)
                s.counts[key] += v
                sec[key] += v
            for key, (_, _, hist_field, sum_field) in HISTOGRAMS.items():
                buckets: dict[int, int] = getattr(line, hist_field)
                for b, c in buckets.items():
                    s.hists[key][min(b, histogram.N_BUCKETS - 1)] += c
                s.sums[key] += getattr(line, sum_field) / 1e9
            if len(self._seconds) > 64:      # keep the last few seconds per cluster
                newest = max(k[1] for k in self._seconds)
                for k in [k for k in self._seconds if k[1] < newest - 8]:
                    del self._seconds[k]

    # ---- prometheus_client collector ------------------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        with self._lock:
            steps = sorted(self._steps.items())
            last = int(time.time() - 0.25) - 1          # the last complete wall-clock second
            seconds = {cl: self._seconds.get((cl, last), dict.fromkeys(COUNTERS, 0)) for cl in self._tasks}
            tasks = {cl: len(t) for cl, t in self._tasks.items()}
            for key, (name, doc) in COUNTERS.items():
                family = CounterMetricFamily(name, doc, labels=LABELS)
                for (cluster, step), s in steps:
                    family.add_metric([self.run_id, cluster, str(step)], s.counts[key])
                yield family
            for key, (name, doc, _, _) in HISTOGRAMS.items():
                hfamily = HistogramMetricFamily(name, doc, labels=LABELS)
                for (cluster, step), s in steps:
                    hfamily.add_metric([self.run_id, cluster, str(step)], _cumulative(s.hists[key]), s.sums[key])
                yield hfamily
            for key, (name, _) in COUNTERS.items():
                gfamily = GaugeMetricFamily(f"{name}_per_second",
                                           f"{key} msg/s in the last complete wall-clock second (as the status line)",
                                           labels=["run_id", "cluster"])
                for cluster, counts in sorted(seconds.items()):
                    gfamily.add_metric([self.run_id, cluster], counts[key])
                yield gfamily
            target = GaugeMetricFamily("rbench_run_target_rate", "Target publish rate of the step, msg/s (absent = unlimited)",
                                       labels=LABELS)
            for (cluster, step), rate in sorted(self._targets.items()):
                target.add_metric([self.run_id, cluster, str(step)], rate)
            yield target
            active = GaugeMetricFamily("rbench_run_tasks", "Tasks that reported progress", labels=["run_id", "cluster"])
            for cluster, n in sorted(tasks.items()):
                active.add_metric([self.run_id, cluster], n)
            yield active
            info = GaugeMetricFamily("rbench_run_info", "The run: workload, driver and rbench version (value 1)",
                                     labels=["run_id", "workload", "driver", "rbench_version"])
            info.add_metric([self.run_id, self._info["workload"], self._info["driver"], self._info["version"]], 1)
            yield info

    # ---- serving and pushing -----------------------------------------------------------------------
    def serve(self, port: int, access: MetricsAccess = OPEN_METRICS) -> int:
        """Serve /metrics on `access.bind`:`port` (0 = any free port), with its basic auth and TLS; the port."""
        try:
            self._server, self.port = serve_registry(self.registry, port, access)
        except OSError as exc:
            raise ConfigError(f"--metrics-port: cannot listen on {access.bind} port {port} ({exc.strerror or exc})") from None
        self.tls = access.tls
        return self.port

    def push(self, url: str, job: str = "rbench") -> None:
        """Push the figures to a Prometheus Pushgateway, grouped by job and run_id (replaces that group)."""
        from urllib.parse import urlsplit, urlunsplit

        from prometheus_client.exposition import basic_auth_handler, default_handler

        try:
            parts = urlsplit(url if "://" in url else f"http://{url}")
            port = parts.port                # urlsplit checks the port (and brackets) only here
        except ValueError:
            raise ConfigError(f"--pushgateway {mask_uri(url)}: expected http://[user:password@]host:port "
                              f"with a port 1-65535") from None
        handler: Any = default_handler
        if parts.username is not None:      # http://user:password@host:9091: basic auth, never in the URL sent
            user, password = parts.username, parts.password or ""
            netloc = parts.hostname + (f":{port}" if port else "") if parts.hostname else ""
            parts = parts._replace(netloc=netloc)

            def handler(url: str, method: str, timeout: Any, headers: Any, data: bytes) -> Any:
                return basic_auth_handler(url, method, timeout, headers, data, user, password)
        try:
            push_to_gateway(urlunsplit(parts), job=job, grouping_key={"run_id": self.run_id}, registry=self.registry,
                            timeout=10, handler=handler)
        except Exception as exc:     # urllib errors, HTTP errors: one line, URL without a password
            reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
            raise RbenchError(f"--pushgateway {mask_uri(url)}: push failed ({reason})") from None

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def start(board: Any, run_id: str, workload: Any, driver: str, port: int | None,
          access: MetricsAccess = OPEN_METRICS) -> RunMetrics:
    """Attach a RunMetrics to the driver's ProgressBoard and serve it when `port` is not None."""
    metrics = RunMetrics(run_id, workload, driver)
    board.hooks.append(metrics.add)
    if port is not None:
        metrics.serve(port, access)
    return metrics


def finish(metrics: RunMetrics, pushgateway: str | None, linger_s: float, out: Any,
           idle: Any = None, wait_s: float = 2.0) -> None:
    """End of the run: push the final figures, keep /metrics up for one more scrape, stop serving.

    ``idle()`` says whether every task connection has closed, i.e. the last lines were read."""
    deadline = time.monotonic() + wait_s
    while idle is not None and not idle() and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        if pushgateway:
            try:
                metrics.push(pushgateway)
                print(f"rbench: pushed the run's metrics to {mask_uri(pushgateway)} (job rbench, run_id {metrics.run_id})",
                      file=out, flush=True)
            except RbenchError as exc:
                print(f"rbench: {exc}", file=out, flush=True)
        if metrics.port is not None and linger_s > 0:
            time.sleep(linger_s)
    finally:
        metrics.close()
