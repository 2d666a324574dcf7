"""Type stubs for the compiled AMQP 1.0 codec (ext/codec/amqp10.pyx); see docs/codec.md."""
from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable
from typing import Any, Literal

BODY_DATA: Literal["data"]
BODY_SEQUENCE: Literal["sequence"]
BODY_VALUE: Literal["value"]
MAX_DEPTH: int
PROPERTY_NAMES: tuple[str, ...]

BytesLike = bytes | bytearray | memoryview

class Symbol(str): ...
class Char(str):
    def __new__(cls, value: str) -> Char: ...

class _Ranged(int):
    def __new__(cls, value: int = ...) -> _Ranged: ...

class UByte(_Ranged): ...
class UShort(_Ranged): ...
class UInt(_Ranged): ...
class ULong(_Ranged): ...
class Byte(_Ranged): ...
class Short(_Ranged): ...
class Int(_Ranged): ...
class Long(_Ranged): ...
class Decimal32(_Ranged): ...
class Decimal64(_Ranged): ...
class Timestamp(_Ranged): ...
class Float(float): ...
class Decimal128(bytes):
    def __new__(cls, value: bytes) -> Decimal128: ...

class Described:
    descriptor: Any
    value: Any
    def __init__(self, descriptor: Any, value: Any) -> None: ...

class Array:
    code: int
    items: list[Any]
    descriptor: Any
    def __init__(self, code: int, items: Iterable[Any], descriptor: Any = None) -> None: ...

class Header:
    durable: bool
    priority: int
    ttl: int | None
    first_acquirer: bool
    delivery_count: int
    def __init__(self, durable: bool = False, priority: int = 4, ttl: int | None = None,
                 first_acquirer: bool = False, delivery_count: int = 0) -> None: ...

MessageId = str | int | bytes | uuid.UUID
Time = datetime.datetime | int

class Properties:
    message_id: MessageId | None
    user_id: BytesLike | None
    to: str | None
    subject: str | None
    reply_to: str | None
    correlation_id: MessageId | None
    content_type: str | None
    content_encoding: str | None
    absolute_expiry_time: Time | None
    creation_time: Time | None
    group_id: str | None
    group_sequence: int | None
    reply_to_group_id: str | None
    def __init__(self, message_id: MessageId | None = None, user_id: BytesLike | None = None,
                 to: str | None = None, subject: str | None = None,
                 reply_to: str | None = None, correlation_id: MessageId | None = None,
                 content_type: str | None = None, content_encoding: str | None = None,
                 absolute_expiry_time: Time | None = None, creation_time: Time | None = None,
                 group_id: str | None = None, group_sequence: int | None = None,
                 reply_to_group_id: str | None = None) -> None: ...

class Message:
    body: Any
    body_kind: str
    header: Header | None
    delivery_annotations: dict[Any, Any] | None
    message_annotations: dict[Any, Any] | None
    properties: Properties | None
    application_properties: dict[str, Any] | None
    footer: dict[Any, Any] | None
    def __init__(self, body: Any = None, *, body_kind: str | None = None,
                 header: Header | None = None,
                 delivery_annotations: dict[Any, Any] | None = None,
                 message_annotations: dict[Any, Any] | None = None,
                 properties: Properties | None = None,
                 application_properties: dict[str, Any] | None = None,
                 footer: dict[Any, Any] | None = None) -> None: ...

def encode_value(value: Any) -> bytes: ...
def decode_value(buf: BytesLike) -> Any: ...
def decode_value_at(buf: BytesLike, offset: int = 0) -> tuple[Any, int]: ...
def encode_message(msg: Message) -> bytes: ...
def decode_message(buf: BytesLike) -> Message: ...
def encode_data(body: BytesLike, application_properties: dict[str, Any] | None = None) -> bytes: ...
def decode_data(buf: BytesLike) -> memoryview: ...
def decode_data_props(buf: BytesLike) -> tuple[memoryview, dict[str, Any] | None]: ...
