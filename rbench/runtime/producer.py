"""One producer: follows its schedule, stamps each body, hands it to the driver."""
from __future__ import annotations

import asyncio
import math
import time

from rbench.config.types import PublisherSpec
from rbench.drivers.base import Publisher
from rbench.runtime.recorder import Recorder
from rbench.runtime.schedule import Segment, due_times
from rbench.codec._recorder import ConfirmSink
from rbench.runtime.stamp import new_payload

YIELD_EVERY = 64          # when behind schedule or unlimited, let consumers run this often


class ProducerSink(ConfirmSink):
    """PublishSink of one producer: routes confirms and returns to the recorder.

    ``on_confirm`` is ConfirmSink's (C: straight into the recorder core's pending map);
    ``on_return`` calls ``recorder.returned(body, t_ns)``."""

    __slots__ = ()

    def __init__(self, recorder: Recorder, producer: int) -> None:
        super().__init__(recorder.core, recorder, producer)


async def _sleep_until(t_ns: int, stop: asyncio.Event) -> bool:
    """Sleep until wall-clock t_ns; False when stop was set meanwhile."""
    delay = (t_ns - time.time_ns()) / 1e9
    if 0 < delay < 0.05:          # the common case between two messages: no task, no future
        # event-loop timers have 1 ms resolution and may fire early: round up, then yield
        # until the due time so no message leaves before its intended time
        await asyncio.sleep(math.ceil(delay * 1000) / 1000)
        while time.time_ns() < t_ns:
            await asyncio.sleep(0)
    elif delay > 0:
        if stop.is_set():
            return False
        try:
            await asyncio.wait_for(stop.wait(), delay)
            return False
        except asyncio.TimeoutError:
            pass
        while time.time_ns() < t_ns:
            await asyncio.sleep(0)
    return not stop.is_set()


_NEVER = 2**63 - 1


async def run_producer(pub: Publisher, spec: PublisherSpec, recorder: Recorder, segments: list[Segment],
                       size: int, message_count: int | None, stop: asyncio.Event) -> int:
    """Publish along `segments`; returns how many messages were published.

    Per message: ``await pub.ready()``, then one C call ``stamp(seq, t_intended, not_after)``
    (``stamp_now``: t_intended = t_sent, for unlimited rate) takes t_sent, writes the stamp into the reused body and records the row (or returns 0
    when t_sent is past ``not_after``: nothing stamped, nothing recorded), then
    ``pub.publish``; if that raises, the row is dropped again, as if never recorded."""
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
        if not await _sleep_until(seg.start_ns, stop):
            return seq
        if seg.interval_ns is None:
            end = seg.end_ns
            limit = _NEVER if message_count is None else message_count
            while seq < limit and not is_stopped():
                await ready()
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
                if not await _sleep_until(due, stop):
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
