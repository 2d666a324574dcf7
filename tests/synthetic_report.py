"""Synthetic reduce outputs (steps.parquet, timeline.parquet, leaderboard.json) for report tests without Spark.

The step rows follow docs/reduce.md's columns; each cluster is a server of ``capacity`` msg/s:
below it the consume rate follows the target and p99 stays low, above it the consume rate
saturates and the p99 grows with the backlog. The board comes from the reduce's own functions
(rbench.reduce.leaderboard.board, rbench.reduce.costs), so what a test renders is what a reduce
of the same figures would write; `rbench report DIR` then re-renders it as it would a real one.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rbench.reduce import costs as costmod
from rbench.reduce import leaderboard as lb
from rbench.report.render import STEP_COLUMNS

T0 = 1_790_000_000_000_000_000
Row = dict[str, Any]


def step_rows(capacities: dict[str, float], targets: list[float], run_id: str = "20261121T000000Z-synth-0001",
              duration_s: float = 4.0, warmup_s: float = 1.0, tolerance: float = 0.02,
              latency_limit_ms: float = 1000.0, generator_bound_at: dict[str, float] | None = None,
              t0: int = T0) -> list[Row]:
    """One row per (cluster, step) with the reduce's columns; clusters run one after another."""
    rows = []
    for ci, (cluster, capacity) in enumerate(sorted(capacities.items())):
        start = t0 + ci * 10**12
        for i, target in enumerate(targets):
            consumed = min(target, capacity)
            backlog_s = max(0.0, (target - capacity) * duration_s / capacity)
            p99 = 2.0 + 0.5 * i + backlog_s * 1000.0
            row: Row = {k: None for k, _ in STEP_COLUMNS}
            end = start + int(duration_s * 1e9)
            row.update(run_id=run_id, cluster=cluster, step=i, target_rate=float(target), publish_rate=float(target),
                       confirm_rate=float(consumed), consume_rate=float(consumed), e2e_p50_ms=p99 / 2,
                       e2e_p75_ms=p99 * 0.7, e2e_p95_ms=p99 * 0.9, e2e_p99_ms=p99, e2e_p999_ms=p99 * 1.1,
                       e2e_max_ms=p99 * 1.3, confirm_p50_ms=1.0, confirm_p99_ms=3.0, confirm_p999_ms=4.0,
                       send_lag_p99_ms=0.2, published=int(target * (duration_s - warmup_s)),
                       deliveries=int(consumed * (duration_s - warmup_s)), window_s=duration_s - warmup_s,
                       warmup_s=warmup_s, start_ns=start, end_ns=end, meas_start_ns=start + int(warmup_s * 1e9),
                       generator_bound=False, gen_cpu_max=0.2, gen_loop_lag_p99_ms=0.5, gen_window_full_min=0.0,
                       generator_note=None)
            bound = (generator_bound_at or {}).get(cluster)
            if bound is not None and target >= bound:
                row.update(generator_bound=True, generator_note="generator-bound: a task used 0.98 cores",
                           consume_rate=float(min(consumed, bound * 0.9)), gen_cpu_max=0.98)
            row["matched"] = lb.is_matched(row, tolerance, latency_limit_ms)
            rows.append(row)
            start = end
    return rows


def timeline_rows(steps: list[Row], tail_s: float = 0.4) -> list[Row]:
    """Per second since each (run, cluster)'s first step, as the reduce's timeline: whole seconds at the step's
    consume rate, then the drain's partial second (``tail_s`` of it) with a few late deliveries."""
    out = []
    for key in sorted({(s["run_id"], s["cluster"]) for s in steps}):
        mine = sorted((s for s in steps if (s["run_id"], s["cluster"]) == key), key=lambda s: s["start_ns"])
        t0 = mine[0]["start_ns"]
        for s in mine:
            first, last = (s["start_ns"] - t0) // 10**9, (s["end_ns"] - t0) // 10**9
            for sec in range(first, last):
                out.append({"run_id": key[0], "cluster": key[1], "second": sec, "published": int(s["publish_rate"]),
                            "consumed": int(s["consume_rate"]), "e2e_p50_ms": s["e2e_p50_ms"],
                            "e2e_p99_ms": s["e2e_p99_ms"], "e2e_max_ms": s["e2e_max_ms"]})
        end = (mine[-1]["end_ns"] - t0) // 10**9
        if tail_s:
            out.append({"run_id": key[0], "cluster": key[1], "second": end, "published": 0,
                        "consumed": max(1, int(mine[-1]["consume_rate"] * tail_s / 10)), "e2e_p50_ms": 5.0,
                        "e2e_p99_ms": 9.0, "e2e_max_ms": 9.5})
    return out


def clusters_of(shapes: dict[str, tuple[int, str, str]]) -> list[Row]:
    """run.json cluster entries: name → (nodes, instance type, volume type), 100 GB volumes."""
    return [{"name": name, "nodes": n, "instance_type": itype, "volume_type": vtype, "volume_gb": 100}
            for name, (n, itype, vtype) in shapes.items()]


def broker_rows(timeline: list[Row]) -> list[Row]:
    """broker_timeline rows (rbench.reduce.broker.SERIES_SCHEMA) beside a timeline: one sample a second."""
    return [{"run_id": t["run_id"], "cluster": t["cluster"], "second": float(t["second"]), "t_ns": T0 + t["second"] * 10**9,
             "depth": float(t["published"] - t["consumed"]), "memory_bytes": 150.0 * 2**20, "cpu_cores": 0.5}
            for t in timeline]


def write_reduce(out_dir: Path, steps: list[Row], timeline: list[Row], shapes: dict[str, tuple[int, str, str]],
                 tolerance: float = 0.02, latency_limit_ms: float = 1000.0, search: dict[str, Any] | None = None,
                 notes: list[str] | None = None, broker: list[Row] | None = None) -> Path:
    """The files `rbench report` re-renders from, with the board the reduce would compute."""
    prices = costmod.load_prices()
    costs, cost_notes = costmod.cluster_costs(clusters_of(shapes), prices)
    board = lb.board(steps, costs, prices, tolerance, latency_limit_ms, search=search)
    runs = sorted({s["run_id"] for s in steps})
    meta = {"runs": [{"run_id": r, "status": "complete", "workload_name": "synth", "workload_hash": "feedc0ffee",
                      "warmup_s": steps[0]["warmup_s"], "driver": "amqp091", "started_at": "2026-11-21T00:00:00+00:00",
                      "ended_at": "2026-11-21T00:01:00+00:00", "clock": "wall", "dir": r} for r in runs],
            "percentile_method": "exact", "rate_method": "rows in window ÷ window", "measured_set": "measured",
            "latencies": {"e2e": "t_received - t_intended"},
            "match_rule": f"matched: consume_rate >= (1 - {tolerance:g}) × target_rate and e2e p99 <= {latency_limit_ms:g} ms",
            "timeline_method": "per-second buckets since the cluster's t0"}
    out_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(steps), out_dir / "steps.parquet")
    pq.write_table(pa.Table.from_pylist(timeline), out_dir / "timeline.parquet")
    if broker:
        from rbench.reduce.broker import SERIES_SCHEMA
        pq.write_table(pa.Table.from_pylist(broker, SERIES_SCHEMA), out_dir / "broker_timeline.parquet")
    doc: dict[str, Any] = {"leaderboard": board, "notes": [*(notes or []), *cost_notes], "meta": meta, "clusters": []}
    if search is not None:
        doc["search"] = search
    (out_dir / "leaderboard.json").write_text(json.dumps(doc, indent=2, default=str))
    return out_dir


def search_doc(cluster: str, probes: list[tuple[float, bool]], run_prefix: str = "20261121T0000") -> dict[str, Any]:
    """A search.json for ``cluster`` whose probes (target msg/s, met?) ran in this order (one producer)."""
    passed = [t for t, ok in probes if ok]
    lo = max(passed, default=None)
    failed = [t for t, ok in probes if not ok and (lo is None or t > lo)]
    hi = min(failed, default=None)
    return {"workload_name": "synth", "rate_search": {"start": probes[0][0], "max": 16000.0, "step": 4.0, "precision": 0.05,
                                                      "max_probes": 20, "slo": {"p99": 1.0, "consume_ratio": 0.98}},
            "clusters": [{"cluster": cluster, "highest_pass": lo, "first_fail": hi,
                          "ended_by": "bracket within the precision" if hi is not None else "met at max (16000/producer)",
                          "answer": f"{cluster}: answer", "probes": [
                              {"rate": t, "target": t, "run_id": f"{run_prefix}{i:02d}Z-synth", "consume_rate": t if ok else t * 0.8,
                               "e2e_p99_ms": 3.0 if ok else 2500.0, "send_lag_p99_ms": 0.1, "passed": ok,
                               "why": "met" if ok else "e2e p99 2,500.0 ms > 1000 ms", "generator": None}
                              for i, (t, ok) in enumerate(probes)]}]}
