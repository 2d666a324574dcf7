"""One producer: follows its schedule, stamps each body, hands it to the driver.

When the connection dies (``ConnectionLost`` from ``ready()``/``publish()``) the producer asks its
``Recovery`` for the publisher of the reconnected driver and goes on on its schedule: slots whose
due time passed meanwhile are skipped, not sent late in a burst (docs/drivers.md).
"""
from __future__ import annotations

import asyncio
import time
from typing import Protocol

from rbench.config.types import PublisherSpec
from rbench.drivers.base import Publisher
from rbench.errors import ConnectionLost
from rbench.runtime._recorder import ConfirmSink, Stamper
from rbench.runtime.clock import SendClock
from rbench.runtime.recorder import Recorder
from rbench.runtime.schedule import Segment, due_times, slot_at
from rbench.runtime.stamp import new_payload

YIELD_EVERY = 64          # when behind schedule or unlimited, let consumers run this often


class ProducerSink(ConfirmSink):
    """PublishSink of one producer: routes confirms and returns to the recorder.

    ``on_confirm`` is ConfirmSink's (C: straight into the recorder core's pending map);
    ``on_return`` calls ``recorder.returned(body, t_ns)``."""

    __slots__ = ()

    def __init__(self, recorder: Recorder, producer: int) -> None:
        super().__init__(recorder.core, recorder, producer)


async def _wait_until(clock: SendClock, t_ns: int, stop: asyncio.Event) -> bool:
    """Wait for the task's send clock to reach wall-clock t_ns; False when stop was set meanwhile."""
    if stop.is_set():
        return False
    due = clock.wait_until(t_ns)
    if due is not None:
        await due                   # the clock releases every waiter when the task stops (wake_all)
    return not stop.is_set()


_NEVER = 2**63 - 1


class BodyChooser:
    """Which body (and its stamper) message ``seq`` due at ``t_ns`` uses, when bodies vary.

    Templates (PerfTest -B files, --json-body documents) are used in turn, by seq; a
    variable size (PerfTest -vs SIZE:SECONDS) cycles over time from t0. Each distinct
    body is one reused bytearray with its own stamper, so the per-message work stays a
    stamp into a buffer."""

    def __init__(self, recorder: Recorder, pid: int, qidx: int, confirm: bool, templates: tuple[bytes, ...],
                 variable_size: tuple[tuple[int, float], ...], t0_ns: int) -> None:
        self._recorder, self._pid, self._qidx, self._confirm = recorder, pid, qidx, confirm
        self._templates = [self._make(_template(t)) for t in templates]
        self._sizes = [(size, int(seconds * 1e9)) for size, seconds in variable_size]
        self._cycle_ns = sum(d for _, d in self._sizes)
        self._t0 = t0_ns
        self._by_size: dict[int, tuple[Stamper, bytearray]] = {}

    def _make(self, body: bytearray) -> tuple[Stamper, bytearray]:
        return self._recorder.stamper(body, self._pid, self._qidx, self._confirm), body

    def __call__(self, seq: int, t_ns: int) -> tuple[Stamper, bytearray]:
        if self._templates:
            return self._templates[seq % len(self._templates)]
        pos = (t_ns - self._t0) % self._cycle_ns if self._cycle_ns else 0
        size = self._sizes[-1][0]
        for step_size, duration in self._sizes:
            if pos < duration:
                size = step_size
                break
            pos -= duration
        chosen = self._by_size.get(size)
        if chosen is None:
            chosen = self._by_size[size] = self._make(new_payload(size))
        return chosen


def _template(data: bytes) -> bytearray:
    body = new_payload(len(data))
    body[:len(data)] = data
    return body


class Recovery(Protocol):
    """How a producer rides through a lost connection (rbench.runtime.reconnect)."""

    async def publisher(self, pub: Publisher, error: ConnectionLost, until_ns: int) -> Publisher | None:
        """The producer's publisher once the connection is back; None when the task stops or ``until_ns``
        (the end of the producer's schedule) passes first. Raises when the task does not ride through
        ``error`` (reconnect off, or the driver cannot) or gives up."""

    def skipped(self, step: int, slots: int) -> None:
        """``slots`` slots of ``step`` were not sent because the connection was down."""


async def run_producer(pub: Publisher, spec: PublisherSpec, recorder: Recorder, segments: list[Segment],
                       size: int, message_count: int | None, stop: asyncio.Event, clock: SendClock | None = None,
                       chooser: BodyChooser | None = None, recovery: Recovery | None = None) -> int:
    """Publish along `segments`; returns how many messages were published.

    ``clock`` is the task's shared send clock (rbench.runtime.clock); a producer run on its own
    gets a clock of its own.

    Per message: ``await pub.ready()``, then one C call ``stamp(seq, t_intended, not_after)``
    (``stamp_now``: t_intended = t_sent, for unlimited rate) takes t_sent, writes the stamp into the reused body and records the row (or returns 0
    when t_sent is past ``not_after``: nothing stamped, nothing recorded), then
    ``pub.publish``; if that raises, the row is dropped again, as if never recorded.
    With a ``chooser`` (bodies that vary) the body and its stamper are picked per message.

    A ``ConnectionLost`` goes to ``recovery`` (without one it propagates). seq counts published
    messages only; with ``message_count`` and a rate, skipped slots count towards it (the producer
    keeps to the schedule it would have had without the loss, and ends when it would have)."""
    own_clock = clock is None
    clock = clock or SendClock()
    try:
        return await _produce(pub, spec, recorder, segments, size, message_count, stop, clock, chooser, recovery)
    finally:
        if own_clock:
            clock.close()


_DONE, _STOPPED, _LOST = range(3)


async def _recover(recovery: Recovery | None, pub: Publisher, error: ConnectionLost, until_ns: int) -> Publisher | None:
    if recovery is None:
        raise error
    return await recovery.publisher(pub, error, until_ns)


def _slots_passed(seg: Segment, first: int, budget: int | None, t_ns: int) -> int:
    """Slots of a rate-limited ``seg`` from ``first`` that are due before ``t_ns`` (within ``budget``)."""
    k = slot_at(seg, t_ns)
    if budget is not None:
        k = min(k, budget)
    return max(0, k - first)


async def _produce(pub: Publisher, spec: PublisherSpec, recorder: Recorder, segments: list[Segment],
                   size: int, message_count: int | None, stop: asyncio.Event, clock: SendClock,
                   chooser: BodyChooser | None, recovery: Recovery | None) -> int:
    body = new_payload(size)
    qidx = recorder.queue_index(spec.queue)
    stamper = recorder.stamper(body, spec.producer_id, qidx, spec.confirm)
    seq = 0             # messages published
    skipped = 0         # schedule slots not sent because the connection was down
    resume_ns = 0       # the connection came back then: slots due before it are skipped
    until_ns = segments[-1].end_ns if segments else 0
    for i, seg in enumerate(segments):
        if not await _wait_until(clock, seg.start_ns, stop):
            return seq
        if seg.interval_ns is None:
            limit = _NEVER if message_count is None else message_count - skipped
            while True:
                seq, lost = await _unlimited(pub, seg, limit, seq, stamper, body, chooser, stop)
                if lost is None:
                    break
                new = await _recover(recovery, pub, lost, until_ns)
                if new is None:
                    return seq
                pub = new
            continue
        budget = None if message_count is None else message_count - seq - skipped   # slots this segment may use
        first = 0
        while True:
            if resume_ns > seg.start_ns:
                n = _slots_passed(seg, first, budget, resume_ns)
                if n:
                    skipped += n
                    first += n
                    assert recovery is not None
                    recovery.skipped(seg.step, n)
            seq0 = seq
            seq, status, lost = await _scheduled(pub, seg, first, budget, seq, stamper, body, chooser, clock, stop)
            if status == _STOPPED:
                return seq
            if lost is None:
                break
            first += seq - seq0           # the slot in hand when the connection died is the first not sent
            new = await _recover(recovery, pub, lost, until_ns)
            resume_ns = time.time_ns()
            if new is None:               # stopped, or the schedule ended, while disconnected
                assert recovery is not None
                for j, later in enumerate(segments[i:]):
                    if later.interval_ns is None:
                        continue
                    if j:
                        first, budget = 0, None if message_count is None else max(0, message_count - seq - skipped)
                    n = _slots_passed(later, first, budget, resume_ns)
                    if n:
                        skipped += n
                        recovery.skipped(later.step, n)
                return seq
            pub = new
        if message_count is not None and seq + skipped >= message_count:
            break
    return seq


async def _unlimited(pub: Publisher, seg: Segment, limit: int, seq: int, stamper: Stamper, body: bytearray,
                     chooser: BodyChooser | None, stop: asyncio.Event) -> tuple[int, ConnectionLost | None]:
    """Publish as fast as ``ready()`` allows until ``seg`` ends, ``limit`` messages or stop; (seq, the loss
    that interrupted it or None)."""
    publish = pub.publish
    ready = pub.ready
    is_stopped = stop.is_set
    stamp_now = stamper.stamp_now
    now = time.time_ns
    end = seg.end_ns
    try:
        while seq < limit and not is_stopped():
            await ready()
            if chooser is not None:
                stamper, body = chooser(seq, now())
                stamp_now = stamper.stamp_now
            if not stamp_now(seq, end):        # t_intended = t_sent: no schedule to lag behind
                break
            try:
                publish(body, seq)
            except BaseException:
                stamper.unstamp()
                raise
            seq += 1
            if seq % YIELD_EVERY == 0:
                await asyncio.sleep(0)
    except ConnectionLost as exc:
        return seq, exc
    return seq, None


async def _scheduled(pub: Publisher, seg: Segment, first: int, limit: int | None, seq: int, stamper: Stamper,
                     body: bytearray, chooser: BodyChooser | None, clock: SendClock,
                     stop: asyncio.Event) -> tuple[int, int, ConnectionLost | None]:
    """Publish slots ``first``… of a rate-limited ``seg`` (slot index below ``limit``), each at its due time;
    (seq, _DONE | _STOPPED | _LOST, the loss that interrupted it or None)."""
    return await _Pacer(pub, seg, first, limit, seq, stamper, body, chooser, clock, stop).run()


_BLOCKED = -1          # the publisher cannot take a message now: the coroutine awaits ready()


class _Pacer:
    """Sends one producer's due messages from the send clock's own callback.

    Why not a coroutine awaiting the clock per message: each wake-up then cost a future, a task step and
    the resumption of the producer's frames, and the send waited for the loop's next round behind the
    socket callbacks of the same wake-up. At 20,000 msg/s spread over 10 producers the send lag p50 was
    70–79 µs that way and is about 30 µs here, at about 6 % less client CPU (docs/timing.md). The coroutine
    (``run``) only waits for the segment's end, and for ``ready()`` when ``can_publish()`` says no."""

    __slots__ = ("pub", "seg", "stamper", "body", "chooser", "clock", "stop", "seq", "due", "done", "_dues")

    def __init__(self, pub: Publisher, seg: Segment, first: int, limit: int | None, seq: int, stamper: Stamper,
                 body: bytearray, chooser: BodyChooser | None, clock: SendClock, stop: asyncio.Event) -> None:
        self.pub, self.seg, self.stamper, self.body, self.chooser = pub, seg, stamper, body, chooser
        self.clock, self.stop, self.seq = clock, stop, seq
        self._dues = due_times(seg, limit, first)
        self.due: int | None = next(self._dues, None)
        self.done: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def run(self) -> tuple[int, int, ConnectionLost | None]:
        if self.due is None:
            return self.seq, _DONE, None
        try:
            while True:
                self.clock.call_at(self.due, self.fire)
                status = await self.done
                if status != _BLOCKED:
                    return self.seq, status, None
                await self.pub.ready()
                self.done = asyncio.get_running_loop().create_future()
        except ConnectionLost as exc:
            return self.seq, _LOST, exc

    def _finish(self, status: int) -> None:
        if not self.done.done():
            self.done.set_result(status)

    def fire(self) -> None:
        """The clock's callback at ``self.due`` (or at once, when the task stops: ``wake_all``)."""
        due = self.due
        assert due is not None
        seq, end = self.seq, self.seg.end_ns
        pub, stamper, body, chooser = self.pub, self.stamper, self.body, self.chooser
        is_stopped, can_publish, now = self.stop.is_set, pub.can_publish, time.time_ns
        sent = 0
        if not is_stopped() and due > now():          # never early, whoever calls (wake_all does)
            self.clock.call_at(due, self.fire)
            return None
        try:
            while True:
                if is_stopped():
                    return self._finish(_STOPPED)
                t = now()
                if due < t and t >= end:
                    # behind schedule when the step ends: what was not sent is not sent later,
                    # so the step's achieved rate shows the shortfall and the run ends on time
                    return self._finish(_DONE)
                if not can_publish():
                    self.due = due
                    return self._finish(_BLOCKED)
                if chooser is not None:
                    stamper, body = chooser(seq, due)
                stamper.stamp(seq, due, _NEVER)
                try:
                    pub.publish(body, seq)
                except BaseException:
                    stamper.unstamp()
                    raise
                seq = self.seq = seq + 1
                nxt = next(self._dues, None)
                if nxt is None:
                    return self._finish(_DONE)
                due = self.due = nxt
                sent += 1
                if due > now() or sent >= YIELD_EVERY:     # on time again, or let consumers run
                    self.clock.call_at(due, self.fire)
                    return None
        except BaseException as exc:       # ConnectionLost and anything else: the coroutine raises it
            if not self.done.done():
                self.done.set_exception(exc)
