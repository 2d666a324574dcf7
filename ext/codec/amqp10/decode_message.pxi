# Part of rbench.codec._amqp10 (included by ext/codec/amqp10.pyx; shares its namespace).
# Decoder, messages: section walk, header/properties, zero-copy data, public decode_*.

# message decoding --------------------------------------------------------------

cdef int section_code(RCursor* r) except -1:
    """Read a section descriptor; return its ulong code (0x70..0x78)."""
    cdef Py_ssize_t off = r.pos
    cdef const unsigned char* p = rc_take(r, 2, "section descriptor")
    cdef uint64_t code
    if p[0] != 0x00:
        dec_fail(r, off, f"expected a described section (0x00), got 0x{p[0]:02x}")
    if p[1] == 0x53:
        return rc_take(r, 1, "section descriptor code")[0]
    if p[1] == 0x80:
        code = get_be64(rc_take(r, 8, "section descriptor code"))
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

cdef int list_header(RCursor* r, Py_ssize_t* body, Py_ssize_t* count, str what) except -1:
    cdef Py_ssize_t off = r.pos
    cdef int code = rc_take(r, 1, what)[0]
    cdef const unsigned char* p
    if code == 0x45:
        body[0] = 0
        count[0] = 0
    elif code == 0xc0:
        p = rc_take(r, 2, "list8 size/count")
        if p[0] < 1:
            dec_fail(r, off, "list8 size 0 cannot hold its count")
        body[0] = p[0] - 1
        count[0] = p[1]
    elif code == 0xd0:
        p = rc_take(r, 8, "list32 size/count")
        if get_be32(p) < 4:
            dec_fail(r, off, "list32 size cannot hold its count")
        body[0] = get_be32(p) - 4
        count[0] = get_be32(p + 4)
    else:
        dec_fail(r, off, f"expected a list for {what}, got constructor 0x{code:02x}")
    if body[0] > r.end - r.pos:
        rc_truncated(r, body[0], what)
    if count[0] > body[0]:
        dec_fail(r, off, f"{what} claims {count[0]} fields in {body[0]} bytes")
    return 0

cdef object dec_header(RCursor* r):
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

cdef object dec_properties(RCursor* r):
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

cdef object dec_map_section(RCursor* r, str what):
    cdef Py_ssize_t off = r.pos
    v = dec_value(r, 0)
    if type(v) is not dict:
        if v is None:
            return None
        dec_fail(r, off, f"{what} must be a map, got {type(v).__name__}")
    return v

cdef object data_view(RCursor* r, object base, Py_ssize_t* voff, Py_ssize_t* vlen):
    """Read a data section's binary; store its offset/length (the view is made by caller)."""
    cdef Py_ssize_t off = r.pos
    cdef int code = rc_take(r, 1, "data section binary")[0]
    cdef Py_ssize_t n = 0
    if code == 0xa0:
        n = rc_take(r, 1, "vbin8 length")[0]
    elif code == 0xb0:
        n = get_be32(rc_take(r, 4, "vbin32 length"))
    else:
        dec_fail(r, off, f"data section must hold binary, got constructor 0x{code:02x}")
    voff[0] = r.pos
    rc_take(r, n, "data section")
    vlen[0] = n
    return None


cdef object dec_message(RCursor* r, object base, int mode):
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
                amqp10_skip_value(r, 0)
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

cdef inline bint acquire(object buf, Py_buffer* view, RCursor* r) except -1:
    """Point ``r`` at the bytes of ``buf``; returns True when ``view`` must be released."""
    if PyBytes_CheckExact(buf):
        rc_init(r, <const unsigned char*>PyBytes_AS_STRING(buf), PyBytes_GET_SIZE(buf), 0)
        return False
    try:
        PyObject_GetBuffer(buf, view, PyBUF_SIMPLE)
    except BufferError as e:
        raise CodecError(f"input must be a contiguous buffer: {e}") from None
    rc_init(r, <const unsigned char*>view.buf, view.len, 0)
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
    cdef RCursor r
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
    cdef RCursor r
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
    cdef RCursor r
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
