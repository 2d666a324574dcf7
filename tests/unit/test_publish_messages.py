"""publish_messages: the stream-publish scenario's publishing loop, against a fake publisher."""
from __future__ import annotations

import asyncio
import time

import pytest

from rbench.errors import BrokerError
from rbench.scenarios import stream_publish
from rbench.scenarios.stream_publish import CountingSink, message, publish_messages
from tests.loops import LoopRunner


class FakePublisher:
    """Confirms (or refuses) each written batch on the next loop turn, like a broker would."""

    def __init__(self, sink: CountingSink, refuse: frozenset[int] = frozenset(), silent: bool = False) -> None:
        self.sink = sink
        self.refuse = refuse
        self.silent = silent
        self.buffered: list[tuple[bytes, int]] = []
        self.writes: list[list[tuple[bytes, int]]] = []
        self.error: BrokerError | None = None
        self.unconfirmed = 0
        self.max_unconfirmed = 0

    def publish(self, payload: bytes, seq: int) -> None:
        self.buffered.append((bytes(payload), seq))
        self.max_unconfirmed = max(self.max_unconfirmed, self.unconfirmed + len(self.buffered))

    async def drain(self, timeout: float) -> int:
        batch, self.buffered = self.buffered, []
        self.writes.append(batch)
        self.unconfirmed += len(batch)
        if self.silent:
            await asyncio.sleep(timeout)
            return self.unconfirmed
        await asyncio.sleep(0)
        for _, seq in reversed(batch):           # the broker may confirm in any order
            self.unconfirmed -= 1
            self.sink.on_confirm(seq, seq not in self.refuse, 0)
        return self.unconfirmed


@pytest.mark.parametrize("count, batch", [(1, 1), (7, 1), (1000, 100), (250, 100), (0, 100)])
def test_every_message_once_in_order_never_more_than_a_batch_unconfirmed(count: int, batch: int, run: LoopRunner) -> None:
    sink = CountingSink()
    pub = FakePublisher(sink)
    run(publish_messages(pub, count, batch))  # type: ignore[arg-type]
    sent = [m for w in pub.writes for m in w]
    assert sent == [(message(n), n) for n in range(count)]
    assert all(len(w) <= batch for w in pub.writes)
    assert pub.max_unconfirmed == min(batch, count)
    assert (sink.acked, sink.nacked) == (count, 0)


def test_refused_messages_are_counted_and_publishing_goes_on(run: LoopRunner) -> None:
    sink = CountingSink()
    run(publish_messages(FakePublisher(sink, refuse=frozenset({3, 150})), 300, 100))  # type: ignore[arg-type]
    assert (sink.acked, sink.nacked) == (298, 2)


def test_a_broker_that_stops_confirming_fails_the_round(monkeypatch: pytest.MonkeyPatch, run: LoopRunner) -> None:
    monkeypatch.setattr(stream_publish, "STALL_TIMEOUT_S", 0.05)
    with pytest.raises(BrokerError, match="not confirmed within"):
        run(publish_messages(FakePublisher(CountingSink(), silent=True), 10, 1))  # type: ignore[arg-type]


def test_a_lost_connection_fails_the_round_with_its_error(monkeypatch: pytest.MonkeyPatch, run: LoopRunner) -> None:
    monkeypatch.setattr(stream_publish, "STALL_TIMEOUT_S", 0.05)
    pub = FakePublisher(CountingSink(), silent=True)
    pub.error = BrokerError("stream connection lost")
    with pytest.raises(BrokerError, match="connection lost"):
        run(publish_messages(pub, 10, 1))  # type: ignore[arg-type]


class StampingPublisher(FakePublisher):
    """Records, per message, the precise clock when it was handed to the publisher."""

    def __init__(self, sink: CountingSink) -> None:
        super().__init__(sink)
        self.sent_at: dict[int, float] = {}

    def publish(self, payload: bytes, seq: int) -> None:
        self.sent_at[seq] = time.perf_counter()
        super().publish(payload, seq)


@pytest.mark.parametrize("batch", [1, 5])
def test_a_rate_cap_never_sends_a_batch_before_its_due_time(batch: int, run: LoopRunner) -> None:
    """The cap is "no earlier than n / rate" on the clock that times the round, on both loops (uvloop's own clock
    is whole milliseconds: pacing on it sent the last of 40 messages at 200 msg/s 0.25 ms early)."""
    pub = StampingPublisher(CountingSink())
    rate = 400.0
    t0 = time.perf_counter()
    run(publish_messages(pub, 30, batch, rate, t0))  # type: ignore[arg-type]
    early = {n: t0 + (n - n % batch) / rate - at for n, at in pub.sent_at.items() if at < t0 + (n - n % batch) / rate}
    assert len(pub.sent_at) == 30 and early == {}
