"""PerfTest's connection options (-h, -H, -hb, -fm, -sni) → the cluster's AMQP URIs; -X/-Y and rbench's
--connections, --idle-connections and --connect-rate → the workload's connection layout; rbench's
--management-uri and --prometheus-uri → the broker sampler's endpoints.

Apart from the workload mapping because it is the one part that reads URIs: everything here goes
through rbench.config.uri, so a bad URI is one masked ConfigError line, never a traceback.
"""
from __future__ import annotations

import urllib.parse
from dataclasses import replace
from typing import Any

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


def broker_metrics(p: Parsed) -> dict[str, Any] | None:
    """The broker sampler's endpoints (--management-uri, --prometheus-uri → broker_metrics.*_urls), or None.

    A URL without a path gets the endpoint's usual one (/api, /metrics), so the port the broker's
    config names is all a user types. The management API is asked with -h's user and password: a
    URL carrying its own credentials is refused, since run.json and the report print the endpoints."""
    out: dict[str, Any] = {}
    for key, field, path in (("management-uri", "management_urls", "/api"), ("prometheus-uri", "prometheus_urls", "/metrics")):
        if not p.has(key):
            continue
        urls = []
        for raw in (u.strip() for u in str(p.first(key)).split(",")):
            if not raw:
                continue
            parts = urllib.parse.urlsplit(raw)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(f"{opt(key).label}: expected an http or https URL naming a host, e.g. "
                                  f"http://127.0.0.1:15680, got {raw!r}")
            if parts.username or parts.password:
                raise ConfigError(f"{opt(key).label}: expected a URL without user or password (the sampler uses "
                                  f"-h's), got one with credentials for {parts.hostname}")
            urls.append(raw.rstrip("/") + ("" if parts.path.strip("/") else path))
        if not urls:
            raise ConfigError(f"{opt(key).label}: expected comma-separated http or https URLs")
        out[field] = urls
    return out or None


def connection_layout(p: Parsed, producer_channels: int, consumer_channels: int) -> dict[str, Any]:
    """The workload's connection fields: one connection per PerfTest producer and consumer with its -X/-Y
    channels on it (per_client, as PerfTest opens them) unless --connections says otherwise; the values
    themselves are checked by the workload's validation, one line naming the field."""
    out: dict[str, Any] = {"connections": "per_client"}
    if p.has("connection-allocation") and p.first("connection-allocation") not in ("random", "round-robin"):
        raise ConfigError(f"{opt('connection-allocation').label}: expected random or round-robin, "
                          f"got {p.first('connection-allocation')!r}")
    if p.has("connections"):
        value = str(p.first("connections")).strip()
        out["connections"] = int(value) if value.isdigit() else value
    if out["connections"] == "per_client":
        out.update(producer_channels=producer_channels, consumer_channels=consumer_channels)
    if p.has("idle-connections"):
        out["idle_connections"] = v.integer(opt("idle-connections"), p.first("idle-connections"))
    if p.has("connect-rate"):
        out["connect_rate"] = p.first("connect-rate")
    return out
