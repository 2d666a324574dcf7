"""idle_connections: connections that open, open a channel, heartbeat and send nothing (the memory test).

Opened after the task's client connections and before t0, so they are all open while the load runs
and the broker's memory per connection can be read beside it; held until the task ends. One that
cannot open is counted (refused or timed out) and the task goes on: how many a broker accepts is a
finding, not a failure. One the broker closes later is counted lost and not opened again.
"""
from __future__ import annotations

import asyncio
import contextlib
import resource
import time

from rbench.config.fds import FD_MARGIN, connections_planned, fd_problem
from rbench.config.types import ClusterTarget, TaskPlan
from rbench.drivers.base import Driver, IdleChannel, load_driver
from rbench.errors import ConfigError
from rbench.runtime.connect_log import ConnectLog, Pacer
from rbench.runtime.connections import connection_name, spread


def raise_fd_limit(plan: TaskPlan) -> int:
    """Make room for the task's connections: RLIMIT_NOFILE's soft limit up to the hard one when they need it.

    More than the hard limit allows is a ConfigError naming ``ulimit -n`` (rbench.config.fds) before any
    connection opens. Returns the soft limit the task runs with."""
    problem = fd_problem(plan)
    if problem is not None:
        raise ConfigError(problem)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if connections_planned(plan) + FD_MARGIN > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft


class IdleConnections:
    """The task's idle connections, opened paced and timed, closed at the end."""

    def __init__(self, plan: TaskPlan, log: ConnectLog, pacer: Pacer) -> None:
        self.plan = plan
        self.log = log
        self.pacer = pacer
        self.drivers: list[Driver] = []

    async def open(self, target: ClusterTarget, first_index: int) -> None:
        """Open ``plan.connections.idle`` connections; ``first_index``: the cluster-wide index of the first,
        so they spread over the cluster's URIs after the task's client connections."""
        await asyncio.gather(*(self._one(target, first_index + i, i) for i in range(self.plan.connections.idle)))

    async def _one(self, target: ClusterTarget, index: int, i: int) -> None:
        driver = load_driver(self.plan.driver)
        async with self.pacer.slot():
            started = time.perf_counter_ns()
            try:
                await driver.open(spread(target, index), self._lost, connection_name(self.plan, f"idle-{i}"))
            except Exception as exc:
                self.log.failed(exc)
                return
            self.log.connected(time.perf_counter_ns() - started)
        self.drivers.append(driver)
        if not isinstance(driver, IdleChannel):
            raise ConfigError(f"idle_connections: the {self.plan.driver} driver cannot hold an idle channel")
        started = time.perf_counter_ns()
        try:
            await driver.open_idle_channel()
        except Exception as exc:
            self.log.failed(exc)
            return
        self.log.channel(time.perf_counter_ns() - started)
        self.log.idle += 1

    def _lost(self, error: BaseException) -> None:
        self.log.idle_lost += 1

    async def aclose(self) -> None:
        drivers, self.drivers = self.drivers, []
        sem = asyncio.Semaphore(256)

        async def close(d: Driver) -> None:
            async with sem:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(d.aclose(), 5.0)
        await asyncio.gather(*(close(d) for d in drivers))
