"""The stream driver against the real brokers (3.10's stream plugin on 5552, 4.0's on 5580).

Every test uses its own stream (unique_name) and deletes it; counts are small and
every wait is bounded.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from rbench.config.types import ClusterTarget, ConsumerSpec, PublisherSpec, QueueDecl, Topology
from rbench.drivers.base import Consumer, Publisher, load_driver
from rbench.drivers.stream import StreamDriver
from rbench.errors import BrokerError, ConfigError, ConnectError
from rbench.runtime.stamp import STAMP_SIZE, new_payload, read_stamp, write_stamp
from tests.broker import on_both_brokers
from tests.brokers import Broker
from tests.loops import LoopRunner

pytestmark = pytest.mark.timeout(120)
amqp_url, stream_url = on_both_brokers.amqp_url, on_both_brokers.stream_url     # fixtures: the broker row's URLs


def target(amqp_url: str, stream_url: str | None = None) -> ClusterTarget:
    return ClusterTarget("local", (amqp_url,), stream_uris=(stream_url,) if stream_url else ())


def stream_decl(name: str, **args: Any) -> QueueDecl:
    return QueueDecl(name, arguments=(("x-queue-type", "stream"), *args.items()))


class Sink:
    def __init__(self) -> None:
        self.confirms: list[tuple[int, bool]] = []

    def on_confirm(self, seq: int, acked: bool, t_ns: int) -> None:
        self.confirms.append((seq, acked))

    def on_return(self, body: bytes | memoryview, t_ns: int) -> None:
        raise AssertionError("streams never return messages")


class Inbox:
    """Collects (producer, seq) from stamped bodies, keeps the raw bodies too."""

    def __init__(self) -> None:
        self.stamps: list[tuple[int, int]] = []
        self.bodies: list[bytes] = []
        self.redelivered = 0

    def __call__(self, body: memoryview | bytes, redelivered: bool, t_ns: int) -> None:
        b = bytes(body)
        self.bodies.append(b)
        if len(b) >= STAMP_SIZE:
            self.stamps.append(read_stamp(b)[:2])
        self.redelivered += redelivered

    async def wait_for(self, n: int, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.bodies) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.02)


@asynccontextmanager
async def driver_with_stream(amqp_url: str, stream_url: str, name: str, **args: Any) -> AsyncIterator[StreamDriver]:
    driver = load_driver("stream")
    assert isinstance(driver, StreamDriver)
    await driver.open(target(amqp_url, stream_url))
    try:
        await driver.declare(Topology(queues=(stream_decl(name, **args),)))
        yield driver
    finally:
        try:
            await driver.delete_streams([name])
        finally:
            await driver.aclose()


async def publish_stamped(pub: Publisher, producer: int, seqs: range, size: int = 40, batch: int = 50) -> None:
    body = new_payload(size)
    for seq in seqs:
        await pub.ready()
        now = time.time_ns()
        write_stamp(body, producer, seq, now, now)
        pub.publish(body, seq)
        if (seq + 1) % batch == 0:
            assert await pub.drain(10) == 0
    assert await pub.drain(10) == 0


@pytest.mark.parametrize("fmt", ["amqp", "binary"])
def test_every_published_message_is_consumed_once_in_order(fmt: str, amqp_url: str, stream_url: str,
                                                           unique_name: str, run: LoopRunner) -> None:
    n = 3000

    async def main() -> None:
        async with driver_with_stream(amqp_url, stream_url, unique_name) as d:
            inbox = Inbox()
            consumer = await d.consumer(ConsumerSpec(0, unique_name, prefetch=2, message_format=fmt), inbox)  # type: ignore[arg-type]
            assert isinstance(consumer, Consumer)
            sink = Sink()
            pub = await d.publisher(PublisherSpec(7, unique_name, confirm=True, confirm_window=200,
                                                  message_format=fmt), sink)
            assert isinstance(pub, Publisher)
            await publish_stamped(pub, 7, range(n), batch=500)
            await inbox.wait_for(n)
            await asyncio.sleep(0.2)                  # anything extra (a duplicate) would show up now
            await pub.aclose()
            await consumer.aclose()
            assert sorted(sink.confirms) == [(s, True) for s in range(n)]
            assert inbox.stamps == [(7, s) for s in range(n)]     # each once, in publishing order
            assert all(len(b) == 40 for b in inbox.bodies)      # the stamp is at the start of the body
            assert inbox.redelivered == 0

    run(main())


def test_amqp_messages_carry_an_amqp10_data_section(amqp_url: str, stream_url: str, unique_name: str, run: LoopRunner) -> None:
    """An AMQP-format publisher writes AMQP 1.0; a binary consumer sees the encoded bytes."""
    async def main() -> None:
        async with driver_with_stream(amqp_url, stream_url, unique_name) as d:
            raw = Inbox()
            c = await d.consumer(ConsumerSpec(0, unique_name, message_format="binary"), raw)
            pub = await d.publisher(PublisherSpec(0, unique_name, confirm=True, message_format="amqp"), Sink())
            pub.publish(b"0123456789", 0)
            pub.publish(b"x" * 300, 1)
            assert await pub.drain(10) == 0
            await raw.wait_for(2)
            await pub.aclose()
            await c.aclose()
            assert raw.bodies[0] == b"\x00\x53\x75\xa0\x0a0123456789"
            assert raw.bodies[1] == b"\x00\x53\x75\xb0\x00\x00\x01\x2c" + b"x" * 300

    run(main())


def _publish_chunks(d: StreamDriver, name: str, chunks: int, per_chunk: int) -> Callable[[], Awaitable[None]]:
    async def go() -> None:
        pub = await d.publisher(PublisherSpec(1, name, confirm=True), Sink())
        seq = 0
        for _ in range(chunks):          # each batch confirmed before the next: one chunk each
            for _ in range(per_chunk):
                body = new_payload(STAMP_SIZE)
                write_stamp(body, 1, seq, 0, 0)
                pub.publish(body, seq)
                seq += 1
            assert await pub.drain(10) == 0
        await pub.aclose()
    return go


def test_offset_specifications(amqp_url: str, stream_url: str, unique_name: str, run: LoopRunner) -> None:
    """first = everything; offset:N = from exactly N; last = the last chunk; next = only newer."""
    async def main() -> None:
        async with driver_with_stream(amqp_url, stream_url, unique_name) as d:
            await _publish_chunks(d, unique_name, 10, 10)()        # offsets 0..99
            got: dict[str, Inbox] = {k: Inbox() for k in ("first", "offset:37", "last", "next", "offset:99")}
            consumers = [await d.consumer(ConsumerSpec(i, unique_name, offset=k), inbox)
                         for i, (k, inbox) in enumerate(got.items())]
            await got["first"].wait_for(100)
            await got["offset:37"].wait_for(63)
            await got["offset:99"].wait_for(1)
            await got["last"].wait_for(1)
            await asyncio.sleep(0.3)
            assert [s for _, s in got["first"].stamps] == list(range(100))
            assert [s for _, s in got["offset:37"].stamps] == list(range(37, 100))
            assert [s for _, s in got["offset:99"].stamps] == [99]
            last = [s for _, s in got["last"].stamps]
            assert last and last[-1] == 99 and last[0] > 0 and last == list(range(last[0], 100))
            assert got["next"].stamps == []
            # publish more: every live subscription gets it, "next" gets only that
            pub = await d.publisher(PublisherSpec(2, unique_name, confirm=True), Sink())
            await publish_stamped(pub, 2, range(5), size=STAMP_SIZE)
            await pub.aclose()
            await got["next"].wait_for(5)
            await got["first"].wait_for(105)
            assert got["next"].stamps == [(2, s) for s in range(5)]
            assert got["first"].stamps[100:] == [(2, s) for s in range(5)]
            for c in consumers:
                await c.aclose()

    run(main())


def test_timestamp_offset_starts_at_chunks_written_after_it(amqp_url: str, stream_url: str, unique_name: str, run: LoopRunner) -> None:
    async def main() -> None:
        async with driver_with_stream(amqp_url, stream_url, unique_name) as d:
            pub = await d.publisher(PublisherSpec(3, unique_name, confirm=True), Sink())
            await publish_stamped(pub, 3, range(0, 20), size=STAMP_SIZE, batch=10)
            await asyncio.sleep(1.1)                   # chunk timestamps are in ms; keep clear of them
            cut_ms = time.time_ns() // 1_000_000
            await asyncio.sleep(0.1)
            await publish_stamped(pub, 3, range(20, 40), size=STAMP_SIZE, batch=10)
            await pub.aclose()
            inbox = Inbox()
            c = await d.consumer(ConsumerSpec(0, unique_name, offset=f"timestamp:{cut_ms}"), inbox)
            await inbox.wait_for(20)
            await asyncio.sleep(0.3)
            await c.aclose()
            assert [s for _, s in inbox.stamps] == list(range(20, 40))

    run(main())


def test_single_active_consumer_takes_over_after_the_stored_offset(broker: Broker, unique_name: str,
                                                                   run: LoopRunner) -> None:
    """On 3.11+ the group has one active member, and a member taking over starts after the offset the group
    stored: nothing re-read after a clean close, only what was not stored yet after a crash. 3.10 ignores
    the property, so the driver refuses."""
    async def main() -> None:
        async with driver_with_stream(broker.amqp_url, broker.stream_url, unique_name) as d:
            a, b, c = Inbox(), Inbox(), Inbox()
            spec = dict(queue=unique_name, single_active=True, offset="first", extra={"name": "group-1"})
            if d.broker_version() < (3, 11):
                with pytest.raises(BrokerError, match="needs RabbitMQ 3.11"):
                    await d.consumer(ConsumerSpec(0, **spec), a)  # type: ignore[arg-type]
                return
            ca = await d.consumer(ConsumerSpec(0, **spec), a)  # type: ignore[arg-type]
            cb = await d.consumer(ConsumerSpec(1, **spec), b)  # type: ignore[arg-type]
            await _publish_chunks(d, unique_name, 5, 10)()
            await a.wait_for(50, timeout=5)
            await asyncio.sleep(0.3)
            assert len(a.stamps) == 50 and b.stamps == []      # the first subscriber is active
            assert ca.active and not cb.active                 # type: ignore[attr-defined]
            await ca.aclose()                                  # a stores its last offset; b takes over after it
            assert ca.stored is not None                       # type: ignore[attr-defined]
            pub = await d.publisher(PublisherSpec(2, unique_name, confirm=True), Sink())
            await publish_stamped(pub, 2, range(5), size=STAMP_SIZE, batch=5)
            await b.wait_for(5)
            await asyncio.sleep(0.3)
            assert cb.active                                   # type: ignore[attr-defined]
            assert b.stamps == [(2, s) for s in range(5)]      # not one of a's 50 again
            cc = await d.consumer(ConsumerSpec(2, **spec), c)  # type: ignore[arg-type]
            await publish_stamped(pub, 2, range(5, 10), size=STAMP_SIZE, batch=5)
            await b.wait_for(10)
            assert b.stamps == [(2, s) for s in range(10)] and c.stamps == []
            stored = cb.stored                                 # type: ignore[attr-defined]
            assert stored is not None                          # b stored on its first chunk, maybe later too
            cb._proto.transport.abort()                        # type: ignore[attr-defined]  # b crashes: no last store
            await publish_stamped(pub, 2, range(10, 12), size=STAMP_SIZE, batch=2)
            await pub.aclose()
            # what c must read: the stream from the offset after b's last store (stream offsets count the
            # broker's tracking entries too, so they are not message numbers)
            oracle = Inbox()
            co = await d.consumer(ConsumerSpec(3, unique_name, offset=f"offset:{stored + 1}"), oracle)
            await oracle.wait_for(2)
            await asyncio.sleep(0.5)
            await co.aclose()
            first = 12 - len(oracle.stamps)                    # b's unstored tail: at most all ten it read
            assert 0 <= first <= 10 and oracle.stamps == [(2, s) for s in range(first, 12)]
            await c.wait_for(len(oracle.stamps))
            await asyncio.sleep(0.3)
            assert cc.active                                   # type: ignore[attr-defined]
            # c re-reads exactly what b handled but had not stored, then the new two
            assert c.stamps == oracle.stamps
            await cc.aclose()
            await cb.aclose()

    run(main())


def test_declaring_a_stream_twice_with_other_arguments_is_a_clear_error(
        amqp_url: str, stream_url: str, unique_name: str, run: LoopRunner) -> None:
    async def main() -> None:
        async with driver_with_stream(amqp_url, stream_url, unique_name,
                                      **{"x-max-length-bytes": 20_000_000, "x-max-age": "1h",
                                         "x-stream-max-segment-size-bytes": 5_000_000}) as d:
            same = stream_decl(unique_name, **{"x-max-length-bytes": 20_000_000, "x-max-age": "1h",
                                               "x-stream-max-segment-size-bytes": 5_000_000})
            assert await d.create_stream(same) is False           # idempotent with equal arguments
            other = stream_decl(unique_name, **{"x-max-length-bytes": 10_000_000})
            with pytest.raises(BrokerError) as info:
                await d.declare(Topology(queues=(other,)))
            assert info.value.reply_code == 406
            assert "already exists with other arguments" in str(info.value)
            assert unique_name in str(info.value)

    run(main())


def test_connection_refused_is_a_connect_error_within_ten_seconds(amqp_url: str, run: LoopRunner) -> None:
    async def main() -> None:
        d = StreamDriver()
        t0 = time.monotonic()
        with pytest.raises(ConnectError) as info:
            await d.open(ClusterTarget("x", (), stream_uris=("rabbitmq-stream://guest:s3cret-pw@127.0.0.1:1/",)))
        assert time.monotonic() - t0 < 10
        assert "s3cret-pw" not in str(info.value) and "***" in str(info.value)

    run(main())


def test_wrong_password_is_a_connect_error_with_the_password_masked(stream_url: str, run: LoopRunner) -> None:
    from urllib.parse import urlsplit

    u = urlsplit(stream_url)
    bad = f"rabbitmq-stream://{u.username}:n0t-the-pw@{u.hostname}:{u.port}{u.path}"

    async def main() -> None:
        d = StreamDriver()
        t0 = time.monotonic()
        with pytest.raises(ConnectError) as info:
            await d.open(ClusterTarget("x", (), stream_uris=(bad,)))
        assert time.monotonic() - t0 < 10
        assert "n0t-the-pw" not in str(info.value)
        assert "authentication" in str(info.value)

    run(main())


def test_stream_uri_derived_from_amqp_uri_connects(broker: Broker, amqp_url: str, unique_name: str,
                                                   run: LoopRunner) -> None:
    """No stream_uris: the AMQP host at 5552, only beside the standard AMQP port (3.10 here); 4.0 on 5680 is one
    line naming the port, where a guess of 5552 would have reached 3.10's streams."""
    async def main() -> None:
        d = StreamDriver()
        if broker.amqp_port != 5672:
            with pytest.raises(ConfigError) as info:
                await d.open(ClusterTarget("x", (amqp_url,)))
            assert f"AMQP port {broker.amqp_port} is not the default" in str(info.value)
            assert "guest:guest" not in str(info.value)
            await d.aclose()
            return
        await d.open(ClusterTarget("x", (amqp_url,)))        # no stream_uris: amqp host, port 5552
        try:
            assert await d.create_stream(stream_decl(unique_name)) is True
        finally:
            await d.delete_streams([unique_name])
            await d.aclose()

    run(main())


def test_publishing_to_a_missing_stream_is_a_broker_error(amqp_url: str, stream_url: str, unique_name: str, run: LoopRunner) -> None:
    async def main() -> None:
        d = StreamDriver()
        await d.open(target(amqp_url, stream_url))
        try:
            with pytest.raises(BrokerError) as info:
                await d.publisher(PublisherSpec(0, unique_name + "-missing"), Sink())
            assert info.value.reply_code == 404
        finally:
            await d.aclose()

    run(main())


def test_a_stream_deleted_under_a_publisher_fails_it_and_is_not_a_lost_connection(
        amqp_url: str, stream_url: str, unique_name: str, run: LoopRunner) -> None:
    """RabbitMQ tells a deleted stream with the same STREAM_NOT_AVAILABLE as a stream whose member left: the
    publisher fails with a named error and on_lost is not called (a reconnect would declare the stream again
    and go on publishing into a new one)."""
    from rbench.errors import ConnectionLost

    async def main() -> None:
        lost: list[BaseException] = []
        driver = load_driver("stream")
        await driver.open(target(amqp_url, stream_url), lost.append)
        try:
            await driver.declare(Topology(queues=(stream_decl(unique_name),)))
            pub = await driver.publisher(PublisherSpec(0, unique_name, confirm=True), Sink())
            await publish_stamped(pub, 0, range(10))
            assert isinstance(driver, StreamDriver)
            await driver.delete_streams([unique_name])
            deadline = time.monotonic() + 10
            while getattr(pub, "error", None) is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            error = getattr(pub, "error", None)
            assert isinstance(error, BrokerError) and not isinstance(error, ConnectionLost), repr(error)
            assert "STREAM_NOT_AVAILABLE" in str(error)
            with pytest.raises(BrokerError):
                await asyncio.wait_for(pub.ready(), 5)
            await asyncio.sleep(0.2)
            assert lost == []
        finally:
            await driver.aclose()

    run(main(), timeout=30)
