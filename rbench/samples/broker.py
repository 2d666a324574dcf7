"""broker/ Parquet: what the coordinator sampled on each cluster's broker (docs/broker.md).

A long table -- one row per (time, source, node or queue, metric) -- because what a broker exposes
depends on its version, plugins and the sources the workload chose; a fixed wide schema would be
mostly nulls. ``<run>/broker/<cluster>/part-NNNNN.parquet``, written by the coordinator only (no
task attempts, so no ``_COMMITTED`` marker: a part file is written whole, then renamed).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

BROKER_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("cluster", pa.string()), ("t_ns", pa.int64()), ("source", pa.string()),
    ("node", pa.string()), ("queue", pa.string()), ("metric", pa.string()), ("value", pa.float64()),
])
KIND = "broker"

# metrics the reduce and report read (docs/broker.md lists every metric each source writes)
QUEUE_READY, QUEUE_UNACKED = "messages_ready", "messages_unacked"
CPU_SECONDS = "cpu_seconds_total"                # beam process, from /proc (broker on the coordinator's host)
ERLANG_RUNTIME = "erlang_runtime_seconds_total"   # Erlang runtime (all schedulers), from Prometheus
MEMORY = ("mem_used_bytes", "resident_memory_bytes", "rss_bytes")   # in order of preference
# the management API's memory breakdown (/api/nodes/NAME/memory) of what connections hold, bytes per node: sampled
# only when the run opens idle connections (rbench.coordinator.broker: it walks every Erlang process, ~2 s at 8,000
# connections on 3.10), for broker_conn_mem_per_connection_kib (rbench.reduce.connections)
CONNECTION_MEMORY_CATEGORIES = ("connection_readers", "connection_writers", "connection_channels", "connection_other")
CONNECTION_MEMORY = tuple(f"mem_{c}_bytes" for c in CONNECTION_MEMORY_CATEGORIES)
# messages the broker accepted but routed to no queue, since the node started (counters, summed over protocols):
# dropped (published without mandatory: the publisher is not told) and returned (mandatory: basic.return)
UNROUTABLE_DROPPED, UNROUTABLE_RETURNED = "unroutable_dropped_total", "unroutable_returned_total"


def broker_dir(run_dir: str | os.PathLike[str], cluster: str) -> Path:
    return Path(run_dir) / KIND / cluster


def write_part(run_dir: str | os.PathLike[str], cluster: str, index: int, rows: list[dict[str, Any]]) -> Path:
    """Write ``rows`` (dicts of BROKER_SCHEMA's columns) as part ``index``; the file appears whole or not at all."""
    out = broker_dir(run_dir, cluster)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"part-{index:05d}.parquet"
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(pa.Table.from_pylist(rows, BROKER_SCHEMA), tmp)
    os.replace(tmp, path)
    return path


def read_broker(run_dir: str | os.PathLike[str], cluster: str) -> pa.Table:
    """Every sample of one cluster (an empty table when none were written)."""
    parts = sorted(broker_dir(run_dir, cluster).glob("part-*.parquet"))
    if not parts:
        return BROKER_SCHEMA.empty_table()
    return pa.concat_tables([pq.read_table(p, schema=BROKER_SCHEMA) for p in parts])
