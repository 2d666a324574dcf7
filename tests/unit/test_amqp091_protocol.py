"""The amqp091 wire state machine against a scripted broker (no network): handshake,
tune, confirms expanded per seq, returns, blocked, channel/connection close codes."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rbench.codec import amqp091 as c
from rbench.codec.amqp091 import K
from rbench.config.types import PublisherSpec
from rbench.drivers.amqp091_connect import AmqpUri
from rbench.drivers.amqp091_protocol import Connection
from rbench.drivers.amqp091_publisher import Amqp091Publisher
from rbench.drivers.amqp10_protocol import Connection as Amqp10Connection
from rbench.drivers.amqp10_uri import Amqp10Uri
from rbench.drivers.connect import AMQP_FRAME_MAX
from rbench.drivers.replies import AccessRefused, NotFound, PreconditionFailed
from rbench.errors import BrokerError, ConfigError
from tests.loops import LoopRunner


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.data = bytearray()
        self.closed = False

    def write(self, data: Any) -> None:
        self.data += data

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def sent(self) -> list[tuple[int, int, Any]]:
        """Frames written so far as (channel, key or frame type, args), then forget them."""
        data = bytes(self.data)
        self.data.clear()
        if data.startswith(c.PROTOCOL_HEADER):
            data = data[8:]
        out = []
        for ftype, ch, payload in c.split_frames(data):
            if ftype == 1:
                out.append((ch, *c.decode_method(payload)))
            else:
                out.append((ch, ftype, payload))
        return out


class Sink:
    def __init__(self) -> None:
        self.confirms: list[tuple[int, bool]] = []
        self.returns: list[bytes] = []

    def on_confirm(self, seq: int, acked: bool, t_ns: int) -> None:
        self.confirms.append((seq, acked))

    def on_return(self, body: Any, t_ns: int) -> None:
        self.returns.append(bytes(body))


def broker_says(conn: Connection, *frames: bytes) -> None:
    conn.reader.feed_bytes(b"".join(frames))


def start_args(mechs: str = "AMQPLAIN PLAIN") -> tuple[Any, ...]:
    return (0, 9, {"product": "RabbitMQ", "capabilities": {"publisher_confirms": True}}, mechs, "en_US")


async def handshake(loop: asyncio.AbstractEventLoop, password: str = "pw") -> tuple[Connection, FakeTransport]:
    conn = Connection(loop, "user", password, "/vh", heartbeat=30, frame_max=AMQP_FRAME_MAX)
    t = FakeTransport()
    conn.connection_made(t)
    assert bytes(t.data).startswith(c.PROTOCOL_HEADER)
    broker_says(conn, c.encode_method(0, K.CONNECTION_START, start_args()))
    (ch, key, args), = t.sent()
    assert key == K.CONNECTION_START_OK and args[1] == "PLAIN" and args[2] in ("\x00user\x00" + password,
                                                                               b"\x00user\x00" + password.encode())
    assert args[0]["capabilities"]["connection.blocked"] is True
    broker_says(conn, c.encode_method(0, K.CONNECTION_TUNE, (2047, 65536, 60)))
    tune_ok, open_ = t.sent()
    assert tune_ok[1:] == (K.CONNECTION_TUNE_OK, (2047, 65536, 30))   # lower of both sides
    assert open_[1:] == (K.CONNECTION_OPEN, ("/vh", "", False))
    broker_says(conn, c.encode_method(0, K.CONNECTION_OPEN_OK, ("",)))
    await conn.opened
    assert conn.frame_max == 65536 and conn.reader.frame_max == 65536
    return conn, t


async def open_channel(conn: Connection, t: FakeTransport) -> Any:
    task = asyncio.ensure_future(conn.channel())
    await asyncio.sleep(0)
    (ch, key, _), = t.sent()
    assert key == K.CHANNEL_OPEN
    broker_says(conn, c.encode_method(ch, K.CHANNEL_OPEN_OK, ("",)))
    return await task


def test_confirms_are_expanded_per_seq_and_window_holds(run: LoopRunner) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        conn, t = await handshake(loop)
        ch = await open_channel(conn, t)
        sink = Sink()
        pub = Amqp091Publisher(conn, ch, PublisherSpec(0, "q", routing_key="q", confirm=True, confirm_window=4,
                                                       mandatory=True, persistent=True), sink)
        for seq in (100, 101, 102, 103):
            await asyncio.wait_for(pub.ready(), 1)
            pub.publish(b"m%d" % seq, seq)
        waiting = asyncio.ensure_future(pub.ready())
        await asyncio.sleep(0.01)
        assert not waiting.done()                      # window of 4 is full
        conn.flush()
        frames = t.sent()
        assert [f[1] for f in frames] == [K.BASIC_PUBLISH, 2, 3] * 4
        assert frames[0][2] == (0, "", "q", True, False)
        # multiple ack for tags 1..2, then a single nack out of order (4), then the rest
        broker_says(conn, c.encode_method(ch.number, K.BASIC_ACK, (2, True)))
        await asyncio.sleep(0)
        assert waiting.done()
        broker_says(conn, c.encode_method(ch.number, K.BASIC_NACK, (4, False, False)))
        broker_says(conn, c.encode_method(ch.number, K.BASIC_RETURN, (312, "NO_ROUTE", "", "q")),
                    c.encode_header(ch.number, 4), c.encode_body(ch.number, b"m102"))
        broker_says(conn, c.encode_method(ch.number, K.BASIC_ACK, (3, False)))
        assert sink.confirms == [(100, True), (101, True), (103, False), (102, True)]
        assert sink.returns == [b"m102"] and pub.outstanding == 0
        assert await pub.drain(0.1) == 0

    run(main(), timeout=10)


def test_blocked_connection_holds_ready_until_unblocked(run: LoopRunner) -> None:
    async def main() -> None:
        conn, t = await handshake(asyncio.get_running_loop())
        ch = await open_channel(conn, t)
        pub = Amqp091Publisher(conn, ch, PublisherSpec(0, "q"), Sink())
        broker_says(conn, c.encode_method(0, K.CONNECTION_BLOCKED, ("low on memory",)))
        waiting = asyncio.ensure_future(pub.ready())
        await asyncio.sleep(0.02)
        assert not waiting.done()
        broker_says(conn, c.encode_method(0, K.CONNECTION_UNBLOCKED))
        await asyncio.wait_for(waiting, 1)

    run(main(), timeout=10)


def test_channel_close_maps_reply_codes_and_replies_close_ok(run: LoopRunner) -> None:
    async def main() -> None:
        conn, t = await handshake(asyncio.get_running_loop())
        ch = await open_channel(conn, t)
        rpc = asyncio.ensure_future(ch.rpc(K.QUEUE_DECLARE, (0, "nope", True, False, False, False, False, {}),
                                           (K.QUEUE_DECLARE_OK,), "declare queue 'nope'"))
        await asyncio.sleep(0)
        t.sent()
        broker_says(conn, c.encode_method(ch.number, K.CHANNEL_CLOSE, (404, "NOT_FOUND - no queue 'nope'", 50, 10)))
        with pytest.raises(NotFound) as err:
            await rpc
        assert err.value.reply_code == 404 and "declare queue 'nope'" in str(err.value)
        conn.flush()
        assert t.sent() == [(ch.number, K.CHANNEL_CLOSE_OK, ())]
        assert ch.number not in conn.channels
        with pytest.raises(NotFound):
            await ch.rpc(K.BASIC_QOS, (0, 1, False), (K.BASIC_QOS_OK,))
        ch2 = await open_channel(conn, t)
        pub = Amqp091Publisher(conn, ch2, PublisherSpec(0, "q", confirm=True, confirm_window=10), Sink())
        pub.publish(b"x", 1)
        broker_says(conn, c.encode_method(ch2.number, K.CHANNEL_CLOSE, (406, "PRECONDITION_FAILED - x", 60, 40)))
        with pytest.raises(PreconditionFailed):
            await pub.ready()
        assert await pub.drain(0.1) == 1

    run(main(), timeout=10)


def test_wrong_password_is_access_refused_and_password_not_in_message(run: LoopRunner) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        conn = Connection(loop, "user", "hunter2", "/")
        t = FakeTransport()
        conn.connection_made(t)
        broker_says(conn, c.encode_method(0, K.CONNECTION_START, start_args()))
        broker_says(conn, c.encode_method(0, K.CONNECTION_CLOSE, (403, "ACCESS_REFUSED - Login was refused", 0, 0)))
        with pytest.raises(AccessRefused) as err:
            await conn.opened
        assert "hunter2" not in str(err.value) and err.value.reply_code == 403
        assert t.closed

    run(main(), timeout=10)


def test_no_plain_mechanism_and_lost_handshake(run: LoopRunner) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        conn = Connection(loop, "u", "p", "/")
        conn.connection_made(FakeTransport())
        broker_says(conn, c.encode_method(0, K.CONNECTION_START, start_args("EXTERNAL")))
        with pytest.raises(BrokerError, match="PLAIN"):
            await conn.opened
        conn = Connection(loop, "u", "p", "/")
        conn.connection_made(FakeTransport())
        broker_says(conn, c.encode_method(0, K.CONNECTION_START, start_args()))
        conn.connection_lost(None)
        with pytest.raises(BrokerError, match="wrong user or password"):
            await conn.opened

    run(main(), timeout=10)


def test_garbage_from_the_broker_fails_the_connection(run: LoopRunner) -> None:
    async def main() -> None:
        conn, t = await handshake(asyncio.get_running_loop())
        buf = conn.get_buffer(-1)
        junk = b"\x01\x00\x00\x00\x00\x00\x04\x00\x0a\x00\x33\x00"   # bad frame-end
        buf[:len(junk)] = junk
        conn.buffer_updated(len(junk))
        assert isinstance(conn.error, BrokerError) and "frame end" in str(conn.error) and t.closed

    run(main(), timeout=10)


def test_uri_parsing() -> None:
    u = AmqpUri("amqps://bob:p%40ss@rabbit.example:5673/my%2Fvhost?heartbeat=10&frame_max=8192&verify=verify_none")
    assert (u.tls, u.host, u.port, u.user, u.password, u.vhost, u.heartbeat, u.frame_max, u.verify) == (
        True, "rabbit.example", 5673, "bob", "p@ss", "my/vhost", 10, 8192, False)
    assert "p%40ss" not in u.masked and "***" in u.masked
    assert u.ssl_context() is not None
    d = AmqpUri("amqp://h")
    assert (d.port, d.user, d.password, d.vhost, d.tls) == (5672, "guest", "guest", "/", False)
    assert AmqpUri("amqp://h/").vhost == "/"
    with pytest.raises(ConfigError):
        AmqpUri("http://h/")
    with pytest.raises(ConfigError):
        AmqpUri("amqp://h/?heartbeat=x")


def test_frame_max_is_one_number_for_every_amqp_driver_and_the_codec() -> None:
    """The largest frame rbench asks for is rbench.drivers.connect.AMQP_FRAME_MAX: the 0-9-1 and 1.0 URIs
    default to it, a URI asking for more is capped at it, and the compiled codec's default (its reader's
    buffer) is the same number."""
    assert c.DEFAULT_FRAME_MAX == AMQP_FRAME_MAX
    assert AmqpUri("amqp://h").frame_max == AMQP_FRAME_MAX == Amqp10Uri("amqp://h").frame_max
    loop = asyncio.new_event_loop()
    try:
        assert Connection(loop, "u", "p", "/").frame_max == AMQP_FRAME_MAX
        asks_more = Connection(loop, "u", "p", "/", frame_max=4 * AMQP_FRAME_MAX)
        assert asks_more.frame_max == asks_more.reader.frame_max == AMQP_FRAME_MAX
        assert Amqp10Connection(loop, Amqp10Uri(f"amqp://h?frame_max={4 * AMQP_FRAME_MAX}")).max_frame == AMQP_FRAME_MAX
    finally:
        loop.close()


def test_heartbeats_sent_when_silent_and_dead_peer_detected(run: LoopRunner) -> None:
    async def main() -> None:
        conn, t = await handshake(asyncio.get_running_loop())
        assert conn.heartbeat == 30 and conn._hb_handle is not None
        conn._hb_handle.cancel()
        conn._tx = False
        conn._heartbeat_tick()            # we were silent: one heartbeat frame
        conn.flush()
        assert t.sent() == [(0, c.FRAME_HEARTBEAT, b"")]
        broker_says(conn, c.encode_heartbeat())
        conn.buffer_updated(0)            # inbound bytes count as liveness
        for _ in range(4):
            conn._hb_handle.cancel()
            conn._heartbeat_tick()
        assert conn.error is None
        conn._hb_handle.cancel()
        conn._heartbeat_tick()            # 4 half-intervals (2 heartbeats) without a byte
        assert conn.error is not None and "heartbeat" in str(conn.error) and t.closed

    run(main(), timeout=10)
