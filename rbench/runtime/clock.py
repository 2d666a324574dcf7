"""One send clock per task: wakes each producer when its next message is due, punctually, without spinning.

Why not ``asyncio.sleep``: the event loop's timers have 1 ms resolution (epoll's timeout is whole
milliseconds, rounded up), so a rate-limited message left 0.2–0.8 ms after its intended time, and the
old cure, yielding in a loop until the due time, burned client CPU in proportion to how punctual it
was. Here all producers of a task share one Linux ``timerfd`` armed at the earliest due time across
them (absolute, CLOCK_REALTIME, the clock of ``time.time_ns()``), with the loop thread's timer slack
lowered to 1 µs, so the kernel's high-resolution timer wakes the event loop through epoll within tens
of microseconds. A wake-up then releases every producer whose message is due, finishing with a short
bounded wait (``FINISH_NS``) for one due a few microseconds later, rather than re-arming for it.
Where the loop cannot watch the timerfd (a loop without ``add_reader``), the loop's own timer is used at
the due time: never early, up to a millisecond late, and no busy wait. The timerfd itself is compiled
(rbench.runtime._clock, Linux only, like the rest of the executor side).

How punctual it is, and at what CPU cost, is measured by ``make bench-runtime`` (send lateness =
t_sent − t_intended, p50/p99) and reported per step by the reduce (``send_lag_*``).
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Callable

from rbench.runtime._clock import TimerFd, set_timer_slack

FINISH_NS = 20_000              # a message due within this of a wake-up waits for it here, not for another wake-up
TIMER_SLACK_NS = 1_000          # the loop thread's timer slack: how late the kernel may fire the timerfd
LATENCY_WEIGHT = 1 / 16         # the running estimate of how late the timerfd's wake-ups come: weight of each
EARLY_MIN_GAP_NS = 10 * FINISH_NS   # arm early only for a wake-up this far off: its bounded wait is then at
                                    # most a tenth of the time (at 20,000 msg/s spread it is not: +12 % CPU)


class SendClock:
    """Wakes producers of one task at their due times (wall-clock ns, ``time.time_ns()``)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None, use_timerfd: bool = True) -> None:
        self._loop = loop or asyncio.get_running_loop()
        self._heap: list[tuple[int, int, asyncio.Future[None] | Callable[[], None]]] = []
        self._order = itertools.count()
        self._armed = 0                 # the due time the timer is armed for (0: disarmed)
        self._early = 0                 # ... armed this much before it: the wake-up latency, up to FINISH_NS
        self._latency = 0.0             # running estimate of how late a wake-up comes after the time armed
        self._handle: asyncio.TimerHandle | None = None
        self._timer: TimerFd | None = None
        if use_timerfd:
            try:
                self._timer = TimerFd()
                set_timer_slack(TIMER_SLACK_NS)        # this thread's: the loop runs here
                self._loop.add_reader(self._timer.fd, self._fire)
            except (OSError, NotImplementedError, RuntimeError):
                if self._timer is not None:
                    self._timer.close()
                self._timer = None

    @property
    def kind(self) -> str:
        """How this clock wakes producers, for run.json and the benchmark."""
        return "timerfd" if self._timer is not None else "event-loop timer"

    def call_at(self, due_ns: int, callback: Callable[[], None]) -> None:
        """Call ``callback`` from the wake-up at ``due_ns`` (the next one, if that time has passed), or from
        ``wake_all``. The producer sends from here: no future and no task step per message."""
        heapq.heappush(self._heap, (due_ns, next(self._order), callback))
        if self._armed == 0 or due_ns < self._armed:
            self._arm(due_ns)

    def wait_until(self, due_ns: int) -> asyncio.Future[None] | None:
        """A future resolved at ``due_ns``; None when that time has already come (send now)."""
        if due_ns <= time.time_ns():
            return None
        fut: asyncio.Future[None] = self._loop.create_future()
        heapq.heappush(self._heap, (due_ns, next(self._order), fut))
        if self._armed == 0 or due_ns < self._armed:
            self._arm(due_ns)
        return fut

    def wake_all(self) -> None:
        """Release every waiting producer now (the task is stopping: they check its stop flag)."""
        while self._heap:
            _, _, waiter = heapq.heappop(self._heap)
            _release(waiter)
        self._arm(0)

    def close(self) -> None:
        self.wake_all()
        if self._timer is not None:
            self._loop.remove_reader(self._timer.fd)
            self._timer.close()
            self._timer = None

    def _arm(self, due_ns: int, now_ns: int = 0) -> None:
        """Arm for ``due_ns`` (0: disarm); ``now_ns`` when the caller has just read the clock."""
        self._armed = due_ns
        if self._timer is not None:
            # early by the wake-up latency seen so far, so the wake-up lands on the due time; the bounded
            # wait in _fire covers a wake-up that comes sooner (never more than FINISH_NS early)
            far = due_ns - (now_ns or time.time_ns()) >= EARLY_MIN_GAP_NS
            self._early = min(int(self._latency), FINISH_NS) if due_ns and far else 0
            self._timer.arm(due_ns - self._early if due_ns else 0)
            return
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if due_ns:   # loop timers have 1 ms resolution and may fire early: round up to whole ms
            delay_ms = math.ceil(max(0, due_ns - time.time_ns()) / 1e6)
            self._handle = self._loop.call_later(delay_ms / 1000, self._fire)

    def _fire(self) -> None:
        # no read() of the timerfd: the _arm below (re-arm or disarm) resets its expiry count, which is
        # what leaves the descriptor unreadable, one syscall per wake-up instead of two
        heap, now_ns = self._heap, time.time_ns
        now = now_ns()
        finish = FINISH_NS if self._timer is not None else 0
        if finish and self._armed:
            self._latency += (max(0, now - (self._armed - self._early)) - self._latency) * LATENCY_WEIGHT
        while heap and heap[0][0] <= now + finish:
            due, _, waiter = heapq.heappop(heap)
            while now < due:             # bounded: at most ``finish`` ns, and only for a message about to be due
                now = now_ns()
            if _release(waiter):
                now = now_ns()           # a callback sent messages meanwhile
        self._arm(heap[0][0] if heap else 0, now)


def _release(waiter: asyncio.Future[None] | Callable[[], None]) -> bool:
    """Wake one waiter: resolve its future, or call it; True when it was a callback."""
    if isinstance(waiter, asyncio.Future):
        if not waiter.done():
            waiter.set_result(None)
        return False
    waiter()
    return True
