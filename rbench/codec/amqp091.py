"""Public face of the AMQP 0-9-1 codec (compiled in ext/codec/amqp091.pyx).

Import from here, not from ``_amqp091``: this module names the method keys the
driver dispatches on and gives methods readable names, so the protocol code reads
``K.BASIC_DELIVER`` instead of ``3932220``.
"""
from __future__ import annotations

from rbench.codec._amqp091 import (
    CONTENT_METHODS,
    DEFAULT_FRAME_MAX,
    FRAME_BODY,
    FRAME_END,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    FRAME_MIN_SIZE,
    METHOD_KEYS,
    METHODS,
    PROPERTIES,
    PROTOCOL_HEADER,
    FrameReader,
    PublishEncoder,
    TypedValue,
    decode_header,
    decode_method,
    decode_table,
    encode_ack,
    encode_body,
    encode_header,
    encode_heartbeat,
    encode_method,
    encode_properties,
    encode_table,
    now_ns,
    split_frames,
)
from rbench.errors import CodecError


def key(class_id: int, method_id: int) -> int:
    """The dispatch key of a method: class_id << 16 | method_id."""
    return (class_id << 16) | method_id


def method_name(k: int) -> str:
    """'Queue.Declare' for a key; 'unknown 50.99' when the codec has no such method."""
    spec = METHODS.get(k)
    return spec[0] if spec else f"unknown {k >> 16}.{k & 0xFFFF}"


def method_fields(k: int) -> tuple[str, ...]:
    """Argument names of a method, in wire order (the tuple decode_method returns)."""
    return METHODS[k][1]


class K:
    """Method keys the driver uses (class_id << 16 | method_id)."""

    CONNECTION_START = key(10, 10)
    CONNECTION_START_OK = key(10, 11)
    CONNECTION_SECURE = key(10, 20)
    CONNECTION_TUNE = key(10, 30)
    CONNECTION_TUNE_OK = key(10, 31)
    CONNECTION_OPEN = key(10, 40)
    CONNECTION_OPEN_OK = key(10, 41)
    CONNECTION_CLOSE = key(10, 50)
    CONNECTION_CLOSE_OK = key(10, 51)
    CONNECTION_BLOCKED = key(10, 60)
    CONNECTION_UNBLOCKED = key(10, 61)
    CHANNEL_OPEN = key(20, 10)
    CHANNEL_OPEN_OK = key(20, 11)
    CHANNEL_FLOW = key(20, 20)
    CHANNEL_FLOW_OK = key(20, 21)
    CHANNEL_CLOSE = key(20, 40)
    CHANNEL_CLOSE_OK = key(20, 41)
    EXCHANGE_DECLARE = key(40, 10)
    EXCHANGE_DECLARE_OK = key(40, 11)
    EXCHANGE_DELETE = key(40, 20)
    EXCHANGE_DELETE_OK = key(40, 21)
    QUEUE_DECLARE = key(50, 10)
    QUEUE_DECLARE_OK = key(50, 11)
    QUEUE_BIND = key(50, 20)
    QUEUE_BIND_OK = key(50, 21)
    QUEUE_PURGE = key(50, 30)
    QUEUE_PURGE_OK = key(50, 31)
    QUEUE_DELETE = key(50, 40)
    QUEUE_DELETE_OK = key(50, 41)
    BASIC_QOS = key(60, 10)
    BASIC_QOS_OK = key(60, 11)
    BASIC_CONSUME = key(60, 20)
    BASIC_CONSUME_OK = key(60, 21)
    BASIC_CANCEL = key(60, 30)
    BASIC_CANCEL_OK = key(60, 31)
    BASIC_PUBLISH = key(60, 40)
    BASIC_RETURN = key(60, 50)
    BASIC_DELIVER = key(60, 60)
    BASIC_GET = key(60, 70)
    BASIC_GET_OK = key(60, 71)
    BASIC_GET_EMPTY = key(60, 72)
    BASIC_ACK = key(60, 80)
    BASIC_REJECT = key(60, 90)
    BASIC_NACK = key(60, 120)
    CONFIRM_SELECT = key(85, 10)
    CONFIRM_SELECT_OK = key(85, 11)

__all__ = [
    "CONTENT_METHODS",
    "DEFAULT_FRAME_MAX",
    "FRAME_BODY",
    "FRAME_END",
    "FRAME_HEADER",
    "FRAME_HEARTBEAT",
    "FRAME_METHOD",
    "FRAME_MIN_SIZE",
    "METHOD_KEYS",
    "METHODS",
    "PROPERTIES",
    "PROTOCOL_HEADER",
    "FrameReader",
    "PublishEncoder",
    "TypedValue",
    "decode_header",
    "decode_method",
    "decode_table",
    "encode_ack",
    "encode_body",
    "encode_header",
    "encode_heartbeat",
    "encode_method",
    "encode_properties",
    "encode_table",
    "now_ns",
    "split_frames",
    "CodecError",
    "key",
    "method_name",
    "method_fields",
    "K",
]
