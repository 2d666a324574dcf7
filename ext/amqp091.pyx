# cython: language_level=3
"""AMQP 0-9-1 wire codec: frames, methods, content headers, field tables.

Why Cython: a load generator must spend its CPU on the broker's messages, not on
struct.unpack. The hot paths are ``PublishEncoder.write`` (method + header + body
frames appended to the output bytearray in one call, the method frame pre-encoded
once per publisher) and ``FrameReader`` (frames split in place in a reusable
receive buffer; a delivery reaches its handler as (tag, redelivered, body, t_ns)
without building a method object). Everything else -- generic methods, properties,
field tables per RabbitMQ's errata (t b B s u I i l f d D S x A T F V) -- is exact
but not tuned. No asyncio here: the wire state machine lives in
rbench/drivers/amqp091_protocol.py.
"""
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.string cimport memcpy, memmove
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, int8_t, int16_t, int32_t, int64_t
from libc.time cimport time_t

import datetime as _dt
import decimal as _decimal

from rbench.errors import CodecError

cdef extern from "time.h":
    ctypedef int clockid_t
    struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(clockid_t clk_id, timespec *tp) nogil
    clockid_t CLOCK_REALTIME

FRAME_METHOD = 1
FRAME_HEADER = 2
FRAME_BODY = 3
FRAME_HEARTBEAT = 8
FRAME_END = 0xCE
PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_MIN_SIZE = 4096
DEFAULT_FRAME_MAX = 131072

cdef enum:
    _FRAME_END = 0xCE

cdef inline int64_t _now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


def now_ns() -> int:
    """time.time_ns() without the Python call overhead (CLOCK_REALTIME)."""
    return _now_ns()


# --------------------------------------------------------------------------------------
# method table: key = class_id << 16 | method_id
# field types: o octet, s short, l long, L longlong, S shortstr, X longstr, b bit, F table
# --------------------------------------------------------------------------------------
cdef inline uint32_t K(uint16_t c, uint16_t m):
    return (<uint32_t>c << 16) | m

_CLOSE = (("reply_code", "s"), ("reply_text", "S"), ("class_id", "s"), ("method_id", "s"))
_EX_BIND = (("ticket", "s"), ("destination", "S"), ("source", "S"), ("routing_key", "S"),
            ("nowait", "b"), ("arguments", "F"))
_METHOD_DEFS = (
    (10, 10, "Connection.Start", (("version_major", "o"), ("version_minor", "o"), ("server_properties", "F"),
                                  ("mechanisms", "X"), ("locales", "X"))),
    (10, 11, "Connection.StartOk", (("client_properties", "F"), ("mechanism", "S"), ("response", "X"), ("locale", "S"))),
    (10, 20, "Connection.Secure", (("challenge", "X"),)),
    (10, 21, "Connection.SecureOk", (("response", "X"),)),
    (10, 30, "Connection.Tune", (("channel_max", "s"), ("frame_max", "l"), ("heartbeat", "s"))),
    (10, 31, "Connection.TuneOk", (("channel_max", "s"), ("frame_max", "l"), ("heartbeat", "s"))),
    (10, 40, "Connection.Open", (("virtual_host", "S"), ("capabilities", "S"), ("insist", "b"))),
    (10, 41, "Connection.OpenOk", (("known_hosts", "S"),)),
    (10, 50, "Connection.Close", _CLOSE),
    (10, 51, "Connection.CloseOk", ()),
    (10, 60, "Connection.Blocked", (("reason", "S"),)),
    (10, 61, "Connection.Unblocked", ()),
    (10, 70, "Connection.UpdateSecret", (("new_secret", "X"), ("reason", "S"))),
    (10, 71, "Connection.UpdateSecretOk", ()),
    (20, 10, "Channel.Open", (("out_of_band", "S"),)),
    (20, 11, "Channel.OpenOk", (("channel_id", "X"),)),
    (20, 20, "Channel.Flow", (("active", "b"),)),
    (20, 21, "Channel.FlowOk", (("active", "b"),)),
    (20, 40, "Channel.Close", _CLOSE),
    (20, 41, "Channel.CloseOk", ()),
    (40, 10, "Exchange.Declare", (("ticket", "s"), ("exchange", "S"), ("exchange_type", "S"), ("passive", "b"),
                                  ("durable", "b"), ("auto_delete", "b"), ("internal", "b"), ("nowait", "b"),
                                  ("arguments", "F"))),
    (40, 11, "Exchange.DeclareOk", ()),
    (40, 20, "Exchange.Delete", (("ticket", "s"), ("exchange", "S"), ("if_unused", "b"), ("nowait", "b"))),
    (40, 21, "Exchange.DeleteOk", ()),
    (40, 30, "Exchange.Bind", _EX_BIND),
    (40, 31, "Exchange.BindOk", ()),
    (40, 40, "Exchange.Unbind", _EX_BIND),
    (40, 51, "Exchange.UnbindOk", ()),
    (50, 10, "Queue.Declare", (("ticket", "s"), ("queue", "S"), ("passive", "b"), ("durable", "b"),
                               ("exclusive", "b"), ("auto_delete", "b"), ("nowait", "b"), ("arguments", "F"))),
    (50, 11, "Queue.DeclareOk", (("queue", "S"), ("message_count", "l"), ("consumer_count", "l"))),
    (50, 20, "Queue.Bind", (("ticket", "s"), ("queue", "S"), ("exchange", "S"), ("routing_key", "S"),
                            ("nowait", "b"), ("arguments", "F"))),
    (50, 21, "Queue.BindOk", ()),
    (50, 30, "Queue.Purge", (("ticket", "s"), ("queue", "S"), ("nowait", "b"))),
    (50, 31, "Queue.PurgeOk", (("message_count", "l"),)),
    (50, 40, "Queue.Delete", (("ticket", "s"), ("queue", "S"), ("if_unused", "b"), ("if_empty", "b"),
                              ("nowait", "b"))),
    (50, 41, "Queue.DeleteOk", (("message_count", "l"),)),
    (50, 50, "Queue.Unbind", (("ticket", "s"), ("queue", "S"), ("exchange", "S"), ("routing_key", "S"),
                              ("arguments", "F"))),
    (50, 51, "Queue.UnbindOk", ()),
    (60, 10, "Basic.Qos", (("prefetch_size", "l"), ("prefetch_count", "s"), ("global_", "b"))),
    (60, 11, "Basic.QosOk", ()),
    (60, 20, "Basic.Consume", (("ticket", "s"), ("queue", "S"), ("consumer_tag", "S"), ("no_local", "b"),
                               ("no_ack", "b"), ("exclusive", "b"), ("nowait", "b"), ("arguments", "F"))),
    (60, 21, "Basic.ConsumeOk", (("consumer_tag", "S"),)),
    (60, 30, "Basic.Cancel", (("consumer_tag", "S"), ("nowait", "b"))),
    (60, 31, "Basic.CancelOk", (("consumer_tag", "S"),)),
    (60, 40, "Basic.Publish", (("ticket", "s"), ("exchange", "S"), ("routing_key", "S"), ("mandatory", "b"),
                               ("immediate", "b"))),
    (60, 50, "Basic.Return", (("reply_code", "s"), ("reply_text", "S"), ("exchange", "S"), ("routing_key", "S"))),
    (60, 60, "Basic.Deliver", (("consumer_tag", "S"), ("delivery_tag", "L"), ("redelivered", "b"),
                               ("exchange", "S"), ("routing_key", "S"))),
    (60, 70, "Basic.Get", (("ticket", "s"), ("queue", "S"), ("no_ack", "b"))),
    (60, 71, "Basic.GetOk", (("delivery_tag", "L"), ("redelivered", "b"), ("exchange", "S"), ("routing_key", "S"),
                             ("message_count", "l"))),
    (60, 72, "Basic.GetEmpty", (("cluster_id", "S"),)),
    (60, 80, "Basic.Ack", (("delivery_tag", "L"), ("multiple", "b"))),
    (60, 90, "Basic.Reject", (("delivery_tag", "L"), ("requeue", "b"))),
    (60, 100, "Basic.RecoverAsync", (("requeue", "b"),)),
    (60, 110, "Basic.Recover", (("requeue", "b"),)),
    (60, 111, "Basic.RecoverOk", ()),
    (60, 120, "Basic.Nack", (("delivery_tag", "L"), ("multiple", "b"), ("requeue", "b"))),
    (85, 10, "Confirm.Select", (("nowait", "b"),)),
    (85, 11, "Confirm.SelectOk", ()),
    (90, 10, "Tx.Select", ()),
    (90, 11, "Tx.SelectOk", ()),
    (90, 20, "Tx.Commit", ()),
    (90, 21, "Tx.CommitOk", ()),
    (90, 30, "Tx.Rollback", ()),
    (90, 31, "Tx.RollbackOk", ()),
)

# key -> (name, field names, field types as bytes)
METHODS = {}
METHOD_KEYS = {}
for _c, _m, _name, _fields in _METHOD_DEFS:
    METHODS[K(_c, _m)] = (_name, tuple(f[0] for f in _fields), "".join(f[1] for f in _fields).encode())
    METHOD_KEYS[_name] = K(_c, _m)

# content-bearing methods: a header frame and body frames follow
CONTENT_METHODS = frozenset((K(60, 40), K(60, 50), K(60, 60), K(60, 71)))

cdef uint32_t KEY_DELIVER = K(60, 60)
cdef uint32_t KEY_ACK = K(60, 80)
cdef uint32_t KEY_NACK = K(60, 120)

# basic properties in flag order (bit 15 first)
PROPERTIES = (("content_type", "S"), ("content_encoding", "S"), ("headers", "F"), ("delivery_mode", "o"),
              ("priority", "o"), ("correlation_id", "S"), ("reply_to", "S"), ("expiration", "S"),
              ("message_id", "S"), ("timestamp", "T"), ("message_type", "S"), ("user_id", "S"),
              ("app_id", "S"), ("cluster_id", "S"))
_PROP_NAMES = tuple(p[0] for p in PROPERTIES)
_PROP_TYPES = "".join(p[1] for p in PROPERTIES).encode()
cdef frozenset _PROP_SET = frozenset(_PROP_NAMES)


# --------------------------------------------------------------------------------------
# writer: a growable C buffer for the cold paths (methods, tables, properties)
# --------------------------------------------------------------------------------------
cdef class _Writer:
    cdef bytearray buf
    cdef Py_ssize_t n

    def __cinit__(self):
        self.buf = bytearray(256)
        self.n = 0

    cdef inline char* reserve(self, Py_ssize_t extra) except NULL:
        cdef Py_ssize_t cap = PyByteArray_GET_SIZE(self.buf)
        if self.n + extra > cap:
            while cap < self.n + extra:
                cap *= 2
            PyByteArray_Resize(self.buf, cap)
        return PyByteArray_AS_STRING(self.buf) + self.n

    cdef inline void u8(self, uint8_t v) except *:
        cdef char* p = self.reserve(1)
        p[0] = <char>v
        self.n += 1

    cdef inline void u16(self, uint16_t v) except *:
        cdef unsigned char* p = <unsigned char*>self.reserve(2)
        p[0] = v >> 8
        p[1] = v & 0xFF
        self.n += 2

    cdef inline void u32(self, uint32_t v) except *:
        cdef unsigned char* p = <unsigned char*>self.reserve(4)
        _put32(p, v)
        self.n += 4

    cdef inline void u64(self, uint64_t v) except *:
        cdef unsigned char* p = <unsigned char*>self.reserve(8)
        _put64(p, v)
        self.n += 8

    cdef inline void raw(self, const char* data, Py_ssize_t size) except *:
        cdef char* p = self.reserve(size)
        memcpy(p, data, size)
        self.n += size

    cdef void shortstr(self, object value) except *:
        cdef bytes b = _to_bytes(value, "short string")
        if PyBytes_GET_SIZE(b) > 255:
            raise CodecError(f"short string longer than 255 bytes ({PyBytes_GET_SIZE(b)})")
        self.u8(<uint8_t>PyBytes_GET_SIZE(b))
        self.raw(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))

    cdef void longstr(self, object value) except *:
        cdef bytes b = _to_bytes(value, "long string")
        if PyBytes_GET_SIZE(b) > 0xFFFFFFFF:
            raise CodecError("long string longer than 4 GiB")
        self.u32(<uint32_t>PyBytes_GET_SIZE(b))
        self.raw(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))

    cdef bytes getvalue(self):
        return PyBytes_FromStringAndSize(PyByteArray_AS_STRING(self.buf), self.n)


cdef inline void _put32(unsigned char* p, uint32_t v) noexcept nogil:
    p[0] = (v >> 24) & 0xFF
    p[1] = (v >> 16) & 0xFF
    p[2] = (v >> 8) & 0xFF
    p[3] = v & 0xFF

cdef inline void _put64(unsigned char* p, uint64_t v) noexcept nogil:
    _put32(p, <uint32_t>(v >> 32))
    _put32(p + 4, <uint32_t>v)

cdef inline uint16_t _get16(const unsigned char* p) noexcept nogil:
    return (<uint16_t>p[0] << 8) | p[1]

cdef inline uint32_t _get32(const unsigned char* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]

cdef inline uint64_t _get64(const unsigned char* p) noexcept nogil:
    return (<uint64_t>_get32(p) << 32) | _get32(p + 4)


cdef bytes _to_bytes(object value, str what):
    if isinstance(value, bytes):
        return <bytes>value
    if isinstance(value, str):
        return (<str>value).encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise CodecError(f"{what}: expected str or bytes, got {type(value).__name__}")


cdef void _write_value(_Writer w, object v) except *:
    """One tagged field value; the type letter is chosen from the Python type."""
    cdef double d
    cdef uint64_t u64v
    if v is None:
        w.u8(ord("V"))
    elif v is True or v is False:
        w.u8(ord("t"))
        w.u8(1 if v else 0)
    elif isinstance(v, int):
        if -128 <= v <= 127:
            w.u8(ord("b"))
            w.u8(<uint8_t>(<int8_t>v))
        elif -32768 <= v <= 32767:
            w.u8(ord("s"))
            w.u16(<uint16_t>(<int16_t>v))
        elif -2147483648 <= v <= 2147483647:
            w.u8(ord("I"))
            w.u32(<uint32_t>(<int32_t>v))
        elif -9223372036854775808 <= v <= 9223372036854775807:
            w.u8(ord("l"))
            w.u64(<uint64_t>(<int64_t>v))
        else:
            raise CodecError(f"field value {v} does not fit a signed 64-bit integer")
    elif isinstance(v, float):
        d = v
        w.u8(ord("d"))
        memcpy(&u64v, &d, 8)
        w.u64(u64v)
    elif isinstance(v, str):
        w.u8(ord("S"))
        w.longstr(v)
    elif isinstance(v, (bytes, bytearray, memoryview)):
        w.u8(ord("x"))
        w.longstr(v)
    elif isinstance(v, dict):
        w.u8(ord("F"))
        _write_table(w, v)
    elif isinstance(v, (list, tuple)):
        w.u8(ord("A"))
        _write_array(w, v)
    elif isinstance(v, _dt.datetime):
        w.u8(ord("T"))
        w.u64(_datetime_to_ts(v))
    elif isinstance(v, _decimal.Decimal):
        w.u8(ord("D"))
        _write_decimal(w, v)
    elif isinstance(v, TypedValue):
        _write_typed(w, v)
    else:
        raise CodecError(f"cannot encode {type(v).__name__} in a field table")


cdef uint64_t _datetime_to_ts(object v) except? 0:
    if v.tzinfo is None:
        v = v.replace(tzinfo=_dt.timezone.utc)
    ts = int(v.timestamp())
    if ts < 0:
        raise CodecError("timestamp before 1970")
    return ts


cdef void _write_decimal(_Writer w, object v) except *:
    sign, digits, exponent = v.as_tuple()
    if not isinstance(exponent, int):
        raise CodecError(f"cannot encode decimal {v}")
    if exponent > 0:
        scale, mantissa = 0, int(v)
    else:
        scale, mantissa = -exponent, int(v.scaleb(-exponent))
    if not 0 <= scale <= 255 or not -2147483648 <= mantissa <= 2147483647:
        raise CodecError(f"decimal {v} out of range (scale 0..255, 32-bit mantissa)")
    w.u8(scale)
    w.u32(<uint32_t>(<int32_t>mantissa))


class TypedValue:
    """A field value with an explicit type letter, for the types Python cannot tell
    apart (B, u, i, f, unsigned vs signed, T from an int). Decoding never returns it."""

    __slots__ = ("kind", "value")

    def __init__(self, kind: str, value: object) -> None:
        if len(kind) != 1 or kind not in "tbBsuIilfdDSxATFV":
            raise CodecError(f"unknown field type {kind!r}")
        self.kind = kind
        self.value = value

    def __repr__(self) -> str:
        return f"TypedValue({self.kind!r}, {self.value!r})"


cdef void _write_typed(_Writer w, object tv) except *:
    cdef str k = tv.kind
    v = tv.value
    cdef float f
    cdef double d
    cdef uint32_t u32v
    cdef uint64_t u64v
    w.u8(ord(k))
    try:
        if k == "t":
            w.u8(1 if v else 0)
        elif k == "b":
            _check(-128 <= v <= 127, k, v)
            w.u8(<uint8_t>(<int8_t>v))
        elif k == "B":
            _check(0 <= v <= 255, k, v)
            w.u8(<uint8_t>v)
        elif k == "s":
            _check(-32768 <= v <= 32767, k, v)
            w.u16(<uint16_t>(<int16_t>v))
        elif k == "u":
            _check(0 <= v <= 65535, k, v)
            w.u16(<uint16_t>v)
        elif k == "I":
            _check(-2147483648 <= v <= 2147483647, k, v)
            w.u32(<uint32_t>(<int32_t>v))
        elif k == "i":
            _check(0 <= v <= 4294967295, k, v)
            w.u32(<uint32_t>v)
        elif k == "l":
            _check(-9223372036854775808 <= v <= 9223372036854775807, k, v)
            w.u64(<uint64_t>(<int64_t>v))
        elif k == "f":
            f = v
            memcpy(&u32v, &f, 4)
            w.u32(u32v)
        elif k == "d":
            d = v
            memcpy(&u64v, &d, 8)
            w.u64(u64v)
        elif k == "D":
            _write_decimal(w, v)
        elif k == "S" or k == "x":
            w.longstr(v)
        elif k == "A":
            _write_array(w, v)
        elif k == "T":
            if isinstance(v, _dt.datetime):
                w.u64(_datetime_to_ts(v))
            else:
                _check(0 <= v <= 18446744073709551615, k, v)
                w.u64(<uint64_t>v)
        elif k == "F":
            _write_table(w, v)
        # V: no payload
    except (TypeError, OverflowError) as exc:
        raise CodecError(f"field type {k}: cannot encode {v!r}: {exc}") from None


cdef inline void _check(bint ok, str kind, object v) except *:
    if not ok:
        raise CodecError(f"field type {kind}: value {v!r} out of range")


cdef void _write_table(_Writer w, object table) except *:
    if not isinstance(table, dict):
        raise CodecError(f"field table: expected dict, got {type(table).__name__}")
    cdef Py_ssize_t at = w.n
    w.u32(0)
    for key, value in (<dict>table).items():
        w.shortstr(key)
        _write_value(w, value)
    _put32(<unsigned char*>PyByteArray_AS_STRING(w.buf) + at, <uint32_t>(w.n - at - 4))


cdef void _write_array(_Writer w, object items) except *:
    cdef Py_ssize_t at = w.n
    w.u32(0)
    for value in items:
        _write_value(w, value)
    _put32(<unsigned char*>PyByteArray_AS_STRING(w.buf) + at, <uint32_t>(w.n - at - 4))


def encode_table(table: dict) -> bytes:
    """A field table with its 4-byte length prefix."""
    cdef _Writer w = _Writer()
    _write_table(w, table if table is not None else {})
    return w.getvalue()


# --------------------------------------------------------------------------------------
# reader: bounds-checked cursor over a byte range
# --------------------------------------------------------------------------------------
cdef class _Cursor:
    cdef const unsigned char* p
    cdef Py_ssize_t pos, end, base
    cdef object owner   # keeps the memory alive

    cdef inline const unsigned char* take(self, Py_ssize_t n, str what) except NULL:
        if n < 0 or self.end - self.pos < n:
            raise CodecError(f"truncated {what}: need {n} bytes, {self.end - self.pos} left", self.base + self.pos)
        cdef const unsigned char* r = self.p + self.pos
        self.pos += n
        return r

    cdef inline uint8_t u8(self, str what) except? 0xFF:
        return self.take(1, what)[0]

    cdef inline uint16_t u16(self, str what) except? 0xFFFF:
        return _get16(self.take(2, what))

    cdef inline uint32_t u32(self, str what) except? 0xFFFFFFFF:
        return _get32(self.take(4, what))

    cdef inline uint64_t u64(self, str what) except? 0xFFFFFFFFFFFFFFFF:
        return _get64(self.take(8, what))

    cdef str shortstr(self, str what):
        cdef Py_ssize_t n = self.u8(what)
        cdef const unsigned char* s = self.take(n, what)
        try:
            return (<const char*>s)[:n].decode("utf-8")
        except UnicodeDecodeError:
            raise CodecError(f"{what}: short string is not UTF-8", self.base + self.pos - n) from None

    cdef bytes rawlong(self, str what):
        cdef Py_ssize_t n = self.u32(what)
        cdef const unsigned char* s = self.take(n, what)
        return PyBytes_FromStringAndSize(<const char*>s, n)


cdef _Cursor _cursor(const unsigned char* p, Py_ssize_t n, object owner, Py_ssize_t base=0):
    cdef _Cursor c = _Cursor.__new__(_Cursor)
    c.p = p
    c.pos = 0
    c.end = n
    c.base = base
    c.owner = owner
    return c


cdef object _long_text(bytes b):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b


cdef object _read_value(_Cursor c, int depth):
    cdef uint8_t k = c.u8("field type")
    cdef uint32_t u32v
    cdef uint64_t u64v
    cdef float f
    cdef double d
    if k == b"t":
        return c.u8("boolean") != 0
    if k == b"b":
        return <int8_t>c.u8("short-short-int")
    if k == b"B":
        return c.u8("short-short-uint")
    if k == b"s":
        return <int16_t>c.u16("short-int")
    if k == b"u":
        return c.u16("short-uint")
    if k == b"I":
        return <int32_t>c.u32("long-int")
    if k == b"i":
        return c.u32("long-uint")
    if k == b"l" or k == b"L":
        return <int64_t>c.u64("long-long-int")
    if k == b"f":
        u32v = c.u32("float")
        memcpy(&f, &u32v, 4)
        return f
    if k == b"d":
        u64v = c.u64("double")
        memcpy(&d, &u64v, 8)
        return d
    if k == b"D":
        scale = c.u8("decimal scale")
        mantissa = <int32_t>c.u32("decimal value")
        return _decimal.Decimal(mantissa).scaleb(-scale)
    if k == b"S":
        return _long_text(c.rawlong("long string"))
    if k == b"x":
        return c.rawlong("byte array")
    if k == b"A":
        return _read_array(c, depth + 1)
    if k == b"T":
        u64v = c.u64("timestamp")
        try:
            return _dt.datetime.fromtimestamp(u64v, tz=_dt.timezone.utc)
        except (OverflowError, ValueError, OSError):
            raise CodecError(f"timestamp {u64v} out of range", c.base + c.pos - 8) from None
    if k == b"F":
        return _read_table(c, depth + 1)
    if k == b"V":
        return None
    raise CodecError(f"unknown field type {bytes([k])!r}", c.base + c.pos - 1)


cdef dict _read_table(_Cursor c, int depth):
    if depth > 64:
        raise CodecError("field tables nested deeper than 64", c.base + c.pos)
    cdef Py_ssize_t n = c.u32("field table length")
    cdef Py_ssize_t start = c.pos
    c.take(n, "field table")
    cdef _Cursor sub = _cursor(c.p + start, n, c.owner, c.base + start)
    cdef dict out = {}
    while sub.pos < sub.end:
        key = sub.shortstr("field name")
        out[key] = _read_value(sub, depth)
    return out


cdef list _read_array(_Cursor c, int depth):
    if depth > 64:
        raise CodecError("field arrays nested deeper than 64", c.base + c.pos)
    cdef Py_ssize_t n = c.u32("field array length")
    cdef Py_ssize_t start = c.pos
    c.take(n, "field array")
    cdef _Cursor sub = _cursor(c.p + start, n, c.owner, c.base + start)
    cdef list out = []
    while sub.pos < sub.end:
        out.append(_read_value(sub, depth))
    return out


cdef class _View:
    """Holds a buffer export for the lifetime of a decode call."""
    cdef Py_buffer view
    cdef bint held

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)


cdef _View _acquire(object data):
    cdef _View v = _View.__new__(_View)
    PyObject_GetBuffer(data, &v.view, PyBUF_SIMPLE)
    v.held = True
    return v


def decode_table(data, Py_ssize_t offset=0) -> tuple:
    """(table, offset after it) from a length-prefixed field table at ``offset``."""
    cdef _View v = _acquire(data)
    if offset < 0 or offset > v.view.len:
        raise CodecError("offset outside the buffer", offset)
    cdef _Cursor c = _cursor(<const unsigned char*>v.view.buf + offset, v.view.len - offset, v, offset)
    t = _read_table(c, 0)
    return t, offset + c.pos


# --------------------------------------------------------------------------------------
# methods
# --------------------------------------------------------------------------------------
cdef tuple _read_args(_Cursor c, bytes types):
    cdef list out = []
    cdef uint8_t bits = 0
    cdef int nbit = 8
    cdef Py_ssize_t i
    cdef char t
    for i in range(PyBytes_GET_SIZE(types)):
        t = PyBytes_AS_STRING(types)[i]
        if t == b"b":
            if nbit == 8:
                bits = c.u8("bit field")
                nbit = 0
            out.append((bits >> nbit) & 1 == 1)
            nbit += 1
            continue
        nbit = 8
        if t == b"o":
            out.append(c.u8("octet"))
        elif t == b"s":
            out.append(c.u16("short"))
        elif t == b"l":
            out.append(c.u32("long"))
        elif t == b"L":
            out.append(c.u64("longlong"))
        elif t == b"S":
            out.append(c.shortstr("short string"))
        elif t == b"X":
            out.append(_long_text(c.rawlong("long string")))
        elif t == b"F":
            out.append(_read_table(c, 0))
    return tuple(out)


cdef void _write_args(_Writer w, bytes types, tuple args, str name) except *:
    if len(args) != PyBytes_GET_SIZE(types):
        raise CodecError(f"{name}: expected {PyBytes_GET_SIZE(types)} arguments, got {len(args)}")
    cdef uint8_t bits = 0
    cdef int nbit = 8
    cdef Py_ssize_t i, bitpos = -1
    cdef char t
    for i in range(PyBytes_GET_SIZE(types)):
        t = PyBytes_AS_STRING(types)[i]
        v = args[i]
        if t == b"b":
            if nbit == 8:
                bitpos = w.n
                w.u8(0)
                nbit = 0
            if v:
                (<unsigned char*>PyByteArray_AS_STRING(w.buf))[bitpos] |= (1 << nbit)
            nbit += 1
            continue
        nbit = 8
        try:
            if t == b"o":
                _check(0 <= v <= 255, "octet", v)
                w.u8(v)
            elif t == b"s":
                _check(0 <= v <= 65535, "short", v)
                w.u16(v)
            elif t == b"l":
                _check(0 <= v <= 4294967295, "long", v)
                w.u32(v)
            elif t == b"L":
                _check(0 <= v <= 18446744073709551615, "longlong", v)
                w.u64(v)
            elif t == b"S":
                w.shortstr(v)
            elif t == b"X":
                w.longstr(v)
            elif t == b"F":
                _write_table(w, v if v is not None else {})
        except TypeError as exc:
            raise CodecError(f"{name}: argument {i}: {exc}") from None


def decode_method(data, Py_ssize_t offset=0, Py_ssize_t size=-1) -> tuple:
    """(key, args) from a method frame payload; key = class_id << 16 | method_id."""
    cdef _View v = _acquire(data)
    if size < 0:
        size = v.view.len - offset
    if offset < 0 or size < 0 or offset + size > v.view.len:
        raise CodecError("method payload outside the buffer", offset)
    return _decode_method(<const unsigned char*>v.view.buf + offset, size, v, offset)


cdef tuple _decode_method(const unsigned char* p, Py_ssize_t n, object owner, Py_ssize_t base):
    cdef _Cursor c = _cursor(p, n, owner, base)
    cdef uint32_t key = c.u32("method id")
    spec = METHODS.get(key)
    if spec is None:
        raise CodecError(f"unknown method {key >> 16}.{key & 0xFFFF}", base)
    args = _read_args(c, spec[2])
    if c.pos != c.end:
        raise CodecError(f"{spec[0]}: {c.end - c.pos} trailing bytes", base + c.pos)
    return key, args


cdef void _frame_head(_Writer w, uint8_t ftype, uint16_t channel) except *:
    w.u8(ftype)
    w.u16(channel)
    w.u32(0)    # patched by _frame_end


cdef void _frame_end(_Writer w, Py_ssize_t start) except *:
    _put32(<unsigned char*>PyByteArray_AS_STRING(w.buf) + start + 3, <uint32_t>(w.n - start - 7))
    w.u8(_FRAME_END)


def encode_method(int channel, uint32_t key, tuple args=()) -> bytes:
    """A complete method frame (header, payload, frame-end)."""
    spec = METHODS.get(key)
    if spec is None:
        raise CodecError(f"unknown method {key >> 16}.{key & 0xFFFF}")
    _check_channel(channel)
    cdef _Writer w = _Writer()
    _frame_head(w, 1, channel)
    w.u32(key)
    _write_args(w, spec[2], args, spec[0])
    _frame_end(w, 0)
    return w.getvalue()


cdef inline void _check_channel(int channel) except *:
    if not 0 <= channel <= 65535:
        raise CodecError(f"channel {channel} outside 0..65535")


# --------------------------------------------------------------------------------------
# content header (basic properties)
# --------------------------------------------------------------------------------------
cdef void _write_properties(_Writer w, dict props) except *:
    cdef uint16_t flags = 0
    cdef Py_ssize_t at = w.n
    cdef int i
    for key in props:
        if key not in _PROP_SET:
            raise CodecError(f"unknown basic property {key!r}")
    w.u16(0)
    for i in range(14):
        v = props.get(_PROP_NAMES[i])
        if v is None:
            continue
        flags |= 1 << (15 - i)
        t = _PROP_TYPES[i]
        if t == b"S"[0]:
            w.shortstr(v)
        elif t == b"F"[0]:
            _write_table(w, v)
        elif t == b"o"[0]:
            _check(0 <= v <= 255, _PROP_NAMES[i], v)
            w.u8(v)
        elif t == b"T"[0]:
            if isinstance(v, _dt.datetime):
                w.u64(_datetime_to_ts(v))
            else:
                _check(0 <= v <= 18446744073709551615, "timestamp", v)
                w.u64(v)
    (<unsigned char*>PyByteArray_AS_STRING(w.buf))[at] = flags >> 8
    (<unsigned char*>PyByteArray_AS_STRING(w.buf))[at + 1] = flags & 0xFF


cdef dict _read_properties(_Cursor c):
    cdef uint16_t flags = c.u16("property flags")
    if flags & 1:
        raise CodecError("property flags continuation is not used by basic properties", c.base + c.pos - 2)
    cdef dict out = {}
    cdef int i
    for i in range(14):
        if not flags & (1 << (15 - i)):
            continue
        t = _PROP_TYPES[i]
        if t == b"S"[0]:
            out[_PROP_NAMES[i]] = c.shortstr(_PROP_NAMES[i])
        elif t == b"F"[0]:
            out[_PROP_NAMES[i]] = _read_table(c, 0)
        elif t == b"o"[0]:
            out[_PROP_NAMES[i]] = c.u8(_PROP_NAMES[i])
        else:
            u = c.u64("timestamp")
            try:
                out[_PROP_NAMES[i]] = _dt.datetime.fromtimestamp(u, tz=_dt.timezone.utc)
            except (OverflowError, ValueError, OSError):
                raise CodecError(f"timestamp {u} out of range", c.base + c.pos - 8) from None
    if c.pos != c.end:
        raise CodecError(f"content header: {c.end - c.pos} trailing bytes", c.base + c.pos)
    return out


def encode_properties(props: dict) -> bytes:
    """Property flags and list (no class id, weight or body size)."""
    cdef _Writer w = _Writer()
    _write_properties(w, props or {})
    return w.getvalue()


def encode_header(int channel, uint64_t body_size, props=None, uint16_t class_id=60) -> bytes:
    """A complete content-header frame."""
    _check_channel(channel)
    cdef _Writer w = _Writer()
    _frame_head(w, 2, channel)
    w.u16(class_id)
    w.u16(0)
    w.u64(body_size)
    _write_properties(w, props or {})
    _frame_end(w, 0)
    return w.getvalue()


def decode_header(data, Py_ssize_t offset=0, Py_ssize_t size=-1) -> tuple:
    """(class_id, body_size, properties) from a content-header frame payload."""
    cdef _View v = _acquire(data)
    if size < 0:
        size = v.view.len - offset
    if offset < 0 or size < 0 or offset + size > v.view.len:
        raise CodecError("header payload outside the buffer", offset)
    cdef _Cursor c = _cursor(<const unsigned char*>v.view.buf + offset, size, v, offset)
    class_id = c.u16("class id")
    c.u16("weight")
    body_size = c.u64("body size")
    return class_id, body_size, _read_properties(c)


def encode_body(int channel, body, Py_ssize_t frame_max=DEFAULT_FRAME_MAX) -> bytes:
    """Body frames for ``body``, each payload at most frame_max - 8 bytes."""
    _check_channel(channel)
    cdef bytearray out = bytearray()
    _append_body(out, channel, body, frame_max)
    return bytes(out)


cdef Py_ssize_t _append_body(bytearray out, uint16_t channel, object body, Py_ssize_t frame_max) except -1:
    cdef Py_buffer view
    PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
    try:
        return _append_body_raw(out, channel, <const char*>view.buf, view.len, frame_max)
    finally:
        PyBuffer_Release(&view)


cdef Py_ssize_t _append_body_raw(bytearray out, uint16_t channel, const char* data, Py_ssize_t size,
                                 Py_ssize_t frame_max) except -1:
    if frame_max < FRAME_MIN_SIZE:
        raise CodecError(f"frame_max {frame_max} below the minimum {FRAME_MIN_SIZE}")
    cdef Py_ssize_t chunk_max = frame_max - 8
    cdef Py_ssize_t nframes = (size + chunk_max - 1) // chunk_max
    cdef Py_ssize_t old = PyByteArray_GET_SIZE(out)
    PyByteArray_Resize(out, old + size + 8 * nframes)
    cdef unsigned char* p = <unsigned char*>PyByteArray_AS_STRING(out) + old
    cdef Py_ssize_t done = 0, n
    while done < size:
        n = size - done
        if n > chunk_max:
            n = chunk_max
        p[0] = 3
        p[1] = channel >> 8
        p[2] = channel & 0xFF
        _put32(p + 3, <uint32_t>n)
        memcpy(p + 7, data + done, n)
        p[7 + n] = _FRAME_END
        p += 8 + n
        done += n
    return PyByteArray_GET_SIZE(out)


def encode_heartbeat() -> bytes:
    return b"\x08\x00\x00\x00\x00\x00\x00\xce"


def encode_ack(int channel, uint64_t delivery_tag, bint multiple=False) -> bytes:
    """basic.ack, built without the generic method path (consumers send many)."""
    cdef unsigned char buf[21]
    buf[0] = 1
    buf[1] = (channel >> 8) & 0xFF
    buf[2] = channel & 0xFF
    _put32(buf + 3, 13)
    _put32(buf + 7, KEY_ACK)
    _put64(buf + 11, delivery_tag)
    buf[19] = 1 if multiple else 0
    buf[20] = _FRAME_END
    return PyBytes_FromStringAndSize(<char*>buf, 21)


# --------------------------------------------------------------------------------------
# publish hot path
# --------------------------------------------------------------------------------------
cdef class PublishEncoder:
    """Appends basic.publish + content header + body frames for one publisher.

    The method frame and the property list are encoded once; per message only the
    body size is patched and the body copied, straight into the caller's bytearray.
    """
    cdef bytes method_frame
    cdef bytes props
    cdef uint16_t channel
    cdef Py_ssize_t frame_max

    def __init__(self, int channel, exchange: str, routing_key: str, bint mandatory=False,
                 properties: dict | None = None, Py_ssize_t frame_max=DEFAULT_FRAME_MAX):
        _check_channel(channel)
        if frame_max < FRAME_MIN_SIZE:
            raise CodecError(f"frame_max {frame_max} below the minimum {FRAME_MIN_SIZE}")
        self.channel = channel
        self.frame_max = frame_max
        self.method_frame = encode_method(channel, K(60, 40), (0, exchange, routing_key, mandatory, False))
        self.props = encode_properties(properties or {})
        if 8 + 12 + PyBytes_GET_SIZE(self.props) > frame_max:
            raise CodecError("content header larger than frame_max")

    cpdef Py_ssize_t write(self, bytearray out, object body) except -1:
        """Append the frames for ``body`` to ``out``; returns the new length of ``out``."""
        cdef Py_buffer view
        cdef const char* data
        cdef Py_ssize_t size
        cdef bint release = False
        if type(body) is bytes:
            data = PyBytes_AS_STRING(body)
            size = PyBytes_GET_SIZE(body)
        else:
            PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
            release = True
            data = <const char*>view.buf
            size = view.len
        try:
            return self._write(out, data, size)
        finally:
            if release:
                PyBuffer_Release(&view)

    cdef Py_ssize_t _write(self, bytearray out, const char* data, Py_ssize_t size) except -1:
        cdef Py_ssize_t mlen = PyBytes_GET_SIZE(self.method_frame)
        cdef Py_ssize_t plen = PyBytes_GET_SIZE(self.props)
        cdef Py_ssize_t old = PyByteArray_GET_SIZE(out)
        cdef Py_ssize_t head = mlen + 7 + 12 + plen + 1
        cdef unsigned char* p
        if size <= self.frame_max - 8:
            PyByteArray_Resize(out, old + head + (size + 8 if size else 0))
        else:
            PyByteArray_Resize(out, old + head)
        p = <unsigned char*>PyByteArray_AS_STRING(out) + old
        memcpy(p, PyBytes_AS_STRING(self.method_frame), mlen)
        p += mlen
        p[0] = 2
        p[1] = self.channel >> 8
        p[2] = self.channel & 0xFF
        _put32(p + 3, <uint32_t>(12 + plen))
        p[7] = 0
        p[8] = 60
        p[9] = 0
        p[10] = 0
        _put64(p + 11, <uint64_t>size)
        memcpy(p + 19, PyBytes_AS_STRING(self.props), plen)
        p[19 + plen] = _FRAME_END
        p += 20 + plen
        if size == 0:
            return PyByteArray_GET_SIZE(out)
        if size <= self.frame_max - 8:
            p[0] = 3
            p[1] = self.channel >> 8
            p[2] = self.channel & 0xFF
            _put32(p + 3, <uint32_t>size)
            memcpy(p + 7, data, size)
            p[7 + size] = _FRAME_END
            return PyByteArray_GET_SIZE(out)
        return _append_body_raw(out, self.channel, data, size, self.frame_max)


# --------------------------------------------------------------------------------------
# frame reader
# --------------------------------------------------------------------------------------
cdef class _Content:
    cdef uint32_t key
    cdef object args          # tuple, or None on the delivery fast path
    cdef uint64_t tag
    cdef bint redelivered
    cdef object handler       # fast-path deliver handler or None
    cdef bint have_header
    cdef uint64_t body_size
    cdef object props
    cdef bytearray parts


cdef class FrameReader:
    """Splits the inbound byte stream into frames and assembles content.

    Used as the storage of an asyncio BufferedProtocol: ``get_buffer`` hands out the
    free tail of one reusable bytearray, ``feed(n)`` parses every complete frame in
    place. A partial frame stays put until more bytes arrive (it is moved to the
    front only when the tail runs out). Handlers:

    * ``on_method(channel, key, args)`` for methods without content
    * ``on_content(channel, key, args, properties, body)`` for return / get-ok / deliver
    * ``on_heartbeat()``
    * per channel, ``set_deliver_handler(ch, f)``: f(delivery_tag, redelivered, body, t_ns)
      for basic.deliver, and ``set_ack_handler(ch, f)``: f(delivery_tag, multiple, acked)
      for publisher confirms -- both skip the generic method objects.
    """
    cdef bytearray buf
    cdef Py_ssize_t start, end
    cdef public Py_ssize_t frame_max
    cdef object on_method, on_content, on_heartbeat
    cdef dict deliver_handlers, ack_handlers, pending
    cdef public uint64_t frames

    def __init__(self, on_method, on_content, on_heartbeat, Py_ssize_t frame_max=DEFAULT_FRAME_MAX,
                 Py_ssize_t capacity=262144):
        self.frame_max = frame_max
        if capacity < frame_max + 8:
            capacity = frame_max + 8
        self.buf = bytearray(capacity)
        self.start = self.end = 0
        self.on_method = on_method
        self.on_content = on_content
        self.on_heartbeat = on_heartbeat
        self.deliver_handlers = {}
        self.ack_handlers = {}
        self.pending = {}
        self.frames = 0

    def set_deliver_handler(self, int channel, handler) -> None:
        if handler is None:
            self.deliver_handlers.pop(channel, None)
        else:
            self.deliver_handlers[channel] = handler

    def set_ack_handler(self, int channel, handler) -> None:
        if handler is None:
            self.ack_handlers.pop(channel, None)
        else:
            self.ack_handlers[channel] = handler

    def forget_channel(self, int channel) -> None:
        """Drop handlers and any half-received content of a closed channel."""
        self.deliver_handlers.pop(channel, None)
        self.ack_handlers.pop(channel, None)
        self.pending.pop(channel, None)

    def get_buffer(self, Py_ssize_t sizehint=-1):
        """Writable tail of the receive buffer (moves a partial frame to the front, or grows)."""
        cdef Py_ssize_t cap = PyByteArray_GET_SIZE(self.buf)
        cdef Py_ssize_t need
        if cap - self.end < 16384 and self.start > 0:
            # little room left behind a partial frame: move just that frame to the front
            memmove(PyByteArray_AS_STRING(self.buf), PyByteArray_AS_STRING(self.buf) + self.start,
                    self.end - self.start)
            self.end -= self.start
            self.start = 0
        if self.end == cap:
            if self.start > 0:
                memmove(PyByteArray_AS_STRING(self.buf), PyByteArray_AS_STRING(self.buf) + self.start,
                        self.end - self.start)
                self.end -= self.start
                self.start = 0
            else:
                need = cap * 2
                PyByteArray_Resize(self.buf, need)
        return memoryview(self.buf)[self.end:]

    def feed_bytes(self, data) -> None:
        """Copy ``data`` in and parse it (for non-buffered transports and tests)."""
        cdef _View v = _acquire(data)
        cdef Py_ssize_t done = 0, n, room
        cdef Py_ssize_t cap
        while done < v.view.len:
            self.get_buffer()
            cap = PyByteArray_GET_SIZE(self.buf)
            room = cap - self.end
            n = v.view.len - done
            if n > room:
                n = room
            memcpy(PyByteArray_AS_STRING(self.buf) + self.end, <const char*>v.view.buf + done, n)
            done += n
            self.feed(n)

    cpdef feed(self, Py_ssize_t nbytes):
        """``nbytes`` were written at the tail; dispatch every complete frame."""
        cdef const unsigned char* p
        cdef Py_ssize_t avail, size
        cdef uint8_t ftype
        cdef uint16_t channel
        cdef int64_t t_ns = _now_ns()
        if nbytes < 0 or self.end + nbytes > PyByteArray_GET_SIZE(self.buf):
            raise CodecError("feed() beyond the buffer")
        self.end += nbytes
        while True:
            avail = self.end - self.start
            if avail < 7:
                break
            p = <const unsigned char*>PyByteArray_AS_STRING(self.buf) + self.start
            ftype = p[0]
            channel = _get16(p + 1)
            size = _get32(p + 3)
            if ftype != 1 and ftype != 2 and ftype != 3 and ftype != 8:
                if p[0] == b"A" and avail >= 8 and p[1] == b"M":
                    raise CodecError(f"broker answered with a protocol header {bytes(p[:8])!r}: "
                                     "it does not speak AMQP 0-9-1", 0)
                raise CodecError(f"unknown frame type {ftype}", self.start)
            if size + 8 > self.frame_max:
                raise CodecError(f"frame of {size} bytes exceeds frame_max {self.frame_max}", self.start)
            if avail < size + 8:
                if self.start + size + 8 > PyByteArray_GET_SIZE(self.buf):
                    # make room for the whole frame: move it to the front (and grow if needed)
                    memmove(PyByteArray_AS_STRING(self.buf), PyByteArray_AS_STRING(self.buf) + self.start, avail)
                    self.end = avail
                    self.start = 0
                    if size + 8 > PyByteArray_GET_SIZE(self.buf):
                        PyByteArray_Resize(self.buf, size + 8)
                break
            if p[7 + size] != _FRAME_END:
                raise CodecError(f"frame end octet is 0x{p[7 + size]:02x}, expected 0xce", self.start + 7 + size)
            self.start += size + 8
            self.frames += 1
            if ftype == 1:
                self._method(channel, p + 7, size, t_ns)
            elif ftype == 2:
                self._header(channel, p + 7, size, t_ns)
            elif ftype == 3:
                self._body(channel, p + 7, size, t_ns)
            else:
                if channel != 0:
                    raise CodecError(f"heartbeat on channel {channel}", self.start - size - 8)
                self.on_heartbeat()
        if self.start == self.end:
            self.start = self.end = 0

    cdef _method(self, uint16_t channel, const unsigned char* p, Py_ssize_t size, int64_t t_ns):
        cdef uint32_t key
        cdef _Content content
        cdef Py_ssize_t n
        if size < 4:
            raise CodecError("method frame shorter than its id", self.start - size - 1)
        if channel in self.pending:
            raise CodecError(f"method frame on channel {channel} while content was expected",
                             self.start - size - 1)
        key = _get32(p)
        if key == KEY_DELIVER:
            handler = self.deliver_handlers.get(channel)
            content = _Content.__new__(_Content)
            content.key = key
            content.handler = handler
            if handler is not None:
                # consumer-tag, delivery-tag, redelivered; exchange and routing key skipped
                n = 4 + 1 + p[4]
                if n + 8 + 1 + 2 > size:
                    raise CodecError("truncated basic.deliver", self.start - size - 1)
                content.tag = _get64(p + n)
                content.redelivered = p[n + 8] & 1
                content.args = None
            else:
                content.args = _decode_method(p, size, self.buf, self.start - size - 1)[1]
            self.pending[channel] = content
            return
        if key == KEY_ACK or key == KEY_NACK:
            handler = self.ack_handlers.get(channel)
            if handler is not None and size >= 13:
                handler(_get64(p + 4), p[12] & 1 == 1, key == KEY_ACK)
                return
        k, args = _decode_method(p, size, self.buf, self.start - size - 1)
        if k in CONTENT_METHODS:
            content = _Content.__new__(_Content)
            content.key = k
            content.args = args
            content.handler = None
            self.pending[channel] = content
            return
        self.on_method(channel, k, args)

    cdef _header(self, uint16_t channel, const unsigned char* p, Py_ssize_t size, int64_t t_ns):
        cdef _Content content = self.pending.get(channel)
        if content is None or content.have_header:
            raise CodecError(f"unexpected content header on channel {channel}", self.start - size - 1)
        if size < 14:
            raise CodecError("truncated content header", self.start - size - 1)
        content.have_header = True
        content.body_size = _get64(p + 4)
        if content.handler is None:
            content.props = _read_properties(_cursor(p + 12, size - 12, self.buf, self.start - size + 11))
        if content.body_size == 0:
            del self.pending[channel]
            self._complete(channel, content, b"", t_ns)

    cdef _body(self, uint16_t channel, const unsigned char* p, Py_ssize_t size, int64_t t_ns):
        cdef _Content content = self.pending.get(channel)
        cdef Py_ssize_t have
        if content is None or not content.have_header:
            raise CodecError(f"unexpected body frame on channel {channel}", self.start - size - 1)
        if content.parts is None:
            if <uint64_t>size == content.body_size:
                del self.pending[channel]
                self._complete(channel, content, PyBytes_FromStringAndSize(<const char*>p, size), t_ns)
                return
            content.parts = bytearray()
        have = PyByteArray_GET_SIZE(content.parts)
        if <uint64_t>(have + size) > content.body_size:
            raise CodecError(f"body frames exceed the announced size {content.body_size}", self.start - size - 1)
        PyByteArray_Resize(content.parts, have + size)
        memcpy(PyByteArray_AS_STRING(content.parts) + have, p, size)
        if <uint64_t>(have + size) == content.body_size:
            del self.pending[channel]
            self._complete(channel, content, bytes(content.parts), t_ns)

    cdef _complete(self, uint16_t channel, _Content content, bytes body, int64_t t_ns):
        if content.handler is not None:
            content.handler(content.tag, content.redelivered, body, t_ns)
        else:
            self.on_content(channel, content.key, content.args, content.props or {}, body)


def split_frames(data) -> list:
    """[(type, channel, payload bytes)] for every complete frame in ``data`` (tests, tools).
    Raises CodecError on a malformed frame or trailing partial frame."""
    cdef _View v = _acquire(data)
    cdef const unsigned char* p = <const unsigned char*>v.view.buf
    cdef Py_ssize_t pos = 0, size, n = v.view.len
    out = []
    while pos < n:
        if n - pos < 8:
            raise CodecError("truncated frame header", pos)
        size = _get32(p + pos + 3)
        if n - pos < size + 8:
            raise CodecError("truncated frame", pos)
        if p[pos + 7 + size] != _FRAME_END:
            raise CodecError("bad frame end", pos + 7 + size)
        out.append((p[pos], _get16(p + pos + 1), PyBytes_FromStringAndSize(<const char*>p + pos + 7, size)))
        pos += size + 8
    return out
