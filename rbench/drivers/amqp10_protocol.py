"""AMQP 1.0 connection state machine over asyncio: SASL, open, sessions, attach/detach, close.

The rare frames (everything but transfer, disposition and link flow) are encoded and
decoded here with the general codec (rbench.codec.amqp10); the per-message frames are
handled in C by rbench.drivers._amqp10_link, whose FrameReader hands everything else back
to ``Connection._frame``. One session per link keeps delivery-ids of a link consecutive,
so a disposition's [first, last] range maps straight onto the link's deliveries.

Outbound frames are appended to ``reader.out`` (shared with the C links) and written
once per loop iteration (``schedule_flush``), so a burst of transfers is one syscall.
The transport's protocol is the C ``FrameReader`` (``Connection.protocol``), not this
class: a read runs no Python unless a rare frame arrived, and what the links answered
in it (dispositions, flow) is written by the reader at the end of that read.
Refusals become the named errors of rbench/drivers/replies.py, one line each.
"""
from __future__ import annotations

import asyncio
import logging
import struct
from typing import Any

from rbench.codec.amqp10 import Described, Symbol, UInt, ULong, UShort, decode_value_at, encode_value
from rbench.drivers import replies
from rbench.drivers._amqp10_link import FrameReader, empty_frame
from rbench.drivers.amqp10_uri import Amqp10Uri
from rbench.drivers.connect import AMQP_FRAME_MAX
from rbench.drivers.replies import AccessRefused, AmqpError, ConnectionLost
from rbench.errors import BrokerError, CodecError

log = logging.getLogger(__name__)

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
FLUSH_BYTES = 256 * 1024
WINDOW = 0x7FFFFFFF                 # session windows: we never hold the broker back at session level

# performatives (part 2 §2.7) and SASL frames (part 5 §5.3)
OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
SASL_MECHANISMS, SASL_INIT, SASL_OUTCOME = 0x40, 0x41, 0x44
SOURCE, TARGET, ERROR = 0x28, 0x29, 0x1D

# AMQP 1.0 error conditions → the named errors every driver shares
CONDITIONS: dict[str, type[AmqpError]] = {
    "amqp:unauthorized-access": replies.AccessRefused,
    "amqp:not-found": replies.NotFound,
    "amqp:resource-limit-exceeded": replies.ResourceError,
    "amqp:resource-locked": replies.ResourceLocked,
    "amqp:resource-deleted": replies.NotFound,
    "amqp:precondition-failed": replies.PreconditionFailed,
    "amqp:not-allowed": replies.NotAllowed,
    "amqp:not-implemented": replies.NotImplemented_,
    "amqp:internal-error": replies.InternalError,
    "amqp:decode-error": replies.SyntaxError_,
    "amqp:invalid-field": replies.CommandInvalid,
    "amqp:illegal-state": replies.CommandInvalid,
    "amqp:frame-size-too-small": replies.FrameError,
    "amqp:connection:forced": replies.ConnectionForced,
    "amqp:connection:framing-error": replies.FrameError,
    "amqp:link:message-size-exceeded": replies.ContentTooLarge,
    "amqp:link:detach-forced": replies.ChannelError,
    "amqp:session:window-violation": replies.ChannelError,
}


class OpenRefused(ConnectionLost):
    """The broker ended the connection after our open (SASL done) without an open or a close of its own:
    RabbitMQ 4.0 does this for a vhost it refuses, the reason only in its log."""


def refusal(error: Any, scope: str, doing: str) -> AmqpError:
    """The named error for an AMQP 1.0 error (a described list: condition, description, info)."""
    fields = list(error.value) if isinstance(error, Described) else []
    condition = str(fields[0]) if fields else "unknown"
    description = str(fields[1]) if len(fields) > 1 and fields[1] is not None else ""
    cls = CONDITIONS.get(condition, AmqpError)
    text = f"{condition} {description}".strip()
    return cls(f"{doing}: broker closed the {scope} with {text}", None, text, scope)


def performative(code: int, fields: list[Any]) -> bytes:
    return encode_value(Described(ULong(code), fields))


def frame(channel: int, body: bytes, frame_type: int = 0) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, frame_type, channel) + body


class Session:
    """One session carrying one link: its channels, the link's attach/detach, its errors."""

    def __init__(self, conn: Connection, channel: int) -> None:
        self.conn = conn
        self.channel = channel
        self.remote_channel = -1
        self.remote_next_outgoing_id = 0
        self.begun: asyncio.Future[None] = conn.loop.create_future()
        self.attached: asyncio.Future[list[Any]] = conn.loop.create_future()
        self.detached: asyncio.Future[None] = conn.loop.create_future()
        self.ended: asyncio.Future[None] = conn.loop.create_future()
        self.error: BaseException | None = None
        self.doing = "begin session"
        self.closing = False
        self.close_listeners: list[Any] = []

    def send(self, code: int, fields: list[Any]) -> None:
        self.conn.send(frame(self.channel, performative(code, fields)))

    def failed(self, error: BaseException) -> None:
        """The session or its link is gone: fail what waits, tell the link's owner."""
        if self.error is not None:
            return
        self.error = error
        for fut in (self.begun, self.attached, self.detached, self.ended):
            if not fut.done():
                fut.set_exception(error)
                fut.exception()          # retrieved: an unawaited future must not warn
        for listener in self.close_listeners:
            try:
                listener(error)
            except Exception:
                log.exception("session close listener failed")

    async def attach(self, fields: list[Any], doing: str) -> list[Any]:
        """Attach the link; a refusal (the broker attaches with a null terminus, then detaches) raises."""
        self.doing = doing
        self.send(ATTACH, fields)
        self.conn.flush()
        reply = await self.attached
        terminus = reply[5] if fields[2] is True else reply[6]          # we receive: its source; we send: its target
        if terminus is None:
            await self.detached                                         # raises the detach's error
            raise replies.NotFound(f"{doing}: refused by the broker", None, "", "link")
        return reply

    async def end(self, timeout: float = 5.0) -> None:
        """End a session that carries no link (the vhost probe at connect)."""
        self.closing = True
        self.send(END, [])
        self.conn.flush()
        try:
            await asyncio.wait_for(asyncio.shield(self.ended), timeout)
        finally:
            self.conn.forget(self)

    async def close(self, handle: int, timeout: float = 5.0) -> None:
        """Detach the link (closed) and end the session, bounded."""
        if self.error is not None or self.conn.error is not None:
            self.conn.forget(self)
            return
        self.closing = True
        try:
            self.send(DETACH, [UInt(handle), True])
            self.send(END, [])
            self.conn.flush()
            await asyncio.wait_for(asyncio.shield(self.ended), timeout)
        except (asyncio.TimeoutError, BrokerError):
            pass
        self.conn.forget(self)


class Connection:
    """One AMQP 1.0 connection: SASL, open, heartbeats, sessions, close.

    Its ``reader`` is the transport's protocol (``loop.create_connection(conn.protocol, ...)``) and passes
    the connection events and the rare frames on to the methods below."""

    def __init__(self, loop: asyncio.AbstractEventLoop, uri: Amqp10Uri, name: str = "rbench") -> None:
        self.loop = loop
        self.uri = uri
        self.opened_with = ""            # the URI text this connection was opened with (set by amqp10.connect)
        self.name = name
        self.reader = FrameReader(self)
        self.transport: asyncio.Transport | None = None
        self._flush_handle: asyncio.Handle | None = None
        self.opened: asyncio.Future[None] = loop.create_future()
        self.lost: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        self.sessions: dict[int, Session] = {}          # our channel → session
        self.remote: dict[int, Session] = {}            # the broker's channel → session
        self.max_frame = min(uri.frame_max, AMQP_FRAME_MAX)
        self.channel_max = uri.channel_max
        self.remote_properties: dict[Any, Any] = {}
        self.error: BaseException | None = None
        self.authenticated = False                     # SASL succeeded: a refusal after it is about the vhost
        self.write_paused = False
        self.flow_listeners: set[Any] = set()
        self._stage = "connecting"
        self._next_channel = 0
        self._hb: asyncio.TimerHandle | None = None
        self._hb_interval = 0.0

    # ---- the transport's events, passed on by the reader (the transport's protocol) ------
    def protocol(self) -> asyncio.Protocol:
        """The protocol factory for loop.create_connection: this connection's reader."""
        return self.reader

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._stage = "SASL header"
        transport.write(SASL_HEADER)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        """Bytes from the broker (the reader's own data_received, for callers holding the connection)."""
        self.reader.data_received(data)

    def frames(self, frames: list[tuple[int, int, bytes]]) -> None:
        """The frames of one read the reader did not handle in C (the rare ones), in order."""
        for channel, frame_type, body in frames:
            try:
                self._frame(channel, frame_type, body)
            except CodecError as exc:
                self.protocol_error(exc)
                return

    def protocol_error(self, exc: CodecError) -> None:
        self._fatal(BrokerError(f"protocol error from broker: {exc}"))

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        detail = f": {exc}" if exc else ""
        if self._stage in ("AMQP header", "open"):
            err: BaseException = OpenRefused(f"broker closed the connection during {self._stage}{detail}",
                                             scope="connection")
        elif self._stage in ("SASL header", "SASL"):
            hint = " - usually a wrong user or password" if self._stage == "SASL" else ""
            err = ConnectionLost(f"broker closed the connection during {self._stage}{hint}{detail}",
                                 scope="connection")
        else:
            err = ConnectionLost(f"connection lost{detail}", scope="connection")
        self._shutdown(err)
        if not self.lost.done():
            self.lost.set_result(None)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        for listener in list(self.flow_listeners):
            listener()

    # ---- output -------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        self.reader.out += data
        self.schedule_flush()

    def schedule_flush(self) -> None:
        if self._flush_handle is None:
            self._flush_handle = self.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write everything buffered (one transport.write); the C links append to the new buffer."""
        self._flush_handle = None
        self.reader.flush()

    # ---- inbound ------------------------------------------------------------------------
    def _frame(self, channel: int, frame_type: int, body: bytes) -> None:
        if channel < 0:
            self._header(body)
            return
        value, offset = decode_value_at(body, 0)
        if not isinstance(value, Described):
            raise CodecError("expected a described performative")
        code = int(value.descriptor) if isinstance(value.descriptor, int) else -1
        fields: list[Any] = list(value.value or [])
        if frame_type == 1:
            self._sasl(code, fields)
        elif code == OPEN:
            self._on_open(fields)
        elif code == CLOSE:
            self._on_close(fields)
        elif code in (BEGIN, ATTACH, DETACH, END):
            self._session_frame(channel, code, fields)
        # flow for no registered link, dispositions to a receiver, transfers after a detach: nothing to do

    def _header(self, header: bytes) -> None:
        if self._stage == "SASL header":
            if header != SASL_HEADER:
                raise CodecError(f"broker answered the SASL header with {header!r}")
            self._stage = "SASL"
        elif self._stage == "AMQP header":
            if header != AMQP_HEADER:
                raise CodecError(f"broker answered the AMQP header with {header!r}")
            self._stage = "open"
        else:
            raise CodecError(f"unexpected protocol header {header!r} during {self._stage}")

    def _sasl(self, code: int, fields: list[Any]) -> None:
        u = self.uri
        if code == SASL_MECHANISMS:
            offered = fields[0] if fields else []
            names = {str(m) for m in (offered.items if hasattr(offered, "items") and not isinstance(offered, dict)
                                      else offered if isinstance(offered, list) else [offered])}
            mech = "ANONYMOUS" if u.sasl == "anonymous" else "PLAIN"
            if mech not in names:
                self._fatal(AccessRefused(f"SASL {mech} is not offered by the broker (offers {', '.join(sorted(names))})",
                                          None, "", "connection"))
                return
            response = (b"\0" + u.user.encode() + b"\0" + u.password.encode()) if mech == "PLAIN" else b"rbench"
            self.send(frame(0, performative(SASL_INIT, [Symbol(mech), response, u.host]), 1))
            self.flush()
        elif code == SASL_OUTCOME:
            outcome = int(fields[0]) if fields else 1
            if outcome != 0:
                who = f"user {u.user!r}" if u.sasl == "plain" else "anonymous login"
                self._fatal(AccessRefused(f"authentication refused for {who} (SASL outcome {outcome})",
                                          None, "", "connection"))
                return
            self._stage = "AMQP header"
            self.authenticated = True
            idle_ms = u.heartbeat * 2000 if u.heartbeat else None
            self.send(AMQP_HEADER + frame(0, performative(OPEN, [
                f"{self.name}", f"vhost:{u.vhost}", UInt(self.max_frame), UShort(min(self.channel_max, 65535)),
                UInt(idle_ms) if idle_ms else None])))
            self.flush()

    def _on_open(self, fields: list[Any]) -> None:
        theirs = fields[2] if len(fields) > 2 and fields[2] is not None else 0xFFFFFFFF
        self.max_frame = max(512, min(self.max_frame, int(theirs)))
        if len(fields) > 3 and fields[3] is not None:
            self.channel_max = min(self.channel_max, int(fields[3]))
        idle = int(fields[4]) if len(fields) > 4 and fields[4] else 0
        if len(fields) > 9 and isinstance(fields[9], dict):
            self.remote_properties = fields[9]
        if idle:                                    # send something at least every half of its timeout
            self._hb_interval = idle / 2000.0
            self._hb = self.loop.call_later(self._hb_interval, self._heartbeat)
        self._stage = "open"
        if not self.opened.done():
            self.opened.set_result(None)
        self._stage = "opened"

    def _heartbeat(self) -> None:
        if self.error is not None:
            return
        if not self.reader.wrote:
            self.send(empty_frame())
        self.reader.wrote = False
        self._hb = self.loop.call_later(self._hb_interval, self._heartbeat)

    def _on_close(self, fields: list[Any]) -> None:
        error = fields[0] if fields else None
        if self.closed.done() or self._stage == "closing":
            if not self.closed.done():
                self.closed.set_result(None)
            self._shutdown(BrokerError("connection closed by the client"))
            return
        self.send(frame(0, performative(CLOSE, [])))
        self.flush()
        doing = {"open": "open connection", "AMQP header": "open connection"}.get(self._stage, "connection")
        if error is None:
            self._fatal(replies.ConnectionForced("broker closed the connection", None, "", "connection"))
        else:
            self._fatal(refusal(error, "connection", doing))

    def _session_frame(self, channel: int, code: int, fields: list[Any]) -> None:
        if code == BEGIN:
            ours = fields[0]
            session = self.sessions.get(int(ours)) if ours is not None else None
            if session is None:
                return
            session.remote_channel = channel
            session.remote_next_outgoing_id = int(fields[1] or 0)
            self.remote[channel] = session
            if not session.begun.done():
                session.begun.set_result(None)
            return
        session = self.remote.get(channel)
        if session is None:
            return
        if code == ATTACH:
            if not session.attached.done():
                session.attached.set_result(fields)
        elif code == DETACH:
            error = fields[2] if len(fields) > 2 else None
            if error is not None:
                session.failed(refusal(error, "link", session.doing))
            elif not session.detached.done():
                session.detached.set_result(None)
            if session.error is None and not session.closing and session.attached.done() and self.error is None:
                session.failed(BrokerError(f"{session.doing}: the broker detached the link"))
        elif code == END:
            error = fields[0] if fields else None
            if not session.ended.done() and error is None:
                session.ended.set_result(None)
            session.failed(refusal(error, "session", session.doing) if error is not None
                           else BrokerError(f"{session.doing}: session ended"))
            self.forget(session)

    # ---- sessions -----------------------------------------------------------------------
    async def begin(self, doing: str) -> Session:
        if self.error is not None:
            raise self.error
        channel = self._next_channel
        while channel in self.sessions:
            channel = (channel + 1) % (self.channel_max + 1)
        self._next_channel = (channel + 1) % (self.channel_max + 1)
        session = Session(self, channel)
        session.doing = doing
        self.sessions[channel] = session
        session.send(BEGIN, [None, UInt(0), UInt(WINDOW), UInt(WINDOW)])
        self.flush()
        await session.begun
        return session

    def forget(self, session: Session) -> None:
        self.sessions.pop(session.channel, None)
        if self.remote.get(session.remote_channel) is session:
            del self.remote[session.remote_channel]
        self.reader.remove(session.remote_channel)

    # ---- errors and closing -------------------------------------------------------------
    def _fatal(self, error: BaseException) -> None:
        self._shutdown(error)
        if self.transport is not None:
            self.transport.abort()

    def _shutdown(self, error: BaseException) -> None:
        if self.error is not None:
            return
        self.error = error
        if self._hb is not None:
            self._hb.cancel()
        for fut in (self.opened, self.closed):
            if not fut.done():
                fut.set_exception(error)
                fut.exception()
        for session in list(self.sessions.values()):
            session.failed(error)
        for listener in list(self.flow_listeners):
            listener()

    async def close(self, timeout: float = 5.0) -> None:
        """close, wait for the broker's close (bounded), then drop the socket."""
        if self.error is None and self.transport is not None:
            self._stage = "closing"
            self.send(frame(0, performative(CLOSE, [])))
            self.flush()
            try:
                await asyncio.wait_for(asyncio.shield(self.closed), timeout)
            except (asyncio.TimeoutError, BrokerError):
                pass
            self._shutdown(BrokerError("connection closed by the client"))
        if self.transport is not None:
            self.transport.close()
            try:
                await asyncio.wait_for(asyncio.shield(self.lost), timeout)
            except asyncio.TimeoutError:
                self.transport.abort()


__all__ = ["Connection", "Session", "refusal"]
