"""The driver contract: one suite, run over every driver in rbench.drivers.base.DRIVERS.

The runtime knows a protocol only through Driver/Publisher/Consumer/PublishSink
(rbench/drivers/base.py); this suite pins down what those promise, against the real
broker, so a new driver is done when it passes here. What each driver supports is in
tests/drivers_matrix.py (also rendered into docs/drivers.md); an unsupported cell is a
skip carrying the matrix's reason, and a registered driver without a row fails.

Faults come from a TCP proxy in front of the broker (tests/proxy.py): a cut connection,
paused forwarding (a broker that stops answering), added latency. Every wait is bounded,
so a driver that hangs fails with a timeout rather than stalling the suite. Each test
runs on asyncio and on uvloop (the ``run`` fixture), and deletes what it declares.
"""
from __future__ import annotations

import asyncio
import re
import socket
import ssl
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from rbench.config.types import ConsumerSpec, PublisherSpec, QueueDecl, Topology
from rbench.drivers.amqp091 import Amqp091Driver
from rbench.drivers.base import DRIVERS, Consumer, Driver, Publisher, load_driver
from rbench.drivers.replies import NotFound
from rbench.errors import BrokerError, ConfigError, ConnectError, ConnectionLost
from rbench.runtime.stamp import new_payload, read_stamp, write_stamp
from tests.broker import on_both_brokers
from tests.brokers import Broker
from tests.drivers_matrix import MATRIX, DriverRow
from tests.loops import LoopRunner
from tests.proxy import MakeProxy, TcpProxy, host_port
from tests.runhelpers import delete_queues

pytestmark = pytest.mark.timeout(60)

PRODUCER = 7
SIZE = 64                      # body bytes: the 24-byte stamp, then zeros
SECRET = "n0t-the-Pa55word"
ACK_FRAME = 21                 # bytes of one basic.ack frame on the wire (7 header + 13 payload + 1 end)


# ---------------------------------------------------------------- fixtures

@pytest.fixture(params=sorted(DRIVERS))
def row(request: pytest.FixtureRequest) -> DriverRow:
    """The matrix row of each registered driver; a driver without one fails here."""
    name = request.param
    if name not in MATRIX:
        pytest.fail(f"driver {name!r} is registered in rbench.drivers.base.DRIVERS but has no row in "
                    "tests/drivers_matrix.py MATRIX: add one (and run `python -m tests.drivers_matrix --write`)")
    return MATRIX[name]


# the AMQP and stream URLs of this test's broker (override the session's 3.10 ones for this module)
amqp_url, stream_url = on_both_brokers.amqp_url, on_both_brokers.stream_url


@pytest.fixture
def endpoint(row: DriverRow, amqp_url: str, stream_url: str) -> str:
    """The broker URI the driver talks to (AMQP 5672 or streams 5552)."""
    return {"amqp": amqp_url, "stream": stream_url}[row.endpoint]


@pytest.fixture
def proxy(row: DriverRow, request: pytest.FixtureRequest) -> TcpProxy:
    """A TCP proxy in front of the driver's endpoint."""
    return request.getfixturevalue({"amqp": "amqp_proxy", "stream": "stream_proxy"}[row.endpoint])


@pytest.fixture
def unique_name(unique_name: str) -> str:
    """The session's unique name, with the test id's brackets made legal for every client
    (pamqp, under aiopika, refuses queue names outside [A-Za-z0-9-_.:])."""
    return re.sub(r"[^A-Za-z0-9_.:-]", "-", unique_name)


@pytest.fixture
def cleanup(amqp_url: str) -> Iterator[list[str]]:
    """Names appended here are deleted after the test over a fresh AMQP connection (streams too),
    whatever state the test left its own connections in."""
    names: list[str] = []
    yield names
    if names:
        delete_queues(amqp_url, names)


def need(row: DriverRow, feature: str, broker: Broker) -> None:
    why = row.reason(feature, broker.name)
    if why is not None:
        pytest.skip(f"{row.name} does not support {feature} on RabbitMQ {broker.version_prefix}: {why}")


# ---------------------------------------------------------------- helpers

def _target(amqp_url: str) -> Any:
    return MATRIX["amqp091"].target(amqp_url)


def with_netloc(uri: str, password: str | None = None, port: int | None = None) -> str:
    parts = urlsplit(uri)
    user = parts.username or "guest"
    pw = password if password is not None else (parts.password or "guest")
    netloc = f"{user}:{pw}@{parts.hostname}:{port if port is not None else parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def queue_decl(name: str, queue_type: str) -> QueueDecl:
    if queue_type == "stream":
        return QueueDecl(name, durable=True, arguments=(("x-queue-type", "stream"),))
    return QueueDecl(name, durable=False)


async def opened(row: DriverRow, uri: str) -> Driver:
    driver = load_driver(row.name)
    await asyncio.wait_for(driver.open(row.target(uri)), 10)
    return driver


@asynccontextmanager
async def driver_with_queue(row: DriverRow, uri: str, name: str, cleanup: list[str], amqp_url: str,
                            queue_type: str | None = None) -> AsyncIterator[Driver]:
    """An opened driver and a fresh queue (or stream) ``name``; the driver is closed afterwards
    (bounded), the queue deleted by the ``cleanup`` fixture."""
    decl = queue_decl(name, queue_type or row.queue_type)
    cleanup.append(name)
    if row.reason("declare") is not None:          # (the same on every broker) the driver cannot declare: the test's own connection does
        admin = Amqp091Driver()
        await admin.open(_target(amqp_url))
        try:
            await admin.declare(Topology(queues=(decl,)))
        finally:
            await admin.aclose()
    driver = await opened(row, uri)
    try:
        if row.reason("declare") is None:
            await asyncio.wait_for(driver.declare(Topology(queues=(decl,))), 10)
        yield driver
    finally:
        await asyncio.wait_for(driver.aclose(), 10)


async def ready_count(amqp_url: str, name: str) -> int:
    """Messages ready in a classic queue (not counting delivered-unacked), asked over a fresh connection."""
    admin = Amqp091Driver()
    await admin.open(_target(amqp_url))
    try:
        return (await admin.queue_declare(name, passive=True))[1]
    finally:
        await admin.aclose()


def pub_spec(name: str, **kw: Any) -> PublisherSpec:
    return PublisherSpec(PRODUCER, name, routing_key=name, **kw)


class Sink:
    """A PublishSink that keeps every outcome in arrival order."""

    def __init__(self) -> None:
        self.confirms: list[tuple[int, bool, int]] = []
        self.returns: list[bytes] = []

    def on_confirm(self, seq: int, acked: bool, t_ns: int) -> None:
        self.confirms.append((seq, acked, t_ns))

    def on_return(self, body: bytes | memoryview, t_ns: int) -> None:
        self.returns.append(bytes(body))

    @property
    def seqs(self) -> list[tuple[int, bool]]:
        return [(seq, acked) for seq, acked, _ in self.confirms]

    def all_acked(self, seqs: range) -> bool:
        """Exactly one positive confirm per seq (in whatever order they came)."""
        return sorted(self.seqs) == [(seq, True) for seq in seqs]


class Inbox:
    """An OnMessage that reads the stamp of every delivered body."""

    def __init__(self) -> None:
        self.stamps: list[tuple[int, int, int, int]] = []
        self.sizes: list[int] = []
        self.redelivered = 0

    def __call__(self, body: memoryview | bytes, redelivered: bool, t_ns: int) -> None:
        self.stamps.append(read_stamp(body))
        self.sizes.append(len(body))
        self.redelivered += redelivered

    async def wait_for(self, n: int, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while len(self.stamps) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return len(self.stamps) >= n


Stamp = tuple[int, int, int, int]


async def publish_stamped(pub: Publisher, seqs: range, body: bytearray | None = None) -> list[Stamp]:
    """Publish one stamped message per seq (t_intended ≠ t_sent, so both fields are checked); their stamps."""
    body = body if body is not None else new_payload(SIZE)
    stamps = []
    for seq in seqs:
        await asyncio.wait_for(pub.ready(), 10)
        now = time.time_ns()
        write_stamp(body, PRODUCER, seq, now - 1000 - seq, now)
        pub.publish(body, seq)
        stamps.append(read_stamp(body))
    return stamps


async def wait_until(cond: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return bool(cond())


# ---------------------------------------------------------------- connecting

def test_open_and_aclose(row: DriverRow, endpoint: str, proxy: TcpProxy, unique_name: str, run: LoopRunner) -> None:
    """aclose really closes the driver's connections, and a closed driver refuses work with a BrokerError."""
    async def main() -> None:
        d = await opened(row, proxy.uri(endpoint))
        assert isinstance(d, Driver)
        assert proxy.connections >= 1
        await asyncio.wait_for(d.aclose(), 10)
        assert await wait_until(lambda: proxy.connections == 0, 5), f"{proxy.connections} connection(s) left open"
        with pytest.raises(BrokerError):
            await asyncio.wait_for(d.declare(Topology(queues=(queue_decl(unique_name, row.queue_type),))), 5)
        await asyncio.wait_for(d.aclose(), 5)                 # a second aclose is harmless

    run(main(), timeout=30)


def test_wrong_password_is_a_fast_masked_connect_error(row: DriverRow, endpoint: str, run: LoopRunner) -> None:
    async def main() -> None:
        d = load_driver(row.name)
        t0 = time.monotonic()
        with pytest.raises(ConnectError) as info:
            await asyncio.wait_for(d.open(row.target(with_netloc(endpoint, password=SECRET))), 15)
        assert time.monotonic() - t0 < 10
        msg = str(info.value)
        assert SECRET not in msg and "***" in msg and "authentication" in msg.lower(), msg
        await asyncio.wait_for(d.aclose(), 5)                 # closing a driver that never opened is harmless

    run(main(), timeout=30)


def test_closed_port_is_a_fast_masked_connect_error(row: DriverRow, endpoint: str, run: LoopRunner) -> None:
    async def main() -> None:
        d = load_driver(row.name)
        t0 = time.monotonic()
        with pytest.raises(ConnectError) as info:
            await asyncio.wait_for(d.open(row.target(with_netloc(endpoint, password=SECRET, port=closed_port()))), 15)
        assert time.monotonic() - t0 < 10
        msg = str(info.value)
        assert SECRET not in msg and "***" in msg and "refused" in msg.lower(), msg

    run(main(), timeout=30)


# ---------------------------------------------------------------- publish, confirm, consume

def test_published_messages_are_consumed_once_in_order_with_their_stamps(
        row: DriverRow, endpoint: str, amqp_url: str, unique_name: str, cleanup: list[str], run: LoopRunner) -> None:
    """Required of every driver; with confirms (when supported) exactly one ack per message."""
    confirms = row.reason("confirms") is None
    n = 500

    async def main() -> None:
        async with driver_with_queue(row, endpoint, unique_name, cleanup, amqp_url) as d:
            sink = Sink()
            pub = await d.publisher(pub_spec(unique_name, confirm=confirms, confirm_window=64), sink)
            assert isinstance(pub, Publisher)
            sent = await publish_stamped(pub, range(n))
            assert await pub.drain(10) == 0
            if confirms:
                assert sink.all_acked(range(n))                          # exactly n acks
            assert not sink.returns
            inbox = Inbox()
            consumer = await d.consumer(ConsumerSpec(0, unique_name, prefetch=100), inbox)
            assert isinstance(consumer, Consumer)
            assert consumer.pausable is (row.reason("pause") is None)
            assert await inbox.wait_for(n), f"{len(inbox.stamps)} of {n} delivered"
            await asyncio.sleep(0.2)                                      # a duplicate would arrive now
            assert inbox.stamps == sent                                   # once each, in order, stamp intact
            assert inbox.sizes == [SIZE] * n and inbox.redelivered == 0
            await asyncio.wait_for(consumer.aclose(), 10)
            await asyncio.wait_for(pub.aclose(), 10)

    run(main(), timeout=45)


def test_confirms_reach_the_sink_in_seq_order(row: DriverRow, broker: Broker, endpoint: str, amqp_url: str, unique_name: str,
                                              cleanup: list[str], run: LoopRunner) -> None:
    need(row, "ordered_confirms", broker)
    n = 500

    async def main() -> None:
        async with driver_with_queue(row, endpoint, unique_name, cleanup, amqp_url) as d:
            sink = Sink()
            pub = await d.publisher(pub_spec(unique_name, confirm=True, confirm_window=64), sink)
            await publish_stamped(pub, range(n))
            assert await pub.drain(10) == 0
            assert sink.seqs == [(seq, True) for seq in range(n)]
            await asyncio.wait_for(pub.aclose(), 10)

    run(main(), timeout=30)


def test_drain_counts_what_is_unconfirmed(row: DriverRow, broker: Broker, endpoint: str, proxy: TcpProxy, amqp_url: str,
                                          unique_name: str, cleanup: list[str], run: LoopRunner) -> None:
    """With forwarding paused nothing is confirmed: drain times out with every message outstanding."""
    need(row, "confirms", broker)

    async def main() -> None:
        async with driver_with_queue(row, proxy.uri(endpoint), unique_name, cleanup, amqp_url) as d:
            sink = Sink()
            pub = await d.publisher(pub_spec(unique_name, confirm=True), sink)
            proxy.pause()
            try:
                await publish_stamped(pub, range(10))
                assert await pub.drain(0.3) == 10
            finally:
                proxy.resume()
            assert await pub.drain(10) == 0
            assert sink.all_acked(range(10))
            await asyncio.wait_for(pub.aclose(), 10)

    run(main(), timeout=30)


def test_ready_blocks_at_the_confirm_window(row: DriverRow, broker: Broker, endpoint: str, proxy: TcpProxy, amqp_url: str,
                                            unique_name: str, cleanup: list[str], run: LoopRunner) -> None:
    need(row, "confirm_window", broker)
    window = 8

    async def main() -> None:
        async with driver_with_queue(row, proxy.uri(endpoint), unique_name, cleanup, amqp_url) as d:
            sink = Sink()
            pub = await d.publisher(pub_spec(unique_name, confirm=True, confirm_window=window), sink)
            proxy.pause()
            try:
                await publish_stamped(pub, range(window))            # the window fills without blocking
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(pub.ready(), 0.3)           # ... and then ready() holds
                assert sink.confirms == []
            finally:
                proxy.resume()
            await asyncio.wait_for(pub.ready(), 5)                     # confirms came: room again
            await publish_stamped(pub, range(window, window + 1))
            assert await pub.drain(10) == 0
            assert sink.all_acked(range(window + 1))
            await asyncio.wait_for(pub.aclose(), 10)

    run(main(), timeout=30)


def test_mandatory_unroutable_messages_come_back_through_on_return(
        row: DriverRow, broker: Broker, endpoint: str, unique_name: str, run: LoopRunner) -> None:
    need(row, "returns", broker)

    async def main() -> None:
        d = await opened(row, endpoint)
        try:
            sink = Sink()
            # amq.direct with a key nothing is bound to: every message is unroutable
            pub = await d.publisher(PublisherSpec(PRODUCER, unique_name, exchange="amq.direct",
                                                  routing_key=f"{unique_name}-nobody", confirm=True,
                                                  mandatory=True), sink)
            sent = await publish_stamped(pub, range(5))
            assert await pub.drain(10) == 0
            assert sorted(read_stamp(b) for b in sink.returns) == sent   # every body back, stamp intact
            assert sink.all_acked(range(5))    # and still acked
            await asyncio.wait_for(pub.aclose(), 10)
        finally:
            await asyncio.wait_for(d.aclose(), 10)

    run(main(), timeout=30)


# ---------------------------------------------------------------- consumers

def test_prefetch_bounds_unacked_deliveries(row: DriverRow, broker: Broker, endpoint: str, amqp_url: str, unique_name: str,
                                           cleanup: list[str], run: LoopRunner) -> None:
    """A consumer busy for 1 s per message holds exactly `prefetch` deliveries (the broker's count)."""
    need(row, "prefetch", broker)
    n, prefetch = 40, 5

    async def main() -> None:
        async with driver_with_queue(row, endpoint, unique_name, cleanup, amqp_url) as d:
            pub = await d.publisher(pub_spec(unique_name, confirm=True), Sink())
            await publish_stamped(pub, range(n))
            assert await pub.drain(10) == 0
            inbox = Inbox()
            consumer = await d.consumer(ConsumerSpec(0, unique_name, prefetch=prefetch,
                                                     processing_delay_us=1_000_000), inbox)
            taken: list[int] = []
            for _ in range(4):                                   # sampled over ~0.4 s, well inside the first 1 s
                await asyncio.sleep(0.1)
                taken.append(n - await ready_count(amqp_url, unique_name))
            assert taken[-1] == prefetch and max(taken) == prefetch, taken
            assert 1 <= len(inbox.stamps) <= prefetch
            await asyncio.wait_for(consumer.aclose(), 10)
            await asyncio.wait_for(pub.aclose(), 10)

    run(main(), timeout=30)


def test_pause_stops_deliveries_and_resume_starts_them_again(
        row: DriverRow, broker: Broker, endpoint: str, amqp_url: str, unique_name: str, cleanup: list[str], run: LoopRunner) -> None:
    """consumer.pause's promise: after pause() nothing more is delivered and the queue keeps the rest; after
    resume() the same consumer gets the rest, each once; pausing or resuming twice changes nothing."""
    need(row, "pause", broker)

    async def main() -> None:
        async with driver_with_queue(row, endpoint, unique_name, cleanup, amqp_url) as d:
            pub = await d.publisher(pub_spec(unique_name, confirm=True), Sink())
            inbox = Inbox()
            consumer = await d.consumer(ConsumerSpec(0, unique_name, prefetch=50), inbox)
            await publish_stamped(pub, range(10))
            assert await inbox.wait_for(10), f"{len(inbox.stamps)} of 10 delivered"
            await asyncio.wait_for(consumer.pause(), 10)
            await asyncio.wait_for(consumer.pause(), 10)
            await publish_stamped(pub, range(10, 20))
            assert await pub.drain(10) == 0
            await asyncio.sleep(0.3)
            assert [s[1] for s in inbox.stamps] == list(range(10))          # nothing while paused
            if row.queue_type == "classic":
                assert await ready_count(amqp_url, unique_name) == 10       # the rest waits in the queue
            await asyncio.wait_for(consumer.resume(), 10)
            await asyncio.wait_for(consumer.resume(), 10)
            assert await inbox.wait_for(20), f"{len(inbox.stamps)} of 20 delivered after resume()"
            await asyncio.sleep(0.2)
            assert [s[1] for s in inbox.stamps] == list(range(20)) and inbox.redelivered == 0
            await asyncio.wait_for(consumer.aclose(), 10)
            await asyncio.wait_for(pub.aclose(), 10)

    run(main(), timeout=30)


def test_a_consumer_that_cannot_pause_says_so(row: DriverRow, broker: Broker, endpoint: str, amqp_url: str,
                                             unique_name: str, cleanup: list[str], run: LoopRunner) -> None:
    """Without the `pause` feature, `pausable` is False and pause()/resume() refuse with a ConfigError
    naming the driver, rather than leave the consumer delivering while the run believes it paused."""
    if row.reason("pause", broker.name) is None:
        pytest.skip(f"{row.name} can pause its consumers (test_pause_stops_deliveries_and_resume_starts_them_again)")

    async def main() -> None:
        async with driver_with_queue(row, endpoint, unique_name, cleanup, amqp_url) as d:
            consumer = await d.consumer(ConsumerSpec(0, unique_name, prefetch=10), Inbox())
            assert consumer.pausable is False
            for call in (consumer.pause, consumer.resume):
                with pytest.raises(ConfigError, match=f"the {row.name} driver cannot pause"):
                    await asyncio.wait_for(call(), 5)
            await asyncio.wait_for(consumer.aclose(), 10)

    run(main(), timeout=30)


def test_multi_ack_acks_n_deliveries_at_a_time(row: DriverRow, broker: Broker, endpoint: str, proxy: TcpProxy, amqp_url: str,
                                               unique_name: str, cleanup: list[str], run: LoopRunner) -> None:
    """With prefetch = N = multi_ack_every, all messages flow only if each ack frees N deliveries;
    the proxy's byte count shows a handful of ack frames, not one per message."""
    need(row, "multi_ack", broker)
    n, every = 35, 10

    async def main() -> None:
        async with driver_with_queue(row, proxy.uri(endpoint), unique_name, cleanup, amqp_url) as d:
            pub = await d.publisher(pub_spec(unique_name, confirm=True), Sink())
            await publish_stamped(pub, range(n))
            assert await pub.drain(10) == 0
            inbox = Inbox()
            consumer = await d.consumer(ConsumerSpec(0, unique_name, prefetch=every, multi_ack_every=every), inbox)
            up_before = proxy.forwarded["up"]
            assert await inbox.wait_for(n, 5), f"{len(inbox.stamps)} of {n} delivered"
            await asyncio.sleep(0.2)
            acked_bytes = proxy.forwarded["up"] - up_before
            assert acked_bytes <= n * ACK_FRAME // 3, f"{acked_bytes} bytes of acks for {n} messages"
            await asyncio.wait_for(consumer.aclose(), 10)
            await asyncio.wait_for(pub.aclose(), 10)
            assert await ready_count(amqp_url, unique_name) == 0        # the remainder was acked too

    run(main(), timeout=30)


def test_consumer_aclose_stops_deliveries(row: DriverRow, endpoint: str, amqp_url: str, unique_name: str,
                                          cleanup: list[str], run: LoopRunner) -> None:
    async def main() -> None:
        async with driver_with_queue(row, endpoint, unique_name, cleanup, amqp_url) as d:
            pub = await d.publisher(pub_spec(unique_name, confirm=True), Sink())
            inbox = Inbox()
            consumer = await d.consumer(ConsumerSpec(0, unique_name, prefetch=50), inbox)
            await publish_stamped(pub, range(10))
            assert await inbox.wait_for(10), f"{len(inbox.stamps)} of 10 delivered"
            await asyncio.wait_for(consumer.aclose(), 10)
            await publish_stamped(pub, range(10, 20))
            assert await pub.drain(10) == 0
            await asyncio.sleep(0.3)
            assert [s[1] for s in inbox.stamps] == list(range(10))          # nothing after aclose
            if row.queue_type == "classic":
                assert await ready_count(amqp_url, unique_name) == 10       # the rest waits in the queue
                assert await asyncio.wait_for(d.messages_ready(unique_name), 10) == 10
            else:
                with pytest.raises(ConfigError, match="never empty"):
                    await asyncio.wait_for(d.messages_ready(unique_name), 10)
            await asyncio.wait_for(pub.aclose(), 10)

    run(main(), timeout=30)


# ---------------------------------------------------------------- faults

def test_a_cut_connection_fails_publishing_and_loses_nothing_silently(
        row: DriverRow, endpoint: str, proxy: TcpProxy, amqp_url: str, unique_name: str, cleanup: list[str],
        run: LoopRunner) -> None:
    """Cut mid-publish: ready()/publish() raise a BrokerError within 10 s, drain and aclose return,
    and every published message is confirmed, refused or still counted outstanding."""
    async def main() -> None:
        async with driver_with_queue(row, proxy.uri(endpoint), unique_name, cleanup, amqp_url) as d:
            sink = Sink()
            pub = await d.publisher(pub_spec(unique_name, confirm=True, confirm_window=20), sink)
            body = new_payload(SIZE)
            published = 0
            cut_at: float | None = None

            async def publish_until_it_fails() -> BaseException:
                nonlocal published, cut_at
                while True:
                    try:
                        await pub.ready()
                        write_stamp(body, PRODUCER, published, 0, time.time_ns())
                        pub.publish(body, published)
                    except Exception as exc:
                        return exc
                    published += 1
                    if cut_at is None and len(sink.confirms) >= 100:
                        assert proxy.cut() >= 1
                        cut_at = time.monotonic()
                    if published % 10 == 0:
                        await asyncio.sleep(0)       # let confirms in even when the window never fills

            try:
                error = await asyncio.wait_for(publish_until_it_fails(), 15)
            except asyncio.TimeoutError:
                pytest.fail(f"still publishing 15 s after start (cut: {cut_at is not None}, "
                            f"published {published}, outcomes {len(sink.confirms)})")
            assert cut_at is not None and time.monotonic() - cut_at < 10
            assert isinstance(error, BrokerError), f"{type(error).__name__}: {error}"
            try:
                outstanding = await asyncio.wait_for(pub.drain(1), 5)
            except BrokerError:
                outstanding = None
            if outstanding is not None:                       # no silent loss
                assert len(sink.confirms) + outstanding == published, (len(sink.confirms), outstanding, published)
            assert len({seq for seq, _ in sink.seqs}) == len(sink.confirms)   # no seq reported twice
            with pytest.raises(BrokerError):                  # publishing after the cut fails, and fast
                await asyncio.wait_for(pub.ready(), 5)
                pub.publish(body, published)
            await asyncio.wait_for(pub.aclose(), 5)

    run(main(), timeout=45)


def test_added_latency_shows_in_confirm_latency(row: DriverRow, broker: Broker, endpoint: str, proxy: TcpProxy, amqp_url: str,
                                               unique_name: str, cleanup: list[str], run: LoopRunner) -> None:
    """20 ms added to every chunk each way: no confirm comes back sooner than 2 × 20 ms after its publish."""
    need(row, "confirms", broker)
    added = 0.020

    async def main() -> None:
        async with driver_with_queue(row, proxy.uri(endpoint), unique_name, cleanup, amqp_url) as d:
            sink = Sink()
            pub = await d.publisher(pub_spec(unique_name, confirm=True), sink)
            proxy.latency = added
            body = new_payload(SIZE)
            latencies = []
            for seq in range(6):
                await asyncio.wait_for(pub.ready(), 5)
                t_sent = time.time_ns()
                write_stamp(body, PRODUCER, seq, t_sent, t_sent)
                pub.publish(body, seq)
                assert await pub.drain(5) == 0
                latencies.append((sink.confirms[-1][2] - t_sent) / 1e9)
            proxy.latency = 0
            assert sink.all_acked(range(6))
            assert min(latencies) >= 2 * added * 0.95, latencies
            await asyncio.wait_for(pub.aclose(), 10)

    run(main(), timeout=30)


# ---------------------------------------------------------------- topology

def test_what_the_driver_declared_it_can_delete(row: DriverRow, broker: Broker, endpoint: str, amqp_url: str, unique_name: str,
                                                cleanup: list[str], run: LoopRunner) -> None:
    need(row, "declare", broker)

    async def main() -> None:
        cleanup.append(unique_name)                       # in case an assertion stops us before the delete
        d = await opened(row, endpoint)
        try:
            await asyncio.wait_for(d.declare(Topology(queues=(queue_decl(unique_name, row.queue_type),))), 10)
            assert await ready_count(amqp_url, unique_name) == 0         # it exists
            await asyncio.wait_for(getattr(d, row.delete)([unique_name]), 10)
        finally:
            await asyncio.wait_for(d.aclose(), 10)
        with pytest.raises(NotFound):
            await ready_count(amqp_url, unique_name)

    run(main(), timeout=30)


def test_a_stream_queue_is_published_to_and_consumed_from_first(
        row: DriverRow, broker: Broker, endpoint: str, amqp_url: str, unique_name: str, cleanup: list[str], run: LoopRunner) -> None:
    need(row, "streams", broker)
    n = 200

    async def main() -> None:
        async with driver_with_queue(row, endpoint, unique_name, cleanup, amqp_url, queue_type="stream") as d:
            sink = Sink()
            pub = await d.publisher(pub_spec(unique_name, confirm=True, confirm_window=50), sink)
            sent = await publish_stamped(pub, range(n))
            assert await pub.drain(10) == 0
            assert sink.all_acked(range(n))
            inbox = Inbox()
            # AMQP 0.9.1 reads a stream from x-stream-offset (prefetch required); the stream driver from `offset`
            consumer = await d.consumer(ConsumerSpec(0, unique_name, prefetch=100, offset="first",
                                                     extra={"arguments": {"x-stream-offset": "first"}}), inbox)
            assert await inbox.wait_for(n), f"{len(inbox.stamps)} of {n} delivered"
            await asyncio.sleep(0.1)
            assert inbox.stamps == sent
            await asyncio.wait_for(consumer.aclose(), 10)
            await asyncio.wait_for(pub.aclose(), 10)

    run(main(), timeout=30)


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(CA, server certificate, server key) for 127.0.0.1, made once per session."""
    from tests.broker.test_amqp091_tls import make_certs

    return make_certs(tmp_path_factory.mktemp("tls"))


def test_tls_round_trip(row: DriverRow, broker: Broker, endpoint: str, tcp_proxy: MakeProxy, tls_files: tuple[Path, Path, Path],
                        amqp_url: str, unique_name: str, cleanup: list[str], run: LoopRunner) -> None:
    need(row, "tls", broker)
    ca, cert, key = tls_files
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(cert), str(key))
    terminator = tcp_proxy(host_port(endpoint, 5672), ssl=server)
    parts = urlsplit(terminator.uri(endpoint))
    uri = urlunsplit(("amqps", parts.netloc, parts.path or "/", row.tls_query.format(ca=ca), ""))

    async def main() -> None:
        async with driver_with_queue(row, uri, unique_name, cleanup, amqp_url) as d:
            sink = Sink()
            pub = await d.publisher(pub_spec(unique_name, confirm=True, confirm_window=10), sink)
            sent = await publish_stamped(pub, range(20))
            assert await pub.drain(10) == 0 and sink.all_acked(range(20))
            inbox = Inbox()
            consumer = await d.consumer(ConsumerSpec(0, unique_name, prefetch=50), inbox)
            assert await inbox.wait_for(20)
            assert inbox.stamps == sent
            await asyncio.wait_for(consumer.aclose(), 10)
            await asyncio.wait_for(pub.aclose(), 10)
        assert terminator.accepted >= 1                   # it did go through the TLS terminator

    run(main(), timeout=30)


def test_a_lost_connection_is_one_named_error_for_the_runtime_to_ride_through(
        row: DriverRow, broker: Broker, endpoint: str, proxy: TcpProxy, unique_name: str, cleanup: list[str], run: LoopRunner) -> None:
    """Cut with deliveries taken: on_lost once, ConnectionLost from ready()/publish(), and what a fresh driver
    (what the runtime opens) delivers: every delivery held unacked comes back flagged redelivered; on a
    stream, which has no acks, the consumer's resume_spec starts exactly after what it had handled."""
    need(row, "reconnect", broker)
    n = 30
    stream = row.queue_type == "stream"

    async def main() -> None:
        uri = proxy.uri(endpoint)
        cleanup.append(unique_name)
        losses: list[BaseException] = []
        d = load_driver(row.name)
        await asyncio.wait_for(d.open(row.target(uri), losses.append), 10)
        try:
            assert d.reconnect is True and d.uri == uri
            await asyncio.wait_for(d.declare(Topology(queues=(queue_decl(unique_name, row.queue_type),))), 10)
            pub = await d.publisher(pub_spec(unique_name, confirm=True, confirm_window=100), Sink())
            await publish_stamped(pub, range(n))
            assert await pub.drain(10) == 0
            held = Inbox()       # busy 60 s with its first message: nothing is acked before the cut
            spec = ConsumerSpec(0, unique_name, prefetch=n, processing_delay_us=0 if stream else 60_000_000,
                                offset="first")
            first = await d.consumer(spec, held)
            assert await held.wait_for(1) and held.redelivered == 0
            await asyncio.sleep(0.3)                          # the broker has sent its prefetch
            assert proxy.cut() >= 1
            assert await wait_until(lambda: losses, 10), "on_lost was not called within 10 s"
            await asyncio.sleep(0.2)
            (error,) = losses                                 # once
            assert isinstance(error, ConnectionLost), f"{type(error).__name__}: {error}"
            with pytest.raises(ConnectionLost):
                await asyncio.wait_for(pub.ready(), 5)
                pub.publish(new_payload(SIZE), n)
            if not stream:                                    # the broker redelivers: subscribe as before
                assert first.resume_spec(spec) == spec
            again_spec = first.resume_spec(spec) if stream else ConsumerSpec(0, unique_name, prefetch=100)
        finally:
            await asyncio.wait_for(d.aclose(), 10)
        again: list[BaseException] = []
        d2 = load_driver(row.name)
        await asyncio.wait_for(d2.open(row.target(uri), again.append), 10)
        try:
            inbox = Inbox()
            if stream:
                # n more after the cut: the resumed consumer gets exactly those and whatever of the first n it had
                # not handled, never the stream from its start again (what the spec's offset=first would do)
                assert again_spec.offset == f"offset:{len(held.stamps)}"
                pub2 = await d2.publisher(pub_spec(unique_name, confirm=True, confirm_window=100), Sink())
                await publish_stamped(pub2, range(n, 2 * n))
                assert await pub2.drain(10) == 0
                await d2.consumer(again_spec, inbox)
                want = 2 * n - len(held.stamps)
                assert await inbox.wait_for(want), f"{len(inbox.stamps)} of {want} delivered after the reconnect"
                await asyncio.sleep(0.3)
                assert sorted(stamp[1] for stamp in held.stamps + inbox.stamps) == list(range(2 * n))
                assert inbox.redelivered == 0
            else:
                await d2.consumer(again_spec, inbox)
                assert await inbox.wait_for(n), f"{len(inbox.stamps)} of {n} delivered after the reconnect"
                assert sorted(inbox.stamps) == sorted(set(inbox.stamps)) and len(inbox.stamps) == n
                assert inbox.redelivered >= len(held.stamps) >= 1, (inbox.redelivered, len(held.stamps))
        finally:
            await asyncio.wait_for(d2.aclose(), 10)
        assert again == []                                    # aclose() is not a loss

    run(main(), timeout=50)
