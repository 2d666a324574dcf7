"""A task's client connections: the workload's layout (per_task, per_client, N) behind one Driver.

The runtime (task, publishers, consumers, reconnect) sees one driver as before; this pool opens the
connections the plan's ConnectionLayout asks for, each a driver of the workload's kind, and hands each
publisher and consumer to its connection. Why one Driver: the reconnect rides through a lost connection
by replacing the task's driver, so with several connections a loss of any one of them re-opens the pool
(every connection comes back on the cluster's next URIs), and what it cost is one record as before.

Every connection is paced (``connect_rate``) and timed (rbench.runtime.connect_log): the time from the
first byte of TCP connect to the protocol's open reply (AMQP 0.9.1 connection.open-ok) is its connect
latency; a refusal or a timeout is counted, then raised (a client connection the task cannot open fails
the task, as before).
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from rbench.config.types import ClusterTarget, ConsumerSpec, PublisherSpec, TaskPlan, Topology
from rbench.drivers.base import Consumer, Driver, Losable, OnLost, OnMessage, Publisher, PublishSink, load_driver
from rbench.errors import BrokerError, ConnectionLost
from rbench.runtime.connect_log import ConnectLog, Pacer


def spread(target: ClusterTarget, index: int) -> ClusterTarget:
    """``target`` with each URI list turned to start at node ``index`` mod its length: connection ``index`` of
    the cluster goes to that node first (round-robin, PerfTest's --connection-allocation round-robin) and
    fails over to the next ones."""
    def turned(uris: tuple[str, ...]) -> tuple[str, ...]:
        if len(uris) < 2:
            return uris
        k = index % len(uris)
        return uris[k:] + uris[:k]

    return replace(target, uris=turned(target.uris), amqp10_uris=turned(target.amqp10_uris),
                   stream_uris=turned(target.stream_uris))


def connection_name(plan: TaskPlan, role: str) -> str:
    """The connection_name client property: the run, the cluster, the task and what the connection carries,
    so the management UI and /api/connections tell a run's connections apart (docs/connections.md)."""
    return f"rbench {plan.run_id} {plan.cluster.name} task-{plan.task} {role}"


def roles(plan: TaskPlan) -> list[str]:
    """What each client connection of the task carries, by position: its name's last word."""
    layout = plan.connections
    n = layout.client_connections(len(plan.publishers), len(plan.consumers))
    if layout.mode == "per_task":
        return ["task"]
    if layout.mode == "fixed":
        return [f"conn-{i}" for i in range(n)]
    out = [""] * n
    for i, p in reversed(list(enumerate(plan.publishers))):
        out[layout.publisher_connection(i)] = f"producer-{p.producer_id}"
    for j, c in reversed(list(enumerate(plan.consumers))):
        out[layout.consumer_connection(j, len(plan.publishers))] = f"consumer-{c.consumer_id}"
    return [r or f"conn-{i}" for i, r in enumerate(out)]


class ConnectionPool:
    """The task's client connections as one Driver: declarations and exit_when questions on the first."""

    def __init__(self, plan: TaskPlan, log: ConnectLog, pacer: Pacer) -> None:
        self.plan = plan
        self.log = log
        self.pacer = pacer
        self.reconnect = load_driver(plan.driver).reconnect
        self.uri: str | None = None
        self._drivers: list[Driver] = []
        self._on_lost: OnLost | None = None
        self._publisher_at = {p.producer_id: plan.connections.publisher_connection(i)
                              for i, p in enumerate(plan.publishers)}
        self._consumer_at = {c.consumer_id: plan.connections.consumer_connection(j, len(plan.publishers))
                             for j, c in enumerate(plan.consumers)}

    @property
    def connections(self) -> int:
        return len(self._drivers)

    @property
    def server_properties(self) -> Mapping[str, Any]:
        return {} if not self._drivers else self._drivers[0].server_properties

    def _first(self) -> Driver:
        if not self._drivers:
            raise BrokerError("driver used before open()")
        return self._drivers[0]

    async def open(self, target: ClusterTarget, on_lost: OnLost | None = None, name: str | None = None) -> None:
        """Open every client connection (paced, timed, concurrently); on any failure close those opened, raise."""
        names = roles(self.plan)
        self._on_lost = on_lost
        base = 0 if self.plan.connections.mode == "per_task" else self.plan.task * len(names)

        async def one(i: int) -> Driver:
            driver = load_driver(self.plan.driver)
            here = target if self.plan.connections.mode == "per_task" else spread(target, base + i)
            async with self.pacer.slot():
                started = time.perf_counter_ns()
                try:
                    await driver.open(here, self._one_lost, connection_name(self.plan, names[i]))
                except BaseException as exc:
                    self.log.failed(exc)
                    raise
                self.log.connected(time.perf_counter_ns() - started)
            return driver

        made = await asyncio.gather(*(one(i) for i in range(len(names))), return_exceptions=True)
        opened = [d for d in made if not isinstance(d, BaseException)]
        for result in made:
            if isinstance(result, BaseException):
                await _close_drivers(opened)
                raise result
        self._drivers = opened
        self.uri = opened[0].uri

    def _one_lost(self, error: BaseException) -> None:
        """One connection died: the others are lost with it (so every producer and consumer waits for the one
        reconnect, which re-opens the pool), and the runtime hears of it once."""
        if isinstance(error, ConnectionLost):
            for driver in self._drivers:
                if isinstance(driver, Losable):
                    driver.lose(ConnectionLost(f"{error}; the task's other connections are re-opened with it"))
        on_lost, self._on_lost = self._on_lost, None
        if on_lost is not None:
            on_lost(error)

    async def declare(self, topology: Topology) -> None:
        await self._first().declare(topology)

    async def publisher(self, spec: PublisherSpec, sink: PublishSink) -> Publisher:
        self._first()
        return await self._drivers[self._publisher_at.get(spec.producer_id, 0)].publisher(spec, sink)

    async def consumer(self, spec: ConsumerSpec, on_message: OnMessage) -> Consumer:
        self._first()
        return await self._drivers[self._consumer_at.get(spec.consumer_id, 0)].consumer(spec, on_message)

    async def messages_ready(self, queue: str) -> int:
        return await self._first().messages_ready(queue)

    async def aclose(self) -> None:
        self._on_lost = None
        drivers, self._drivers = self._drivers, []
        await _close_drivers(drivers)


async def _close_drivers(drivers: list[Driver]) -> None:
    """Close connections together, none of their errors raised (the task has decided what happens next)."""
    async def close(d: Driver) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(d.aclose(), 5.0)
    await asyncio.gather(*(close(d) for d in drivers))
