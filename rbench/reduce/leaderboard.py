"""Leaderboards over the per-step table: throughput, matched target, cost.

A step *matches* its target when the achieved consume rate is at least
``(1 - tolerance) × target_rate`` and the exact p99 end-to-end latency (from intended
send time) is at most the latency limit. Steps without a target (unlimited rate) or
without consumed messages never match. Clusters are ranked across every run given.

Plain Python over the step rows: there is one row per (run, cluster, step), so a Spark
job here would cost seconds of scheduling for microseconds of work.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rbench.reduce.costs import cost_per_krate

Row = dict[str, Any]

BROKER_COLS = ("broker_cpu_us_per_msg", "broker_mem_peak_mb")      # rbench.reduce.broker's per-step figures
TOP_COLUMNS = ("cluster", "run_id", "step", "target_rate", "consume_rate", "publish_rate", "e2e_p99_ms", "matched",
               "generator_bound", *BROKER_COLS)
MATCHED_COLUMNS = ("cluster", "run_id", "step", "target_rate", "consume_rate", "e2e_p99_ms", "generator_bound", *BROKER_COLS)
COST_TOP_COLUMNS = ("cluster", "nodes", "instance_type", "volume_type", "monthly_cost", "consume_rate", "cost_per_1k_rate")
COST_TARGET_COLUMNS = ("cluster", "nodes", "instance_type", "monthly_cost", "target_rate", "highest_matched_target",
                       "cost_per_1k_rate")


def is_matched(step: Row, tolerance: float, latency_limit_ms: float) -> bool:
    target, rate, p99 = step.get("target_rate"), step.get("consume_rate"), step.get("e2e_p99_ms")
    if target is None or rate is None or p99 is None:
        return False
    return bool(rate >= (1.0 - tolerance) * target and p99 <= latency_limit_ms)


def _pick(row: Row, columns: Iterable[str]) -> Row:
    return {c: row.get(c) for c in columns}


def _best_per_cluster(steps: Iterable[Row], key: Callable[[Row], Any]) -> list[Row]:
    """Per cluster, the row with the smallest ``key`` (keys end in run_id and step: ties are stable)."""
    best: dict[str, Row] = {}
    for s in steps:
        held = best.get(s["cluster"])
        if held is None or key(s) < key(held):
            best[s["cluster"]] = s
    return list(best.values())


def _desc(x: float | None) -> float:
    return -x if x is not None else float("inf")


def top_throughput(steps: list[Row]) -> list[Row]:
    """Per cluster, the step with the highest achieved consume rate (ties: lower p99), highest first."""
    rated = [s for s in steps if s.get("consume_rate") is not None]
    best = _best_per_cluster(rated, lambda s: (-s["consume_rate"], s["e2e_p99_ms"] if s.get("e2e_p99_ms") is not None
                                                                   else float("inf"), s["run_id"], s["step"]))
    return [_pick(s, TOP_COLUMNS) for s in sorted(best, key=lambda s: -s["consume_rate"])]


def highest_matched(steps: list[Row]) -> list[Row]:
    """Per cluster, the matched step with the highest target rate (clusters with none are absent)."""
    best = _best_per_cluster((s for s in steps if s["matched"]),
                             lambda s: (-s["target_rate"], _desc(s.get("consume_rate")), s["run_id"], s["step"]))
    return [_pick(s, MATCHED_COLUMNS) for s in sorted(best, key=lambda s: (-s["target_rate"], _desc(s.get("consume_rate"))))]


def cost_at_top(top: list[Row], costs: list[Row]) -> list[Row]:
    """Monthly cost per 1000 msg/s at each cluster's top throughput, cheapest first."""
    by_cluster = {c["cluster"]: c for c in costs}
    rows = []
    for t in top:
        c = by_cluster.get(t["cluster"])
        if c is None:
            continue
        rows.append(_pick({**c, "consume_rate": t["consume_rate"],
                           "cost_per_1k_rate": cost_per_krate(c["monthly_cost"], t["consume_rate"])}, COST_TOP_COLUMNS))
    return sorted(rows, key=lambda r: (r["cost_per_1k_rate"] is None, r["cost_per_1k_rate"] or 0.0, r["cluster"]))


def cost_at_target(steps: list[Row], costs: list[Row], target_rate: float) -> list[Row]:
    """Clusters that matched a target of at least ``target_rate``, with cost per 1000 msg/s at it.

    Cost is normalised by the chosen target (the rate you need), not by the achieved
    rate, so the cheapest cluster able to carry that load comes first.
    """
    highest: dict[str, float] = {}
    for s in steps:
        if s["matched"] and s["target_rate"] >= target_rate:
            highest[s["cluster"]] = max(highest.get(s["cluster"], 0.0), s["target_rate"])
    rows = [_pick({**c, "target_rate": float(target_rate), "highest_matched_target": highest[c["cluster"]],
                   "cost_per_1k_rate": cost_per_krate(c["monthly_cost"], float(target_rate))}, COST_TARGET_COLUMNS)
            for c in costs if c["cluster"] in highest]
    return sorted(rows, key=lambda r: (r["cost_per_1k_rate"] is None, r["cost_per_1k_rate"] or 0.0, r["cluster"]))


def default_target(steps: list[Row]) -> float | None:
    """The highest target every cluster matched (fair comparison), else the highest any matched."""
    clusters = {s["cluster"] for s in steps}
    matched_by: dict[float, set[str]] = {}
    for s in steps:
        if s["matched"]:
            matched_by.setdefault(s["target_rate"], set()).add(s["cluster"])
    if not matched_by:
        return None
    everyone = [t for t, who in matched_by.items() if who == clusters]
    return float(max(everyone)) if everyone else float(max(matched_by))
