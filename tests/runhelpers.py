"""Shared helpers for tests that run workloads and read their Parquet output."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rbench.samples.layout import committed_parts


def read(run_dir: Path, kind: str) -> pa.Table:
    clusters = [p.name for p in (run_dir / kind).iterdir()] if (run_dir / kind).is_dir() else []
    parts, _ = committed_parts(run_dir, run_dir.name, kind, clusters)
    assert parts, f"no committed {kind} parts under {run_dir}"
    return pa.concat_tables([pq.read_table(p) for p in parts])


def run_json(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "run.json").read_text())


def keys(table: pa.Table) -> list[tuple[int, int]]:
    return list(zip(table["producer"].to_pylist(), table["seq"].to_pylist()))


def workload_dict(amqp_url: str, name: str, **overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "t", "driver": "aiopika",
        "clusters": [{"name": "local", "uris": [amqp_url]}],
        "producers": 2, "consumers": 2, "rate": 500, "duration": 2,
        "queues": {"pattern": f"{name}-%d", "from": 1, "to": 2, "durable": False, "auto_delete": True},
        "publisher": {"confirm": True, "confirm_window": 64},
        "consumer": {"prefetch": 100, "multi_ack_every": 10},
        "drain_timeout": 5,
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return base


def delete_queues(amqp_url: str, names: list[str]) -> None:
    """Delete ``names`` over a fresh AMQP connection (streams too), whatever state a test left its own
    connections in; on its own asyncio loop, so a test's loop (asyncio or uvloop) is not involved."""
    import asyncio

    from rbench.config.types import ClusterTarget
    from rbench.drivers.amqp091 import Amqp091Driver

    async def delete() -> None:
        admin = Amqp091Driver()
        await admin.open(ClusterTarget("admin", (amqp_url,)))
        try:
            await admin.delete_queues(names)
        finally:
            await admin.aclose()

    asyncio.run(asyncio.wait_for(delete(), 20))
