"""What a task's connections cost to open: each one's connect and channel-open latency, refusals, timeouts.

Kept per connection (microseconds) so the reduce's percentiles over a cluster's tasks are exact, not a
merge of per-task quantiles; the task returns it as ``connect`` (rbench.samples.connections reads it).
The pacer spaces the task's connection attempts at ``connect_rate`` and bounds how many are being opened
at once, so a thousand idle connections do not arrive as one SYN flood unless asked to.
"""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from rbench.errors import ConnectError

# connections a task opens at the same moment when connect_rate does not pace them (the broker's accept
# queue and the task's loop both stay reasonable; 1,000 idle connections still open in seconds)
MAX_OPENING = 32


class ConnectLog:
    """The connections a task opened and failed to open, and their latencies."""

    def __init__(self) -> None:
        self.connect_us: list[int] = []      # TCP connect + handshake to the open reply, per connection opened
        self.channel_us: list[int] = []      # channel.open → channel.open-ok (idle connections)
        self.refused = 0                     # refused, reset, authentication or vhost refused
        self.timed_out = 0                   # no answer within the connect timeout
        self.idle = 0                        # idle connections held open
        self.idle_lost = 0                   # idle connections the broker or the network closed
        self.fd_limit: int | None = None     # the task's RLIMIT_NOFILE soft limit (raised for many connections)

    def connected(self, elapsed_ns: int) -> None:
        self.connect_us.append(elapsed_ns // 1000)

    def channel(self, elapsed_ns: int) -> None:
        self.channel_us.append(elapsed_ns // 1000)

    def failed(self, exc: BaseException) -> None:
        if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) or getattr(exc, "timed_out", False):
            self.timed_out += 1
        elif isinstance(exc, (ConnectError, OSError)):
            self.refused += 1

    def as_dict(self) -> dict[str, Any]:
        return {"opened": len(self.connect_us), "idle": self.idle, "idle_lost": self.idle_lost,
                "refused": self.refused, "timed_out": self.timed_out, "fd_limit": self.fd_limit,
                "connect_us": list(self.connect_us), "channel_us": list(self.channel_us)}


class Pacer:
    """``connect_rate``: connection attempts start 1/R s apart (None: at once, MAX_OPENING at a time)."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self._next = 0.0
        self._opening = asyncio.Semaphore(MAX_OPENING)

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with self._opening:
            if self.rate is not None:
                loop = asyncio.get_running_loop()
                now = loop.time()
                at = max(now, self._next)
                self._next = at + 1.0 / self.rate
                if at > now:
                    await asyncio.sleep(at - now)
            yield
