"""What an amqp:// or amqps:// URI asks of an AMQP 1.0 connection (read before any connection is opened).

Its own module because the connection (amqp10_protocol), the driver's connect (amqp10) and the quiver
scenario each read it, and a malformed URI must be a ConfigError before anything is tried.
"""
from __future__ import annotations

import ssl
from urllib.parse import parse_qs, unquote, urlsplit

from rbench.config.uri import mask_uri
from rbench.drivers.connect import AMQP_FRAME_MAX, tls_context
from rbench.errors import ConfigError


class Amqp10Uri:
    """The parts of an amqp:// or amqps:// URI an AMQP 1.0 connection needs (password never printed).

    Query parameters: ``heartbeat`` (s, our idle-time-out is twice that), ``frame_max``,
    ``channel_max``, ``sasl`` (plain | anonymous; default plain, anonymous when the URI has
    no user), ``address`` (v1: RabbitMQ 3.x /amq/queue/Q and /exchange/X/K; v2: 4.x
    /queues/Q and /exchanges/X/K; default v1), ``credit`` (receiver link credit when the
    consumer has no prefetch) and the 0.9.1 driver's TLS options.
    """

    __slots__ = ("uri", "tls", "host", "port", "user", "password", "vhost", "heartbeat", "frame_max",
                 "channel_max", "sasl", "address", "credit", "verify", "cacertfile", "certfile", "keyfile",
                 "server_name")

    def __init__(self, uri: str) -> None:
        parts = urlsplit(uri)
        if parts.scheme not in ("amqp", "amqps"):
            raise ConfigError(f"{mask_uri(uri)}: expected an amqp:// or amqps:// URI")
        self.uri = uri
        self.tls = parts.scheme == "amqps"
        self.host = parts.hostname or "localhost"
        try:
            self.port = parts.port or (5671 if self.tls else 5672)
        except ValueError:
            raise ConfigError(f"{mask_uri(uri)}: invalid port") from None
        self.user = unquote(parts.username) if parts.username is not None else "guest"
        self.password = unquote(parts.password) if parts.password is not None else "guest"
        self.vhost = "/" if parts.path in ("", "/") else unquote(parts.path[1:])
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        try:
            self.heartbeat = int(query.get("heartbeat", 60))
            self.frame_max = int(query.get("frame_max", AMQP_FRAME_MAX))
            self.channel_max = int(query.get("channel_max", 2047))
            self.credit = int(query.get("credit", 500))
        except ValueError:
            raise ConfigError(f"{mask_uri(uri)}: heartbeat, frame_max, channel_max and credit must be integers") from None
        if self.frame_max < 512:
            raise ConfigError(f"{mask_uri(uri)}: frame_max: expected at least 512 (AMQP 1.0 minimum)")
        self.sasl = query.get("sasl", "plain" if parts.username is not None else "anonymous").lower()
        if self.sasl not in ("plain", "anonymous"):
            raise ConfigError(f"{mask_uri(uri)}: sasl: expected plain or anonymous, got {self.sasl!r}")
        self.address = query.get("address", "v1").lower()
        if self.address not in ("v1", "v2"):
            raise ConfigError(f"{mask_uri(uri)}: address: expected v1 (RabbitMQ 3.x) or v2 (4.x), got {self.address!r}")
        self.verify = query.get("verify", "verify_peer") != "verify_none"
        self.cacertfile = query.get("cacertfile")
        self.certfile = query.get("certfile")
        self.keyfile = query.get("keyfile")
        self.server_name = query.get("server_name_indication", self.host)

    @property
    def masked(self) -> str:
        return mask_uri(self.uri)

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        return tls_context(self.masked, self.cacertfile, self.certfile, self.keyfile, self.verify)
