"""The end of a task's load: wait for the broker's last confirms and for the consumers' last deliveries,
each bounded by the plan's drain timeout (a short one after an interrupt)."""
from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable

from rbench.config.types import TaskPlan
from rbench.drivers.base import Publisher
from rbench.runtime.consumers import ConsumerState
from rbench.runtime.recorder import Recorder


async def drain_publishers(publishers: list[Publisher], plan: TaskPlan, interrupted: bool) -> int:
    """How many published messages are still unconfirmed once every publisher drained (or timed out)."""
    timeout = plan.drain_timeout_s if not interrupted else min(2.0, plan.drain_timeout_s)
    results = await asyncio.gather(*(p.drain(timeout) for p in publishers), return_exceptions=True)
    return sum(r for r in results if isinstance(r, int))


async def drain_consumers(plan: TaskPlan, recorder: Recorder, states: list[ConsumerState], published: int,
                          consumed_before_t0: int, reconnected: bool, interrupted: bool,
                          error: Callable[[], BaseException | None]) -> None:
    """Wait until consumers have what this task's producers routed to them, or time out; ``error`` (a consumer
    that failed meanwhile) is raised."""
    if not states:
        return
    deadline = time.monotonic() + (plan.drain_timeout_s if not interrupted else 1.0)
    own_queues = {c.queue for c in plan.consumers}
    routed = dict(plan.routes)          # fan-out: a message reaches every queue listed for its producer
    targets = [set(routed.get(p.producer_id, (p.queue,))) for p in plan.publishers]
    # after a reconnect the delivery count proves nothing: redeliveries count twice and messages in flight
    # at the cut may never come, so the drain waits until deliveries stop instead (a count reached early
    # once left the run's last confirmed message in the queue, reported as lost)
    # a consumer's stream filter drops messages by design: it never has them all, it stops when deliveries stop
    # two plain readers of one stream each read every message (docs/reduce.md, "Readers"): the count of a
    # single reader proves nothing, so the drain waits until deliveries stop
    streams = {q.name for q in plan.topology.queues if q.is_stream}
    readers = Counter(c.queue for c in plan.consumers
                      if c.queue in streams and not (c.single_active and plan.driver == "stream"))
    expect_all = (all(t <= own_queues for t in targets) and not reconnected and not any(c.filter for c in plan.consumers)
                  and all(n == 1 for n in readers.values()))
    copies = sum(len(t) for t in targets) / len(targets) if targets else 1.0
    last, idle_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        failed = error()
        if failed is not None:
            raise failed
        counts = recorder.counts
        consumed = counts["consumed"] - consumed_before_t0      # this attempt's own messages
        if all(s.done.is_set() for s in states):
            return
        if expect_all and published and consumed >= (counts["published"] - counts["returned"] - counts["nacked"]) * copies:
            return
        if consumed != last:
            last, idle_since = consumed, time.monotonic()
        elif not expect_all and time.monotonic() - idle_since > 1.0:
            return
        await asyncio.sleep(0.05)
