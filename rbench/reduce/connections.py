"""Each cluster's connection figures (what the tasks measured opening them, run.json task_results[].connect)
in clusters.csv and beside every step of that cluster in steps.csv/parquet and the report.

They are per run and cluster, not per step: connections open before t0 (idle ones and the clients') and
the few a reconnect opens are one population. Runs written before issue 32 get nulls, not zeros.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa

from rbench.reduce.broker import BrokerSeries
from rbench.reduce.load import RunMeta
from rbench.samples.connections import CONNECT_COLUMNS, ConnectStats
from rbench.samples.tasks import TaskResult

MEM_COLUMN = "broker_mem_per_connection_kib"
CONN_MEM_COLUMN = "broker_conn_mem_per_connection_kib"
MEM_COLUMNS = (MEM_COLUMN, CONN_MEM_COLUMN)
COLUMN_TYPES: tuple[tuple[str, pa.DataType], ...] = tuple(
    (name, pa.int64() if name in ("connections_opened", "idle_connections", "connect_refused", "connect_timed_out")
     else pa.float64()) for name in CONNECT_COLUMNS) + tuple((name, pa.float64()) for name in MEM_COLUMNS)
# the management API's /api/nodes figures (mem_used, fd_used) are the node's statistics, refreshed every
# collect_statistics_interval (5 s by default): a sample taken just after the last idle connection opened can still
# show the memory of 5 s before, 2,500 connections short at 500/s (seen on 4.0.5: 76 KiB per connection from a stale
# sample, 86 from the next). The breakdown (/api/nodes/NAME/memory) is computed when asked, and needs no lag.
MANAGEMENT_LAG_S = 5.0
_BETWEEN = ("at the first broker sample at or after the last task's idle connections were all open (for the management "
            f"API's mem_used, {MANAGEMENT_LAG_S:g} s after: the broker refreshes it every statistics interval, 5 s by "
            "default; the last sample before t0 when there is one) − at the last sample at or before the first task had its publishers and consumers "
            "open (so the tasks' client connections are in both), ÷ idle connections open, KiB, summed over nodes; "
            "null when no sample falls between that instant and the end of the load")
MEM_METHOD = (f"{MEM_COLUMN} = the broker's memory {_BETWEEN}; memory as the broker sampler reads it (management "
              "/api/nodes mem_used, else Prometheus resident memory, else the beam RSS; docs/broker.md); "
              f"{CONN_MEM_COLUMN} = the same rise of the management memory breakdown's connection_readers + "
              "connection_writers + connection_channels + connection_other (/api/nodes/NAME/memory, sampled only in runs "
              "with idle connections): what the connections' Erlang processes hold, without the broker's TCP buffers, "
              "tables and allocator reserve that mem_used also counts; both estimates (the broker's own memory moves "
              "too: read them for hundreds of idle connections or more); null without idle connections or samples")
READY, IDLE_OPEN = "consumers and publishers ready", "idle connections open"


def mem_per_connection_kib(series: BrokerSeries | None, results: tuple[TaskResult, ...], idle: int,
                           memory: np.ndarray | None = None, until_ns: int | None = None) -> float | None:
    """The rise of ``memory`` (default: the series' memory) while the tasks opened their idle connections, per idle
    connection (MEM_METHOD). The series' memory, when the management API's, is read from MANAGEMENT_LAG_S after the
    last idle connection opened; a sample after ``until_ns`` (the end of the load, when the tasks begin closing
    their connections) is never the *after* one."""
    if series is None or series.empty or idle <= 0:
        return None
    ready = [r.instants[READY] for r in results if READY in r.instants]
    opened = [r.instants[IDLE_OPEN] for r in results if IDLE_OPEN in r.instants]
    if not ready or not opened:
        return None
    start_ns, end_ns = int(min(ready) * 1e9), int(max(opened) * 1e9)
    times = series.times
    values = series.memory if memory is None else memory
    known = ~np.isnan(values)
    before = np.flatnonzero(known & (times <= start_ns))
    if memory is None and (series.memory_source or "").startswith("management"):
        end_ns += int(MANAGEMENT_LAG_S * 1e9)
    after = np.flatnonzero(known & (times >= end_ns) & (times <= (until_ns if until_ns is not None else times.max())))
    if before.size == 0 or after.size == 0:
        return None
    pre_t0 = after[times[after] <= series.t0_ns]
    at = pre_t0[-1] if pre_t0.size else after[0]
    rise = float(values[at] - values[before[-1]])
    return None if math.isnan(rise) else rise / idle / 1024.0


def connections_per_gib(kib: float | None) -> float | None:
    """Idle connections one GiB of broker memory holds at ``kib`` per connection (the leaderboard's cost view)."""
    return None if kib is None or kib <= 0 else 1024.0 * 1024.0 / kib


def cluster_stats(runs: list[RunMeta]) -> dict[tuple[str, str], ConnectStats]:
    """(run, cluster) → the counted tasks' connection figures summed; absent where no task reported any."""
    out: dict[tuple[str, str], ConnectStats] = {}
    for run in runs:
        for c in run.clusters:
            reported = [r.connect for r in c.task_results if r.connect is not None]
            if reported:
                out[(run.run_id, c.name)] = ConnectStats.total(reported)
    return out


def add_figures(steps: pa.Table, clusters: list[dict[str, Any]], runs: list[RunMeta],
                series: list[BrokerSeries]) -> pa.Table:
    """CONNECT_COLUMNS and MEM_COLUMNS on each (run, cluster) row of ``clusters`` and each step row of ``steps``."""
    stats = cluster_stats(runs)
    by_key = {(s.run_id, s.cluster): s for s in series}
    results = {(r.run_id, c.name): c.task_results for r in runs for c in r.clusters}
    load_end = {(r.run_id, c.name): c.load_end_ns for r in runs for c in r.clusters}
    figures: dict[tuple[str, str], dict[str, Any]] = {}
    for key, s in stats.items():
        series_of, done, until = by_key.get(key), results.get(key, ()), load_end.get(key)
        figures[key] = {**s.figures(), MEM_COLUMN: mem_per_connection_kib(series_of, done, s.idle, until_ns=until),
                        CONN_MEM_COLUMN: mem_per_connection_kib(series_of, done, s.idle, None if series_of is None
                                                                else series_of.connection_memory, until)}
    empty = {name: None for name, _ in COLUMN_TYPES}
    for c in clusters:
        c.update(figures.get((c["run_id"], c["cluster"]), empty))
    keys = list(zip(steps.column("run_id").to_pylist(), steps.column("cluster").to_pylist()))
    rows = [figures.get(k, empty) for k in keys]
    for name, kind in COLUMN_TYPES:
        steps = steps.append_column(name, pa.array([r[name] for r in rows], kind))
    return steps
