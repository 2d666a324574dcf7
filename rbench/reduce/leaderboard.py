"""Leaderboards over the per-step table: throughput, matched target, cost.

A step *matches* its target when the achieved consume rate is at least
``(1 - tolerance) × target_rate`` and the exact p99 end-to-end latency (from intended
send time) is at most the latency limit. Steps without a target (unlimited rate) or
without consumed messages never match. Clusters are ranked across every run given.

Every list is ranked (rbench.reduce.ranking): figures that read the same share a rank and are
marked as a tie, and tied rows are listed by name.

Plain Python over the step rows: there is one row per (run, cluster, step), so a Spark
job here would cost seconds of scheduling for microseconds of work.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rbench.reduce.connections import CONN_MEM_COLUMN, MEM_COLUMN, connections_per_gib
from rbench.reduce.costs import cost_per_krate
from rbench.reduce.ranking import rank, shown_money, shown_rate
from rbench.reduce.verdict import verdicts

Row = dict[str, Any]

BROKER_COLS = ("broker_cpu_us_per_msg", "broker_mem_peak_mb")      # rbench.reduce.broker's per-step figures
TOP_COLUMNS = ("cluster", "run_id", "step", "target_rate", "consume_rate", "publish_rate", "e2e_p99_ms", "matched",
               "generator_bound", *BROKER_COLS, "broker")
MATCHED_COLUMNS = ("cluster", "run_id", "step", "target_rate", "consume_rate", "e2e_p99_ms", "generator_bound", *BROKER_COLS,
                   "broker")
COST_TOP_COLUMNS = ("cluster", "nodes", "instance_type", "volume_type", "monthly_cost", "consume_rate", "cost_per_1k_rate")
CONNECTIONS_COLUMNS = ("cluster", "run_id", "idle_connections", MEM_COLUMN, CONN_MEM_COLUMN, "connections_per_gib",
                       "connect_p99_ms", "broker")
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
    """Per cluster, the step with the highest achieved consume rate (ties: lower p99), highest first, ranked."""
    rated = [s for s in steps if s.get("consume_rate") is not None]
    best = _best_per_cluster(rated, lambda s: (-s["consume_rate"], s["e2e_p99_ms"] if s.get("e2e_p99_ms") is not None
                                                                   else float("inf"), s["run_id"], s["step"]))
    rows = [_pick(s, TOP_COLUMNS) for s in sorted(best, key=lambda s: (-(shown_rate(s["consume_rate"]) or 0.0),
                                                                        s["cluster"]))]
    return rank(rows, lambda r: shown_rate(r["consume_rate"]))


def highest_matched(steps: list[Row]) -> list[Row]:
    """Per cluster, the matched step with the highest target rate (clusters with none are absent), ranked on the target."""
    best = _best_per_cluster((s for s in steps if s["matched"]),
                             lambda s: (-s["target_rate"], _desc(s.get("consume_rate")), s["run_id"], s["step"]))
    rows = [_pick(s, MATCHED_COLUMNS) for s in sorted(best, key=lambda s: (-s["target_rate"], s["cluster"]))]
    return rank(rows, lambda r: r["target_rate"])


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
    return _by_cost(rows)


def _by_cost(rows: list[Row]) -> list[Row]:
    """Cheapest per 1000 msg/s first (as printed; ties by name), unpriced last; ranked."""
    ordered = sorted(rows, key=lambda r: (r["cost_per_1k_rate"] is None, shown_money(r["cost_per_1k_rate"]) or 0.0,
                                          r["cluster"]))
    return rank(ordered, lambda r: shown_money(r["cost_per_1k_rate"]))


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
    return _by_cost(rows)


def connections_per_gib_board(steps: list[Row]) -> list[Row]:
    """Per cluster, idle connections per GiB of broker memory (1 GiB ÷ broker_mem_per_connection_kib) from its run with
    the most idle connections (the estimate is firmest there), most first, ranked on the whole number printed.
    Clusters whose runs opened no idle connections, or had no broker samples, are absent."""
    measured = [s for s in steps if s.get(MEM_COLUMN) is not None and (s.get("idle_connections") or 0) > 0]
    best = _best_per_cluster(measured, lambda s: (-s["idle_connections"], s["run_id"], s["step"]))
    rows = [_pick({**s, "connections_per_gib": connections_per_gib(s[MEM_COLUMN])}, CONNECTIONS_COLUMNS) for s in best]
    rows.sort(key=lambda r: (-_shown_count(r["connections_per_gib"]), r["cluster"]))
    return rank(rows, lambda r: _shown_count(r["connections_per_gib"]) or None)


def _shown_count(x: float | None) -> float:
    return float(round(x)) if x is not None else 0.0


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


def board(steps: list[Row], costs: list[Row], prices: Any, tolerance: float, latency_limit_ms: float,
          target_rate: float | None = None, search: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every leaderboard of leaderboard.json from the matched step rows, and each cluster's verdict.

    ``prices`` is rbench.reduce.costs.Prices; ``search`` the rate search's search.json when the
    runs are its probes (then each cluster's verdict is the search's answer)."""
    top = top_throughput(steps)
    chosen = target_rate if target_rate is not None else default_target(steps)
    return {
        "top_throughput": top,
        "highest_matched": highest_matched(steps),
        "cost_at_top": cost_at_top(top, costs),
        "target_rate": chosen,
        "target_rate_chosen_by": "--target-rate" if target_rate is not None else "highest target every cluster matched",
        "cost_at_target": cost_at_target(steps, costs, chosen) if chosen is not None else [],
        "connections_per_gib": connections_per_gib_board(steps),
        "costs": costs,
        "tolerance": tolerance, "latency_limit_ms": latency_limit_ms,
        "prices": {"path": prices.path, "source": prices.source, "currency": prices.currency,
                   "hours_per_month": prices.hours_per_month},
        "verdicts": verdicts(steps, costs, tolerance, latency_limit_ms, search),
    }


# the figure each leaderboard ranks on (as printed)
RANKED_ON: dict[str, Callable[[Row], Any]] = {
    "top_throughput": lambda r: shown_rate(r.get("consume_rate")),
    "highest_matched": lambda r: r.get("target_rate"),
    "cost_at_top": lambda r: shown_money(r.get("cost_per_1k_rate")),
    "cost_at_target": lambda r: shown_money(r.get("cost_per_1k_rate")),
    "connections_per_gib": lambda r: _shown_count(r.get("connections_per_gib")) or None,
}


def complete(saved: dict[str, Any], steps: list[Row], search: dict[str, Any] | None = None) -> dict[str, Any]:
    """A leaderboard.json's board with what older reduces did not write: ranks (ties) and verdicts."""
    out = dict(saved)
    for name, figure in RANKED_ON.items():
        rows = [dict(r) for r in out.get(name) or []]
        if rows and "rank" not in rows[0]:
            out[name] = rank(rows, figure)
    if "verdicts" not in out:
        out["verdicts"] = verdicts(steps, out.get("costs") or [], float(out.get("tolerance", 0.02)),
                                   float(out.get("latency_limit_ms", 1000.0)), search)
    return out
