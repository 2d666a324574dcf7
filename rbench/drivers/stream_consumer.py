"""The stream consumer: one subscription (id 0) on its own connection, and where it reads from.

Offsets: ``first``, ``last``, ``next``, ``offset:N`` (messages before N in the first chunk are
skipped, so delivery starts exactly at N), ``timestamp:MS`` (chunk granularity, as the broker does
it). Credit is given back one chunk at a time, as each chunk is handled, so ``on_message``
back-pressure reaches the broker. Streams have no acks: after a lost connection the consumer is
subscribed again from the first offset it had not handled (``resume_spec``).
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, cast

from rstream import schema
from rstream.constants import OffsetType

from rbench.config.types import ConsumerSpec
from rbench.drivers.base import OnMessage, cannot_pause
from rbench.drivers.stream_wire import StreamProtocol, credit_frame, decode_amqp_data, iter_records, now_ns
from rbench.errors import BrokerError, CodecError, ConfigError

log = logging.getLogger(__name__)


def parse_offset(text: str) -> tuple[int, int | None]:
    """``first|last|next|offset:N|timestamp:MS`` → (rstream OffsetType value, argument)."""
    t = text.strip().lower()
    if t in ("first", "last", "next"):
        return int(OffsetType[t.upper()]), None
    kind, sep, value = t.partition(":")
    if sep and kind in ("offset", "timestamp"):
        try:
            n = int(value)
        except ValueError:
            n = -1
        if n >= 0:
            return (int(OffsetType.OFFSET) if kind == "offset" else int(OffsetType.TIMESTAMP)), n
    raise ConfigError(f"consumer offset: expected first, last, next, offset:N or timestamp:MS, got {text!r}")


def offset_spec(kind: int, value: int | None) -> schema.OffsetSpec:
    return schema.OffsetSpec.from_params(OffsetType(kind), value)


class StreamConsumer:
    """One subscription (id 0 on its own connection)."""

    # a stream keeps every message whatever its consumers do: its depth never drains, so consumer.pause has
    # nothing to watch (docs/drivers.md)
    pausable = False

    def __init__(self, proto: StreamProtocol, spec: ConsumerSpec, on_message: OnMessage,
                 subscription_id: int = 0) -> None:
        self._proto = proto
        self.stream = spec.queue
        self._on_message = on_message
        self._id = subscription_id
        self._amqp = spec.message_format == "amqp"
        self._offset_kind, self._offset_value = parse_offset(spec.offset)
        # offset:N: the broker starts at the chunk holding N; skip what comes before N
        self._skip_below: int = cast(int, self._offset_value) if self._offset_kind == int(OffsetType.OFFSET) else 0
        self._credit_frame = credit_frame(subscription_id, 1)
        self.next_offset: int | None = None
        self.active = not spec.single_active
        self.malformed = 0
        self.error: BrokerError | None = None

    def on_chunk(self, data: bytes, pos: int, end: int) -> None:
        t = now_ns()
        first, _ts, records = iter_records(data, pos, end)
        records = cast(Any, records)
        skip = self._skip_below - int(first or 0)
        on_message = self._on_message
        mv = memoryview(data)
        if self._amqp:
            decode = decode_amqp_data
            for i, r in enumerate(records):
                if i < skip:
                    continue
                try:
                    body = decode(mv[r[0]:r[1]] if type(r) is tuple else r)
                except (CodecError, ValueError, IndexError) as exc:
                    # not an AMQP 1.0 data message (another client wrote it): count it, keep going
                    self.malformed += 1
                    if self.malformed == 1:
                        log.warning("stream %s: offset %d is not an AMQP 1.0 data message: %s",
                                    self.stream, first + i, exc)
                    continue
                on_message(body, False, t)
        else:
            for i, r in enumerate(records):
                if i < skip:
                    continue
                on_message(mv[r[0]:r[1]] if type(r) is tuple else r, False, t)
        self.next_offset = first + len(records)
        if self._proto.closed is None:
            self._proto.write(self._credit_frame)

    def on_consumer_update(self, active: bool) -> tuple[int, int | None]:
        """Single active consumer: the broker (de)activates us; we say where to start."""
        self.active = active
        if self.next_offset is not None:      # resume after what we already handled
            return int(OffsetType.OFFSET), self.next_offset
        return self._offset_kind, self._offset_value

    def on_connection_lost(self, err: BrokerError) -> None:
        self.error = err

    async def pause(self) -> None:
        raise cannot_pause("stream")

    async def resume(self) -> None:
        raise cannot_pause("stream")

    def resume_spec(self, spec: ConsumerSpec) -> ConsumerSpec:
        """The spec to subscribe again with after a lost connection: from the first offset not yet handled
        (the spec's own offset would deliver the stream again from its start)."""
        if self.next_offset is None:
            return spec
        return replace(spec, offset=f"offset:{self.next_offset}")

    async def aclose(self) -> None:
        proto = self._proto
        if proto.closed is None:
            try:
                await proto.request(schema.Unsubscribe(proto.next_corr(), subscription_id=self._id),
                                    "unsubscribe", timeout=3)
            except BrokerError:
                pass
        proto.subscribers.pop(self._id, None)
        await proto.close()
