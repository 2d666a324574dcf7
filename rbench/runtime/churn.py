"""Churn: connections a task opens and closes at a rate while its load runs (docs/connections.md, "Churn").

A client that connects for one request and leaves costs the broker an Erlang process tree, a TCP
accept and a handshake each time; steady clients on the same broker may feel it. Each step with a
churn opens a connection every 1/R s from the step's start (its own open-loop schedule: a slow open
does not delay the next one), optionally opens a channel and declares an exclusive auto-delete queue
on it, then closes it. Attempts never queue: with MAX_IN_FLIGHT still open the due one is counted as
skipped, so a broker that cannot keep up shows as skipped and failed attempts rather than as a task
holding thousands of half-open sockets.
"""
from __future__ import annotations

import asyncio
import contextlib
import time

from rbench.config.types import ChurnSpec, QueueDecl, StepWindow, TaskPlan, Topology
from rbench.drivers.base import IdleChannel, load_driver
from rbench.runtime.connections import connection_name, spread
from rbench.samples.churn import ChurnStats

# churned connections one task holds at once: far above what a broker that keeps up needs (50/s x ~20 ms
# each is one), low enough that a stalled broker costs the task and the broker at most this many sockets
MAX_IN_FLIGHT = 64
CLOSE_TIMEOUT_S = 5.0


class ChurnLoop:
    """A task's churned connections: opened on the steps' schedules, timed, closed; the records for run.json."""

    def __init__(self, plan: TaskPlan, stop: asyncio.Event) -> None:
        self.plan = plan
        self.stop = stop
        self.at_us: list[int] = []
        self.connect_us: list[int] = []
        self.cycle_us: list[int] = []
        self.failed_at_us: list[int] = []
        self.skipped_at_us: list[int] = []
        self._cycles: set[asyncio.Task[None]] = set()
        self._opened = 0

    @property
    def planned(self) -> bool:
        return any(s.churn is not None for s in self.plan.steps)

    async def run(self, t0_ns: int) -> None:
        """Every churned step's schedule in turn, from t0; returns when the last one ends or the load stops."""
        for step in self.plan.steps:
            if step.churn is not None and not self.stop.is_set():
                await self._step(t0_ns, step, step.churn)

    async def _step(self, t0_ns: int, step: StepWindow, churn: ChurnSpec) -> None:
        start_ns = t0_ns + int(step.offset_s * 1e9)
        end_ns = start_ns + int(step.duration_s * 1e9)
        interval_ns = 1e9 / churn.rate
        k = 0
        while not self.stop.is_set():
            due_ns = start_ns + int(k * interval_ns)
            if due_ns >= end_ns:
                return
            k += 1
            wait_s = (due_ns - time.time_ns()) / 1e9
            if wait_s > 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), wait_s)
                if self.stop.is_set():
                    return
            at_us = (due_ns - t0_ns) // 1000
            if len(self._cycles) >= MAX_IN_FLIGHT:
                self.skipped_at_us.append(at_us)
                continue
            cycle = asyncio.get_running_loop().create_task(self._cycle(self._opened, at_us, churn))
            self._opened += 1
            self._cycles.add(cycle)
            cycle.add_done_callback(self._cycles.discard)

    async def _cycle(self, n: int, at_us: int, churn: ChurnSpec) -> None:
        """Open, (channel, declare,) close one connection; its latencies, or its failure, recorded."""
        plan = self.plan
        driver = load_driver(plan.driver)
        started = time.perf_counter_ns()
        connected = 0
        try:
            # cluster-wide connection n * tasks + task: the churn of all tasks spreads over the cluster's URIs
            await driver.open(spread(plan.cluster, n * plan.n_tasks + plan.task), None,
                              connection_name(plan, f"churn-{n}"))
            connected = time.perf_counter_ns() - started
            if churn.channel and isinstance(driver, IdleChannel):
                await driver.open_idle_channel()
            if churn.declare:
                queue = f"rbench-churn-{plan.run_id}-{plan.task}-{n}"
                await driver.declare(Topology(queues=(QueueDecl(queue, durable=False, exclusive=True,
                                                                auto_delete=True),)))
            await asyncio.wait_for(driver.aclose(), CLOSE_TIMEOUT_S)
        except Exception:
            self.failed_at_us.append(at_us)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(driver.aclose(), CLOSE_TIMEOUT_S)
            return
        self.at_us.append(at_us)
        self.connect_us.append(connected // 1000)
        self.cycle_us.append((time.perf_counter_ns() - started) // 1000)

    async def aclose(self) -> None:
        """Let the open cycles finish (closing their connections), briefly; cancel what is left."""
        if self._cycles:
            _, pending = await asyncio.wait(set(self._cycles), timeout=CLOSE_TIMEOUT_S)
            for cycle in pending:
                cycle.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)

    def stats(self) -> ChurnStats:
        """The task's record, each list in start order (cycles finish out of order)."""
        done = sorted(range(len(self.at_us)), key=self.at_us.__getitem__)
        return ChurnStats(tuple(self.at_us[i] for i in done), tuple(self.connect_us[i] for i in done),
                          tuple(self.cycle_us[i] for i in done), tuple(sorted(self.failed_at_us)),
                          tuple(self.skipped_at_us))
