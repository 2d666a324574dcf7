# Part of rbench.codec._amqp091 (included by ext/codec/amqp091.pyx; shares its namespace).
# The hot paths: PublishEncoder (frame writer) and FrameReader (frame reader), split_frames.

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
        put_be32(p + 3, <uint32_t>(12 + plen))
        p[7] = 0
        p[8] = 60
        p[9] = 0
        p[10] = 0
        put_be64(p + 11, <uint64_t>size)
        memcpy(p + 19, PyBytes_AS_STRING(self.props), plen)
        p[19 + plen] = _FRAME_END
        p += 20 + plen
        if size == 0:
            return PyByteArray_GET_SIZE(out)
        if size <= self.frame_max - 8:
            p[0] = 3
            p[1] = self.channel >> 8
            p[2] = self.channel & 0xFF
            put_be32(p + 3, <uint32_t>size)
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
        cdef int64_t t_ns = realtime_ns()
        if nbytes < 0 or self.end + nbytes > PyByteArray_GET_SIZE(self.buf):
            raise CodecError("feed() beyond the buffer")
        self.end += nbytes
        while True:
            avail = self.end - self.start
            if avail < 7:
                break
            p = <const unsigned char*>PyByteArray_AS_STRING(self.buf) + self.start
            ftype = p[0]
            channel = get_be16(p + 1)
            size = get_be32(p + 3)
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
        key = get_be32(p)
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
                content.tag = get_be64(p + n)
                content.redelivered = p[n + 8] & 1
                content.args = None
            else:
                content.args = _decode_method(p, size, self.buf, self.start - size - 1)[1]
            self.pending[channel] = content
            return
        if key == KEY_ACK or key == KEY_NACK:
            handler = self.ack_handlers.get(channel)
            if handler is not None and size >= 13:
                handler(get_be64(p + 4), p[12] & 1 == 1, key == KEY_ACK)
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
        content.body_size = get_be64(p + 4)
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
        size = get_be32(p + pos + 3)
        if n - pos < size + 8:
            raise CodecError("truncated frame", pos)
        if p[pos + 7 + size] != _FRAME_END:
            raise CodecError("bad frame end", pos + 7 + size)
        out.append((p[pos], get_be16(p + pos + 1), PyBytes_FromStringAndSize(<const char*>p + pos + 7, size)))
        pos += size + 8
    return out
