# Part of rbench.drivers._amqp10_link (included by ext/drivers/amqp10_link.pyx; shares its namespace).
# FrameReader: the inbound stream split into frames, the links' frames routed in C; LatencyTap.

cdef class FrameReader:
    """Splits the inbound byte stream into frames; the links' frames are handled here.

    ``feed(data)`` returns the frames Python has to look at, as (channel, type, body)
    with ``body`` the frame body after the extended header, or (-1, -1, header) for an
    8-byte protocol header. ``out`` is the connection's output buffer (the caller
    swaps in a new one after each write); ``dirty`` says something was appended to it.

    It is also the connection's asyncio protocol (``owner`` is the Python connection): the
    transport hands each read to ``data_received`` here, which routes the links' frames in C,
    writes what they answered (dispositions, flow) at once, and calls into Python only for a
    rare frame. A read of transfers and dispositions therefore runs no Python frame at all
    (it used to run two: the protocol's data_received, and a scheduled flush).
    """

    cdef bytearray buf
    cdef public bytearray out
    cdef public bint dirty
    cdef dict senders            # channel -> Sender
    cdef dict receivers          # channel -> Receiver
    cdef readonly int64_t frames
    cdef readonly int64_t reads  # data_received calls
    cdef public object owner     # connection_made / _lost, pause / resume_writing, eof, frames(), protocol_error()
    cdef public object transport
    cdef public bint wrote       # flush() wrote something (the heartbeat timer reads and clears it)

    def __cinit__(self, owner=None):
        self.buf = bytearray()
        self.out = bytearray()
        self.senders = {}
        self.receivers = {}
        self.owner = owner

    # ---- asyncio protocol: the transport's calls, the rare ones passed on to the owner
    def connection_made(self, transport):
        self.transport = transport
        if self.owner is not None:
            self.owner.connection_made(transport)

    def data_received(self, data):
        cdef list rest
        self.reads += 1
        try:
            rest = self._feed(data)
        except CodecError as exc:
            self.owner.protocol_error(exc)
            return
        if rest:
            self.owner.frames(rest)
        if self.dirty:
            self.dirty = False
            self.flush()

    def eof_received(self):
        return self.owner.eof_received() if self.owner is not None else False

    def connection_lost(self, exc):
        if self.owner is not None:
            self.owner.connection_lost(exc)

    def pause_writing(self):
        self.owner.pause_writing()

    def resume_writing(self):
        self.owner.resume_writing()

    cpdef flush(self):
        """Write everything buffered (one transport.write); the links append to a new buffer."""
        cdef bytearray data = self.out
        if PyByteArray_GET_SIZE(data) and self.transport is not None and not self.transport.is_closing():
            self.out = bytearray()          # the transport may keep ``data`` until the socket takes it
            self.transport.write(data)
            self.wrote = True

    def add_sender(self, int channel, Sender s not None):
        """Route frames arriving on ``channel`` (the broker's number for the session) to ``s``."""
        self.senders[channel] = s

    def add_receiver(self, int channel, Receiver r not None):
        self.receivers[channel] = r

    def remove(self, int channel):
        self.senders.pop(channel, None)
        self.receivers.pop(channel, None)

    def feed(self, data):
        """Consume ``data``; the frames not handled in C, in order."""
        return self._feed(data)

    cdef list _feed(self, data):
        cdef Py_buffer view
        cdef list rest = []
        cdef const uint8_t* p
        cdef Py_ssize_t n, i = 0, consumed
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            if PyByteArray_GET_SIZE(self.buf):
                self.buf.extend((<const char*>view.buf)[:view.len])
                p = <const uint8_t*>PyByteArray_AS_STRING(self.buf)
                n = PyByteArray_GET_SIZE(self.buf)
                consumed = self._frames(p, n, rest)
                del self.buf[:consumed]
            else:
                p = <const uint8_t*>view.buf
                consumed = self._frames(p, view.len, rest)
                if consumed < view.len:
                    self.buf.extend((<const char*>p + consumed)[:view.len - consumed])
        finally:
            PyBuffer_Release(&view)
        return rest

    cdef Py_ssize_t _frames(self, const uint8_t* p, Py_ssize_t n, list rest) except -1:
        cdef Py_ssize_t i = 0, size, doff, body, end, k, list_end, count
        cdef uint16_t channel
        cdef uint8_t ftype
        cdef int64_t descriptor, handle, t = realtime_ns()
        cdef Receiver r
        cdef Sender s
        cdef object link
        cdef int64_t first, last, outcome
        cdef int role
        while n - i >= 8:
            if memcmp(p + i, b"AMQP", 4) == 0:
                rest.append((-1, -1, PyBytes_FromStringAndSize(<const char*>p + i, 8)))
                i += 8
                continue
            size = get_be32(p + i)
            doff = p[i + 4] * 4
            if size < 8 or doff < 8 or doff > size:
                fail(f"bad frame header (size {size}, data offset {doff})")
            if n - i < size:
                break
            ftype = p[i + 5]
            channel = get_be16(p + i + 6)
            body = i + doff
            end = i + size
            i = end
            self.frames += 1
            if body == end:
                continue                                        # an empty frame: heartbeat
            k = body
            descriptor = read_descriptor(p, &k, end) if ftype == 0 else -1
            if descriptor == TRANSFER:
                link = self.receivers.get(channel)
                if link is not None:
                    r = <Receiver>link
                    list_head(p, &k, end, &list_end, &count)
                    handle = read_uint(p, &k, list_end)
                    if r._transfer(p, k, list_end, count, end, self.out, t):
                        self.dirty = True
                    continue
            elif descriptor == DISPOSITION:
                link = self.senders.get(channel)
                if link is not None:
                    s = <Sender>link
                    list_head(p, &k, end, &list_end, &count)
                    role = read_bool(p, &k, list_end)
                    first = read_uint(p, &k, list_end)
                    last = read_uint(p, &k, list_end) if count > 2 else -1
                    if last < 0:
                        last = first
                    outcome = -1
                    if count > 3:
                        read_bool(p, &k, list_end)              # settled
                    if count > 4:
                        outcome = read_descriptor(p, &k, list_end)
                    if role == 1 and first >= 0:
                        s._settle(<uint32_t>first, <uint32_t>last, outcome)
                        if s.on_change is not None:
                            s.on_change()
                        continue
            elif descriptor == FLOW:
                link = self.receivers.get(channel)
                if link is not None:
                    (<Receiver>link).awaiting = False           # the broker's answer to our last flow
                    continue
                link = self.senders.get(channel)
                if link is not None:
                    s = <Sender>link
                    list_head(p, &k, end, &list_end, &count)
                    if count >= 7:
                        read_uint(p, &k, list_end)              # next-incoming-id
                        read_uint(p, &k, list_end)              # incoming-window
                        read_uint(p, &k, list_end)              # next-outgoing-id
                        read_uint(p, &k, list_end)              # outgoing-window
                        handle = read_uint(p, &k, list_end)
                        if handle == s.handle:
                            first = read_uint(p, &k, list_end)  # delivery-count
                            last = read_uint(p, &k, list_end)   # link-credit
                            if first < 0:
                                first = 0
                            if last < 0:
                                last = 0
                            s.flow(<uint32_t>first, <uint32_t>last)
                            continue
            rest.append((channel, ftype, PyBytes_FromStringAndSize(<const char*>p + body, end - body)))
        if self.receivers:
            for link in self.receivers.values():
                r = <Receiver>link
                # A refill set above half the window tops up early, at the end of a read. RabbitMQ
                # 3.x's session handles each flow with a synchronous round trip to the queue process
                # (its answer is the flow it sends back), so behind a busy queue early flows stall
                # the session: at most one early flow is unanswered at a time, and half the window
                # used still tops up at once (Receiver._transfer), answered or not. Measured on
                # 3.10 (docs/amqp10.md), early top-ups lost to the default (half) in both modes.
                if r.pending and r.ack_every <= 1:
                    r._write_disposition(self.out)
                    self.dirty = True
                if r.window and r.credit <= r.refill and not r.awaiting and not r.stopped:
                    r.write_flow(self.out, r.window)
                    self.dirty = True
        return i


cdef class LatencyTap:
    """An ``on_message`` that keeps (seq, t_intended, t_sent, t_received) of every delivery in C arrays.

    For the quiver-style command and benchmark: no Python runs per message, and the
    samples come out as one bytes object per column (``columns()``) for numpy / Parquet."""

    cdef int64_t* cols[4]
    cdef readonly Py_ssize_t count
    cdef Py_ssize_t cap
    cdef readonly Py_ssize_t short_bodies
    cdef Py_buffer shared_view
    cdef int64_t* shared                     # publish_count(): the count, stored here after each message
    cdef int wake_fd                         # publish_count(): written once shared[1] (a count) is reached

    def __cinit__(self):
        self.cap = 0
        self.count = 0
        self.shared = NULL
        self.wake_fd = -1
        for k in range(4):
            self.cols[k] = NULL

    def __dealloc__(self):
        for k in range(4):
            free(self.cols[k])
        if self.shared != NULL:
            PyBuffer_Release(&self.shared_view)

    def publish_count(self, target not None, int wake_fd=-1):
        """Store the count into ``target`` (a writable 8-byte buffer, e.g. a shared-memory int64) after every
        message: how another process (rbench amqp10's sender) sees how far the receiver is, with no call.

        With ``wake_fd`` (a non-blocking pipe's write end) ``target`` holds two int64: the count, then a count
        someone waits for (0: nobody); once the count reaches it, it is cleared and one byte is written to
        ``wake_fd``, so a waiting sender is woken instead of polling."""
        if self.shared != NULL:
            raise ValueError("publish_count: already publishing")
        PyObject_GetBuffer(target, &self.shared_view, PyBUF_WRITABLE)
        if self.shared_view.len < <Py_ssize_t>sizeof(int64_t) * (2 if wake_fd >= 0 else 1):
            PyBuffer_Release(&self.shared_view)
            raise ValueError("publish_count: expected a writable buffer of 8 bytes (16 with wake_fd)")
        self.shared = <int64_t*>self.shared_view.buf
        self.wake_fd = wake_fd
        self.shared[0] = self.count

    def __call__(self, body, redelivered, int64_t t_ns):
        cdef Py_buffer view
        PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
        try:
            self.take(<const uint8_t*>view.buf, view.len, t_ns)
        finally:
            PyBuffer_Release(&view)

    cdef int take(self, const uint8_t* p, Py_ssize_t n, int64_t t_ns) except -1:
        """One body p[0:n] received at t_ns (the Receiver calls this directly)."""
        cdef Py_ssize_t newcap
        cdef int k
        cdef int64_t* grown
        if n < STAMP:
            self.short_bodies += 1
            return 0
        if self.count == self.cap:
            newcap = self.cap * 2 if self.cap else 65536
            for k in range(4):
                grown = <int64_t*>realloc(self.cols[k], newcap * sizeof(int64_t))
                if grown == NULL:
                    raise MemoryError()
                self.cols[k] = grown
            self.cap = newcap
        self.cols[0][self.count] = <int64_t>stamp_seq(p)
        self.cols[1][self.count] = stamp_t_intended(p)
        self.cols[2][self.count] = stamp_t_sent(p)
        self.cols[3][self.count] = t_ns
        self.count += 1
        if self.shared != NULL:
            self.shared[0] = self.count
            if self.wake_fd >= 0 and self.shared[1] > 0 and self.count >= self.shared[1]:
                self.shared[1] = 0
                write(self.wake_fd, b"w", 1)         # a full pipe already holds a wake-up: nothing lost
        return 0

    def columns(self, Py_ssize_t start=0):
        """(seq, t_intended, t_sent, t_received) from ``start`` on, each as bytes of native int64."""
        if start < 0 or start > self.count:
            start = self.count
        return tuple(PyBytes_FromStringAndSize(<const char*>(self.cols[k] + start),
                                               (self.count - start) * sizeof(int64_t)) if self.cap else b""
                     for k in range(4))


def empty_frame():
    """The 8-byte empty AMQP frame used as a heartbeat."""
    return b"\x00\x00\x00\x08\x02\x00\x00\x00"
