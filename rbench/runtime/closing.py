"""Closing a task's endpoints: each within a timeout, none of their errors raised.

Used at the end of a task, after a lost connection (what is left of the dead one) and when opening a
set of endpoints half failed: in every case the task has already decided what happens next, so a
close that fails or hangs must not change that."""
from __future__ import annotations

import asyncio
import contextlib

from rbench.drivers.base import Consumer, Driver, Publisher


async def close_all(consumers: list[Consumer], publishers: list[Publisher], driver: Driver | None = None,
                    timeout: float = 5.0) -> None:
    for closer in [*(c.aclose() for c in consumers), *(p.aclose() for p in publishers)]:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(closer, timeout)
    if driver is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(driver.aclose(), timeout)
