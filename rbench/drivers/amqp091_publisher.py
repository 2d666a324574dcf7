"""The AMQP 0-9-1 publisher: a pipelined publish on its own channel, with a confirm window.

A publish is one call into the codec appending frames to the connection's output buffer (written once
per loop turn), and a confirm is a dict pop per sequence number: no task or future per message, which is
why the native driver loads a broker where aio-pika saturates first (docs/amqp091.md).
"""
from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from typing import Any

from rbench.codec.amqp091 import PublishEncoder
from rbench.config.types import PublisherSpec
from rbench.drivers.amqp091_protocol import FLUSH_BYTES, TX_COMMIT, TX_COMMIT_OK, Channel, Connection
from rbench.drivers.base import PublishSink
from rbench.errors import BrokerError


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
        self.returned = 0                           # basic.returns seen (tests)
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
