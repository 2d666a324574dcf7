"""Broker reply codes of AMQP 0-9-1 as named BrokerError subclasses.

A test (or a user) can catch ``NotFound`` instead of comparing ``reply_code == 404``,
and the one-line message always says where it happened and what the broker said.
"""
from __future__ import annotations

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


class ConnectionForced(AmqpError):
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


class ConnectionLost(AmqpError):
    """The TCP connection ended without a connection.close (no reply code)."""


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
