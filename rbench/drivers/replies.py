"""The broker's refusals as named BrokerError subclasses, shared by every driver.

AMQP 0-9-1 reply codes name them (403 ACCESS_REFUSED, 404 NOT_FOUND, 406 PRECONDITION_FAILED …);
the aio-pika driver maps aiormq's exceptions and the stream driver its response codes onto the
same classes, so a caller catches ``NotFound`` whatever the protocol, instead of comparing
``reply_code == 404``. The one-line message always says where it happened and what the broker said.
"""
from __future__ import annotations

from rbench import errors
from rbench.errors import BrokerError


class AmqpError(BrokerError):
    """The broker closed a channel or the connection with a reply code."""

    reply_code_default: int | None = None

    def __init__(self, message: str, reply_code: int | None = None, reply_text: str = "",
                 scope: str = "channel") -> None:
        super().__init__(message, reply_code if reply_code is not None else self.reply_code_default)
        self.reply_text = reply_text
        self.scope = scope


class ContentTooLarge(AmqpError):
    reply_code_default = 311


class NoConsumers(AmqpError):
    reply_code_default = 313


class ConnectionForced(AmqpError, errors.ConnectionLost):
    """320: the broker closed the connection itself (a node shutting down, an operator's close):
    a connection loss the runtime may ride through, like a dropped socket."""

    reply_code_default = 320


class InvalidPath(AmqpError):
    reply_code_default = 402


class AccessRefused(AmqpError):
    reply_code_default = 403


class NotFound(AmqpError):
    reply_code_default = 404


class ResourceLocked(AmqpError):
    reply_code_default = 405


class PreconditionFailed(AmqpError):
    reply_code_default = 406


class FrameError(AmqpError):
    reply_code_default = 501


class SyntaxError_(AmqpError):
    reply_code_default = 502


class CommandInvalid(AmqpError):
    reply_code_default = 503


class ChannelError(AmqpError):
    reply_code_default = 504


class UnexpectedFrame(AmqpError):
    reply_code_default = 505


class ResourceError(AmqpError):
    reply_code_default = 506


class NotAllowed(AmqpError):
    reply_code_default = 530


class NotImplemented_(AmqpError):
    reply_code_default = 540


class InternalError(AmqpError):
    reply_code_default = 541


class ConnectionLost(AmqpError, errors.ConnectionLost):
    """The TCP connection ended without a connection.close (no reply code), or no heartbeat came."""


REPLY_CLASSES: dict[int, type[AmqpError]] = {
    cls.reply_code_default: cls
    for cls in (ContentTooLarge, NoConsumers, ConnectionForced, InvalidPath, AccessRefused, NotFound,
                ResourceLocked, PreconditionFailed, FrameError, SyntaxError_, CommandInvalid, ChannelError,
                UnexpectedFrame, ResourceError, NotAllowed, NotImplemented_, InternalError)
    if cls.reply_code_default is not None
}


def error_for(reply_code: int, reply_text: str, scope: str, doing: str) -> AmqpError:
    """The named error for a channel.close / connection.close the broker sent."""
    cls = REPLY_CLASSES.get(reply_code, AmqpError)
    return cls(f"{doing}: broker closed the {scope} with {reply_code} {reply_text}", reply_code, reply_text, scope)


def named(message: str, reply_code: int | None, reply_text: str = "", scope: str = "channel") -> AmqpError:
    """The named error for a reply code some other protocol reported (the stream protocol, aiormq)."""
    cls = REPLY_CLASSES.get(reply_code, AmqpError) if reply_code is not None else AmqpError
    return cls(message, reply_code, reply_text, scope)
