"""The generator self-check: its measurements (rbench.runtime.selfcheck) and its rule (rbench.samples.generator)."""
from __future__ import annotations

import asyncio
import time

from rbench.runtime.selfcheck import SelfCheck
from rbench.samples.generator import judge, live_flag

IDLE = {"cpu": 0.05, "loop_lag_p99_ms": 0.4, "window_full": 0.0}


def test_a_busy_core_is_the_generators_limit() -> None:
    note = judge([IDLE, {**IDLE, "cpu": 0.97}], send_lag_p99_ms=0.1)
    assert note is not None and "97% of a core" in note and "add Spark tasks" in note


def test_late_sends_count_against_the_generator_only_when_its_own_loop_was_late_with_room_in_the_window() -> None:
    late_loop = {**IDLE, "loop_lag_p99_ms": 30.0}
    assert judge([late_loop], send_lag_p99_ms=80.0) is not None
    # late sends, idle loop: producers were held back by the broker (window, flow control, TCP)
    assert judge([IDLE], send_lag_p99_ms=80.0) is None
    # late loop, but waiting for confirms most of the time: the broker is the limit
    assert judge([{**late_loop, "window_full": 0.8}], send_lag_p99_ms=80.0) is None
    # punctual sends: nothing to explain
    assert judge([late_loop], send_lag_p99_ms=1.0) is None
    assert judge([], send_lag_p99_ms=80.0) is None and judge([IDLE], None) is None


def test_live_flag() -> None:
    assert live_flag(IDLE) is None
    assert live_flag({**IDLE, "cpu": 0.95}) == "task CPU 95%"
    assert live_flag({**IDLE, "loop_lag_p99_ms": 12.0}) == "task's event loop 12 ms late"
    assert live_flag({**IDLE, "loop_lag_p99_ms": 12.0, "window_full": 0.9}) is None


def test_selfcheck_measures_loop_lag_window_and_steps() -> None:
    """A loop blocked 30 ms at a time shows ~30 ms of lag; a window held at 95 % counts as full."""
    step = {"now": 0}

    async def main() -> tuple[dict[str, float], dict[str, dict[str, float]]]:
        check = SelfCheck(lambda: 95, 100, lambda: step["now"])
        probe = asyncio.ensure_future(check.run())
        await asyncio.sleep(0.3)                       # step 0: idle loop
        step["now"] = 1
        for _ in range(10):                            # step 1: the loop blocked 30 ms at a time
            time.sleep(0.03)
            await asyncio.sleep(0)
        second = check.second()
        probe.cancel()
        return second, check.steps()

    second, steps = asyncio.run(main())
    assert set(steps) == {"0", "1"}
    assert steps["0"]["loop_lag_p99_ms"] < 15 <= steps["1"]["loop_lag_max_ms"]
    assert steps["1"]["window_full"] == 1.0 and second["window_full"] == 1.0
    assert 0.2 < steps["0"]["seconds"] < 1.0 and steps["1"]["seconds"] >= 0.2
    assert 0 <= steps["0"]["cpu"] < 0.9


def test_no_window_is_never_full() -> None:
    async def main() -> dict[str, dict[str, float]]:
        check = SelfCheck(lambda: 10**6, 0, lambda: 0)
        probe = asyncio.ensure_future(check.run())
        await asyncio.sleep(0.1)
        probe.cancel()
        return check.steps()

    assert asyncio.run(main())["0"]["window_full"] == 0.0
