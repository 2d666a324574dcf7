"""Riding through a lost broker connection: fail over, re-declare, re-open, go on on schedule.

A node killed or a TCP connection cut mid-run should cost what it costs a real client, and the
run should say what that was, instead of failing the whole Spark stage. When the task's
connection dies (``rbench.errors.ConnectionLost`` from a publisher, or the driver's ``on_lost``
callback for a task that only consumes), one ``Reconnector`` per task:

1. marks every message still waiting for its confirm ``connection_lost`` (no confirm can come any
   more; such a message is not sent again) and closes what is left of the old driver;
2. opens a fresh driver on the cluster's URIs starting with the one after the URI that died,
   round after round (back-off ``BACKOFF_S`` between rounds), until ``reconnect_timeout`` passes;
3. declares the topology again (declares are idempotent), re-opens every consumer with its same
   recording state (the ConsumerTap: counts and message limits go on) and every publisher;
4. hands each producer its new publisher; the producer skips the slots whose due time passed
   meanwhile (rbench.runtime.producer) and reports them here, per step.

Each loss is one record in the task's result (``records``; run.json ``reconnects``). The driver
contract for this is in rbench/drivers/base.py; the doc is docs/drivers.md.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from rbench.config.types import ClusterTarget
from rbench.config.uri import mask_text, mask_uri
from rbench.drivers.base import OnLost, Publisher
from rbench.errors import BrokerError, ConnectError, ConnectionLost

# pause before the 2nd, 3rd, … round of connection attempts (then the last value again)
BACKOFF_S: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.0)


@dataclass
class Reconnect:
    """One lost connection of a task, as run.json lists it (``reconnects``)."""

    task: int
    t_lost_ns: int                   # when the task learnt of the loss (time.time_ns)
    t_back_ns: int | None = None     # when publishers and consumers were open again; None: never (stopped first)
    uri: str | None = None           # where it reconnected, password masked
    in_flight: int = 0               # messages marked connection_lost (published, no confirm yet)
    skipped: int = 0                 # schedule slots not sent while disconnected

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def failover(target: ClusterTarget, dead: str | None) -> ClusterTarget:
    """``target`` with its URI lists rotated to start after ``dead``, the URI whose connection died.

    The lists are per node (uris[i], stream_uris[i] and amqp10_uris[i] are node i): each list turns by
    the position of ``dead`` in the list holding it, so a driver tries the next node first and the
    dead one last. A URI in no list (or None) leaves the order as it is."""
    lists = (target.uris, target.amqp10_uris, target.stream_uris)
    at = next((uris.index(dead) for uris in lists if dead is not None and dead in uris), None)
    if at is None:
        return target

    def turned(uris: tuple[str, ...]) -> tuple[str, ...]:
        if not uris:
            return uris
        k = (at + 1) % len(uris)
        return uris[k:] + uris[:k]

    return replace(target, uris=turned(target.uris), amqp10_uris=turned(target.amqp10_uris),
                   stream_uris=turned(target.stream_uris))


# opens a fresh driver on a (failed-over) target with this on_lost, declares, re-opens every consumer and
# publisher and makes them the task's; returns the URI it connected to. Raises and leaves nothing open on failure.
Reopen = Callable[[ClusterTarget, OnLost], Awaitable[str | None]]


class Reconnector:
    """The task's connection-loss state: at most one reconnect at a time, its records and skipped slots."""

    def __init__(self, task: int, target: ClusterTarget, timeout_s: float, steps: int, driver_name: str,
                 driver_reconnects: bool, reopen: Reopen, close_old: Callable[[], Awaitable[None]],
                 publishers: Callable[[], Sequence[Publisher]], lose_in_flight: Callable[[], int],
                 notify: Callable[[bool], None], fail: Callable[[BaseException], None]) -> None:
        self.task = task
        self.target = target
        self.timeout_s = timeout_s
        self.driver_name = driver_name
        self.driver_reconnects = driver_reconnects
        self._reopen = reopen
        self._close_old = close_old
        self._publishers = publishers
        self._lose_in_flight = lose_in_flight
        self._notify = notify
        self._fail = fail
        self.uri: str | None = None              # the URI the current driver is connected to
        self.records: list[Reconnect] = []
        self.skipped_by_step = [0] * steps
        self.failure: BaseException | None = None
        self.generation = 0                      # drivers opened so far; on_lost of an older one is ignored
        self._running: asyncio.Task[None] | None = None
        self._settled = asyncio.Event()
        self._settled.set()
        self._stopped = asyncio.Event()

    # ---- what the task and the drivers call ----------------------------------------------------
    def on_lost(self) -> OnLost:
        """The ``on_lost`` callback for the driver about to be opened (the current generation)."""
        generation = self.generation
        return lambda error: self.lost(error) if generation == self.generation else None

    @property
    def reconnecting(self) -> bool:
        return self._running is not None

    def stop(self) -> None:
        """The task is stopping (interrupted, or failed): producers waiting for the connection stop waiting,
        and a reconnect still trying stops (its record keeps ``t_back_ns`` None)."""
        self._stopped.set()
        running = self._running
        if running is not None and running is not asyncio.current_task():
            running.cancel()

    def lost(self, error: BaseException) -> None:
        """The connection died (or the broker closed it): start riding through it, or fail the task."""
        if self.failure is not None or self._running is not None:
            return
        if not isinstance(error, ConnectionLost):
            self._give_up(error)
            return
        if not self.timeout_s or not self.driver_reconnects:
            why = ("reconnect_timeout is 0" if not self.timeout_s
                   else f"the {self.driver_name} driver does not reconnect, docs/drivers.md")
            self._give_up(ConnectionLost(f"{error} ({why})"))
            return
        record = Reconnect(self.task, time.time_ns(), in_flight=self._lose_in_flight())
        self.records.append(record)
        self._settled.clear()
        self._notify(True)
        self._running = asyncio.get_running_loop().create_task(self._ride_through(record, error))

    async def settled(self) -> None:
        """Return once no reconnect is running; raise the task's failure if it gave up."""
        await self._settled.wait()
        if self.failure is not None:
            raise self.failure

    async def publisher(self, index: int, pub: Publisher, error: ConnectionLost, until_ns: int) -> Publisher | None:
        """Producer ``index``'s publisher after the loss ``error`` of ``pub`` (rbench.runtime.producer.Recovery)."""
        while True:
            if self.failure is not None:
                raise self.failure
            current = self._publishers()[index] if index < len(self._publishers()) else pub
            if current is not pub and self._running is None:
                return current                       # a reconnect already replaced it
            self.lost(error)
            if self.failure is not None:
                raise self.failure
            waits = [asyncio.ensure_future(self._settled.wait()), asyncio.ensure_future(self._stopped.wait())]
            try:
                await asyncio.wait(waits, timeout=max(0.0, (until_ns - time.time_ns()) / 1e9),
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
            if self.failure is not None:
                raise self.failure
            if self._stopped.is_set() or time.time_ns() >= until_ns:
                return None
            if self._running is None:
                new = self._publishers()[index]
                if new is not pub:
                    return new

    def for_producer(self, index: int) -> ProducerRecovery:
        """The ``Recovery`` of the task's producer ``index`` (rbench.runtime.producer)."""
        return ProducerRecovery(self, index)

    def skipped(self, step: int, slots: int) -> None:
        if 0 <= step < len(self.skipped_by_step):
            self.skipped_by_step[step] += slots
        if self.records:
            self.records[-1].skipped += slots

    def cancel(self) -> None:
        if self._running is not None:
            self._running.cancel()

    # ---- the reconnect ------------------------------------------------------------------------
    async def _ride_through(self, record: Reconnect, error: ConnectionLost) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        dead = self.uri
        rounds = 0
        last = str(error)
        try:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._close_old(), 5)
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                rounds += 1
                target = failover(self.target, dead)
                self.generation += 1
                try:
                    uri = await asyncio.wait_for(self._reopen(target, self.on_lost()), remaining)
                except (asyncio.TimeoutError, TimeoutError):
                    tried = ", ".join(mask_uri(u) for u in target.uris or target.stream_uris)
                    last = f"{tried}: no answer before the deadline"
                    break
                except BrokerError as exc:
                    # refused, not answering, lost again, or a refusal while declaring (a queue whose node
                    # is down is 404 until it is back): another round may succeed
                    last = str(exc)
                    pause = BACKOFF_S[min(rounds - 1, len(BACKOFF_S) - 1)]
                    await asyncio.sleep(min(pause, max(0.0, deadline - loop.time())))
                    continue
                self.uri = uri
                record.t_back_ns = time.time_ns()
                record.uri = mask_uri(uri) if uri is not None else None
                record.in_flight += self._lose_in_flight()   # published on the old driver after the first count
                return
            self._give_up(ConnectError(mask_text(
                f"task {self.task}: connection to {mask_uri(dead) if dead else 'the broker'} lost ({error}) and not "
                f"back within reconnect_timeout {self.timeout_s:g} s after {rounds} round(s); last: {last}")))
        except BaseException as exc:          # anything unexpected fails the task, never silently
            if not isinstance(exc, asyncio.CancelledError):
                self._give_up(exc)
            raise
        finally:
            self._running = None
            self._settled.set()
            self._notify(False)

    def _give_up(self, error: BaseException) -> None:
        if self.failure is None:
            self.failure = error
            self._settled.set()
            self._fail(error)


class ProducerRecovery:
    """One producer's view of the task's Reconnector (rbench.runtime.producer.Recovery)."""

    __slots__ = ("_reconnector", "_index")

    def __init__(self, reconnector: Reconnector, index: int) -> None:
        self._reconnector = reconnector
        self._index = index

    async def publisher(self, pub: Publisher, error: ConnectionLost, until_ns: int) -> Publisher | None:
        return await self._reconnector.publisher(self._index, pub, error, until_ns)

    def skipped(self, step: int, slots: int) -> None:
        self._reconnector.skipped(step, slots)
