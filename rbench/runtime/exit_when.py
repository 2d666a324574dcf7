"""PerfTest -ew (exit_when): a consumer idle for a second (``idle``), or whose queue is then empty
(``empty``), stops; when every consumer of the task has stopped, the task stops publishing and ends."""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from rbench.drivers.base import Driver
from rbench.errors import ConnectionLost
from rbench.runtime.consumers import TaskConsumers

EXIT_CHECK_AFTER_S = 2.0             # exit_when: first check this long after t0, then every second (as PerfTest)
IDLE_S = 1.0                         # a consumer without a message for this long is idle


async def watch_exit(t0: int, consumers: TaskConsumers, driver: Callable[[], Driver], stop: asyncio.Event) -> None:
    """Close each consumer once it is done by ``consumers.plan.exit_when``; set ``stop`` when all are."""
    plan = consumers.plan
    await asyncio.sleep(max(0.0, (t0 - time.time_ns()) / 1e9 + EXIT_CHECK_AFTER_S))
    seen: dict[int, tuple[int, float]] = {}
    exited = consumers.exited
    while not stop.is_set():
        for i, (state, consumer, spec) in enumerate(zip(consumers.states, consumers.consumers, plan.consumers)):
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
            if plan.exit_when == "empty":
                try:
                    messages = await driver().messages_ready(spec.queue)
                except ConnectionLost:
                    continue            # the reconnect re-opens the driver; ask again then
                if messages:
                    continue
            exited.add(i)
            state.done.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(consumer.aclose(), 5)
        if len(exited) == len(plan.consumers):
            stop.set()
            return
        await asyncio.sleep(1.0)
