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


# --- a run with faults: deterministic rows whose every fault figure is known in advance ---

S = 1_000_000_000
MS = 1_000_000


@dataclass
class FaultRun:
    run_dir: Path
    run_json: dict[str, Any]
    published: dict[str, np.ndarray]
    consumed: dict[str, np.ndarray]


def make_fault_run(root: Path, run_id: str = "20261121T000000Z-faults-0001", t0_ns: int = 1_790_000_000_000_000_000) -> FaultRun:
    """Two clusters, one step each, 2 producers × 100 msg/s (producer p's k-th message intended at
    t0 + k·10 ms + p·5 ms, sent 0.1 ms later, confirmed 2 ms and received 3 ms after sending), one queue
    per producer, warm-up 2 s. What happens, in s since the cluster's t0:

    cluster "a" (30 s, confirms on):
    * fault 1 (index 0): kill rabbit-2 at 10.25, action ended 10.30, restart 20.0 → back 20.1.
      Producer 1's connection dies at the cut: its 3 messages sent in [10.22, 10.25) get outcome
      connection_lost (k 1022 and 1023 are consumed anyway, 1024 is not) and it skips its 150 slots
      in [10.25, 11.75) (reconnect of task 1 after 1.499 s; task 0's consumers reconnect after 3.898 s).
      Every confirm due after 10.25 waits until 10.67: first confirm 0.37 s after the action ended. Deliveries due in
      [10.25, 14.25) arrive in one burst at 14.25, in order: seconds 11–13 consume 0, second 14 consumes 800,
      then 200/s: consume rate back after 14 − 10.25 = 3.75 s (pre-fault mean 200/s over seconds 2–9).
    * fault 2 (index 1): stop rabbit-3 at 25.5 (never back; no visible effect): first confirm after
      0.0021 s, back after 0.5 s; its pre-fault mean leaves out seconds 10–16 (fault 1 through its
      recovery run): seconds 2–9 and 17–24 = 3205 / 16.
    * injected fates (steps' measured messages: t_intended ≥ 2 s): producer 0 k 1600, 1601 acked and
      never consumed (lost, in both windows); producer 0 k 2000–2004 delivered again at 20.110 + i ms,
      redelivered (duplicated and late: reordered, both windows); producer 1 k 1800 and 1801 received
      swapped (1 reorder, both windows). In the warm-up, outside every window: producer 0 k 5 lost,
      producer 1 k 10 delivered again at 0.2 s (duplicated, reordered, redelivered).
    cluster "b" (10 s, 1000 s later, confirms off): pause rabbit-3 at 1.0 (warm-up), back 1.5; nothing
    else happens.
    """
    run_dir = Path(root) / run_id
    pubs: list[dict[str, np.ndarray]] = []
    cons: list[dict[str, np.ndarray]] = []
    clusters_json: list[dict[str, Any]] = []
    faults_json: list[dict[str, Any]] = []
    for name, t0, dur_s, confirm in (("a", t0_ns, 30, True), ("b", t0_ns + 1000 * S, 10, False)):
        n = dur_s * 100
        prod = np.repeat(np.arange(2, dtype=np.int32), n)
        k = np.tile(np.arange(n, dtype=np.int64), 2)
        t_int = t0 + k * 10 * MS + prod.astype(np.int64) * 5 * MS
        t_sent = t_int + 100_000
        t_conf = t_sent + 2 * MS
        t_recv = t_sent + 3 * MS
        outcome = np.full(k.size, "ack" if confirm else "unconfirmed", dtype=object)
        published = np.ones(k.size, dtype=bool)
        delivered = np.ones(k.size, dtype=bool)
        extra: list[tuple[int, int]] = []                # (row, t_received) of second copies, redelivered
        reconnects: list[dict[str, Any]] = []
        if name == "a":
            f1 = t0 + 10_250 * MS
            p1 = prod == 1
            cut = p1 & (t_sent >= f1 - 30 * MS) & (t_sent < f1)
            outcome[cut] = "connection_lost"
            delivered[cut & (k == 1024)] = False
            published[p1 & (t_int >= f1) & (t_int < f1 + 1500 * MS)] = False
            t_conf = np.where(t_conf >= f1, np.maximum(t_conf, f1 + 420 * MS), t_conf)
            held = (t_recv >= f1) & (t_recv < f1 + 4 * S) & published & delivered
            order = np.flatnonzero(held)[np.argsort(t_recv[held], kind="stable")]
            t_recv[order] = f1 + 4 * S + np.arange(order.size) * 4_000     # all in before the next due one (+3.1 ms)
            p0 = prod == 0
            delivered[p0 & np.isin(k, [5, 1600, 1601])] = False
            extra += [(int(np.flatnonzero(p0 & (k == 2000 + i))[0]), t0 + 20_110 * MS + i * MS) for i in range(5)]
            extra.append((int(np.flatnonzero(p1 & (k == 10))[0]), t0 + 200 * MS))
            a, b = np.flatnonzero(p1 & (k == 1800))[0], np.flatnonzero(p1 & (k == 1801))[0]
            t_recv[a], t_recv[b] = t_recv[b], t_recv[a]
            reconnects = [{"task": 1, "t_lost_ns": f1 + MS, "t_back_ns": f1 + 1500 * MS, "uri": "amqp://guest:***@127.0.0.1:5673/",
                           "in_flight": 3, "skipped": 150},
                          {"task": 0, "t_lost_ns": f1 + 2 * MS, "t_back_ns": f1 + 3900 * MS, "uri": None, "in_flight": 0, "skipped": 0}]
            faults_json += [
                _fault(name, 0, "kill", "rabbit-2", 10.25, 9.75, f1, f1 + 50 * MS, t0 + 20 * S, t0 + 20_100 * MS),
                _fault(name, 1, "stop", "rabbit-3", 25.5, None, t0 + 25_500 * MS, t0 + 25_600 * MS, None, None)]
        else:
            faults_json.append(_fault(name, 0, "pause", "rabbit-3", 1.0, 0.4, t0 + S, t0 + 1_010 * MS, t0 + 1_400 * MS,
                                      t0 + 1_500 * MS))
        conf_null = ~np.isin(outcome, ["ack"])
        queue = np.array([f"q-{p}" for p in range(2)], dtype=object)[prod]
        pm = published
        pub = {"run_id": np.full(pm.sum(), run_id, dtype=object), "cluster": np.full(pm.sum(), name, dtype=object),
               "step": np.zeros(pm.sum(), dtype=np.int32), "task": prod[pm], "producer": prod[pm], "queue": queue[pm],
               "seq": k[pm], "size": np.full(pm.sum(), 64, dtype=np.int32), "t_intended": t_int[pm], "t_sent": t_sent[pm],
               "t_confirmed": np.where(conf_null, 0, t_conf)[pm], "t_confirmed_null": conf_null[pm], "outcome": outcome[pm]}
        rows = np.concatenate([np.flatnonzero(pm & delivered), np.array([r for r, _ in extra], dtype=np.int64)])
        recv = np.concatenate([t_recv[pm & delivered], np.array([t for _, t in extra], dtype=np.int64)])
        red = np.concatenate([np.zeros((pm & delivered).sum(), dtype=bool), np.ones(len(extra), dtype=bool)])
        con = {"run_id": np.full(rows.size, run_id, dtype=object), "cluster": np.full(rows.size, name, dtype=object),
               "step": np.zeros(rows.size, dtype=np.int32), "task": prod[rows], "consumer": prod[rows], "queue": queue[rows],
               "producer": prod[rows], "seq": k[rows], "size": np.full(rows.size, 64, dtype=np.int32),
               "t_intended": t_int[rows], "t_sent": t_sent[rows], "t_received": recv, "redelivered": red}
        for kind, cols, sch in (("published", pub, PUBLISHED_SCHEMA), ("consumed", con, CONSUMED_SCHEMA)):
            for t in range(2):
                w = _PartWriter(run_dir / kind / name / f"task-{t:05d}" / f"attempt-{100 + t}", sch, 65_536)
                w.write(_table(cols, cols["task"] == t, sch))
                w.commit()
        pubs.append(pub)
        cons.append(con)
        clusters_json.append({"name": name, "nodes": 3, "instance_type": "local", "volume_type": "local", "volume_gb": 0,
                              "uris": ["amqp://guest:***@127.0.0.1:5672/"], "tasks": 2, "producers": 2, "consumers": 2,
                              "t0_ns": t0, "status": "complete", "reconnects": reconnects,
                              "steps": [{"step": 0, "rate_per_producer": 100.0, "target_rate": 200.0, "duration_s": dur_s,
                                         "start_ns": t0, "end_ns": t0 + dur_s * S, "status": "complete"}]})
    run_json = {"run_id": run_id, "status": "complete", "workload_name": "faults", "workload": {"name": "faults"},
                "workload_hash": "fa17", "driver": "synthetic", "started_at": "2026-11-21T00:00:00+00:00",
                "ended_at": "2026-11-21T00:20:00+00:00", "warmup_s": 2.0, "clusters": clusters_json,
                "routes": {"0": ["q-0"], "1": ["q-1"]}, "faults": faults_json,
                "clock": "producers and consumers of a queue share a task (one clock)", "host": {"hostname": "synthetic"},
                "message_count": None}
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps(run_json, indent=2))
    return FaultRun(run_dir, run_json, {k: np.concatenate([p[k] for p in pubs]) for k in pubs[0]},
                    {k: np.concatenate([c[k] for c in cons]) for k in cons[0]})


def _fault(cluster: str, index: int, action: str, node: str, at_s: float, restart_after_s: float | None, start: int,
           end: int, back_start: int | None, back_end: int | None) -> dict[str, Any]:
    """One entry of run.json ``faults`` (the coordinator's log of an executed action)."""
    return {"cluster": cluster, "index": index, "action": action, "node": node, "at_s": at_s,
            "restart_after_s": restart_after_s, "t_start_ns": start, "t_end_ns": end, "t_back_start_ns": back_start,
            "t_back_end_ns": back_end, "ok": True, "error": None}


# --- one queue read by two consumers: competing (a classic queue) or each reading everything (a stream) ---

READERS_N = 200


def make_readers_run(root: Path, shape: str) -> Path:
    """One producer, READERS_N messages at 100 msg/s (t_intended = t0 + k·10 ms, sent 0.1 ms later, acked), two
    consumers; consumer 0 receives 2 ms after sending, consumer 1 lags 25 ms, so their receive times interleave
    (every odd message of consumer 1 comes after a higher one of consumer 0). No warm-up: every message is measured.

    * ``competing``: classic queue ``q``, consumer k gets the messages with seq mod 2 = k. Consumer 0 receives
      100 and 102 swapped (1 reorder); 51 is redelivered to consumer 0 100 ms after it went to consumer 1 (flagged;
      duplicated 1, a reorder for consumer 0). Expected: reordered 2, duplicated 1, lost 0, expected N.
    * ``stream`` (``stream-sac``: the same with single_active): stream ``s``, each consumer reads every message;
      consumer 1 never gets 40; consumer 0 reads 70 again 15 ms later (after 71). Plain readers: expected 2N,
      consumed_unique 2N − 1, lost 1, duplicated 1, reordered 1. A single-active group is one reader (the rows
      then stand for a group that re-read everything): expected N, lost 0, duplicated N.
    * ``super``: super stream ``s`` of partitions s-0 (even seq) and s-1 (odd seq), published under ``s``, no
      routes; each consumer reads both partitions, the same faults as ``stream`` (consumer 0's re-read of 70
      comes after 72: order is per partition)."""
    run_id = f"run-readers-{shape}"
    run_dir = root / run_id
    t0 = 1_700_000_000_000_000_000
    n = READERS_N
    t_int = [t0 + k * 10 * MS for k in range(n)]
    sent = [t + 100_000 for t in t_int]
    stream = shape != "competing"
    queue = "s" if stream else "q"
    pub = {"run_id": [run_id] * n, "cluster": ["c"] * n, "step": [0] * n, "task": [0] * n, "producer": [0] * n,
           "queue": [queue] * n, "seq": list(range(n)), "size": [100] * n, "t_intended": t_int, "t_sent": sent,
           "t_confirmed": [t + MS for t in sent], "outcome": ["ack"] * n}
    rows: list[tuple[int, int, int, bool]] = []          # (consumer, seq, t_received, redelivered)
    lag = (2 * MS, 25 * MS)
    if shape == "competing":
        rows += [(k % 2, k, sent[k] + lag[k % 2], False) for k in range(n)]
        swap = {100: sent[102] + lag[0], 102: sent[100] + lag[0]}
        rows = [(c, k, swap.get(k, t), r) for c, k, t, r in rows]
        rows.append((0, 51, sent[51] + 100 * MS, True))
    else:
        for c in (0, 1):
            rows += [(c, k, sent[k] + lag[c], False) for k in range(n) if (c, k) != (1, 40)]
        rows.append((0, 70, sent[70] + 15 * MS if shape != "super" else sent[70] + 25 * MS, False))
    con: dict[str, list[Any]] = {name: [] for name in CONSUMED_SCHEMA.names}
    for c, k, t, r in rows:
        q = f"s-{k % 2}" if shape == "super" else queue
        for key, value in (("run_id", run_id), ("cluster", "c"), ("step", 0), ("task", 0), ("consumer", c), ("queue", q),
                           ("producer", 0), ("seq", k), ("size", 100), ("t_intended", t_int[k]), ("t_sent", sent[k]),
                           ("t_received", t), ("redelivered", r)):
            con[key].append(value)
    for kind, cols, sch in (("published", pub, PUBLISHED_SCHEMA), ("consumed", con, CONSUMED_SCHEMA)):
        w = _PartWriter(run_dir / kind / "c" / "task-00000" / "attempt-1", sch, 65_536)
        w.write(pa.Table.from_pydict(cols, sch))
        w.commit()
    queues: dict[str, Any] = {"name": queue, "type": "stream" if stream else "classic"}
    if shape == "super":
        queues["super_stream"] = {"partitions": 2}
    end = t0 + n * 10 * MS
    run_json = {"run_id": run_id, "status": "complete", "workload_name": "readers", "workload_hash": "r",
                "workload": {"name": "readers", "producers": 1, "consumers": 2, "queues": queues,
                             "consumer": {"single_active": shape == "stream-sac"}},
                "driver": "stream" if stream else "amqp091", "warmup_s": 0.0,
                "routes": None if shape == "super" else {"0": [queue]},
                "clusters": [{"name": "c", "nodes": 1, "instance_type": "local", "volume_type": "local", "volume_gb": 0,
                              "tasks": 1, "producers": 1, "consumers": 2, "t0_ns": t0, "status": "complete",
                              "steps": [{"step": 0, "rate_per_producer": 100.0, "target_rate": 100.0, "start_ns": t0,
                                         "end_ns": end, "duration_s": n / 100, "status": "complete"}]}]}
    (run_dir / "run.json").write_text(json.dumps(run_json, indent=2))
    return run_dir
