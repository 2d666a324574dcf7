"""Broker URIs, read once into a typed value: the only place rbench parses or masks a URI.

Why one reader: the workload model, the drivers, the PerfTest mapping and every error message
used to split URIs each their own way (urllib in four places), so a URI that one of them
accepted could crash another (port 99999 passed validation and then raised inside the masking
code, printing a traceback with the password). Now validation calls :func:`parse_uri`, the
drivers call the same function on the same text (the text is what crosses Spark, see
config/types.ClusterTarget), and :func:`mask_uri` never raises, whatever it is given.

The grammar is RabbitMQ's URI spec (https://www.rabbitmq.com/uri-spec.html): one path segment
is the vhost ("%2F" for "/", empty for the default "/"), user and password are percent-encoded,
IPv6 hosts go in brackets, TLS options are query parameters (docs/amqp091.md).
No pydantic here: executors import this module (config/types rule).
"""
from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass, field, replace
from urllib.parse import parse_qsl, quote, unquote, unquote_plus

from rbench.errors import ConfigError

DEFAULT_PORTS: dict[str, int] = {"amqp": 5672, "amqps": 5671, "rabbitmq-stream": 5552, "rabbitmq-stream+tls": 5551,
                                 "amqp10": 5672, "amqps10": 5671, "http": 80, "https": 443}
TLS_SCHEMES = frozenset({"amqps", "rabbitmq-stream+tls", "amqps10", "https"})
AMQP_SCHEMES = ("amqp", "amqps")
STREAM_SCHEMES = ("rabbitmq-stream", "rabbitmq-stream+tls")

# query parameters rbench reads; anything else is refused rather than silently ignored
INT_OPTIONS = ("heartbeat", "frame_max", "channel_max", "connection_timeout")
TLS_OPTIONS = ("verify", "cacertfile", "certfile", "keyfile", "server_name_indication", "fail_if_no_peer_cert")
AIOPIKA_TLS_OPTIONS = ("cafile", "capath", "no_verify_ssl")    # aio-pika's names (the aiopika driver passes them on)
OTHER_OPTIONS = ("auth_mechanism",) + AIOPIKA_TLS_OPTIONS
# AMQP 1.0's own (docs/amqp10.md): valid in any amqp:// URI, since validation cannot know the driver yet, and
# refused with one line for a driver that would ignore them (check_driver_options) and on stream URIs
AMQP10_OPTIONS = ("sasl", "address", "credit")
OPTION_DRIVERS: dict[str, tuple[str, ...]] = {name: ("amqp10",) for name in AMQP10_OPTIONS}
KNOWN_OPTIONS = INT_OPTIONS + TLS_OPTIONS + OTHER_OPTIONS + AMQP10_OPTIONS

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_HOST = re.compile(r"^[A-Za-z0-9._~%!$&'()*+,;=-]*$")
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)(.*)@", re.DOTALL)    # greedy: up to the last @ (passwords may hold @)
_NEXT_URI = re.compile(r",(?=[A-Za-z][A-Za-z0-9+.-]*://)")
_QUERY_OPTION = re.compile(r"(?<=[?&;])([^=&;#?]*)=([^&;#]*)")

# words that make a query option a credential wherever a URI is shown or stored (is_credential_option):
# password/passwd/passphrase, pwd, secret(_key), token, (api_/access_)key, auth(orization), credential(s), sig(nature)
CREDENTIAL_WORDS = ("pass", "pwd", "secret", "token", "key", "auth", "credential", "sig", "cookie")


class UriError(ConfigError):
    """A URI that does not follow the grammar; the message holds the masked URI only."""


@dataclass(frozen=True)
class BrokerUri:
    """One parsed broker URI. ``password`` is held for the handshake and never printed:
    ``str()``/``repr()`` give the masked form and the field is left out of the dataclass repr."""

    scheme: str
    host: str
    port: int
    user: str
    password: str = field(repr=False)
    vhost: str
    options: tuple[tuple[str, str], ...] = ()
    has_password: bool = False
    has_user: bool = False
    explicit_port: bool = False

    # ---- reading -------------------------------------------------------------------------------
    @property
    def tls(self) -> bool:
        return self.scheme in TLS_SCHEMES

    def option(self, name: str, default: str | None = None) -> str | None:
        for key, value in reversed(self.options):
            if key == name:
                return value
        return default

    def int_option(self, name: str, default: int) -> int:
        value = self.option(name)
        return default if value is None else int(value)      # checked at parse time

    @property
    def host_port(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    # ---- writing -------------------------------------------------------------------------------
    def text(self, password: str | None = None) -> str:
        """The URI as text; ``password`` replaces the real one (``***`` to mask, ``${VAR}`` to reference)."""
        userinfo = ""
        if self.has_user or self.has_password:
            userinfo = quote(self.user, safe="")
            if self.has_password:
                secret = quote(self.password, safe="") if password is None else password
                userinfo += f":{secret}"
            userinfo += "@"
        vhost = "" if self.vhost == "/" else quote(self.vhost, safe="")
        query = "&".join(f"{quote(k, safe='')}={quote(v, safe='/')}" for k, v in self.options)
        where = self.host_port if self.explicit_port else (f"[{self.host}]" if ":" in self.host else self.host)
        return f"{self.scheme}://{userinfo}{where}/{vhost}" + (f"?{query}" if query else "")

    @property
    def masked(self) -> str:
        return self.text(password="***") if self.has_password else self.text()

    def __str__(self) -> str:
        return self.masked

    def with_scheme_port(self, scheme: str, port: int) -> BrokerUri:
        """Same host, credentials and vhost on another protocol's port (AMQP → streams); options dropped."""
        return replace(self, scheme=scheme, port=port, options=(), explicit_port=True)


def _fail(text: str, why: str) -> UriError:
    return UriError(f"{_mask_unparsed(text)}: {why}")


@functools.lru_cache(maxsize=1024)
def parse_uri(text: str, schemes: tuple[str, ...] = AMQP_SCHEMES) -> BrokerUri:
    """Read ``text`` as a broker URI of one of ``schemes``; UriError (masked) when it is not one.

    Cached: validation, planning and each driver read the same text, and parsing once is the point.
    """
    if not isinstance(text, str):
        raise UriError(f"expected a URI string, got {type(text).__name__}")
    if any(c.isspace() or ord(c) < 32 for c in text):
        raise _fail(text, "expected a URI without spaces or control characters")
    m = _SCHEME.match(text)
    if m is None:
        raise _fail(text, f"expected a URI such as {schemes[0]}://user:password@host:port/vhost")
    scheme = m.group(1).lower()
    if scheme not in schemes:
        raise _fail(text, f"expected a URI starting with {' or '.join(s + '://' for s in schemes)}")
    rest = text[m.end():]
    if "#" in rest:
        raise _fail(text, "expected no #fragment in a broker URI")
    rest, _, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    userinfo, at, hostport = netloc.rpartition("@")
    user, has_password, password = "", False, ""
    if at:
        raw_user, colon, raw_password = userinfo.partition(":")
        user, has_password, password = unquote(raw_user), bool(colon), unquote(raw_password)
    host, port, explicit = _host_port(text, hostport, scheme)
    if "/" in path:
        raise _fail(text, "expected one path segment, the vhost (write %2F for a '/' in a vhost name)")
    vhost = "/" if not slash or path == "" else unquote(path)
    options = tuple(parse_qsl(query, keep_blank_values=True)) if query else ()
    for key, value in options:
        if key not in KNOWN_OPTIONS:
            raise _fail(text, f"unknown URI option {key!r} (expected one of {', '.join(KNOWN_OPTIONS)})")
        if key in INT_OPTIONS and not (value.isdigit() and int(value) <= 2**31 - 1):
            raise _fail(text, f"option {key}: expected a whole number >= 0")
        if key == "verify" and value not in ("verify_peer", "verify_none"):
            raise _fail(text, "option verify: expected verify_peer or verify_none")
        if key in OPTION_DRIVERS and scheme in STREAM_SCHEMES:
            raise _fail(text, f"option {key}: read by the {_drivers(key)} only, not on {scheme}:// URIs")
        if key == "credit" and not (value.isdigit() and 1 <= int(value) <= 2**31 - 1):
            raise _fail(text, "option credit: expected a whole number >= 1 (the receiver's link credit)")
        if key == "address" and value.lower() not in ("v1", "v2"):
            raise _fail(text, "option address: expected v1 (RabbitMQ 3.x) or v2 (4.x)")
        if key == "sasl" and value.lower() not in ("plain", "anonymous"):
            raise _fail(text, "option sasl: expected plain or anonymous")
    return BrokerUri(scheme, host, port, user if at else "guest", password if has_password else "guest", vhost,
                     options, has_password, bool(at), explicit)


def check_driver_options(text: str, driver: str) -> None:
    """UriError (one line, masked) when ``text`` carries an option ``driver`` would silently ignore,
    naming the option and the drivers that read it (``?address=v2`` on an amqp091 workload)."""
    uri = parse_uri(text, AMQP_SCHEMES + STREAM_SCHEMES)
    for key, _ in uri.options:
        if key in OPTION_DRIVERS and driver not in OPTION_DRIVERS[key]:
            raise UriError(f"{uri.masked}: option {key}: read by the {_drivers(key)} only (here the {driver} driver)")


def _drivers(option: str) -> str:
    takers = OPTION_DRIVERS[option]
    return f"{' and '.join(takers)} driver{'s' if len(takers) > 1 else ''}"


def _host_port(text: str, hostport: str, scheme: str) -> tuple[str, int, bool]:
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            raise _fail(text, "unclosed '[' in an IPv6 host (expected [address]:port)")
        host, after = hostport[1:end], hostport[end + 1:]
        try:
            ipaddress.IPv6Address(host.split("%", 1)[0])
        except ValueError:
            raise _fail(text, "expected an IPv6 address inside [ ]") from None
        if after and not after.startswith(":"):
            raise _fail(text, "expected :port after the IPv6 host's ']'")
        port_text = after[1:] if after else None
    else:
        if "]" in hostport:
            raise _fail(text, "']' without '[' in the host")
        if hostport.count(":") > 1:
            raise _fail(text, "expected an IPv6 host in brackets, e.g. amqp://[::1]:5672/")
        host, colon, port_text_ = hostport.partition(":")
        port_text = port_text_ if colon else None
        if not _HOST.match(host):
            raise _fail(text, "expected a host name or address of letters, digits, '.' and '-'")
        host = unquote(host)
    if port_text is None or port_text == "":
        if port_text == "":
            raise _fail(text, "expected a port number after ':'")
        return host or "localhost", DEFAULT_PORTS[scheme], False
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise _fail(text, "expected a port 1-65535")
    return host or "localhost", int(port_text), True


def mask_uri(text: object) -> str:
    """``text`` with any password replaced by ``***``, safe to print; never raises.

    A URI that parses is printed from its typed value (its options are rbench's own, none a
    credential); anything else URI-shaped loses everything between ``://`` and the last ``@``
    (user and password both) and the value of every credential-shaped query option, and text
    that is not a string is described by its type only."""
    try:
        if not isinstance(text, str):
            return f"<{type(text).__name__}>"
        if _NEXT_URI.search(text):           # a list (PerfTest's -H a,b): each URI on its own
            return ",".join(mask_uri(part) for part in _NEXT_URI.split(text))
        try:
            uri = parse_uri(text, tuple(DEFAULT_PORTS))
        except ConfigError:
            return _mask_unparsed(text)
        # a vhost holding '@' may be a second user:password@host pasted on (-H a/,u:p@b): hide as unparsed
        return _mask_unparsed(text) if "@" in uri.vhost else uri.masked
    except Exception:                        # masking must never be the thing that fails
        return "<uri>"


def is_credential_option(name: str) -> bool:
    """A query option whose value may be a secret: its name (percent-decoded, any case) holds a
    word of CREDENTIAL_WORDS and it is not one of the options rbench reads (``keyfile`` is a path,
    ``auth_mechanism`` a SASL name). Broad on purpose: hiding a harmless value costs nothing."""
    key = unquote_plus(name).lower()
    return key not in KNOWN_OPTIONS and any(word in key for word in CREDENTIAL_WORDS)


def _mask_unparsed(text: str) -> str:
    """Mask a URI the parser refused: everything that could be a user, a password or a credential
    option's value goes. The parts are found on the original text and hidden together, so one
    reading cannot expose what the other hides (a query ``?token=a@b`` would otherwise pass its
    ``b`` off as the host after the last ``@``)."""
    try:
        hidden: list[tuple[int, int]] = []
        m = _USERINFO.match(text)
        scheme = _SCHEME.match(text)
        if m is not None:
            hidden.append((m.end(1), m.end() - 1))
        elif scheme is not None:         # no '@': "amqp://user:secret" reads as host:port, and the port may be a secret
            authority = re.split(r"[/?#]", text[scheme.end():], maxsplit=1)[0]
            host, colon, port = authority.rpartition(":")
            if colon and not port.isdigit() and not authority.endswith("]"):
                hidden.append((scheme.end() + len(host) + 1, scheme.end() + len(authority)))
        elif "@" in text:                    # not URI-shaped but could still be user:secret@host
            hidden.append((0, text.rindex("@")))
        hidden += [o.span(2) for o in _QUERY_OPTION.finditer(text) if o.group(2) and is_credential_option(o.group(1))]
        return _hide(text, hidden)
    except Exception:                        # masking must never be the thing that fails
        return "<uri>"


def _hide(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each span replaced by ``***``, overlapping spans hidden as one."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out, at = [], 0
    for start, end in merged:
        out += [text[at:start], "***"]
        at = end
    return "".join(out) + text[at:]


# a match starts only where a scheme can (not inside a run of scheme characters), so a long run
# without '://' is read once, not once per character
_URI_IN_TEXT = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*")
_USERINFO_IN_TEXT = re.compile(r"[^\s'\"<>/@:]+:(?!\*\*\*@)[^\s'\"<>/]*@")
_QUERY_OPTION_IN_TEXT = re.compile(r"(?<=[?&;])([^\s=&;#?'\"<>]+)=([^\s&;#'\"<>]*)")


def _mask_match(m: re.Match[str]) -> str:
    text = m.group(0)
    core = text.rstrip(".,;:)!?]")        # sentence punctuation after a URI is not part of it
    if core.endswith("[") or (text[len(core):].startswith("]") and "[" in core and "]" not in core):
        core = text                       # keep an IPv6 bracket with its host
    return mask_uri(core) + text[len(core):]


def mask_text(message: str) -> str:
    """``message`` with every URI-shaped part masked: the last guard before a line reaches a user."""
    try:
        masked = _URI_IN_TEXT.sub(_mask_match, message)
        # what the URI matches missed (a URI cut by a space, no scheme): user-info and credential options,
        # found on the same text and hidden together, as in _mask_unparsed
        hidden = [(m.start(), m.end() - 1) for m in _USERINFO_IN_TEXT.finditer(masked)] if "@" in masked else []
        for m in _QUERY_OPTION_IN_TEXT.finditer(masked):
            value = m.group(2).rstrip(".,:)!?]")          # sentence punctuation ends it, as it ends a URI
            if value and is_credential_option(m.group(1)):
                hidden.append((m.start(2), m.start(2) + len(value)))
        return _hide(masked, hidden)
    except Exception:                        # the guard must not be what fails
        return "<error message withheld: it could not be masked>"
