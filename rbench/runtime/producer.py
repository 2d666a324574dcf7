"""One producer: follows its schedule, stamps each body, hands it to the driver."""
from __future__ import annotations

import asyncio
import math
import time

from rbench.config.types import PublisherSpec
from rbench.drivers.base import Publisher
from rbench.runtime.recorder import Recorder
from rbench.runtime.schedule import Segment, due_times
from rbench.runtime.stamp import STAMP, new_payload

YIELD_EVERY = 64          # when behind schedule or unlimited, let consumers run this often


class ProducerSink:
    """PublishSink of one producer: routes confirms and returns to the recorder."""

    __slots__ = ("_recorder", "_producer")

    def __init__(self, recorder: Recorder, producer: int) -> None:
        self._recorder = recorder
        self._producer = producer

    def on_confirm(self, seq: int, acked: bool, t_ns: int) -> None:
        self._recorder.confirmed(self._producer, seq, acked, t_ns)

    def on_return(self, body: bytes | memoryview, t_ns: int) -> None:
        self._recorder.returned(body, t_ns)


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


async def run_producer(pub: Publisher, spec: PublisherSpec, recorder: Recorder, segments: list[Segment],
                       size: int, message_count: int | None, stop: asyncio.Event) -> int:
    """Publish along `segments`; returns how many messages were published."""
    body = new_payload(size)
    length = len(body)
    pack = STAMP.pack_into
    pid = spec.producer_id
    qidx = recorder.queue_index(spec.queue)
    record = recorder.published
    confirm = spec.confirm
    seq = 0
    now = time.time_ns
    for seg in segments:
        if not await _sleep_until(seg.start_ns, stop):
            return seq
        if seg.interval_ns is None:
            while not stop.is_set() and (message_count is None or seq < message_count):
                await pub.ready()
                t_sent = now()
                if t_sent >= seg.end_ns:
                    break
                pack(body, 0, pid, seq, t_sent, t_sent)
                pub.publish(body, seq)
                record(pid, qidx, seq, length, t_sent, t_sent, confirm)
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
            await pub.ready()
            t_sent = now()
            pack(body, 0, pid, seq, due, t_sent)
            pub.publish(body, seq)
            record(pid, qidx, seq, length, due, t_sent, confirm)
            seq += 1
        if message_count is not None and seq >= message_count:
            break
    return seq
