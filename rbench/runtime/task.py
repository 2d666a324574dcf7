"""One executor task: connect, declare, consume, publish on schedule, drain, commit.

Runs on its own uvloop event loop inside the Spark Python worker. All of a task's
producers and consumers share that loop and the recorder; the Spark glue passes in
the barrier functions so every task starts publishing at the same agreed t0.
"""
from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import socket
import time
from collections.abc import Callable
from typing import Any

from rbench.codec._recorder import ConsumerTap
from rbench.control import ControlClient
from rbench.drivers.base import Consumer, Driver, Publisher, load_driver
from rbench.errors import ConfigError, RbenchError
from rbench.plan import TaskPlan
from rbench.runtime import histogram
from rbench.runtime.producer import ProducerSink, run_producer
from rbench.runtime.recorder import Recorder, warm_up
from rbench.runtime.schedule import segments

START_MARGIN_NS = 1_000_000_000      # t0 is this far after the slowest task's proposal
ERROR_MARK = "RBENCH-ERROR: "        # lets the driver pull our one-line message out of Spark's traceback

Barrier = Callable[[], None]
AllGather = Callable[[str], list[str]]


def run_task(plan: TaskPlan, attempt: int = 0, barrier: Barrier | None = None, all_gather: AllGather | None = None) -> dict[str, Any]:
    """Run one task to completion on uvloop; returns its counts and t0 for run.json."""
    try:
        import uvloop
        runner: Callable[..., Any] = uvloop.run
    except ImportError:       # pragma: no cover - uvloop is a dependency; asyncio stays correct
        runner = asyncio.run
    try:
        return runner(TaskRun(plan, attempt, barrier, all_gather).run())
    except RbenchError as exc:
        raise RuntimeError(f"{ERROR_MARK}{exc}") from None


class _ConsumerState(ConsumerTap):
    """Per-consumer callback target: records a delivery, stops at the message count.

    ``__call__(body, redelivered, t_received)`` is ConsumerTap's, in C (ext/recorder.pyx):
    unless ``count`` reached ``limit`` it records the delivery into the recorder core
    (a body without a stamp is counted but not recorded), and sets ``done`` at the limit."""

    __slots__ = ()

    def __init__(self, recorder: Recorder, consumer_id: int, queue_idx: int, limit: int | None) -> None:
        super().__init__(recorder.core, recorder, consumer_id, queue_idx, limit, asyncio.Event())


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
        self.control = ControlClient(plan.control)
        self.driver: Driver = load_driver(plan.driver)
        self.publishers: list[Publisher] = []
        self.consumers: list[Consumer] = []
        self.consumer_states: list[_ConsumerState] = []
        self._last_counts = dict(self.recorder.counts)
        self.metrics: Any = None
        self._metrics_server: Any = None

    # ---- lifecycle -----------------------------------------------------------------------
    async def run(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                loop.add_signal_handler(sig, self._interrupt)
        await self.control.connect()
        self._start_metrics()
        watcher = loop.create_task(self._watch_control())
        ticker: asyncio.Task[None] | None = None
        summary: dict[str, Any] = {}
        completed = False
        try:
            await self.driver.open(self.plan.cluster)
            await self.driver.declare(self.plan.topology)
            for spec in self.plan.consumers:
                state = _ConsumerState(self.recorder, spec.consumer_id, self.recorder.queue_index(spec.queue),
                                       self.plan.consumer_message_count)
                self.consumer_states.append(state)
                self.consumers.append(await self.driver.consumer(spec, state))
            for spec in self.plan.publishers:
                self.publishers.append(await self.driver.publisher(spec, ProducerSink(self.recorder, spec.producer_id)))
            t0 = await self._agree_t0()
            self.recorder.t0_ns = t0
            ticker = loop.create_task(self._tick_every_second())
            published = await self._publish_all(t0)
            unconfirmed = await self._drain_publishers()
            await self._drain_consumers(published)
            summary = {"t0_ns": t0, "unconfirmed_at_end": unconfirmed}
            completed = True
        finally:
            if ticker is not None:
                ticker.cancel()
            watcher.cancel()
            await self._close_quietly()
            self._send_progress(final=True)
            if self._metrics_server is not None:
                self._metrics_server.shutdown()
            # a failed attempt keeps its parts but is not committed: the reduce ignores it
            counts = self.recorder.close(self.interrupted, commit=completed or self.interrupted)
            await self.control.aclose()
        return {"cluster": self.plan.cluster.name, "task": self.plan.task, "attempt": self.attempt,
                "interrupted": self.interrupted, **summary, **counts}

    def _interrupt(self) -> None:
        self.interrupted = True
        self.stop.set()

    async def _watch_control(self) -> None:
        await self.control.stop_requested.wait()
        self._interrupt()

    async def _agree_t0(self) -> int:
        """All tasks publish from one t0: the latest proposal plus a margin."""
        proposal = time.time_ns() + START_MARGIN_NS
        loop = asyncio.get_running_loop()
        if self.all_gather is not None:
            proposals = await loop.run_in_executor(None, self.all_gather, str(proposal))
            t0 = max(int(p) for p in proposals)
        else:
            t0 = proposal
        self.control.send({"cluster": self.plan.cluster.name, "task": self.plan.task, "t0_ns": t0, "step": 0})
        return t0

    async def _publish_all(self, t0: int) -> int:
        rng = random.Random(self.plan.seed)
        steps = [(s.offset_s, s.duration_s, s.rate) for s in self.plan.steps]
        jobs = []
        for pub, spec in zip(self.publishers, self.plan.publishers):
            delay_ns = int(rng.random() * self.plan.random_start_delay_s * 1e9)
            segs = list(segments(t0, delay_ns, steps))
            jobs.append(run_producer(pub, spec, self.recorder, segs, self.plan.size, self.plan.message_count, self.stop))
        if not jobs:     # consumers only: stay for the planned duration
            end_ns = t0 + int(self.plan.end_offset_s * 1e9)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stop.wait(), max(0.0, (end_ns - time.time_ns()) / 1e9))
            return 0
        return sum(await asyncio.gather(*jobs))

    async def _drain_publishers(self) -> int:
        timeout = self.plan.drain_timeout_s if not self.interrupted else min(2.0, self.plan.drain_timeout_s)
        results = await asyncio.gather(*(p.drain(timeout) for p in self.publishers), return_exceptions=True)
        return sum(r for r in results if isinstance(r, int))

    async def _drain_consumers(self, published: int) -> None:
        """Wait until consumers have what this task's producers routed to them, or time out."""
        if not self.consumers:
            return
        deadline = time.monotonic() + (self.plan.drain_timeout_s if not self.interrupted else 1.0)
        own_queues = {c.queue for c in self.plan.consumers}
        expect_all = all(p.queue in own_queues for p in self.plan.publishers)
        last, idle_since = -1, time.monotonic()
        while time.monotonic() < deadline:
            counts = self.recorder.counts
            consumed = counts["consumed"]
            if all(s.done.is_set() for s in self.consumer_states):
                return
            if expect_all and published and consumed >= counts["published"] - counts["returned"] - counts["nacked"]:
                return
            if consumed != last:
                last, idle_since = consumed, time.monotonic()
            elif not expect_all and time.monotonic() - idle_since > 1.0:
                return
            await asyncio.sleep(0.05)

    async def _close_quietly(self) -> None:
        for closer in [*(c.aclose() for c in self.consumers), *(p.aclose() for p in self.publishers)]:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(closer, 5)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.driver.aclose(), 5)

    # ---- once a second -----------------------------------------------------------------------
    async def _tick_every_second(self) -> None:
        """Tick just after each wall-clock second, so every progress delta covers one second."""
        while True:
            await asyncio.sleep(1.0 - (time.time() % 1.0) + 0.01)
            self.recorder.expire_confirms(time.time_ns())
            self._send_progress()
            self.recorder.tick()

    def _current_step(self) -> int:
        elapsed_s = (time.time_ns() - self.recorder.t0_ns) / 1e9
        step = 0
        for s in self.plan.steps:
            if elapsed_s >= s.offset_s:
                step = s.index
        return step

    def _send_progress(self, final: bool = False) -> None:
        counts = dict(self.recorder.counts)
        delta = {k: counts[k] - self._last_counts.get(k, 0) for k in counts}
        self._last_counts = counts
        step = self._current_step()
        e2e, confirms = self.recorder.take_latencies()
        if self.metrics is not None:
            self.metrics.update(step, delta, e2e, confirms)
        self.control.send({"cluster": self.plan.cluster.name, "task": self.plan.task, "step": step,
                           "second": int(time.time()) - 1 if not final else int(time.time()),
                           "published": delta["published"], "confirmed": delta["confirmed"],
                           "consumed": delta["consumed"], "nacked": delta["nacked"], "returned": delta["returned"],
                           "hist": histogram.bucket_counts(e2e), "final": final})

    def _start_metrics(self) -> None:
        """Serve Prometheus metrics when the workload asks (port + task index, or any free port)."""
        if self.plan.metrics_port is None:
            return
        from rbench.metrics import TaskMetrics, serve

        self.metrics = TaskMetrics(self.plan.run_id, self.plan.cluster.name, self.plan.task)
        port = self.plan.metrics_port + self.plan.task if self.plan.metrics_port else 0
        try:
            self._metrics_server, port = serve(self.metrics, port)
        except OSError as exc:
            raise ConfigError(f"metrics_port: cannot listen on port {port} ({exc.strerror})") from None
        self.control.send({"cluster": self.plan.cluster.name, "task": self.plan.task, "metrics_port": port,
                           "host": socket.gethostname()})
