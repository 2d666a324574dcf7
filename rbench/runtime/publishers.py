"""A task's publishers: one per planned producer, opened together, each driven by its producer loop
(rbench.runtime.producer) from the agreed t0 along the plan's steps."""
from __future__ import annotations

import asyncio
import contextlib
import random
import time

from rbench.config.types import TaskPlan
from rbench.drivers.base import Driver, Publisher
from rbench.runtime.clock import SendClock
from rbench.runtime.closing import close_all
from rbench.runtime.producer import BodyChooser, ProducerSink, run_producer
from rbench.runtime.reconnect import Reconnector
from rbench.runtime.recorder import Recorder
from rbench.runtime.schedule import phase_of, segments


async def open_publishers(driver: Driver, plan: TaskPlan, sinks: list[ProducerSink]) -> list[Publisher]:
    """One publisher per planned producer, with its one sink, all at once: their channels (or connections)
    open concurrently instead of one round trip after another. Any failure raises after closing the rest."""
    made = await asyncio.gather(*(driver.publisher(p, sink) for p, sink in zip(plan.publishers, sinks)),
                                return_exceptions=True)
    opened = [p for p in made if not isinstance(p, BaseException)]
    for result in made:
        if isinstance(result, BaseException):
            await close_all([], opened)
            raise result
    return opened


async def publish_all(publishers: list[Publisher], plan: TaskPlan, recorder: Recorder, t0: int, clock: SendClock,
                      reconnector: Reconnector, stop: asyncio.Event) -> int:
    """Run every producer from ``t0`` until its schedule, its count or ``stop`` ends it; how many were published.
    A task without producers stays for the planned duration."""
    rng = random.Random(plan.seed)
    steps = [(s.offset_s, s.duration_s, s.rate) for s in plan.steps]
    jobs = []
    n = len(publishers)
    for i, (pub, spec) in enumerate(zip(publishers, plan.publishers)):
        delay_ns = int(rng.random() * plan.random_start_delay_s * 1e9)
        phase = phase_of(plan.phase, i, n, rng.random())
        segs = list(segments(t0, delay_ns, steps, phase))
        chooser = None
        if plan.bodies or plan.variable_size:
            chooser = BodyChooser(recorder, spec.producer_id, recorder.queue_index(spec.queue),
                                  spec.confirm, plan.bodies, plan.variable_size, t0)
        jobs.append(run_producer(pub, spec, recorder, segs, plan.size, plan.message_count, stop,
                                 clock, chooser, reconnector.for_producer(i)))
    if not jobs:     # consumers only: stay for the planned duration
        end_ns = t0 + int(plan.end_offset_s * 1e9)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), max(0.0, (end_ns - time.time_ns()) / 1e9))
        return 0
    return sum(await asyncio.gather(*jobs))
