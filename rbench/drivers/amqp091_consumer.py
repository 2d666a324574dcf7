"""The AMQP 0-9-1 consumer: basic.consume on its own channel, acks batched, paused by basic.cancel.

A delivery reaches ``on_message`` straight from the frame reader; acks go out as one (multiple) ack per
``multi_ack_every`` deliveries or after ACK_LINGER_S of quiet, appended to the connection's output buffer.
"""
from __future__ import annotations

import asyncio

from rbench.codec.amqp091 import K, encode_ack, encode_method
from rbench.config.types import ConsumerSpec
from rbench.drivers.amqp091_protocol import TX_COMMIT, TX_COMMIT_OK, TX_SELECT, TX_SELECT_OK, Channel, Connection
from rbench.drivers.base import OnMessage
from rbench.drivers.work import SimulatedWork
from rbench.errors import BrokerError

ACK_LINGER_S = 0.05      # pending multi-acks are sent after this much idle time


class Amqp091Consumer:
    """basic.consume with prefetch, (multi-)acks, auto-ack and simulated processing time.

    With ``processing_delay_us`` each message is "worked on" for that long, one after
    the other, and acked once done (rbench.drivers.work: a virtual clock, so a 50 µs
    delay costs no 50 µs timer).
    """

    pausable = True          # pause() is basic.cancel, resume() basic.consume again on the same channel

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

    def resume_spec(self, spec: ConsumerSpec) -> ConsumerSpec:
        """``spec``: the broker requeues what this consumer held unacked and redelivers it flagged."""
        return spec

    def _on_deliver(self, tag: int, redelivered: bool, body: bytes, t_ns: int) -> None:
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

    # the runtime only acks (or, with consumer.nack, nacks everything); tests nack and reject single deliveries
    def nack(self, tag: int, multiple: bool = False, requeue: bool = True) -> None:
        self._channel.send_method(K.BASIC_NACK, (tag, multiple, requeue))

    def reject(self, tag: int, requeue: bool = True) -> None:
        self._channel.send_method(K.BASIC_REJECT, (tag, requeue))
