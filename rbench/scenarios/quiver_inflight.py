"""How many messages `rbench amqp10`'s sender keeps sent and not yet received, and how it waits for its receiver.

Why a bound at all (docs/amqp10.md, "`rbench amqp10 URL`"): a broker confirms a message once it is in the queue,
not once it is consumed, so a sender faster than its receiver fills the queue, and the latency then measured is
the queue's. Why not a fixed bound: what keeps the receiver busy without a standing queue is the pipeline's
bandwidth-delay product, and on a shared 2-core machine it moves with the load by 3x or more; a fixed N either
costs rate (N below it: rate <= N / round trip) or adds latency (N above it: Little's law, the excess waits in
the queue). `AdaptiveInFlight` estimates it as BBR does for TCP: the highest delivery rate seen lately times the
lowest round trip seen lately, times a gain of 2 so that a hiccup on the way does not starve the receiver.
"""
from __future__ import annotations

import asyncio
import os
from collections import deque
from typing import Any

IN_FLIGHT_WAIT_S = 0.02             # the sender's longest wait for its receiver's wake-up (Wakeup)
GAIN = 2.0                          # bound = GAIN x delivery rate x min round trip (BBR's cwnd gain)
RATE_WINDOW_NS = 1_000_000_000      # the delivery rate is the best of the last second's samples
RTT_WINDOW_NS = 10_000_000_000      # the min round trip is the least of the last 10 s (BBR's min_rtt expiry)
MIN_RATE_INTERVAL_NS = 10_000_000   # a delivery-rate sample spans at least 10 ms (and 2 round trips)


class AdaptiveInFlight:
    """The sender's in-flight bound, estimated from what it sees: its own send times (one probe per batch) and
    the receiver's count (shared memory, written by the receiver's LatencyTap).

    - round trip: a probe (the batch's last seq, its send time) is answered once the receiver's count passes
      it; now - send time is an upper bound of that message's trip (the count is read late at worst), so the
      least of them over RTT_WINDOW_NS is the pipeline's trip without a queue, for a batch: it includes the
      batch's own time on the link (the sender writes batches, the broker grants credit and the receiver reads
      in bursts, so a pipeline that carries batches needs that much more in flight). When it expires the bound
      drops to the floor for one trip to measure it again (BBR's ProbeRTT);
    - delivery rate: the receiver's count over intervals of at least MIN_RATE_INTERVAL_NS and two round trips,
      the highest over RATE_WINDOW_NS (what the pipeline can carry; a sample that the bound itself held down
      does not lower it);
    - bound = GAIN x rate x round trip, between ``floor`` (the receiver's credit: fewer in flight and its
      credit is never used) and ``cap`` (--in-flight, default the window).
    While the bound holds the rate down, rate x trip < bound, and the trip is near its minimum, so the next
    estimate is up to GAIN times larger: it grows by up to 2x a round trip until the rate stops growing, then
    sits where the queue holds about one round trip of messages (latency about twice the bare trip)."""

    def __init__(self, cap: int, floor: int) -> None:
        self.cap = cap
        self.floor = max(1, min(floor, cap))
        self.bound = self.floor
        self.probes: deque[tuple[int, int]] = deque()          # (seq the receiver must reach, send time ns)
        self.last_sent = 0
        self.min_rtt_ns = 0
        self.min_rtt_at = 0
        self.draining_after = -1        # >= 0: the bound is the floor until a batch sent after this seq is back
        self.rates: deque[tuple[int, float]] = deque()           # (time ns, msg/ns), decreasing rates
        self.interval_at = 0
        self.interval_count = 0

    def sent(self, seq: int, now_ns: int) -> None:
        """A batch went out and ``seq`` messages are now sent: one probe per batch, so this costs nothing per
        message."""
        if seq > self.last_sent:
            self.probes.append((seq, now_ns))
            self.last_sent = seq

    def update(self, received: int, now_ns: int) -> int:
        """The receiver has ``received`` messages at ``now_ns``: new round-trip and rate samples, and the bound."""
        answered: tuple[int, int] | None = None
        while self.probes and self.probes[0][0] <= received:
            answered = self.probes.popleft()
        if answered is not None:
            rtt = max(1, now_ns - answered[1])
            if self.draining_after >= 0:
                if answered[0] > self.draining_after:    # sent with at most the floor in flight: a fresh minimum
                    self.min_rtt_ns, self.min_rtt_at, self.draining_after = rtt, now_ns, -1
            elif not self.min_rtt_ns or rtt <= self.min_rtt_ns:
                self.min_rtt_ns, self.min_rtt_at = rtt, now_ns
        if self.draining_after < 0 and self.min_rtt_ns and now_ns - self.min_rtt_at > RTT_WINDOW_NS:
            # The minimum is old, and while the bound keeps a queue no sample can be lower than the queue's
            # delay: an expired minimum replaced by one of those would grow the bound by GAIN every window.
            # So, as BBR's ProbeRTT: hold the floor until a batch sent after the drain began is back.
            self.draining_after = self.last_sent
        if self.draining_after >= 0:
            return self.floor
        if not self.interval_at:
            self.interval_at, self.interval_count = now_ns, received
            return self.bound
        span = now_ns - self.interval_at
        if span >= max(MIN_RATE_INTERVAL_NS, 2 * self.min_rtt_ns):
            rate = (received - self.interval_count) / span
            self.interval_at, self.interval_count = now_ns, received
            while self.rates and now_ns - self.rates[0][0] > RATE_WINDOW_NS:
                self.rates.popleft()
            while self.rates and self.rates[-1][1] <= rate:        # a larger, newer sample outlives it
                self.rates.pop()
            self.rates.append((now_ns, rate))
            if self.min_rtt_ns:
                self.bound = max(self.floor, min(self.cap, int(GAIN * self.rates[0][1] * self.min_rtt_ns)))
        return self.bound


class Wakeup:
    """The sender's wait for its receiver: the receiver's LatencyTap writes a byte to the pipe once its count
    reaches the one asked for (shared[1]), so the sender sleeps instead of polling. A wake-up lost to the two
    processes' race (the count read before the request was seen) costs at most IN_FLIGHT_WAIT_S."""

    def __init__(self, loop: asyncio.AbstractEventLoop, wake: Any) -> None:
        self.loop = loop
        self.fd = wake.fileno()
        self.wake = wake
        self.waiter: asyncio.Future[None] | None = None
        os.set_blocking(self.fd, False)
        loop.add_reader(self.fd, self._readable)

    def _readable(self) -> None:
        try:
            os.read(self.fd, 4096)
        except BlockingIOError:
            return
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def until(self, shared: Any, count: int) -> None:
        shared[1] = count
        if shared[0] < count:
            self.waiter = self.loop.create_future()
            try:
                await asyncio.wait_for(self.waiter, IN_FLIGHT_WAIT_S)
            except asyncio.TimeoutError:
                pass
        shared[1] = 0

    def close(self) -> None:
        self.loop.remove_reader(self.fd)
