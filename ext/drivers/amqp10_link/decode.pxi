# Part of rbench.drivers._amqp10_link (included by ext/drivers/amqp10_link.pyx; shares its namespace).
# Reading the few fields the link needs from a frame: integers, booleans, descriptors, list heads,
# and a delivery's header (redelivered?) and data section (the body).

cdef int fail(str what) except -1:
    raise CodecError(f"AMQP 1.0 frame: {what}")


cdef Py_ssize_t skip_value(const uint8_t* p, Py_ssize_t i, Py_ssize_t end) except -1:
    """Index just past the value starting at p[i] (any type, described or not): the shared
    amqp10_skip_value (the codec's too) over p[0:end]."""
    cdef RCursor r
    rc_init(&r, p, end, 0)
    r.pos = i
    amqp10_skip_value(&r, 0)
    return r.pos


cdef int64_t read_uint(const uint8_t* p, Py_ssize_t* i, Py_ssize_t end) except -2:
    """An unsigned integer field (uint / ulong / ushort / ubyte); -1 for null or absent."""
    cdef uint8_t code
    cdef Py_ssize_t k = i[0]
    if k >= end:
        return -1
    code = p[k]
    if code == 0x40 or code == 0x43 or code == 0x44:
        i[0] = k + 1
        return -1 if code == 0x40 else 0
    if code == 0x52 or code == 0x53 or code == 0x50:
        if k + 2 > end:
            fail("truncated uint")
        i[0] = k + 2
        return p[k + 1]
    if code == 0x60:
        if k + 3 > end:
            fail("truncated ushort")
        i[0] = k + 3
        return get_be16(p + k + 1)
    if code == 0x70:
        if k + 5 > end:
            fail("truncated uint")
        i[0] = k + 5
        return get_be32(p + k + 1)
    if code == 0x80:
        if k + 9 > end:
            fail("truncated ulong")
        i[0] = k + 9
        return <int64_t>get_be64(p + k + 1)
    i[0] = skip_value(p, k, end)
    return -1


cdef int read_bool(const uint8_t* p, Py_ssize_t* i, Py_ssize_t end) except -2:
    """1, 0, or -1 for null / absent."""
    cdef Py_ssize_t k = i[0]
    if k >= end:
        return -1
    if p[k] == 0x41:
        i[0] = k + 1
        return 1
    if p[k] == 0x42:
        i[0] = k + 1
        return 0
    if p[k] == 0x56:
        if k + 2 > end:
            fail("truncated boolean")
        i[0] = k + 2
        return p[k + 1] != 0
    i[0] = skip_value(p, k, end)
    return -1


cdef int64_t read_descriptor(const uint8_t* p, Py_ssize_t* i, Py_ssize_t end) except -2:
    """The numeric descriptor after 0x00 at p[i]; -1 when the value is not described by a number."""
    cdef Py_ssize_t k = i[0]
    if k >= end or p[k] != 0x00:
        return -1
    i[0] = k + 1
    return read_uint(p, i, end)


cdef int list_head(const uint8_t* p, Py_ssize_t* i, Py_ssize_t end, Py_ssize_t* list_end,
                   Py_ssize_t* count) except -1:
    """Enter a list: i moves to its first item; list_end and count are set."""
    cdef Py_ssize_t k = i[0]
    cdef uint8_t code
    if k >= end:
        fail("truncated list")
    code = p[k]
    if code == 0x45:
        i[0] = k + 1
        list_end[0] = k + 1
        count[0] = 0
    elif code == 0xc0:
        if k + 3 > end:
            fail("truncated list")
        list_end[0] = k + 2 + p[k + 1]
        count[0] = p[k + 2]
        i[0] = k + 3
    elif code == 0xd0:
        if k + 9 > end:
            fail("truncated list")
        list_end[0] = k + 5 + <Py_ssize_t>get_be32(p + k + 1)
        count[0] = get_be32(p + k + 5)
        i[0] = k + 9
    else:
        fail(f"expected a list, got type code 0x{code:02x}")
    if list_end[0] > end:
        fail("list longer than its frame")
    return 0


cdef int header_redelivered(const uint8_t* p, Py_ssize_t n) except -1:
    """1 when the message's header section says it was delivered before: first-acquirer false, or a
    delivery-count above 0 (RabbitMQ 3.x sends first-acquirer true on a first delivery and false on a
    redelivery). 0 without a header, or when neither field is there: the spec's defaults say nothing."""
    cdef Py_ssize_t i = 0, list_end, count
    cdef int first_acquirer = -1
    cdef int64_t delivery_count = -1
    if n < 3 or p[0] != 0x00 or read_descriptor(p, &i, n) != 0x70:
        return 0
    list_head(p, &i, n, &list_end, &count)
    if count > 0:
        i = skip_value(p, i, list_end)                   # durable
    if count > 1:
        i = skip_value(p, i, list_end)                   # priority
    if count > 2:
        i = skip_value(p, i, list_end)                   # ttl
    if count > 3:
        first_acquirer = read_bool(p, &i, list_end)
    if count > 4:
        delivery_count = read_uint(p, &i, list_end)
    return 1 if first_acquirer == 0 or delivery_count > 0 else 0


cdef object data_body(const uint8_t* p, Py_ssize_t n):
    """The body of a message: its data section(s) (or a binary amqp-value), as bytes."""
    cdef Py_ssize_t start = 0, size = 0
    if data_span(p, n, &start, &size):
        return PyBytes_FromStringAndSize(<const char*>p + start, size)
    return b""


cdef int data_span(const uint8_t* p, Py_ssize_t n, Py_ssize_t* at, Py_ssize_t* length) except -1:
    """Where the body (first data section, or a binary amqp-value) is in p[0:n]: 1 with at / length set,
    0 when the message has none."""
    cdef Py_ssize_t i = 0, start = 0, size = 0
    cdef int64_t section
    cdef uint8_t code
    while i < n:
        section = read_descriptor(p, &i, n)
        if section == 0x75 or section == 0x77:
            if i >= n:
                fail("truncated data section")
            code = p[i]
            if code == 0xa0:
                if i + 2 > n:
                    fail("truncated data section")
                size = p[i + 1]
                start = i + 2
            elif code == 0xb0:
                if i + 5 > n:
                    fail("truncated data section")
                size = get_be32(p + i + 1)
                start = i + 5
            elif section == 0x77:
                i = skip_value(p, i, n)
                continue
            else:
                fail(f"data section: expected binary, got type code 0x{code:02x}")
            if start + size > n:
                fail("data section longer than its message")
            at[0] = start
            length[0] = size
            return 1
        if section < 0:
            fail("expected a message section")
        i = skip_value(p, i, n)
    return 0
