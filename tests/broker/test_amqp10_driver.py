"""The `amqp10` driver against the real broker: what the contract suite does not cover.

Exactly-once in-order delivery in both settlement modes, durable and not; a 1 MiB body as
a multi-frame transfer both ways; link credit (a sender at zero credit blocks, and more
than the broker's first grant of credit still arrives complete); batched dispositions;
one-line refusals; SASL ANONYMOUS; the 3.x and 4.x address forms.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from rbench.config.types import ClusterTarget, ConsumerSpec, PublisherSpec, QueueDecl, Topology
from rbench.drivers.amqp10 import Amqp10Driver, Amqp10Publisher, address
from rbench.drivers.amqp10_uri import Amqp10Uri
from rbench.drivers.replies import NotFound
from rbench.errors import ConfigError, ConnectError
from rbench.runtime.stamp import new_payload, read_stamp, write_stamp
from tests.brokers import Broker
from tests.loops import LoopRunner

pytestmark = [pytest.mark.timeout(60), pytest.mark.loops("uvloop")]


class Sink:
    def __init__(self) -> None:
        self.confirms: list[tuple[int, bool]] = []
        self.returns: list[bytes] = []

    def on_confirm(self, seq: int, acked: bool, t_ns: int) -> None:
        self.confirms.append((seq, acked))

    def on_return(self, body: bytes | memoryview, t_ns: int) -> None:
        self.returns.append(bytes(body))


class Inbox:
    def __init__(self) -> None:
        self.seqs: list[int] = []
        self.sizes: list[int] = []

    def __call__(self, body: memoryview | bytes, redelivered: bool, t_ns: int) -> None:
        self.seqs.append(read_stamp(body)[1])
        self.sizes.append(len(body))

    async def wait_for(self, n: int, timeout: float = 15.0) -> bool:
        deadline = time.monotonic() + timeout
        while len(self.seqs) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return len(self.seqs) >= n


@asynccontextmanager
async def opened(uri: str, queue: str, durable: bool = False) -> AsyncIterator[Amqp10Driver]:
    d = Amqp10Driver()
    await asyncio.wait_for(d.open(ClusterTarget("t", (uri,))), 10)
    try:
        await d.declare(Topology(queues=(QueueDecl(queue, durable=durable),)))
        try:
            yield d
        finally:
            await d.delete_queues([queue])
    finally:
        await asyncio.wait_for(d.aclose(), 10)


async def publish(pub: Amqp10Publisher, seqs: range, size: int = 64) -> None:
    body = new_payload(size)
    for seq in seqs:
        await asyncio.wait_for(pub.ready(), 10)
        write_stamp(body, 1, seq, 0, time.time_ns())
        pub.publish(body, seq)


@pytest.mark.parametrize("settlement", ["unsettled", "presettled"])
@pytest.mark.parametrize("durable", [False, True])
def test_every_message_once_in_order(settlement: str, durable: bool, amqp_url: str, unique_name: str,
                                     run: LoopRunner) -> None:
    n = 3000
    unsettled = settlement == "unsettled"

    async def main() -> None:
        async with opened(amqp_url, unique_name, durable) as d:
            inbox = Inbox()
            consumer = await d.consumer(ConsumerSpec(0, unique_name, prefetch=200, auto_ack=not unsettled), inbox)
            sink = Sink()
            pub = await d.publisher(PublisherSpec(1, unique_name, routing_key=unique_name, confirm=unsettled,
                                                  confirm_window=500, persistent=durable), sink)
            await publish(pub, range(n))
            assert await pub.drain(10) == 0
            if unsettled:
                assert sink.confirms == [(seq, True) for seq in range(n)]
            else:
                assert sink.confirms == []                    # pre-settled: nothing to confirm
            assert await inbox.wait_for(n), f"{len(inbox.seqs)} of {n}"
            await asyncio.sleep(0.2)
            assert inbox.seqs == list(range(n))
            await consumer.aclose()
            await pub.aclose()
            assert (await d.queue_declare(unique_name, passive=True))[1] == 0    # all settled on the broker

    run(main(), timeout=45)


def test_a_1mib_body_crosses_as_a_multi_frame_transfer(amqp_url: str, unique_name: str, run: LoopRunner) -> None:
    size = 1 << 20

    async def main() -> None:
        async with opened(amqp_url, unique_name) as d:
            sink = Sink()
            pub = await d.publisher(PublisherSpec(1, unique_name, routing_key=unique_name, confirm=True), sink)
            body = new_payload(size)
            body[24:] = bytes(range(256)) * ((size - 24) // 256) + bytes(range((size - 24) % 256))
            for seq in range(3):
                write_stamp(body, 1, seq, 0, 0)
                pub.publish(body, seq)
            assert await pub.drain(10) == 0 and len(sink.confirms) == 3
            assert pub._sender.transfers >= 3 * (size // d.connection.max_frame)       # several frames each
            got: list[bytes] = []
            consumer = await d.consumer(ConsumerSpec(0, unique_name, prefetch=10),
                                        lambda b, r, t: got.append(bytes(b)))
            deadline = time.monotonic() + 10
            while len(got) < 3 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert [read_stamp(b)[1] for b in got] == [0, 1, 2]
            assert all(b[24:] == body[24:] for b in got)
            await consumer.aclose()
            await pub.aclose()

    run(main(), timeout=45)


def test_no_credit_blocks_the_sender_and_more_than_the_first_grant_arrives(
        amqp_url: str, unique_name: str, run: LoopRunner) -> None:
    """A flow with link-credit 0 holds ready(); then more messages than the broker first granted
    all arrive (the sender lives on the broker's later flow frames), none lost, none twice."""
    async def main() -> None:
        async with opened(amqp_url, unique_name) as d:
            sink = Sink()
            pub = await d.publisher(PublisherSpec(1, unique_name, routing_key=unique_name, confirm=True,
                                                  confirm_window=2000), sink)
            first_grant = pub.credit
            assert first_grant > 0
            sender = pub._sender
            sender.flow(sender.delivery_count, 0)              # what a flow frame with link-credit 0 does
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(pub.ready(), 0.3)
            sender.flow(sender.delivery_count, first_grant)
            n = first_grant + 2000
            inbox = Inbox()
            consumer = await d.consumer(ConsumerSpec(0, unique_name, prefetch=1000), inbox)
            lowest = first_grant
            body = new_payload(12)
            for seq in range(n):
                await pub.ready()
                lowest = min(lowest, pub.credit)
                write_stamp(body, 1, seq, 0, 0)
                pub.publish(body, seq)
            assert await pub.drain(15) == 0
            assert lowest >= 1                                   # never sent without credit
            assert sorted(sink.confirms) == [(seq, True) for seq in range(n)]
            assert await inbox.wait_for(n, 20)
            assert inbox.seqs == list(range(n))
            await consumer.aclose()
            await pub.aclose()

    run(main(), timeout=55)


def test_dispositions_are_batched(amqp_url: str, unique_name: str, run: LoopRunner) -> None:
    """multi_ack_every=10: 35 deliveries are settled by 4 ranged dispositions (the last after the linger);
    by default, one disposition per read covers every delivery of that read."""
    n, every = 35, 10

    async def main() -> None:
        async with opened(amqp_url, unique_name) as d:
            pub = await d.publisher(PublisherSpec(1, unique_name, routing_key=unique_name, confirm=True), Sink())
            await publish(pub, range(n))
            assert await pub.drain(10) == 0
            inbox = Inbox()
            consumer = await d.consumer(ConsumerSpec(0, unique_name, prefetch=100, multi_ack_every=every), inbox)
            assert await inbox.wait_for(n, 5)
            await asyncio.sleep(0.3)                           # the linger sends the last 5
            assert consumer._receiver.dispositions == 4
            await consumer.aclose()
            assert (await d.queue_declare(unique_name, passive=True))[1] == 0
            await publish(pub, range(n, n + 1000))
            assert await pub.drain(10) == 0
            inbox = Inbox()
            consumer = await d.consumer(ConsumerSpec(0, unique_name, prefetch=1000), inbox)
            assert await inbox.wait_for(1000, 5)
            await asyncio.sleep(0.1)
            assert 1 <= consumer._receiver.dispositions < 200          # batched per read, not one per message
            await consumer.aclose()
            await pub.aclose()
            assert (await d.queue_declare(unique_name, passive=True))[1] == 0

    run(main(), timeout=30)


def test_an_unknown_queue_is_a_one_line_not_found(amqp_url: str, unique_name: str, run: LoopRunner) -> None:
    async def main() -> None:
        d = Amqp10Driver()
        await d.open(ClusterTarget("t", (amqp_url,)))
        try:
            with pytest.raises(NotFound) as info:
                await asyncio.wait_for(d.publisher(PublisherSpec(1, f"{unique_name}-missing",
                                                                 routing_key=f"{unique_name}-missing",
                                                                 confirm=True), Sink()), 5)
            msg = str(info.value)
            assert "\n" not in msg and f"{unique_name}-missing" in msg and "no queue" in msg, msg
            with pytest.raises(NotFound):
                await asyncio.wait_for(d.consumer(ConsumerSpec(0, f"{unique_name}-missing"), Inbox()), 5)
            # the connection survives a refused link
            await d.declare(Topology(queues=(QueueDecl(unique_name, durable=False),)))
            pub = await d.publisher(PublisherSpec(1, unique_name, routing_key=unique_name, confirm=True), Sink())
            await publish(pub, range(3))
            assert await pub.drain(5) == 0
            await d.delete_queues([unique_name])
        finally:
            await d.aclose()

    run(main(), timeout=30)


def test_sasl_anonymous(amqp_url: str, unique_name: str, run: LoopRunner) -> None:
    """A URI without user info logs in with SASL ANONYMOUS (the 3.x plugin maps it to its default user)."""
    anonymous = amqp_url.replace("guest:guest@", "")

    async def main() -> None:
        async with opened(amqp_url, unique_name) as admin:
            d = Amqp10Driver()
            await d.open(ClusterTarget("t", (anonymous,)))
            try:
                assert d.connection.uri.sasl == "anonymous"
                pub = await d.publisher(PublisherSpec(1, unique_name, routing_key=unique_name, confirm=True), Sink())
                await publish(pub, range(5))
                assert await pub.drain(5) == 0
                assert (await admin.queue_declare(unique_name, passive=True))[1] == 5
            finally:
                await d.aclose()

    run(main(), timeout=30)


def test_address_forms_and_uri_options() -> None:
    assert address("v1", queue="q") == "/amq/queue/q"
    assert address("v1", exchange="x", key="k") == "/exchange/x/k"
    assert address("v2", queue="a b") == "/queues/a%20b"
    assert address("v2", exchange="x/y", key="k") == "/exchanges/x%2Fy/k"
    u = Amqp10Uri("amqp://u:s3cret@h:5673/vh?address=v2&credit=100&sasl=plain")
    assert (u.address, u.credit, u.vhost, u.port, u.sasl) == ("v2", 100, "vh", 5673, "plain")
    with pytest.raises(ConfigError, match="address: expected v1") as info:
        Amqp10Uri("amqp://u:s3cret@h/?address=v3")
    assert "s3cret" not in str(info.value)


def test_a_missing_vhost_is_a_connect_error(broker: Broker, run: LoopRunner) -> None:
    """One line naming the vhost and why, on both brokers: RabbitMQ 3.x's plugin accepts open for any vhost and
    refuses the probe session ("insufficient permissions", even for a vhost that does not exist); 4.0 resets
    the connection after the open, the reason only in its log. Both are asked over AMQP 0-9-1 on the same port."""
    async def main() -> None:
        d = Amqp10Driver()
        with pytest.raises(ConnectError) as info:
            await d.open(ClusterTarget("t", (broker.amqp_url.rstrip("/") + "/rbench-no-such-vhost",)))
        msg = str(info.value)
        assert "broker refused vhost 'rbench-no-such-vhost': not found (" in msg, msg
        assert "guest:***@" in msg and "\n" not in msg and "guest:guest" not in msg
        assert ("connection reset at open" in msg) == broker.version_prefix.startswith("4"), msg
        await d.aclose()

    run(main(), timeout=30)


def test_a_wrong_password_is_no_vhost_refusal(broker: Broker, run: LoopRunner) -> None:
    async def main() -> None:
        d = Amqp10Driver()
        with pytest.raises(ConnectError) as info:
            await d.open(ClusterTarget("t", (broker.amqp_url.replace("guest:guest", "guest:wrong"),)))
        msg = str(info.value)
        assert "authentication refused for user 'guest'" in msg and "vhost" not in msg and "wrong" not in msg, msg
        await d.aclose()

    run(main(), timeout=30)
