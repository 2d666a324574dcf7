"""Reference AMQP 0.9.1 driver on aio-pika.

Kept as the yardstick the native driver is measured against, and as a second,
independent implementation for tests: if both drivers agree on counts, the runtime
is probably right. Pipelining is done with one asyncio task per in-flight publish,
which is exactly why it costs ~150 µs of client CPU per message.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Mapping
from typing import Any

import aio_pika
import aiormq
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractExchange, AbstractIncomingMessage
from pamqp import commands as spec_commands

from rbench.config.types import ClusterTarget, ConsumerSpec, PublisherSpec, Topology
from rbench.config.uri import AMQP_SCHEMES, parse_uri
from rbench.drivers.base import OnLost, OnMessage, PublishSink, cannot_pause
from rbench.drivers.connect import first_that_answers
from rbench.drivers.exchanges import durability_differs, say_used_as_it_is
from rbench.drivers.replies import named
from rbench.errors import BrokerError, ConnectionLost, os_error_text

CONNECT_TIMEOUT_S = 8.0
# aiormq logs connection and channel events itself; rbench reports failures once, masked
logging.getLogger("aiormq").setLevel(logging.CRITICAL)
logging.getLogger("aio_pika").setLevel(logging.CRITICAL)
_REPLY_CODES = {
    aiormq.exceptions.ChannelAccessRefused: 403,
    aiormq.exceptions.ChannelNotFoundEntity: 404,
    aiormq.exceptions.ChannelLockedResource: 405,
    aiormq.exceptions.ChannelPreconditionFailed: 406,
}


def broker_error(exc: BaseException, doing: str) -> BrokerError:
    """Turn an aiormq/aio-pika exception into the named BrokerError of its reply code (rbench.drivers.replies)."""
    code = next((c for cls, c in _REPLY_CODES.items() if isinstance(exc, cls)), None)
    detail = str(exc.args[0]) if exc.args else type(exc).__name__
    return named(f"{doing}: broker closed the channel{f' with {code}' if code else ''}: {detail}", code, detail)


async def connect_first(uris: tuple[str, ...], timeout: float = CONNECT_TIMEOUT_S,
                        name: str = "rbench") -> tuple[AbstractConnection, str]:
    """Connect to the first URI that answers (rbench.drivers.connect): (connection, that URI); errors name
    every URI tried, masked."""

    def why(uri: str, exc: BaseException) -> str | None:
        if isinstance(exc, (aiormq.exceptions.ProbableAuthenticationError, aiormq.exceptions.AuthenticationError)):
            return "authentication refused (user, password or vhost access)"
        if isinstance(exc, aiormq.exceptions.ConnectionClosed):
            return f"connection closed by broker ({exc})"
        if isinstance(exc, OSError):
            return os_error_text(exc)
        if isinstance(exc, aiormq.exceptions.AMQPError):
            return f"{type(exc).__name__} {exc}"
        return None

    parsed = {uri: parse_uri(uri, AMQP_SCHEMES) for uri in uris}     # malformed: ConfigError before any attempt

    async def open_one(uri: str) -> tuple[AbstractConnection, str]:
        return await aio_pika.connect(parsed[uri].text(), timeout=timeout,
                                      client_properties={"connection_name": name}), uri

    return await first_that_answers(uris, open_one, timeout, why)


class AioPikaPublisher:
    def __init__(self, channel: AbstractChannel, exchange: AbstractExchange, spec: PublisherSpec, sink: PublishSink):
        self._channel = channel
        self._exchange = exchange
        self._spec = spec
        self._sink = sink
        self._inflight: set[asyncio.Task[Any]] = set()
        self._room = asyncio.Event()
        self._room.set()
        self._window = spec.confirm_window if spec.confirm else 0
        self._error: BrokerError | None = None
        self._lost = 0             # publishes that failed with the channel/connection: no outcome known
        self._delivery_mode = aio_pika.DeliveryMode.PERSISTENT if spec.persistent else aio_pika.DeliveryMode.NOT_PERSISTENT

    async def ready(self) -> None:
        while self._window and len(self._inflight) >= self._window and self._error is None:
            self._room.clear()
            await self._room.wait()
        if self._error is not None:
            raise self._error

    def can_publish(self) -> bool:
        return self._error is None and not (self._window and len(self._inflight) >= self._window)

    def publish(self, payload: bytes | bytearray | memoryview, seq: int) -> None:
        if self._error is not None:
            raise self._error
        message = aio_pika.Message(bytes(payload), delivery_mode=self._delivery_mode)
        task = asyncio.get_running_loop().create_task(
            self._exchange.publish(message, self._spec.routing_key, mandatory=self._spec.mandatory))
        self._inflight.add(task)
        task.add_done_callback(functools.partial(self._done, seq))

    def _done(self, seq: int, task: asyncio.Task[Any]) -> None:
        self._inflight.discard(task)
        if self._window and len(self._inflight) < self._window:
            self._room.set()
        now = time.time_ns()
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None and not isinstance(exc, aiormq.exceptions.DeliveryError):
            # the channel or connection is gone: no outcome will come for this message, and
            # publishing on would lose every next one silently, so ready()/publish() raise from now on
            self._lost += 1
            if self._error is None:
                refused = isinstance(exc, tuple(_REPLY_CODES))      # the broker closed the channel with a code
                self._error = (broker_error(exc, "publish") if refused
                               else ConnectionLost(f"publish: connection lost ({type(exc).__name__}: {exc})"))
            self._room.set()
            return
        if not self._spec.confirm:
            return
        if exc is None:
            result = task.result()
            if isinstance(result, aiormq.abc.DeliveredMessage):   # basic.return, then the ack
                self._sink.on_return(result.body, now)
                self._sink.on_confirm(seq, True, now)
            else:
                self._sink.on_confirm(seq, isinstance(result, spec_commands.Basic.Ack), now)
        else:
            self._sink.on_confirm(seq, False, now)

    def lost(self, error: ConnectionLost) -> None:
        """The connection died: ready()/publish() raise ``error`` from now on."""
        if self._error is None:
            self._error = error
        self._room.set()

    async def drain(self, timeout: float) -> int:
        """Outstanding after ``timeout``: still in flight, plus any lost with the connection."""
        if self._inflight:
            await asyncio.wait(set(self._inflight), timeout=timeout)
        return len(self._inflight) + self._lost

    async def aclose(self) -> None:
        for task in list(self._inflight):
            task.cancel()
        if not self._channel.is_closed:
            await self._channel.close()


class AioPikaConsumer:
    pausable = False         # the reference driver measures publish/consume cost; consumer.pause is amqp091's

    def __init__(self, channel: AbstractChannel, spec: ConsumerSpec, on_message: OnMessage):
        self._channel = channel
        self._spec = spec
        self._on_message = on_message
        self._task: asyncio.Task[None] | None = None
        self._started = asyncio.get_running_loop().create_future()

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())
        await self._started

    async def _run(self) -> None:
        spec = self._spec
        delay = spec.processing_delay_us / 1e6
        every = max(spec.multi_ack_every, 1)
        unacked: AbstractIncomingMessage | None = None
        pending = 0
        try:
            queue = await self._channel.get_queue(spec.queue, ensure=False)
            async with queue.iterator(no_ack=spec.auto_ack) as messages:
                self._started.set_result(None)
                async for message in messages:
                    self._on_message(message.body, bool(message.redelivered), time.time_ns())
                    if delay:
                        await asyncio.sleep(delay)
                    if spec.auto_ack:
                        continue
                    pending += 1
                    unacked = message
                    if pending >= every:
                        await message.ack(multiple=every > 1)
                        pending, unacked = 0, None
        except asyncio.CancelledError:
            if unacked is not None and not self._channel.is_closed:
                await unacked.ack(multiple=True)
            raise
        except Exception as exc:  # surfaced through start() or aclose()
            if not self._started.done():
                self._started.set_exception(broker_error(exc, f"consume from {spec.queue}"))
            else:
                raise

    async def pause(self) -> None:
        raise cannot_pause("aiopika")

    async def resume(self) -> None:
        raise cannot_pause("aiopika")

    def resume_spec(self, spec: ConsumerSpec) -> ConsumerSpec:
        """``spec``: the broker requeues what this consumer held unacked and redelivers it flagged."""
        return spec

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, aiormq.exceptions.AMQPError):
                pass
        if not self._channel.is_closed:
            await self._channel.close()


class AioPikaDriver:
    """The `aiopika` driver: one connection, one channel per publisher and consumer.

    A plain (not robust) aio-pika connection: when it closes without aclose() every publisher raises
    ConnectionLost and ``on_lost`` is told; the runtime reconnects (docs/drivers.md)."""

    reconnect = True

    def __init__(self) -> None:
        self._connection: AbstractConnection | None = None
        self._publishers: list[AioPikaPublisher] = []
        self._on_lost: OnLost | None = None
        self.uri: str | None = None

    @property
    def server_properties(self) -> Mapping[str, Any]:
        transport = None if self._connection is None else self._connection.transport
        return {} if transport is None else dict(transport.connection.server_properties or {})

    async def open(self, target: ClusterTarget, on_lost: OnLost | None = None, name: str | None = None) -> None:
        self._connection, self.uri = await connect_first(target.uris, name=name or f"rbench {target.name}")
        self._on_lost = on_lost
        self._connection.close_callbacks.add(self._closed)

    def _closed(self, sender: Any, exc: BaseException | None = None) -> None:
        """aio-pika's close callback: the connection is gone (aclose() clears _on_lost first)."""
        if self._on_lost is None:
            return
        on_lost, self._on_lost = self._on_lost, None
        detail = f"{type(exc).__name__}: {exc}" if exc is not None else "closed"
        error = ConnectionLost(f"connection lost ({detail})")
        for pub in self._publishers:
            pub.lost(error)
        on_lost(error)

    def _conn(self) -> AbstractConnection:
        if self._connection is None:
            raise BrokerError("driver used before open()")
        return self._connection

    async def declare(self, topology: Topology) -> None:
        channel = await self._conn().channel()
        try:
            if topology.exchange and not topology.exchange.startswith("amq."):
                try:
                    await channel.declare_exchange(topology.exchange, topology.exchange_type,
                                                   durable=topology.exchange_durable)
                except aiormq.exceptions.ChannelPreconditionFailed as exc:
                    # it exists with the other durability (rbench.drivers.exchanges): use it as it is,
                    # on a fresh channel (the 406 closed this one)
                    if not durability_differs(broker_error(exc, "declare exchange")):
                        raise
                    channel = await self._conn().channel()
                    await channel.declare_exchange(topology.exchange, topology.exchange_type, passive=True)
                    say_used_as_it_is(topology.exchange, topology.exchange_durable)
            for q in topology.queues:
                await channel.declare_queue(q.name, durable=q.durable, auto_delete=q.auto_delete,
                                            exclusive=q.exclusive, arguments=dict(q.arguments))
            for queue, key in topology.bindings:
                await (await channel.get_queue(queue, ensure=False)).bind(topology.exchange, key)
        except aiormq.exceptions.AMQPChannelError as exc:
            raise broker_error(exc, "declare topology") from None
        finally:
            if not channel.is_closed:
                await channel.close()

    async def messages_ready(self, queue: str) -> int:
        channel = await self._conn().channel()
        try:
            declared = await channel.declare_queue(queue, passive=True)
            return int(declared.declaration_result.message_count or 0)
        except aiormq.exceptions.AMQPChannelError as exc:
            raise broker_error(exc, f"declare queue {queue!r} (passive)") from None
        finally:
            if not channel.is_closed:
                await channel.close()

    async def delete_queues(self, names: list[str]) -> None:
        channel = await self._conn().channel()
        for name in names:
            await channel.queue_delete(name)
        await channel.close()

    async def publisher(self, spec: PublisherSpec, sink: PublishSink) -> AioPikaPublisher:
        channel = await self._conn().channel(publisher_confirms=spec.confirm, on_return_raises=False)
        exchange = await channel.get_exchange(spec.exchange, ensure=False) if spec.exchange else channel.default_exchange
        pub = AioPikaPublisher(channel, exchange, spec, sink)
        self._publishers.append(pub)
        return pub

    async def consumer(self, spec: ConsumerSpec, on_message: OnMessage) -> AioPikaConsumer:
        channel = await self._conn().channel()
        if spec.prefetch:
            await channel.set_qos(prefetch_count=spec.prefetch)
        consumer = AioPikaConsumer(channel, spec, on_message)
        await consumer.start()
        return consumer

    async def aclose(self) -> None:
        self._on_lost = None
        if self._connection is not None:
            await self._connection.close()
            self._connection = None
