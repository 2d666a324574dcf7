# Part of rbench.codec._amqp10 (included by ext/codec/amqp10.pyx; shares its namespace).
# Encoder, messages: sections in spec order and the public encode_* functions.

# message sections -----------------------------------------------------------

cdef inline int section(WBuf* w, unsigned char code) except -1:
    cdef unsigned char* p = wbuf_claim(w, 3)
    p[0] = 0x00
    p[1] = 0x53
    p[2] = code
    return 0

cdef int enc_bool_field(WBuf* w, object v, str what) except -1:
    if v is None:
        return wbuf_put1(w, 0x40)
    if type(v) is not bool:
        enc_fail(f"{what} needs a bool, got {type(v).__name__}")
    return wbuf_put1(w, 0x41 if v else 0x42)

cdef int enc_header(WBuf* w, object h) except -1:
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
        return wbuf_put1(w, 0x45)
    start = w.pos
    wbuf_claim(w, 3)
    enc_bool_field(w, hd.durable, "header.durable")
    if n > 1:
        if hd.priority is None:
            wbuf_put1(w, 0x40)
        else:
            wbuf_put1(w, 0x50)
            enc_payload(w, 0x50, hd.priority, 0)
    if n > 2:
        if hd.ttl is None:
            wbuf_put1(w, 0x40)
        else:
            enc_uint_auto(w, <uint32_t>uint_in(hd.ttl, 0xffffffff, "header.ttl"))
    if n > 3:
        enc_bool_field(w, hd.first_acquirer, "header.first_acquirer")
    if n > 4:
        enc_uint_auto(w, <uint32_t>uint_in(hd.delivery_count, 0xffffffff,
                                           "header.delivery_count"))
    return finish_compound(w, start, n, 0xc0, 0xd0)

cdef int enc_message_id(WBuf* w, object v) except -1:
    cdef type t = type(v)
    if v is None:
        return wbuf_put1(w, 0x40)
    if t is str:
        return enc_string(w, v, 0xa1, 0xb1)
    if t is int:
        return enc_ulong_auto(w, uint_in(v, 0xffffffffffffffff, "message-id"))
    if t is bytes:
        return enc_binary(w, v)
    if isinstance(v, PyUUID) or t is ULong or isinstance(v, str) or is_bytes_like(v):
        return enc_value(w, v, 0)
    return enc_fail(f"message-id must be str, int, bytes or UUID, got {t.__name__}")

cdef int enc_opt_string(WBuf* w, object v, str what) except -1:
    if v is None:
        return wbuf_put1(w, 0x40)
    if not isinstance(v, str):
        enc_fail(f"{what} needs a str, got {type(v).__name__}")
    return enc_string(w, v, 0xa1, 0xb1)

cdef int enc_opt_symbol(WBuf* w, object v, str what) except -1:
    if v is None:
        return wbuf_put1(w, 0x40)
    if not isinstance(v, str):
        enc_fail(f"{what} needs a str, got {type(v).__name__}")
    return enc_symbol(w, v)

cdef int enc_opt_ts(WBuf* w, object v) except -1:
    cdef unsigned char* p
    if v is None:
        return wbuf_put1(w, 0x40)
    p = wbuf_claim(w, 9)
    p[0] = 0x83
    put_be64(p + 1, <uint64_t>ts_in(v))
    return 0

cdef int enc_properties(WBuf* w, object props) except -1:
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
        return wbuf_put1(w, 0x45)
    start = w.pos
    wbuf_claim(w, 3)
    enc_message_id(w, pr.message_id)
    if n > 1:
        if pr.user_id is None:
            wbuf_put1(w, 0x40)
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
            wbuf_put1(w, 0x40)
        else:
            enc_uint_auto(w, <uint32_t>uint_in(pr.group_sequence, 0xffffffff,
                                               "properties.group_sequence"))
    if n > 12:
        enc_opt_string(w, pr.reply_to_group_id, "properties.reply_to_group_id")
    return finish_compound(w, start, n, 0xc0, 0xd0)

cdef int enc_data_section(WBuf* w, object body) except -1:
    section(w, 0x75)
    if PyBytes_CheckExact(body):
        return enc_chars(w, PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body), 0xa0, 0xb0)
    if not is_bytes_like(body):
        enc_fail(f"data section needs bytes, got {type(body).__name__}")
    return enc_binary(w, body)

cdef int enc_message(WBuf* w, Message m) except -1:
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

def encode_value(value) -> bytes:
    """Encode one Python value as an AMQP 1.0 value (see docs/codec.md for the mapping)."""
    cdef unsigned char stack[STACK_BUF]
    cdef WBuf w
    wbuf_init(&w, stack, STACK_BUF)
    try:
        enc_value(&w, value, 0)
        return wbuf_bytes(&w)
    finally:
        wbuf_release(&w)

def encode_message(Message msg not None) -> bytes:
    """Encode a Message as its bare-message sections (header … footer) in spec order."""
    cdef unsigned char stack[STACK_BUF]
    cdef WBuf w
    wbuf_init(&w, stack, STACK_BUF)
    try:
        enc_message(&w, msg)
        return wbuf_bytes(&w)
    finally:
        wbuf_release(&w)

def encode_data(body, application_properties=None) -> bytes:
    """Stream fast path: [application-properties] + one data section holding ``body``."""
    cdef unsigned char stack[STACK_BUF]
    cdef WBuf w
    wbuf_init(&w, stack, STACK_BUF)
    try:
        if application_properties is not None:
            section(&w, 0x74)
            enc_map(&w, application_properties, 0, 2)
        enc_data_section(&w, body)
        return wbuf_bytes(&w)
    finally:
        wbuf_release(&w)
