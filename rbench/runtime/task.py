"""One executor task: connect, declare, consume, publish on schedule, drain, commit.

Runs on its own uvloop event loop inside the Spark Python worker. All of a task's
producers and consumers share that loop and the recorder; the Spark glue passes in
the barrier functions so every task starts publishing at the same agreed t0.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from rbench.config.types import ClusterTarget, ConsumerSpec, TaskPlan
from rbench.drivers.base import Consumer, Driver, OnLost, Publisher, load_driver
from rbench.errors import ConfigError, ConnectionLost, RbenchError
from rbench.live import histogram
from rbench.live.control import ControlClient
from rbench.runtime._recorder import ConsumerTap
from rbench.runtime.clock import SendClock
from rbench.runtime.producer import BodyChooser, ProducerSink, run_producer
from rbench.runtime.reconnect import Reconnector
from rbench.runtime.recorder import Recorder, warm_up
from rbench.runtime.schedule import phase_of, segments
from rbench.runtime.selfcheck import SelfCheck
from rbench.samples.runinfo import STOPPED_BY_COUNT, STOPPED_BY_INTERRUPT, STOPPED_BY_SCHEDULE

# t0 is this far after the slowest task's proposal when allGather decides it: allGather polls and
# answered in about 1 s here (measured), so a shorter margin would put the first sends in the past
START_MARGIN_NS = 1_500_000_000
SOLO_MARGIN_NS = 100_000_000         # without Spark (one task, no one to wait for)
EXIT_CHECK_AFTER_S = 2.0             # exit_when: first check this long after t0, then every second (as PerfTest)
IDLE_S = 1.0                         # a consumer without a message for this long is idle

Barrier = Callable[[], None]
AllGather = Callable[[str], list[str]]


def run_task(plan: TaskPlan, attempt: int = 0, barrier: Barrier | None = None, all_gather: AllGather | None = None) -> dict[str, Any]:
    """Run one task to completion on uvloop; returns its counts and t0 for run.json."""
    try:
        import uvloop
        runner: Callable[..., Any] = uvloop.run
    except ImportError:       # pragma: no cover - uvloop is a dependency; asyncio stays correct
        runner = asyncio.run
    result: dict[str, Any] = runner(TaskRun(plan, attempt, barrier, all_gather).run())
    return result


def _in_daemon_thread(fn: Callable[[str], list[str]], arg: str) -> asyncio.Future[list[str]]:
    """Run a blocking Spark barrier call off the loop, in a thread the task never waits for.

    (run_in_executor's pool would be joined when the loop closes: a task that fails while
    its allGather is pending must still be able to report its error.)"""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[list[str]] = loop.create_future()

    def settle(result: list[str] | None, error: BaseException | None) -> None:
        if fut.done():
            return
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(result or [])

    def work() -> None:
        try:
            result, error = fn(arg), None
        except BaseException as exc:   # handed to the awaiting coroutine
            result, error = None, exc
        with contextlib.suppress(RuntimeError):         # the loop has closed: nobody waits any more
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, name="rbench-barrier", daemon=True).start()
    return fut


class _ConsumerState(ConsumerTap):
    """Per-consumer callback target: records a delivery, stops at the message count.

    ``__call__(body, redelivered, t_received)`` is ConsumerTap's, in C (ext/runtime/recorder.pyx):
    unless ``count`` reached ``limit`` it records the delivery into the recorder core
    (a body without a stamp is counted but not recorded), and sets ``done`` at the limit."""

    __slots__ = ()

    def __init__(self, recorder: Recorder, consumer_id: int, queue_idx: int, limit: int | None) -> None:
        super().__init__(recorder.core, recorder, consumer_id, queue_idx, limit, asyncio.Event())


class _Exited:
    """Stands in for a consumer exit_when closed: after a reconnect it stays closed, and pausing or resuming
    it changes nothing."""

    pausable = True

    async def pause(self) -> None:
        return None

    async def resume(self) -> None:
        return None

    def resume_spec(self, spec: ConsumerSpec) -> ConsumerSpec:
        return spec

    async def aclose(self) -> None:
        return None


async def _closed() -> Consumer:
    return _Exited()


def _resumed(spec: ConsumerSpec, old: Consumer | None) -> ConsumerSpec:
    """A consumer subscribed again after a lost connection: where its driver says to go on from (a stream
    consumer from the first offset it had not handled), else its own spec."""
    return spec if old is None else old.resume_spec(spec)


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
        self.control = ControlClient(plan.control, tags={"attempt": attempt})
        self.recorder.describe({"host": socket.gethostname(), "pid": os.getpid(), "started_ns": time.time_ns()})
        self._consumed_before_t0 = 0              # deliveries before t0: left in the queues, stale (docs/parquet.md)
        self.driver: Driver = load_driver(plan.driver)
        self.publishers: list[Publisher] = []
        self.sinks = [ProducerSink(self.recorder, p.producer_id) for p in plan.publishers]
        self.consumers: list[Consumer] = []
        self.consumer_states: list[_ConsumerState] = []
        self._exited: set[int] = set()           # consumers exit_when closed: not re-opened after a reconnect
        self.reconnector = Reconnector(plan.task, plan.cluster, plan.reconnect_timeout_s, len(plan.steps), plan.driver,
                                       self.driver.reconnect, self._reopen,
                                       self._close_connection, lambda: self.publishers, self.recorder.lose_in_flight,
                                       self._notify_reconnecting, self._fail)
        self._last_counts = dict(self.recorder.counts)
        self._consumer_error: BaseException | None = None
        self.metrics: Any = None
        self.clock: SendClock | None = None
        # wall-clock instants (s) of this task's start-up, reported to the coordinator's --timings
        self.instants: dict[str, float] = {"task started": time.time()}
        self._metrics_server: Any = None
        window = sum(p.confirm_window for p in plan.publishers if p.confirm) \
            if all(p.confirm_window for p in plan.publishers if p.confirm) else 0
        self.selfcheck = SelfCheck(lambda: self.recorder.core.pending, window, self._current_step)
        self.paused = False                      # consumer.pause: the coordinator said pause, not resume yet
        self._pausing: asyncio.Task[None] | None = None
        self.control.on_command = self._on_command

    # ---- lifecycle -----------------------------------------------------------------------
    async def run(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                loop.add_signal_handler(sig, self._interrupt)
        await self.control.connect()
        self.control.hello(self.plan.cluster.name, self.plan.task)
        if self.all_gather is not None and self.plan.control is not None and not self.control.connected:
            # every task must reach the start gate (and the stop signal): one that cannot fails the stage now
            host, port = self.plan.control
            raise ConfigError(f"control: this executor ({socket.gethostname()}) cannot reach the coordinator at "
                              f"{host}:{port}; executors must reach the Spark driver (set spark.driver.host to an "
                              f"address they can reach, and let them connect to that port)")
        self._start_metrics()
        watcher = loop.create_task(self._watch_control())
        ticker: asyncio.Task[None] | None = None
        helpers: list[asyncio.Task[None]] = []
        summary: dict[str, Any] = {}
        completed = False
        try:
            await self.driver.open(self.plan.cluster, self.reconnector.on_lost())
            self.reconnector.uri = self.driver.uri
            self.instants["connected"] = time.time()
            await self.driver.declare(self.plan.topology)
            self.instants["declared"] = time.time()
            if not self.plan.consumer_start_delay_s:
                await self._start_consumers()
            await self._start_publishers()
            self.instants["consumers and publishers ready"] = time.time()
            self.clock = SendClock()
            t0 = await self._agree_t0()
            self.instants["t0 agreed with the other tasks"] = time.time()
            self.recorder.t0_ns = t0
            # what consumers received before t0 was in the queues before this attempt published (an earlier
            # run's or a lost attempt's messages): the live counts and the drain start after it
            self._last_counts = dict(self.recorder.counts)
            self._consumed_before_t0 = self._last_counts["consumed"]
            ticker = loop.create_task(self._tick_every_second())
            helpers.append(loop.create_task(self.selfcheck.run()))
            if self.plan.consumer_start_delay_s:
                starter = loop.create_task(self._start_consumers(t0 + int(self.plan.consumer_start_delay_s * 1e9)))
                helpers.append(starter)
            if self.plan.exit_when != "never":
                helpers.append(loop.create_task(self._watch_exit(t0)))
            published = await self._publish_all(t0)
            load_end_ns = time.time_ns()
            await self.reconnector.settled()          # a reconnect still running: its end (or failure) first
            if self._consumer_error is not None:
                raise self._consumer_error
            unconfirmed = await self._drain_publishers()
            await self.reconnector.settled()
            await self._drain_consumers(published)
            summary = {"t0_ns": t0, "unconfirmed_at_end": unconfirmed, "load_end_ns": load_end_ns,
                       "stopped_by": self._stopped_by(published), "consumed_before_t0": self._consumed_before_t0,
                       "producers": len(self.plan.publishers), "instants": self.instants,
                       "self_check": self.selfcheck.steps()}
            completed = True
        except RbenchError as exc:
            # an error the task can name (a broker refusal, a connection it could not keep, bad input) would
            # happen again if Spark restarted the stage: the driver ends the run instead (docs/cluster.md)
            self.control.send({"cluster": self.plan.cluster.name, "task": self.plan.task,
                               "error": f"{type(exc).__name__}: {exc}"})
            raise
        finally:
            self.reconnector.cancel()
            if ticker is not None:
                ticker.cancel()
            for helper in helpers:
                helper.cancel()
            if self._pausing is not None:
                self._pausing.cancel()
            watcher.cancel()
            await self._close_quietly()
            if self.clock is not None:
                self.clock.close()
            self._send_progress(final=True)
            if self._metrics_server is not None:
                self._metrics_server.shutdown()
            # a failed attempt keeps its parts but is not committed: the reduce ignores it
            counts = self.recorder.close(self.interrupted, commit=completed or self.interrupted)
            await self.control.aclose()
        return {"cluster": self.plan.cluster.name, "task": self.plan.task, "attempt": self.attempt,
                "interrupted": self.interrupted, **summary, **counts,
                "reconnects": [r.as_dict() for r in self.reconnector.records],
                "skipped_disconnected": list(self.reconnector.skipped_by_step)}

    async def _start_publishers(self) -> None:
        """Open every publisher at once: their channels (or connections) open concurrently instead of one
        round trip after another, so the load starts sooner."""
        self.publishers = await self._open_publishers(self.driver)

    async def _open_publishers(self, driver: Driver) -> list[Publisher]:
        """One publisher per planned producer, with its one sink; any failure raises after closing the rest."""
        made = await asyncio.gather(*(driver.publisher(p, sink) for p, sink in zip(self.plan.publishers, self.sinks)),
                                    return_exceptions=True)
        opened = [p for p in made if not isinstance(p, BaseException)]
        for result in made:
            if isinstance(result, BaseException):
                await self._close_all([], opened)
                raise result
        return opened

    def _stopped_by(self, published: int) -> str:
        """Why this task's load ended: the schedule ran out, an interrupt, or every producer reached its count."""
        if self.interrupted:
            return STOPPED_BY_INTERRUPT
        count = self.plan.message_count
        if count is not None and self.plan.publishers and published >= count * len(self.plan.publishers):
            return STOPPED_BY_COUNT
        return STOPPED_BY_SCHEDULE

    def _interrupt(self) -> None:
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

    # ---- riding through a lost connection (rbench.runtime.reconnect) -------------------------
    def _notify_reconnecting(self, reconnecting: bool) -> None:
        """Tell the coordinator (the status line says `reconnecting` while any task is)."""
        self.control.send({"cluster": self.plan.cluster.name, "task": self.plan.task, "step": self._current_step(),
                           "reconnecting": reconnecting})

    async def _close_connection(self) -> None:
        """What is left of the dead connection's driver, publishers and consumers: closed, quickly."""
        await self._close_all(self.consumers, self.publishers, self.driver, timeout=1.0)

    async def _reopen(self, target: ClusterTarget, on_lost: OnLost) -> str | None:
        """A fresh driver on ``target``: declare, re-open every consumer (same recording state) and publisher,
        and make them the task's; the URI it connected to. On any failure nothing it opened stays open."""
        driver = load_driver(self.plan.driver)
        consumers: list[Consumer] = []
        try:
            await driver.open(target, on_lost)
            await driver.declare(self.plan.topology)
            consumers = await self._open_consumers(driver)
            publishers = await self._open_publishers(driver)
        except BaseException:
            await self._close_all(consumers, [], driver, timeout=1.0)
            raise
        self.driver, self.consumers, self.publishers = driver, consumers, publishers
        if self.paused:
            await self._set_paused(True, consumers)
        return driver.uri

    async def _open_consumers(self, driver: Driver) -> list[Consumer]:
        """The consumers started so far, again, each with its ConsumerTap (counts and limits go on); those
        exit_when closed stay closed (a placeholder keeps the positions)."""
        started = self.plan.consumers[:len(self.consumer_states)]
        old = list(self.consumers)                        # the lost connection's, position by position
        specs = [_resumed(spec, old[i] if i < len(old) else None) for i, spec in enumerate(started)]
        made = await asyncio.gather(*(driver.consumer(spec, state) if i not in self._exited else _closed()
                                      for i, (spec, state) in enumerate(zip(specs, self.consumer_states))),
                                    return_exceptions=True)
        opened = [c for c in made if not isinstance(c, BaseException)]
        for result in made:
            if isinstance(result, BaseException):
                await self._close_all(opened, [])
                raise result
        return opened

    def _on_command(self, word: str) -> None:
        """pause / resume from the coordinator (consumer.pause): applied in order, one after the other."""
        paused = word == "pause"
        if paused == self.paused:
            return
        self.paused = paused
        previous = self._pausing

        async def apply() -> None:
            if previous is not None:
                with contextlib.suppress(BaseException):
                    await previous
            await self._set_paused(paused)
        self._pausing = asyncio.get_running_loop().create_task(apply())

    async def _set_paused(self, paused: bool, consumers: list[Consumer] | None = None) -> None:
        targets = self.consumers if consumers is None else consumers
        results = await asyncio.gather(*(c.pause() if paused else c.resume() for c in targets if c.pausable),
                                       return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors and self._consumer_error is None:
            self._consumer_error = errors[0]
            self.stop.set()

    async def _watch_control(self) -> None:
        await self.control.stop_requested.wait()
        self._interrupt()

    async def _start_consumers(self, at_ns: int | None = None) -> None:
        """Subscribe the task's consumers: now, or at ``at_ns`` (PerfTest -csd), start_interval apart (-S)."""
        try:
            if at_ns is not None:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), max(0.0, (at_ns - time.time_ns()) / 1e9))
                if self.stop.is_set():
                    return
            pairs = [(spec, _ConsumerState(self.recorder, spec.consumer_id, self.recorder.queue_index(spec.queue),
                                           self.plan.consumer_message_count)) for spec in self.plan.consumers]
            if not self.plan.consumer_start_interval_s:      # all at once: their subscriptions overlap
                await self._subscribe(pairs, retry=at_ns is not None)
                return
            for i, pair in enumerate(pairs):
                if i:
                    await asyncio.sleep(self.plan.consumer_start_interval_s)
                await self._subscribe([pair], retry=at_ns is not None)
        except Exception as exc:
            if at_ns is None:
                raise
            self._consumer_error = exc          # a delayed start failed: stop and report it
            self.stop.set()

    async def _subscribe(self, pairs: list[tuple[ConsumerSpec, _ConsumerState]], retry: bool) -> None:
        """Open these consumers on the task's driver and add them (paused if the coordinator said so).

        With ``retry`` (a delayed start, mid-run) a connection lost while subscribing is ridden through:
        once the reconnect is done they subscribe again on the new driver."""
        while True:
            if retry:
                await self.reconnector.settled()
            driver = self.driver
            made = await asyncio.gather(*(driver.consumer(spec, state) for spec, state in pairs), return_exceptions=True)
            opened = [c for c in made if not isinstance(c, BaseException)]
            lost = next((r for r in made if isinstance(r, ConnectionLost)), None)
            if retry and (lost is not None or driver is not self.driver or self.reconnector.reconnecting):
                await self._close_all(opened, [], timeout=1.0)
                if lost is not None:
                    self.reconnector.lost(lost)
                continue
            for (_, state), consumer in zip(pairs, made):
                if not isinstance(consumer, BaseException):
                    self.consumer_states.append(state)
                    self.consumers.append(consumer)
            for result in made:               # the ones opened are closed by run()'s clean-up
                if isinstance(result, BaseException):
                    raise result
            if self.paused:
                await self._set_paused(True, opened)
            return

    async def _watch_exit(self, t0: int) -> None:
        """PerfTest -ew: stop a consumer idle for 1 s (idle) or whose queue is then empty (empty);
        when every consumer of the task has stopped, stop publishing and end the task."""
        await asyncio.sleep(max(0.0, (t0 - time.time_ns()) / 1e9 + EXIT_CHECK_AFTER_S))
        seen: dict[int, tuple[int, float]] = {}
        exited = self._exited
        while not self.stop.is_set():
            for i, (state, consumer, spec) in enumerate(zip(self.consumer_states, self.consumers, self.plan.consumers)):
                if i in exited:
                    continue
                now = time.monotonic()
                count = state.count
                last = seen.get(i)
                if last is None or last[0] != count:
                    seen[i] = (count, now)
                    continue
                if now - last[1] <= IDLE_S:
                    continue
                if self.plan.exit_when == "empty":
                    try:
                        messages = await self.driver.messages_ready(spec.queue)
                    except ConnectionLost:
                        continue            # the reconnect re-opens the driver; ask again then
                    if messages:
                        continue
                exited.add(i)
                state.done.set()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(consumer.aclose(), 5)
            if len(exited) == len(self.plan.consumers):
                self.stop.set()
                return
            await asyncio.sleep(1.0)

    async def _agree_t0(self) -> int:
        """All tasks publish from one t0: the latest proposal plus a margin.

        The coordinator's start gate answers within milliseconds once the last task is ready
        (every task reached it, or the stage failed at connect). Spark's allGather, about a
        second per call here, is used only without a coordinator (a barrier stage run directly)."""
        if self.all_gather is None:
            t0 = time.time_ns() + SOLO_MARGIN_NS
        elif self.control.connected:
            t0 = await self.control.agree_t0(self.plan.cluster.name, self.plan.task, time.time_ns())
        else:
            proposal = time.time_ns() + START_MARGIN_NS
            assert self.all_gather is not None
            t0 = max(int(p) for p in await _in_daemon_thread(self.all_gather, str(proposal)))
        self.control.send({"cluster": self.plan.cluster.name, "task": self.plan.task, "t0_ns": t0, "step": 0})
        return t0

    async def _publish_all(self, t0: int) -> int:
        rng = random.Random(self.plan.seed)
        steps = [(s.offset_s, s.duration_s, s.rate) for s in self.plan.steps]
        jobs = []
        n = len(self.publishers)
        assert self.clock is not None
        for i, (pub, spec) in enumerate(zip(self.publishers, self.plan.publishers)):
            delay_ns = int(rng.random() * self.plan.random_start_delay_s * 1e9)
            phase = phase_of(self.plan.phase, i, n, rng.random())
            segs = list(segments(t0, delay_ns, steps, phase))
            chooser = None
            if self.plan.bodies or self.plan.variable_size:
                chooser = BodyChooser(self.recorder, spec.producer_id, self.recorder.queue_index(spec.queue),
                                      spec.confirm, self.plan.bodies, self.plan.variable_size, t0)
            jobs.append(run_producer(pub, spec, self.recorder, segs, self.plan.size, self.plan.message_count, self.stop,
                                     self.clock, chooser, self.reconnector.for_producer(i)))
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
        routed = dict(self.plan.routes)          # fan-out: a message reaches every queue listed for its producer
        targets = [set(routed.get(p.producer_id, (p.queue,))) for p in self.plan.publishers]
        # after a reconnect the delivery count proves nothing: redeliveries count twice and messages in flight
        # at the cut may never come, so the drain waits until deliveries stop instead (a count reached early
        # once left the run's last confirmed message in the queue, reported as lost)
        expect_all = all(t <= own_queues for t in targets) and not self.reconnector.records
        copies = sum(len(t) for t in targets) / len(targets) if targets else 1.0
        last, idle_since = -1, time.monotonic()
        while time.monotonic() < deadline:
            if self._consumer_error is not None:
                raise self._consumer_error
            counts = self.recorder.counts
            consumed = counts["consumed"] - self._consumed_before_t0      # this attempt's own messages
            if all(s.done.is_set() for s in self.consumer_states):
                return
            if expect_all and published and consumed >= (counts["published"] - counts["returned"] - counts["nacked"]) * copies:
                return
            if consumed != last:
                last, idle_since = consumed, time.monotonic()
            elif not expect_all and time.monotonic() - idle_since > 1.0:
                return
            await asyncio.sleep(0.05)

    async def _close_quietly(self) -> None:
        await self._close_all(self.consumers, self.publishers, self.driver)

    @staticmethod
    async def _close_all(consumers: list[Consumer], publishers: list[Publisher], driver: Driver | None = None,
                         timeout: float = 5.0) -> None:
        for closer in [*(c.aclose() for c in consumers), *(p.aclose() for p in publishers)]:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(closer, timeout)
        if driver is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(driver.aclose(), timeout)

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
                           "hist": histogram.bucket_counts(e2e), "final": final,
                           "confirm_hist": histogram.bucket_counts(confirms),
                           "e2e_sum_ns": int(e2e.sum()), "confirm_sum_ns": int(confirms.sum()),
                           "gen": self.selfcheck.second()})

    def _start_metrics(self) -> None:
        """Serve Prometheus metrics when the workload asks (port + task index, or any free port)."""
        if self.plan.metrics_port is None:
            return
        from rbench.live.metrics import TaskMetrics, serve

        self.metrics = TaskMetrics(self.plan.run_id, self.plan.cluster.name, self.plan.task)
        port = self.plan.metrics_port + self.plan.task if self.plan.metrics_port else 0
        try:
            self._metrics_server, port = serve(self.metrics, port)
        except OSError as exc:
            raise ConfigError(f"metrics_port: cannot listen on port {port} ({exc.strerror})") from None
        self.control.send({"cluster": self.plan.cluster.name, "task": self.plan.task, "metrics_port": port,
                           "host": socket.gethostname()})
