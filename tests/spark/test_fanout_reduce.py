"""Fan-out accounting: a message routed to three queues is expected once in each (rbench.reduce.stats)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rbench.reduce.job import reduce_runs
from rbench.samples.layout import attempt_dir
from rbench.samples.schema import CONSUMED_SCHEMA, PUBLISHED_SCHEMA

QUEUES = ["q1", "q2", "q3"]
N = 200
T0 = 1_700_000_000_000_000_000


def _write(folder: Path, table: pa.Table) -> None:
    folder.mkdir(parents=True)
    pq.write_table(table, folder / "part-00000.parquet")
    (folder / "_COMMITTED").write_text(json.dumps({"rows": table.num_rows, "parts": 1, "interrupted": False}))


def _fanout_run(root: Path, routes: dict[str, list[str]] | None) -> Path:
    """One producer, N messages at 100 msg/s, each delivered once to every queue -- except that message 5
    never reaches q2 (one lost copy) and message 7 reaches q3 twice (one duplicated copy)."""
    run_id = "run-fanout" if routes else "run-fanout-unrouted"
    run_dir = root / run_id
    sent = [T0 + i * 10_000_000 for i in range(N)]
    pub = {"run_id": [run_id] * N, "cluster": ["c"] * N, "step": [0] * N, "task": [0] * N, "producer": [0] * N,
           "queue": ["q1"] * N, "seq": list(range(N)), "size": [200] * N, "t_intended": sent, "t_sent": sent,
           "t_confirmed": [t + 1_000_000 for t in sent], "outcome": ["ack"] * N}
    deliveries = [(q, i) for i in range(N) for q in QUEUES if (q, i) != ("q2", 5)] + [("q3", 7)]
    con: dict[str, list[Any]] = {name: [] for name in CONSUMED_SCHEMA.names}
    for q, i in deliveries:
        for key, value in (("run_id", run_id), ("cluster", "c"), ("step", 0), ("task", 0), ("consumer", QUEUES.index(q)),
                           ("queue", q), ("producer", 0), ("seq", i), ("size", 200), ("t_intended", sent[i]),
                           ("t_sent", sent[i]), ("t_received", sent[i] + 2_000_000 + len(con["seq"])),
                           ("redelivered", False)):
            con[key].append(value)
    _write(attempt_dir(root, run_id, "published", "c", 0, 0), pa.Table.from_pydict(pub, PUBLISHED_SCHEMA))
    _write(attempt_dir(root, run_id, "consumed", "c", 0, 0), pa.Table.from_pydict(con, CONSUMED_SCHEMA))
    end = T0 + N * 10_000_000
    info = {"run_id": run_id, "status": "complete", "workload_name": "fanout", "workload_hash": "h", "warmup_s": 0.0,
            "driver": "amqp091", "routes": routes,
            "clusters": [{"name": "c", "nodes": 1, "instance_type": "local", "volume_type": "local", "volume_gb": 0,
                          "t0_ns": T0, "load_end_ns": end, "status": "complete",
                          "steps": [{"step": 0, "target_rate": 100.0, "start_ns": T0, "end_ns": end, "duration_s": 2.0,
                                     "status": "complete"}]}]}
    (run_dir / "run.json").write_text(json.dumps(info))
    return run_dir


def test_fanout_to_three_queues_expects_three_copies(spark: Any, tmp_path: Path) -> None:
    run_dir = _fanout_run(tmp_path, {"0": QUEUES})
    (row,) = reduce_runs([run_dir], session=spark, render=False).steps
    assert row["expected"] == 3 * N
    assert row["lost"] == 1 and row["duplicated"] == 1 and row["reordered"] == 0
    assert row["consumed_unique"] == 3 * N - 1


def test_without_routes_a_message_counts_once_in_any_queue(spark: Any, tmp_path: Path) -> None:
    # older runs (or routing rbench cannot know): one copy in any queue is enough; a duplicate is a second copy
    # in the same queue, so copies in other queues are not duplicates either way
    (row,) = reduce_runs([_fanout_run(tmp_path, None)], session=spark, render=False).steps
    assert row["expected"] == N and row["lost"] == 0
    assert row["duplicated"] == 1
