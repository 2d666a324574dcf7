"""The start: every task of a stage publishes from one agreed t0.

The coordinator's start gate (rbench.live.control) answers within milliseconds once the last task is
ready. Spark's BarrierTaskContext.allGather, about a second per call here, is used only without a
coordinator (a barrier stage run directly); a task alone (no Spark) starts after a short margin.
"""
from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable

from rbench.live.control.client import ControlClient
from rbench.live.control.wire import Started

# t0 is this far after the slowest task's proposal when allGather decides it: allGather polls and
# answered in about 1 s here (measured), so a shorter margin would put the first sends in the past
START_MARGIN_NS = 1_500_000_000
SOLO_MARGIN_NS = 100_000_000         # without Spark (one task, no one to wait for)

AllGather = Callable[[str], list[str]]


def in_daemon_thread(fn: AllGather, arg: str) -> asyncio.Future[list[str]]:
    """Run a blocking Spark barrier call off the loop, in a thread the task never waits for.

    (run_in_executor's pool would be joined when the loop closes: a task that fails while
    its allGather is pending must still be able to report its error.)"""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[list[str]] = loop.create_future()

    def settle(result: list[str] | None, error: BaseException | None) -> None:
        if fut.done():
            return
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(result or [])

    def work() -> None:
        try:
            result, error = fn(arg), None
        except BaseException as exc:   # handed to the awaiting coroutine
            result, error = None, exc
        with contextlib.suppress(RuntimeError):         # the loop has closed: nobody waits any more
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, name="rbench-barrier", daemon=True).start()
    return fut


async def agree_t0(control: ControlClient, all_gather: AllGather | None, cluster: str, task: int) -> int:
    """The t0 every task of the stage publishes from: the latest proposal plus a margin; told to the coordinator."""
    if all_gather is None:
        t0 = time.time_ns() + SOLO_MARGIN_NS
    elif control.connected:
        t0 = await control.agree_t0(cluster, task, time.time_ns())
    else:
        proposal = time.time_ns() + START_MARGIN_NS
        t0 = max(int(p) for p in await in_daemon_thread(all_gather, str(proposal)))
    control.send(Started(cluster, task, t0, step=0))
    return t0
