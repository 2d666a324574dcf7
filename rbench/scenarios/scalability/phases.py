"""What one Spark task does in one phase of one level (executor side: no pyspark, no pydantic).

Everything goes through rbench's native AMQP 0-9-1 stack. The task connects and opens its
channel first, then waits at the stage's barrier, so every task's timed part starts together
and connection set-up is never timed. Declares, binds and deletes are synchronous RPCs, one at a
time, as ScalabilityTest did: the time per queue is the broker's round trip for that operation.
A routing probe publishes with confirms (a window of CONFIRM_WINDOW) and ends at the last confirm.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from rbench.codec.amqp091 import K, PublishEncoder
from rbench.config.types import ClusterTarget
from rbench.drivers.amqp091 import Amqp091Driver
from rbench.drivers.amqp091_protocol import Channel, Connection
from rbench.errors import BrokerError
from rbench.samples.broker_facts import BrokerFacts
from rbench.scenarios.scalability import counters

CONFIRM_WINDOW = 2000
CONFIRM_TIMEOUT_S = 120.0
COUNTER_SETTLE_S = 6.0       # longer than the broker's default stats interval (5 s), in case counters lag
ALARM_GRACE_S = 3.0          # publishing blocked this long by the broker = a resource alarm: give up the probe
BODY = b"rbench-scalability"

Barrier = Callable[[], None]


@dataclass(frozen=True)
class PhaseWork:
    """One task's share of one phase: handed to the executor, so plain data only."""

    uris: tuple[str, ...]
    phase: str                                  # create | route | delete
    task: int
    exchange: str = ""
    empty_exchange: str = ""                    # route: the baseline's exchange, with no bindings
    queues: tuple[str, ...] = ()                # create/delete: this task's share
    binding_keys: tuple[str, ...] = ()          # create: every queue gets all of them
    publish_keys: tuple[str, ...] = ()          # route: cycled, one per message
    messages: int = 0                           # route: this task's share of n
    queue_arguments: tuple[tuple[str, Any], ...] = ()
    prometheus: str = ""                        # route, task 0: read the broker's routed counter here
    routed_expected: int = 0                    # route: n × q, what that counter should move by


def run_phase(work: PhaseWork, barrier: Barrier | None = None) -> list[dict[str, Any]]:
    """Run one task's share on its own event loop; one result dict per timed part."""
    try:
        import uvloop
        runner: Callable[[Coroutine[Any, Any, list[dict[str, Any]]]], list[dict[str, Any]]] = uvloop.run
    except ImportError:   # pragma: no cover - uvloop is a dependency
        runner = asyncio.run
    return runner(_run(work, barrier))


async def _run(work: PhaseWork, barrier: Barrier | None) -> list[dict[str, Any]]:
    driver = Amqp091Driver()
    await driver.open(ClusterTarget("scalability", work.uris))
    try:
        conn = driver.connection
        ch = await conn.channel()
        if work.phase == "route":
            await ch.rpc(K.CONFIRM_SELECT, (False,), (K.CONFIRM_SELECT_OK,), "confirm.select")
            probe = _Probe(conn, ch)
            checker = work.task == 0 and bool(work.prometheus)
            before = counters.routed_snapshot(work.prometheus, work.exchange) if checker else None
            sync = barrier or (lambda: None)
            sync()
            baseline = await probe.publish(work.empty_exchange, ("unbound",), work.messages)
            routed = await probe.publish(work.exchange, work.publish_keys, work.messages)
            # every task's last confirm is in and every probe channel still open (the broker drops a closed
            # channel's counters): task 0 reads the routed counter, then all close
            sync()
            counted = await _routed(work, before) if checker else None
            sync()
            routed["routed_counted"] = counted
            return [dict(baseline, phase="baseline", task=work.task), dict(routed, phase="route", task=work.task)]
        if barrier is not None:
            barrier()
        if work.phase == "create":
            part = await _create(ch, work, _transient_removed(driver.server_properties))
        elif work.phase == "delete":
            part = await _delete(ch, work)
        else:
            raise BrokerError(f"unknown phase {work.phase!r}")
        await ch.close()
        return [dict(part, phase=work.phase, task=work.task)]
    finally:
        await driver.aclose()


async def _routed(work: PhaseWork, before: counters.Snapshot | None) -> int | None:
    """Messages × queues the probe channels routed, read until it reaches n × q (or stops moving)."""
    if before is None:
        return None
    deadline = time.monotonic() + COUNTER_SETTLE_S
    while True:
        counted = counters.routed_since(before, counters.routed_snapshot(work.prometheus, work.exchange))
        if counted is None or counted >= work.routed_expected or time.monotonic() > deadline:
            return counted
        await asyncio.sleep(0.2)


def _transient_removed(server: Mapping[str, Any]) -> bool:
    version = server.get("version", "")
    text = version.decode(errors="replace") if isinstance(version, bytes) else str(version)
    return BrokerFacts(version=text).transient_queues_removed()


async def _create(ch: Channel, work: PhaseWork, durable: bool) -> dict[str, Any]:
    """Declare this task's queues: transient, or durable where the broker refuses transient non-exclusive queues
    (RabbitMQ 4.3+); the result says which, so the sweep can say it once."""
    arguments = dict(work.queue_arguments)
    t0 = time.time_ns()
    for name in work.queues:
        await ch.rpc(K.QUEUE_DECLARE, (0, name, False, durable, False, False, False, arguments),
                     (K.QUEUE_DECLARE_OK,), f"declare queue {name!r}")
        for key in work.binding_keys:
            await ch.rpc(K.QUEUE_BIND, (0, name, work.exchange, key, False, {}), (K.QUEUE_BIND_OK,),
                         f"bind queue {name!r} to {work.exchange!r}")
    return {"ops": len(work.queues), "t_start_ns": t0, "t_end_ns": time.time_ns(), "durable": durable}


async def _delete(ch: Channel, work: PhaseWork) -> dict[str, Any]:
    t0 = time.time_ns()
    for name in work.queues:
        await ch.rpc(K.QUEUE_DELETE, (0, name, False, False, False), (K.QUEUE_DELETE_OK,), f"delete queue {name!r}")
    return {"ops": len(work.queues), "t_start_ns": t0, "t_end_ns": time.time_ns()}


class _Probe:
    """Mandatory publishes with confirms on one channel; counts acks, nacks and returns."""

    def __init__(self, conn: Connection, ch: Channel) -> None:
        self.conn, self.ch = conn, ch
        self.published = 0          # delivery tags are consecutive from 1 on a confirm channel
        self.confirmed_upto = 0     # every tag <= this is settled (multiple acks)
        self.settled: set[int] = set()   # single acks above confirmed_upto
        self.nacked = 0
        self.returned = 0
        self.waiter: asyncio.Future[None] | None = None
        ch.on_return = self._on_return
        ch.close_listeners.append(lambda error: self._wake())
        conn.flow_listeners.add(self._wake)
        conn.reader.set_ack_handler(ch.number, self._on_ack)

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def _on_return(self, args: tuple[Any, ...], props: dict[str, Any], body: bytes) -> None:
        self.returned += 1

    def _on_ack(self, tag: int, multiple: bool, acked: bool) -> None:
        if multiple:
            newly = tag - self.confirmed_upto - sum(1 for t in self.settled if t <= tag)
            self.settled = {t for t in self.settled if t > tag}
            self.confirmed_upto = max(self.confirmed_upto, tag)
        else:
            newly = 1
            self.settled.add(tag)
            while self.confirmed_upto + 1 in self.settled:
                self.confirmed_upto += 1
                self.settled.discard(self.confirmed_upto)
        if not acked:
            self.nacked += newly
        self._wake()

    def outstanding(self) -> int:
        return self.published - self.confirmed_upto - len(self.settled)

    async def _wait(self, until: Callable[[], bool], deadline: float) -> bool:
        """Wait until `until()`; False when a resource alarm blocks us past ALARM_GRACE_S."""
        blocked_since: float | None = None
        while not until():
            if self.ch.error is not None:
                raise self.ch.error
            now = time.monotonic()
            if now > deadline:
                raise BrokerError(f"routing probe: {self.outstanding()} confirms missing after {CONFIRM_TIMEOUT_S:.0f} s")
            if self.conn.blocked:
                blocked_since = blocked_since or now
                if now - blocked_since > ALARM_GRACE_S:
                    return False
            else:
                blocked_since = None
            self.conn.flush()
            self.waiter = self.conn.loop.create_future()
            try:
                await asyncio.wait_for(self.waiter, 0.5)
            except asyncio.TimeoutError:
                pass
        return True

    async def publish(self, exchange: str, keys: tuple[str, ...], messages: int) -> dict[str, Any]:
        """Publish `messages` (routing keys cycled) and wait for every confirm; time to the last one."""
        encoders = [PublishEncoder(self.ch.number, exchange, key, True, {}, self.conn.frame_max) for key in keys]
        returned0, nacked0, start_tag = self.returned, self.nacked, self.published
        deadline = time.monotonic() + CONFIRM_TIMEOUT_S
        blocked = False
        t0 = time.time_ns()
        for m in range(messages):
            if self.outstanding() >= CONFIRM_WINDOW or self.conn.blocked:
                if not await self._wait(lambda: self.outstanding() < CONFIRM_WINDOW // 2 and not self.conn.blocked, deadline):
                    blocked = True
                    break
            encoders[m % len(encoders)].write(self.conn.out, BODY)
            self.published += 1
            self.conn.schedule_flush()
        if not blocked:
            blocked = not await self._wait(lambda: self.outstanding() == 0, deadline)
        t1 = time.time_ns()
        return {"ops": self.published - start_tag, "t_start_ns": t0, "t_end_ns": t1, "returned": self.returned - returned0,
                "nacked": self.nacked - nacked0, "blocked": blocked}
