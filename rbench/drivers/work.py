"""Simulated consumer processing time (PerfTest -L / -R) on a virtual clock, shared by the drivers that ack.

Why a virtual clock: message k is done at max(done(k-1), arrival(k)) + delay, one after the other, and it
is acknowledged only then. Keeping the done times in a queue and waking once for everything due costs no
timer per message, so a 50 µs delay does not cost a 50 µs sleep each.
"""
from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable


class SimulatedWork:
    """Delivered items (delivery tags, delivery-ids) in arrival order, each done ``delay_ns`` after the
    previous one was (or after it arrived, if later); ``on_done(items)`` gets those done, in order."""

    def __init__(self, loop: asyncio.AbstractEventLoop, delay_ns: int, on_done: Callable[[list[int]], None]) -> None:
        self.delay_ns = delay_ns
        self._loop = loop
        self._on_done = on_done
        self._queue: collections.deque[tuple[int, int]] = collections.deque()      # (done at ns, item)
        self._done_at = 0
        self._waiter: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    def start(self) -> SimulatedWork:
        self._task = self._loop.create_task(self._run())
        return self

    def add(self, item: int, t_ns: int) -> None:
        """``item`` arrived at ``t_ns``."""
        done = max(self._done_at, t_ns) + self.delay_ns
        self._done_at = done
        self._queue.append((done, item))
        self._wake()

    def finish_all(self) -> None:
        """Everything still being worked on is done now (the consumer closes: it acks what it was given)."""
        self._release(2**63 - 1)

    def stop(self) -> None:
        """No more work (connection closed or consumer closing)."""
        self._stopped = True
        if self._task is not None:
            self._task.cancel()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _release(self, now_ns: int) -> None:
        queue = self._queue
        items = []
        while queue and queue[0][0] <= now_ns:
            items.append(queue.popleft()[1])
        if items:
            self._on_done(items)

    async def _run(self) -> None:
        queue = self._queue
        while not self._stopped:
            if not queue:
                self._waiter = self._loop.create_future()
                await self._waiter
                continue
            wait_ns = queue[0][0] - time.time_ns()
            if wait_ns > 0:
                await asyncio.sleep(wait_ns / 1e9)
            self._release(time.time_ns())
