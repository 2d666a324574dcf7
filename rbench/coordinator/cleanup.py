"""Delete what a run declared on the brokers, unless the workload says to keep it (queues.keep).

Why a snapshot first: declaring is idempotent, so after a run rbench cannot tell a queue it
created from one the user already had (with their messages in it). The coordinator therefore
notes, before the load, which of the workload's queues and exchange exist on each cluster, and
afterwards deletes only the ones that did not. Streams need this most: they ignore auto-delete,
so `perftest -qa x-queue-type=stream` used to leave its stream (and its segment files) behind.
Over AMQP 0-9-1 for every driver: a stream is a queue there too. Exchanges are left alone: they
hold no messages, and runs on one broker share them by name ("direct"), so deleting one could
break a concurrent run.
"""
from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

from rbench.config.model import Cluster, Workload
from rbench.config.types import ClusterTarget
from rbench.drivers.replies import NotFound
from rbench.errors import RbenchError


@dataclass
class Snapshot:
    """Per cluster: the workload's queue names that existed before the run."""

    existed: dict[str, set[str]] = field(default_factory=dict)

    def created(self, workload: Workload) -> dict[str, list[str]]:
        """Per cluster, the workload's queues the run will create: what it deletes afterwards (run.json
        ``queues_created``, which is also what a later run deletes if this one's coordinator dies)."""
        return {c.name: [n for n in declared_queues(workload) if n not in self.existed.get(c.name, set())]
                for c in workload.clusters}


def _target(c: Cluster) -> ClusterTarget:
    return ClusterTarget(c.name, tuple(c.uris))


def declared_queues(workload: Workload) -> list[str]:
    """The queues the workload declares; a super stream's are its partition streams."""
    if workload.queues.predeclared:
        return []
    names = workload.queues.names(workload.name)
    return [p for n in names for p in workload.queues.partitions(n)] or names


def super_stream_exchanges(workload: Workload, created: list[str]) -> list[str]:
    """The exchange of a super stream whose partitions the run created: the super stream's own, deleted with them."""
    if workload.queues.super_stream is None or not created:
        return []
    return workload.queues.names(workload.name)


async def _exists(driver: object, name: str) -> bool:
    from rbench.codec.amqp091 import K
    from rbench.drivers.amqp091 import Amqp091Driver

    assert isinstance(driver, Amqp091Driver)
    ch = await driver.connection.channel()
    try:
        await ch.rpc(K.QUEUE_DECLARE, (0, name, True, False, False, False, False, {}), (K.QUEUE_DECLARE_OK,),
                     f"check queue {name!r}")
    except NotFound:
        return False                   # the broker closed this channel; nothing to close
    await ch.close()
    return True


async def _snapshot_one(workload: Workload, c: Cluster) -> set[str]:
    from rbench.drivers.amqp091 import Amqp091Driver

    driver = Amqp091Driver()
    await driver.open(_target(c))
    try:
        return {n for n in declared_queues(workload) if await _exists(driver, n)}
    finally:
        await driver.aclose()


def snapshot(workload: Workload) -> Snapshot | None:
    """What exists before the run; None when the workload keeps everything (nothing to look up)."""
    if workload.queues.keep:
        return None
    snap = Snapshot()
    for c in workload.clusters:
        snap.existed[c.name] = asyncio.run(_snapshot_one(workload, c))
    return snap


async def _delete(c: Cluster, names: list[str], exchanges: list[str]) -> None:
    from rbench.drivers.amqp091 import Amqp091Driver

    driver = Amqp091Driver()
    await driver.open(_target(c))
    try:
        await driver.delete_queues(names)
        for name in exchanges:
            await driver.delete_exchange(name)
    finally:
        await driver.aclose()


def delete_queues(c: Cluster, names: list[str], exchanges: list[str] | None = None) -> None:
    """Delete ``names`` on cluster ``c`` (a queue already gone is no error), then ``exchanges``."""
    if names or exchanges:
        asyncio.run(_delete(c, names, exchanges or []))


def delete_created(workload: Workload, snap: Snapshot | None) -> dict[str, list[str]]:
    """Delete, per cluster, what the run created; a failure is reported as one line, never raised
    (the run's figures are already safe on disk)."""
    deleted: dict[str, list[str]] = {}
    if snap is None:
        return deleted
    created = snap.created(workload)
    for c in workload.clusters:
        try:
            delete_queues(c, created[c.name], super_stream_exchanges(workload, created[c.name]))
            deleted[c.name] = created[c.name]
        except (RbenchError, OSError) as exc:
            print(f"rbench: cluster {c.name}: could not delete what the run declared ({exc}); "
                  f"delete it by hand or set queues.keep", file=sys.stderr)
    return deleted


@contextlib.contextmanager
def run_queues(workload: Workload) -> Iterator[dict[str, list[str]]]:
    """Around a run: yields what it will create per cluster (for run.json), deletes that afterwards
    (unless queues.keep, when it yields {})."""
    snap = snapshot(workload)
    try:
        yield snap.created(workload) if snap is not None else {}
    finally:
        delete_created(workload, snap)
