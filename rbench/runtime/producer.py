"""One producer: follows its schedule, stamps each body, hands it to the driver."""
from __future__ import annotations

import asyncio
import time

from rbench.config.types import PublisherSpec
from rbench.drivers.base import Publisher
from rbench.runtime._recorder import ConfirmSink, Stamper
from rbench.runtime.clock import SendClock
from rbench.runtime.recorder import Recorder
from rbench.runtime.schedule import Segment, due_times
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


async def run_producer(pub: Publisher, spec: PublisherSpec, recorder: Recorder, segments: list[Segment],
                       size: int, message_count: int | None, stop: asyncio.Event, clock: SendClock | None = None,
                       chooser: BodyChooser | None = None) -> int:
    """Publish along `segments`; returns how many messages were published.

    ``clock`` is the task's shared send clock (rbench.runtime.clock); a producer run on its own
    gets a clock of its own.

    Per message: ``await pub.ready()``, then one C call ``stamp(seq, t_intended, not_after)``
    (``stamp_now``: t_intended = t_sent, for unlimited rate) takes t_sent, writes the stamp into the reused body and records the row (or returns 0
    when t_sent is past ``not_after``: nothing stamped, nothing recorded), then
    ``pub.publish``; if that raises, the row is dropped again, as if never recorded.
    With a ``chooser`` (bodies that vary) the body and its stamper are picked per message."""
    own_clock = clock is None
    clock = clock or SendClock()
    try:
        return await _produce(pub, spec, recorder, segments, size, message_count, stop, clock, chooser)
    finally:
        if own_clock:
            clock.close()


async def _produce(pub: Publisher, spec: PublisherSpec, recorder: Recorder, segments: list[Segment],
                   size: int, message_count: int | None, stop: asyncio.Event, clock: SendClock,
                   chooser: BodyChooser | None) -> int:
    body = new_payload(size)
    pid = spec.producer_id
    qidx = recorder.queue_index(spec.queue)
    stamper = recorder.stamper(body, pid, qidx, spec.confirm)
    stamp = stamper.stamp
    stamp_now = stamper.stamp_now
    publish = pub.publish
    ready = pub.ready
    is_stopped = stop.is_set
    seq = 0
    now = time.time_ns
    for seg in segments:
        if not await _wait_until(clock, seg.start_ns, stop):
            return seq
        if seg.interval_ns is None:
            end = seg.end_ns
            limit = _NEVER if message_count is None else message_count
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
            continue
        remaining = None if message_count is None else message_count - seq
        burst = 0
        for due in due_times(seg, remaining):
            t = now()
            if due > t:
                burst = 0
                if not await _wait_until(clock, due, stop):
                    return seq
            elif stop.is_set():
                return seq
            elif t >= seg.end_ns:
                # behind schedule when the step ends: what was not sent is not sent later,
                # so the step's achieved rate shows the shortfall and the run ends on time
                break
            else:
                burst += 1
                if burst % YIELD_EVERY == 0:
                    await asyncio.sleep(0)
            await ready()
            if chooser is not None:
                stamper, body = chooser(seq, due)
                stamp = stamper.stamp
            stamp(seq, due, _NEVER)
            try:
                publish(body, seq)
            except BaseException:
                stamper.unstamp()
                raise
            seq += 1
        if message_count is not None and seq >= message_count:
            break
    return seq
