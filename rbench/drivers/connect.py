"""Connect to the first URI that answers: the fail-over rule every driver shares.

A cluster lists several node URIs; a driver tries them in order within one deadline
(each URI gets a fair share of what is left, at least a second), and when none answers
the error names every URI tried, password masked, with why it failed. Drivers differ only
in how they open one connection and how they describe their protocol's failures. What
they share when they negotiate (the AMQP frame size, TLS) is here too.
"""
from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from rbench.config.uri import mask_uri
from rbench.drivers.replies import ConnectionLost
from rbench.errors import ConfigError, ConnectError

if TYPE_CHECKING:
    from rbench.drivers.base import OnLost

T = TypeVar("T")

# The largest frame an AMQP driver asks the broker for (0-9-1 tune frame_max, 1.0 open max-frame-size).
# A URI's frame_max may lower it, never raise it: the 0-9-1 frame reader's buffer is sized for it. The
# compiled 0-9-1 codec's default (rbench.codec.amqp091.DEFAULT_FRAME_MAX) is the same number, which
# tests/unit/test_amqp091_codec.py checks. (The stream protocol's is its own: stream_wire.FRAME_MAX.)
AMQP_FRAME_MAX = 131_072


async def first_that_answers(uris: Sequence[str], open_one: Callable[[str], Awaitable[T]], timeout: float,
                             why: Callable[[str, BaseException], str | None], what: str = "RabbitMQ") -> T:
    """``open_one(uri)`` for each URI in order until one succeeds; ConnectError naming them all otherwise.

    ``why(uri, exc)`` says in a few words why ``uri`` failed, or None for an exception that is not a
    connection failure (it propagates unchanged). Timeouts are described here.
    """
    if not uris:
        raise ConfigError(f"no URI to connect to {what}")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    failures: list[str] = []
    timeouts = 0
    for i, uri in enumerate(uris):
        masked = mask_uri(uri)
        remaining = deadline - loop.time()
        if remaining <= 0.05:
            failures.append(f"{masked}: not tried, {timeout:.0f} s connect deadline passed")
            timeouts += 1
            continue
        budget = max(remaining / (len(uris) - i), min(remaining, 1.0))
        try:
            return await asyncio.wait_for(open_one(uri), budget)
        except (asyncio.TimeoutError, TimeoutError):
            failures.append(f"{masked}: no answer within {budget:.1f} s")
            timeouts += 1
        except Exception as exc:
            reason = why(uri, exc)
            if reason is None:
                raise
            failures.append(f"{masked}: {reason}")
    raise ConnectError(f"cannot connect to {what}: " + "; ".join(failures), timed_out=timeouts == len(uris))


def tls_context(masked_uri: str, cacertfile: str | None, certfile: str | None, keyfile: str | None,
                verify: bool) -> ssl.SSLContext:
    """The TLS context of an amqps:// URI's options, the same for every driver.

    Files that cannot be loaded are a ConfigError naming the (masked) URI, before any connection."""
    try:
        ctx = ssl.create_default_context(cafile=cacertfile)
        if certfile:
            ctx.load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{masked_uri}: cannot load TLS files ({getattr(exc, 'strerror', None) or exc})") from None
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


class LossWatch:
    """Tells the runtime, once, that a driver's current connection died (Driver.open's ``on_lost``).

    A connection the driver has since replaced, or one its ``aclose()`` closed (``disarm``), is not
    reported: only a loss the task did not ask for starts a reconnect. The connection exposes ``lost``
    (a future done when its socket is gone) and ``error`` (why, or None)."""

    __slots__ = ("_conn", "_on_lost")

    def __init__(self) -> None:
        self._conn: Any = None
        self._on_lost: OnLost | None = None

    def arm(self, conn: Any, on_lost: OnLost | None) -> None:
        self._conn, self._on_lost = conn, on_lost
        conn.lost.add_done_callback(lambda _: self._fire(conn))

    def disarm(self) -> None:
        self._on_lost = None

    def _fire(self, conn: Any) -> None:
        if conn is not self._conn or self._on_lost is None:
            return
        on_lost, self._on_lost = self._on_lost, None
        on_lost(conn.error or ConnectionLost("connection lost", scope="connection"))
