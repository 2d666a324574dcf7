"""Native AMQP 0-9-1 driver (the default): Cython codec + asyncio BufferedProtocol.

Why not aio-pika: it spends ~150 µs of client CPU per confirmed message (a task and
a future per publish), so the load generator saturates before the broker. Here a
publish is one call into the codec appending frames to a bytearray, confirms are
a dict pop per sequence number, and a delivery reaches ``on_message`` straight from
the frame reader. See docs/amqp091.md.

One connection per driver (URIs tried in order), one channel per publisher and
consumer, one short-lived channel for declarations.
"""
from __future__ import annotations

import asyncio
import itertools
import ssl
import time
import uuid
from typing import Any

from rbench.codec.amqp091 import K, PublishEncoder, encode_ack, encode_method, key
from rbench.config.types import ClusterTarget, ConsumerSpec, PublisherSpec, Topology
from rbench.config.uri import AMQP_SCHEMES, BrokerUri, parse_uri
from rbench.drivers.amqp091_protocol import FLUSH_BYTES, Channel, Connection
from rbench.drivers.base import OnLost, OnMessage, PublishSink
from rbench.drivers.connect import LossWatch, first_that_answers, tls_context
from rbench.drivers.replies import AccessRefused, NotAllowed, PreconditionFailed
from rbench.drivers.work import SimulatedWork
from rbench.errors import BrokerError, CodecError, os_error_text

CONNECT_TIMEOUT_S = 9.0
ACK_LINGER_S = 0.05      # pending multi-acks are sent after this much idle time
TX_SELECT, TX_SELECT_OK, TX_COMMIT, TX_COMMIT_OK = key(90, 10), key(90, 11), key(90, 20), key(90, 21)


class AmqpUri:
    """What the driver needs from an amqp:// or amqps:// URI, read from its one typed value
    (rbench.config.uri.BrokerUri: the parser validation used); the password is never printed."""

    __slots__ = ("parsed", "tls", "host", "port", "user", "password", "vhost", "heartbeat", "frame_max",
                 "channel_max", "verify", "cacertfile", "certfile", "keyfile", "server_name")

    def __init__(self, uri: str | BrokerUri) -> None:
        u = uri if isinstance(uri, BrokerUri) else parse_uri(uri, AMQP_SCHEMES)
        self.parsed = u
        self.tls = u.tls
        self.host, self.port, self.user, self.password, self.vhost = u.host, u.port, u.user, u.password, u.vhost
        self.heartbeat = u.int_option("heartbeat", 60)
        self.frame_max = u.int_option("frame_max", 131072)
        self.channel_max = u.int_option("channel_max", 2047)
        # TLS options as RabbitMQ's URI spec names them (query parameters of amqps URIs)
        self.verify = u.option("verify", "verify_peer") != "verify_none"
        self.cacertfile = u.option("cacertfile", u.option("cafile"))     # cafile: aio-pika's name for it
        self.certfile = u.option("certfile")
        self.keyfile = u.option("keyfile")
        self.server_name = u.option("server_name_indication", self.host)

    @property
    def masked(self) -> str:
        return self.parsed.masked

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        return tls_context(self.masked, self.cacertfile, self.certfile, self.keyfile, self.verify)


async def _connect_one(u: AmqpUri, name: str) -> Connection:
    loop = asyncio.get_running_loop()
    conn = Connection(loop, u.user, u.password, u.vhost, u.heartbeat, min(u.frame_max, 131072), u.channel_max, name)
    ctx = u.ssl_context()
    try:
        await loop.create_connection(lambda: conn, u.host, u.port, ssl=ctx,
                                     server_hostname=u.server_name if ctx is not None else None)
        await conn.opened
    except BaseException:
        if conn.transport is not None:
            conn.transport.abort()
        raise
    return conn


async def connect(uris: tuple[str, ...] | list[str], timeout: float = CONNECT_TIMEOUT_S,
                  name: str = "rbench") -> Connection:
    """Connect to the first URI that answers within ``timeout`` (rbench.drivers.connect).

    A failure names every URI tried with its password masked and says why: refused,
    no answer, authentication refused (403) or vhost refused (530).
    """
    parsed = {u: AmqpUri(u) for u in uris}       # a malformed URI is a ConfigError before any attempt

    def why(uri: str, exc: BaseException) -> str | None:
        u = parsed[uri]
        if isinstance(exc, AccessRefused):
            return f"authentication refused for user {u.user!r} (403 {exc.reply_text})"
        if isinstance(exc, NotAllowed):
            return f"vhost {u.vhost!r} refused (530 {exc.reply_text})"
        if isinstance(exc, ssl.SSLError):
            return f"TLS failed: {exc.reason or exc}"
        if isinstance(exc, OSError):
            return os_error_text(exc)
        if isinstance(exc, (BrokerError, CodecError)):     # AmqpError and ConnectionLost among them
            return str(exc)
        return None

    async def open_one(uri: str) -> Connection:
        conn = await _connect_one(parsed[uri], name)
        conn.uri = uri
        return conn

    return await first_that_answers(list(uris), open_one, timeout, why)


class Amqp091Publisher:
    """Pipelined publisher with a confirm window.

    Delivery tags are consecutive from 1 once confirm.select is on, so the runtime's
    seq of each tag is kept in an insertion-ordered dict; a multiple ack pops the
    range [lowest outstanding, tag] and reports each seq on its own.
    """

    def __init__(self, conn: Connection, channel: Channel, spec: PublisherSpec, sink: PublishSink) -> None:
        self._conn = conn
        self._channel = channel
        self._spec = spec
        self._sink = sink
        self._confirm = spec.confirm
        self._window = spec.confirm_window if spec.confirm else 0
        props: dict[str, Any] = {}
        if spec.persistent:
            props["delivery_mode"] = 2
        props.update(spec.properties)               # PerfTest -mp: may set delivery_mode, priority, headers …
        if spec.content_type:
            props["content_type"] = spec.content_type
        routing_key = spec.routing_key or (spec.queue if not spec.exchange else "")
        self._enc = PublishEncoder(channel.number, spec.exchange, routing_key, spec.mandatory, props, conn.frame_max)
        # random routing keys (PerfTest -K/-rkcs): a cycle of pre-built encoders, or a new one per message
        self._random_keys = spec.random_routing_key

        def encoder(rk: str) -> PublishEncoder:
            return PublishEncoder(channel.number, spec.exchange, rk, spec.mandatory, props, conn.frame_max)

        if spec.random_routing_key and spec.routing_key_cache:
            cycle = itertools.cycle([encoder(str(uuid.uuid4())) for _ in range(spec.routing_key_cache)])
            self._next_encoder = cycle.__next__
        else:
            self._next_encoder = lambda: encoder(str(uuid.uuid4()))
        self._tx_size = spec.tx_size
        self._uncommitted = 0
        self._unconfirmed: dict[int, int] = {}
        self._next_tag = 0
        self._low = 1
        self._waiter: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self.published = 0
        self.returned = 0
        channel.on_return = self._on_return
        channel.close_listeners.append(self._on_close)
        conn.flow_listeners.add(self._wake)
        if self._confirm:
            conn.reader.set_ack_handler(channel.number, self._on_ack)

    async def ready(self) -> None:
        conn = self._conn
        if self._tx_size and self._uncommitted >= self._tx_size:
            await self._commit()
        while True:
            if self._error is not None:
                raise self._error
            if not (conn.blocked or conn.write_paused or (self._window and len(self._unconfirmed) >= self._window)):
                return
            conn.flush()
            self._waiter = conn.loop.create_future()
            await self._waiter

    def can_publish(self) -> bool:
        conn = self._conn
        return self._error is None and not (self._tx_size and self._uncommitted >= self._tx_size) and not (
            conn.blocked or conn.write_paused or (self._window and len(self._unconfirmed) >= self._window))

    def publish(self, payload: bytes | bytearray | memoryview, seq: int) -> None:
        if self._error is not None:
            raise self._error
        conn = self._conn
        n = (self._next_encoder() if self._random_keys else self._enc).write(conn.out, payload)
        self._uncommitted += 1
        if self._confirm:
            self._next_tag += 1
            self._unconfirmed[self._next_tag] = seq
        self.published += 1
        if n > FLUSH_BYTES:
            conn.flush()
        elif conn._flush_handle is None:
            conn.schedule_flush()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _on_ack(self, tag: int, multiple: bool, acked: bool) -> None:
        now = time.time_ns()
        pending = self._unconfirmed
        on_confirm = self._sink.on_confirm
        if multiple:
            for t in range(self._low, tag + 1):
                seq = pending.pop(t, None)
                if seq is not None:
                    on_confirm(seq, acked, now)
            if tag >= self._low:
                self._low = tag + 1
        else:
            seq = pending.pop(tag, None)
            if seq is not None:
                on_confirm(seq, acked, now)
            if tag == self._low:
                low = tag + 1
                while low <= self._next_tag and low not in pending:
                    low += 1
                self._low = low
        w = self._waiter
        if w is not None and not w.done() and len(pending) < self._window:
            w.set_result(None)
        if not pending and self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def _on_return(self, args: tuple[Any, ...], props: dict[str, Any], body: bytes) -> None:
        self.returned += 1
        self._sink.on_return(body, time.time_ns())

    def _on_close(self, error: BaseException) -> None:
        self._error = error
        self._wake()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    @property
    def outstanding(self) -> int:
        return len(self._unconfirmed)

    async def _commit(self) -> None:
        """tx.commit what was published since the last commit (PerfTest -m)."""
        self._uncommitted = 0
        await self._channel.rpc(TX_COMMIT, (), (TX_COMMIT_OK,), "tx.commit")

    async def drain(self, timeout: float) -> int:
        self._conn.flush()
        if self._tx_size and self._uncommitted and self._error is None:
            try:
                await asyncio.wait_for(self._commit(), timeout)
            except (asyncio.TimeoutError, BrokerError):
                pass
        if not self._confirm or not self._unconfirmed or self._error is not None:
            return len(self._unconfirmed)
        self._drained = self._conn.loop.create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._drained), timeout)
        except asyncio.TimeoutError:
            pass
        return len(self._unconfirmed)

    async def aclose(self) -> None:
        self._conn.flow_listeners.discard(self._wake)
        self._conn.flush()
        await self._channel.close()


class Amqp091Consumer:
    """basic.consume with prefetch, (multi-)acks, auto-ack and simulated processing time.

    With ``processing_delay_us`` each message is "worked on" for that long, one after
    the other, and acked once done (rbench.drivers.work: a virtual clock, so a 50 µs
    delay costs no 50 µs timer).
    """

    def __init__(self, conn: Connection, channel: Channel, spec: ConsumerSpec, on_message: OnMessage) -> None:
        self._conn = conn
        self._channel = channel
        self._spec = spec
        self._on_message = on_message
        self._auto_ack = spec.auto_ack
        self._every = max(spec.multi_ack_every, 1)
        self._multiple = self._every > 1
        self._delay_ns = spec.processing_delay_us * 1000
        if spec.rate:          # PerfTest -R: a consumer finishes at most `rate` messages per second
            self._delay_ns = max(self._delay_ns, int(1e9 / spec.rate))
        self._nack = spec.nack
        self._tx_size = spec.tx_size
        self._acked_since_commit = 0
        self._commits: set[asyncio.Task[None]] = set()
        self._pending = 0
        self._last_tag = 0
        self._acked_tag = 0
        self._linger: asyncio.TimerHandle | None = None
        self._work: SimulatedWork | None = None
        self._tag = ""
        self.cancelled = False
        self.error: BaseException | None = None
        self.received = 0
        channel.on_cancel = self._on_broker_cancel
        channel.close_listeners.append(self._on_close)

    async def start(self) -> None:
        spec, ch = self._spec, self._channel
        if spec.prefetch:
            await ch.rpc(K.BASIC_QOS, (0, spec.prefetch, False), (K.BASIC_QOS_OK,), f"basic.qos {spec.prefetch}")
        if spec.global_prefetch:
            await ch.rpc(K.BASIC_QOS, (0, spec.global_prefetch, True), (K.BASIC_QOS_OK,),
                         f"basic.qos {spec.global_prefetch} global")
        if spec.tx_size and not spec.auto_ack:
            await ch.rpc(TX_SELECT, (), (TX_SELECT_OK,), "tx.select")
        self._conn.reader.set_deliver_handler(ch.number, self._on_deliver)
        if self._delay_ns and not self._auto_ack:
            self._work = SimulatedWork(self._conn.loop, self._delay_ns, self._processed_all).start()
        arguments = dict(spec.extra.get("arguments", {})) if spec.extra else {}
        _, args = await ch.rpc(K.BASIC_CONSUME, (0, spec.queue, "", False, spec.auto_ack, False, False, arguments),
                               (K.BASIC_CONSUME_OK,), f"consume from {spec.queue!r}")
        self._tag = args[0]

    async def pause(self) -> None:
        """Stop deliveries (basic.cancel); messages already delivered are still worked on and acked."""
        if not self._tag or self._channel.error is not None or self.cancelled:
            return
        tag, self._tag = self._tag, ""
        await self._channel.rpc(K.BASIC_CANCEL, (tag, False), (K.BASIC_CANCEL_OK,), "basic.cancel (pause)")

    async def resume(self) -> None:
        """Subscribe again after pause(): the same channel, prefetch and arguments; delivery tags go on counting."""
        if self._tag or self._channel.error is not None or self.cancelled:
            return
        spec = self._spec
        arguments = dict(spec.extra.get("arguments", {})) if spec.extra else {}
        _, args = await self._channel.rpc(K.BASIC_CONSUME, (0, spec.queue, "", False, spec.auto_ack, False, False, arguments),
                                          (K.BASIC_CONSUME_OK,), f"consume from {spec.queue!r} (resume)")
        self._tag = args[0]

    def _on_deliver(self, tag: int, redelivered: bool, body: bytes, t_ns: int) -> None:
        self.received += 1
        self._on_message(body, redelivered, t_ns)
        if self._auto_ack:
            return
        if self._work is not None:
            self._work.add(tag, t_ns)
            return
        # _processed(tag), inlined: this runs once per delivered message
        self._last_tag = tag
        self._pending += 1
        if self._pending >= self._every:
            self._send_ack()
        elif self._linger is None:
            self._linger = self._conn.loop.call_later(ACK_LINGER_S, self._linger_ack)

    def _processed(self, tag: int) -> None:
        """Message ``tag`` is done: ack it now or as part of the next multiple ack."""
        self._last_tag = tag
        self._pending += 1
        if self._pending >= self._every:
            self._send_ack()
        elif self._linger is None:
            self._linger = self._conn.loop.call_later(ACK_LINGER_S, self._linger_ack)

    def _send_ack(self) -> None:
        self._pending = 0
        if self._channel.error is not None or self._last_tag <= self._acked_tag:
            return
        covered = self._last_tag - self._acked_tag
        self._acked_tag = self._last_tag
        conn = self._conn
        if self._nack:
            conn.out += encode_method(self._channel.number, K.BASIC_NACK,
                                      (self._last_tag, self._multiple, self._spec.requeue))
        else:
            conn.out += encode_ack(self._channel.number, self._last_tag, self._multiple)
        if conn._flush_handle is None:
            conn.schedule_flush()
        if self._tx_size:
            self._acked_since_commit += covered
            if self._acked_since_commit >= self._tx_size:
                self._acked_since_commit = 0
                task = conn.loop.create_task(self._commit())
                self._commits.add(task)
                task.add_done_callback(self._commits.discard)

    async def _commit(self) -> None:
        """tx.commit the acks sent since the last commit (PerfTest -n)."""
        try:
            await self._channel.rpc(TX_COMMIT, (), (TX_COMMIT_OK,), "tx.commit")
        except BrokerError:
            pass            # the channel closed; the consumer's own error path reports it

    def _linger_ack(self) -> None:
        self._linger = None
        if self._pending:
            self._send_ack()

    def _processed_all(self, tags: list[int]) -> None:
        for tag in tags:
            self._processed(tag)

    def _on_broker_cancel(self, tag: str) -> None:
        self.cancelled = True

    def _on_close(self, error: BaseException) -> None:
        self.error = error
        if self._work is not None:
            self._work.stop()

    async def aclose(self) -> None:
        ch = self._channel
        if self._work is not None:
            self._work.stop()
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        if ch.error is None and not self.cancelled and self._tag:
            try:
                await asyncio.wait_for(ch.rpc(K.BASIC_CANCEL, (self._tag, False), (K.BASIC_CANCEL_OK,), "basic.cancel"),
                                       5)
            except (asyncio.TimeoutError, BrokerError):
                pass
        if ch.error is None and not self._auto_ack:
            # everything delivered so far was handed to on_message: ack it (work in progress too)
            if self._work is not None:
                self._work.finish_all()
            if self._last_tag > self._acked_tag:
                self._multiple = True      # one ack covering every delivered tag
                self._send_ack()
            if self._tx_size and self._acked_since_commit:
                self._acked_since_commit = 0
                try:
                    await asyncio.wait_for(self._commit(), 5)
                except asyncio.TimeoutError:
                    pass
        self._conn.flush()
        await ch.close()

    # reject/nack are part of the protocol surface tests use; the runtime only acks
    def nack(self, tag: int, multiple: bool = False, requeue: bool = True) -> None:
        self._channel.send_method(K.BASIC_NACK, (tag, multiple, requeue))

    def reject(self, tag: int, requeue: bool = True) -> None:
        self._channel.send_method(K.BASIC_REJECT, (tag, requeue))


class Amqp091Driver:
    """The `amqp091` driver: one connection, one channel per publisher and consumer.

    A lost connection (rbench.errors.ConnectionLost: socket gone, heartbeats missed, 320 from a node
    shutting down) closes every channel with that error, so each publisher's ``ready()``/``publish()``
    raises it, and ``on_lost`` hears of it once the socket is gone; the runtime reconnects."""

    reconnect = True

    def __init__(self) -> None:
        self._conn: Connection | None = None
        self.uri: str | None = None
        self._loss = LossWatch()

    @property
    def connection(self) -> Connection:
        if self._conn is None:
            raise BrokerError("driver used before open()")
        if self._conn.error is not None:
            raise self._conn.error
        return self._conn

    async def open(self, target: ClusterTarget, on_lost: OnLost | None = None) -> None:
        conn = await connect(target.uris, name=f"rbench {target.name}")
        self._conn, self.uri = conn, conn.uri
        self._loss.arm(conn, on_lost)

    async def declare(self, topology: Topology) -> None:
        ch = await self.connection.channel()
        try:
            if topology.exchange and not topology.exchange.startswith("amq."):
                try:
                    await ch.rpc(K.EXCHANGE_DECLARE, (0, topology.exchange, topology.exchange_type, False,
                                                      topology.exchange_durable, False, False, False, {}),
                                 (K.EXCHANGE_DECLARE_OK,), f"declare exchange {topology.exchange!r}")
                except PreconditionFailed as exc:
                    # the exchange exists and differs only in durability (PerfTest declares its exchange
                    # non-durable, older rbench runs durable): it routes the same, so use it as it is
                    if "inequivalent arg 'durable'" not in exc.reply_text:
                        raise
                    ch = await self.connection.channel()
                    await ch.rpc(K.EXCHANGE_DECLARE, (0, topology.exchange, topology.exchange_type, True,
                                                      topology.exchange_durable, False, False, False, {}),
                                 (K.EXCHANGE_DECLARE_OK,), f"declare exchange {topology.exchange!r} (passive)")
            for q in topology.queues:
                await ch.rpc(K.QUEUE_DECLARE, (0, q.name, False, q.durable, q.exclusive, q.auto_delete, False,
                                               dict(q.arguments)),
                             (K.QUEUE_DECLARE_OK,), f"declare queue {q.name!r}")
            for queue, key in topology.bindings:
                await ch.rpc(K.QUEUE_BIND, (0, queue, topology.exchange, key, False, {}), (K.QUEUE_BIND_OK,),
                             f"bind queue {queue!r} to {topology.exchange!r}")
        finally:
            await ch.close()

    async def queue_declare(self, name: str, passive: bool = False, durable: bool = True,
                            arguments: dict[str, Any] | None = None) -> tuple[str, int, int]:
        """(queue, message_count, consumer_count); passive checks existence (404 if missing)."""
        ch = await self.connection.channel()
        try:
            _, args = await ch.rpc(K.QUEUE_DECLARE, (0, name, passive, durable, False, False, False, arguments or {}),
                                   (K.QUEUE_DECLARE_OK,), f"declare queue {name!r}")
            return (str(args[0]), int(args[1]), int(args[2]))
        finally:
            await ch.close()

    async def delete_queues(self, names: list[str]) -> None:
        ch = await self.connection.channel()
        try:
            for name in names:
                await ch.rpc(K.QUEUE_DELETE, (0, name, False, False, False), (K.QUEUE_DELETE_OK,),
                             f"delete queue {name!r}")
        finally:
            await ch.close()

    async def delete_exchange(self, name: str) -> None:
        ch = await self.connection.channel()
        try:
            await ch.rpc(K.EXCHANGE_DELETE, (0, name, False, False), (K.EXCHANGE_DELETE_OK,), f"delete exchange {name!r}")
        finally:
            await ch.close()

    async def publisher(self, spec: PublisherSpec, sink: PublishSink) -> Amqp091Publisher:
        conn = self.connection
        ch = await conn.channel()
        if spec.confirm:
            await ch.rpc(K.CONFIRM_SELECT, (False,), (K.CONFIRM_SELECT_OK,), "confirm.select")
        if spec.tx_size:
            await ch.rpc(TX_SELECT, (), (TX_SELECT_OK,), "tx.select")
        return Amqp091Publisher(conn, ch, spec, sink)

    async def consumer(self, spec: ConsumerSpec, on_message: OnMessage) -> Amqp091Consumer:
        conn = self.connection
        ch = await conn.channel()
        consumer = Amqp091Consumer(conn, ch, spec, on_message)
        try:
            await consumer.start()
        except BaseException:
            conn.reader.set_deliver_handler(ch.number, None)
            await ch.close()
            raise
        return consumer

    async def aclose(self) -> None:
        self._loss.disarm()
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()


__all__ = ["Amqp091Consumer", "Amqp091Driver", "Amqp091Publisher", "AmqpUri", "connect", "encode_method"]
