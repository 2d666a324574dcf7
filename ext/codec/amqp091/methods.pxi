# Part of rbench.codec._amqp091 (included by ext/codec/amqp091.pyx; shares its namespace).
# Methods, content headers (basic properties), body frames, heartbeat and ack: exact, not tuned.

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
                bitpos = w.b.pos
                w.u8(0)
                nbit = 0
            if v:
                w.b.buf[bitpos] |= (1 << nbit)
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
    if c.r.pos != c.r.end:
        raise CodecError(f"{spec[0]}: {c.r.end - c.r.pos} trailing bytes", base + c.r.pos)
    return key, args


cdef void _frame_head(_Writer w, uint8_t ftype, uint16_t channel) except *:
    w.u8(ftype)
    w.u16(channel)
    w.u32(0)    # patched by _frame_end


cdef void _frame_end(_Writer w, Py_ssize_t start) except *:
    put_be32(w.b.buf + start + 3, <uint32_t>(w.b.pos - start - 7))
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
    cdef Py_ssize_t at = w.b.pos
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
    w.b.buf[at] = flags >> 8
    w.b.buf[at + 1] = flags & 0xFF


cdef dict _read_properties(_Cursor c):
    cdef uint16_t flags = c.u16("property flags")
    if flags & 1:
        raise CodecError("property flags continuation is not used by basic properties", c.r.base + c.r.pos - 2)
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
                raise CodecError(f"timestamp {u} out of range", c.r.base + c.r.pos - 8) from None
    if c.r.pos != c.r.end:
        raise CodecError(f"content header: {c.r.end - c.r.pos} trailing bytes", c.r.base + c.r.pos)
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
        put_be32(p + 3, <uint32_t>n)
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
    put_be32(buf + 3, 13)
    put_be32(buf + 7, KEY_ACK)
    put_be64(buf + 11, delivery_tag)
    buf[19] = 1 if multiple else 0
    buf[20] = _FRAME_END
    return PyBytes_FromStringAndSize(<char*>buf, 21)
