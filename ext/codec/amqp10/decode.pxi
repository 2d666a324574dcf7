# Part of rbench.codec._amqp10 (included by ext/codec/amqp10.pyx; shares its namespace).
# Decoder, values: bounds-checked reads through an RCursor, the key/symbol cache (skip_value is
# amqp10_skip_value in ext/include/amqp10_values.pxd, shared with the link).

# ---------------------------------------------------------------------------
# decoder
# ---------------------------------------------------------------------------
cdef int dec_fail(RCursor* r, Py_ssize_t offset, str msg) except -1:
    raise CodecError(msg, offset)

cdef object dec_utf8(RCursor* r, Py_ssize_t n):
    cdef Py_ssize_t off = r.pos
    cdef const unsigned char* p = rc_take(r, n, "string")
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

cdef object dec_key_string(RCursor* r, Py_ssize_t n):
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

cdef object dec_symbol(RCursor* r, Py_ssize_t n):
    cdef Py_ssize_t off = r.pos
    cdef const unsigned char* p = rc_take(r, n, "symbol")
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
    _setattr(u, "int", (PyLong_FromUnsignedLongLong(get_be64(p)) << 64)
             | PyLong_FromUnsignedLongLong(get_be64(p + 8)))
    _setattr(u, "is_safe", SAFE_UNKNOWN)
    return u

cdef object dec_list_items(RCursor* r, Py_ssize_t body, Py_ssize_t count, int depth, Py_ssize_t off):
    cdef Py_ssize_t i, saved
    cdef list lst
    if depth >= AMQP10_MAX_DEPTH:
        dec_fail(r, off, f"nesting deeper than {AMQP10_MAX_DEPTH} levels")
    if body > r.end - r.pos:
        rc_truncated(r, body, "list")
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

cdef object dec_map_items(RCursor* r, Py_ssize_t body, Py_ssize_t count, int depth, Py_ssize_t off):
    cdef Py_ssize_t i, saved, koff
    cdef dict d
    if depth >= AMQP10_MAX_DEPTH:
        dec_fail(r, off, f"nesting deeper than {AMQP10_MAX_DEPTH} levels")
    if body > r.end - r.pos:
        rc_truncated(r, body, "map")
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

cdef object dec_array_items(RCursor* r, Py_ssize_t body, Py_ssize_t count, int depth,
                            Py_ssize_t off):
    cdef Py_ssize_t i, saved, coff
    cdef int code, width
    cdef list lst
    cdef Array a
    descriptor = None
    if depth >= AMQP10_MAX_DEPTH:
        dec_fail(r, off, f"nesting deeper than {AMQP10_MAX_DEPTH} levels")
    if body > r.end - r.pos:
        rc_truncated(r, body, "array")
    saved = r.end
    r.end = r.pos + body
    coff = r.pos
    code = rc_take(r, 1, "array element constructor")[0]
    if code == 0x00:
        descriptor = dec_value(r, depth + 1)
        coff = r.pos
        code = rc_take(r, 1, "array element constructor")[0]
    width = amqp10_code_width(code)
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

cdef inline object dec_value(RCursor* r, int depth):
    cdef Py_ssize_t off = r.pos
    cdef int code = rc_take(r, 1, "constructor")[0]
    return dec_payload(r, code, depth, off)

cdef object dec_payload(RCursor* r, int code, int depth, Py_ssize_t off):
    """Decode the payload of constructor ``code`` (already consumed; ``off`` is where it was)."""
    cdef const unsigned char* p
    cdef Py_ssize_t n, m
    cdef uint32_t u32
    cdef uint64_t u64
    cdef float f
    cdef double d
    cdef Described ds
    if code == 0xa1:
        n = rc_take(r, 1, "str8 length")[0]
        return dec_utf8(r, n)
    elif code == 0x55:
        return PyLong_FromLongLong(<int8_t>rc_take(r, 1, "smalllong")[0])
    elif code == 0x81:
        return PyLong_FromLongLong(<int64_t>get_be64(rc_take(r, 8, "long")))
    elif code == 0xc0:
        p = rc_take(r, 2, "list8 size/count")
        if p[0] < 1:
            dec_fail(r, off, "list8 size 0 cannot hold its count")
        return dec_list_items(r, p[0] - 1, p[1], depth, off)
    elif code == 0xc1:
        p = rc_take(r, 2, "map8 size/count")
        if p[0] < 1:
            dec_fail(r, off, "map8 size 0 cannot hold its count")
        return dec_map_items(r, p[0] - 1, p[1], depth, off)
    elif code == 0xa0:
        n = rc_take(r, 1, "vbin8 length")[0]
        p = rc_take(r, n, "binary")
        return PyBytes_FromStringAndSize(<const char*>p, n)
    elif code == 0x40:
        return None
    elif code == 0x41:
        return True
    elif code == 0x42:
        return False
    elif code == 0x56:
        p = rc_take(r, 1, "boolean")
        if p[0] > 1:
            dec_fail(r, off + 1, f"boolean byte must be 0 or 1, got {p[0]}")
        return p[0] == 1
    elif code == 0x43 or code == 0x44:
        return 0
    elif code == 0x45:
        return []
    elif code == 0x50 or code == 0x52 or code == 0x53:
        return PyLong_FromLongLong(rc_take(r, 1, "ubyte")[0])
    elif code == 0x51 or code == 0x54:
        return PyLong_FromLongLong(<int8_t>rc_take(r, 1, "byte")[0])
    elif code == 0x60:
        return PyLong_FromLongLong(get_be16(rc_take(r, 2, "ushort")))
    elif code == 0x61:
        return PyLong_FromLongLong(<int16_t>get_be16(rc_take(r, 2, "short")))
    elif code == 0x70:
        return PyLong_FromLongLong(get_be32(rc_take(r, 4, "uint")))
    elif code == 0x71:
        return PyLong_FromLongLong(<int32_t>get_be32(rc_take(r, 4, "int")))
    elif code == 0x72:
        u32 = get_be32(rc_take(r, 4, "float"))
        memcpy(&f, &u32, 4)
        return PyFloat_FromDouble(f)
    elif code == 0x73:
        u32 = get_be32(rc_take(r, 4, "char"))
        if u32 > 0x10ffff or 0xd800 <= u32 <= 0xdfff:
            dec_fail(r, off + 1, f"char 0x{u32:x} is not a Unicode scalar value")
        return Char(chr(u32))
    elif code == 0x74:
        return Decimal32(get_be32(rc_take(r, 4, "decimal32")))
    elif code == 0x80:
        return PyLong_FromUnsignedLongLong(get_be64(rc_take(r, 8, "ulong")))
    elif code == 0x82:
        u64 = get_be64(rc_take(r, 8, "double"))
        memcpy(&d, &u64, 8)
        return PyFloat_FromDouble(d)
    elif code == 0x83:
        return datetime_from_ms(<int64_t>get_be64(rc_take(r, 8, "timestamp")), off)
    elif code == 0x84:
        return Decimal64(PyLong_FromUnsignedLongLong(get_be64(rc_take(r, 8, "decimal64"))))
    elif code == 0x94:
        p = rc_take(r, 16, "decimal128")
        return Decimal128(PyBytes_FromStringAndSize(<const char*>p, 16))
    elif code == 0x98:
        return dec_uuid(rc_take(r, 16, "uuid"))
    elif code == 0xb0:
        n = get_be32(rc_take(r, 4, "vbin32 length"))
        p = rc_take(r, n, "binary")
        return PyBytes_FromStringAndSize(<const char*>p, n)
    elif code == 0xb1:
        n = get_be32(rc_take(r, 4, "str32 length"))
        return dec_utf8(r, n)
    elif code == 0xa3:
        n = rc_take(r, 1, "sym8 length")[0]
        return dec_symbol(r, n)
    elif code == 0xb3:
        n = get_be32(rc_take(r, 4, "sym32 length"))
        return dec_symbol(r, n)
    elif code == 0xd0:
        p = rc_take(r, 8, "list32 size/count")
        n = get_be32(p)
        if n < 4:
            dec_fail(r, off, f"list32 size {n} cannot hold its count")
        return dec_list_items(r, n - 4, get_be32(p + 4), depth, off)
    elif code == 0xd1:
        p = rc_take(r, 8, "map32 size/count")
        n = get_be32(p)
        if n < 4:
            dec_fail(r, off, f"map32 size {n} cannot hold its count")
        return dec_map_items(r, n - 4, get_be32(p + 4), depth, off)
    elif code == 0xe0:
        p = rc_take(r, 2, "array8 size/count")
        if p[0] < 1:
            dec_fail(r, off, "array8 size 0 cannot hold its count")
        return dec_array_items(r, p[0] - 1, p[1], depth, off)
    elif code == 0xf0:
        p = rc_take(r, 8, "array32 size/count")
        n = get_be32(p)
        if n < 4:
            dec_fail(r, off, f"array32 size {n} cannot hold its count")
        return dec_array_items(r, n - 4, get_be32(p + 4), depth, off)
    elif code == 0x00:
        if depth >= AMQP10_MAX_DEPTH:
            dec_fail(r, off, f"nesting deeper than {AMQP10_MAX_DEPTH} levels")
        descriptor = dec_value(r, depth + 1)
        value = dec_value(r, depth + 1)
        ds = Described.__new__(Described)
        ds.descriptor = descriptor
        ds.value = value
        return ds
    dec_fail(r, off, f"invalid constructor 0x{code:02x}")
