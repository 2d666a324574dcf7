"""Open-loop send schedule: message k of a step is due at start + (phase + k) / rate.

The due time is fixed before sending, whatever the broker does, so a stalled
broker shows up as latency (measured from `t_intended`) instead of silently
lowering the offered load: the coordinated-omission correction of wrk2/HdrHistogram.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Segment:
    """One step as absolute nanoseconds for one producer."""

    step: int
    start_ns: int
    end_ns: int
    interval_ns: float | None   # None: unlimited rate (send as fast as the window allows)


PHASES = ("spread", "random", "aligned")


def phase_of(mode: str, index: int, count: int, rng_value: float) -> float:
    """A producer's phase, a fraction of its send interval, so a task's producers do not all send at once.

    spread: producer i of n (in its task) at i/n of the interval, evenly, like independent clients
    started at different times (PerfTest's producers drift apart the same way); random: uniform in
    [0, 1); aligned: 0, every producer on the same instant (bursts of n, for burst tests)."""
    if mode == "aligned" or count <= 1 and mode == "spread":
        return 0.0
    if mode == "spread":
        return index / count
    return rng_value


def segments(t0_ns: int, start_delay_ns: int, steps: list[tuple[float, float, float | None]],
             phase: float = 0.0) -> Iterator[Segment]:
    """Segments for steps given as (offset_s, duration_s, rate); a start delay trims the first ones, and
    ``phase`` (a fraction of the interval, see phase_of) shifts a rate-limited step's first message."""
    producer_start = t0_ns + start_delay_ns
    for i, (offset_s, duration_s, rate) in enumerate(steps):
        start = t0_ns + int(offset_s * 1e9)
        end = start + int(duration_s * 1e9)
        if end <= producer_start:
            continue
        interval = None if rate is None else 1e9 / rate
        first = max(start, producer_start)
        if interval is not None and phase:
            first += int(phase * interval)
            if first >= end:
                continue
        yield Segment(i, first, end, interval)


def due_times(segment: Segment, limit: int | None = None, first: int = 0) -> Iterator[int]:
    """Due times of slots ``first``, ``first`` + 1, … of the segment (rate-limited segments only);
    slot k is due at start + k × interval, and `limit` caps the slot index (not the count from first)."""
    assert segment.interval_ns is not None
    k = first
    while limit is None or k < limit:
        due = segment.start_ns + int(k * segment.interval_ns)
        if due >= segment.end_ns:
            return
        yield due
        k += 1


def slot_at(segment: Segment, t_ns: int) -> int:
    """Index of the segment's first slot due at or after ``t_ns`` (0 before the segment starts; past
    the end, the number of slots): the slots before it are the ones ``t_ns`` has already passed."""
    interval = segment.interval_ns
    assert interval is not None
    t_ns = min(t_ns, segment.end_ns)
    if t_ns <= segment.start_ns:
        return 0
    k = int((t_ns - segment.start_ns) // interval)
    while segment.start_ns + int(k * interval) < t_ns:       # due_times' own rounding decides
        k += 1
    while k > 0 and segment.start_ns + int((k - 1) * interval) >= t_ns:
        k -= 1
    return k
