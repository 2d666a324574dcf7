"""What a comparison compares: the metrics, where each round's figure comes from, and what "better" means.

Every figure is one the reduce already defines (steps.csv, docs/reduce.md), taken from the round's
per-step row of its cluster, except client CPU per message, which the reduce does not print: it is
the tasks' own CPU (getrusage user + system over wall time per step, run.json ``task_results[].
self_check``, rbench.runtime.selfcheck) summed over the cluster's tasks, in cores, divided by the
step's consume rate: µs of load-generator CPU per delivered message, the client's side of the
broker's ``broker_cpu_us_per_msg`` (which divides the same way).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rbench.compare.stats import RatioEstimate
from rbench.samples.conventions import shown_step
from rbench.samples.record import ClusterRecord

Better = Literal["higher", "lower"]


@dataclass(frozen=True)
class Metric:
    """One compared figure: its name in compare.json, the steps column it reads, its unit and direction."""

    name: str
    label: str
    unit: str
    better: Better
    column: str | None           # the steps row's column; None: computed (client CPU)
    kind: Literal["rate", "latency", "cost"]


CLIENT_CPU = "client_cpu_us_per_msg"
METRICS: tuple[Metric, ...] = (
    Metric("publish_rate", "publish rate", "msg/s", "higher", "publish_rate", "rate"),
    Metric("confirm_rate", "confirm rate", "msg/s", "higher", "confirm_rate", "rate"),
    Metric("consume_rate", "consume rate", "msg/s", "higher", "consume_rate", "rate"),
    Metric("e2e_p50_ms", "end-to-end p50", "ms", "lower", "e2e_p50_ms", "latency"),
    Metric("e2e_p99_ms", "end-to-end p99", "ms", "lower", "e2e_p99_ms", "latency"),
    Metric("e2e_p999_ms", "end-to-end p99.9", "ms", "lower", "e2e_p999_ms", "latency"),
    Metric("confirm_p99_ms", "confirm p99", "ms", "lower", "confirm_p99_ms", "latency"),
    Metric("broker_cpu_us_per_msg", "broker CPU per message", "µs/msg", "lower", "broker_cpu_us_per_msg", "cost"),
    Metric("broker_mem_peak_mb", "broker memory peak", "MB", "lower", "broker_mem_peak_mb", "cost"),
    Metric(CLIENT_CPU, "client CPU per message", "µs/msg", "lower", None, "cost"),
)

METRIC_SOURCES = ("rates, latencies and broker figures: the round's reduce (steps.csv of its run, docs/reduce.md; "
                  "rates over each step's measurement window, exact latency percentiles over its measured messages, "
                  "broker CPU µs per delivered message and peak memory from the broker sampler); client CPU per "
                  "message: the cluster's tasks' CPU (getrusage user + system ÷ wall per step, run.json self_check) "
                  "summed, ÷ the step's consume rate")


def metric_key(metric: Metric, step: int, steps: int) -> str:
    """The name in compare.json: the metric's, with its step (counted from 1) when the workload has several."""
    return metric.name if steps == 1 else f"{metric.name}@step{shown_step(step)}"


def client_cpu_us_per_msg(cluster: ClusterRecord | None, step: int, consume_rate: float | None) -> float | None:
    """The cluster's tasks' summed CPU (cores) in ``step`` ÷ its consume rate, in µs per delivered message
    (None when a task did not report the step or nothing was consumed)."""
    if cluster is None or not cluster.task_results or not consume_rate:
        return None
    cores = 0.0
    for result in cluster.task_results:
        figures = result.self_check.get(step)
        if figures is None or "cpu" not in figures:
            return None
        cores += float(figures["cpu"])
    return cores / consume_rate * 1e6


@dataclass(frozen=True)
class Figure:
    """One round's figure of one metric, and its relative resolution (a rate: 1 message of the window's count)."""

    value: float | None
    resolution: float = 0.0


def round_figures(rows: Sequence[Mapping[str, Any]], cluster: ClusterRecord | None) -> dict[tuple[str, int], Figure]:
    """(metric name, step) → the figure of one round's run of one cluster, from its reduce's step rows."""
    out: dict[tuple[str, int], Figure] = {}
    for row in rows:
        step = int(row["step"])
        window = row.get("window_s") or 0.0
        for m in METRICS:
            if m.column is not None:
                value = row.get(m.column)
            else:
                value = client_cpu_us_per_msg(cluster, step, row.get("consume_rate"))
            count = float(value) * window if value is not None and m.kind == "rate" else 0.0
            out[(m.name, step)] = Figure(None if value is None else float(value), 1.0 / count if count >= 1 else 0.0)
    return out


def verdict(metric: Metric, estimate: RatioEstimate | None, a: str, b: str, why_not: str | None = None) -> str:
    """One sentence: which way B differs from A and by how much, or that no difference is shown at the interval's
    confidence. "Better" follows the metric's direction: a higher rate is better, a lower latency or cost is."""
    if estimate is None:
        return f"not compared: {why_not or 'no figures'}"
    level = f"{estimate.confidence * 100:g} %"
    if not estimate.shows_difference:
        return (f"no difference shown at {level} (B/A {estimate.ratio:.3f}, {level} CI "
                f"{estimate.lo:.3f}–{estimate.hi:.3f})")
    up = estimate.lo > 1.0
    if up:
        change, lo, hi = estimate.ratio - 1, estimate.lo - 1, estimate.hi - 1
    else:
        change, lo, hi = 1 - estimate.ratio, 1 - estimate.hi, 1 - estimate.lo
    better = up == (metric.better == "higher")
    if metric.kind == "rate":
        word = "faster" if up else "slower"
    else:
        word = ("higher" if up else "lower") + (" (better)" if better else " (worse)")
    return (f"{b} {word} than {a} by {change * 100:.1f} % ({level} CI {lo * 100:.1f}–{hi * 100:.1f} %; "
            f"B/A {estimate.ratio:.3f})")
