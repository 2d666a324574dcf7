"""run_producer with the real Recorder (C stamper) and a fake publisher: no network."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from rbench.config.types import PublisherSpec
from rbench.errors import ConnectionLost
from rbench.runtime.consumers import ConsumerState
from rbench.runtime.producer import ProducerSink, run_producer
from rbench.runtime.recorder import Recorder
from rbench.runtime.schedule import segments
from rbench.runtime.stamp import read_stamp
from tests.loops import LoopRunner


class FakePublisher:
    def __init__(self, fail_at: int | None = None) -> None:
        self.bodies: list[bytes] = []
        self.fail_at = fail_at

    async def ready(self) -> None:
        return None

    def can_publish(self) -> bool:
        return True

    def publish(self, payload: bytearray, seq: int) -> None:
        if seq == self.fail_at:
            raise ConnectionError("gone")
        self.bodies.append(bytes(payload))


def recorder(tmp_path: Path) -> Recorder:
    return Recorder(str(tmp_path), "r", "c", 0, 0, ["q"], [0], None)


def produce(run: LoopRunner, pub: FakePublisher, rec: Recorder, rate: float | None, count: int) -> int:
    async def main() -> int:
        segs = list(segments(time.time_ns(), 0, [(0.0, 5.0, rate)]))
        return await run_producer(pub, PublisherSpec(producer_id=4, queue="q", confirm=True), rec, segs, 30, count, asyncio.Event())
    return run(main())


@pytest.mark.parametrize("rate", [None, 2000.0])
def test_each_published_body_carries_its_recorded_stamp(tmp_path: Path, rate: float | None, run: LoopRunner) -> None:
    rec, pub = recorder(tmp_path), FakePublisher()
    assert produce(run, pub, rec, rate, 50) == 50
    stamps = [read_stamp(b) for b in pub.bodies]
    assert [s[:2] for s in stamps] == [(4, i) for i in range(50)] and all(len(b) == 30 for b in pub.bodies)
    assert all(ti <= ts for _, _, ti, ts in stamps)
    if rate is None:
        assert all(ti == ts for _, _, ti, ts in stamps)
    else:
        assert {b[2] - a[2] for a, b in zip(stamps, stamps[1:])} <= {499_999, 500_000, 500_001}
    sink = ProducerSink(rec, 4)
    for seq in range(50):
        sink.on_confirm(seq, True, stamps[seq][3] + 1)
    assert rec.counts["published"] == 50 and rec.counts["confirmed"] == 50 and rec.core.pending == 0
    rec.close(interrupted=False)


def test_a_publish_that_raises_leaves_no_row(tmp_path: Path, run: LoopRunner) -> None:
    rec, pub = recorder(tmp_path), FakePublisher(fail_at=3)
    with pytest.raises(ConnectionError):
        produce(run, pub, rec, None, 10)
    assert rec.counts["published"] == 3 and rec.core.pending == 3 and rec.core.published_rows == 3


def test_consumer_state_records_and_stops_at_its_limit(tmp_path: Path, run: LoopRunner) -> None:
    async def main() -> ConsumerState:
        rec = recorder(tmp_path)
        state = ConsumerState(rec, 7, rec.queue_index("q"), 2)
        pub = FakePublisher()
        await run_producer(pub, PublisherSpec(producer_id=1, queue="q"), rec, list(segments(time.time_ns(), 0, [(0.0, 5.0, None)])),
                           24, 3, asyncio.Event())
        for b in pub.bodies:
            state(memoryview(b), False, time.time_ns())
        assert rec.counts["consumed"] == 2 and state.count == 2 and state.done.is_set()
        assert (state.consumer_id, state.queue_idx, state.limit, state.recorder) == (7, 0, 2, rec)
        return state
    run(main())


class DyingPublisher(FakePublisher):
    """Publishes until ``dies_at`` messages, then raises ConnectionLost from ready() as a dead connection does."""

    def __init__(self, dies_at: int | None = None) -> None:
        super().__init__()
        self.dies_at = dies_at
        self.seqs: list[int] = []

    async def ready(self) -> None:
        if self.dies_at is not None and len(self.seqs) >= self.dies_at:
            raise ConnectionLost("connection lost: cut")

    def can_publish(self) -> bool:
        return self.dies_at is None or len(self.seqs) < self.dies_at

    def publish(self, payload: bytearray, seq: int) -> None:
        self.seqs.append(seq)
        super().publish(payload, seq)


class FakeRecovery:
    """Hands out ``new`` after ``gap_s`` (None: the task stops first); keeps the skipped slots per step."""

    def __init__(self, new: DyingPublisher | None, gap_s: float) -> None:
        self.new, self.gap_s = new, gap_s
        self.skips: dict[int, int] = {}
        self.lost_at = self.back_at = 0

    async def publisher(self, pub: object, error: ConnectionLost, until_ns: int) -> DyingPublisher | None:
        self.lost_at = time.time_ns()
        await asyncio.sleep(self.gap_s)
        self.back_at = time.time_ns()
        return self.new

    def skipped(self, step: int, slots: int) -> None:
        self.skips[step] = self.skips.get(step, 0) + slots


def ride(run: LoopRunner, tmp_path: Path, steps: list[tuple[float, float, float | None]], dies_at: int,
         gap_s: float, count: int | None = None, back: bool = True) -> tuple[int, DyingPublisher, DyingPublisher, FakeRecovery]:
    rec = recorder(tmp_path)
    first, second = DyingPublisher(dies_at), DyingPublisher()
    recovery = FakeRecovery(second if back else None, gap_s)

    async def main() -> int:
        segs = list(segments(time.time_ns() + 20_000_000, 0, steps))
        return await run_producer(first, PublisherSpec(producer_id=2, queue="q"), rec, segs, 24, count, asyncio.Event(),
                                  recovery=recovery)

    sent = run(main())
    rec.close(interrupted=False)
    return sent, first, second, recovery


def test_after_a_reconnect_the_producer_skips_what_fell_due_and_keeps_its_schedule(tmp_path: Path, run: LoopRunner) -> None:
    rate, interval = 500.0, 2_000_000
    sent, first, second, recovery = ride(run, tmp_path, [(0.0, 0.6, rate), (0.6, 0.4, rate)], dies_at=100, gap_s=0.3)
    assert first.seqs == list(range(100)) and second.seqs == list(range(100, sent))     # nothing sent twice
    skipped = sum(recovery.skips.values())
    last_due = read_stamp(first.bodies[-1])[2]
    # the slots due from the one after the last sent until the connection was back
    assert set(recovery.skips) == {0} and 0.3 * rate - 2 <= skipped <= (recovery.back_at - last_due) / interval + 1
    # every slot of the schedule sent or skipped (a loaded machine may drop a few at a step's end, as always)
    assert 0.95 * rate <= sent + skipped <= rate * 1.0
    stamps = [read_stamp(b) for b in second.bodies]
    assert stamps[0][2] >= recovery.back_at - interval      # the first slot after the gap is one not yet due ...
    assert all(b[2] - a[2] in (interval - 1, interval, interval + 1) for a, b in zip(stamps, stamps[1:]))  # ... no burst


def test_skipped_slots_count_towards_the_message_count(tmp_path: Path, run: LoopRunner) -> None:
    sent, _, second, recovery = ride(run, tmp_path, [(0.0, 2.0, 500.0)], dies_at=50, gap_s=0.1, count=200)
    assert sent + sum(recovery.skips.values()) == 200 and second.seqs[-1] == sent - 1


def test_a_task_stopping_while_disconnected_counts_the_slots_it_missed(tmp_path: Path, run: LoopRunner) -> None:
    sent, first, _, recovery = ride(run, tmp_path, [(0.0, 0.3, 500.0), (0.3, 0.3, 250.0)], dies_at=20, gap_s=0.7, back=False)
    assert sent == 20 == len(first.seqs)
    assert recovery.skips == {0: 150 - 20, 1: 75}


def test_unlimited_rate_skips_nothing_after_a_reconnect(tmp_path: Path, run: LoopRunner) -> None:
    sent, first, second, recovery = ride(run, tmp_path, [(0.0, 0.3, None)], dies_at=300, gap_s=0.05, count=1000)
    assert sent == 1000 and first.seqs + second.seqs == list(range(1000)) and not recovery.skips


def test_without_a_recovery_a_lost_connection_fails_the_producer(tmp_path: Path, run: LoopRunner) -> None:
    async def main() -> int:
        segs = list(segments(time.time_ns(), 0, [(0.0, 1.0, 1000.0)]))
        return await run_producer(DyingPublisher(5), PublisherSpec(producer_id=2, queue="q"), recorder(tmp_path), segs,
                                  24, None, asyncio.Event())
    with pytest.raises(ConnectionLost):
        run(main())
