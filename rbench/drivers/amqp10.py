"""The `amqp10` driver: AMQP 1.0 links on rbench's own codec, behind the Driver interface.

Why: Python's AMQP 1.0 client (python-qpid-proton) spends tens of µs per message and has
no asyncio, so it cannot load a broker. Here a publish is one C call appending transfer
frames to the output buffer, a disposition settles a range of deliveries in C straight
into the runtime's (C) sink, and a delivery reaches ``on_message`` from the C frame
reader (rbench.drivers._amqp10_link). See docs/amqp10.md.

Mapping onto the runtime's contract:
- a publisher is a sending link on its own session; ``confirm`` = unsettled (the broker's
  disposition is the confirm: accepted → ack, rejected → nack, released / modified →
  returned and acked), otherwise pre-settled (at-most-once). ``ready()`` waits for the
  confirm window and for link credit (the broker's flow frames), so a broker out of
  credit blocks the publisher instead of losing messages;
- a consumer is a receiving link: ``prefetch`` (or the URI's ``credit``) is the credit
  window, topped up when half is used; deliveries are accepted with one ranged
  disposition per read (or every ``multi_ack_every``); ``auto_ack`` asks for pre-settled;
  ``processing_delay_us`` / ``rate`` settle each message once its simulated work is done, with at
  most ``prefetch`` unsettled; the header's first-acquirer / delivery-count give ``redelivered``;
- RabbitMQ 3.x cannot declare queues over AMQP 1.0 (/amq/queue/Q must exist), so
  ``declare`` and the delete helpers use a lazily opened AMQP 0.9.1 connection.
"""
from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from rbench.codec.amqp10 import Described, Symbol, Timestamp, UByte, UInt, ULong
from rbench.config.types import ClusterTarget, ConsumerSpec, PublisherSpec, Topology
from rbench.drivers._amqp10_link import Receiver, Sender
from rbench.drivers.amqp091_connect import vhost_refusal
from rbench.drivers.amqp10_protocol import FLUSH_BYTES, SOURCE, TARGET, Connection, OpenRefused, Session
from rbench.drivers.amqp10_uri import Amqp10Uri
from rbench.drivers.base import OnLost, OnMessage, PublishSink, cannot_pause
from rbench.drivers.connect import LossWatch, first_that_answers
from rbench.drivers.replies import AccessRefused, NotAllowed, NotFound
from rbench.drivers.work import SimulatedWork
from rbench.errors import BrokerError, CodecError, ConfigError, os_error_text

CONNECT_TIMEOUT_S = 9.0
LINGER_S = 0.05              # with multi_ack_every, dispositions still pending are sent after this long


def address(form: str, queue: str = "", exchange: str = "", key: str = "") -> str:
    """A node address: RabbitMQ 3.x (v1) /amq/queue/Q, /exchange/X/K; 4.x (v2) /queues/Q, /exchanges/X/K."""
    if form == "v2":
        if exchange:
            return f"/exchanges/{quote(exchange, safe='')}" + (f"/{quote(key, safe='')}" if key else "")
        return f"/queues/{quote(queue, safe='')}"
    if exchange:
        return f"/exchange/{exchange}" + (f"/{key}" if key else "")
    return f"/amq/queue/{queue}"


async def _connect_one(u: Amqp10Uri, name: str) -> Connection:
    loop = asyncio.get_running_loop()
    conn = Connection(loop, u, name)
    ctx = u.ssl_context()
    try:
        await loop.create_connection(conn.protocol, u.host, u.port, ssl=ctx,
                                     server_hostname=u.server_name if ctx is not None else None)
        try:
            await conn.opened
            # RabbitMQ 3.x accepts open for any vhost and refuses the first session when the vhost is
            # missing or not permitted: one session round trip makes that a connect-time error
            probe = await conn.begin(f"open vhost {u.vhost!r}")
            await probe.end()
        except (OpenRefused, AccessRefused, NotFound, NotAllowed) as exc:
            if not conn.authenticated:
                raise
            raise await _vhost_refused(u, exc) from None
    except BaseException:
        if conn.transport is not None:
            conn.transport.abort()
        raise
    return conn


async def _vhost_refused(u: Amqp10Uri, exc: BaseException) -> NotAllowed:
    """One line naming the vhost and why: 4.0 resets the connection after our open (its reason only in its log),
    3.x's plugin refuses the first session with "insufficient permissions" even for a vhost that does not
    exist. RabbitMQ's AMQP 0-9-1, on the same listener, says which (vhost_refusal); without its answer the
    AMQP 1.0 words are kept."""
    answer = await vhost_refusal(u.uri)
    said = "a connection reset at open" if isinstance(exc, OpenRefused) else \
        repr(getattr(exc, "reply_text", "") or str(exc))
    if answer:
        reason = answer.partition("NOT_ALLOWED - ")[2] or answer
        what = "not found" if "not found" in reason else reason
        text = f"{what} (AMQP 0-9-1 on the same port says {answer!r}; AMQP 1.0 got {said})"
    elif answer == "":
        text = (f"AMQP 1.0 got {said}, though AMQP 0-9-1 on the same port accepts this vhost for this user "
                f"(the broker's log says why)")
    elif isinstance(exc, OpenRefused):
        text = ("the broker reset the connection at open without saying why (RabbitMQ 4.0 does so for a vhost "
                "that does not exist or that the user may not use)")
    else:
        text = str(exc)
    return NotAllowed(f"broker refused vhost {u.vhost!r}: {text}", None, text, "connection")


async def connect(uris: tuple[str, ...] | list[str], timeout: float = CONNECT_TIMEOUT_S,
                  name: str = "rbench") -> Connection:
    """An open AMQP 1.0 connection to the first URI that answers (password masked in every error)."""
    parsed = {u: Amqp10Uri(u) for u in uris}

    def why(uri: str, exc: BaseException) -> str | None:
        if isinstance(exc, (AccessRefused, NotAllowed)):     # authentication, or the vhost (_vhost_refused)
            return str(exc)
        if isinstance(exc, ssl.SSLError):
            return f"TLS failed: {exc.reason or exc}"
        if isinstance(exc, OSError):
            return os_error_text(exc)
        if isinstance(exc, (BrokerError, CodecError)):
            return str(exc)
        return None

    async def open_one(uri: str) -> Connection:
        conn = await _connect_one(parsed[uri], name)
        conn.opened_with = uri
        return conn

    return await first_that_answers(list(uris), open_one, timeout, why, what="RabbitMQ (AMQP 1.0)")


class Amqp10Publisher:
    """A sending link: the C ``Sender`` writes transfers and settles dispositions; this class waits."""

    def __init__(self, conn: Connection, session: Session, sender: Sender, spec: PublisherSpec) -> None:
        self._conn = conn
        self._session = session
        self._sender = sender
        self._window = spec.confirm_window if spec.confirm else 0
        self._settled = not spec.confirm
        self._waiter: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        sender.on_change = self._wake
        session.close_listeners.append(self._on_close)
        conn.flow_listeners.add(self._wake)

    @property
    def outstanding(self) -> int:
        return int(self._sender.outstanding)

    @property
    def credit(self) -> int:
        return int(self._sender.credit)

    async def ready(self) -> None:
        conn, sender, window = self._conn, self._sender, self._window
        while True:
            if self._error is not None:
                raise self._error
            if not (conn.write_paused or sender.credit <= 0 or (window and sender.outstanding >= window)):
                return
            conn.flush()
            self._waiter = conn.loop.create_future()
            await self._waiter

    def can_publish(self) -> bool:
        sender, window = self._sender, self._window
        return self._error is None and not (self._conn.write_paused or sender.credit <= 0
                                            or (window and sender.outstanding >= window))

    def publish(self, payload: bytes | bytearray | memoryview, seq: int) -> None:
        if self._error is not None:
            raise self._error
        conn = self._conn
        if self._sender.write(conn.reader.out, payload, seq) >= FLUSH_BYTES:
            conn.flush()                    # a long burst: write now, so the transport's flow control can act
        else:
            conn.schedule_flush()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)
        d = self._drained
        if d is not None and not d.done() and (self._sender.outstanding == 0 or self._error is not None):
            d.set_result(None)

    def _on_close(self, error: BaseException) -> None:
        self._error = error
        self._wake()

    async def drain(self, timeout: float) -> int:
        self._conn.flush()
        if self._settled or not self._sender.outstanding or self._error is not None:
            return self.outstanding
        self._drained = self._conn.loop.create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._drained), timeout)
        except asyncio.TimeoutError:
            pass
        return self.outstanding

    async def aclose(self) -> None:
        self._conn.flow_listeners.discard(self._wake)
        self._conn.flush()
        await self._session.close(self._sender.handle)


STREAM_OFFSET_SPEC = Symbol("rabbitmq:stream-offset-spec")


def stream_offset_filter(offset: str) -> dict[Symbol, Described]:
    """The source filter-set that makes RabbitMQ 4.x start a stream receiver at ``offset`` (ConsumerSpec.offset:
    first | last | next | offset:N | timestamp:MS).

    4.x reads a stream over AMQP 1.0 from the offset this filter names (rabbitmq.com/docs/amqp, "Filters"),
    and ignores it on classic and quorum queues, so it is sent on every receiving link; RabbitMQ 3.x's plugin
    cannot read a stream from an offset at all (docs/drivers.md)."""
    kind, _, number = offset.partition(":")
    value: object
    if kind == "offset" and number.isdigit():
        value = ULong(int(number))
    elif kind == "timestamp" and number.isdigit():
        value = Timestamp(int(number))
    elif offset in ("first", "last", "next"):
        value = offset
    else:
        raise ConfigError(f"consumer.offset: expected first, last, next, offset:N or timestamp:MS, got {offset!r}")
    return {STREAM_OFFSET_SPEC: Described(STREAM_OFFSET_SPEC, value)}


class Amqp10Consumer:
    """A receiving link: the C ``Receiver`` takes transfers, settles and tops credit up.

    With ``processing_delay_us`` (or a consumer ``rate``) each message is "worked on" for that long, one
    after the other, on the virtual clock of the AMQP 0.9.1 driver: message k is done at
    max(done(k-1), arrival(k)) + delay, and only then accepted. The receiver then settles nothing itself
    (``manual``): this class accepts what is done, and grants credit so that at most ``prefetch``
    deliveries are unsettled, as a 0.9.1 consumer's qos bounds its unacked messages."""

    # not implemented: pausing is withdrawing the link's credit, which the C Receiver tops up by itself
    # (docs/drivers.md)
    pausable = False

    def __init__(self, conn: Connection, session: Session, receiver: Receiver, delay_ns: int = 0,
                 prefetch: int = 0) -> None:
        self._conn = conn
        self._session = session
        self._receiver = receiver
        self._linger: asyncio.TimerHandle | None = None
        self.error: BaseException | None = None
        self._prefetch = prefetch
        self._settled = 0
        self._closing = False
        self._work: SimulatedWork | None = None
        session.close_listeners.append(self._on_close)
        if receiver.manual:
            self._work = SimulatedWork(conn.loop, delay_ns, self._accept).start()
            receiver.on_delivery = self._work.add
        elif receiver.ack_every > 1:
            self._linger = conn.loop.call_later(LINGER_S, self._settle_pending)

    def _accept(self, ids: list[int]) -> None:
        """Accept the deliveries whose work is done (one disposition per run of consecutive ids), then
        restore the credit they held."""
        r, out = self._receiver, self._conn.reader.out
        if self.error is not None or r.stopped:
            return
        first = last = ids[0]
        for delivery_id in ids[1:]:
            if delivery_id != (last + 1) & 0xFFFFFFFF:
                r.accept(out, first, last)
                first = delivery_id
            last = delivery_id
        r.accept(out, first, last)
        self._settled += len(ids)
        if not self._closing:
            r.write_flow(out, max(0, self._prefetch - (int(r.received) - self._settled)))
        self._conn.schedule_flush()

    def _settle_pending(self) -> None:
        """Send the disposition for deliveries below the multi-ack threshold (runs every LINGER_S)."""
        if self._receiver.flush_dispositions(self._conn.reader.out):
            self._conn.schedule_flush()
        self._linger = self._conn.loop.call_later(LINGER_S, self._settle_pending)

    def _on_close(self, error: BaseException) -> None:
        self.error = error
        if self._work is not None:
            self._work.stop()

    async def pause(self) -> None:
        raise cannot_pause("amqp10")

    async def resume(self) -> None:
        raise cannot_pause("amqp10")

    def resume_spec(self, spec: ConsumerSpec) -> ConsumerSpec:
        """``spec``: the broker releases what this link held unsettled and delivers it again (first-acquirer
        false, so flagged redelivered)."""
        return spec

    async def aclose(self) -> None:
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        self._closing = True
        if self._work is not None:
            self._work.stop()
        r = self._receiver
        if self._conn.error is None and self._session.error is None:
            if self._work is not None:
                r.write_flow(self._conn.reader.out, 0)       # no more deliveries while the work in progress is settled
                self._work.finish_all()
            r.flush_dispositions(self._conn.reader.out)     # everything handed to on_message is accepted
        r.stopped = True
        await self._session.close(r.handle)


class Amqp10Driver:
    """The `amqp10` driver: one AMQP 1.0 connection, a session per link; declarations over AMQP 0.9.1.

    It rides through a lost connection like the 0.9.1 drivers (``reconnect = True``, docs/drivers.md):
    publishers raise ConnectionLost, ``on_lost`` is told once, and a fresh driver gets the deliveries
    left unsettled back flagged ``redelivered`` (RabbitMQ sets the header's first-acquirer false)."""

    reconnect = True

    def __init__(self) -> None:
        self.uri: str | None = None
        self._loss = LossWatch()
        self._conn: Connection | None = None
        self._uris: tuple[str, ...] = ()
        self._admin: Any = None
        self._closed = False

    @property
    def connection(self) -> Connection:
        if self._conn is None:
            raise BrokerError("driver used before open()" if not self._closed else "driver is closed")
        if self._conn.error is not None:
            raise self._conn.error
        return self._conn

    @property
    def server_properties(self) -> Mapping[str, Any]:
        """The open performative's properties, keys as plain text (they arrive as AMQP symbols)."""
        return {} if self._conn is None else {str(k): v for k, v in self._conn.remote_properties.items()}

    async def open(self, target: ClusterTarget, on_lost: OnLost | None = None, name: str | None = None) -> None:
        self._uris = tuple(target.amqp10_uris or target.uris)
        self._closed = False
        conn = self._conn = await connect(self._uris, name=name or f"rbench {target.name}")
        self.uri = conn.opened_with
        self._loss.arm(conn, on_lost)

    async def _admin_driver(self) -> Any:
        """The AMQP 0.9.1 connection used for declarations (RabbitMQ 3.x's AMQP 1.0 plugin cannot declare)."""
        _ = self.connection                    # a closed driver refuses work
        if self._admin is None:
            from rbench.drivers.amqp091 import Amqp091Driver

            admin = Amqp091Driver()
            await admin.open(ClusterTarget("amqp10-admin", self._uris))
            self._admin = admin
        return self._admin

    async def declare(self, topology: Topology) -> None:
        await (await self._admin_driver()).declare(topology)

    async def queue_declare(self, name: str, passive: bool = False, durable: bool = True,
                            arguments: dict[str, Any] | None = None) -> tuple[str, int, int]:
        result: tuple[str, int, int] = await (await self._admin_driver()).queue_declare(name, passive, durable,
                                                                                         arguments)
        return result

    async def messages_ready(self, queue: str) -> int:
        return (await self.queue_declare(queue, passive=True))[1]

    async def delete_queues(self, names: list[str]) -> None:
        await (await self._admin_driver()).delete_queues(names)

    async def publisher(self, spec: PublisherSpec, sink: PublishSink) -> Amqp10Publisher:
        conn = self.connection
        form = conn.uri.address
        key = spec.routing_key or (spec.queue if not spec.exchange else "")
        where = address(form, queue=key, exchange=spec.exchange, key=key)
        doing = f"attach sender to {where!r}"
        if not spec.exchange and form == "v1":
            # the 3.x plugin attaches a sender to a missing /amq/queue/Q and drops what it sends there
            try:
                await self.queue_declare(key, passive=True)
            except NotFound as exc:
                raise NotFound(f"{doing}: {exc.reply_text or 'no such queue'}", None, exc.reply_text, "link") from None
        session = await conn.begin(doing)
        settled = not spec.confirm
        # registered before the attach: the broker's first flow (credit) may come with its attach
        sender = Sender(session.channel, 0, settled, spec.persistent, conn.max_frame, spec.producer_id, sink, 0)
        conn.reader.add_sender(session.remote_channel, sender)
        try:
            await session.attach([f"rbench-p{spec.producer_id}-{session.channel}", UInt(0), False,
                                  UByte(1 if settled else 0), UByte(0),
                                  Described(ULong(SOURCE), [f"rbench-p{spec.producer_id}"]),
                                  Described(ULong(TARGET), [where]), None, None, UInt(0)], doing)
        except BaseException:
            conn.forget(session)
            raise
        return Amqp10Publisher(conn, session, sender, spec)

    async def consumer(self, spec: ConsumerSpec, on_message: OnMessage) -> Amqp10Consumer:
        conn = self.connection
        where = address(conn.uri.address, queue=spec.queue)
        doing = f"attach receiver to {where!r}"
        session = await conn.begin(doing)
        window = spec.prefetch or conn.uri.credit
        every = spec.multi_ack_every if spec.multi_ack_every > 1 else 0
        try:
            attached = await session.attach([f"rbench-c{spec.consumer_id}-{session.channel}", UInt(0), True,
                                  UByte(1 if spec.auto_ack else 0), UByte(0),
                                  Described(ULong(SOURCE), [where, None, None, None, None, None, None,
                                                            stream_offset_filter(spec.offset)]),
                                  Described(ULong(TARGET), [f"rbench-c{spec.consumer_id}"])], doing)
        except BaseException:
            conn.forget(session)
            raise
        delay_ns = spec.processing_delay_us * 1000
        if spec.rate:          # PerfTest -R: a consumer finishes at most `rate` messages per second
            delay_ns = max(delay_ns, int(1e9 / spec.rate))
        manual = bool(delay_ns) and not spec.auto_ack
        # a slow consumer settles (and grants credit) itself; the receiver only reports what arrives
        receiver = Receiver(session.channel, 0, on_message, 0 if manual else window, every, not spec.auto_ack,
                            session.remote_next_outgoing_id, manual)
        # Credit is counted from the sender's delivery-count (AMQP 1.0 2.6.7): RabbitMQ 3.x starts it at 0, 4.x
        # at 2^32 - 5 (to exercise serial-number wrap-around); a flow from 0 would grant 4.x five extra.
        if len(attached) > 9 and attached[9] is not None:
            receiver.delivery_count = int(attached[9])
        conn.reader.add_receiver(session.remote_channel, receiver)
        consumer = Amqp10Consumer(conn, session, receiver, delay_ns if manual else 0, window)
        receiver.write_flow(conn.reader.out, window)
        conn.flush()
        return consumer

    async def aclose(self) -> None:
        self._closed = True
        self._loss.disarm()
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                await admin.aclose()
            except BrokerError:
                pass
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()


__all__ = ["Amqp10Consumer", "Amqp10Driver", "Amqp10Publisher", "address", "connect"]
