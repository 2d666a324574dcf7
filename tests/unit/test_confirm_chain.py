"""ConfirmChain: the stream-publish scenario's publishing loop, against a fake publisher."""
from __future__ import annotations

import asyncio

import pytest

from rbench.errors import BrokerError
from rbench.scenarios import stream_publish
from rbench.scenarios.stream_publish import ConfirmChain, message


class FakePublisher:
    """Confirms (or refuses) each written batch on the next loop turn, like a broker would."""

    def __init__(self, chain: ConfirmChain, refuse: frozenset[int] = frozenset(), silent: bool = False) -> None:
        self.chain = chain
        self.refuse = refuse
        self.silent = silent
        self.buffered: list[tuple[bytes, int]] = []
        self.writes: list[list[tuple[bytes, int]]] = []
        self.error: BrokerError | None = None
        self.max_unconfirmed = 0
        self.unconfirmed = 0

    def publish(self, payload: bytes, seq: int) -> None:
        self.buffered.append((bytes(payload), seq))

    def flush(self) -> None:
        batch, self.buffered = self.buffered, []
        self.writes.append(batch)
        self.unconfirmed += len(batch)
        self.max_unconfirmed = max(self.max_unconfirmed, self.unconfirmed)
        if not self.silent:
            asyncio.get_running_loop().call_soon(self._confirm, batch)

    def _confirm(self, batch: list[tuple[bytes, int]]) -> None:
        for _, seq in reversed(batch):           # the broker may confirm in any order
            self.unconfirmed -= 1
            self.chain.on_confirm(seq, seq not in self.refuse, 0)


@pytest.mark.parametrize("count, batch", [(1, 1), (7, 1), (1000, 100), (250, 100), (0, 100)])
def test_every_message_once_in_order_never_more_than_a_batch_unconfirmed(count: int, batch: int) -> None:
    chain = ConfirmChain()
    pub = FakePublisher(chain)
    asyncio.run(chain.run(pub, count, batch))  # type: ignore[arg-type]
    sent = [m for w in pub.writes for m in w]
    assert sent == [(message(n), n) for n in range(count)]
    assert all(len(w) <= batch for w in pub.writes)
    assert pub.max_unconfirmed == min(batch, count)
    assert (chain.acked, chain.nacked) == (count, 0)


def test_refused_messages_are_counted_and_the_chain_goes_on() -> None:
    chain = ConfirmChain()
    pub = FakePublisher(chain, refuse=frozenset({3, 150}))
    asyncio.run(chain.run(pub, 300, 100))  # type: ignore[arg-type]
    assert (chain.acked, chain.nacked) == (298, 2)


def test_a_broker_that_stops_confirming_fails_the_round(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream_publish, "STALL_TIMEOUT_S", 0.05)
    chain = ConfirmChain()
    pub = FakePublisher(chain, silent=True)
    with pytest.raises(BrokerError, match="no confirm for"):
        asyncio.run(chain.run(pub, 10, 1))  # type: ignore[arg-type]


def test_a_lost_connection_fails_the_round_with_its_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream_publish, "STALL_TIMEOUT_S", 0.05)
    chain = ConfirmChain()
    pub = FakePublisher(chain, silent=True)
    pub.error = BrokerError("stream connection lost")
    with pytest.raises(BrokerError, match="connection lost"):
        asyncio.run(chain.run(pub, 10, 1))  # type: ignore[arg-type]
