"""PerfTest's connection options (-h, -H, -hb, -fm, -sni) → the cluster's AMQP URIs.

Apart from the workload mapping because it is the one part that reads URIs: everything here goes
through rbench.config.uri, so a bad URI is one masked ConfigError line, never a traceback.
"""
from __future__ import annotations

from dataclasses import replace

from rbench.config.uri import AMQP_SCHEMES, parse_uri
from rbench.errors import ConfigError
from rbench.perftest import values as v
from rbench.perftest.grammar import Parsed
from rbench.perftest.options import opt, refuse

DEFAULT_URI = "amqp://guest:guest@127.0.0.1:5672/"


def connection_uris(p: Parsed) -> list[str]:
    """The cluster's URIs (-h / -H), each checked by the one URI reader, with -hb, -fm and -sni as URI options."""
    if p.has("uris"):
        uris = [u.strip() for u in str(p.first("uris")).split(",") if u.strip()]
        if not uris:
            raise ConfigError(f"{opt('uris').label}: expected comma-separated AMQP URIs")
    else:
        uris = [p.first("uri") or DEFAULT_URI]
    which = opt("uris") if p.has("uris") else opt("uri")
    for uri in uris:                     # the one URI reader (rbench.config.uri): masked errors, never a traceback
        try:
            parse_uri(uri, AMQP_SCHEMES)
        except ConfigError as exc:
            raise ConfigError(f"{which.label}: {exc}") from None
    query: dict[str, str] = {}
    if p.has("heartbeat"):
        hb = v.integer(opt("heartbeat"), p.first("heartbeat"))
        if hb < 0:
            raise ConfigError(f"{opt('heartbeat').label}: expected seconds >= 0, got {hb}")
        if hb > 0:
            query["heartbeat"] = str(hb)
    if p.has("framemax"):
        fm = v.integer(opt("framemax"), p.first("framemax"))
        if fm < 0:
            raise ConfigError(f"{opt('framemax').label}: expected bytes >= 0, got {fm}")
        if fm > 0:
            query["frame_max"] = str(fm)
    sni = p.first("server-name-indication")
    if sni is not None:
        names = [n.strip() for n in sni.split(",") if n.strip()]
        if len(names) != 1:
            raise refuse("server-name-indication", "one server name only (rbench's TLS context takes one SNI name)")
    out = []
    for uri in uris:
        extra = dict(query)
        if sni is not None and uri.startswith("amqps://"):
            extra["server_name_indication"] = names[0]
        out.append(_with_query(uri, extra) if extra else uri)
    return out


def _with_query(uri: str, extra: dict[str, str]) -> str:
    u = parse_uri(uri, AMQP_SCHEMES)
    options = dict(u.options)
    options.update(extra)
    return replace(u, options=tuple(options.items())).text()
