"""The stream consumer: one subscription (id 0) on its own connection, and where it reads from.

Offsets: ``first``, ``last``, ``next``, ``offset:N`` (messages before N in the first chunk are
skipped, so delivery starts exactly at N), ``timestamp:MS`` (chunk granularity, as the broker does
it). Credit is given back one chunk at a time, as each chunk is handled, so ``on_message``
back-pressure reaches the broker. Streams have no acks: after a lost connection the consumer is
subscribed again from the first offset it had not handled (``resume_spec``).

Single active consumer: the group's members share server-side offset tracking under the group's
name, as RabbitMQ's own stream clients do. The active member stores the offset of the last message it
handled (StoreOffset, at most once a second, and always when it steps down or closes; a closing member
drops what arrives after its last store), and a member the broker activates asks for that offset
(QueryOffset) and starts right after it. So a takeover re-reads at most what the group had not stored:
nothing after a clean close, up to a second's worth after a crash (docs/streams.md).
"""
from __future__ import annotations

import asyncio
import logging
import struct
from dataclasses import replace
from typing import Any, cast

from rstream import schema
from rstream.constants import OffsetType

from rbench.config.stream_filter import PRODUCER_STEP, SEQ_STEP, SLOTS, wanted_table
from rbench.config.types import ConsumerSpec
from rbench.drivers.base import OnMessage, cannot_pause
from rbench.drivers.stream_wire import (
    StreamProtocol,
    consumer_update_response,
    credit_frame,
    decode_amqp_data,
    iter_records,
    now_ns,
)
from rbench.errors import BrokerError, CodecError, ConfigError
from rbench.runtime.stamp import LAYOUT

# the stamp's producer and seq (rbench.runtime.stamp): what the client-side filter recomputes a message's value from
_PRODUCER_SEQ = struct.Struct("<II")
assert LAYOUT["seq"] == LAYOUT["producer"] + 4 == 4

log = logging.getLogger(__name__)

# the active member of a single-active group stores its offset at most this often while it reads (and always
# when it steps down or closes): a crash makes the next member re-read at most this long's deliveries
STORE_INTERVAL_NS = 1_000_000_000
K_STORE_OFFSET = 10
NO_OFFSET = 19


def group_name(spec: ConsumerSpec) -> str | None:
    """The single-active group a consumer belongs to (its offsets are stored under this name); None without SAC."""
    if not spec.single_active:
        return None
    return str(spec.extra.get("name") or f"rbench-{spec.queue}")


def store_offset_frame(reference: str, stream: str, offset: int) -> bytes:
    """StoreOffset (key 10): no response; the broker keeps the offset under ``reference`` for the stream."""
    ref, st = reference.encode(), stream.encode()
    body = struct.pack(f">HHH{len(ref)}sH{len(st)}sQ", K_STORE_OFFSET, 1, len(ref), ref, len(st), st, offset)
    return struct.pack(">I", len(body)) + body


def start_offset(kind: int, value: int | None, stored: int | None, handled: int | None) -> tuple[int, int | None]:
    """Where a newly active member starts: right after the group's stored offset, or after what this member
    itself handled, whichever is later, and never before an ``offset:N`` it was given; with neither, its own
    offset spec (``first``, ``next``, …)."""
    if stored is None and handled is None:
        return kind, value
    floor = [x for x in (None if stored is None else stored + 1, handled,
                         value if kind == int(OffsetType.OFFSET) else None) if x is not None]
    return int(OffsetType.OFFSET), max(floor)


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
        self.group = group_name(spec)
        self.stored: int | None = None          # the last offset this member stored for its group
        self._stored_at = 0
        self._closing = False
        self._tasks: set[asyncio.Task[None]] = set()
        self.malformed = 0
        # stream filtering: the broker skips only chunks with none of the values (a bloom filter per chunk), so
        # the rest of what it sends is dropped here and counted; ``keep`` has one byte per slot
        self._keep: bytes | None = (wanted_table(spec.filter_spread, spec.filter, spec.match_unfiltered)
                                    if spec.filter else None)
        self.filtered = 0
        self.error: BrokerError | None = None

    def on_chunk(self, data: bytes, pos: int, end: int) -> None:
        t = now_ns()
        if self.group is not None and (self._closing or not self.active):
            return        # past this member's last stored offset: the member taking over reads it (no credit back)
        first, _ts, records = iter_records(data, pos, end)
        records = cast(Any, records)
        skip = self._skip_below - int(first or 0)
        on_message = self._on_message
        mv = memoryview(data)
        if self._keep is not None:
            self._filtered_chunk(mv, records, skip, t)
        elif self._amqp:
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
            if self.group is not None and t - self._stored_at >= STORE_INTERVAL_NS:
                self._stored_at = t
                self.store()

    def _filtered_chunk(self, mv: memoryview, records: Any, skip: int, t: int) -> None:
        """on_chunk's loop with the client-side filter: a message whose value no filter asks for is counted in
        ``filtered``, never handed on (so it is neither consumed nor lost nor a copy)."""
        keep = cast(bytes, self._keep)
        unpack = _PRODUCER_SEQ.unpack_from
        for i, r in enumerate(records):
            if i < skip:
                continue
            raw = mv[r[0]:r[1]] if type(r) is tuple else r
            if self._amqp:
                try:
                    body = decode_amqp_data(raw)
                except (CodecError, ValueError, IndexError):
                    self.malformed += 1
                    continue
            else:
                body = raw
            try:
                producer, seq = unpack(body)
            except struct.error:
                self.malformed += 1
                continue
            if not keep[(seq * SEQ_STEP + producer * PRODUCER_STEP) % SLOTS]:
                self.filtered += 1
                continue
            self._on_message(body, False, t)

    def store(self) -> None:
        """Store the offset of the last message handled under the group's name (nothing handled: nothing)."""
        if self.group is None or self.next_offset is None or self.next_offset == 0 or self._proto.closed is not None:
            return
        if self.stored != self.next_offset - 1:
            self.stored = self.next_offset - 1
            self._proto.write(store_offset_frame(self.group, self.stream, self.stored))

    def on_consumer_update(self, corr: int, active: bool) -> None:
        """Single active consumer: the broker (de)activates us and waits for where we start; the answer may need a
        QueryOffset round trip, so it is sent from a task."""
        task = asyncio.get_running_loop().create_task(self._answer_update(corr, active))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer_update(self, corr: int, active: bool) -> None:
        if active:
            kind, value = start_offset(self._offset_kind, self._offset_value, await self.stored_offset(),
                                       self.next_offset)
            if kind == int(OffsetType.OFFSET):
                self._skip_below = cast(int, value)    # the broker starts at the chunk holding it
        else:
            self.store()                               # the next member starts after what we handled
            kind, value = self._offset_kind, self._offset_value
        self.active = active and not self._closing
        if self._proto.closed is None:
            self._proto.write(consumer_update_response(corr, kind, value))

    async def stored_offset(self) -> int | None:
        """The group's stored offset (QueryOffset); None when nothing was stored or the broker did not say."""
        if self.group is None or self._proto.closed is not None:
            return None
        proto = self._proto
        try:
            resp: Any = await proto.request(schema.QueryOffset(proto.next_corr(), reference=self.group,
                                                               stream=self.stream),
                                            f"query offset of {self.group!r} on {self.stream!r}",
                                            ok_codes=(1, NO_OFFSET))
        except BrokerError as exc:
            log.warning("stream %s: %s; starting at the configured offset", self.stream, exc)
            return None
        return int(resp.offset) if resp.response_code == 1 else None

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
        if self.group is not None:          # drop what comes after this store: the next member reads it
            self._closing = True
            self.store()
        if proto.closed is None:
            try:
                await proto.request(schema.Unsubscribe(proto.next_corr(), subscription_id=self._id),
                                    "unsubscribe", timeout=3)
            except BrokerError:
                pass
        proto.subscribers.pop(self._id, None)
        await proto.close()
