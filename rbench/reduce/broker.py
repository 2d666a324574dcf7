"""The broker's side of a run, on the client's time axis (docs/broker.md).

Reads each cluster's broker/ Parquet (small: one row per metric per second) with pyarrow and
turns it into a per-sample series -- total depth of the workload's queues, memory, CPU -- with
times in seconds since the cluster's t0 like the client timeline, plus per-step figures: broker
CPU per delivered message, peak memory, messages dropped as unroutable; and per (run, cluster) the
unroutable counters' rise over the run. No Spark: the data is a few thousand rows per hour.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from rbench.samples import broker as bs

SERIES_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("cluster", pa.string()), ("second", pa.float64()), ("t_ns", pa.int64()),
    ("depth", pa.float64()), ("memory_bytes", pa.float64()), ("cpu_cores", pa.float64()),
])
STEP_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("broker_cpu_s", pa.float64()), ("broker_cpu_us_per_msg", pa.float64()), ("broker_mem_peak_mb", pa.float64()),
    ("broker_unroutable_dropped", pa.int64()),
)
# clusters.csv / leaderboard.json "clusters": the unroutable counters' rise over the run (rbench.reduce.unroutable)
CLUSTER_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("unroutable_dropped", pa.int64()), ("unroutable_returned", pa.int64()),
)
# which source's figure a series uses, best first (docs/broker.md)
DEPTH_SOURCES = (("amqp", (bs.QUEUE_READY,)), ("management", (bs.QUEUE_READY, bs.QUEUE_UNACKED)),
                 ("prometheus", ("messages_ready", "messages_unacked")))
MEMORY_SOURCES = (("management", "mem_used_bytes"), ("prometheus", "resident_memory_bytes"), ("proc", "rss_bytes"))
CPU_SOURCES = (("proc", bs.CPU_SECONDS), ("prometheus", bs.ERLANG_RUNTIME))


class BrokerSeries:
    """One cluster's broker samples as arrays on a shared time axis (ns)."""

    def __init__(self, run_id: str, cluster: str, t0_ns: int, table: pa.Table) -> None:
        self.run_id, self.cluster, self.t0_ns = run_id, cluster, t0_ns
        cols = table.to_pydict() if table.num_rows else {n: [] for n in bs.BROKER_SCHEMA.names}
        self._t = np.asarray(cols["t_ns"], dtype=np.int64)
        self._src = np.asarray(cols["source"], dtype=object)
        self._metric = np.asarray(cols["metric"], dtype=object)
        self._queue = np.asarray([q is not None for q in cols["queue"]], dtype=bool)
        self._node = np.asarray(cols["node"], dtype=object)
        self._value = np.asarray(cols["value"], dtype=np.float64)
        self.times = np.unique(self._t)
        self.depth, self.depth_source = self._depth()
        self.memory, self.memory_source = self._node_sum(MEMORY_SOURCES)
        self.cpu_seconds, self.cpu_source = self._node_sum(CPU_SOURCES)
        # what the nodes' connection processes hold (management memory breakdown; NaN where not sampled)
        self.connection_memory = self._per_time((self._src == "management") & ~self._queue
                                                & np.isin(self._metric, bs.CONNECTION_MEMORY))

    @property
    def empty(self) -> bool:
        return self.times.size == 0

    def _per_time(self, sel: np.ndarray) -> np.ndarray:
        """Sum of the selected rows at each sample time (NaN where none)."""
        out = np.full(self.times.size, np.nan)
        if not sel.any():
            return out
        idx = np.searchsorted(self.times, self._t[sel])
        sums = np.bincount(idx, weights=self._value[sel], minlength=self.times.size)
        seen = np.bincount(idx, minlength=self.times.size) > 0
        out[seen] = sums[seen]
        return out

    def _depth(self) -> tuple[np.ndarray, str | None]:
        for source, metrics in DEPTH_SOURCES:
            sel = (self._src == source) & self._queue & np.isin(self._metric, metrics)
            if sel.any():
                return self._per_time(sel), source
        return np.full(self.times.size, np.nan), None

    def _node_sum(self, choices: Sequence[tuple[str, str]]) -> tuple[np.ndarray, str | None]:
        for source, metric in choices:
            sel = (self._src == source) & ~self._queue & (self._metric == metric)
            if sel.any():
                return self._per_time(sel), f"{source} {metric}"
        return np.full(self.times.size, np.nan), None

    def cpu_cores(self) -> np.ndarray:
        """CPU used between a sample and the one before, in cores (NaN for the first sample)."""
        out = np.full(self.times.size, np.nan)
        if self.times.size > 1:
            out[1:] = np.diff(self.cpu_seconds) / (np.diff(self.times) / 1e9)
        return out

    def rows(self) -> list[dict[str, Any]]:
        """SERIES_SCHEMA rows: one per sample time."""
        cores = self.cpu_cores()
        return [{"run_id": self.run_id, "cluster": self.cluster, "second": (int(t) - self.t0_ns) / 1e9, "t_ns": int(t),
                 "depth": _num(d), "memory_bytes": _num(m), "cpu_cores": _num(c)}
                for t, d, m, c in zip(self.times.tolist(), self.depth, self.memory, cores)]

    def cpu_between(self, start_ns: int, end_ns: int) -> float | None:
        """Broker CPU seconds used in [start, end): the counter's rise over the samples inside, scaled to the
        whole window (None with fewer than two samples inside)."""
        sel = (self.times >= start_ns) & (self.times < end_ns) & ~np.isnan(self.cpu_seconds)
        if sel.sum() < 2:
            return None
        t, v = self.times[sel], self.cpu_seconds[sel]
        span = (t[-1] - t[0]) / 1e9
        return float((v[-1] - v[0]) * ((end_ns - start_ns) / 1e9) / span) if span > 0 else None

    def peak_memory(self, start_ns: int, end_ns: int) -> float | None:
        sel = (self.times >= start_ns) & (self.times < end_ns) & ~np.isnan(self.memory)
        return float(self.memory[sel].max()) if sel.any() else None

    def counter_rise(self, metric: str, start_ns: int | None = None, end_ns: int | None = None) -> int | None:
        """How much a Prometheus counter (one per node, e.g. unroutable_dropped_total) rose, summed over the nodes.

        Without a window: from each node's first sample to its last (the cluster's stage: the sampler takes one
        sample before the load and one after). With [start, end): from each node's last sample at or before
        ``start`` to its first at or after ``end`` -- an upper bound of the window's own figure (it may take in
        up to one sampling interval either side), None when a node's samples do not bracket the window. A fall
        is a node restarted: its counter began again from 0 (Prometheus's increase()). None: never sampled."""
        sel = (self._src == "prometheus") & ~self._queue & (self._metric == metric)
        if not sel.any():
            return None
        total = 0.0
        for node in dict.fromkeys(self._node[sel].tolist()):
            mine = sel & (self._node == node)
            order = np.argsort(self._t[mine], kind="stable")
            t, v = self._t[mine][order], self._value[mine][order]
            if start_ns is not None and end_ns is not None:
                first = int(np.searchsorted(t, start_ns, side="right")) - 1   # last sample at or before start
                last = int(np.searchsorted(t, end_ns, side="left"))          # first at or after end
                if first < 0 or last >= t.size:
                    return None
                v = v[first:last + 1]
            total += counter_increase(v)
        return int(round(total))

    def depth_samples(self, start_ns: int, end_ns: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(times, depths) of the samples with a depth in [start, end)."""
        sel = (self.times >= start_ns) & ~np.isnan(self.depth)
        if end_ns is not None:
            sel &= self.times < end_ns
        return self.times[sel], self.depth[sel]


def counter_increase(values: np.ndarray) -> float:
    """A counter's rise over consecutive samples; a fall means it restarted from 0, so the value after it is
    all rise (Prometheus's increase(), without extrapolation)."""
    if values.size < 2:
        return 0.0
    d = np.diff(values)
    return float(np.where(d >= 0, d, values[1:]).sum())


def _num(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def load_series(runs: list[Any]) -> list[BrokerSeries]:
    """A BrokerSeries for every (run, cluster) with broker samples and a t0."""
    out = []
    for run in runs:
        for c in run.clusters:
            if c.t0_ns is None:
                continue
            table = bs.read_broker(run.run_dir, c.name)
            if table.num_rows:
                out.append(BrokerSeries(run.run_id, c.name, c.t0_ns, table))
    return out


def add_step_figures(steps: pa.Table, series: list[BrokerSeries]) -> pa.Table:
    """steps with broker CPU seconds, CPU µs per delivered message, peak memory (MB) and messages dropped as
    unroutable (BrokerSeries.counter_rise: an upper bound) of each step's measurement window (null where the
    broker was not sampled)."""
    by_key = {(s.run_id, s.cluster): s for s in series}
    cols: dict[str, list[Any]] = {name: [] for name, _ in STEP_COLUMNS}
    for row in steps.to_pylist():
        s = by_key.get((row["run_id"], row["cluster"]))
        start, end = row.get("meas_start_ns"), row.get("meas_end_ns", row.get("end_ns"))   # older tables: the step's end
        cpu = mem = unroutable = None
        if s is not None and start is not None and end is not None:
            cpu = s.cpu_between(int(start), int(end))
            mem = s.peak_memory(int(start), int(end))
            unroutable = s.counter_rise(bs.UNROUTABLE_DROPPED, int(start), int(end))
        delivered = row.get("consumed_in_window") or 0
        cols["broker_cpu_s"].append(cpu)
        cols["broker_cpu_us_per_msg"].append(cpu / delivered * 1e6 if cpu is not None and delivered else None)
        cols["broker_mem_peak_mb"].append(mem / 2**20 if mem is not None else None)
        cols["broker_unroutable_dropped"].append(unroutable)
    for name, dtype in STEP_COLUMNS:
        steps = steps.append_column(pa.field(name, dtype), pa.array(cols[name], dtype))
    return steps


def add_cluster_figures(clusters: list[dict[str, Any]], series: list[BrokerSeries]) -> list[dict[str, Any]]:
    """Each (run, cluster) row with its broker's unroutable counters' rise over the run (CLUSTER_COLUMNS; None
    where the broker's Prometheus endpoint was not sampled)."""
    by_key = {(s.run_id, s.cluster): s for s in series}
    for c in clusters:
        s = by_key.get((c["run_id"], c["cluster"]))
        c["unroutable_dropped"] = None if s is None else s.counter_rise(bs.UNROUTABLE_DROPPED)
        c["unroutable_returned"] = None if s is None else s.counter_rise(bs.UNROUTABLE_RETURNED)
    return clusters


def series_table(series: list[BrokerSeries]) -> pa.Table:
    return pa.Table.from_pylist([r for s in series for r in s.rows()], SERIES_SCHEMA)
