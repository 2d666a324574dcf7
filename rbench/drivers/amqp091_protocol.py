"""AMQP 0-9-1 wire state machine over an asyncio BufferedProtocol.

Why a BufferedProtocol: uvloop reads straight into the codec's receive buffer
(``FrameReader.get_buffer``), so a read costs no bytes object and frames are split
in place. Outbound frames are appended to one bytearray and written once per loop
iteration (``schedule_flush``), so a burst of publishes and acks is one syscall.

This module knows the connection handshake (PLAIN), tune, heartbeats, blocked /
unblocked, channels and their synchronous RPCs, and maps connection.close and
channel.close to named errors. Publishing and consuming policy lives in
rbench/drivers/amqp091_publisher.py and amqp091_consumer.py.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import platform
from collections.abc import Callable
from typing import Any

from rbench.codec.amqp091 import (
    PROTOCOL_HEADER,
    FrameReader,
    K,
    encode_heartbeat,
    encode_method,
    key,
    method_name,
)
from rbench.drivers.connect import AMQP_FRAME_MAX
from rbench.drivers.replies import AmqpError, ConnectionLost, error_for
from rbench.errors import BrokerError, CodecError

log = logging.getLogger(__name__)

FLUSH_BYTES = 256 * 1024          # write at once when this much is buffered (large bursts)
MAX_MISSED_HEARTBEATS = 2
# the tx class (PerfTest -m / -n), which the codec's K does not name
TX_SELECT, TX_SELECT_OK, TX_COMMIT, TX_COMMIT_OK = key(90, 10), key(90, 11), key(90, 20), key(90, 21)


class Channel:
    """One AMQP channel: numbered, with a FIFO of outstanding synchronous RPCs.

    Replies to synchronous methods arrive in request order on a channel, so a deque of
    (expected reply keys, future, description) is all the bookkeeping needed.
    """

    def __init__(self, conn: Connection, number: int) -> None:
        self.conn = conn
        self.number = number
        self.error: BaseException | None = None
        self._rpcs: collections.deque[tuple[tuple[int, ...], asyncio.Future[Any], str]] = collections.deque()
        self.on_return: Callable[[tuple[Any, ...], dict[str, Any], bytes], None] | None = None
        self.on_cancel: Callable[[str], None] | None = None
        self.close_listeners: list[Callable[[BaseException], None]] = []
        self._last_doing = "channel"

    def send_method(self, key: int, args: tuple[Any, ...] = ()) -> None:
        """Queue a method without waiting for a reply (acks, nowait methods)."""
        if self.error is not None:
            raise self.error
        self.conn.send(encode_method(self.number, key, args))

    async def rpc(self, key: int, args: tuple[Any, ...], expect: tuple[int, ...], doing: str = "") -> tuple[int, Any]:
        """Send a synchronous method and wait for its reply: (key, args)."""
        if self.error is not None:
            raise self.error
        fut: asyncio.Future[tuple[int, Any]] = self.conn.loop.create_future()
        description = doing or method_name(key)
        self._rpcs.append((expect, fut, description))
        self._last_doing = description
        self.conn.send(encode_method(self.number, key, args))
        self.conn.flush()
        return await fut

    def dispatch(self, key: int, args: tuple[Any, ...]) -> None:
        """A method from the broker on this channel."""
        if key == K.CHANNEL_CLOSE:
            code, text, class_id, method_id = args
            # reply first: the broker keeps the channel number reserved until close-ok
            self.conn.send(encode_method(self.number, K.CHANNEL_CLOSE_OK))
            doing = self._rpcs[0][2] if self._rpcs else self._last_doing
            if class_id:
                doing = f"{doing} ({method_name(class_id << 16 | method_id)})"
            self.closed(error_for(code, text, "channel", doing))
            return
        if key == K.BASIC_CANCEL:      # the broker cancelled a consumer (queue deleted, ...)
            tag, nowait = args
            if not nowait:
                self.conn.send(encode_method(self.number, K.BASIC_CANCEL_OK, (tag,)))
            if self.on_cancel is not None:
                self.on_cancel(tag)
            return
        if key == K.CHANNEL_FLOW:
            self.conn.send(encode_method(self.number, K.CHANNEL_FLOW_OK, (args[0],)))
            return
        if self._rpcs and key in self._rpcs[0][0]:
            _, fut, _ = self._rpcs.popleft()
            if not fut.done():
                fut.set_result((key, args))
            if key == K.CHANNEL_CLOSE_OK:
                self.closed(BrokerError(f"channel {self.number} closed by the client"))
            return
        log.debug("channel %d: unexpected %s", self.number, method_name(key))

    def content(self, key: int, args: tuple[Any, ...], props: dict[str, Any], body: bytes) -> None:
        if key == K.BASIC_RETURN:
            if self.on_return is not None:
                self.on_return(args, props, body)
        elif key == K.BASIC_GET_OK and self._rpcs:
            _, fut, _ = self._rpcs.popleft()
            if not fut.done():
                fut.set_result((key, (args, props, body)))

    def closed(self, error: BaseException) -> None:
        """The channel is gone (broker close, our close, or the connection died)."""
        if self.error is not None:
            return
        self.error = error
        while self._rpcs:
            _, fut, _ = self._rpcs.popleft()
            if not fut.done():
                fut.set_exception(error)
        self.conn.forget_channel(self.number)
        for listener in self.close_listeners:
            try:
                listener(error)
            except Exception:    # a listener must not stop the others
                log.exception("channel close listener failed")

    async def close(self, timeout: float = 5.0) -> None:
        """channel.close and wait for close-ok (bounded)."""
        if self.error is not None or self.conn.error is not None:
            return
        try:
            await asyncio.wait_for(self.rpc(K.CHANNEL_CLOSE, (200, "bye", 0, 0), (K.CHANNEL_CLOSE_OK,), "close channel"),
                                   timeout)
        except (asyncio.TimeoutError, BrokerError):
            pass


class Connection(asyncio.BufferedProtocol):
    """One AMQP connection: handshake, heartbeats, flow control, channel routing."""

    def __init__(self, loop: asyncio.AbstractEventLoop, user: str, password: str, vhost: str,
                 heartbeat: int = 60, frame_max: int = AMQP_FRAME_MAX, channel_max: int = 2047,
                 name: str = "rbench") -> None:
        frame_max = min(frame_max, AMQP_FRAME_MAX)      # more would not fit the reader's buffer
        self.loop = loop
        self._user = user
        self._password = password
        self.vhost = vhost
        self._want_heartbeat = heartbeat
        self._want_frame_max = frame_max
        self._want_channel_max = channel_max
        self._name = name
        self.uri = ""                    # the URI this connection was opened with (set by amqp091.connect)
        self.reader = FrameReader(self._on_method, self._on_content, self._on_heartbeat, frame_max=frame_max)
        self.out = bytearray()
        self._flush_handle: asyncio.Handle | None = None
        self.transport: asyncio.Transport | None = None
        self.opened: asyncio.Future[None] = loop.create_future()
        self.lost: asyncio.Future[None] = loop.create_future()
        self.channels: dict[int, Channel] = {}
        self.server_properties: dict[str, Any] = {}
        self.frame_max = frame_max
        self.channel_max = channel_max
        self.heartbeat = 0
        self.blocked = False
        self.write_paused = False
        self.error: BaseException | None = None
        self.flow_listeners: set[Callable[[], None]] = set()
        self._stage = "connecting"
        self._rx = True
        self._tx = False
        self._missed = 0
        self._hb_handle: asyncio.TimerHandle | None = None
        self._close_ok: asyncio.Future[None] | None = None

    # ---- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._stage = "protocol header"
        transport.write(PROTOCOL_HEADER)  # type: ignore[attr-defined]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self._rx = True
        while True:
            try:
                self.reader.feed(nbytes)
                return
            except CodecError as exc:
                self._fatal(BrokerError(f"protocol error from broker: {exc}"))
                return
            except Exception:     # a user callback raised: the frame was consumed, go on
                log.exception("AMQP callback failed")
                nbytes = 0

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self._stage in ("protocol header", "start", "tune", "open"):
            detail = f" ({exc})" if exc else ""
            hint = " - usually a wrong user or password" if self._stage in ("start", "tune") else ""
            err: BaseException = ConnectionLost(f"broker closed the connection during {self._stage}{hint}{detail}",
                                                 scope="connection")
        else:
            err = ConnectionLost(f"connection lost{f': {exc}' if exc else ''}", scope="connection")
        self._shutdown(err)
        if not self.lost.done():
            self.lost.set_result(None)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._notify_flow()

    # ---- output -------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        self.out += data
        if self._flush_handle is None:
            self._flush_handle = self.loop.call_soon(self.flush)

    def schedule_flush(self) -> None:
        if self._flush_handle is None:
            self._flush_handle = self.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write everything buffered (one transport.write)."""
        self._flush_handle = None
        if self.out and self.transport is not None and not self.transport.is_closing():
            data, self.out = self.out, bytearray()
            self.transport.write(data)
            self._tx = True

    # ---- inbound ------------------------------------------------------------------------
    def _on_heartbeat(self) -> None:
        pass    # any inbound byte counts as liveness (self._rx)

    def _on_content(self, channel: int, key: int, args: tuple[Any, ...], props: dict[str, Any], body: bytes) -> None:
        ch = self.channels.get(channel)
        if ch is not None:
            ch.content(key, args, props, body)

    def _on_method(self, channel: int, key: int, args: tuple[Any, ...]) -> None:
        if channel:
            ch = self.channels.get(channel)
            if ch is not None:
                ch.dispatch(key, args)
            return
        if key == K.CONNECTION_START:
            self._start(args)
        elif key == K.CONNECTION_TUNE:
            self._tune(args)
        elif key == K.CONNECTION_OPEN_OK:
            self._stage = "open"
            self._stage = "running"
            if not self.opened.done():
                self.opened.set_result(None)
        elif key == K.CONNECTION_CLOSE:
            code, text, class_id, method_id = args
            self.send(encode_method(0, K.CONNECTION_CLOSE_OK))
            self.flush()
            doing = {"start": "authentication", "tune": "authentication", "open": f"open vhost {self.vhost!r}"}.get(
                self._stage, "connection")
            self._shutdown(error_for(code, text, "connection", doing))
            if self.transport is not None:
                self.transport.close()
        elif key == K.CONNECTION_CLOSE_OK:
            if self._close_ok is not None and not self._close_ok.done():
                self._close_ok.set_result(None)
            if self.transport is not None:
                self.transport.close()
        elif key == K.CONNECTION_BLOCKED:
            self.blocked = True
            log.info("connection blocked by the broker: %s", args[0])
        elif key == K.CONNECTION_UNBLOCKED:
            self.blocked = False
            self._notify_flow()
        elif key == K.CONNECTION_SECURE:
            self._fatal(BrokerError("broker asked for a SASL challenge; only PLAIN is supported"))

    def _start(self, args: tuple[Any, ...]) -> None:
        _major, _minor, server_props, mechanisms, _locales = args
        self.server_properties = server_props
        mechs = (mechanisms.decode() if isinstance(mechanisms, bytes) else mechanisms).split()
        if "PLAIN" not in mechs:
            self._fatal(BrokerError(f"broker offers no PLAIN authentication (offers {' '.join(mechs)})"))
            return
        self._stage = "start"
        client_props = {
            "product": "rbench", "platform": f"Python {platform.python_version()}", "version": "0.1",
            "connection_name": self._name,
            "capabilities": {"publisher_confirms": True, "exchange_exchange_bindings": True, "basic.nack": True,
                             "consumer_cancel_notify": True, "connection.blocked": True,
                             "authentication_failure_close": True, "per_consumer_qos": True},
        }
        response = b"\x00" + self._user.encode() + b"\x00" + self._password.encode()
        self.send(encode_method(0, K.CONNECTION_START_OK, (client_props, "PLAIN", response, "en_US")))
        self.flush()

    def _tune(self, args: tuple[Any, ...]) -> None:
        self._stage = "tune"
        server_channel_max, server_frame_max, server_heartbeat = args

        def lower(a: int, b: int) -> int:   # 0 means "no limit" on either side
            return min(a, b) if a and b else (a or b)

        self.channel_max = lower(server_channel_max, self._want_channel_max) or 2047
        self.frame_max = lower(server_frame_max, self._want_frame_max)
        self.heartbeat = lower(server_heartbeat, self._want_heartbeat) if self._want_heartbeat else 0
        self.reader.frame_max = self.frame_max
        self.send(encode_method(0, K.CONNECTION_TUNE_OK, (self.channel_max, self.frame_max, self.heartbeat)))
        self.send(encode_method(0, K.CONNECTION_OPEN, (self.vhost, "", False)))
        self._stage = "open"
        self.flush()
        if self.heartbeat:
            self._hb_handle = self.loop.call_later(self.heartbeat / 2, self._heartbeat_tick)

    def _heartbeat_tick(self) -> None:
        """Every heartbeat/2 s: send one if we were silent; give up after missed ones."""
        if self.error is not None or self.transport is None:
            return
        if self._rx:
            self._rx = False
            self._missed = 0
        else:
            self._missed += 1
            if self._missed >= MAX_MISSED_HEARTBEATS * 2:
                self._fatal(ConnectionLost(f"no data or heartbeat from the broker for {self.heartbeat * 2} s",
                                           scope="connection"))
                return
        if not self._tx:
            self.send(encode_heartbeat())
        self._tx = False
        self._hb_handle = self.loop.call_later(self.heartbeat / 2, self._heartbeat_tick)

    # ---- channels -----------------------------------------------------------------------
    async def channel(self) -> Channel:
        """Open a new channel on the lowest free number."""
        if self.error is not None:
            raise self.error
        number = next((n for n in range(1, self.channel_max + 1) if n not in self.channels), None)
        if number is None:
            raise BrokerError(f"no free channel (channel_max {self.channel_max})")
        ch = Channel(self, number)
        self.channels[number] = ch
        await ch.rpc(K.CHANNEL_OPEN, ("",), (K.CHANNEL_OPEN_OK,), "open channel")
        return ch

    def forget_channel(self, number: int) -> None:
        self.channels.pop(number, None)
        self.reader.forget_channel(number)

    # ---- flow control -------------------------------------------------------------------
    def _notify_flow(self) -> None:
        for listener in list(self.flow_listeners):
            listener()

    # ---- shutdown -----------------------------------------------------------------------
    def _fatal(self, error: BaseException) -> None:
        self._shutdown(error)
        if self.transport is not None:
            self.transport.abort()

    def _shutdown(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
        if self._hb_handle is not None:
            self._hb_handle.cancel()
            self._hb_handle = None
        if not self.opened.done():
            self.opened.set_exception(self.error)
            self.opened.exception()        # retrieved: no "never retrieved" warning
        for ch in list(self.channels.values()):
            ch.closed(self.error)
        if self._close_ok is not None and not self._close_ok.done():
            self._close_ok.set_result(None)
        self._notify_flow()

    def give_up(self, error: BaseException) -> None:
        """End this connection's work now with ``error`` (every channel closed with it, so publishers raise it):
        a task whose other connection died treats this one as lost too, then closes it."""
        self._shutdown(error)

    async def close(self, timeout: float = 5.0) -> None:
        """connection.close, wait for close-ok and the socket to go (bounded)."""
        if self.transport is None:
            return
        if self.error is None:
            self._close_ok = self.loop.create_future()
            self.send(encode_method(0, K.CONNECTION_CLOSE, (200, "bye", 0, 0)))
            self.flush()
            try:
                await asyncio.wait_for(asyncio.shield(self._close_ok), timeout)
            except asyncio.TimeoutError:
                pass
            self._shutdown(BrokerError("connection closed by the client"))
        self.transport.close()
        try:
            await asyncio.wait_for(asyncio.shield(self.lost), timeout)
        except asyncio.TimeoutError:
            self.transport.abort()


__all__ = ["AmqpError", "Channel", "Connection"]
