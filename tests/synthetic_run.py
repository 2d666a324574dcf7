"""Synthetic run directories that follow docs/parquet.md, with known faults injected.

Used by the reduce tests (small runs, every row kept so numpy can recompute each
figure independently) and by bench/bench_reduce.py (tens of millions of rows,
written chunk by chunk so memory stays bounded; rows are not kept).

Model, per cluster: each producer publishes on an open-loop schedule
(``t_intended = step start + k / rate``); the broker is a single FIFO server of
``capacity`` msg/s, so above capacity the received times fall behind and latency
grows, exactly as a saturated cluster behaves. Faults are drawn at fixed
probabilities: nack, returned, confirm timeout, lost (acked but never consumed),
duplicated (delivered twice, the copy later), reordered (two neighbours of one
producer swap their receive times).

Besides the real attempts the generator writes a superseded committed attempt
(lower attempt id, garbage rows) and an uncommitted attempt for one task, which a
correct reduce must ignore.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rbench.samples import schema
from rbench.samples.schema import CONSUMED_SCHEMA, PUBLISHED_SCHEMA  # the contract the run writes

OUTCOMES = np.array(schema.OUTCOMES)


@dataclass
class SynthCluster:
    name: str
    capacity: float                      # msg/s the simulated broker can deliver
    nodes: int = 3
    instance_type: str = "m5.large"
    volume_type: str = "gp3"
    volume_gb: int = 100


@dataclass
class SynthSpec:
    run_id: str = "20261121T000000Z-synthetic-0001"
    clusters: list[SynthCluster] = field(default_factory=lambda: [SynthCluster("fast", 1e9), SynthCluster("slow", 700.0)])
    rates: list[float | None] = field(default_factory=lambda: [50.0, 100.0, 200.0])   # per producer
    durations_s: list[float] = field(default_factory=lambda: [4.0, 4.0, 4.0])
    producers: int = 4
    queues: int = 2
    tasks: int = 2
    warmup_s: float = 1.0
    size: int = 1024
    confirm: bool = True
    p_nack: float = 0.004
    p_returned: float = 0.003
    p_timeout: float = 0.003
    p_connection_lost: float = 0.003     # in flight at a cut: delivered (or lost) like an ack
    p_lost: float = 0.004
    p_dup: float = 0.005
    p_reorder: float = 0.005
    part_rows: int = 65_536
    seed: int = 7
    status: str = "complete"
    workload_hash: str = "feedc0ffee123456"
    t0_ns: int = 1_790_000_000_000_000_000
    keep_rows: bool = True
    extra_attempts: bool = True          # superseded + uncommitted attempts that must be ignored


@dataclass
class SynthRun:
    run_dir: Path
    spec: SynthSpec
    run_json: dict[str, Any]
    published: dict[str, np.ndarray] = field(default_factory=dict)   # column → array (real attempts only)
    consumed: dict[str, np.ndarray] = field(default_factory=dict)
    rows_written: int = 0


class _PartWriter:
    """Writes one attempt folder: part files of at most ``part_rows`` rows, then _COMMITTED."""

    def __init__(self, folder: Path, schema: pa.Schema, part_rows: int) -> None:
        self.folder, self.schema, self.part_rows = folder, schema, part_rows
        self.parts = 0
        self.rows = 0
        folder.mkdir(parents=True, exist_ok=True)

    def write(self, table: pa.Table) -> None:
        for start in range(0, table.num_rows, self.part_rows):
            piece = table.slice(start, self.part_rows)
            pq.write_table(piece, self.folder / f"part-{self.parts:05d}.parquet")
            self.parts += 1
            self.rows += piece.num_rows

    def commit(self, interrupted: bool = False) -> None:
        (self.folder / "_COMMITTED").write_text(json.dumps({"rows": self.rows, "parts": self.parts, "interrupted": interrupted}))


def _fifo_departures(arrivals: np.ndarray, capacity: float, busy_until: float) -> np.ndarray:
    """Departure times (s) of a FIFO server with service time 1/capacity, arrivals sorted.

    d_k = max(a_k, d_{k-1}) + 1/c  unrolls to  d_k = (k+1)/c + max(busy - 0/c, max_{j<=k} (a_j - j/c)).
    """
    s = 1.0 / capacity
    k = np.arange(arrivals.size, dtype=np.float64)
    slack = np.maximum.accumulate(np.maximum(arrivals - k * s, busy_until))
    return slack + (k + 1) * s


def make_run(root: Path, spec: SynthSpec | None = None) -> SynthRun:
    """Write one run directory under ``root`` and return what was written."""
    spec = spec or SynthSpec()
    rng = np.random.default_rng(spec.seed)
    run_dir = Path(root) / spec.run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    queues = np.array([f"q-{i}" for i in range(spec.queues)])
    clusters_json = []
    pub_keep: list[dict[str, np.ndarray]] = []
    con_keep: list[dict[str, np.ndarray]] = []
    rows_written = 0
    for ci, cl in enumerate(spec.clusters):
        t0 = spec.t0_ns + ci * 10**12        # clusters run in turn, 1000 s apart
        steps_json = []
        start = t0
        for si, (rate, dur) in enumerate(zip(spec.rates, spec.durations_s)):
            end = start + int(dur * 1e9)
            steps_json.append({"step": si, "rate_per_producer": rate,
                               "target_rate": None if rate is None else rate * spec.producers,
                               "duration_s": dur, "start_ns": start, "end_ns": end})
            start = end
        clusters_json.append({"name": cl.name, "nodes": cl.nodes, "instance_type": cl.instance_type,
                              "volume_type": cl.volume_type, "volume_gb": cl.volume_gb, "uris": ["amqp://guest:***@127.0.0.1:5672/"],
                              "tasks": spec.tasks, "producers": spec.producers, "consumers": spec.producers,
                              "t0_ns": t0, "status": "complete", "steps": steps_json})
        base = 1000 + 10 * ci                 # attempt ids: real attempts are the highest
        pub_writers = {t: _PartWriter(run_dir / "published" / cl.name / f"task-{t:05d}" / f"attempt-{base + t}", PUBLISHED_SCHEMA, spec.part_rows)
                       for t in range(spec.tasks)}
        con_writers = {t: _PartWriter(run_dir / "consumed" / cl.name / f"task-{t:05d}" / f"attempt-{base + t}", CONSUMED_SCHEMA, spec.part_rows)
                       for t in range(spec.tasks)}
        busy = 0.0
        for st in steps_json:
            rate = st["rate_per_producer"] or 1000.0
            n = int(rate * st["duration_s"])
            prod = np.repeat(np.arange(spec.producers, dtype=np.int32), n)
            k = np.tile(np.arange(n, dtype=np.int64), spec.producers)
            seq = k + sum(int((s["rate_per_producer"] or 1000.0) * s["duration_s"]) for s in steps_json[: st["step"]])
            phase = (prod.astype(np.int64) * int(1e9 / rate)) // spec.producers
            t_int = st["start_ns"] + (k * int(1e9 / rate)) + phase
            t_sent = t_int + rng.integers(20_000, 200_000, t_int.size)
            u = rng.random(t_int.size)
            outcome_idx = np.zeros(t_int.size, dtype=np.int8)
            if spec.confirm:
                outcome_idx[u < spec.p_nack] = 1
                outcome_idx[(u >= spec.p_nack) & (u < spec.p_nack + spec.p_returned)] = 2
                outcome_idx[(u >= spec.p_nack + spec.p_returned) & (u < spec.p_nack + spec.p_returned + spec.p_timeout)] = 3
                cut = spec.p_nack + spec.p_returned + spec.p_timeout
                outcome_idx[(u >= cut) & (u < cut + spec.p_connection_lost)] = 5
            else:
                outcome_idx[:] = 4
            conf_lat = rng.exponential(1.5e6, t_int.size).astype(np.int64) + 300_000
            t_conf = np.where(np.isin(outcome_idx, [3, 4, 5]), 0, t_sent + conf_lat)
            conf_null = np.isin(outcome_idx, [3, 4, 5])
            queue_idx = prod % spec.queues
            task = (queue_idx % spec.tasks).astype(np.int32)
            # delivery: everything that reached a queue (ack, timeout, unconfirmed, connection_lost), minus lost
            delivered = np.isin(outcome_idx, [0, 3, 4, 5]) & (rng.random(t_int.size) >= spec.p_lost)
            order = np.argsort(t_sent[delivered], kind="stable")
            d_idx = np.flatnonzero(delivered)[order]
            arrive = (t_sent[d_idx] - t0) / 1e9 + 0.0002
            depart = _fifo_departures(arrive, cl.capacity, busy)
            busy = float(depart[-1]) if depart.size else busy
            t_recv = t0 + (depart * 1e9).astype(np.int64) + rng.integers(50_000, 400_000, d_idx.size)
            # reorder: swap receive times of neighbouring messages of one producer
            sw = np.flatnonzero(rng.random(d_idx.size) < spec.p_reorder)
            by_prod = np.lexsort((seq[d_idx], prod[d_idx]))
            pos = np.empty_like(by_prod)
            pos[by_prod] = np.arange(by_prod.size)
            for i in sw:
                p = pos[i]
                if p + 1 < by_prod.size:
                    j = by_prod[p + 1]
                    if prod[d_idx[j]] == prod[d_idx[i]]:
                        t_recv[i], t_recv[j] = t_recv[j], t_recv[i]
            redeliv = np.zeros(d_idx.size, dtype=bool)
            dup = np.flatnonzero(rng.random(d_idx.size) < spec.p_dup)
            c_idx = np.concatenate([d_idx, d_idx[dup]])
            c_recv = np.concatenate([t_recv, t_recv[dup] + rng.integers(1_000_000, 50_000_000, dup.size)])
            c_red = np.concatenate([redeliv, np.ones(dup.size, dtype=bool)])
            pub = {"run_id": np.full(t_int.size, spec.run_id, dtype=object), "cluster": np.full(t_int.size, cl.name, dtype=object),
                   "step": np.full(t_int.size, st["step"], dtype=np.int32), "task": task, "producer": prod,
                   "queue": queues[queue_idx], "seq": seq, "size": np.full(t_int.size, spec.size, dtype=np.int32),
                   "t_intended": t_int, "t_sent": t_sent, "t_confirmed": t_conf, "t_confirmed_null": conf_null,
                   "outcome": OUTCOMES[outcome_idx]}
            con = {"run_id": np.full(c_idx.size, spec.run_id, dtype=object), "cluster": np.full(c_idx.size, cl.name, dtype=object),
                   "step": np.full(c_idx.size, st["step"], dtype=np.int32), "task": task[c_idx],
                   "consumer": prod[c_idx], "queue": queues[queue_idx[c_idx]], "producer": prod[c_idx], "seq": seq[c_idx],
                   "size": np.full(c_idx.size, spec.size, dtype=np.int32), "t_intended": t_int[c_idx], "t_sent": t_sent[c_idx],
                   "t_received": c_recv, "redelivered": c_red}
            for t in range(spec.tasks):
                pm = pub["task"] == t
                pub_writers[t].write(_table(pub, pm, PUBLISHED_SCHEMA))
                cm = con["task"] == t
                con_writers[t].write(_table(con, cm, CONSUMED_SCHEMA))
            rows_written += t_int.size + c_idx.size
            if spec.keep_rows:
                pub_keep.append(pub)
                con_keep.append(con)
        for w in [*pub_writers.values(), *con_writers.values()]:
            w.commit(interrupted=spec.status == "interrupted")
        if spec.extra_attempts:
            _write_decoys(run_dir, cl.name, spec, base, rng)
    run_json = {
        "run_id": spec.run_id, "status": spec.status, "workload_name": "synthetic",
        "workload": {"name": "synthetic", "producers": spec.producers, "size": spec.size},
        "workload_hash": spec.workload_hash, "driver": "synthetic",
        "started_at": "2026-11-21T00:00:00+00:00", "ended_at": "2026-11-21T00:10:00+00:00",
        "warmup_s": spec.warmup_s, "clusters": clusters_json,
        "clock": "producers and consumers of a queue share a task (one clock)",
        "host": {"hostname": "synthetic"}, "message_count": None,
    }
    (run_dir / "run.json").write_text(json.dumps(run_json, indent=2))
    result = SynthRun(run_dir, spec, run_json, rows_written=rows_written)
    if spec.keep_rows:
        result.published = {k: np.concatenate([p[k] for p in pub_keep]) for k in pub_keep[0]}
        result.consumed = {k: np.concatenate([c[k] for c in con_keep]) for k in con_keep[0]}
    return result


def _table(cols: dict[str, np.ndarray], mask: np.ndarray, schema: pa.Schema) -> pa.Table:
    arrays = []
    for f in schema:
        values = cols[f.name][mask]
        if f.name == "t_confirmed":
            arrays.append(pa.array(values, type=f.type, mask=cols["t_confirmed_null"][mask]))
        else:
            arrays.append(pa.array(values, type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _write_decoys(run_dir: Path, cluster: str, spec: SynthSpec, base: int, rng: np.random.Generator) -> None:
    """A superseded committed attempt and a newer uncommitted one for task 0: both must be ignored."""
    n = 500
    st = 0
    t = spec.t0_ns
    for kind, kind_schema in (("published", PUBLISHED_SCHEMA), ("consumed", CONSUMED_SCHEMA)):
        cols: dict[str, np.ndarray] = {
            "run_id": np.full(n, spec.run_id, dtype=object), "cluster": np.full(n, cluster, dtype=object),
            "step": np.full(n, st, dtype=np.int32), "task": np.zeros(n, dtype=np.int32),
            "producer": np.zeros(n, dtype=np.int32), "consumer": np.zeros(n, dtype=np.int32),
            "queue": np.full(n, "q-0", dtype=object), "seq": np.arange(n, dtype=np.int64),
            "size": np.full(n, 1, dtype=np.int32), "t_intended": np.full(n, t + 2 * 10**9), "t_sent": np.full(n, t + 2 * 10**9),
            "t_confirmed": np.full(n, t + 3 * 10**9), "t_confirmed_null": np.zeros(n, dtype=bool),
            "outcome": np.full(n, "nack", dtype=object), "t_received": np.full(n, t + 2 * 10**9 + 5 * 10**9),
            "redelivered": np.ones(n, dtype=bool),
        }
        old = _PartWriter(run_dir / kind / cluster / "task-00000" / f"attempt-{base - 5}", kind_schema, spec.part_rows)
        old.write(_table(cols, np.ones(n, dtype=bool), kind_schema))
        old.commit()
        new = _PartWriter(run_dir / kind / cluster / "task-00000" / f"attempt-{base + 50}", kind_schema, spec.part_rows)
        new.write(_table(cols, np.ones(n, dtype=bool), kind_schema))   # no _COMMITTED: killed mid-write
