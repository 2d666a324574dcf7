"""A task's publishers: one per planned producer, opened together, each driven by its producer loop
(rbench.runtime.producer) from the agreed t0 along the plan's steps."""
from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Published:
    """What a task's producers did, for the measurement window (rbench.samples.runinfo.set_windows).

    A step's figures are judged over the time every producer was due to be sending: from the latest
    producer's first due send (a random start delay or a late first step excluded) to the earliest
    producer's stop when they stop on a message count (-C), so that a ramp at either end, which the
    schedule asked for, is not read as a broker that could not keep up."""

    count: int                          # messages published by every producer of the task
    last_due_start_ns: int | None       # the latest producer's first scheduled send (None: no producer)
    first_stop_ns: int | None           # when the first producer stopped (count reached, schedule over, stop)


async def _timed(job: Awaitable[int]) -> tuple[int, int]:
    count = await job
    return count, time.time_ns()


async def publish_all(publishers: list[Publisher], plan: TaskPlan, recorder: Recorder, t0: int, clock: SendClock,
                      reconnector: Reconnector, stop: asyncio.Event) -> Published:
    """Run every producer from ``t0`` until its schedule, its count or ``stop`` ends it.
    A task without producers stays for the planned duration."""
    rng = random.Random(plan.seed)
    steps = [(s.offset_s, s.duration_s, s.rate) for s in plan.steps]
    jobs = []
    starts: list[int] = []
    n = len(publishers)
    for i, (pub, spec) in enumerate(zip(publishers, plan.publishers)):
        delay_ns = int(rng.random() * plan.random_start_delay_s * 1e9)
        phase = phase_of(plan.phase, i, n, rng.random())
        segs = list(segments(t0, delay_ns, steps, phase))
        if segs:
            starts.append(segs[0].start_ns)
        chooser = None
        if plan.bodies or plan.variable_size:
            chooser = BodyChooser(recorder, spec.producer_id, recorder.queue_index(spec.queue),
                                  spec.confirm, plan.bodies, plan.variable_size, t0)
        jobs.append(_timed(run_producer(pub, spec, recorder, segs, plan.size, plan.message_count, stop,
                                        clock, chooser, reconnector.for_producer(i))))
    if not jobs:     # consumers only: stay for the planned duration
        end_ns = t0 + int(plan.end_offset_s * 1e9)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), max(0.0, (end_ns - time.time_ns()) / 1e9))
        return Published(0, None, None)
    done = await asyncio.gather(*jobs)
    return Published(sum(c for c, _ in done), max(starts, default=None), min(t for _, t in done))
