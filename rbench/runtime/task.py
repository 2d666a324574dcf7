"""One executor task: connect, declare, consume, publish on schedule, drain, commit.

Runs on its own uvloop event loop inside the Spark Python worker. All of a task's
producers and consumers share that loop and the recorder; the Spark glue passes in
the barrier functions so every task starts publishing at the same agreed t0.
This module is the task's lifecycle and what ties its parts together (a lost connection
replaces the driver, the consumers and the publishers at once); the parts are
start (t0), consumers, publishers, exit_when, drain, progress and closing.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from collections.abc import Callable
from typing import Any

from rbench.config.fds import connections_planned
from rbench.config.types import ClusterTarget, TaskPlan
from rbench.drivers.base import Consumer, Driver, OnLost, Publisher
from rbench.drivers.exchanges import forget_warnings
from rbench.errors import ConfigError, RbenchError
from rbench.live.control.client import ControlClient
from rbench.live.control.wire import Failed, Reconnecting
from rbench.proctime import process_started
from rbench.runtime.churn import ChurnLoop
from rbench.runtime.clock import SendClock
from rbench.runtime.closing import close_all
from rbench.runtime.connect_log import ConnectLog, Pacer
from rbench.runtime.connections import ConnectionPool
from rbench.runtime.consumers import TaskConsumers
from rbench.runtime.drain import drain_consumers, drain_publishers
from rbench.runtime.exit_when import watch_exit
from rbench.runtime.idle import IdleConnections, raise_fd_limit
from rbench.runtime.notices import forwarded
from rbench.runtime.producer import ProducerSink
from rbench.runtime.progress import TaskProgress
from rbench.runtime.publishers import open_publishers, publish_all
from rbench.runtime.reconnect import Reconnector
from rbench.runtime.recorder import Recorder, warm_up
from rbench.runtime.selfcheck import SelfCheck
from rbench.runtime.start import AllGather, agree_t0
from rbench.samples.runinfo import STOPPED_BY_INTERRUPT, STOPPED_BY_SCHEDULE
from rbench.samples.tasks import DRAINED
from rbench.samples.windows import STOPPED_BY_COUNT

Barrier = Callable[[], None]


def run_task(plan: TaskPlan, attempt: int = 0, barrier: Barrier | None = None, all_gather: AllGather | None = None) -> dict[str, Any]:
    """Run one task to completion on uvloop; returns its counts and t0 for run.json."""
    try:
        import uvloop
        runner: Callable[..., Any] = uvloop.run
    except ImportError:       # pragma: no cover - uvloop is a dependency; asyncio stays correct
        runner = asyncio.run
    result: dict[str, Any] = runner(TaskRun(plan, attempt, barrier, all_gather).run())
    return result


class TaskRun:
    def __init__(self, plan: TaskPlan, attempt: int, barrier: Barrier | None, all_gather: AllGather | None) -> None:
        self.plan = plan
        self.attempt = attempt
        self.barrier = barrier
        self.all_gather = all_gather
        self.stop = asyncio.Event()
        self.interrupted = False
        warm_up()
        queues = sorted({p.queue for p in plan.publishers} | {c.queue for c in plan.consumers})
        self.recorder = Recorder(plan.out_dir, plan.run_id, plan.cluster.name, plan.task, attempt, queues,
                                 [int(s.offset_s * 1e9) for s in plan.steps],
                                 None if plan.confirm_timeout_s is None else int(plan.confirm_timeout_s * 1e9))
        # every line to the driver says which Spark attempt sent it: a restarted stage's tasks come back as new attempts
        self.control = ControlClient(plan.control, attempt)
        self.recorder.describe({"host": socket.gethostname(), "pid": os.getpid(), "started_ns": time.time_ns()})
        self._consumed_before_t0 = 0              # deliveries before t0: left in the queues, stale (docs/parquet.md)
        self.connect_log = ConnectLog()
        self.pacer = Pacer(plan.connections.connect_rate)
        self.driver: Driver = ConnectionPool(plan, self.connect_log, self.pacer)
        self.idle = IdleConnections(plan, self.connect_log, self.pacer)
        self.churn = ChurnLoop(plan, self.stop)
        self.publishers: list[Publisher] = []
        self.sinks = [ProducerSink(self.recorder, p.producer_id) for p in plan.publishers]
        self.reconnector = Reconnector(plan.task, plan.cluster, plan.reconnect_timeout_s, len(plan.steps), plan.driver,
                                       self.driver.reconnect, self._reopen,
                                       self._close_connection, lambda: self.publishers, self.recorder.lose_in_flight,
                                       self._notify_reconnecting, self._fail)
        self.consumers = TaskConsumers(plan, self.recorder, self.reconnector, lambda: self.driver, self.stop,
                                       self._consumer_failed)
        self.progress = TaskProgress(plan, self.recorder, self.control)
        self._consumer_error: BaseException | None = None
        self.clock: SendClock | None = None
        # wall-clock instants (s) of this task's start-up, reported to the coordinator's --timings
        self.instants: dict[str, float] = {"task started": time.time()}
        forked = process_started()            # Spark's daemon forked this worker (or started it, without reuse)
        if forked is not None:
            self.instants["worker process started"] = forked
        window = sum(p.confirm_window for p in plan.publishers if p.confirm) \
            if all(p.confirm_window for p in plan.publishers if p.confirm) else 0
        self.selfcheck = SelfCheck(lambda: self.recorder.core.pending, window, self.progress.current_step)
        self.control.on_command = self.consumers.on_command

    # ---- lifecycle -----------------------------------------------------------------------
    async def run(self) -> dict[str, Any]:
        """The task's whole life; the warnings its code logs meanwhile go to the coordinator (runtime/notices)."""
        forget_warnings()
        with forwarded(self.control.send, self.plan.cluster.name, self.plan.task):
            return await self._run()

    async def _run(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                loop.add_signal_handler(sig, self.interrupt)
        await self.control.connect()
        self.control.hello(self.plan.cluster.name, self.plan.task)
        if self.all_gather is not None and self.plan.control is not None and not self.control.connected:
            # every task must reach the start gate (and the stop signal): one that cannot fails the stage now
            host, port = self.plan.control.address
            raise ConfigError(f"control: this executor ({socket.gethostname()}) cannot reach the coordinator at "
                              f"{host}:{port} ({self.control.problem}); executors must reach the Spark driver (set "
                              f"spark.driver.host to an address they can reach, and let them connect to that port)")
        self.progress.start_metrics()
        watcher = loop.create_task(self._watch_control())
        ticker: asyncio.Task[None] | None = None
        helpers: list[asyncio.Task[None]] = []
        summary: dict[str, Any] = {}
        completed = False
        try:
            self.connect_log.fd_limit = raise_fd_limit(self.plan)
            await self.driver.open(self.plan.cluster, self.reconnector.on_lost())
            self.reconnector.uri = self.driver.uri
            self.instants["connected"] = time.time()
            await self.driver.declare(self.plan.topology)
            self.instants["declared"] = time.time()
            if not self.plan.consumer_start_delay_s:
                await self.consumers.start()
            self.publishers = await open_publishers(self.driver, self.plan, self.sinks)
            self.instants["consumers and publishers ready"] = time.time()
            if self.plan.connections.idle:
                clients = connections_planned(self.plan) - self.plan.connections.idle
                await self.idle.open(self.plan.cluster, self.plan.task * connections_planned(self.plan) + clients)
                self.instants["idle connections open"] = time.time()
            self.clock = SendClock()
            t0 = await agree_t0(self.control, self.all_gather, self.plan.cluster.name, self.plan.task)
            self.instants["t0 agreed with the other tasks"] = time.time()
            self.recorder.t0_ns = t0
            # what consumers received before t0 was in the queues before this attempt published (an earlier
            # run's or a lost attempt's messages): the live counts and the drain start after it
            self._consumed_before_t0 = self.progress.restart_counts()["consumed"]
            ticker = loop.create_task(self.progress.tick_every_second(self.selfcheck))
            helpers.append(loop.create_task(self.selfcheck.run()))
            if self.plan.consumer_start_delay_s:
                starter = loop.create_task(self.consumers.start(t0 + int(self.plan.consumer_start_delay_s * 1e9)))
                helpers.append(starter)
            if self.churn.planned:
                helpers.append(loop.create_task(self.churn.run(t0)))
            if self.plan.exit_when != "never":
                helpers.append(loop.create_task(watch_exit(t0, self.consumers, lambda: self.driver, self.stop)))
            published = await publish_all(self.publishers, self.plan, self.recorder, t0, self.clock, self.reconnector,
                                          self.stop)
            load_end_ns = time.time_ns()
            await self.reconnector.settled()          # a reconnect still running: its end (or failure) first
            if self._consumer_error is not None:
                raise self._consumer_error
            unconfirmed = await drain_publishers(self.publishers, self.plan, self.interrupted)
            await self.reconnector.settled()
            await drain_consumers(self.plan, self.recorder, self.consumers.states, published.count, self._consumed_before_t0,
                                  bool(self.reconnector.records), self.interrupted, lambda: self._consumer_error)
            self.instants[DRAINED] = time.time()
            summary = {"t0_ns": t0, "unconfirmed_at_end": unconfirmed, "load_end_ns": load_end_ns,
                       "stopped_by": self._stopped_by(published.count), "consumed_before_t0": self._consumed_before_t0,
                       "producers_due_ns": published.last_due_start_ns, "producers_first_stop_ns": published.first_stop_ns,
                       "producers": len(self.plan.publishers), "instants": self.instants,
                       "self_check": self.selfcheck.steps()}
            completed = True
        except RbenchError as exc:
            # an error the task can name (a broker refusal, a connection it could not keep, bad input) would
            # happen again if Spark restarted the stage: the driver ends the run instead (docs/cluster.md)
            self.control.send(Failed(self.plan.cluster.name, self.plan.task, f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            self.reconnector.cancel()
            if ticker is not None:
                ticker.cancel()
            for helper in helpers:
                helper.cancel()
            self.consumers.cancel()
            watcher.cancel()
            await close_all(self.consumers.consumers, self.publishers, self.driver)
            await self.idle.aclose()
            await self.churn.aclose()
            if self.clock is not None:
                self.clock.close()
            self.progress.send(self.selfcheck, final=True)
            self.progress.stop_metrics()
            # a failed attempt keeps its parts but is not committed: the reduce ignores it
            counts = self.recorder.close(self.interrupted, commit=completed or self.interrupted)
            await self.control.aclose()
        return {"cluster": self.plan.cluster.name, "task": self.plan.task, "attempt": self.attempt,
                "interrupted": self.interrupted, **summary, **counts,
                "reconnects": [r.as_dict() for r in self.reconnector.records],
                "skipped_disconnected": list(self.reconnector.skipped_by_step), "connect": self.connect_log.as_dict(),
                "filtered": self.consumers.filtered(),
                "churn": self.churn.stats().to_json() if self.churn.planned else None}

    def _stopped_by(self, published: int) -> str:
        """Why this task's load ended: the schedule ran out, an interrupt, or every producer reached its count."""
        if self.interrupted:
            return STOPPED_BY_INTERRUPT
        count = self.plan.message_count
        if count is not None and self.plan.publishers and published >= count * len(self.plan.publishers):
            return STOPPED_BY_COUNT
        return STOPPED_BY_SCHEDULE

    def interrupt(self) -> None:
        """Stop as Ctrl-C or the coordinator's stop does: the load ends, what was sent is drained and committed."""
        self.interrupted = True
        self.stop.set()
        self.reconnector.stop()
        if self.clock is not None:
            self.clock.wake_all()

    def _fail(self, error: BaseException) -> None:
        """The task cannot go on (a reconnect gave up, or a loss it does not ride through): stop, then raise."""
        if self._consumer_error is None:
            self._consumer_error = error
        self.stop.set()
        self.reconnector.stop()
        if self.clock is not None:
            self.clock.wake_all()

    def _consumer_failed(self, error: BaseException) -> None:
        """A delayed consumer start, a pause or a resume failed: the load stops and the task raises it."""
        if self._consumer_error is None:
            self._consumer_error = error
        self.stop.set()

    async def _watch_control(self) -> None:
        await self.control.stop_requested.wait()
        self.interrupt()

    # ---- riding through a lost connection (rbench.runtime.reconnect) -------------------------
    def _notify_reconnecting(self, reconnecting: bool) -> None:
        """Tell the coordinator (the status line says `reconnecting` while any task is)."""
        self.control.send(Reconnecting(self.plan.cluster.name, self.plan.task, self.progress.current_step(), reconnecting))

    async def _close_connection(self) -> None:
        """What is left of the dead connection's driver, publishers and consumers: closed, quickly."""
        await close_all(self.consumers.consumers, self.publishers, self.driver, timeout=1.0)

    async def _reopen(self, target: ClusterTarget, on_lost: OnLost) -> str | None:
        """A fresh driver on ``target``: declare, re-open every consumer (same recording state) and publisher,
        and make them the task's; the URI it connected to. On any failure nothing it opened stays open."""
        driver = ConnectionPool(self.plan, self.connect_log, self.pacer)
        consumers: list[Consumer] = []
        try:
            await driver.open(target, on_lost)
            await driver.declare(self.plan.topology)
            consumers = await self.consumers.open_on(driver)
            publishers = await open_publishers(driver, self.plan, self.sinks)
        except BaseException:
            await close_all(consumers, [], driver, timeout=1.0)
            raise
        self.driver, self.publishers = driver, publishers
        await self.consumers.adopt(consumers)
        return driver.uri
