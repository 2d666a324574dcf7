"""RabbitMQ Streams wire layer under rbench's stream driver.

Why this exists: rstream's high-level Producer/Consumer encode every message through
dataclass reflection and read the socket 256 bytes at a time, which costs several
microseconds per message - more than the whole budget RbFly needs. So rbench keeps
rstream for what it does well and is not on the hot path (TCP connect, SASL, tune,
open; the request/response control frames via ``rstream.schema``/``rstream.encoding``)
and, once the connection is open, moves the socket onto :class:`StreamProtocol`, an
``asyncio.Protocol`` that

* writes pre-encoded ``Publish`` frames (many messages per frame, built in one
  ``bytearray``),
* parses ``PublishConfirm``/``PublishError``/``Deliver`` with ``struct`` straight
  from the received ``bytes`` (no per-frame objects),
* answers heartbeats, ``ConsumerUpdate`` (single active consumer) and ``Close``.

Protocol reference: RabbitMQ stream protocol (PROTOCOL.adoc in rabbitmq-server,
deps/rabbitmq_stream/docs). All integers are big-endian.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import struct
import time
import zlib
from collections.abc import Callable
from typing import Any, cast

from rstream import exceptions as rs_exc
from rstream import schema
from rstream.client import Client
from rstream.encoding import decode_frame, encode_frame

from rbench.config.uri import AMQP_SCHEMES, STREAM_SCHEMES, mask_uri, parse_uri
from rbench.drivers.replies import ConnectionLost, named
from rbench.errors import BrokerError, ConfigError, ConnectError, os_error_text

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 8.0          # the brief: ConnectError within 10 s
REQUEST_TIMEOUT_S = 10.0
DEFAULT_PORT = 5552
FRAME_MAX = 1024 * 1024

# frame keys (server → client unless noted)
K_PUBLISH_CONFIRM = 3
K_PUBLISH_ERROR = 4
K_DELIVER = 8
K_CREDIT = 9
K_METADATA_UPDATE = 16
K_CLOSE = 22
K_HEARTBEAT = 23
K_CONSUMER_UPDATE = 26
RESPONSE = 0x8000

_U32 = struct.Struct(">I")
_CHUNK = struct.Struct(">bbHIqQQiIII")  # Osiris chunk header after the subscription id (48 bytes)
_SUB_BATCH = struct.Struct(">BHII")     # entry type|compression, records, uncompressed, size
_CREDIT = struct.Struct(">IHHBH")       # size, key, version, subscription id, credit
_HEARTBEAT = struct.Struct(">IHH").pack(4, K_HEARTBEAT, 1)

# stream protocol response codes → (name, closest AMQP reply code for BrokerError.reply_code)
RESPONSE_CODES: dict[int, tuple[str, int | None]] = {
    2: ("STREAM_DOES_NOT_EXIST", 404),
    3: ("SUBSCRIPTION_ID_ALREADY_EXISTS", 406),
    4: ("SUBSCRIPTION_ID_DOES_NOT_EXIST", 404),
    5: ("STREAM_ALREADY_EXISTS", 406),
    6: ("STREAM_NOT_AVAILABLE", 404),
    7: ("SASL_MECHANISM_NOT_SUPPORTED", 403),
    8: ("AUTHENTICATION_FAILURE", 403),
    9: ("SASL_ERROR", 403),
    12: ("VIRTUAL_HOST_ACCESS_FAILURE", 403),
    13: ("UNKNOWN_FRAME", 505),
    14: ("FRAME_TOO_LARGE", 501),
    15: ("INTERNAL_ERROR", 541),
    16: ("ACCESS_REFUSED", 403),
    17: ("PRECONDITION_FAILED", 406),
    18: ("PUBLISHER_DOES_NOT_EXIST", 404),
    19: ("NO_OFFSET", 404),
}


def response_error(code: int, doing: str) -> BrokerError:
    """A BrokerError naming the stream response code and its AMQP-style reply code."""
    name, reply = RESPONSE_CODES.get(code, (f"response code {code}", None))
    return named(f"{doing}: broker answered {name} ({code})", reply, name)


# ---------------------------------------------------------------- URIs

def parse_stream_uri(uri: str) -> tuple[str, int, str, str, str]:
    """(host, port, user, password, vhost) of a rabbitmq-stream:// URI, from its one typed value
    (rbench.config.uri, the parser validation used; AMQP vhost rules)."""
    u = parse_uri(uri, STREAM_SCHEMES)
    if u.tls:
        raise ConfigError("stream uri: TLS (rabbitmq-stream+tls) is not supported by rbench yet")
    return u.host, u.port, u.user, u.password, u.vhost


def stream_uri_from_amqp(uri: str, port: int = DEFAULT_PORT) -> str:
    """amqp://user:pass@host:5672/vhost → rabbitmq-stream://user:pass@host:5552/vhost.

    Same credentials, host and vhost; the stream plugin's default port. Used when a
    ClusterTarget lists only AMQP URIs. An AMQP URI on a port other than 5672/5671 is
    refused: the broker listens elsewhere, and guessing 5552 there would fail with a
    misleading error (or reach another broker).
    """
    u = parse_uri(uri, AMQP_SCHEMES)
    if u.explicit_port and u.port not in (5672, 5671):
        raise ConfigError(f"{u.masked}: AMQP port {u.port} is not the default, so the stream port cannot be derived "
                          f"(rbench would guess {port}); give the stream URI instead, rabbitmq-stream://… with the broker's stream port")
    return u.with_scheme_port("rabbitmq-stream", port).text()


# ---------------------------------------------------------------- AMQP 1.0 bodies

def amqp_codec() -> tuple[Callable[[Any], bytes], Callable[[Any], memoryview], str]:
    """(encode_data, decode_data, name): rbench's compiled AMQP 1.0 codec (docs/codec.md).

    The one place the driver binds its AMQP 1.0 functions; there is no pure-Python
    fallback: a build without the codec fails here, loudly.
    """
    from rbench.codec import amqp10

    return amqp10.encode_data, amqp10.decode_data, "rbench.codec.amqp10"


encode_amqp_data, decode_amqp_data, AMQP_CODEC_NAME = amqp_codec()


# ---------------------------------------------------------------- connection

class StreamProtocol(asyncio.Protocol):
    """The socket of one stream connection after rstream's handshake.

    Publishers and subscribers register by id (one byte each); control requests use
    correlation ids and are encoded/decoded with rstream's schema.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.transport: asyncio.Transport | None = None
        self.publishers: dict[int, Any] = {}
        self.subscribers: dict[int, Any] = {}
        self.frame_max = FRAME_MAX              # what the broker agreed at tune (open_connection sets it)
        self._waiters: dict[int, asyncio.Future[bytes]] = {}
        self._corr = itertools.count(1_000_000)
        self._pending: list[bytes] = []
        self._pending_len = 0
        self._need = 0
        self._writable: asyncio.Future[None] | None = None
        self.closed: BrokerError | None = None
        self.closing = False                   # close() was called: the end of the socket is not a loss
        # told when the connection is lost without close() or the broker's Close: the driver's on_lost
        self.on_lost: Callable[[ConnectionLost], None] | None = None
        self._heartbeat: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()

    # -- asyncio.Protocol
    def attach(self, transport: asyncio.Transport, leftover: bytes, heartbeat_s: int) -> None:
        self.transport = transport
        transport.set_protocol(self)
        if leftover:
            self.data_received(leftover)
        if heartbeat_s > 0:
            self._heartbeat_every = heartbeat_s
            self._heartbeat = self._loop.call_later(heartbeat_s, self._send_heartbeat)

    def _send_heartbeat(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(_HEARTBEAT)
            self._heartbeat = self._loop.call_later(self._heartbeat_every, self._send_heartbeat)

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        fut, self._writable = self._writable, None
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def writable(self) -> None:
        """Wait while the transport's write buffer is above its high-water mark."""
        while self._writable is not None:
            await asyncio.shield(self._writable)

    def connection_lost(self, exc: Exception | None) -> None:
        lost = None
        if self.closed is None:
            lost = self.closed = ConnectionLost(f"stream connection {self.name} lost{f': {exc}' if exc else ''}",
                                                scope="connection")
        self._fail_all(self.closed)
        if lost is not None and not self.closing and self.on_lost is not None:
            self.on_lost(lost)

    def _fail_all(self, err: BrokerError) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        for fut in self._waiters.values():
            if not fut.done():
                fut.set_exception(err)
        self._waiters.clear()
        self.resume_writing()
        for p in list(self.publishers.values()):
            p.on_connection_lost(err)
        for s in list(self.subscribers.values()):
            s.on_connection_lost(err)

    def data_received(self, data: bytes) -> None:
        if self._pending:
            self._pending.append(data)
            self._pending_len += len(data)
            if self._pending_len < self._need:
                return
            data = b"".join(self._pending)
            self._pending.clear()
        elif type(data) is not bytes:
            data = bytes(data)
        end = len(data)
        pos = 0
        unpack = _U32.unpack_from
        while end - pos >= 4:
            size = unpack(data, pos)[0]
            if end - pos - 4 < size:
                break
            start = pos + 4
            pos = start + size
            self._frame(data, start, pos)
        if pos < end:
            rest = data[pos:]
            self._pending = [rest]
            self._pending_len = len(rest)
            self._need = 4 + unpack(rest, 0)[0] if len(rest) >= 4 else 4

    def _frame(self, data: bytes, start: int, end: int) -> None:
        key = (data[start] << 8) | data[start + 1]
        if key == K_PUBLISH_CONFIRM:
            pub = self.publishers.get(data[start + 4])
            if pub is not None:
                pub.on_confirm(data, start + 9, _U32.unpack_from(data, start + 5)[0])
        elif key == K_DELIVER:
            sub = self.subscribers.get(data[start + 4])
            if sub is not None:
                sub.on_chunk(data, start + 5, end)
        elif key == K_CREDIT | RESPONSE:         # only on error, and with no correlation id: code, subscription
            code = struct.unpack_from(">H", data, start + 4)[0]
            sub = self.subscribers.get(data[start + 6])
            if sub is not None:
                sub.on_connection_lost(response_error(code, "credit"))
        elif key & RESPONSE:
            corr = _U32.unpack_from(data, start + 4)[0]
            fut = self._waiters.pop(corr, None)
            if fut is not None and not fut.done():
                fut.set_result(data[start:end])
        elif key == K_PUBLISH_ERROR:
            pub = self.publishers.get(data[start + 4])
            if pub is not None:
                pub.on_error(data, start + 9, _U32.unpack_from(data, start + 5)[0])
        elif key == K_HEARTBEAT:
            pass
        elif key == K_CONSUMER_UPDATE:
            corr, sid, active = struct.unpack_from(">IBB", data, start + 4)
            sub = self.subscribers.get(sid)
            if sub is None:
                self.write(consumer_update_response(corr, 1, None))
            else:
                sub.on_consumer_update(corr, bool(active))      # it answers (after a QueryOffset)
        elif key == K_METADATA_UPDATE:
            code = struct.unpack_from(">H", data, start + 4)[0]
            slen = struct.unpack_from(">H", data, start + 6)[0]
            stream = data[start + 8:start + 8 + slen].decode()
            # not a lost connection: RabbitMQ sends STREAM_NOT_AVAILABLE for a deleted stream too, and a
            # reconnect would declare it again and go on. A node lost takes its connections with it (the
            # publishers' sit on the stream's leader, the consumers' on the node they read from).
            err = response_error(code, f"stream {stream!r} changed")
            for p in list(self.publishers.values()):
                if p.stream == stream:
                    p.on_connection_lost(err)
            for s in list(self.subscribers.values()):
                if s.stream == stream:
                    s.on_connection_lost(err)
        elif key == K_CLOSE:
            corr, code = struct.unpack_from(">IH", data, start + 4)
            rlen = struct.unpack_from(">H", data, start + 10)[0]
            reason = data[start + 12:start + 12 + rlen].decode(errors="replace")
            self.write(struct.pack(">IHHIH", 10, K_CLOSE | RESPONSE, 1, corr, 1))
            self.closed = BrokerError(f"broker closed stream connection {self.name}: {reason} ({code})")
            self._fail_all(self.closed)
            if self.transport is not None:
                self.transport.close()
        else:
            log.debug("stream %s: ignoring frame key 0x%04x", self.name, key)

    # -- writing and requests
    def write(self, data: bytes | bytearray) -> None:
        if self.closed is not None:
            raise self.closed
        assert self.transport is not None
        self.transport.write(data)

    def next_corr(self) -> int:
        return next(self._corr)

    async def request(self, frame: schema.Frame, doing: str, timeout: float = REQUEST_TIMEOUT_S,
                      ok_codes: tuple[int, ...] = (1,)) -> schema.Frame:
        """Send a control frame (correlation id already set) and decode its response.

        Codes outside ``ok_codes`` raise BrokerError; callers that treat a code as
        an answer (STREAM_ALREADY_EXISTS) list it.
        """
        corr = frame.corr_id
        assert corr is not None
        fut: asyncio.Future[bytes] = self._loop.create_future()
        self._waiters[corr] = fut
        try:
            self.write(encode_frame(frame))
            raw = await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            raise BrokerError(f"{doing}: no answer from the broker within {timeout:.0f} s") from None
        finally:
            self._waiters.pop(corr, None)
        resp = decode_frame(raw)
        code = getattr(resp, "response_code", 1)
        if code not in ok_codes:
            raise response_error(code, doing)
        return resp

    async def close(self, timeout: float = 3.0) -> None:
        """Polite Close, then drop the socket (bounded: a dead broker does not hang us)."""
        self.closing = True
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        if self.closed is None and self.transport is not None and not self.transport.is_closing():
            try:
                await self.request(schema.Close(self.next_corr(), code=1, reason="OK"), "close", timeout)
            except (BrokerError, ValueError):
                pass
        if self.closed is None:
            self.closed = BrokerError(f"stream connection {self.name} closed")
        if self.transport is not None:
            self.transport.close()


def consumer_update_response(corr: int, offset_type: int, value: int | None) -> bytes:
    """ConsumerUpdateResponse: OK and where the newly active consumer starts."""
    body = struct.pack(">HHIHH", 0x8000 | K_CONSUMER_UPDATE, 1, corr, 1, offset_type)
    if value is not None:
        body += struct.pack(">q" if offset_type == 5 else ">Q", value)
    return _U32.pack(len(body)) + body


def credit_frame(subscription_id: int, credit: int) -> bytes:
    return _CREDIT.pack(7, K_CREDIT, 1, subscription_id, credit)


async def _handshake(host: str, port: int, user: str, password: str, vhost: str, name: str) -> Client:
    client = Client(host, port, frame_max=FRAME_MAX, heartbeat=60, connection_name=name)
    try:
        await client.start()
        await client.authenticate(vhost=vhost, username=user, password=password)
    except BaseException:
        try:
            await asyncio.wait_for(client.close(), 2)
        except BaseException:
            pass
        raise
    return client


async def open_connection(uri: str, name: str, timeout: float = CONNECT_TIMEOUT_S,
                          host_port: tuple[str, int] | None = None) -> tuple[StreamProtocol, dict[str, str]]:
    """Connect with rstream's Client (TCP, SASL PLAIN, tune, open), then take the socket over.

    ``host_port`` overrides where to connect (the leader a Metadata answer named)
    while keeping the URI's credentials and vhost. Returns the protocol and the
    server properties (``advertised_host``/``advertised_port`` among them).
    Every failure is a ConnectError with the password masked.
    """
    host, port, user, password, vhost = parse_stream_uri(uri)
    if host_port is not None:
        host, port = host_port
    where = mask_uri(uri) if host_port is None else f"{host}:{port} (leader, credentials of {mask_uri(uri)})"
    def failed(detail: str, code: int | None = None) -> ConnectError:
        exc = ConnectError(f"cannot connect to RabbitMQ streams at {where}: {detail}", code)
        exc.reason = detail        # type: ignore[attr-defined]  # what rbench.drivers.connect lists per URI
        return exc

    try:
        client = await asyncio.wait_for(_handshake(host, port, user, password, vhost, name), timeout)
    except (asyncio.TimeoutError, TimeoutError):
        raise failed(f"no answer within {timeout:.0f} s") from None
    except (rs_exc.AuthenticationFailure, rs_exc.SASLError, rs_exc.SASLMechanismNotSupported):
        raise failed("authentication refused (user or password)", 403) from None
    except rs_exc.ServerError as exc:
        code = getattr(exc, "code", None)
        name, reply = RESPONSE_CODES.get(code, (type(exc).__name__, None)) if isinstance(code, int) else (type(exc).__name__, None)
        raise failed(f"{name} (vhost {vhost!r})", reply) from None
    except (OSError, ConnectionError) as exc:
        raise failed(os_error_text(exc) if isinstance(exc, OSError) else str(exc) or type(exc).__name__) from None
    except Exception as exc:   # rstream wraps odd handshakes (closed socket mid-SASL) in ValueError etc.
        raise failed(type(exc).__name__) from None
    # take the socket over from rstream: stop its reader and heartbeat tasks, keep what it had read
    await client.stop_task("heartbeat_sender")
    await client.stop_task("listener")
    conn = client._conn
    assert conn is not None and conn._writer is not None and conn._reader is not None
    leftover = bytes(conn._buffer) + bytes(getattr(conn._reader, "_buffer", b""))
    transport = conn._writer.transport
    proto = StreamProtocol(name)
    # keep rstream's objects alive: its StreamWriter closes the transport when collected
    proto.rstream_client = client  # type: ignore[attr-defined]
    proto.frame_max = client.frame_max
    proto.attach(transport, leftover, client._heartbeat)  # type: ignore[arg-type]
    cast(asyncio.Transport, transport).resume_reading()
    return proto, dict(client.server_properties or {})


# ---------------------------------------------------------------- chunks

def iter_records(data: bytes, pos: int, end: int) -> tuple[int, int, list[tuple[int, int]] | list[bytes]]:
    """Parse one Osiris chunk (Deliver frame after the subscription id).

    Returns (first offset, chunk timestamp ms, records) where records are
    (start, stop) positions in ``data`` or, for compressed sub-batches, bytes.
    """
    (magic, chunk_type, entries, nrecords, ts, _epoch, first, _crc, dlen, _tlen,
     _res) = _CHUNK.unpack_from(data, pos)
    if chunk_type != 0:
        return first, ts, []                 # tracking/snapshot chunks carry no user messages
    pos += _CHUNK.size
    stop = min(pos + dlen, end)
    out: list[Any] = []
    unpack = _U32.unpack_from
    while pos < stop:
        if not data[pos] & 0x80:
            n = unpack(data, pos)[0]
            pos += 4
            out.append((pos, pos + n))
            pos += n
            continue
        kind, count, _ulen, n = _SUB_BATCH.unpack_from(data, pos)
        pos += _SUB_BATCH.size
        compression = (kind >> 4) & 0x7
        if compression == 0:
            blob, base = data, pos
        elif compression == 1:
            blob, base = zlib.decompress(data[pos:pos + n], 31), 0
        else:
            raise BrokerError(f"stream chunk: sub-batch compression {compression} is not supported")
        q = base
        for _ in range(count):
            m = unpack(blob, q)[0]
            q += 4
            out.append((q, q + m) if blob is data else blob[q:q + m])
            q += m
        pos += n
    return first, ts, out


def now_ns() -> int:
    return time.time_ns()
