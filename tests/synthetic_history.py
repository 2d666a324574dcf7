"""Synthetic nightly histories written through the real `history add` path (run.json + a reduce's files)."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rbench.history.store import add_run


def nights(n: int, start: str = "2030-03-01") -> list[str]:
    d0 = dt.date.fromisoformat(start)
    return [(d0 + dt.timedelta(days=i)).isoformat() for i in range(n)]


def noisy(n: int, seed: int, level: float = 20_000.0, cv: float = 0.05, drop_at: int | None = None,
          drop: float = 0.10) -> np.ndarray:
    """n nights of a throughput with coefficient of variation `cv`; from night `drop_at` on, `drop` lower."""
    rng = np.random.default_rng(seed)
    v = level * (1 + cv * rng.standard_normal(n))
    if drop_at is not None:
        v[drop_at:] *= 1 - drop
    return v


def write_history(history: Path, work: Path, throughput: np.ndarray, latency_ms: np.ndarray | None = None,
                  commits: list[str] | None = None, workload: str = "nightly", regress: dict[str, Any] | None = None,
                  brokers: list[str] | None = None) -> list[str]:
    """One run per night: run.json, report/steps.parquet and leaderboard.json, appended with add_run. ``brokers``:
    each night's RabbitMQ version, recorded as a run records it (clusters[].broker); else an older run.json's
    run-level broker_version."""
    run_ids = []
    for i, night in enumerate(nights(throughput.size)):
        run_id = f"{night.replace('-', '')}T020000Z-{workload}-{i:04x}"
        run_dir = work / run_id
        (run_dir / "report").mkdir(parents=True)
        (run_dir / "run.json").write_text(json.dumps({
            "run_id": run_id, "status": "complete", "workload_name": workload, "workload_hash": "h1",
            "workload": {"name": workload, **({"regress": regress} if regress else {})},
            "driver": "amqp091", "started_at": f"{night}T02:00:00+00:00", "host": {"rbench": "0.1.0"},
            **({} if brokers else {"broker_version": "3.13.1" if i >= throughput.size - 3 else "3.12.4"}),
            "clusters": [{"name": "c3", "nodes": 3, "instance_type": "m5.large", "volume_type": "gp3", "volume_gb": 100,
                          "tasks": 2, **({"broker": {"product": "RabbitMQ", "version": brokers[i]}} if brokers else {})}]}))
        row = {"run_id": run_id, "cluster": "c3", "step": 0, "target_rate": 30_000.0,
               "publish_rate": float(throughput[i]) * 1.001, "consume_rate": float(throughput[i]),
               "confirm_rate": float(throughput[i]),
               "e2e_p99_ms": float(latency_ms[i]) if latency_ms is not None else 12.0, "matched": False}
        pq.write_table(pa.Table.from_pylist([row]), run_dir / "report" / "steps.parquet")
        (run_dir / "report" / "leaderboard.json").write_text(json.dumps({"leaderboard": {"top_throughput": [
            {"cluster": "c3", "run_id": run_id, "step": 0, "consume_rate": row["consume_rate"]}]}}))
        add_run(history, run_dir, commit=commits[i] if commits else f"c{i:03d}")
        run_ids.append(run_id)
    return run_ids
