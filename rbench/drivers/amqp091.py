"""Native AMQP 0-9-1 driver (the default): Cython codec + asyncio BufferedProtocol.

Why not aio-pika: it spends ~150 µs of client CPU per confirmed message (a task and
a future per publish), so the load generator saturates before the broker. Here a
publish is one call into the codec appending frames to a bytearray, confirms are
a dict pop per sequence number, and a delivery reaches ``on_message`` straight from
the frame reader. See docs/amqp091.md.

One connection per driver (URIs tried in order), one channel per publisher and
consumer, one short-lived channel for declarations. This module is the driver: opening
(amqp091_connect), declaring and deleting, and handing out publishers (amqp091_publisher)
and consumers (amqp091_consumer) over the wire state machine of amqp091_protocol.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rbench.codec.amqp091 import K
from rbench.config.types import ClusterTarget, ConsumerSpec, PublisherSpec, Topology
from rbench.drivers.amqp091_connect import connect
from rbench.drivers.amqp091_consumer import Amqp091Consumer
from rbench.drivers.amqp091_protocol import TX_SELECT, TX_SELECT_OK, Connection
from rbench.drivers.amqp091_publisher import Amqp091Publisher
from rbench.drivers.base import OnLost, OnMessage, PublishSink
from rbench.drivers.connect import LossWatch
from rbench.drivers.exchanges import durability_differs, say_used_as_it_is
from rbench.drivers.replies import PreconditionFailed
from rbench.errors import BrokerError, ConnectionLost


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

    @property
    def server_properties(self) -> Mapping[str, Any]:
        return {} if self._conn is None else self._conn.server_properties

    async def open(self, target: ClusterTarget, on_lost: OnLost | None = None, name: str | None = None) -> None:
        conn = await connect(target.uris, name=name or f"rbench {target.name}")
        self._conn, self.uri = conn, conn.uri
        self._loss.arm(conn, on_lost)

    def lose(self, error: ConnectionLost) -> None:
        """Treat this connection as lost with ``error`` (rbench.drivers.base.Losable); on_lost is not called."""
        self._loss.disarm()
        if self._conn is not None:
            self._conn.give_up(error)

    async def open_idle_channel(self) -> None:
        """idle_connections: one channel, kept open (the connection heartbeats on its own) until aclose()."""
        await self.connection.channel()

    async def declare(self, topology: Topology) -> None:
        ch = await self.connection.channel()
        try:
            if topology.exchange and not topology.exchange.startswith("amq."):
                try:
                    await ch.rpc(K.EXCHANGE_DECLARE, (0, topology.exchange, topology.exchange_type, False,
                                                      topology.exchange_durable, False, False, False, {}),
                                 (K.EXCHANGE_DECLARE_OK,), f"declare exchange {topology.exchange!r}")
                except PreconditionFailed as exc:
                    # it exists with the other durability (rbench.drivers.exchanges): use it as it is,
                    # on a fresh channel (the 406 closed this one)
                    if not durability_differs(exc):
                        raise
                    ch = await self.connection.channel()
                    await ch.rpc(K.EXCHANGE_DECLARE, (0, topology.exchange, topology.exchange_type, True,
                                                      topology.exchange_durable, False, False, False, {}),
                                 (K.EXCHANGE_DECLARE_OK,), f"declare exchange {topology.exchange!r} (passive)")
                    say_used_as_it_is(topology.exchange, topology.exchange_durable)
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

    async def messages_ready(self, queue: str) -> int:
        return (await self.queue_declare(queue, passive=True))[1]

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
