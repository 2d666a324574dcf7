"""The task's send clock (rbench.runtime.clock): never early, in due order, one wake-up per due time.

Run on both loops: the timerfd is a reader on the loop (uvloop's and asyncio's differ there), and
the loop-timer fallback (``use_timerfd=False``) must hold the same promises.
"""
from __future__ import annotations

import asyncio
import os
import select
import time

import pytest

from rbench.runtime.clock import SendClock
from tests.loops import LoopRunner


@pytest.mark.parametrize("use_timerfd", [True, False], ids=["timerfd", "loop-timer"])
def test_waiters_are_released_in_due_order_and_never_early(run: LoopRunner, use_timerfd: bool) -> None:
    async def scenario() -> list[tuple[int, int]]:
        clock = SendClock(use_timerfd=use_timerfd)
        assert clock.kind == ("timerfd" if use_timerfd else "event-loop timer")
        base = time.time_ns() + 20_000_000
        dues = [base + k * 1_300_000 for k in (5, 0, 3, 1, 4, 2)]     # registered out of order
        woken: list[tuple[int, int]] = []

        async def waiter(due: int) -> None:
            fut = clock.wait_until(due)
            assert fut is not None
            await fut
            woken.append((due, time.time_ns()))

        await asyncio.gather(*(waiter(d) for d in dues))
        clock.close()
        return woken

    woken = run(scenario(), timeout=10)
    assert [d for d, _ in woken] == sorted(d for d, _ in woken)
    assert all(t >= d for d, t in woken), [(t - d) for d, t in woken]


def test_a_due_time_already_past_sends_at_once(run: LoopRunner) -> None:
    async def scenario() -> None:
        clock = SendClock()
        assert clock.wait_until(time.time_ns() - 1) is None
        clock.close()

    run(scenario(), timeout=5)


def test_wake_all_releases_every_waiter_and_disarms(run: LoopRunner) -> None:
    async def scenario() -> None:
        clock = SendClock()
        far = time.time_ns() + 60_000_000_000
        futs = [clock.wait_until(far + k) for k in range(3)]
        clock.wake_all()
        assert all(f is not None and f.done() for f in futs)
        clock.close()

    run(scenario(), timeout=5)


def test_a_wake_up_leaves_the_timerfd_unreadable_without_a_read(run: LoopRunner) -> None:
    """Re-arming resets the timerfd's expiry count: after a wake-up that releases the only waiter, the
    descriptor must not stay readable (a level-triggered reader would spin the loop at 100 % CPU)."""
    async def scenario() -> None:
        clock = SendClock()
        assert clock.kind == "timerfd"
        fut = clock.wait_until(time.time_ns() + 2_000_000)
        assert fut is not None
        await fut
        fd = clock._timer.fd                      # type: ignore[union-attr]
        readable, _, _ = select.select([fd], [], [], 0.005)
        assert readable == []
        with pytest.raises(BlockingIOError):
            os.read(fd, 8)
        clock.close()

    run(scenario(), timeout=5)


@pytest.mark.parametrize("use_timerfd", [True, False], ids=["timerfd", "loop-timer"])
def test_callbacks_run_at_their_due_times_in_order_beside_futures(run: LoopRunner, use_timerfd: bool) -> None:
    """call_at: what the producer sends from. Never early, in due order with the futures of wait_until,
    a past due time on the next wake-up, and wake_all calls the callbacks still waiting."""
    async def scenario() -> tuple[list[tuple[str, int, int]], list[str]]:
        clock = SendClock(use_timerfd=use_timerfd)
        base = time.time_ns() + 20_000_000
        woken: list[tuple[str, int, int]] = []
        for k in (4, 0, 2):
            clock.call_at(base + k * 1_500_000, lambda k=k: woken.append((f"cb{k}", base + k * 1_500_000, time.time_ns())))

        async def waiter(k: int) -> None:
            fut = clock.wait_until(base + k * 1_500_000)
            assert fut is not None
            await fut
            woken.append((f"fut{k}", base + k * 1_500_000, time.time_ns()))

        await asyncio.gather(waiter(1), waiter(3))
        await asyncio.sleep(0.01)
        clock.call_at(time.time_ns() - 1_000_000, lambda: woken.append(("past", 0, time.time_ns())))
        await asyncio.sleep(0.005)
        stopped: list[str] = []
        clock.call_at(time.time_ns() + 60_000_000_000, lambda: stopped.append("woken"))
        clock.close()
        return woken, stopped

    woken, stopped = run(scenario(), timeout=10)
    names = [n for n, _, _ in woken]
    # callbacks in due order, futures in due order, the past one last; how the two kinds interleave depends on
    # whether the loop woke between due times 1.5 ms apart, which a loaded machine does not promise
    assert [n for n in names if n.startswith("cb")] == ["cb0", "cb2", "cb4"], names
    assert [n for n in names if n.startswith("fut")] == ["fut1", "fut3"] and names[-1] == "past", names
    assert all(t >= d for _, d, t in woken), [(n, t - d) for n, d, t in woken]
    assert stopped == ["woken"]


def test_the_timer_is_armed_early_by_the_wake_up_latency_and_nothing_is_released_early(run: LoopRunner) -> None:
    """After a few wake-ups the clock knows how late the timerfd wakes it and arms that much early (at most
    FINISH_NS), for wake-ups far enough apart; the bounded wait still releases nothing before its due time."""
    from rbench.runtime import clock as clock_mod

    async def scenario() -> tuple[list[tuple[int, int]], int, float]:
        clock = SendClock()
        base = time.time_ns() + 5_000_000
        woken: list[tuple[int, int]] = []
        dues = [base + k * 1_000_000 for k in range(40)]          # 1 ms apart: far enough to arm early
        for due in dues:
            clock.call_at(due, lambda due=due: woken.append((due, time.time_ns())))
        while len(woken) < len(dues):
            await asyncio.sleep(0.01)
        latency = clock._latency
        clock.call_at(time.time_ns() + 1_000_000, lambda: None)
        armed_early = clock._early
        clock.close()
        return woken, armed_early, latency

    woken, armed_early, latency = run(scenario(), timeout=10)
    assert all(t >= d for d, t in woken), [t - d for d, t in woken if t < d]
    assert latency > 0 and 0 < armed_early <= clock_mod.FINISH_NS
