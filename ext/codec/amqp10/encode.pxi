# Part of rbench.codec._amqp10 (included by ext/codec/amqp10.pyx; shares its namespace).
# Encoder, values: Python value -> AMQP 1.0 bytes into one WBuf (exact-type dispatch first);
# compounds (list, map, array, described) here, scalars in encode_scalar.pxi.

cdef inline int check_depth(int depth) except -1:
    if depth >= AMQP10_MAX_DEPTH:
        raise CodecError(f"nesting deeper than {AMQP10_MAX_DEPTH} levels")
    return 0

cdef int finish_compound(WBuf* w, Py_ssize_t start, Py_ssize_t count, unsigned char c8,
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
    wbuf_claim(w, 6)
    memmove(w.buf + start + 9, w.buf + start + 3, body)
    p = w.buf + start
    p[0] = c32
    put_be32(p + 1, <uint32_t>(body + 4))
    put_be32(p + 5, <uint32_t>count)
    return 0

cdef int enc_list(WBuf* w, object seq, int depth) except -1:
    cdef Py_ssize_t start = w.pos
    cdef Py_ssize_t count = 0
    check_depth(depth)
    if len(seq) == 0:
        return wbuf_put1(w, 0x45)
    wbuf_claim(w, 3)
    for item in seq:
        enc_value(w, item, depth + 1)
        count += 1
    return finish_compound(w, start, count, 0xc0, 0xd0)

cdef int enc_key(WBuf* w, object k, int keymode, int depth) except -1:
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

cdef int enc_map(WBuf* w, object d, int depth, int keymode) except -1:
    cdef Py_ssize_t start = w.pos
    cdef Py_ssize_t count = 0
    check_depth(depth)
    if not isinstance(d, dict):
        enc_fail(f"expected a dict, got {type(d).__name__}")
    wbuf_claim(w, 3)
    for k, v in (<dict>d).items():
        enc_key(w, k, keymode, depth + 1)
        enc_value(w, v, depth + 1)
        count += 2
    return finish_compound(w, start, count, 0xc1, 0xd1)

cdef int enc_described(WBuf* w, Described d, int depth) except -1:
    check_depth(depth)
    wbuf_put1(w, 0x00)
    desc = d.descriptor
    if type(desc) is int:
        enc_ulong_auto(w, uint_in(desc, 0xffffffffffffffff, "descriptor"))
    elif type(desc) is str:
        enc_symbol(w, desc)
    else:
        enc_value(w, desc, depth + 1)
    return enc_value(w, d.value, depth + 1)

cdef int enc_payload(WBuf* w, int code, object v, int depth) except -1:
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
        wbuf_put1(w, 1 if v else 0)
    elif code == 0x43 or code == 0x44:
        uint_in(v, 0, "uint0/ulong0")
    elif code == 0x45:
        if not isinstance(v, (list, tuple)) or len(v) != 0:
            enc_fail("list0 element must be an empty list")
    elif code == 0x50:
        wbuf_put1(w, <unsigned char>uint_in(v, 0xff, "ubyte"))
    elif code == 0x51:
        wbuf_put1(w, <unsigned char>(<int8_t>int_in(v, -0x80, 0x7f, "byte")))
    elif code == 0x52:
        wbuf_put1(w, <unsigned char>uint_in(v, 0xff, "smalluint"))
    elif code == 0x53:
        wbuf_put1(w, <unsigned char>uint_in(v, 0xff, "smallulong"))
    elif code == 0x54:
        wbuf_put1(w, <unsigned char>(<int8_t>int_in(v, -0x80, 0x7f, "smallint")))
    elif code == 0x55:
        wbuf_put1(w, <unsigned char>(<int8_t>int_in(v, -0x80, 0x7f, "smalllong")))
    elif code == 0x60:
        put_be16(wbuf_claim(w, 2), <uint16_t>uint_in(v, 0xffff, "ushort"))
    elif code == 0x61:
        put_be16(wbuf_claim(w, 2), <uint16_t>(<int16_t>int_in(v, -0x8000, 0x7fff, "short")))
    elif code == 0x70:
        put_be32(wbuf_claim(w, 4), <uint32_t>uint_in(v, 0xffffffff, "uint"))
    elif code == 0x71:
        put_be32(wbuf_claim(w, 4), <uint32_t>(<int32_t>int_in(v, -0x80000000, 0x7fffffff, "int")))
    elif code == 0x72:
        if not isinstance(v, (float, int)) or isinstance(v, bool):
            enc_fail(f"float needs a float, got {type(v).__name__}")
        f = <float>(<double>v)
        memcpy(&ux, &f, 4)
        put_be32(wbuf_claim(w, 4), <uint32_t>ux)
    elif code == 0x73:
        if not isinstance(v, str) or PyUnicode_GET_LENGTH(v) != 1:
            enc_fail("char needs a one-character str")
        put_be32(wbuf_claim(w, 4), <uint32_t>PyUnicode_READ_CHAR(v, 0))
    elif code == 0x74:
        put_be32(wbuf_claim(w, 4), <uint32_t>uint_in(v, 0xffffffff, "decimal32"))
    elif code == 0x80:
        put_be64(wbuf_claim(w, 8), uint_in(v, 0xffffffffffffffff, "ulong"))
    elif code == 0x81:
        put_be64(wbuf_claim(w, 8), <uint64_t>int_in(v, INT64_MIN, 0x7fffffffffffffff,
                                           "long"))
    elif code == 0x82:
        if not isinstance(v, (float, int)) or isinstance(v, bool):
            enc_fail(f"double needs a float, got {type(v).__name__}")
        dbl = <double>v
        memcpy(&ux, &dbl, 8)
        put_be64(wbuf_claim(w, 8), ux)
    elif code == 0x83:
        put_be64(wbuf_claim(w, 8), <uint64_t>ts_in(v))
    elif code == 0x84:
        put_be64(wbuf_claim(w, 8), uint_in(v, 0xffffffffffffffff, "decimal64"))
    elif code == 0x94:
        if not isinstance(v, bytes) or len(v) != 16:
            enc_fail("decimal128 needs 16 bytes")
        memcpy(wbuf_claim(w, 16), PyBytes_AS_STRING(v), 16)
    elif code == 0x98:
        b = as_uuid_bytes(v)
        memcpy(wbuf_claim(w, 16), PyBytes_AS_STRING(b), 16)
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
        wbuf_claim(w, 3)
        for item in v:
            enc_value(w, item, depth + 1)
        finish_fixed(w, start, len(v), code == 0xd0)
    elif code == 0xc1 or code == 0xd1:
        if not isinstance(v, dict):
            enc_fail(f"map needs a dict, got {type(v).__name__}")
        start = w.pos
        wbuf_claim(w, 3)
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
        wbuf_claim(w, 3)
        n = enc_array_items(w, <Array>v, depth + 1)
        finish_fixed(w, start, n, code == 0xf0)
    else:
        enc_fail(f"0x{code:02x} is not an AMQP constructor")
    return 0

cdef int fix_varwidth(WBuf* w, Py_ssize_t start, bint wide, str what) except -1:
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
        wbuf_claim(w, 2)
        p = w.buf + start
        memmove(p + 4, p + 2, n)
        put_be32(p, <uint32_t>n)
    else:
        memmove(p, p + 1, n + 1)
        w.pos -= 1
    return 0

cdef int finish_fixed(WBuf* w, Py_ssize_t start, Py_ssize_t count, bint wide) except -1:
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
    wbuf_claim(w, 5)
    memmove(w.buf + start + 8, w.buf + start + 3, body)
    p = w.buf + start
    put_be32(p, <uint32_t>(body + 4))
    put_be32(p + 4, <uint32_t>count)
    return 0

cdef Py_ssize_t enc_array_items(WBuf* w, Array a, int depth) except -1:
    """Write the element constructor and the elements; returns the element count."""
    cdef Py_ssize_t n = 0
    check_depth(depth)
    if a.descriptor is not None:
        wbuf_put1(w, 0x00)
        enc_value(w, a.descriptor, depth + 1)
    wbuf_put1(w, <unsigned char>a.code)
    for item in a.items:
        enc_payload(w, a.code, item, depth + 1)
        n += 1
    return n

cdef int enc_array(WBuf* w, Array a, int depth) except -1:
    cdef Py_ssize_t start = w.pos
    cdef Py_ssize_t n
    wbuf_claim(w, 3)
    n = enc_array_items(w, a, depth)
    return finish_compound(w, start, n, 0xe0, 0xf0)

cdef int enc_other(WBuf* w, object v, type t, int depth) except -1:
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
        p = wbuf_claim(w, 9)
        p[0] = 0x83
        put_be64(p + 1, <uint64_t>ms_from_datetime(v))
        return 0
    if isinstance(v, PyUUID):
        wbuf_put1(w, 0x98)
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
                p = wbuf_claim(w, 2)
                p[0] = 0x54
                p[1] = <unsigned char>(<int8_t>x)
                return 0
            wbuf_put1(w, 0x71)
            return enc_payload(w, 0x71, v, depth)
        if t is Long:
            x = int_in(v, INT64_MIN, 0x7fffffffffffffff, "long")
            if -128 <= x <= 127:
                p = wbuf_claim(w, 2)
                p[0] = 0x55
                p[1] = <unsigned char>(<int8_t>x)
                return 0
            wbuf_put1(w, 0x81)
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
        wbuf_put1(w, code)
        return enc_payload(w, code, v, depth)
    if isinstance(v, str):
        if t is Char:
            wbuf_put1(w, 0x73)
            return enc_payload(w, 0x73, v, depth)
        if isinstance(v, Symbol):
            return enc_symbol(w, v)
        return enc_string(w, v, 0xa1, 0xb1)
    if isinstance(v, bytes):
        if t is Decimal128:
            wbuf_put1(w, 0x94)
            return enc_payload(w, 0x94, v, depth)
        return enc_binary(w, v)
    if isinstance(v, float):
        if t is Float:
            wbuf_put1(w, 0x72)
        else:
            wbuf_put1(w, 0x82)
        return enc_payload(w, 0x72 if t is Float else 0x82, v, depth)
    if isinstance(v, dict):
        return enc_map(w, v, depth, 0)
    if isinstance(v, (list, tuple)):
        return enc_list(w, v, depth)
    if isinstance(v, (bytearray, memoryview)):
        return enc_binary(w, v)
    return enc_fail(f"cannot encode {t.__name__} as AMQP 1.0")

cdef int enc_value(WBuf* w, object v, int depth) except -1:
    cdef type t = type(v)
    cdef unsigned char* p
    cdef double d
    cdef uint64_t ux
    if t is str:
        return enc_string(w, v, 0xa1, 0xb1)
    if t is int:
        return enc_int(w, v)
    if v is None:
        return wbuf_put1(w, 0x40)
    if t is bool:
        return wbuf_put1(w, 0x41 if v is True else 0x42)
    if t is bytes:
        return enc_chars(w, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v), 0xa0, 0xb0)
    if t is dict:
        return enc_map(w, v, depth, 0)
    if t is list or t is tuple:
        return enc_list(w, v, depth)
    if t is float:
        d = <double>v
        memcpy(&ux, &d, 8)
        p = wbuf_claim(w, 9)
        p[0] = 0x82
        put_be64(p + 1, ux)
        return 0
    return enc_other(w, v, t, depth)
