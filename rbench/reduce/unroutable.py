"""Messages the broker accepted but routed to no queue: their own outcome, not a capacity loss.

Published without ``mandatory`` to an exchange where no binding matches, a message is confirmed (with
confirms on) and dropped; the publisher is never told, so rbench counts it ``lost`` -- and a lost
message reads as "the broker could not keep up". Only the broker counts these drops: Prometheus's
``rabbitmq_global_messages_unroutable_dropped_total`` (per node, one series per protocol), which the
broker sampler records (rbench.coordinator.broker) and rbench.reduce.broker turns into a rise over the
run and over each step's window. This module says what those figures mean wherever a person reads them:
the summary, the report's notes and the verdict (rbench.reduce.verdict). Pure Python.
"""
from __future__ import annotations

from typing import Any, TextIO

from rbench.reduce import cluster_notes

Row = dict[str, Any]

PROM_METRIC = "rabbitmq_global_messages_unroutable_dropped_total"
MEANING = ("accepted by the broker (confirmed, with confirms on) but routed to no queue: no binding matched, and it was "
           "published without mandatory, so the publisher is not told")
METHOD = (f"unroutable: the rise of the broker's {PROM_METRIC} (Prometheus; summed over its protocol labels and over "
          "the sampled nodes) from the broker sampler's first sample of the cluster's stage to its last (one before the "
          "load, one after it); a broker-wide counter: other clients' unroutable messages on the same broker count too. "
          "Messages " + MEANING + "; not measured without the broker's Prometheus endpoint")
STEP_METHOD = (f"broker_unroutable_dropped: the rise of {PROM_METRIC} from the last broker sample at or before the "
               "measurement window's start to the first at or after its end, an upper bound of the window's own figure "
               "(up to one sampling interval either side counts too; broker-wide)")


def dropped_of_lost(step: Row) -> int:
    """How many of a step's lost messages the broker may have dropped as unroutable: up to the smaller of its
    lost count and its broker_unroutable_dropped (0 when either is 0 or was not measured)."""
    lost, dropped = step.get("lost") or 0, step.get("broker_unroutable_dropped") or 0
    return int(min(lost, dropped)) if lost > 0 and dropped > 0 else 0


def cluster_line(cluster: str, runs: list[Row], lost: int | None) -> str | None:
    """The summary's line for one cluster: its unroutable count over the run(s) (``runs``: its rows of the
    reduce's clusters table) reconciled with ``lost`` (measured messages; None: not reduced). None when there
    is nothing to say: no drop and nothing lost."""
    figures = [r.get("unroutable_dropped") for r in runs]
    known = [int(f) for f in figures if f is not None]
    if not known:
        if not lost:
            return None
        return (f"{cluster}: unroutable: not measured (no Prometheus samples of {PROM_METRIC}); the {lost:,} lost may "
                f"include messages routed to no queue")
    dropped = sum(known)
    partly = " (some runs not measured)" if len(known) < len(figures) else ""
    if dropped == 0:
        if not lost:
            return None
        return (f"{cluster}: unroutable 0: the broker's {PROM_METRIC} did not rise over the run{partly}; none of the "
                f"{lost:,} lost was dropped as unroutable")
    text = (f"{cluster}: unroutable {dropped:,}: {MEANING} -- the broker's {PROM_METRIC} over the run{partly} "
            f"(broker-wide: other clients' count too)")
    if not lost:
        return text + ("; no measured message was lost: another client's on this broker, or messages sent outside "
                       "the measured windows (warm-up)")
    return (text + f"; of the {lost:,} lost, up to {min(lost, dropped):,} dropped as unroutable; check the exchange, "
            f"routing key and bindings")


def _of_steps(cluster: str, runs: list[Row], steps: list[Row]) -> str | None:
    return cluster_line(cluster, runs, sum(s.get("lost") or 0 for s in steps) if steps else None)


def _dropped_of_steps(cluster: str, runs: list[Row], steps: list[Row]) -> str | None:
    return _of_steps(cluster, runs, steps) if any(r.get("unroutable_dropped") for r in runs) else None


def notes(clusters: list[Row], steps: list[Row]) -> list[str]:
    """The report's notes: one per (run, cluster) whose broker dropped messages as unroutable during the run."""
    return cluster_notes.notes(_dropped_of_steps, clusters, steps)


def print_cluster(cluster: str, reduced: Any, out: TextIO | None = None) -> None:
    """Print ``cluster_line`` for one cluster of a ReduceResult (nothing without a reduce or anything to say)."""
    cluster_notes.print_cluster(_of_steps, cluster, reduced, out)
