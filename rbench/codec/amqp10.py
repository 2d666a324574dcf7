"""AMQP 1.0 codec: the type system (OASIS AMQP 1.0 part 1 §1.6) and message format (part 3 §3.2).

The work is done by the compiled extension ``rbench.codec._amqp10`` (built from
``ext/codec/amqp10.pyx``); this module is its stable public face. There is deliberately no
pure-Python fallback: a missing build must fail loudly rather than silently run ~30x
slower and skew every benchmark that uses it. The Python <-> AMQP type mapping, the
zero-copy rules and the limits are documented in ``docs/codec.md``.

Typical use::

    from rbench.codec.amqp10 import Message, Properties, encode_message, decode_message

    wire = encode_message(Message({"k": 1}, properties=Properties(message_id="m-1")))
    msg = decode_message(wire)          # msg.body == {"k": 1}

    # RabbitMQ Streams fast path: one data section (+ optional application-properties)
    wire = encode_data(b"payload", {"producer": "p1"})
    view = decode_data(wire)            # memoryview into ``wire``, no copy

Every malformed input raises :class:`rbench.errors.CodecError` with the byte offset.
"""
from __future__ import annotations

from rbench.codec._amqp10 import (
    BODY_DATA,
    BODY_SEQUENCE,
    BODY_VALUE,
    MAX_DEPTH,
    PROPERTY_NAMES,
    Array,
    Byte,
    Char,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
    Float,
    Header,
    Int,
    Long,
    Message,
    Properties,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
    decode_data,
    decode_data_props,
    decode_message,
    decode_value,
    decode_value_at,
    encode_data,
    encode_message,
    encode_value,
)
from rbench.errors import CodecError

__all__ = [
    "BODY_DATA", "BODY_SEQUENCE", "BODY_VALUE", "MAX_DEPTH", "PROPERTY_NAMES",
    "Array", "Byte", "Char", "CodecError", "Decimal32", "Decimal64", "Decimal128", "Described",
    "Float", "Header", "Int", "Long", "Message", "Properties", "Short", "Symbol", "Timestamp",
    "UByte", "UInt", "ULong", "UShort",
    "decode_data", "decode_data_props", "decode_message", "decode_value", "decode_value_at",
    "encode_data", "encode_message", "encode_value",
]
