"""Pure-Python reference AMQP 1.0 codec: the test oracle for rbench.codec._amqp10.

Written straight from the OASIS AMQP 1.0 spec (part 1 §1.6 types, part 3 §3.2 message
format) with struct and no cleverness, so that disagreements with the compiled codec point
at a bug in one of them. It follows the same Python mapping and the same encoding choices
as docs/codec.md (smallest form for list/map/str/bin, smalllong for small ints, trailing
default fields trimmed) so encodings can be compared byte for byte. Test-only: rbench never
falls back to it at runtime.
"""
from __future__ import annotations

import datetime as dt
import struct
import uuid
from typing import Any

from rbench.codec.amqp10 import (
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
)
from rbench.errors import CodecError

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
MAX_DEPTH = 64

FIXED = {0x40: 0, 0x41: 0, 0x42: 0, 0x43: 0, 0x44: 0, 0x45: 0,
         0x50: 1, 0x51: 1, 0x52: 1, 0x53: 1, 0x54: 1, 0x55: 1, 0x56: 1,
         0x60: 2, 0x61: 2, 0x70: 4, 0x71: 4, 0x72: 4, 0x73: 4, 0x74: 4,
         0x80: 8, 0x81: 8, 0x82: 8, 0x83: 8, 0x84: 8, 0x94: 16, 0x98: 16}


# --------------------------------------------------------------------------- encode

def _ms(v: Any) -> int:
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.timezone.utc)
        delta = v - EPOCH
        return (delta.days * 86400 + delta.seconds) * 1000 + delta.microseconds // 1000
    return int(v)


def _vbin(data: bytes, c8: int, c32: int) -> bytes:
    if len(data) <= 255:
        return bytes([c8, len(data)]) + data
    return bytes([c32]) + struct.pack(">I", len(data)) + data


def _compound(items: bytes, count: int, c8: int, c32: int) -> bytes:
    if len(items) + 1 <= 255 and count <= 255:
        return bytes([c8, len(items) + 1, count]) + items
    return bytes([c32]) + struct.pack(">II", len(items) + 4, count) + items


def payload(code: int, v: Any) -> bytes:
    """Value ``v`` in the format of constructor ``code``, without the constructor."""
    if code in (0x40, 0x41, 0x42, 0x43, 0x44, 0x45):
        return b""
    if code == 0x56:
        return b"\x01" if v else b"\x00"
    fmt = {0x50: ">B", 0x51: ">b", 0x52: ">B", 0x53: ">B", 0x54: ">b", 0x55: ">b",
           0x60: ">H", 0x61: ">h", 0x70: ">I", 0x71: ">i", 0x72: ">f", 0x74: ">I",
           0x80: ">Q", 0x81: ">q", 0x82: ">d", 0x84: ">Q"}.get(code)
    if fmt is not None:
        try:
            return struct.pack(fmt, v)
        except (struct.error, OverflowError) as e:
            raise CodecError(str(e)) from None
    if code == 0x73:
        return struct.pack(">I", ord(v))
    if code == 0x83:
        return struct.pack(">q", _ms(v))
    if code == 0x94:
        return bytes(v)
    if code == 0x98:
        return v.bytes
    if code in (0xa0, 0xa1, 0xa3, 0xb0, 0xb1, 0xb3):
        data = bytes(v) if code in (0xa0, 0xb0) else v.encode("utf-8")
        if code < 0xb0:
            if len(data) > 255:
                raise CodecError("too long for 8-bit form")
            return bytes([len(data)]) + data
        return struct.pack(">I", len(data)) + data
    if code in (0xc0, 0xd0, 0xc1, 0xd1, 0xe0, 0xf0):
        if code in (0xc0, 0xd0):
            items, count = b"".join(encode(x) for x in v), len(v)
        elif code in (0xc1, 0xd1):
            items = b"".join(encode(k) + encode(x) for k, x in v.items())
            count = 2 * len(v)
        else:
            items, count = _array_items(v), len(v.items)
        if code in (0xc0, 0xc1, 0xe0):
            if len(items) + 1 > 255 or count > 255:
                raise CodecError("too large for 8-bit form")
            return bytes([len(items) + 1, count]) + items
        return struct.pack(">II", len(items) + 4, count) + items
    raise CodecError(f"bad code {code:#x}")


def _array_items(a: Array) -> bytes:
    head = b"" if a.descriptor is None else b"\x00" + encode(a.descriptor)
    return head + bytes([a.code]) + b"".join(payload(a.code, x) for x in a.items)


def _int(v: int) -> bytes:
    if -128 <= v <= 127:
        return b"\x55" + struct.pack(">b", v)
    if -(2 ** 63) <= v < 2 ** 63:
        return b"\x81" + struct.pack(">q", v)
    if 0 <= v < 2 ** 64:
        return b"\x80" + struct.pack(">Q", v)
    raise CodecError("int out of range")


def _ulong(v: int) -> bytes:
    if v == 0:
        return b"\x44"
    if v <= 255:
        return bytes([0x53, v])
    return b"\x80" + struct.pack(">Q", v)


def _uint(v: int) -> bytes:
    if v == 0:
        return b"\x43"
    if v <= 255:
        return bytes([0x52, v])
    return b"\x70" + struct.pack(">I", v)


def _symbol(s: str) -> bytes:
    return _vbin(s.encode("ascii"), 0xa3, 0xb3)


def encode(v: Any) -> bytes:
    """Encode one value (same mapping as docs/codec.md)."""
    if v is None:
        return b"\x40"
    if v is True:
        return b"\x41"
    if v is False:
        return b"\x42"
    t = type(v)
    wrapped = {UByte: 0x50, UShort: 0x60, Byte: 0x51, Short: 0x61, Timestamp: 0x83,
               Decimal32: 0x74, Decimal64: 0x84, Decimal128: 0x94, Char: 0x73, Float: 0x72}
    if t in wrapped:
        return bytes([wrapped[t]]) + payload(wrapped[t], v)
    if t is UInt:
        return _uint(v)
    if t is ULong:
        return _ulong(v)
    if t is Int:
        return (b"\x54" + struct.pack(">b", v)) if -128 <= v <= 127 else b"\x71" + struct.pack(">i", v)
    if t is Long:
        return (b"\x55" + struct.pack(">b", v)) if -128 <= v <= 127 else b"\x81" + struct.pack(">q", v)
    if isinstance(v, Symbol):
        return _symbol(v)
    if isinstance(v, str):
        return _vbin(v.encode("utf-8"), 0xa1, 0xb1)
    if isinstance(v, int):
        return _int(v)
    if isinstance(v, float):
        return b"\x82" + struct.pack(">d", v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return _vbin(bytes(v), 0xa0, 0xb0)
    if isinstance(v, dt.datetime):
        return b"\x83" + struct.pack(">q", _ms(v))
    if isinstance(v, uuid.UUID):
        return b"\x98" + v.bytes
    if isinstance(v, Described):
        d = v.descriptor
        head = _ulong(d) if type(d) is int else _symbol(d) if type(d) is str else encode(d)
        return b"\x00" + head + encode(v.value)
    if isinstance(v, Array):
        return _compound(_array_items(v), len(v.items), 0xe0, 0xf0)
    if isinstance(v, dict):
        return _compound(b"".join(encode(k) + encode(x) for k, x in v.items()), 2 * len(v),
                         0xc1, 0xd1)
    if isinstance(v, (list, tuple)):
        if not v:
            return b"\x45"
        return _compound(b"".join(encode(x) for x in v), len(v), 0xc0, 0xd0)
    raise CodecError(f"cannot encode {t.__name__}")


def _section(code: int, body: bytes) -> bytes:
    return bytes([0x00, 0x53, code]) + body


def _annotations(d: dict) -> bytes:
    items = b"".join((_symbol(k) if isinstance(k, str) else _ulong(k)) + encode(x)
                     for k, x in d.items())
    return _compound(items, 2 * len(d), 0xc1, 0xd1)


def _fields(fields: list[bytes], defaults: list[bool]) -> bytes:
    n = len(fields)
    while n and defaults[n - 1]:
        n -= 1
    if n == 0:
        return b"\x45"
    return _compound(b"".join(fields[:n]), n, 0xc0, 0xd0)


def _opt(v: Any, enc) -> bytes:
    return b"\x40" if v is None else enc(v)


def _message_id(v: Any) -> bytes:
    return _ulong(v) if type(v) is int else encode(v)


def encode_message(m: Message) -> bytes:
    """Encode a Message section by section in spec order."""
    out = []
    if m.header is not None:
        h = m.header
        fields = [_opt(h.durable, encode), _opt(h.priority, lambda p: b"\x50" + payload(0x50, p)),
                  _opt(h.ttl, _uint), _opt(h.first_acquirer, encode), _opt(h.delivery_count, _uint)]
        defaults = [h.durable in (None, False), h.priority in (None, 4), h.ttl is None,
                    h.first_acquirer in (None, False), h.delivery_count in (None, 0)]
        out.append(_section(0x70, _fields(fields, defaults)))
    if m.delivery_annotations is not None:
        out.append(_section(0x71, _annotations(m.delivery_annotations)))
    if m.message_annotations is not None:
        out.append(_section(0x72, _annotations(m.message_annotations)))
    if m.properties is not None:
        p = m.properties
        vals = [p.message_id, p.user_id, p.to, p.subject, p.reply_to, p.correlation_id,
                p.content_type, p.content_encoding, p.absolute_expiry_time, p.creation_time,
                p.group_id, p.group_sequence, p.reply_to_group_id]
        encs = [_message_id, lambda b: _vbin(bytes(b), 0xa0, 0xb0), encode, encode, encode,
                _message_id, _symbol, _symbol, lambda t: b"\x83" + struct.pack(">q", _ms(t)),
                lambda t: b"\x83" + struct.pack(">q", _ms(t)), encode, _uint, encode]
        fields = [_opt(v, e) for v, e in zip(vals, encs)]
        out.append(_section(0x73, _fields(fields, [v is None for v in vals])))
    if m.application_properties is not None:
        d = m.application_properties
        items = b"".join(_vbin(k.encode(), 0xa1, 0xb1) + encode(x) for k, x in d.items())
        out.append(_section(0x74, _compound(items, 2 * len(d), 0xc1, 0xd1)))
    if m.body_kind == "data":
        for b in (m.body if isinstance(m.body, list) else [m.body]):
            out.append(_section(0x75, _vbin(bytes(b), 0xa0, 0xb0)))
    elif m.body_kind == "sequence":
        for s in m.body:
            out.append(_section(0x76, encode(list(s))))
    else:
        out.append(_section(0x77, encode(m.body)))
    if m.footer is not None:
        out.append(_section(0x78, _annotations(m.footer)))
    return b"".join(out)


# --------------------------------------------------------------------------- decode

class _R:
    def __init__(self, buf: bytes) -> None:
        self.buf = bytes(buf)
        self.pos = 0
        self.end = len(self.buf)

    def take(self, n: int) -> bytes:
        if n > self.end - self.pos:
            raise CodecError("truncated", self.pos)
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b


def _from_ms(ms: int) -> dt.datetime:
    try:
        return EPOCH + dt.timedelta(milliseconds=ms)
    except OverflowError:
        raise CodecError("timestamp out of range") from None


def _dec_payload(r: _R, code: int, depth: int) -> Any:
    simple = {0x40: None, 0x41: True, 0x42: False, 0x43: 0, 0x44: 0}
    if code in simple:
        return simple[code]
    if code == 0x45:
        return []
    fmt = {0x50: ">B", 0x51: ">b", 0x52: ">B", 0x53: ">B", 0x54: ">b", 0x55: ">b",
           0x60: ">H", 0x61: ">h", 0x70: ">I", 0x71: ">i", 0x72: ">f",
           0x80: ">Q", 0x81: ">q", 0x82: ">d"}.get(code)
    if fmt is not None:
        return struct.unpack(fmt, r.take(struct.calcsize(fmt)))[0]
    if code == 0x56:
        b = r.take(1)[0]
        if b > 1:
            raise CodecError("bad boolean", r.pos - 1)
        return b == 1
    if code == 0x73:
        cp = struct.unpack(">I", r.take(4))[0]
        if cp > 0x10FFFF:
            raise CodecError("bad char", r.pos - 4)
        return Char(chr(cp))
    if code == 0x74:
        return Decimal32(struct.unpack(">I", r.take(4))[0])
    if code == 0x84:
        return Decimal64(struct.unpack(">Q", r.take(8))[0])
    if code == 0x83:
        return _from_ms(struct.unpack(">q", r.take(8))[0])
    if code == 0x94:
        return Decimal128(r.take(16))
    if code == 0x98:
        return uuid.UUID(bytes=r.take(16))
    if code in (0xa0, 0xa1, 0xa3, 0xb0, 0xb1, 0xb3):
        n = r.take(1)[0] if code < 0xb0 else struct.unpack(">I", r.take(4))[0]
        data = r.take(n)
        if code in (0xa0, 0xb0):
            return data
        try:
            return Symbol(data.decode("ascii")) if code in (0xa3, 0xb3) else data.decode("utf-8")
        except UnicodeDecodeError:
            raise CodecError("bad text", r.pos) from None
    if code in (0xc0, 0xc1, 0xe0, 0xd0, 0xd1, 0xf0):
        if depth >= MAX_DEPTH:
            raise CodecError("too deep", r.pos)
        if code in (0xc0, 0xc1, 0xe0):
            size, count = r.take(2)
            body = size - 1
        else:
            size, count = struct.unpack(">II", r.take(8))
            body = size - 4
        if body < 0 or body > r.end - r.pos:
            raise CodecError("bad size", r.pos)
        saved, r.end = r.end, r.pos + body
        if code in (0xe0, 0xf0):
            descriptor = None
            c = r.take(1)[0]
            if c == 0:
                descriptor = _dec(r, depth + 1)
                c = r.take(1)[0]
            if c not in FIXED and c not in (0xa0, 0xa1, 0xa3, 0xb0, 0xb1, 0xb3, 0xc0, 0xc1,
                                            0xd0, 0xd1, 0xe0, 0xf0):
                raise CodecError("bad array constructor", r.pos - 1)
            if FIXED.get(c, 1) != 0 and count > r.end - r.pos:
                raise CodecError("bad count", r.pos)
            result: Any = Array(c, [_dec_payload(r, c, depth + 1) for _ in range(count)],
                                descriptor)
        else:
            if count > body:
                raise CodecError("bad count", r.pos)
            items = [_dec(r, depth + 1) for _ in range(count)]
            if code in (0xc0, 0xd0):
                result = items
            else:
                if count % 2:
                    raise CodecError("odd map", r.pos)
                result = {}
                for i in range(0, count, 2):
                    try:
                        result[items[i]] = items[i + 1]
                    except TypeError:
                        raise CodecError("unhashable key", r.pos) from None
        if r.pos != r.end:
            raise CodecError("size mismatch", r.pos)
        r.end = saved
        return result
    if code == 0x00:
        if depth >= MAX_DEPTH:
            raise CodecError("too deep", r.pos)
        d = _dec(r, depth + 1)
        return Described(d, _dec(r, depth + 1))
    raise CodecError(f"bad constructor {code:#x}", r.pos - 1)


def _dec(r: _R, depth: int) -> Any:
    return _dec_payload(r, r.take(1)[0], depth)


def decode(buf: bytes) -> Any:
    """Decode exactly one value filling ``buf``."""
    r = _R(buf)
    v = _dec(r, 0)
    if r.pos != r.end:
        raise CodecError("trailing bytes", r.pos)
    return v


_SECTIONS = {"amqp:header:list": 0x70, "amqp:delivery-annotations:map": 0x71,
             "amqp:message-annotations:map": 0x72, "amqp:properties:list": 0x73,
             "amqp:application-properties:map": 0x74, "amqp:data:binary": 0x75,
             "amqp:amqp-sequence:list": 0x76, "amqp:amqp-value:*": 0x77, "amqp:footer:map": 0x78}


def decode_message(buf: bytes) -> Message:
    """Decode a bare message into a Message (data bodies as bytes)."""
    r = _R(buf)
    m = Message()
    data: list = []
    seq: list = []
    while r.pos < r.end:
        d = _dec(r, 0)
        if not isinstance(d, Described):
            raise CodecError("expected section", r.pos)
        code = _SECTIONS.get(d.descriptor, d.descriptor)
        v = d.value
        if code == 0x70:
            f = (v + [None] * 5)[:5]
            m.header = Header(f[0] if f[0] is not None else False,
                              f[1] if f[1] is not None else 4, f[2],
                              f[3] if f[3] is not None else False,
                              f[4] if f[4] is not None else 0)
        elif code == 0x71:
            m.delivery_annotations = v
        elif code == 0x72:
            m.message_annotations = v
        elif code == 0x73:
            m.properties = Properties(*(v + [None] * 13)[:13])
        elif code == 0x74:
            m.application_properties = v
        elif code == 0x75:
            data.append(v)
        elif code == 0x76:
            seq.append(v)
        elif code == 0x77:
            m.body, m.body_kind = v, "value"
        elif code == 0x78:
            m.footer = v
        else:
            raise CodecError("unknown section", r.pos)
    if data:
        m.body, m.body_kind = (data[0] if len(data) == 1 else data), "data"
    elif seq:
        m.body, m.body_kind = seq, "sequence"
    return m
