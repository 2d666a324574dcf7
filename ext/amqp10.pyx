# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""AMQP 1.0 type system and message format (OASIS AMQP 1.0 parts 1 and 3), compiled.

Encoding writes into one C buffer per call (a stack buffer that moves to the heap only
for large values) and dispatches on the exact Python type before any isinstance check.
Decoding reads a raw pointer with an explicit bounds check before every read, never
allocates by a length it has not checked against the remaining bytes, limits nesting to
MAX_DEPTH, and returns `data` bodies as memoryview slices of the input (zero copy).
Every malformed input raises rbench.errors.CodecError(message, offset).

The public, documented face is rbench.codec.amqp10; see docs/codec.md for the mapping.
"""
cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE, \
    PyBytes_CheckExact
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.dict cimport PyDict_SetItem
from cpython.ref cimport Py_INCREF, PyObject
from cpython.long cimport PyLong_FromLongLong, PyLong_FromUnsignedLongLong, \
    PyLong_AsLongLongAndOverflow, PyLong_AsUnsignedLongLong
from cpython.float cimport PyFloat_FromDouble
from cpython.unicode cimport PyUnicode_DecodeUTF8, PyUnicode_AsUTF8AndSize
from cpython.memoryview cimport PyMemoryView_FromObject
from cpython.datetime cimport import_datetime, datetime_new, PyDateTime_Check, \
    datetime_year, datetime_month, datetime_day, datetime_hour, datetime_minute, \
    datetime_second, datetime_microsecond, datetime_tzinfo
from libc.stdint cimport INT64_MIN, uint8_t, uint16_t, uint32_t, uint64_t, int8_t, int16_t, int32_t, \
    int64_t
from libc.string cimport memcpy, memmove, memcmp
from libc.stdlib cimport malloc, realloc, free

import datetime as _dt
import uuid as _uuid

from rbench.errors import CodecError

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object)
    void* PyUnicode_DATA(PyObject*)
    Py_ssize_t PyUnicode_GET_LENGTH_RAW "PyUnicode_GET_LENGTH"(PyObject*)
    void Py_XDECREF_RAW "Py_XDECREF"(PyObject*)
    object PySequence_GetSlice(object, Py_ssize_t, Py_ssize_t)
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    Py_UCS4 PyUnicode_READ_CHAR(object, Py_ssize_t)

import_datetime()

DEF STACK_BUF = 512
DEF _MAX_DEPTH = 64

MAX_DEPTH = _MAX_DEPTH
BODY_DATA = "data"
BODY_SEQUENCE = "sequence"
BODY_VALUE = "value"

cdef object UTC = _dt.timezone.utc
cdef object PyUUID = _uuid.UUID
cdef object SAFE_UNKNOWN = _uuid.SafeUUID.unknown
cdef object _setattr = object.__setattr__
cdef object _object_new = object.__new__
# Decoded map keys and symbols repeat from message to message (field names, annotation
# keys, content types): a direct-mapped cache of short ASCII str/Symbol objects keyed by
# the raw bytes saves the decode, the allocation and (since str caches its hash) the
# hashing on dict insert. Bounded: CACHE_SLOTS entries of at most CACHE_MAXLEN bytes.
DEF CACHE_SLOTS = 1024
DEF CACHE_MAXLEN = 40
cdef PyObject* KEY_CACHE[CACHE_SLOTS]
cdef PyObject* SYM_CACHE[CACHE_SLOTS]


# ---------------------------------------------------------------------------
# value wrappers: ask for a specific AMQP encoding
# ---------------------------------------------------------------------------

class Symbol(str):
    """An AMQP symbol (ASCII); a plain str is encoded as an AMQP string instead."""
    __slots__ = ()

    def __repr__(self) -> str:
        return f"Symbol({str.__repr__(self)})"


class Char(str):
    """A single Unicode code point encoded as AMQP char (UTF-32BE)."""
    __slots__ = ()

    def __new__(cls, value):
        s = str.__new__(cls, value)
        if len(s) != 1:
            raise ValueError("Char holds exactly one code point")
        return s

    def __repr__(self) -> str:
        return f"Char({str.__repr__(self)})"


class _Ranged(int):
    __slots__ = ()
    _lo = 0
    _hi = 0

    def __new__(cls, value=0):
        v = int.__new__(cls, value)
        if not cls._lo <= v <= cls._hi:
            raise ValueError(f"{cls.__name__} out of range [{cls._lo}, {cls._hi}]: {int(v)}")
        return v

    def __repr__(self) -> str:
        return f"{type(self).__name__}({int(self)})"


class UByte(_Ranged):
    """AMQP ubyte (0..255)."""
    __slots__ = ()
    _lo, _hi = 0, 0xff


class UShort(_Ranged):
    """AMQP ushort (0..65535)."""
    __slots__ = ()
    _lo, _hi = 0, 0xffff


class UInt(_Ranged):
    """AMQP uint (uint0 / smalluint / uint chosen by value)."""
    __slots__ = ()
    _lo, _hi = 0, 0xffffffff


class ULong(_Ranged):
    """AMQP ulong (ulong0 / smallulong / ulong chosen by value)."""
    __slots__ = ()
    _lo, _hi = 0, 0xffffffffffffffff


class Byte(_Ranged):
    """AMQP byte (-128..127)."""
    __slots__ = ()
    _lo, _hi = -0x80, 0x7f


class Short(_Ranged):
    """AMQP short."""
    __slots__ = ()
    _lo, _hi = -0x8000, 0x7fff


class Int(_Ranged):
    """AMQP int (smallint / int chosen by value)."""
    __slots__ = ()
    _lo, _hi = -0x80000000, 0x7fffffff


class Long(_Ranged):
    """AMQP long (smalllong / long chosen by value)."""
    __slots__ = ()
    _lo, _hi = -0x8000000000000000, 0x7fffffffffffffff


class Decimal32(_Ranged):
    """AMQP decimal32 carried as its raw 32 bits (IEEE 754 decimal32, no arithmetic)."""
    __slots__ = ()
    _lo, _hi = 0, 0xffffffff


class Decimal64(_Ranged):
    """AMQP decimal64 carried as its raw 64 bits."""
    __slots__ = ()
    _lo, _hi = 0, 0xffffffffffffffff


class Timestamp(_Ranged):
    """AMQP timestamp given as milliseconds since the Unix epoch (decodes as datetime)."""
    __slots__ = ()
    _lo, _hi = -0x8000000000000000, 0x7fffffffffffffff


class Float(float):
    """AMQP float (IEEE 754 binary32); a plain float is encoded as double."""
    __slots__ = ()

    def __repr__(self) -> str:
        return f"Float({float(self)!r})"


class Decimal128(bytes):
    """AMQP decimal128 carried as its raw 16 bytes."""

    def __new__(cls, value):
        b = bytes.__new__(cls, value)
        if len(b) != 16:
            raise ValueError("Decimal128 holds exactly 16 bytes")
        return b

    def __repr__(self) -> str:
        return f"Decimal128({bytes.__repr__(self)})"


@cython.final
@cython.freelist(64)
cdef class Described:
    """A described type: a descriptor (ulong or symbol) and the value it describes."""
    cdef readonly object descriptor
    cdef readonly object value

    def __init__(self, descriptor, value):
        self.descriptor = descriptor
        self.value = value

    def __eq__(self, other):
        if type(other) is not Described:
            return NotImplemented
        return (self.descriptor == (<Described>other).descriptor
                and self.value == (<Described>other).value)

    def __hash__(self):
        return hash((self.descriptor, self.value))

    def __repr__(self):
        return f"Described({self.descriptor!r}, {self.value!r})"


@cython.final
cdef class Array:
    """An AMQP array: every element shares one constructor ``code`` (and descriptor)."""
    cdef readonly int code
    cdef readonly list items
    cdef readonly object descriptor

    def __init__(self, int code, items, descriptor=None):
        if code_width(code) == -2 or code == 0:
            raise ValueError(f"0x{code:02x} is not an AMQP constructor")
        self.code = code
        self.items = list(items)
        self.descriptor = descriptor

    def __eq__(self, other):
        if type(other) is not Array:
            return NotImplemented
        return (self.code == (<Array>other).code and self.items == (<Array>other).items
                and self.descriptor == (<Array>other).descriptor)

    __hash__ = None

    def __repr__(self):
        if self.descriptor is None:
            return f"Array(0x{self.code:02x}, {self.items!r})"
        return f"Array(0x{self.code:02x}, {self.items!r}, descriptor={self.descriptor!r})"


# ---------------------------------------------------------------------------
# message sections
# ---------------------------------------------------------------------------

@cython.final
@cython.freelist(64)
cdef class Header:
    """The header section: delivery details (durable, priority, ttl ms, …)."""
    cdef public object durable
    cdef public object priority
    cdef public object ttl
    cdef public object first_acquirer
    cdef public object delivery_count

    def __init__(self, durable=False, priority=4, ttl=None, first_acquirer=False,
                 delivery_count=0):
        self.durable = durable
        self.priority = priority
        self.ttl = ttl
        self.first_acquirer = first_acquirer
        self.delivery_count = delivery_count

    cdef tuple _key(self):
        return (self.durable, self.priority, self.ttl, self.first_acquirer, self.delivery_count)

    def __eq__(self, other):
        if type(other) is not Header:
            return NotImplemented
        return self._key() == (<Header>other)._key()

    __hash__ = None

    def __repr__(self):
        return ("Header(durable={!r}, priority={!r}, ttl={!r}, first_acquirer={!r}, "
                "delivery_count={!r})".format(*self._key()))


PROPERTY_NAMES = ("message_id", "user_id", "to", "subject", "reply_to", "correlation_id",
                  "content_type", "content_encoding", "absolute_expiry_time", "creation_time",
                  "group_id", "group_sequence", "reply_to_group_id")


@cython.final
@cython.freelist(64)
cdef class Properties:
    """The properties section: immutable facts about the message (ids, addresses, times)."""
    cdef public object message_id
    cdef public object user_id
    cdef public object to
    cdef public object subject
    cdef public object reply_to
    cdef public object correlation_id
    cdef public object content_type
    cdef public object content_encoding
    cdef public object absolute_expiry_time
    cdef public object creation_time
    cdef public object group_id
    cdef public object group_sequence
    cdef public object reply_to_group_id

    def __init__(self, message_id=None, user_id=None, to=None, subject=None, reply_to=None,
                 correlation_id=None, content_type=None, content_encoding=None,
                 absolute_expiry_time=None, creation_time=None, group_id=None,
                 group_sequence=None, reply_to_group_id=None):
        self.message_id = message_id
        self.user_id = user_id
        self.to = to
        self.subject = subject
        self.reply_to = reply_to
        self.correlation_id = correlation_id
        self.content_type = content_type
        self.content_encoding = content_encoding
        self.absolute_expiry_time = absolute_expiry_time
        self.creation_time = creation_time
        self.group_id = group_id
        self.group_sequence = group_sequence
        self.reply_to_group_id = reply_to_group_id

    cdef tuple _key(self):
        return (self.message_id, self.user_id, self.to, self.subject, self.reply_to,
                self.correlation_id, self.content_type, self.content_encoding,
                self.absolute_expiry_time, self.creation_time, self.group_id,
                self.group_sequence, self.reply_to_group_id)

    def __eq__(self, other):
        if type(other) is not Properties:
            return NotImplemented
        return self._key() == (<Properties>other)._key()

    __hash__ = None

    def __repr__(self):
        parts = [f"{n}={v!r}" for n, v in zip(PROPERTY_NAMES, self._key()) if v is not None]
        return f"Properties({', '.join(parts)})"


cdef inline bint is_bytes_like(object v):
    cdef type t = type(v)
    return t is bytes or t is memoryview or t is bytearray or isinstance(v, (bytes, bytearray,
                                                                              memoryview))


@cython.final
@cython.freelist(64)
cdef class Message:
    """An AMQP 1.0 message: optional sections around one body (data, sequence or value)."""
    cdef public object body
    cdef public object body_kind
    cdef public object header
    cdef public object delivery_annotations
    cdef public object message_annotations
    cdef public object properties
    cdef public object application_properties
    cdef public object footer

    def __init__(self, body=None, *, body_kind=None, header=None, delivery_annotations=None,
                 message_annotations=None, properties=None, application_properties=None,
                 footer=None):
        if body_kind is None:
            body_kind = BODY_DATA if is_bytes_like(body) else BODY_VALUE
        elif body_kind != BODY_DATA and body_kind != BODY_SEQUENCE and body_kind != BODY_VALUE:
            raise ValueError(f"body_kind must be 'data', 'sequence' or 'value', not {body_kind!r}")
        self.body = body
        self.body_kind = body_kind
        self.header = header
        self.delivery_annotations = delivery_annotations
        self.message_annotations = message_annotations
        self.properties = properties
        self.application_properties = application_properties
        self.footer = footer

    cdef tuple _key(self):
        body = self.body
        if self.body_kind == BODY_DATA:
            if is_bytes_like(body):
                body = bytes(body)
            elif type(body) is list:
                body = [bytes(b) for b in body]
        return (body, self.body_kind, self.header, self.delivery_annotations,
                self.message_annotations, self.properties, self.application_properties,
                self.footer)

    def __eq__(self, other):
        if type(other) is not Message:
            return NotImplemented
        return self._key() == (<Message>other)._key()

    __hash__ = None

    def __repr__(self):
        names = ("body", "body_kind", "header", "delivery_annotations", "message_annotations",
                 "properties", "application_properties", "footer")
        vals = (self.body, self.body_kind, self.header, self.delivery_annotations,
                self.message_annotations, self.properties, self.application_properties,
                self.footer)
        parts = [f"{n}={v!r}" for n, v in zip(names, vals) if v is not None]
        return f"Message({', '.join(parts)})"


# ---------------------------------------------------------------------------
# big-endian helpers
# ---------------------------------------------------------------------------

cdef inline void be16(unsigned char* p, uint16_t v) noexcept nogil:
    p[0] = <unsigned char>(v >> 8)
    p[1] = <unsigned char>v

cdef inline void be32(unsigned char* p, uint32_t v) noexcept nogil:
    p[0] = <unsigned char>(v >> 24)
    p[1] = <unsigned char>(v >> 16)
    p[2] = <unsigned char>(v >> 8)
    p[3] = <unsigned char>v

cdef inline void be64(unsigned char* p, uint64_t v) noexcept nogil:
    be32(p, <uint32_t>(v >> 32))
    be32(p + 4, <uint32_t>v)

cdef inline uint16_t rd16(const unsigned char* p) noexcept nogil:
    return (<uint16_t>p[0] << 8) | p[1]

cdef inline uint32_t rd32(const unsigned char* p) noexcept nogil:
    return ((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8)
            | <uint32_t>p[3])

cdef inline uint64_t rd64(const unsigned char* p) noexcept nogil:
    return (<uint64_t>rd32(p) << 32) | rd32(p + 4)


cdef int code_width(int code) noexcept:
    """Payload width of a fixed-width constructor, -1 for variable width, -2 if invalid."""
    if 0x40 <= code <= 0x45:
        return 0
    if 0x50 <= code <= 0x56:
        return 1
    if code == 0x60 or code == 0x61:
        return 2
    if 0x70 <= code <= 0x74:
        return 4
    if 0x80 <= code <= 0x84:
        return 8
    if code == 0x94 or code == 0x98:
        return 16
    if (code == 0xa0 or code == 0xa1 or code == 0xa3 or code == 0xb0 or code == 0xb1
            or code == 0xb3 or code == 0xc0 or code == 0xc1 or code == 0xd0 or code == 0xd1
            or code == 0xe0 or code == 0xf0):
        return -1
    return -2


# ---------------------------------------------------------------------------
# calendar (timestamps <-> datetime without Python-level arithmetic)
# ---------------------------------------------------------------------------

cdef inline int64_t floordiv(int64_t a, int64_t b) noexcept nogil:
    cdef int64_t q = a / b
    if (a % b != 0) and ((a < 0) != (b < 0)):
        q -= 1
    return q

cdef int64_t days_from_civil(int64_t y, int64_t m, int64_t d) noexcept nogil:
    if m <= 2:
        y -= 1
    cdef int64_t era = floordiv(y, 400)
    cdef int64_t yoe = y - era * 400
    cdef int64_t mp = (m + 9) % 12
    cdef int64_t doy = (153 * mp + 2) / 5 + d - 1
    cdef int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    return era * 146097 + doe - 719468

cdef object datetime_from_ms(int64_t ms, Py_ssize_t offset):
    # datetime covers years 1..9999: -62135596800000 .. 253402300799999 ms
    if ms < -62135596800000 or ms > 253402300799999:
        raise CodecError(f"timestamp {ms} ms is outside the datetime range", offset)
    cdef int64_t days = floordiv(ms, 86400000)
    cdef int64_t rem = ms - days * 86400000
    cdef int64_t z = days + 719468
    cdef int64_t era = floordiv(z, 146097)
    cdef int64_t doe = z - era * 146097
    cdef int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
    cdef int64_t y = yoe + era * 400
    cdef int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    cdef int64_t mp = (5 * doy + 2) / 153
    cdef int64_t d = doy - (153 * mp + 2) / 5 + 1
    cdef int64_t m = mp + 3 if mp < 10 else mp - 9
    if m <= 2:
        y += 1
    return datetime_new(<int>y, <int>m, <int>d, <int>(rem / 3600000), <int>((rem / 60000) % 60),
                        <int>((rem / 1000) % 60), <int>((rem % 1000) * 1000), UTC)

cdef int64_t ms_from_datetime(object dt) except? -1:
    cdef int64_t days = days_from_civil(datetime_year(dt), datetime_month(dt), datetime_day(dt))
    cdef int64_t ms = (days * 86400000 + datetime_hour(dt) * 3600000
                       + datetime_minute(dt) * 60000 + datetime_second(dt) * 1000
                       + datetime_microsecond(dt) / 1000)
    tz = datetime_tzinfo(dt)
    if tz is not None and tz is not UTC:
        off = dt.utcoffset()
        if off is not None:
            ms -= (off.days * 86400000 + off.seconds * 1000 + off.microseconds // 1000)
    return ms


# ---------------------------------------------------------------------------
# encoder
# ---------------------------------------------------------------------------

cdef struct Wr:
    unsigned char* buf
    Py_ssize_t pos
    Py_ssize_t cap
    int heap

cdef int wr_grow(Wr* w, Py_ssize_t n) except -1:
    cdef Py_ssize_t cap = w.cap * 2
    cdef unsigned char* nb
    while cap < w.pos + n:
        cap *= 2
    if w.heap:
        nb = <unsigned char*>realloc(w.buf, cap)
    else:
        nb = <unsigned char*>malloc(cap)
        if nb != NULL:
            memcpy(nb, w.buf, w.pos)
    if nb == NULL:
        raise MemoryError()
    w.buf = nb
    w.cap = cap
    w.heap = 1
    return 0

cdef inline unsigned char* claim(Wr* w, Py_ssize_t n) except NULL:
    cdef unsigned char* p
    if w.pos + n > w.cap:
        wr_grow(w, n)
    p = w.buf + w.pos
    w.pos += n
    return p

cdef inline int put1(Wr* w, unsigned char c) except -1:
    claim(w, 1)[0] = c
    return 0

cdef int enc_fail(str msg) except -1:
    raise CodecError(msg)

cdef int enc_chars(Wr* w, const char* data, Py_ssize_t n, unsigned char c8,
                   unsigned char c32) except -1:
    cdef unsigned char* p
    if n <= 0xff:
        p = claim(w, 2 + n)
        p[0] = c8
        p[1] = <unsigned char>n
        memcpy(p + 2, data, n)
    elif n <= 0xffffffff:
        p = claim(w, 5 + n)
        p[0] = c32
        be32(p + 1, <uint32_t>n)
        memcpy(p + 5, data, n)
    else:
        enc_fail(f"value of {n} bytes exceeds the AMQP 32-bit length")
    return 0

cdef int enc_string(Wr* w, object s, unsigned char c8, unsigned char c32) except -1:
    cdef Py_ssize_t n
    cdef const char* data
    try:
        data = PyUnicode_AsUTF8AndSize(s, &n)
    except UnicodeEncodeError as e:
        raise CodecError(f"string is not encodable as UTF-8: {e}") from None
    return enc_chars(w, data, n, c8, c32)

cdef int enc_symbol(Wr* w, object s) except -1:
    if not PyUnicode_IS_ASCII(s):
        enc_fail(f"symbol must be ASCII: {s!r}")
    return enc_string(w, s, 0xa3, 0xb3)

cdef int enc_binary(Wr* w, object v) except -1:
    cdef Py_buffer view
    if PyBytes_CheckExact(v):
        return enc_chars(w, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v), 0xa0, 0xb0)
    try:
        PyObject_GetBuffer(v, &view, PyBUF_SIMPLE)
    except BufferError as e:
        raise CodecError(f"binary value must be a contiguous buffer: {e}") from None
    try:
        enc_chars(w, <const char*>view.buf, view.len, 0xa0, 0xb0)
    finally:
        PyBuffer_Release(&view)
    return 0

cdef int enc_int(Wr* w, object v) except -1:
    cdef int overflow = 0
    cdef long long x = PyLong_AsLongLongAndOverflow(v, &overflow)
    cdef unsigned char* p
    if overflow == 0:
        if -128 <= x <= 127:
            p = claim(w, 2)
            p[0] = 0x55
            p[1] = <unsigned char>(<int8_t>x)
        else:
            p = claim(w, 9)
            p[0] = 0x81
            be64(p + 1, <uint64_t>x)
        return 0
    if overflow > 0 and v <= 0xffffffffffffffff:
        p = claim(w, 9)
        p[0] = 0x80
        be64(p + 1, PyLong_AsUnsignedLongLong(v))
        return 0
    return enc_fail(f"int {v} fits neither AMQP long nor ulong")

cdef int64_t int_in(object v, int64_t lo, int64_t hi, str what) except? -1:
    cdef int overflow = 0
    cdef long long x
    if not isinstance(v, int) or isinstance(v, bool):
        enc_fail(f"{what} needs an int, got {type(v).__name__}")
    x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if overflow != 0 or x < lo or x > hi:
        enc_fail(f"{what} out of range: {v}")
    return x

cdef uint64_t uint_in(object v, uint64_t hi, str what) except? 0xffffffffffffffff:
    if not isinstance(v, int) or isinstance(v, bool):
        enc_fail(f"{what} needs an int, got {type(v).__name__}")
    if v < 0 or v > hi:
        enc_fail(f"{what} out of range: {v}")
    return PyLong_AsUnsignedLongLong(v)

cdef int64_t ts_in(object v) except? -1:
    if PyDateTime_Check(v):
        return ms_from_datetime(v)
    return int_in(v, INT64_MIN, 0x7fffffffffffffff, "timestamp")

cdef object as_uuid_bytes(object v):
    if isinstance(v, PyUUID):
        return v.bytes
    if isinstance(v, bytes) and len(v) == 16:
        return v
    enc_fail(f"uuid needs uuid.UUID, got {type(v).__name__}")

cdef int enc_ulong_auto(Wr* w, uint64_t x) except -1:
    cdef unsigned char* p
    if x == 0:
        return put1(w, 0x44)
    if x <= 0xff:
        p = claim(w, 2)
        p[0] = 0x53
        p[1] = <unsigned char>x
        return 0
    p = claim(w, 9)
    p[0] = 0x80
    be64(p + 1, x)
    return 0

cdef int enc_uint_auto(Wr* w, uint32_t x) except -1:
    cdef unsigned char* p
    if x == 0:
        return put1(w, 0x43)
    if x <= 0xff:
        p = claim(w, 2)
        p[0] = 0x52
        p[1] = <unsigned char>x
        return 0
    p = claim(w, 5)
    p[0] = 0x70
    be32(p + 1, x)
    return 0

cdef inline int check_depth(int depth) except -1:
    if depth >= _MAX_DEPTH:
        raise CodecError(f"nesting deeper than {_MAX_DEPTH} levels")
    return 0

cdef int finish_compound(Wr* w, Py_ssize_t start, Py_ssize_t count, unsigned char c8,
                         unsigned char c32) except -1:
    """Fix up a compound written with a 3-byte (code, size8, count8) placeholder."""
    cdef Py_ssize_t body = w.pos - start - 3
    cdef unsigned char* p
    if body + 1 <= 0xff and count <= 0xff:
        p = w.buf + start
        p[0] = c8
        p[1] = <unsigned char>(body + 1)
        p[2] = <unsigned char>count
        return 0
    if body + 4 > 0xffffffff or count > 0xffffffff:
        enc_fail("compound value exceeds the AMQP 32-bit size")
    claim(w, 6)
    memmove(w.buf + start + 9, w.buf + start + 3, body)
    p = w.buf + start
    p[0] = c32
    be32(p + 1, <uint32_t>(body + 4))
    be32(p + 5, <uint32_t>count)
    return 0

cdef int enc_list(Wr* w, object seq, int depth) except -1:
    cdef Py_ssize_t start = w.pos
    cdef Py_ssize_t count = 0
    check_depth(depth)
    if len(seq) == 0:
        return put1(w, 0x45)
    claim(w, 3)
    for item in seq:
        enc_value(w, item, depth + 1)
        count += 1
    return finish_compound(w, start, count, 0xc0, 0xd0)

cdef int enc_key(Wr* w, object k, int keymode, int depth) except -1:
    # keymode 0: any value; 1: annotations (str -> symbol, int -> ulong); 2: application
    # properties (keys must be strings)
    if keymode == 0:
        return enc_value(w, k, depth)
    if keymode == 1:
        if isinstance(k, str):
            return enc_symbol(w, k)
        if isinstance(k, int) and not isinstance(k, bool):
            return enc_ulong_auto(w, uint_in(k, 0xffffffffffffffff, "annotation key"))
        return enc_fail(f"annotation keys must be symbols (str) or ulong, got {type(k).__name__}")
    if isinstance(k, str):
        return enc_string(w, k, 0xa1, 0xb1)
    return enc_fail(f"application-properties keys must be str, got {type(k).__name__}")

cdef int enc_map(Wr* w, object d, int depth, int keymode) except -1:
    cdef Py_ssize_t start = w.pos
    cdef Py_ssize_t count = 0
    check_depth(depth)
    if not isinstance(d, dict):
        enc_fail(f"expected a dict, got {type(d).__name__}")
    claim(w, 3)
    for k, v in (<dict>d).items():
        enc_key(w, k, keymode, depth + 1)
        enc_value(w, v, depth + 1)
        count += 2
    return finish_compound(w, start, count, 0xc1, 0xd1)

cdef int enc_described(Wr* w, Described d, int depth) except -1:
    check_depth(depth)
    put1(w, 0x00)
    desc = d.descriptor
    if type(desc) is int:
        enc_ulong_auto(w, uint_in(desc, 0xffffffffffffffff, "descriptor"))
    elif type(desc) is str:
        enc_symbol(w, desc)
    else:
        enc_value(w, desc, depth + 1)
    return enc_value(w, d.value, depth + 1)

cdef int enc_payload(Wr* w, int code, object v, int depth) except -1:
    """Write ``v`` in the format of constructor ``code`` without the constructor byte."""
    cdef unsigned char* p
    cdef int64_t x
    cdef uint64_t ux
    cdef float f
    cdef double dbl
    cdef Py_ssize_t start, n
    cdef const char* data
    if code == 0x40:
        if v is not None:
            enc_fail(f"null array element must be None, got {type(v).__name__}")
    elif code == 0x41 or code == 0x42:
        if v is not (code == 0x41):
            enc_fail(f"array element must be {code == 0x41}")
    elif code == 0x56:
        if type(v) is not bool:
            enc_fail(f"boolean needs bool, got {type(v).__name__}")
        put1(w, 1 if v else 0)
    elif code == 0x43 or code == 0x44:
        uint_in(v, 0, "uint0/ulong0")
    elif code == 0x45:
        if not isinstance(v, (list, tuple)) or len(v) != 0:
            enc_fail("list0 element must be an empty list")
    elif code == 0x50:
        put1(w, <unsigned char>uint_in(v, 0xff, "ubyte"))
    elif code == 0x51:
        put1(w, <unsigned char>(<int8_t>int_in(v, -0x80, 0x7f, "byte")))
    elif code == 0x52:
        put1(w, <unsigned char>uint_in(v, 0xff, "smalluint"))
    elif code == 0x53:
        put1(w, <unsigned char>uint_in(v, 0xff, "smallulong"))
    elif code == 0x54:
        put1(w, <unsigned char>(<int8_t>int_in(v, -0x80, 0x7f, "smallint")))
    elif code == 0x55:
        put1(w, <unsigned char>(<int8_t>int_in(v, -0x80, 0x7f, "smalllong")))
    elif code == 0x60:
        be16(claim(w, 2), <uint16_t>uint_in(v, 0xffff, "ushort"))
    elif code == 0x61:
        be16(claim(w, 2), <uint16_t>(<int16_t>int_in(v, -0x8000, 0x7fff, "short")))
    elif code == 0x70:
        be32(claim(w, 4), <uint32_t>uint_in(v, 0xffffffff, "uint"))
    elif code == 0x71:
        be32(claim(w, 4), <uint32_t>(<int32_t>int_in(v, -0x80000000, 0x7fffffff, "int")))
    elif code == 0x72:
        if not isinstance(v, (float, int)) or isinstance(v, bool):
            enc_fail(f"float needs a float, got {type(v).__name__}")
        f = <float>(<double>v)
        memcpy(&ux, &f, 4)
        be32(claim(w, 4), <uint32_t>ux)
    elif code == 0x73:
        if not isinstance(v, str) or PyUnicode_GET_LENGTH(v) != 1:
            enc_fail("char needs a one-character str")
        be32(claim(w, 4), <uint32_t>PyUnicode_READ_CHAR(v, 0))
    elif code == 0x74:
        be32(claim(w, 4), <uint32_t>uint_in(v, 0xffffffff, "decimal32"))
    elif code == 0x80:
        be64(claim(w, 8), uint_in(v, 0xffffffffffffffff, "ulong"))
    elif code == 0x81:
        be64(claim(w, 8), <uint64_t>int_in(v, INT64_MIN, 0x7fffffffffffffff,
                                           "long"))
    elif code == 0x82:
        if not isinstance(v, (float, int)) or isinstance(v, bool):
            enc_fail(f"double needs a float, got {type(v).__name__}")
        dbl = <double>v
        memcpy(&ux, &dbl, 8)
        be64(claim(w, 8), ux)
    elif code == 0x83:
        be64(claim(w, 8), <uint64_t>ts_in(v))
    elif code == 0x84:
        be64(claim(w, 8), uint_in(v, 0xffffffffffffffff, "decimal64"))
    elif code == 0x94:
        if not isinstance(v, bytes) or len(v) != 16:
            enc_fail("decimal128 needs 16 bytes")
        memcpy(claim(w, 16), PyBytes_AS_STRING(v), 16)
    elif code == 0x98:
        b = as_uuid_bytes(v)
        memcpy(claim(w, 16), PyBytes_AS_STRING(b), 16)
    elif code == 0xa0 or code == 0xb0:
        if not is_bytes_like(v):
            enc_fail(f"binary needs bytes, got {type(v).__name__}")
        start = w.pos
        enc_binary(w, v)
        fix_varwidth(w, start, code == 0xb0, "binary")
    elif code == 0xa1 or code == 0xb1 or code == 0xa3 or code == 0xb3:
        if not isinstance(v, str):
            enc_fail(f"string/symbol needs str, got {type(v).__name__}")
        start = w.pos
        if code == 0xa1 or code == 0xb1:
            enc_string(w, v, 0xa1, 0xb1)
        else:
            enc_symbol(w, v)
        fix_varwidth(w, start, code == 0xb1 or code == 0xb3, "string/symbol")
    elif code == 0xc0 or code == 0xd0:
        if not isinstance(v, (list, tuple)):
            enc_fail(f"list needs a list, got {type(v).__name__}")
        start = w.pos
        claim(w, 3)
        for item in v:
            enc_value(w, item, depth + 1)
        finish_fixed(w, start, len(v), code == 0xd0)
    elif code == 0xc1 or code == 0xd1:
        if not isinstance(v, dict):
            enc_fail(f"map needs a dict, got {type(v).__name__}")
        start = w.pos
        claim(w, 3)
        n = 0
        for k, val in (<dict>v).items():
            enc_value(w, k, depth + 1)
            enc_value(w, val, depth + 1)
            n += 2
        finish_fixed(w, start, n, code == 0xd1)
    elif code == 0xe0 or code == 0xf0:
        if type(v) is not Array:
            enc_fail(f"array element needs an Array, got {type(v).__name__}")
        start = w.pos
        claim(w, 3)
        n = enc_array_items(w, <Array>v, depth + 1)
        finish_fixed(w, start, n, code == 0xf0)
    else:
        enc_fail(f"0x{code:02x} is not an AMQP constructor")
    return 0

cdef int fix_varwidth(Wr* w, Py_ssize_t start, bint wide, str what) except -1:
    """enc_chars wrote constructor+length; drop the constructor, force the requested width."""
    cdef Py_ssize_t n
    cdef unsigned char* p = w.buf + start
    if p[0] >= 0xb0:  # wrote the 32-bit form
        if not wide:
            enc_fail(f"{what} too long for the 8-bit array element form")
        memmove(p, p + 1, w.pos - start - 1)
        w.pos -= 1
        return 0
    n = p[1]
    if wide:
        claim(w, 2)
        p = w.buf + start
        memmove(p + 4, p + 2, n)
        be32(p, <uint32_t>n)
    else:
        memmove(p, p + 1, n + 1)
        w.pos -= 1
    return 0

cdef int finish_fixed(Wr* w, Py_ssize_t start, Py_ssize_t count, bint wide) except -1:
    """Fix up an array element compound (size, count) written with a 3-byte placeholder."""
    cdef Py_ssize_t body = w.pos - start - 3
    cdef unsigned char* p
    if not wide:
        if body + 1 > 0xff or count > 0xff:
            enc_fail("compound too large for the 8-bit array element form")
        p = w.buf + start
        p[0] = <unsigned char>(body + 1)
        p[1] = <unsigned char>count
        memmove(p + 2, p + 3, body)
        w.pos -= 1
        return 0
    if body + 4 > 0xffffffff or count > 0xffffffff:
        enc_fail("compound value exceeds the AMQP 32-bit size")
    claim(w, 5)
    memmove(w.buf + start + 8, w.buf + start + 3, body)
    p = w.buf + start
    be32(p, <uint32_t>(body + 4))
    be32(p + 4, <uint32_t>count)
    return 0

cdef Py_ssize_t enc_array_items(Wr* w, Array a, int depth) except -1:
    """Write the element constructor and the elements; returns the element count."""
    cdef Py_ssize_t n = 0
    check_depth(depth)
    if a.descriptor is not None:
        put1(w, 0x00)
        enc_value(w, a.descriptor, depth + 1)
    put1(w, <unsigned char>a.code)
    for item in a.items:
        enc_payload(w, a.code, item, depth + 1)
        n += 1
    return n

cdef int enc_array(Wr* w, Array a, int depth) except -1:
    cdef Py_ssize_t start = w.pos
    cdef Py_ssize_t n
    claim(w, 3)
    n = enc_array_items(w, a, depth)
    return finish_compound(w, start, n, 0xe0, 0xf0)

cdef int enc_other(Wr* w, object v, type t, int depth) except -1:
    cdef int64_t x
    cdef uint64_t ux
    cdef unsigned char* p
    if t is Symbol:
        return enc_symbol(w, v)
    if t is Described:
        return enc_described(w, <Described>v, depth)
    if t is Array:
        return enc_array(w, <Array>v, depth)
    if PyDateTime_Check(v):
        p = claim(w, 9)
        p[0] = 0x83
        be64(p + 1, <uint64_t>ms_from_datetime(v))
        return 0
    if isinstance(v, PyUUID):
        put1(w, 0x98)
        return enc_payload(w, 0x98, v, depth)
    if t is bytearray or t is memoryview:
        return enc_binary(w, v)
    if isinstance(v, int):
        if t is UInt:
            return enc_uint_auto(w, <uint32_t>uint_in(v, 0xffffffff, "uint"))
        if t is ULong:
            return enc_ulong_auto(w, uint_in(v, 0xffffffffffffffff, "ulong"))
        if t is Int:
            x = int_in(v, -0x80000000, 0x7fffffff, "int")
            if -128 <= x <= 127:
                p = claim(w, 2)
                p[0] = 0x54
                p[1] = <unsigned char>(<int8_t>x)
                return 0
            put1(w, 0x71)
            return enc_payload(w, 0x71, v, depth)
        if t is Long:
            x = int_in(v, INT64_MIN, 0x7fffffffffffffff, "long")
            if -128 <= x <= 127:
                p = claim(w, 2)
                p[0] = 0x55
                p[1] = <unsigned char>(<int8_t>x)
                return 0
            put1(w, 0x81)
            return enc_payload(w, 0x81, v, depth)
        if t is UByte:
            code = 0x50
        elif t is UShort:
            code = 0x60
        elif t is Byte:
            code = 0x51
        elif t is Short:
            code = 0x61
        elif t is Timestamp:
            code = 0x83
        elif t is Decimal32:
            code = 0x74
        elif t is Decimal64:
            code = 0x84
        else:
            return enc_int(w, v)
        put1(w, code)
        return enc_payload(w, code, v, depth)
    if isinstance(v, str):
        if t is Char:
            put1(w, 0x73)
            return enc_payload(w, 0x73, v, depth)
        if isinstance(v, Symbol):
            return enc_symbol(w, v)
        return enc_string(w, v, 0xa1, 0xb1)
    if isinstance(v, bytes):
        if t is Decimal128:
            put1(w, 0x94)
            return enc_payload(w, 0x94, v, depth)
        return enc_binary(w, v)
    if isinstance(v, float):
        if t is Float:
            put1(w, 0x72)
        else:
            put1(w, 0x82)
        return enc_payload(w, 0x72 if t is Float else 0x82, v, depth)
    if isinstance(v, dict):
        return enc_map(w, v, depth, 0)
    if isinstance(v, (list, tuple)):
        return enc_list(w, v, depth)
    if isinstance(v, (bytearray, memoryview)):
        return enc_binary(w, v)
    return enc_fail(f"cannot encode {t.__name__} as AMQP 1.0")

cdef int enc_value(Wr* w, object v, int depth) except -1:
    cdef type t = type(v)
    cdef unsigned char* p
    cdef double d
    cdef uint64_t ux
    if t is str:
        return enc_string(w, v, 0xa1, 0xb1)
    if t is int:
        return enc_int(w, v)
    if v is None:
        return put1(w, 0x40)
    if t is bool:
        return put1(w, 0x41 if v is True else 0x42)
    if t is bytes:
        return enc_chars(w, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v), 0xa0, 0xb0)
    if t is dict:
        return enc_map(w, v, depth, 0)
    if t is list or t is tuple:
        return enc_list(w, v, depth)
    if t is float:
        d = <double>v
        memcpy(&ux, &d, 8)
        p = claim(w, 9)
        p[0] = 0x82
        be64(p + 1, ux)
        return 0
    return enc_other(w, v, t, depth)


# message sections -----------------------------------------------------------

cdef inline int section(Wr* w, unsigned char code) except -1:
    cdef unsigned char* p = claim(w, 3)
    p[0] = 0x00
    p[1] = 0x53
    p[2] = code
    return 0

cdef int enc_bool_field(Wr* w, object v, str what) except -1:
    if v is None:
        return put1(w, 0x40)
    if type(v) is not bool:
        enc_fail(f"{what} needs a bool, got {type(v).__name__}")
    return put1(w, 0x41 if v else 0x42)

cdef int enc_header(Wr* w, object h) except -1:
    cdef Header hd
    cdef Py_ssize_t start, n
    if type(h) is not Header:
        enc_fail(f"header must be a Header, got {type(h).__name__}")
    hd = <Header>h
    section(w, 0x70)
    # trailing fields equal to their defaults are omitted (null means default)
    n = 5
    if hd.delivery_count is None or hd.delivery_count == 0:
        n = 4
        if hd.first_acquirer is None or hd.first_acquirer is False:
            n = 3
            if hd.ttl is None:
                n = 2
                if hd.priority is None or hd.priority == 4:
                    n = 1
                    if hd.durable is None or hd.durable is False:
                        n = 0
    if n == 0:
        return put1(w, 0x45)
    start = w.pos
    claim(w, 3)
    enc_bool_field(w, hd.durable, "header.durable")
    if n > 1:
        if hd.priority is None:
            put1(w, 0x40)
        else:
            put1(w, 0x50)
            enc_payload(w, 0x50, hd.priority, 0)
    if n > 2:
        if hd.ttl is None:
            put1(w, 0x40)
        else:
            enc_uint_auto(w, <uint32_t>uint_in(hd.ttl, 0xffffffff, "header.ttl"))
    if n > 3:
        enc_bool_field(w, hd.first_acquirer, "header.first_acquirer")
    if n > 4:
        enc_uint_auto(w, <uint32_t>uint_in(hd.delivery_count, 0xffffffff,
                                           "header.delivery_count"))
    return finish_compound(w, start, n, 0xc0, 0xd0)

cdef int enc_message_id(Wr* w, object v) except -1:
    cdef type t = type(v)
    if v is None:
        return put1(w, 0x40)
    if t is str:
        return enc_string(w, v, 0xa1, 0xb1)
    if t is int:
        return enc_ulong_auto(w, uint_in(v, 0xffffffffffffffff, "message-id"))
    if t is bytes:
        return enc_binary(w, v)
    if isinstance(v, PyUUID) or t is ULong or isinstance(v, str) or is_bytes_like(v):
        return enc_value(w, v, 0)
    return enc_fail(f"message-id must be str, int, bytes or UUID, got {t.__name__}")

cdef int enc_opt_string(Wr* w, object v, str what) except -1:
    if v is None:
        return put1(w, 0x40)
    if not isinstance(v, str):
        enc_fail(f"{what} needs a str, got {type(v).__name__}")
    return enc_string(w, v, 0xa1, 0xb1)

cdef int enc_opt_symbol(Wr* w, object v, str what) except -1:
    if v is None:
        return put1(w, 0x40)
    if not isinstance(v, str):
        enc_fail(f"{what} needs a str, got {type(v).__name__}")
    return enc_symbol(w, v)

cdef int enc_opt_ts(Wr* w, object v) except -1:
    cdef unsigned char* p
    if v is None:
        return put1(w, 0x40)
    p = claim(w, 9)
    p[0] = 0x83
    be64(p + 1, <uint64_t>ts_in(v))
    return 0

cdef int enc_properties(Wr* w, object props) except -1:
    cdef Properties pr
    cdef Py_ssize_t start, n
    if type(props) is not Properties:
        enc_fail(f"properties must be a Properties, got {type(props).__name__}")
    pr = <Properties>props
    section(w, 0x73)
    n = 13
    if pr.reply_to_group_id is None:
        n = 12
        if pr.group_sequence is None:
            n = 11
            if pr.group_id is None:
                n = 10
                if pr.creation_time is None:
                    n = 9
                    if pr.absolute_expiry_time is None:
                        n = 8
                        while n > 0 and pr._key()[n - 1] is None:
                            n -= 1
    if n == 0:
        return put1(w, 0x45)
    start = w.pos
    claim(w, 3)
    enc_message_id(w, pr.message_id)
    if n > 1:
        if pr.user_id is None:
            put1(w, 0x40)
        elif is_bytes_like(pr.user_id):
            enc_binary(w, pr.user_id)
        else:
            enc_fail(f"properties.user_id needs bytes, got {type(pr.user_id).__name__}")
    if n > 2:
        enc_opt_string(w, pr.to, "properties.to")
    if n > 3:
        enc_opt_string(w, pr.subject, "properties.subject")
    if n > 4:
        enc_opt_string(w, pr.reply_to, "properties.reply_to")
    if n > 5:
        enc_message_id(w, pr.correlation_id)
    if n > 6:
        enc_opt_symbol(w, pr.content_type, "properties.content_type")
    if n > 7:
        enc_opt_symbol(w, pr.content_encoding, "properties.content_encoding")
    if n > 8:
        enc_opt_ts(w, pr.absolute_expiry_time)
    if n > 9:
        enc_opt_ts(w, pr.creation_time)
    if n > 10:
        enc_opt_string(w, pr.group_id, "properties.group_id")
    if n > 11:
        if pr.group_sequence is None:
            put1(w, 0x40)
        else:
            enc_uint_auto(w, <uint32_t>uint_in(pr.group_sequence, 0xffffffff,
                                               "properties.group_sequence"))
    if n > 12:
        enc_opt_string(w, pr.reply_to_group_id, "properties.reply_to_group_id")
    return finish_compound(w, start, n, 0xc0, 0xd0)

cdef int enc_data_section(Wr* w, object body) except -1:
    section(w, 0x75)
    if PyBytes_CheckExact(body):
        return enc_chars(w, PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body), 0xa0, 0xb0)
    if not is_bytes_like(body):
        enc_fail(f"data section needs bytes, got {type(body).__name__}")
    return enc_binary(w, body)

cdef int enc_message(Wr* w, Message m) except -1:
    kind = m.body_kind
    body = m.body
    if m.header is not None:
        enc_header(w, m.header)
    if m.delivery_annotations is not None:
        section(w, 0x71)
        enc_map(w, m.delivery_annotations, 0, 1)
    if m.message_annotations is not None:
        section(w, 0x72)
        enc_map(w, m.message_annotations, 0, 1)
    if m.properties is not None:
        enc_properties(w, m.properties)
    if m.application_properties is not None:
        section(w, 0x74)
        enc_map(w, m.application_properties, 0, 2)
    if kind is BODY_VALUE or kind == BODY_VALUE:
        section(w, 0x77)
        enc_value(w, body, 0)
    elif kind is BODY_DATA or kind == BODY_DATA:
        if type(body) is list:
            if len(<list>body) == 0:
                enc_fail("a data body needs at least one section")
            for b in <list>body:
                enc_data_section(w, b)
        else:
            enc_data_section(w, body)
    elif kind is BODY_SEQUENCE or kind == BODY_SEQUENCE:
        if type(body) is not list or len(<list>body) == 0:
            enc_fail("a sequence body needs a non-empty list of lists (one per section)")
        for s in <list>body:
            if not isinstance(s, (list, tuple)):
                enc_fail(f"amqp-sequence section needs a list, got {type(s).__name__}")
            section(w, 0x76)
            enc_list(w, s, 0)
    else:
        enc_fail(f"unknown body_kind {kind!r}")
    if m.footer is not None:
        section(w, 0x78)
        enc_map(w, m.footer, 0, 1)
    return 0


# public encoders -------------------------------------------------------------

cdef inline object wr_result(Wr* w):
    return PyBytes_FromStringAndSize(<char*>w.buf, w.pos)

def encode_value(value) -> bytes:
    """Encode one Python value as an AMQP 1.0 value (see docs/codec.md for the mapping)."""
    cdef unsigned char stack[STACK_BUF]
    cdef Wr w
    w.buf = stack
    w.pos = 0
    w.cap = STACK_BUF
    w.heap = 0
    try:
        enc_value(&w, value, 0)
        return wr_result(&w)
    finally:
        if w.heap:
            free(w.buf)

def encode_message(Message msg not None) -> bytes:
    """Encode a Message as its bare-message sections (header … footer) in spec order."""
    cdef unsigned char stack[STACK_BUF]
    cdef Wr w
    w.buf = stack
    w.pos = 0
    w.cap = STACK_BUF
    w.heap = 0
    try:
        enc_message(&w, msg)
        return wr_result(&w)
    finally:
        if w.heap:
            free(w.buf)

def encode_data(body, application_properties=None) -> bytes:
    """Stream fast path: [application-properties] + one data section holding ``body``."""
    cdef unsigned char stack[STACK_BUF]
    cdef Wr w
    w.buf = stack
    w.pos = 0
    w.cap = STACK_BUF
    w.heap = 0
    try:
        if application_properties is not None:
            section(&w, 0x74)
            enc_map(&w, application_properties, 0, 2)
        enc_data_section(&w, body)
        return wr_result(&w)
    finally:
        if w.heap:
            free(w.buf)


# ---------------------------------------------------------------------------
# decoder
# ---------------------------------------------------------------------------

cdef struct Rd:
    const unsigned char* buf
    Py_ssize_t pos
    Py_ssize_t end
    Py_ssize_t budget   # zero-width array elements still allowed (bounds memory)

cdef int trunc(Rd* r, Py_ssize_t n, str what) except -1:
    raise CodecError(f"truncated {what}: need {n} bytes, {r.end - r.pos} left", r.pos)

cdef inline const unsigned char* take(Rd* r, Py_ssize_t n, str what) except NULL:
    cdef const unsigned char* p
    if n > r.end - r.pos:
        trunc(r, n, what)
    p = r.buf + r.pos
    r.pos += n
    return p

cdef int dec_fail(Rd* r, Py_ssize_t offset, str msg) except -1:
    raise CodecError(msg, offset)

cdef object dec_utf8(Rd* r, Py_ssize_t n):
    cdef Py_ssize_t off = r.pos
    cdef const unsigned char* p = take(r, n, "string")
    try:
        return PyUnicode_DecodeUTF8(<const char*>p, n, NULL)
    except UnicodeDecodeError as e:
        raise CodecError(f"string is not valid UTF-8: {e.reason}", off + e.start) from None

cdef inline uint32_t fnv1a(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    cdef uint32_t h = 2166136261u
    cdef Py_ssize_t i
    for i in range(n):
        h = (h ^ p[i]) * 16777619u
    return h ^ (h >> 15)

cdef inline object cache_get(PyObject** table, const unsigned char* p, Py_ssize_t n,
                             uint32_t* slot):
    cdef uint32_t h = fnv1a(p, n) & (CACHE_SLOTS - 1)
    cdef PyObject* c = table[h]
    slot[0] = h
    if c != NULL and PyUnicode_GET_LENGTH_RAW(c) == n and memcmp(PyUnicode_DATA(c), p, n) == 0:
        return <object>c
    return None

cdef inline void cache_put(PyObject** table, uint32_t slot, object s):
    # only ASCII strings: their length in code points equals their UTF-8 byte length
    if PyUnicode_IS_ASCII(s):
        Py_INCREF(s)
        Py_XDECREF_RAW(table[slot])
        table[slot] = <PyObject*>s

cdef object dec_key_string(Rd* r, Py_ssize_t n):
    """A string used as a map key: served from KEY_CACHE when seen before."""
    cdef uint32_t slot
    if n > CACHE_MAXLEN or n > r.end - r.pos:
        return dec_utf8(r, n)
    s = cache_get(KEY_CACHE, r.buf + r.pos, n, &slot)
    if s is not None:
        r.pos += n
        return s
    s = dec_utf8(r, n)
    cache_put(KEY_CACHE, slot, s)
    return s

cdef object dec_symbol(Rd* r, Py_ssize_t n):
    cdef Py_ssize_t off = r.pos
    cdef const unsigned char* p = take(r, n, "symbol")
    cdef Py_ssize_t i
    cdef uint32_t slot = 0
    if n <= CACHE_MAXLEN:
        sym = cache_get(SYM_CACHE, p, n, &slot)
        if sym is not None:
            return sym
    for i in range(n):
        if p[i] >= 0x80:
            dec_fail(r, off + i, "symbol is not ASCII")
    sym = Symbol(PyUnicode_DecodeUTF8(<const char*>p, n, NULL))
    if n <= CACHE_MAXLEN:
        cache_put(SYM_CACHE, slot, sym)
    return sym

cdef object dec_uuid(const unsigned char* p):
    u = _object_new(PyUUID)
    _setattr(u, "int", (PyLong_FromUnsignedLongLong(rd64(p)) << 64)
             | PyLong_FromUnsignedLongLong(rd64(p + 8)))
    _setattr(u, "is_safe", SAFE_UNKNOWN)
    return u

cdef object dec_list_items(Rd* r, Py_ssize_t body, Py_ssize_t count, int depth, Py_ssize_t off):
    cdef Py_ssize_t i, saved
    cdef list lst
    if depth >= _MAX_DEPTH:
        dec_fail(r, off, f"nesting deeper than {_MAX_DEPTH} levels")
    if body > r.end - r.pos:
        trunc(r, body, "list")
    if count > body:
        dec_fail(r, off, f"list claims {count} elements in {body} bytes")
    saved = r.end
    r.end = r.pos + body
    lst = PyList_New(count)
    for i in range(count):
        v = dec_value(r, depth + 1)
        Py_INCREF(v)
        PyList_SET_ITEM(lst, i, v)
    if r.pos != r.end:
        dec_fail(r, r.pos, f"list size mismatch: {r.end - r.pos} bytes left after {count} elements")
    r.end = saved
    return lst

cdef object dec_map_items(Rd* r, Py_ssize_t body, Py_ssize_t count, int depth, Py_ssize_t off):
    cdef Py_ssize_t i, saved, koff
    cdef dict d
    if depth >= _MAX_DEPTH:
        dec_fail(r, off, f"nesting deeper than {_MAX_DEPTH} levels")
    if body > r.end - r.pos:
        trunc(r, body, "map")
    if count > body:
        dec_fail(r, off, f"map claims {count} elements in {body} bytes")
    if count & 1:
        dec_fail(r, off, f"map needs an even element count, got {count}")
    saved = r.end
    r.end = r.pos + body
    d = {}
    for i in range(0, count, 2):
        koff = r.pos
        if r.pos + 2 <= r.end and r.buf[r.pos] == 0xa1:
            r.pos += 2
            k = dec_key_string(r, r.buf[r.pos - 1])
        else:
            k = dec_value(r, depth + 1)
        v = dec_value(r, depth + 1)
        if type(k) is list or type(k) is dict or type(k) is Array:
            dec_fail(r, koff, f"map key of type {type(k).__name__} is not hashable")
        if type(k) is Described:
            try:
                hash(k)
            except TypeError:
                dec_fail(r, koff, f"map key {k!r} is not hashable")
        PyDict_SetItem(d, k, v)
    if r.pos != r.end:
        dec_fail(r, r.pos, f"map size mismatch: {r.end - r.pos} bytes left after {count} elements")
    r.end = saved
    return d

cdef object dec_array_items(Rd* r, Py_ssize_t body, Py_ssize_t count, int depth,
                            Py_ssize_t off):
    cdef Py_ssize_t i, saved, coff
    cdef int code, width
    cdef list lst
    cdef Array a
    descriptor = None
    if depth >= _MAX_DEPTH:
        dec_fail(r, off, f"nesting deeper than {_MAX_DEPTH} levels")
    if body > r.end - r.pos:
        trunc(r, body, "array")
    saved = r.end
    r.end = r.pos + body
    coff = r.pos
    code = take(r, 1, "array element constructor")[0]
    if code == 0x00:
        descriptor = dec_value(r, depth + 1)
        coff = r.pos
        code = take(r, 1, "array element constructor")[0]
    width = code_width(code)
    if width == -2:
        dec_fail(r, coff, f"invalid array element constructor 0x{code:02x}")
    if width == 0:
        if count > r.budget:
            dec_fail(r, off, f"array of {count} zero-width elements exceeds the input-size budget")
        r.budget -= count
    elif count > r.end - r.pos:
        dec_fail(r, off, f"array claims {count} elements in {r.end - r.pos} bytes")
    lst = PyList_New(count)
    for i in range(count):
        v = dec_payload(r, code, depth + 1, r.pos)
        Py_INCREF(v)
        PyList_SET_ITEM(lst, i, v)
    if r.pos != r.end:
        dec_fail(r, r.pos, f"array size mismatch: {r.end - r.pos} bytes left after {count} elements")
    r.end = saved
    a = Array.__new__(Array)
    a.code = code
    a.items = lst
    a.descriptor = descriptor
    return a

cdef inline object dec_value(Rd* r, int depth):
    cdef Py_ssize_t off = r.pos
    cdef int code = take(r, 1, "constructor")[0]
    return dec_payload(r, code, depth, off)

cdef object dec_payload(Rd* r, int code, int depth, Py_ssize_t off):
    """Decode the payload of constructor ``code`` (already consumed; ``off`` is where it was)."""
    cdef const unsigned char* p
    cdef Py_ssize_t n, m
    cdef uint32_t u32
    cdef uint64_t u64
    cdef float f
    cdef double d
    cdef Described ds
    if code == 0xa1:
        n = take(r, 1, "str8 length")[0]
        return dec_utf8(r, n)
    elif code == 0x55:
        return PyLong_FromLongLong(<int8_t>take(r, 1, "smalllong")[0])
    elif code == 0x81:
        return PyLong_FromLongLong(<int64_t>rd64(take(r, 8, "long")))
    elif code == 0xc0:
        p = take(r, 2, "list8 size/count")
        if p[0] < 1:
            dec_fail(r, off, "list8 size 0 cannot hold its count")
        return dec_list_items(r, p[0] - 1, p[1], depth, off)
    elif code == 0xc1:
        p = take(r, 2, "map8 size/count")
        if p[0] < 1:
            dec_fail(r, off, "map8 size 0 cannot hold its count")
        return dec_map_items(r, p[0] - 1, p[1], depth, off)
    elif code == 0xa0:
        n = take(r, 1, "vbin8 length")[0]
        p = take(r, n, "binary")
        return PyBytes_FromStringAndSize(<const char*>p, n)
    elif code == 0x40:
        return None
    elif code == 0x41:
        return True
    elif code == 0x42:
        return False
    elif code == 0x56:
        p = take(r, 1, "boolean")
        if p[0] > 1:
            dec_fail(r, off + 1, f"boolean byte must be 0 or 1, got {p[0]}")
        return p[0] == 1
    elif code == 0x43 or code == 0x44:
        return 0
    elif code == 0x45:
        return []
    elif code == 0x50 or code == 0x52 or code == 0x53:
        return PyLong_FromLongLong(take(r, 1, "ubyte")[0])
    elif code == 0x51 or code == 0x54:
        return PyLong_FromLongLong(<int8_t>take(r, 1, "byte")[0])
    elif code == 0x60:
        return PyLong_FromLongLong(rd16(take(r, 2, "ushort")))
    elif code == 0x61:
        return PyLong_FromLongLong(<int16_t>rd16(take(r, 2, "short")))
    elif code == 0x70:
        return PyLong_FromLongLong(rd32(take(r, 4, "uint")))
    elif code == 0x71:
        return PyLong_FromLongLong(<int32_t>rd32(take(r, 4, "int")))
    elif code == 0x72:
        u32 = rd32(take(r, 4, "float"))
        memcpy(&f, &u32, 4)
        return PyFloat_FromDouble(f)
    elif code == 0x73:
        u32 = rd32(take(r, 4, "char"))
        if u32 > 0x10ffff or 0xd800 <= u32 <= 0xdfff:
            dec_fail(r, off + 1, f"char 0x{u32:x} is not a Unicode scalar value")
        return Char(chr(u32))
    elif code == 0x74:
        return Decimal32(rd32(take(r, 4, "decimal32")))
    elif code == 0x80:
        return PyLong_FromUnsignedLongLong(rd64(take(r, 8, "ulong")))
    elif code == 0x82:
        u64 = rd64(take(r, 8, "double"))
        memcpy(&d, &u64, 8)
        return PyFloat_FromDouble(d)
    elif code == 0x83:
        return datetime_from_ms(<int64_t>rd64(take(r, 8, "timestamp")), off)
    elif code == 0x84:
        return Decimal64(PyLong_FromUnsignedLongLong(rd64(take(r, 8, "decimal64"))))
    elif code == 0x94:
        p = take(r, 16, "decimal128")
        return Decimal128(PyBytes_FromStringAndSize(<const char*>p, 16))
    elif code == 0x98:
        return dec_uuid(take(r, 16, "uuid"))
    elif code == 0xb0:
        n = rd32(take(r, 4, "vbin32 length"))
        p = take(r, n, "binary")
        return PyBytes_FromStringAndSize(<const char*>p, n)
    elif code == 0xb1:
        n = rd32(take(r, 4, "str32 length"))
        return dec_utf8(r, n)
    elif code == 0xa3:
        n = take(r, 1, "sym8 length")[0]
        return dec_symbol(r, n)
    elif code == 0xb3:
        n = rd32(take(r, 4, "sym32 length"))
        return dec_symbol(r, n)
    elif code == 0xd0:
        p = take(r, 8, "list32 size/count")
        n = rd32(p)
        if n < 4:
            dec_fail(r, off, f"list32 size {n} cannot hold its count")
        return dec_list_items(r, n - 4, rd32(p + 4), depth, off)
    elif code == 0xd1:
        p = take(r, 8, "map32 size/count")
        n = rd32(p)
        if n < 4:
            dec_fail(r, off, f"map32 size {n} cannot hold its count")
        return dec_map_items(r, n - 4, rd32(p + 4), depth, off)
    elif code == 0xe0:
        p = take(r, 2, "array8 size/count")
        if p[0] < 1:
            dec_fail(r, off, "array8 size 0 cannot hold its count")
        return dec_array_items(r, p[0] - 1, p[1], depth, off)
    elif code == 0xf0:
        p = take(r, 8, "array32 size/count")
        n = rd32(p)
        if n < 4:
            dec_fail(r, off, f"array32 size {n} cannot hold its count")
        return dec_array_items(r, n - 4, rd32(p + 4), depth, off)
    elif code == 0x00:
        if depth >= _MAX_DEPTH:
            dec_fail(r, off, f"nesting deeper than {_MAX_DEPTH} levels")
        descriptor = dec_value(r, depth + 1)
        value = dec_value(r, depth + 1)
        ds = Described.__new__(Described)
        ds.descriptor = descriptor
        ds.value = value
        return ds
    dec_fail(r, off, f"invalid constructor 0x{code:02x}")


cdef int skip_value(Rd* r, int depth) except -1:
    """Step over one encoded value without building it (sizes still bounds-checked)."""
    cdef Py_ssize_t off = r.pos
    cdef int code = take(r, 1, "constructor")[0]
    cdef int width
    if code == 0x00:
        if depth >= _MAX_DEPTH:
            dec_fail(r, off, f"nesting deeper than {_MAX_DEPTH} levels")
        skip_value(r, depth + 1)
        return skip_value(r, depth + 1)
    width = code_width(code)
    if width >= 0:
        take(r, width, "value")
    elif width == -1:
        if code == 0xb0 or code == 0xb1 or code == 0xb3 or code == 0xd0 or code == 0xd1 or code == 0xf0:
            take(r, rd32(take(r, 4, "32-bit size")), "value")
        else:
            take(r, take(r, 1, "8-bit size")[0], "value")
    else:
        dec_fail(r, off, f"invalid constructor 0x{code:02x}")
    return 0


# message decoding --------------------------------------------------------------

cdef int section_code(Rd* r) except -1:
    """Read a section descriptor; return its ulong code (0x70..0x78)."""
    cdef Py_ssize_t off = r.pos
    cdef const unsigned char* p = take(r, 2, "section descriptor")
    cdef uint64_t code
    if p[0] != 0x00:
        dec_fail(r, off, f"expected a described section (0x00), got 0x{p[0]:02x}")
    if p[1] == 0x53:
        return take(r, 1, "section descriptor code")[0]
    if p[1] == 0x80:
        code = rd64(take(r, 8, "section descriptor code"))
        return <int>code if code <= 0xff else 0xffff
    if p[1] == 0xa3 or p[1] == 0xb3:
        r.pos -= 1
        sym = dec_value(r, 0)
        return SECTION_SYMBOLS.get(sym, 0xffff)
    dec_fail(r, off + 1, f"expected a ulong or symbol section descriptor, got 0x{p[1]:02x}")

cdef dict SECTION_SYMBOLS = {
    "amqp:header:list": 0x70, "amqp:delivery-annotations:map": 0x71,
    "amqp:message-annotations:map": 0x72, "amqp:properties:list": 0x73,
    "amqp:application-properties:map": 0x74, "amqp:data:binary": 0x75,
    "amqp:amqp-sequence:list": 0x76, "amqp:amqp-value:*": 0x77, "amqp:footer:map": 0x78,
}

cdef int list_header(Rd* r, Py_ssize_t* body, Py_ssize_t* count, str what) except -1:
    cdef Py_ssize_t off = r.pos
    cdef int code = take(r, 1, what)[0]
    cdef const unsigned char* p
    if code == 0x45:
        body[0] = 0
        count[0] = 0
    elif code == 0xc0:
        p = take(r, 2, "list8 size/count")
        if p[0] < 1:
            dec_fail(r, off, "list8 size 0 cannot hold its count")
        body[0] = p[0] - 1
        count[0] = p[1]
    elif code == 0xd0:
        p = take(r, 8, "list32 size/count")
        if rd32(p) < 4:
            dec_fail(r, off, "list32 size cannot hold its count")
        body[0] = rd32(p) - 4
        count[0] = rd32(p + 4)
    else:
        dec_fail(r, off, f"expected a list for {what}, got constructor 0x{code:02x}")
    if body[0] > r.end - r.pos:
        trunc(r, body[0], what)
    if count[0] > body[0]:
        dec_fail(r, off, f"{what} claims {count[0]} fields in {body[0]} bytes")
    return 0

cdef object dec_header(Rd* r):
    cdef Py_ssize_t body, count, i, saved, off
    cdef Header h = Header.__new__(Header)
    h.durable = False
    h.priority = 4
    h.first_acquirer = False
    h.delivery_count = 0
    list_header(r, &body, &count, "header")
    saved = r.end
    r.end = r.pos + body
    for i in range(count):
        off = r.pos
        v = dec_value(r, 1)
        if v is None:
            continue
        if i == 0 or i == 3:
            if type(v) is not bool:
                dec_fail(r, off, "header durable/first-acquirer must be boolean")
            if i == 0:
                h.durable = v
            else:
                h.first_acquirer = v
        elif i <= 4:
            if type(v) is not int:
                dec_fail(r, off, "header priority/ttl/delivery-count must be an integer")
            if i == 1:
                h.priority = v
            elif i == 2:
                h.ttl = v
            else:
                h.delivery_count = v
    if r.pos != r.end:
        dec_fail(r, r.pos, "header size mismatch")
    r.end = saved
    return h

cdef object dec_properties(Rd* r):
    cdef Py_ssize_t body, count, i, saved
    cdef Properties pr = Properties.__new__(Properties)
    list_header(r, &body, &count, "properties")
    saved = r.end
    r.end = r.pos + body
    for i in range(count):
        v = dec_value(r, 1)
        if i == 0:
            pr.message_id = v
        elif i == 1:
            pr.user_id = v
        elif i == 2:
            pr.to = v
        elif i == 3:
            pr.subject = v
        elif i == 4:
            pr.reply_to = v
        elif i == 5:
            pr.correlation_id = v
        elif i == 6:
            pr.content_type = v
        elif i == 7:
            pr.content_encoding = v
        elif i == 8:
            pr.absolute_expiry_time = v
        elif i == 9:
            pr.creation_time = v
        elif i == 10:
            pr.group_id = v
        elif i == 11:
            pr.group_sequence = v
        elif i == 12:
            pr.reply_to_group_id = v
    if r.pos != r.end:
        dec_fail(r, r.pos, "properties size mismatch")
    r.end = saved
    return pr

cdef object dec_map_section(Rd* r, str what):
    cdef Py_ssize_t off = r.pos
    v = dec_value(r, 0)
    if type(v) is not dict:
        if v is None:
            return None
        dec_fail(r, off, f"{what} must be a map, got {type(v).__name__}")
    return v

cdef object data_view(Rd* r, object base, Py_ssize_t* voff, Py_ssize_t* vlen):
    """Read a data section's binary; store its offset/length (the view is made by caller)."""
    cdef Py_ssize_t off = r.pos
    cdef int code = take(r, 1, "data section binary")[0]
    cdef Py_ssize_t n = 0
    if code == 0xa0:
        n = take(r, 1, "vbin8 length")[0]
    elif code == 0xb0:
        n = rd32(take(r, 4, "vbin32 length"))
    else:
        dec_fail(r, off, f"data section must hold binary, got constructor 0x{code:02x}")
    voff[0] = r.pos
    take(r, n, "data section")
    vlen[0] = n
    return None


cdef object dec_message(Rd* r, object base, int mode):
    """mode 0: full Message; 1: data body view only; 2: (data view, application-properties)."""
    cdef int code, last = 0
    cdef Py_ssize_t off, voff = 0, vlen = 0
    cdef Message m
    cdef object mv = None
    cdef int nbody = 0, body_code = 0
    cdef list parts = None
    body = None
    app = None
    if mode == 0:
        m = Message.__new__(Message)
    while r.pos < r.end:
        off = r.pos
        code = section_code(r)
        if code < 0x70 or code > 0x78:
            dec_fail(r, off, f"unknown message section descriptor 0x{code:x}")
        if code < last or (code == last and code != 0x75 and code != 0x76):
            dec_fail(r, off, f"message section 0x{code:02x} out of order or repeated")
        if 0x75 <= code <= 0x77:
            if body_code != 0 and body_code != code:
                dec_fail(r, off, "message mixes body kinds")
            body_code = code
        last = code
        if code == 0x75:
            data_view(r, base, &voff, &vlen)
            if mv is None:
                mv = PyMemoryView_FromObject(base)
            if mode != 0:
                if nbody:
                    dec_fail(r, off, "expected a single data section, got several")
                body = PySequence_GetSlice(mv, voff, voff + vlen)
            elif nbody == 0:
                body = PySequence_GetSlice(mv, voff, voff + vlen)
            else:
                if nbody == 1:
                    parts = [body]
                    body = parts
                parts.append(PySequence_GetSlice(mv, voff, voff + vlen))
            nbody += 1
        elif mode != 0:
            if code == 0x74 and mode == 2:
                app = dec_map_section(r, "application-properties")
            elif code == 0x76 or code == 0x77:
                dec_fail(r, off, "expected a data body, got amqp-sequence/amqp-value")
            else:
                skip_value(r, 0)
        elif code == 0x77:
            m.body = dec_value(r, 0)
        elif code == 0x74:
            m.application_properties = dec_map_section(r, "application-properties")
        elif code == 0x73:
            m.properties = dec_properties(r)
        elif code == 0x72:
            m.message_annotations = dec_map_section(r, "message-annotations")
        elif code == 0x70:
            m.header = dec_header(r)
        elif code == 0x71:
            m.delivery_annotations = dec_map_section(r, "delivery-annotations")
        elif code == 0x76:
            v = dec_value(r, 0)
            if type(v) is not list:
                dec_fail(r, off, f"amqp-sequence must hold a list, got {type(v).__name__}")
            if nbody == 0:
                body = [v]
            else:
                body.append(v)
            nbody += 1
        elif code == 0x78:
            m.footer = dec_map_section(r, "footer")
    if mode != 0:
        if body_code != 0x75:
            dec_fail(r, r.pos, "expected a data section, found none")
        if mode == 1:
            return body
        return (body, app)
    if body_code == 0x75:
        m.body = body
        m.body_kind = BODY_DATA
    elif body_code == 0x76:
        m.body = body
        m.body_kind = BODY_SEQUENCE
    else:
        m.body_kind = BODY_VALUE
    return m


# public decoders -------------------------------------------------------------

cdef inline bint acquire(object buf, Py_buffer* view, Rd* r) except -1:
    """Point ``r`` at the bytes of ``buf``; returns True when ``view`` must be released."""
    r.pos = 0
    if PyBytes_CheckExact(buf):
        r.buf = <const unsigned char*>PyBytes_AS_STRING(buf)
        r.end = PyBytes_GET_SIZE(buf)
        r.budget = r.end + 1024
        return False
    try:
        PyObject_GetBuffer(buf, view, PyBUF_SIMPLE)
    except BufferError as e:
        raise CodecError(f"input must be a contiguous buffer: {e}") from None
    r.buf = <const unsigned char*>view.buf
    r.end = view.len
    r.budget = r.end + 1024
    return True

cdef object byte_base(object buf):
    # slices are taken in bytes: a memoryview of wider items is cast to bytes first
    if type(buf) is memoryview and ((<memoryview>buf).itemsize != 1
                                    or (<memoryview>buf).ndim != 1):
        try:
            return buf.cast("B")
        except TypeError as e:
            raise CodecError(f"input must be a contiguous buffer: {e}") from None
    return buf

def decode_value(buf) -> object:
    """Decode exactly one AMQP value filling ``buf`` (trailing bytes are an error)."""
    cdef Py_buffer view
    cdef Rd r
    cdef bint rel = acquire(buf, &view, &r)
    try:
        v = dec_value(&r, 0)
        if r.pos != r.end:
            raise CodecError(f"{r.end - r.pos} trailing bytes after the value", r.pos)
        return v
    finally:
        if rel:
            PyBuffer_Release(&view)

def decode_value_at(buf, Py_ssize_t offset=0) -> tuple:
    """Decode one AMQP value starting at ``offset``; returns (value, offset after it)."""
    cdef Py_buffer view
    cdef Rd r
    cdef bint rel = acquire(buf, &view, &r)
    try:
        if offset < 0 or offset > r.end:
            raise CodecError(f"offset {offset} outside the buffer of {r.end} bytes", offset)
        r.pos = offset
        v = dec_value(&r, 0)
        return (v, r.pos)
    finally:
        if rel:
            PyBuffer_Release(&view)

cdef object _decode_message(object buf, int mode):
    """Acquire ``buf`` (bytes, bytearray, memoryview), decode a message in ``mode``, release."""
    cdef Py_buffer view
    cdef Rd r
    cdef bint rel
    if type(buf) is not bytes:
        buf = byte_base(buf)
    rel = acquire(buf, &view, &r)
    try:
        return dec_message(&r, buf, mode)
    finally:
        if rel:
            PyBuffer_Release(&view)

def decode_message(buf) -> Message:
    """Decode a bare message; a data body is a memoryview slice of ``buf`` (no copy)."""
    return _decode_message(buf, 0)

def decode_data(buf) -> memoryview:
    """Stream fast path: the single data section of a message as a memoryview of ``buf``."""
    return _decode_message(buf, 1)

def decode_data_props(buf) -> tuple:
    """Stream fast path: (data section view, application-properties dict or None)."""
    return _decode_message(buf, 2)
