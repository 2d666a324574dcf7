"""run_producer with the real Recorder (C stamper) and a fake publisher: no network."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from rbench.config.types import PublisherSpec
from rbench.runtime.producer import ProducerSink, run_producer
from rbench.runtime.recorder import Recorder
from rbench.runtime.schedule import segments
from rbench.runtime.stamp import read_stamp
from rbench.runtime.task import _ConsumerState
from tests.loops import LoopRunner


class FakePublisher:
    def __init__(self, fail_at: int | None = None) -> None:
        self.bodies: list[bytes] = []
        self.fail_at = fail_at

    async def ready(self) -> None:
        return None

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
    async def main() -> _ConsumerState:
        rec = recorder(tmp_path)
        state = _ConsumerState(rec, 7, rec.queue_index("q"), 2)
        pub = FakePublisher()
        await run_producer(pub, PublisherSpec(producer_id=1, queue="q"), rec, list(segments(time.time_ns(), 0, [(0.0, 5.0, None)])),
                           24, 3, asyncio.Event())
        for b in pub.bodies:
            state(memoryview(b), False, time.time_ns())
        assert rec.counts["consumed"] == 2 and state.count == 2 and state.done.is_set()
        assert (state.consumer_id, state.queue_idx, state.limit, state.recorder) == (7, 0, 2, rec)
        return state
    run(main())
