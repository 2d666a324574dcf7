# Part of rbench.codec._amqp091 (included by ext/codec/amqp091.pyx; shares its namespace).
# Field values: the writer and the cursor, field tables and arrays (encode_table, decode_table).

# --------------------------------------------------------------------------------------
# writer: a growable C buffer (ext/include/wbuf.pxd) for the cold paths (methods, tables,
# properties); the first 256 bytes live in the object, so a small method never mallocs
# --------------------------------------------------------------------------------------
cdef class _Writer:
    cdef WBuf b
    cdef unsigned char first[256]

    def __cinit__(self):
        wbuf_init(&self.b, self.first, 256)

    def __dealloc__(self):
        wbuf_release(&self.b)

    cdef inline void u8(self, uint8_t v) except *:
        wbuf_put1(&self.b, v)

    cdef inline void u16(self, uint16_t v) except *:
        put_be16(wbuf_claim(&self.b, 2), v)

    cdef inline void u32(self, uint32_t v) except *:
        put_be32(wbuf_claim(&self.b, 4), v)

    cdef inline void u64(self, uint64_t v) except *:
        put_be64(wbuf_claim(&self.b, 8), v)

    cdef inline void raw(self, const char* data, Py_ssize_t size) except *:
        wbuf_write(&self.b, data, size)

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
        return wbuf_bytes(&self.b)


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
    cdef Py_ssize_t at = w.b.pos
    w.u32(0)
    for key, value in (<dict>table).items():
        w.shortstr(key)
        _write_value(w, value)
    put_be32(w.b.buf + at, <uint32_t>(w.b.pos - at - 4))


cdef void _write_array(_Writer w, object items) except *:
    cdef Py_ssize_t at = w.b.pos
    w.u32(0)
    for value in items:
        _write_value(w, value)
    put_be32(w.b.buf + at, <uint32_t>(w.b.pos - at - 4))


def encode_table(table: dict) -> bytes:
    """A field table with its 4-byte length prefix."""
    cdef _Writer w = _Writer()
    _write_table(w, table if table is not None else {})
    return w.getvalue()


# --------------------------------------------------------------------------------------
# reader: a bounds-checked cursor (ext/include/rcursor.pxd) over a byte range
# --------------------------------------------------------------------------------------
cdef class _Cursor:
    cdef RCursor r
    cdef object owner   # keeps the memory alive

    cdef inline const unsigned char* take(self, Py_ssize_t n, str what) except NULL:
        return rc_take(&self.r, n, what)

    cdef inline uint8_t u8(self, str what) except? 0xFF:
        return rc_take(&self.r, 1, what)[0]

    cdef inline uint16_t u16(self, str what) except? 0xFFFF:
        return get_be16(rc_take(&self.r, 2, what))

    cdef inline uint32_t u32(self, str what) except? 0xFFFFFFFF:
        return get_be32(rc_take(&self.r, 4, what))

    cdef inline uint64_t u64(self, str what) except? 0xFFFFFFFFFFFFFFFF:
        return get_be64(rc_take(&self.r, 8, what))

    cdef str shortstr(self, str what):
        cdef Py_ssize_t n = self.u8(what)
        cdef const unsigned char* s = self.take(n, what)
        try:
            return (<const char*>s)[:n].decode("utf-8")
        except UnicodeDecodeError:
            raise CodecError(f"{what}: short string is not UTF-8", self.r.base + self.r.pos - n) from None

    cdef bytes rawlong(self, str what):
        cdef Py_ssize_t n = self.u32(what)
        cdef const unsigned char* s = self.take(n, what)
        return PyBytes_FromStringAndSize(<const char*>s, n)


cdef _Cursor _cursor(const unsigned char* p, Py_ssize_t n, object owner, Py_ssize_t base=0):
    cdef _Cursor c = _Cursor.__new__(_Cursor)
    rc_init(&c.r, p, n, base)
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
            raise CodecError(f"timestamp {u64v} out of range", c.r.base + c.r.pos - 8) from None
    if k == b"F":
        return _read_table(c, depth + 1)
    if k == b"V":
        return None
    raise CodecError(f"unknown field type {bytes([k])!r}", c.r.base + c.r.pos - 1)


cdef dict _read_table(_Cursor c, int depth):
    if depth > 64:
        raise CodecError("field tables nested deeper than 64", c.r.base + c.r.pos)
    cdef Py_ssize_t n = c.u32("field table length")
    cdef Py_ssize_t start = c.r.pos
    c.take(n, "field table")
    cdef _Cursor sub = _cursor(c.r.buf + start, n, c.owner, c.r.base + start)
    cdef dict out = {}
    while sub.r.pos < sub.r.end:
        key = sub.shortstr("field name")
        out[key] = _read_value(sub, depth)
    return out


cdef list _read_array(_Cursor c, int depth):
    if depth > 64:
        raise CodecError("field arrays nested deeper than 64", c.r.base + c.r.pos)
    cdef Py_ssize_t n = c.u32("field array length")
    cdef Py_ssize_t start = c.r.pos
    c.take(n, "field array")
    cdef _Cursor sub = _cursor(c.r.buf + start, n, c.owner, c.r.base + start)
    cdef list out = []
    while sub.r.pos < sub.r.end:
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
    return t, offset + c.r.pos
