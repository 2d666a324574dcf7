"""The sides of a comparison that is not a workload: brokers given on the command line, each with a name.

A workload names its clusters; `rbench compare --scalability --uri …` and `--amqp10 URL …` take URLs, and
a side needs a name for the tables, the plots and compare.json. ``NAME=URL`` names it; a bare URL is named
by its host and port. Two sides with one name (the same broker twice, the A/A check) must be named
apart, since compare.json and the tables key every figure by name.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from rbench.config.uri import mask_uri
from rbench.errors import ConfigError

_NAMED = re.compile(r"^([A-Za-z0-9_.\-]+)=(.+)$")


@dataclass(frozen=True)
class Target:
    """One side: its name in the comparison and the URL it is reached on."""

    name: str
    uri: str


def parse_target(value: str, flag: str) -> Target:
    """``NAME=URL`` or ``URL`` (named host:port)."""
    named = _NAMED.match(value)
    name, uri = (named.group(1), named.group(2)) if named else ("", value)
    try:
        parts = urlsplit(uri)
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise ConfigError(f"{flag}: {mask_uri(uri)} is not a URL ({exc})") from None
    if parts.scheme not in ("amqp", "amqps") or not host:
        raise ConfigError(f"{flag}: expected [NAME=]amqp://user:pass@host:port/…, got {mask_uri(value)}")
    return Target(name or (f"{host}:{port}" if port else host), uri)


def parse_targets(values: Sequence[str], flag: str) -> tuple[Target, ...]:
    """At least two sides, named apart; the first is A (the baseline)."""
    if len(values) < 2:
        raise ConfigError(f"{flag}: compare needs at least 2 brokers (A, B …), got {len(values)}")
    targets = tuple(parse_target(v, flag) for v in values)
    seen: set[str] = set()
    for t in targets:
        if t.name in seen:
            raise ConfigError(f"{flag}: two sides are both named {t.name!r}; name them apart as NAME=URL "
                              "(a=amqp://… b=amqp://…)")
        seen.add(t.name)
    return targets


def file_safe(name: str) -> str:
    """A side's name as part of a file name (host:port has a colon)."""
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", name)
