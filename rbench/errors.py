"""The few exception types rbench raises on purpose.

Every error a user can cause (bad workload, broker down, wrong password, corrupt
samples) is one of these, so the CLI can print a single line instead of a traceback.
"""
from __future__ import annotations


class RbenchError(Exception):
    """Base of every error rbench reports to a user as one line."""


class ConfigError(RbenchError):
    """A workload, flag or conf/ file is invalid; the message names the field."""


class BrokerError(RbenchError):
    """The broker refused, closed or could not be reached.

    ``reply_code`` carries the AMQP reply code when the broker sent one
    (e.g. 403 ACCESS_REFUSED, 404 NOT_FOUND, 406 PRECONDITION_FAILED).
    """

    def __init__(self, message: str, reply_code: int | None = None) -> None:
        super().__init__(message)
        self.reply_code = reply_code


class ConnectError(BrokerError):
    """No connection: refused, unreachable, timed out, or authentication failed.

    ``timed_out`` is True when no URI answered in time (none refused): connect statistics count the two apart."""

    def __init__(self, message: str, reply_code: int | None = None, timed_out: bool = False) -> None:
        super().__init__(message, reply_code)
        self.timed_out = timed_out


class ConnectionLost(BrokerError):
    """An open connection to the broker ended: the TCP connection dropped or was cut, the broker
    stopped answering (missed heartbeats), or a node going down forced it closed (320).

    Nothing the workload asked for was refused, so a reconnect may succeed: a driver whose matrix
    row says ``reconnect`` raises exactly this from ``ready()``/``publish()`` (and reports it to the
    ``on_lost`` callback of ``Driver.open``), and the runtime rides through it (docs/drivers.md)."""


class CodecError(RbenchError):
    """Bytes on the wire do not follow the protocol; names the offset and what was expected."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        super().__init__(message if offset is None else f"{message} (at offset {offset})")
        self.offset = offset


class SinkError(RbenchError):
    """Samples could not be written or read (disk, Parquet, missing run directory)."""


def os_error_text(exc: OSError) -> str:
    """Why a socket call failed, worded the same on every event loop.

    asyncio reports a refused connect as "Connect call failed ('host', port)" (the
    errno's text is lost in its strerror) while uvloop says "Connection refused";
    the errno decides, so users read the same cause whichever loop ran."""
    import os

    if exc.errno:
        return os.strerror(exc.errno)
    return exc.strerror or str(exc) or type(exc).__name__
