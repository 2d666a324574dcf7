# cython: language_level=3
"""Stream publisher core: the per-message part of rbench/drivers/stream.py, in C.

Why Cython: in the batch-of-100 case the client's own work per message (append the
message to the Publish frame, then match its confirm) sat on the critical path of
every round trip, at about a microsecond per message in Python; the broker waits
while the client builds the next batch. Here appending a message is one bounds
check and two memcpys into a buffer of frame_max bytes, and a confirm frame is
walked in C.

Wire format (RabbitMQ stream protocol, big-endian)::

    Publish      size u32 | key 2 u16 | version 1 u16 | publisher id u8 | count u32
                 then per message: publishing id u64 | length u32 | bytes
    Publish v2   (stream filtering, RabbitMQ 3.13+) version 2, and per message:
                 publishing id u64 | filter value (i16 length, -1 for none, UTF-8) | length u32 | bytes
    PublishConfirm  ... publisher id u8 | count u32 | publishing id u64 * count

With ``amqp`` the bytes are an AMQP 1.0 message of one ``data`` section (descriptor
0x75, vbin8 or vbin32), byte-identical to ``rbench.codec.amqp10.encode_data(body)``.
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_CheckExact, PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int64_t

# shared primitives (ext/include/): inline, compiled into this module
from byteorder cimport put_be32, put_be64, get_be64

cdef enum:
    HEADER = 13          # size, key, version, publisher id, count
    MESSAGE_HEADER = 12  # publishing id, length

PUBLISH_HEADER_SIZE = HEADER




cdef class PublishFrame:
    """One Publish frame being built, in a buffer of ``frame_max`` bytes.

    ``add(payload, seq)`` appends a message whose publishing id is ``seq``; when it
    is the first of the frame, ``on_first()`` is called (the driver schedules a
    flush for the end of this loop turn, so messages published in one turn share a
    frame). When a message does not fit, ``on_full(encoded size)`` is called: it
    must empty the frame with ``take()`` (or raise, for a message that would never
    fit). ``take()`` hands out the finished frame as bytes and starts a new one.
    """

    cdef char* buf
    cdef Py_ssize_t length
    cdef Py_ssize_t capacity
    cdef uint32_t _count
    cdef uint8_t publisher_id
    cdef bint amqp
    cdef object on_first
    cdef object on_full
    cdef tuple filter_table      # slot → filter value (bytes) or None; None: Publish v1, no filter values
    cdef uint64_t n_slots
    cdef uint64_t seq_step
    cdef uint64_t filter_key

    def __cinit__(self, int publisher_id, Py_ssize_t frame_max, bint amqp, on_first, on_full,
                  tuple filter_table=None, uint64_t seq_step=0, uint64_t filter_key=0):
        if frame_max < HEADER + MESSAGE_HEADER + 8:
            raise ValueError(f"frame_max {frame_max} is too small for a Publish frame")
        if not 0 <= publisher_id <= 255:
            raise ValueError(f"publisher id {publisher_id} is not a byte")
        self.buf = <char*>malloc(frame_max)
        if self.buf == NULL:
            raise MemoryError()
        self.capacity = frame_max
        self.length = HEADER
        self._count = 0
        self.publisher_id = <uint8_t>publisher_id
        self.amqp = amqp
        self.on_first = on_first
        self.on_full = on_full
        self.filter_table = filter_table
        self.n_slots = len(filter_table) if filter_table is not None else 0
        if filter_table is not None and self.n_slots == 0:
            raise ValueError("filter_table: expected at least one slot")
        for v in filter_table or ():
            if v is not None and (not PyBytes_CheckExact(v) or PyBytes_GET_SIZE(v) > 32767):
                raise ValueError("filter_table: expected bytes of at most 32767 bytes or None per slot")
        self.seq_step = seq_step
        self.filter_key = filter_key

    def __dealloc__(self):
        free(self.buf)

    @property
    def count(self) -> int:
        """Messages in the frame being built."""
        return self._count

    cpdef add(self, payload, uint64_t seq):
        cdef Py_buffer view
        cdef const char* data
        cdef Py_ssize_t n, need
        cdef bint release = False
        cdef char* p
        cdef object fv = None
        cdef Py_ssize_t fn = 0
        cdef Py_ssize_t extra = 0
        if self.filter_table is not None:
            fv = self.filter_table[(seq * self.seq_step + self.filter_key) % self.n_slots]
            fn = PyBytes_GET_SIZE(fv) if fv is not None else 0
            extra = 2 + fn
        if PyBytes_CheckExact(payload):
            data = PyBytes_AS_STRING(payload)
            n = PyBytes_GET_SIZE(payload)
        else:
            PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
            release = True
            data = <const char*>view.buf
            n = view.len
        try:
            need = MESSAGE_HEADER + extra + n + ((5 if n < 256 else 8) if self.amqp else 0)
            if self.length + need > self.capacity:
                self.on_full(need)
                if self.length + need > self.capacity:
                    raise OverflowError(f"a message of {need} bytes does not fit a frame of {self.capacity}")
            p = self.buf + self.length
            put_be64(p, seq)
            if extra:
                if fv is None:
                    p[8] = <char>0xff
                    p[9] = <char>0xff
                else:
                    p[8] = <char>((fn >> 8) & 0xff)
                    p[9] = <char>(fn & 0xff)
                    memcpy(p + 10, PyBytes_AS_STRING(fv), fn)
                p += extra
            if self.amqp:
                if n < 256:
                    put_be32(p + 8, <uint32_t>(n + 5))
                    p[12] = 0x00
                    p[13] = 0x53
                    p[14] = 0x75
                    p[15] = <char>0xa0
                    p[16] = <char>n
                    p += 17
                else:
                    put_be32(p + 8, <uint32_t>(n + 8))
                    p[12] = 0x00
                    p[13] = 0x53
                    p[14] = 0x75
                    p[15] = <char>0xb0
                    put_be32(p + 16, <uint32_t>n)
                    p += 20
            else:
                put_be32(p + 8, <uint32_t>n)
                p += 12
            memcpy(p, data, n)
        finally:
            if release:
                PyBuffer_Release(&view)
        self.length += need
        self._count += 1
        if self._count == 1:
            self.on_first()

    cpdef object take(self):
        """The finished frame as bytes (None when empty); the next add starts a new one."""
        cdef bytes out
        if self._count == 0:
            return None
        put_be32(self.buf, <uint32_t>(self.length - 4))
        self.buf[4] = 0
        self.buf[5] = 2          # key: Publish
        self.buf[6] = 0
        self.buf[7] = 2 if self.filter_table is not None else 1    # version 2 carries filter values
        self.buf[8] = <char>self.publisher_id
        put_be32(self.buf + 9, self._count)
        out = PyBytes_FromStringAndSize(self.buf, self.length)
        self.length = HEADER
        self._count = 0
        return out


def confirm_each(bytes data, Py_ssize_t pos, Py_ssize_t count, on_confirm, int64_t t_ns):
    """Call ``on_confirm(publishing_id, True, t_ns)`` for each id of a PublishConfirm.

    ``pos`` is where the ids start; a frame shorter than it claims raises ValueError
    rather than reading past the buffer.
    """
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t i
    if pos < 0 or count < 0 or pos + 8 * count > PyBytes_GET_SIZE(data):
        raise ValueError(f"PublishConfirm: {count} ids do not fit the {PyBytes_GET_SIZE(data)}-byte frame")
    for i in range(count):
        on_confirm(get_be64(p + pos + 8 * i), True, t_ns)
