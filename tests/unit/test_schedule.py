"""Open-loop schedule: due times are fixed by rate and step, never by the broker."""
from __future__ import annotations

from pathlib import Path

from rbench.runtime.schedule import due_times, segments
from tests.loops import LoopRunner


def test_due_times_follow_rate_exactly() -> None:
    (seg,) = segments(1_000_000_000, 0, [(0.0, 1.0, 1000.0)])
    due = list(due_times(seg))
    assert len(due) == 1000
    assert due[0] == 1_000_000_000 and due[1] - due[0] == 1_000_000 and due[-1] < 2_000_000_000


def test_fractional_interval_does_not_drift() -> None:
    (seg,) = segments(0, 0, [(0.0, 3.0, 3.0 * 333.3333)])
    assert len(list(due_times(seg))) == 3000


def test_start_delay_trims_first_steps() -> None:
    segs = list(segments(0, 1_500_000_000, [(0.0, 1.0, 10.0), (1.0, 1.0, 20.0)]))
    assert [s.step for s in segs] == [1]
    assert segs[0].start_ns == 1_500_000_000 and segs[0].end_ns == 2_000_000_000
    assert len(list(due_times(segs[0]))) == 10


def test_limit_caps_count() -> None:
    (seg,) = segments(0, 0, [(0.0, 10.0, 100.0)])
    assert len(list(due_times(seg, limit=7))) == 7


def test_unlimited_rate_segment_has_no_interval() -> None:
    (seg,) = segments(0, 0, [(0.0, 1.0, None)])
    assert seg.interval_ns is None


def test_a_producer_behind_schedule_stops_at_the_step_end(tmp_path: Path, run: LoopRunner) -> None:
    """When the client cannot keep up, the backlog is dropped at the step's end, not sent late."""
    import asyncio
    import time

    from rbench.config.types import PublisherSpec
    from rbench.runtime.producer import run_producer
    from rbench.runtime.recorder import Recorder

    class SlowPublisher:
        def __init__(self) -> None:
            self.count = 0

        async def ready(self) -> None:
            time.sleep(0.002)            # a client that can do ~500 msg/s

        def can_publish(self) -> bool:
            time.sleep(0.002)
            return True

        def publish(self, payload: bytes, seq: int) -> None:
            self.count += 1

    recorder = Recorder(str(tmp_path), "run", "c", 0, 0, ["q"], [0], None)

    async def main() -> tuple[int, float]:
        start = time.time_ns() + 50_000_000
        (seg,) = segments(start, 0, [(0.0, 0.5, 2000.0)])        # 1000 messages due in 0.5 s
        pub = SlowPublisher()
        t = time.monotonic()
        sent = await run_producer(pub, PublisherSpec(producer_id=0, queue="q"), recorder, [seg], 24, None,
                                  asyncio.Event())
        assert pub.count == sent
        return sent, time.monotonic() - t

    sent, elapsed = run(main())
    assert sent < 1000
    assert elapsed < 0.5 + 0.05 + 0.2
    assert recorder.close(False)["published_rows"] == sent
