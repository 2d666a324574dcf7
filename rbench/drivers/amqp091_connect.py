"""Opening an AMQP 0-9-1 connection: what a URI asks for, and the first of a cluster's URIs that answers.

Kept apart from the driver because the coordinator (broker sampler, clean-up) and the scenarios open
connections of their own with it, without publishers or consumers.
"""
from __future__ import annotations

import asyncio
import ssl

from rbench.config.uri import AMQP_SCHEMES, BrokerUri, parse_uri
from rbench.drivers.amqp091_protocol import Connection
from rbench.drivers.connect import AMQP_FRAME_MAX, first_that_answers, tls_context
from rbench.drivers.replies import AccessRefused, NotAllowed
from rbench.errors import BrokerError, CodecError, ConfigError, os_error_text

CONNECT_TIMEOUT_S = 9.0


class AmqpUri:
    """What the driver needs from an amqp:// or amqps:// URI, read from its one typed value
    (rbench.config.uri.BrokerUri: the parser validation used); the password is never printed."""

    __slots__ = ("parsed", "tls", "host", "port", "user", "password", "vhost", "heartbeat", "frame_max",
                 "channel_max", "verify", "cacertfile", "certfile", "keyfile", "server_name")

    def __init__(self, uri: str | BrokerUri) -> None:
        u = uri if isinstance(uri, BrokerUri) else parse_uri(uri, AMQP_SCHEMES)
        self.parsed = u
        self.tls = u.tls
        self.host, self.port, self.user, self.password, self.vhost = u.host, u.port, u.user, u.password, u.vhost
        self.heartbeat = u.int_option("heartbeat", 60)
        self.frame_max = u.int_option("frame_max", AMQP_FRAME_MAX)
        self.channel_max = u.int_option("channel_max", 2047)
        # TLS options as RabbitMQ's URI spec names them (query parameters of amqps URIs)
        self.verify = u.option("verify", "verify_peer") != "verify_none"
        self.cacertfile = u.option("cacertfile", u.option("cafile"))     # cafile: aio-pika's name for it
        self.certfile = u.option("certfile")
        self.keyfile = u.option("keyfile")
        self.server_name = u.option("server_name_indication", self.host)

    @property
    def masked(self) -> str:
        return self.parsed.masked

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        return tls_context(self.masked, self.cacertfile, self.certfile, self.keyfile, self.verify)


async def _connect_one(u: AmqpUri, name: str) -> Connection:
    loop = asyncio.get_running_loop()
    conn = Connection(loop, u.user, u.password, u.vhost, u.heartbeat, u.frame_max, u.channel_max, name)
    ctx = u.ssl_context()
    try:
        await loop.create_connection(lambda: conn, u.host, u.port, ssl=ctx,
                                     server_hostname=u.server_name if ctx is not None else None)
        await conn.opened
    except BaseException:
        if conn.transport is not None:
            conn.transport.abort()
        raise
    return conn


async def connect(uris: tuple[str, ...] | list[str], timeout: float = CONNECT_TIMEOUT_S,
                  name: str = "rbench") -> Connection:
    """Connect to the first URI that answers within ``timeout`` (rbench.drivers.connect).

    A failure names every URI tried with its password masked and says why: refused,
    no answer, authentication refused (403) or vhost refused (530).
    """
    parsed = {u: AmqpUri(u) for u in uris}       # a malformed URI is a ConfigError before any attempt

    def why(uri: str, exc: BaseException) -> str | None:
        u = parsed[uri]
        if isinstance(exc, AccessRefused):
            return f"authentication refused for user {u.user!r} (403 {exc.reply_text})"
        if isinstance(exc, NotAllowed):
            return f"vhost {u.vhost!r} refused (530 {exc.reply_text})"
        if isinstance(exc, ssl.SSLError):
            return f"TLS failed: {exc.reason or exc}"
        if isinstance(exc, OSError):
            return os_error_text(exc)
        if isinstance(exc, (BrokerError, CodecError)):     # AmqpError and ConnectionLost among them
            return str(exc)
        return None

    async def open_one(uri: str) -> Connection:
        conn = await _connect_one(parsed[uri], name)
        conn.uri = uri
        return conn

    return await first_that_answers(list(uris), open_one, timeout, why)


async def vhost_refusal(uri: str, timeout: float = 5.0) -> str | None:
    """What the broker says over AMQP 0-9-1 about ``uri``'s vhost for its user: the 530 reply text
    ("NOT_ALLOWED - vhost x not found") when it refuses it, "" when it accepts it, None when it cannot
    be asked (no answer, another failure).

    RabbitMQ serves AMQP 0-9-1 and 1.0 on one listener; 4.0's AMQP 1.0 resets a connection whose
    vhost it refuses without a word on the wire (the reason is only in its log), so the AMQP 1.0
    driver asks here to name it."""
    try:
        conn = await asyncio.wait_for(_connect_one(AmqpUri(uri), "rbench vhost check"), timeout)
    except NotAllowed as exc:
        return exc.reply_text or str(exc)
    except (OSError, BrokerError, CodecError, ConfigError, asyncio.TimeoutError, TimeoutError):
        return None
    await conn.close()
    return ""
