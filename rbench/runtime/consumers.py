"""A task's consumers: subscribed now or later, re-opened after a lost connection, paused and resumed.

Each consumer keeps one ConsumerState for the whole task (its counts and its message limit go on
across a reconnect); a consumer exit_when closed stays closed after a reconnect, a placeholder keeping
the positions of the others. Pause and resume come from the coordinator (consumer.pause) and apply in
the order they came, to the consumers of the connection the task has at that moment.
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable

from rbench.config.types import ConsumerSpec, TaskPlan
from rbench.drivers.base import Consumer, Driver, OnMessage
from rbench.errors import ConnectionLost
from rbench.runtime._recorder import ConsumerTap
from rbench.runtime.closing import close_all
from rbench.runtime.reconnect import Reconnector
from rbench.runtime.recorder import Recorder


class ConsumerState(ConsumerTap):
    """Per-consumer callback target: records a delivery, stops at the message count.

    ``__call__(body, redelivered, t_received)`` is ConsumerTap's, in C (ext/runtime/recorder.pyx):
    unless ``count`` reached ``limit`` it records the delivery into the recorder core
    (a body without a stamp is counted but not recorded), and sets ``done`` at the limit."""

    __slots__ = ()

    def __init__(self, recorder: Recorder, consumer_id: int, queue_idx: int, limit: int | None) -> None:
        super().__init__(recorder.core, recorder, consumer_id, queue_idx, limit, asyncio.Event())

    def for_queue(self, queue: str) -> OnMessage:
        """The callback for deliveries from ``queue`` when one consumer reads several (a super stream's partitions):
        recorded under that queue, so order and copies are judged per partition; same counts and limit."""
        return functools.partial(self.record_in, self.recorder.queue_index(queue))


class Exited:
    """Stands in for a consumer exit_when closed: after a reconnect it stays closed, and pausing or resuming
    it changes nothing."""

    pausable = True

    def resume_spec(self, spec: ConsumerSpec) -> ConsumerSpec:
        return spec

    async def pause(self) -> None:
        return None

    async def resume(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


async def _exited() -> Consumer:
    return Exited()


def resumed(spec: ConsumerSpec, old: Consumer | None) -> ConsumerSpec:
    """A consumer subscribed again after a lost connection: where its driver says to go on from (a stream
    consumer from the first offset it had not handled), else its own spec."""
    return spec if old is None else old.resume_spec(spec)


class TaskConsumers:
    """The consumers of one task and their recording state, position by position (plan.consumers' order)."""

    def __init__(self, plan: TaskPlan, recorder: Recorder, reconnector: Reconnector, driver: Callable[[], Driver],
                 stop: asyncio.Event, fail: Callable[[BaseException], None]) -> None:
        """``driver`` gives the task's current driver (a reconnect replaces it); ``fail`` stops the task with
        an error (a delayed start or a pause that failed)."""
        self.plan = plan
        self.recorder = recorder
        self.reconnector = reconnector
        self.driver = driver
        self.stop = stop
        self.fail = fail
        self.consumers: list[Consumer] = []
        self.states: list[ConsumerState] = []
        self.exited: set[int] = set()            # consumers exit_when closed: not re-opened after a reconnect
        self.paused = False                      # consumer.pause: the coordinator said pause, not resume yet
        self.filtered_before = 0                 # stream filtering: dropped client-side by consumers since replaced
        self._pausing: asyncio.Task[None] | None = None

    async def start(self, at_ns: int | None = None) -> None:
        """Subscribe the task's consumers: now, or at ``at_ns`` (PerfTest -csd), start_interval apart (-S)."""
        try:
            if at_ns is not None:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), max(0.0, (at_ns - time.time_ns()) / 1e9))
                if self.stop.is_set():
                    return
            pairs = [(spec, ConsumerState(self.recorder, spec.consumer_id, self.recorder.queue_index(spec.queue),
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
            self.fail(exc)                      # a delayed start failed: stop and report it

    async def _subscribe(self, pairs: list[tuple[ConsumerSpec, ConsumerState]], retry: bool) -> None:
        """Open these consumers on the task's driver and add them (paused if the coordinator said so).

        With ``retry`` (a delayed start, mid-run) a connection lost while subscribing is ridden through:
        once the reconnect is done they subscribe again on the new driver."""
        while True:
            if retry:
                await self.reconnector.settled()
            driver = self.driver()
            made = await asyncio.gather(*(driver.consumer(spec, state) for spec, state in pairs), return_exceptions=True)
            opened = [c for c in made if not isinstance(c, BaseException)]
            lost = next((r for r in made if isinstance(r, ConnectionLost)), None)
            if retry and (lost is not None or driver is not self.driver() or self.reconnector.reconnecting):
                await close_all(opened, [], timeout=1.0)
                if lost is not None:
                    self.reconnector.lost(lost)
                continue
            for (_, state), consumer in zip(pairs, made):
                if not isinstance(consumer, BaseException):
                    self.states.append(state)
                    self.consumers.append(consumer)
            for result in made:               # the ones opened are closed by the task's clean-up
                if isinstance(result, BaseException):
                    raise result
            if self.paused:
                await self.set_paused(True, opened)
            return

    async def open_on(self, driver: Driver) -> list[Consumer]:
        """The consumers started so far, again, on ``driver``, each with its ConsumerState (counts and limits
        go on); those exit_when closed stay closed. Any failure raises after closing the rest."""
        started = self.plan.consumers[:len(self.states)]
        old = list(self.consumers)                        # the lost connection's, position by position
        specs = [resumed(spec, old[i] if i < len(old) else None) for i, spec in enumerate(started)]
        made = await asyncio.gather(*(driver.consumer(spec, state) if i not in self.exited else _exited()
                                      for i, (spec, state) in enumerate(zip(specs, self.states))),
                                    return_exceptions=True)
        opened = [c for c in made if not isinstance(c, BaseException)]
        for result in made:
            if isinstance(result, BaseException):
                await close_all(opened, [])
                raise result
        return opened

    def filtered(self) -> int:
        """Messages the broker sent that the consumers' stream filter dropped (stream driver; 0 elsewhere)."""
        return self.filtered_before + sum(int(getattr(c, "filtered", 0)) for c in self.consumers)

    async def adopt(self, consumers: list[Consumer]) -> None:
        """Make ``open_on``'s consumers the task's (paused, if the coordinator said so)."""
        self.filtered_before += sum(int(getattr(c, "filtered", 0)) for c in self.consumers)
        self.consumers = consumers
        if self.paused:
            await self.set_paused(True, consumers)

    def on_command(self, word: str) -> None:
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
            await self.set_paused(paused)
        self._pausing = asyncio.get_running_loop().create_task(apply())

    async def set_paused(self, paused: bool, consumers: list[Consumer] | None = None) -> None:
        targets = self.consumers if consumers is None else consumers
        results = await asyncio.gather(*(c.pause() if paused else c.resume() for c in targets if c.pausable),
                                       return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            self.fail(errors[0])

    def cancel(self) -> None:
        """The task ends: a pause or resume still being applied stops."""
        if self._pausing is not None:
            self._pausing.cancel()
