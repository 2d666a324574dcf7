"""rbench amqp10's adaptive in-flight bound against a simulated pipeline: a link that delivers at most ``capacity``
msg/s, each message at least ``trip`` after it was sent (a FIFO: a message waits behind the ones before it)."""
from __future__ import annotations

from collections import deque

import pytest

from rbench.scenarios import quiver_inflight
from rbench.scenarios.quiver_inflight import RATE_WINDOW_NS, AdaptiveInFlight

MS = 1_000_000


def simulate(capacity: float, trip_ms: float, cap: int, floor: int, seconds: float = 2.0,
             change: tuple[float, float] | None = None) -> tuple[AdaptiveInFlight, float, float, list[int]]:
    """Closed loop as the sender runs it: every 0.5 ms read the receiver's count, update, send up to the bound
    (one batch, one probe). Returns the controller, the delivered rate over the last second, the mean trip over
    it (ms), and the bound every 10 ms. ``change`` = (at s, new capacity)."""
    ctl = AdaptiveInFlight(cap, floor)
    arrivals: deque[int] = deque()               # arrival times of messages sent and not yet received
    trips: list[tuple[int, int]] = []            # (arrival, trip) of every message
    last_arrival = 0
    received = sent = 0
    bounds = []
    step = MS // 2
    for i in range(1, int(seconds * 1e9 / step)):
        now = i * step
        if change and now >= change[0] * 1e9:
            capacity = change[1]
        while arrivals and arrivals[0] <= now:
            arrivals.popleft()
            received += 1
        bound = ctl.update(received, now)
        room = bound - (sent - received)
        for _ in range(max(0, room)):
            last_arrival = max(now + int(trip_ms * MS), last_arrival + int(1e9 / capacity))
            arrivals.append(last_arrival)
            trips.append((last_arrival, last_arrival - now))
            sent += 1
        if room > 0:
            ctl.sent(sent, now)
        if i % 20 == 0:
            bounds.append(bound)
    end = int(seconds * 1e9)
    late = [t for a, t in trips if end - 1e9 <= a < end]
    return ctl, len(late), sum(late) / len(late) / MS, bounds


def test_the_bound_settles_near_twice_the_bandwidth_delay_product_without_costing_rate() -> None:
    # 20,000 msg/s x 5 ms = 100 messages: the receiver stays busy with about 200 in flight
    ctl, rate, trip, _ = simulate(20_000, 5.0, cap=5000, floor=10)
    assert rate >= 0.97 * 20_000
    assert 150 <= ctl.bound <= 300, ctl.bound
    assert trip < 3 * 5.0                          # the queue holds about one bare trip, not the cap's worth
    assert 4.5 * MS <= ctl.min_rtt_ns <= 6 * MS


def test_a_fixed_bound_of_the_cap_would_queue_what_the_adaptive_one_does_not() -> None:
    _, rate_cap, trip_cap, _ = simulate(20_000, 5.0, cap=2000, floor=2000)           # floor = cap: fixed 2000
    _, rate_adapt, trip_adapt, _ = simulate(20_000, 5.0, cap=2000, floor=10)
    assert rate_adapt >= 0.97 * rate_cap
    assert trip_cap > 80 and trip_adapt < 15       # 2000 / 20,000 msg/s = 100 ms of queue, against ~2 trips


def test_the_bound_stays_between_the_floor_and_the_cap() -> None:
    ctl, _, _, bounds = simulate(20_000, 5.0, cap=120, floor=10)
    assert max(bounds) == 120 and ctl.bound == 120
    ctl, _, _, bounds = simulate(20_000, 5.0, cap=5000, floor=600)
    # the first batch (the floor) is part of the least trip seen: 5 ms + 600 / 20,000 msg/s, x 2 x the rate
    assert min(bounds) == 600 and 1000 <= ctl.bound <= 1500


def test_an_expired_minimum_is_measured_again_at_the_floor_not_taken_from_the_queue(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the drain the expired minimum would be replaced by a trip through the bound's own queue, and the
    bound would grow by GAIN every window."""
    monkeypatch.setattr(quiver_inflight, "RTT_WINDOW_NS", 500 * MS)
    ctl, rate, trip, bounds = simulate(20_000, 5.0, cap=50_000, floor=10, seconds=5.0)
    assert max(bounds[100:]) <= 400 and 150 <= ctl.bound <= 300     # as without expiry (the first test)
    assert min(bounds[100:]) == 10                                   # it drained ...
    assert rate >= 0.9 * 20_000 and trip < 3 * 5.0                  # ... for about one trip per window


def test_it_starts_at_the_floor_and_follows_a_faster_then_a_slower_pipeline() -> None:
    ctl, _, _, bounds = simulate(10_000, 5.0, cap=5000, floor=10, seconds=4.0, change=(2.0, 40_000))
    assert bounds[0] == 10
    assert 70 <= bounds[190] <= 150                 # 10,000 msg/s x 5 ms x 2 = 100 before the change
    assert 280 <= ctl.bound <= 600                  # 40,000 x 5 ms x 2 = 400 after it
    # slower again: the best rate of the last second is forgotten, so the bound comes down with it
    ctl, _, _, bounds = simulate(40_000, 5.0, cap=5000, floor=10, seconds=2.0 + 2 * RATE_WINDOW_NS / 1e9,
                                 change=(2.0, 10_000))
    assert bounds[190] >= 280 and ctl.bound <= 150


def test_one_probe_per_batch_and_only_answered_ones_give_a_round_trip() -> None:
    ctl = AdaptiveInFlight(1000, 100)
    ctl.sent(100, 0)
    ctl.sent(100, 1 * MS)                          # nothing new sent: no second probe
    ctl.sent(300, 2 * MS)
    assert list(ctl.probes) == [(100, 0), (300, 2 * MS)]
    ctl.update(99, 4 * MS)
    assert ctl.min_rtt_ns == 0                     # the first batch's last message is not received yet
    ctl.update(150, 6 * MS)
    assert ctl.min_rtt_ns == 6 * MS and list(ctl.probes) == [(300, 2 * MS)]
    ctl.update(300, 5 * MS + 6 * MS)
    assert ctl.min_rtt_ns == 6 * MS                # 9 ms is not less


def test_the_command_takes_the_policy_and_refuses_an_unknown_one() -> None:
    import argparse

    from rbench.commands.amqp10 import add_send_receive_options, quiver_options
    from rbench.errors import ConfigError
    from rbench.scenarios.quiver import QuiverOptions

    parser = argparse.ArgumentParser()
    add_send_receive_options(parser)
    url = "amqp://guest:guest@127.0.0.1:5672/"
    assert quiver_options(parser.parse_args(["--count", "10"]), url).in_flight_policy == "adaptive"
    fixed = quiver_options(parser.parse_args(["--count", "10", "--in-flight-policy", "fixed"]), url)
    assert fixed.in_flight_policy == "fixed"
    with pytest.raises(ConfigError, match="--in-flight-policy"):
        QuiverOptions(uri=url, count=1, in_flight_policy="bbr").check()  # type: ignore[arg-type]
