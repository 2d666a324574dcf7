"""Who may speak on the control channel: a challenge–response handshake with the run's secret, then a MAC on
every line, both ways.

The coordinator makes a secret per run (``new_secret``); the tasks get it inside their TaskPlan, i.e. over
Spark's own channel. The secret never crosses the control connection. A connection goes:

1. coordinator → task: ``rbench-control/1 <server nonce>`` (32 random bytes, hex);
2. task → coordinator: ``<client nonce> <identity> <mac>`` with mac = HMAC-SHA256(secret, "auth" ‖ server
   nonce ‖ client nonce ‖ identity); the identity (``host/pid``) is for the coordinator's notes only;
3. coordinator → task: ``ok <mac>`` with mac = HMAC-SHA256(secret, "welcome" ‖ server nonce ‖ client nonce):
   the task knows it speaks to its own coordinator, not to whoever answers on that port;
4. every later line, either way, is ``<mac> <payload>`` with mac = HMAC-SHA256(K, direction ‖ n ‖ payload),
   K = HMAC-SHA256(secret, "session" ‖ server nonce ‖ client nonce) and n the line's number on this
   connection in that direction.

Why a MAC per line rather than authenticating the connection once and trusting TCP afterwards: anyone on
the path could then inject lines into an authenticated connection (TCP has no integrity of its own), and
the channel runs without TLS by default. Why a key per connection and a line number: a recorded
connection replayed later meets a new server nonce, so its answer and every line's MAC are wrong; a line
replayed, dropped or reordered within a connection has the wrong number; and whoever saw earlier lines
saw MACs under K, never K or the secret, so a line of their own cannot carry a right MAC. Comparisons use
``hmac.compare_digest``. What this does not hide is the lines themselves: that is TLS's job (server.py).
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import socket

from rbench.errors import CodecError

PROTOCOL = b"rbench-control/1"
NONCE_BYTES = 32
MAC_HEX = 64                         # HMAC-SHA256, hex
HANDSHAKE_LIMIT = 512                # bytes: the longest handshake line accepted (identity included)
HANDSHAKE_TIMEOUT_S = 5.0            # a peer that says nothing this long is hung up on
TO_COORDINATOR, TO_TASK = b"T", b"C"  # the direction of a line: part of its MAC, so a line cannot be bounced back


class AuthError(CodecError):
    """A peer that failed the handshake or sent a line without the right MAC; ``reason`` is what run.json notes."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"control channel: {reason}")
        self.reason = reason


def new_secret() -> bytes:
    return secrets.token_bytes(32)


def _mac(key: bytes, *parts: bytes) -> bytes:
    return hmac.new(key, b"".join(parts), hashlib.sha256).hexdigest().encode()


def _hex(token: bytes, size: int, reason: str) -> bytes:
    try:
        raw = bytes.fromhex(token.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise AuthError(reason) from None
    if len(raw) != size:
        raise AuthError(reason)
    return raw


def identity() -> str:
    """What a task says it is in the handshake: host/pid (no spaces; kept short)."""
    return f"{socket.gethostname()}/{os.getpid()}".replace(" ", "_")[:200]


# ---- the coordinator's side -----------------------------------------------------------------------------

def challenge() -> tuple[bytes, bytes]:
    """(server nonce, the line that carries it)."""
    nonce = secrets.token_bytes(NONCE_BYTES)
    return nonce, PROTOCOL + b" " + nonce.hex().encode() + b"\n"


def check_answer(secret: bytes, server_nonce: bytes, line: bytes) -> tuple[str, bytes]:
    """The task's answer to ``challenge``: (its identity, its nonce); AuthError("bad handshake") otherwise."""
    if not line:
        raise AuthError("no handshake")
    if not line.endswith(b"\n"):
        raise AuthError("bad handshake")
    parts = line.rstrip(b"\r\n").split(b" ")
    if len(parts) != 3:
        raise AuthError("bad handshake")
    client_nonce = _hex(parts[0], NONCE_BYTES, "bad handshake")
    _hex(parts[2], MAC_HEX // 2, "bad handshake")
    expected = _mac(secret, b"auth", server_nonce, client_nonce, parts[1])
    if not hmac.compare_digest(expected, parts[2].lower()):
        raise AuthError("bad handshake")
    return parts[1].decode("ascii", "replace"), client_nonce


def welcome(secret: bytes, server_nonce: bytes, client_nonce: bytes) -> bytes:
    return b"ok " + _mac(secret, b"welcome", server_nonce, client_nonce) + b"\n"


# ---- the task's side ------------------------------------------------------------------------------------

def answer(secret: bytes, challenge_line: bytes, who: str) -> tuple[bytes, bytes, bytes]:
    """(the answer line, server nonce, client nonce) for a coordinator's challenge; AuthError when the line
    is not one."""
    head, _, nonce_hex = challenge_line.rstrip(b"\r\n").partition(b" ")
    if head != PROTOCOL:
        raise AuthError("not an rbench coordinator of this version")
    server_nonce = _hex(nonce_hex, NONCE_BYTES, "not an rbench coordinator of this version")
    client_nonce = secrets.token_bytes(NONCE_BYTES)
    ident = who.encode("ascii", "replace")
    mac = _mac(secret, b"auth", server_nonce, client_nonce, ident)
    return client_nonce.hex().encode() + b" " + ident + b" " + mac + b"\n", server_nonce, client_nonce


def check_welcome(secret: bytes, server_nonce: bytes, client_nonce: bytes, line: bytes) -> None:
    if not hmac.compare_digest(welcome(secret, server_nonce, client_nonce), line):
        raise AuthError("the coordinator did not prove it holds the run's secret")


# ---- both sides, once in --------------------------------------------------------------------------------

class LineSeal:
    """The MACs of one connection's lines in one direction: ``seal`` on the sending end, ``open`` on the
    receiving end; each keeps its own line count. Not thread-safe: the sender holds a lock around
    ``seal`` and the write (server.py)."""

    def __init__(self, secret: bytes, server_nonce: bytes, client_nonce: bytes, direction: bytes) -> None:
        self._key = hmac.new(secret, b"session" + server_nonce + client_nonce, hashlib.sha256).digest()
        self._direction = direction
        self._n = 0

    def _next(self, payload: bytes) -> bytes:
        mac = _mac(self._key, self._direction, self._n.to_bytes(8, "big"), payload)
        self._n += 1
        return mac

    def seal(self, line: bytes) -> bytes:
        """``line`` (one line, with its newline) with its MAC in front."""
        payload = line.rstrip(b"\n")
        return self._next(payload) + b" " + payload + b"\n"

    def open(self, line: bytes) -> bytes:
        """The payload of a sealed line (with a newline); AuthError("bad line MAC") when its MAC is not this
        connection's next one."""
        if len(line) < MAC_HEX + 2 or line[MAC_HEX:MAC_HEX + 1] != b" ":
            raise AuthError("bad line MAC")
        payload = line[MAC_HEX + 1:].rstrip(b"\n")
        if not hmac.compare_digest(self._next(payload), line[:MAC_HEX]):
            raise AuthError("bad line MAC")
        return payload + b"\n"
