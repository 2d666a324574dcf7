# Part of rbench.codec._amqp10 (included by ext/codec/amqp10.pyx; shares its namespace).
# Encoder, scalars: strings, symbols, binaries, integers (range-checked, smallest width), timestamps,
# uuids; encode.pxi builds compounds and dispatches on them.

cdef int enc_fail(str msg) except -1:
    raise CodecError(msg)

cdef int enc_chars(WBuf* w, const char* data, Py_ssize_t n, unsigned char c8,
                   unsigned char c32) except -1:
    cdef unsigned char* p
    if n <= 0xff:
        p = wbuf_claim(w, 2 + n)
        p[0] = c8
        p[1] = <unsigned char>n
        memcpy(p + 2, data, n)
    elif n <= 0xffffffff:
        p = wbuf_claim(w, 5 + n)
        p[0] = c32
        put_be32(p + 1, <uint32_t>n)
        memcpy(p + 5, data, n)
    else:
        enc_fail(f"value of {n} bytes exceeds the AMQP 32-bit length")
    return 0

cdef int enc_string(WBuf* w, object s, unsigned char c8, unsigned char c32) except -1:
    cdef Py_ssize_t n
    cdef const char* data
    try:
        data = PyUnicode_AsUTF8AndSize(s, &n)
    except UnicodeEncodeError as e:
        raise CodecError(f"string is not encodable as UTF-8: {e}") from None
    return enc_chars(w, data, n, c8, c32)

cdef int enc_symbol(WBuf* w, object s) except -1:
    if not PyUnicode_IS_ASCII(s):
        enc_fail(f"symbol must be ASCII: {s!r}")
    return enc_string(w, s, 0xa3, 0xb3)

cdef int enc_binary(WBuf* w, object v) except -1:
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

cdef int enc_int(WBuf* w, object v) except -1:
    cdef int overflow = 0
    cdef long long x = PyLong_AsLongLongAndOverflow(v, &overflow)
    cdef unsigned char* p
    if overflow == 0:
        if -128 <= x <= 127:
            p = wbuf_claim(w, 2)
            p[0] = 0x55
            p[1] = <unsigned char>(<int8_t>x)
        else:
            p = wbuf_claim(w, 9)
            p[0] = 0x81
            put_be64(p + 1, <uint64_t>x)
        return 0
    if overflow > 0 and v <= 0xffffffffffffffff:
        p = wbuf_claim(w, 9)
        p[0] = 0x80
        put_be64(p + 1, PyLong_AsUnsignedLongLong(v))
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

cdef int enc_ulong_auto(WBuf* w, uint64_t x) except -1:
    cdef unsigned char* p
    if x == 0:
        return wbuf_put1(w, 0x44)
    if x <= 0xff:
        p = wbuf_claim(w, 2)
        p[0] = 0x53
        p[1] = <unsigned char>x
        return 0
    p = wbuf_claim(w, 9)
    p[0] = 0x80
    put_be64(p + 1, x)
    return 0

cdef int enc_uint_auto(WBuf* w, uint32_t x) except -1:
    cdef unsigned char* p
    if x == 0:
        return wbuf_put1(w, 0x43)
    if x <= 0xff:
        p = wbuf_claim(w, 2)
        p[0] = 0x52
        p[1] = <unsigned char>x
        return 0
    p = wbuf_claim(w, 5)
    p[0] = 0x70
    put_be32(p + 1, x)
    return 0
