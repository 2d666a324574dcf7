# Part of rbench.drivers._amqp10_link (included by ext/drivers/amqp10_link.pyx; shares its namespace).
# Sender: transfers out (stamped in C), the broker's dispositions and flow in.

cdef class Sender:
    """One sending link on its own session: transfers out, dispositions and flow in."""

    cdef readonly uint16_t channel
    cdef readonly uint32_t handle
    cdef readonly bint settled
    cdef readonly bint durable
    cdef readonly uint32_t max_frame
    cdef readonly uint32_t producer
    cdef public object sink
    cdef public object on_change            # called once per disposition / flow frame (wakes waiters)
    cdef public int64_t credit              # deliveries the broker lets us send now
    cdef public uint32_t delivery_count
    cdef public uint32_t next_id            # next delivery-id (= transfer-id of its first frame)
    cdef public int64_t transfers           # transfer frames written
    # unsettled: seq of delivery-ids [low, next_id) in a ring (-1 = settled out of order)
    cdef int64_t* ring
    cdef Py_ssize_t cap
    cdef uint32_t low
    cdef uint32_t _rebase                   # delivery-id stored at ring[0]'s position
    cdef readonly Py_ssize_t outstanding
    cdef readonly int64_t accepted
    cdef readonly int64_t rejected
    cdef readonly int64_t released

    def __cinit__(self, uint16_t channel, uint32_t handle, bint settled, bint durable, uint32_t max_frame,
                  uint32_t producer, sink, uint32_t first_id=0):
        if max_frame < 512:
            raise ValueError("max_frame: expected at least 512 bytes (AMQP 1.0 minimum)")
        self.channel = channel
        self.handle = handle
        self.settled = settled
        self.durable = durable
        self.max_frame = max_frame
        self.producer = producer
        self.sink = sink
        self.on_change = None
        self.next_id = first_id
        self.low = first_id
        self.cap = 0
        self.ring = NULL

    def __dealloc__(self):
        free(self.ring)

    cdef int _remember(self, int64_t seq) except -1:
        cdef Py_ssize_t n = <uint32_t>(self.next_id - self.low)
        cdef Py_ssize_t newcap, k
        cdef int64_t* ring
        if n >= self.cap:
            newcap = self.cap * 2 if self.cap else 1024
            ring = <int64_t*>realloc(NULL, newcap * sizeof(int64_t))
            if ring == NULL:
                raise MemoryError()
            for k in range(n):
                ring[k] = self.ring[(<uint32_t>(self.low + <uint32_t>k - self._rebase)) % self.cap]
            free(self.ring)
            # re-base: the ring is indexed by (id - low) modulo cap from now on with low at 0
            self.ring = ring
            self.cap = newcap
            self._rebase = self.low
        self.ring[(<uint32_t>(self.next_id - self._rebase)) % self.cap] = seq
        return 0

    cdef int _write(self, bytearray out, const uint8_t* body, Py_ssize_t blen, int64_t seq,
                    int64_t t_intended) except -1:
        """One delivery (1+ transfer frames) appended to ``out``. With t_intended >= 0 the first
        24 body bytes are written as rbench's stamp (producer, seq, t_intended, t_sent = now)."""
        cdef uint8_t prefix[16]
        cdef Py_ssize_t plen = 0, mlen, room, chunk, done = 0, k, take, stamp_at = -1
        cdef uint8_t* w
        cdef bint more
        cdef int64_t t_sent
        if self.durable:
            prefix[0] = 0x00; prefix[1] = 0x53; prefix[2] = 0x70
            prefix[3] = 0xc0; prefix[4] = 0x02; prefix[5] = 0x01; prefix[6] = 0x41
            plen = 7
        prefix[plen] = 0x00; prefix[plen + 1] = 0x53; prefix[plen + 2] = 0x75; prefix[plen + 3] = 0xb0
        put_be32(prefix + plen + 4, <uint32_t>blen)
        plen += DATA_PREFIX
        mlen = plen + blen
        room = self.max_frame - TRANSFER_FIXED
        while True:
            chunk = mlen - done
            more = chunk > room
            if more:
                chunk = room
            w = grow(out, TRANSFER_FIXED + chunk)
            put_be32(w, <uint32_t>(TRANSFER_FIXED + chunk))
            w[4] = 2; w[5] = 0
            put_be16(w + 6, self.channel)
            w[8] = 0x00; w[9] = 0x53; w[10] = 0x14
            w[11] = 0xc0; w[12] = 20; w[13] = 6
            put_uint(w + 14, self.handle)
            put_uint(w + 19, self.next_id)
            w[24] = 0xa0; w[25] = 4
            put_be32(w + 26, self.next_id)
            w[30] = 0x43
            w[31] = 0x41 if self.settled else 0x42
            w[32] = 0x41 if more else 0x42
            w += TRANSFER_FIXED
            k = 0
            if done < plen:                         # the sections' prefix
                take = plen - done
                if take > chunk:
                    take = chunk
                memcpy(w, prefix + done, take)
                k = take
                if t_intended >= 0 and blen >= STAMP:
                    stamp_at = (w - <uint8_t*>PyByteArray_AS_STRING(out)) + plen
            if chunk > k:
                memcpy(w + k, body + (done + k - plen), chunk - k)
            done += chunk
            self.transfers += 1
            if not more:
                break
        if stamp_at >= 0:
            w = <uint8_t*>PyByteArray_AS_STRING(out) + stamp_at
            t_sent = realtime_ns()
            write_stamp(w, self.producer, <uint32_t>seq, t_intended if t_intended > 0 else t_sent, t_sent)
        if not self.settled:
            self._remember(seq)
            self.outstanding += 1
        self.next_id += 1
        self.delivery_count += 1
        self.credit -= 1
        return 0

    def write(self, bytearray out not None, payload, int64_t seq):
        """Append ``payload`` as one delivery (1+ transfer frames) to ``out``; the size of ``out`` after.

        The data section carries the payload as it is (its first 24 bytes are rbench's
        stamp); a durable link adds a header section with durable=true."""
        cdef Py_buffer view
        PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
        try:
            self._write(out, <const uint8_t*>view.buf, view.len, seq, -1)
        finally:
            PyBuffer_Release(&view)
        return PyByteArray_GET_SIZE(out)

    def send_batch(self, bytearray out not None, payload, int64_t first_seq, Py_ssize_t n, Py_ssize_t window,
                   int64_t t_intended=0, Py_ssize_t max_bytes=262144):
        """Send up to ``n`` copies of ``payload`` (seq first_seq, first_seq + 1 ...), each stamped in C,
        while the link has credit, fewer than ``window`` are unsettled (0: no limit) and ``out`` holds
        less than ``max_bytes``. ``t_intended`` > 0 is every message's intended send time, 0 means
        "now" (closed loop). Returns how many were sent: one call per batch, not per message."""
        cdef Py_buffer view
        cdef Py_ssize_t i = 0
        PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
        try:
            if view.len < STAMP:
                raise ValueError("payload: expected at least the 24-byte stamp")
            while i < n and self.credit > 0 and (window <= 0 or self.outstanding < window) \
                    and PyByteArray_GET_SIZE(out) < max_bytes:
                self._write(out, <const uint8_t*>view.buf, view.len, first_seq + i, t_intended)
                i += 1
        finally:
            PyBuffer_Release(&view)
        return i

    cdef int _settle(self, uint32_t first, uint32_t last, int64_t outcome) except -1:
        cdef uint32_t d
        cdef int64_t seq, t = realtime_ns()
        cdef Py_ssize_t slot
        cdef uint8_t stamp[STAMP]
        cdef uint32_t span = last - first
        cdef uint32_t i
        if self.cap == 0:
            return 0
        for i in range(span + 1):
            d = first + i
            if <uint32_t>(d - self.low) >= <uint32_t>(self.next_id - self.low):
                continue                                # not ours / already settled and forgotten
            slot = (<uint32_t>(d - self._rebase)) % self.cap
            seq = self.ring[slot]
            if seq < 0:
                continue
            self.ring[slot] = -1
            self.outstanding -= 1
            if outcome == ACCEPTED or outcome < 0:
                self.accepted += 1
                self.sink.on_confirm(seq, True, t)
            elif outcome == REJECTED:
                self.rejected += 1
                self.sink.on_confirm(seq, False, t)
            else:                                       # released / modified: not delivered, came back
                self.released += 1
                write_stamp(stamp, self.producer, <uint32_t>seq, 0, 0)
                self.sink.on_return(PyBytes_FromStringAndSize(<const char*>stamp, STAMP), t)
                self.sink.on_confirm(seq, True, t)
        while self.low != self.next_id and self.ring[(<uint32_t>(self.low - self._rebase)) % self.cap] < 0:
            self.low += 1
        return 0

    def settle(self, uint32_t first, uint32_t last, int outcome=ACCEPTED):
        """Settle delivery-ids first..last with ``outcome`` (ACCEPTED, REJECTED, RELEASED, MODIFIED)."""
        self._settle(first, last, outcome)

    def flow(self, uint32_t delivery_count, uint32_t link_credit):
        """The broker's flow state for this link: credit = its delivery-count + link-credit - ours."""
        cdef int32_t behind = <int32_t>(delivery_count - self.delivery_count)   # <= 0: sent since its snapshot
        self.credit = <int64_t>link_credit + behind
        if self.on_change is not None:
            self.on_change()
