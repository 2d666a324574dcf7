"""The stream publisher: one publisher (id 0) on its own connection to the stream's leader.

Each message's publishing id is the runtime's ``seq``, so a ``PublishConfirm`` maps to
``PublishSink.on_confirm(seq, ...)`` with no lookup table; messages published in the same
event-loop turn go out as one ``Publish`` frame, built in C (ext/codec/stream.pyx).
"""
from __future__ import annotations

import asyncio
import functools
import logging
import struct

from rstream import schema

from rbench.codec._stream import PUBLISH_HEADER_SIZE, PublishFrame, confirm_each
from rbench.config.stream_filter import PRODUCER_STEP, SEQ_STEP
from rbench.config.types import PublisherSpec
from rbench.drivers.base import PublishSink
from rbench.drivers.stream_wire import StreamProtocol, now_ns
from rbench.errors import BrokerError, ConfigError

log = logging.getLogger(__name__)

_ERR = struct.Struct(">QH")       # a PublishError entry: publishing id, response code


class StreamPublisher:
    """One stream publisher (publisher id 0 on its own connection).

    The frame being built lives in ``rbench.codec._stream.PublishFrame`` (C): ``publish``
    *is* that frame's ``add``, so publishing a message costs no Python frame at all.
    Messages published in one event-loop turn share one Publish frame, sent at the end
    of the turn or as soon as someone waits (``ready``/``drain``).
    """

    def __init__(self, proto: StreamProtocol, stream: str, spec: PublisherSpec, sink: PublishSink,
                 publisher_id: int = 0) -> None:
        self._proto = proto
        self.stream = stream
        self._sink = sink
        self._id = publisher_id
        self._loop = asyncio.get_running_loop()
        # a Publish frame must stay within frame_max (negotiated at tune)
        self._frame_max = proto.frame_max
        # stream filtering: the C builder writes each message's filter value (Publish v2), by its slot
        table = spec.filter.table() if spec.filter is not None else None
        self._frame = PublishFrame(publisher_id, self._frame_max, spec.message_format == "amqp",
                                   functools.partial(self._loop.call_soon, self.flush), self._on_full,
                                   table, SEQ_STEP, spec.producer_id * PRODUCER_STEP)
        self.publish = self._frame.add       # type: ignore[method-assign]
        # the broker confirms every stream message; the sink hears of them only when asked
        self._report = spec.confirm
        self._window = spec.confirm_window if spec.confirm_window > 0 else 0
        self._published = 0        # messages handed to the socket
        self._done = 0             # confirmed + refused
        self._waiter: asyncio.Future[None] | None = None
        self._error: BrokerError | None = None

    @property
    def outstanding(self) -> int:
        """Messages published (buffered or written) and not yet confirmed or refused."""
        return self._published + self._frame.count - self._done

    @property
    def error(self) -> BrokerError | None:
        """Why this publisher can no longer publish (connection lost, stream deleted), if it cannot."""
        return self._error

    async def ready(self) -> None:
        """Room in the confirm window and in the socket's write buffer."""
        if self._error is not None:
            raise self._error
        while self._window and self.outstanding >= self._window:
            self.flush()
            await self._wait()
            if self._error is not None:
                raise self._error
        if self._proto._writable is not None:
            self.flush()
            await self._proto.writable()

    def can_publish(self) -> bool:
        return self._error is None and not (self._window and self.outstanding >= self._window) \
            and self._proto._writable is None

    def publish(self, payload: bytes | bytearray | memoryview, seq: int) -> None:
        """Append one message (publishing id = seq) to the frame being built; never awaits.

        Shadowed in __init__ by the C frame's ``add``; this body documents the contract.
        """
        self._frame.add(payload, seq)

    def _on_full(self, need: int) -> None:
        """The frame has no room for a message of ``need`` encoded bytes: send it, or refuse."""
        if PUBLISH_HEADER_SIZE + need > self._frame_max:
            raise ConfigError(f"stream {self.stream!r}: a message of {need} encoded bytes does not fit "
                              f"the broker's frame_max of {self._frame_max} bytes")
        self.flush()

    def flush(self) -> None:
        """Write the frame being built now (it would otherwise go out at the end of this loop turn)."""
        count = self._frame.count
        if not count:
            return
        frame = self._frame.take()
        self._published += count
        if self._error is None and frame is not None:
            self._proto.write(frame)

    def _wake(self) -> None:
        w = self._waiter
        if w is not None:
            self._waiter = None
            if not w.done():
                w.set_result(None)

    async def _wait(self) -> None:
        # a waiter left cancelled by a cancelled ready() (asyncio.wait_for) must not fail the next wait
        if self._waiter is None or self._waiter.done():
            self._waiter = self._loop.create_future()
        await self._waiter

    def on_confirm(self, data: bytes, pos: int, count: int) -> None:
        if self._report:
            confirm_each(data, pos, count, self._sink.on_confirm, now_ns())
        self._done += count
        if self._waiter is not None:
            self._wake()

    def on_error(self, data: bytes, pos: int, count: int) -> None:
        t = now_ns()
        for i in range(count):
            seq, code = _ERR.unpack_from(data, pos + 10 * i)
            log.debug("stream %s: message %d refused with code %d", self.stream, seq, code)
            if self._report:
                self._sink.on_confirm(seq, False, t)
        self._done += count
        if self._waiter is not None:
            self._wake()

    def on_connection_lost(self, err: BrokerError) -> None:
        self._error = err
        self._wake()

    async def drain(self, timeout: float) -> int:
        """Flush and wait for every confirm; return how many are still outstanding."""
        self.flush()
        if self._published == self._done:
            return 0
        deadline = self._loop.time() + timeout
        while self._published != self._done and self._error is None:
            left = deadline - self._loop.time()
            if left <= 0:
                break
            if self._waiter is None or self._waiter.done():
                self._waiter = self._loop.create_future()
            timer = self._loop.call_later(left, self._wake)
            try:
                await self._waiter
            finally:
                timer.cancel()
        return self.outstanding

    async def aclose(self) -> None:
        self.flush()
        proto = self._proto
        if proto.closed is None:
            try:
                await proto.request(schema.DeletePublisher(proto.next_corr(), publisher_id=self._id),
                                    "delete publisher", timeout=3)
            except BrokerError:
                pass
        proto.publishers.pop(self._id, None)
        await proto.close()
