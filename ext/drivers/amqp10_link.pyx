# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""AMQP 1.0 link hot path: transfer, disposition and flow frames, in C.

Why a separate module from ext/amqp10.pyx: that one is the general type system and
message codec (any value, any section); this one only knows the few frames a
benchmark link sends per message, with fixed-width encodings so a transfer is a
handful of stores into the connection's output bytearray. Everything else on the
wire (open, begin, attach, detach, end, close, SASL) is rare and goes through the
general codec in Python (rbench/drivers/amqp10_protocol.py).

- ``Sender``: writes one message as a transfer (split into several frames when it
  is larger than the peer's max-frame-size), keeps delivery-id -> seq of unsettled
  deliveries in a ring, and turns the broker's dispositions into ``on_confirm`` /
  ``on_return`` calls on the runtime's sink; it tracks link credit from flow frames.
- ``Receiver``: takes transfers (joining multi-frame ones), hands the data section
  to ``on_message``, settles with ranged dispositions and tops link credit up.
- ``FrameReader``: splits the byte stream into frames, routes transfer, disposition
  and flow frames of registered links to the above, and returns every other frame
  to Python.

No Python frame runs per message: the runtime's sink and tap are C types too.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcmp, memcpy
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_FromStringAndSize

from byteorder cimport get_be32, put_be16, put_be32
from stamp cimport STAMP_SIZE as STAMP, stamp_seq, stamp_t_intended, stamp_t_sent, write_stamp
from clock cimport realtime_ns

from rbench.errors import CodecError

# performative descriptors (part 2 §2.7) and the outcomes (part 3 §3.4)
FLOW = 0x13
TRANSFER = 0x14
DISPOSITION = 0x15
ACCEPTED = 0x24
REJECTED = 0x25
RELEASED = 0x26
MODIFIED = 0x27

DEF TRANSFER_FIXED = 33          # frame header 8 + transfer performative 25
DEF HEADER_SECTION = 7           # header section with durable=true
DEF DATA_PREFIX = 8              # data section: descriptor 3 + vbin32 code 1 + length 4

cdef inline uint8_t* grow(bytearray out, Py_ssize_t n) except NULL:
    """Extend ``out`` by n bytes; the address of the new region."""
    cdef Py_ssize_t size = PyByteArray_GET_SIZE(out)
    PyByteArray_Resize(out, size + n)
    return <uint8_t*>PyByteArray_AS_STRING(out) + size


cdef inline void put_uint(uint8_t* p, uint32_t v) noexcept nogil:
    p[0] = 0x70
    put_be32(p + 1, v)


# ---------------------------------------------------------------- decoding helpers

cdef int fail(str what) except -1:
    raise CodecError(f"AMQP 1.0 frame: {what}")


cdef Py_ssize_t skip_value(const uint8_t* p, Py_ssize_t i, Py_ssize_t end) except -1:
    """Index just past the value starting at p[i] (any type, described or not)."""
    cdef uint8_t code
    cdef Py_ssize_t n
    if i >= end:
        fail("truncated value")
    code = p[i]
    i += 1
    if code == 0x00:                       # described: descriptor, then value
        i = skip_value(p, i, end)
        return skip_value(p, i, end)
    if code == 0x40 or code == 0x41 or code == 0x42 or code == 0x43 or code == 0x44 or code == 0x45:
        return i
    if code >> 4 == 0x5:
        n = 1
    elif code >> 4 == 0x6:
        n = 2
    elif code >> 4 == 0x7:
        n = 4
    elif code >> 4 == 0x8:
        n = 8
    elif code >> 4 == 0x9:
        n = 16
    elif code >> 4 == 0xa or code >> 4 == 0xc or code >> 4 == 0xe:
        if i + 1 > end:
            fail("truncated size")
        n = 1 + p[i]
    elif code >> 4 == 0xb or code >> 4 == 0xd or code >> 4 == 0xf:
        if i + 4 > end:
            fail("truncated size")
        n = 4 + <Py_ssize_t>get_be32(p + i)
    else:
        fail(f"unknown type code 0x{code:02x}")
    if i + n > end:
        fail("truncated value")
    return i + n


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
        return (<int64_t>p[k + 1] << 8) | p[k + 2]
    if code == 0x70:
        if k + 5 > end:
            fail("truncated uint")
        i[0] = k + 5
        return get_be32(p + k + 1)
    if code == 0x80:
        if k + 9 > end:
            fail("truncated ulong")
        i[0] = k + 9
        return (<int64_t>get_be32(p + k + 1) << 32) | get_be32(p + k + 5)
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
    cdef Py_ssize_t i = 0, start, size
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
            return PyBytes_FromStringAndSize(<const char*>p + start, size)
        if section < 0:
            fail("expected a message section")
        i = skip_value(p, i, n)
    return b""


# ---------------------------------------------------------------- sender

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


# ---------------------------------------------------------------- receiver

cdef class Receiver:
    """One receiving link on its own session: transfers in, dispositions and flow out."""

    cdef readonly uint16_t channel
    cdef readonly uint32_t handle
    cdef public object on_message
    cdef readonly uint32_t window            # link credit kept granted (0: the caller manages credit)
    cdef public uint32_t refill              # top credit up to the window once it is this low (default: half
                                             # the window); above half it acts at the end of a read, and ...
    cdef public bint awaiting                # ... only when the broker has answered our last flow (_frames)
    cdef readonly uint32_t ack_every         # 0/1: settle once per read; N: every N deliveries
    cdef readonly bint settle                # False when the broker sends pre-settled (auto-ack)
    cdef readonly bint manual                # the caller settles (accept) and grants credit: on_delivery is told
    cdef public object on_delivery           # manual: called (delivery_id, t_ns) after on_message (set by the caller)
    cdef public int64_t credit
    cdef public uint32_t delivery_count
    cdef public uint32_t next_incoming_id    # session: next transfer-id expected from the broker
    cdef public uint32_t next_outgoing_id    # session: ours (we send no transfers on this session)
    cdef public int64_t received
    cdef public bint stopped                 # after detach: ignore further transfers
    cdef bytearray partial
    cdef bint in_partial
    cdef uint32_t partial_id
    cdef bint partial_settled
    cdef readonly Py_ssize_t pending         # deliveries received and not yet settled
    cdef readonly int64_t dispositions       # disposition frames written
    cdef uint32_t first_pending
    cdef uint32_t last_pending

    def __cinit__(self, uint16_t channel, uint32_t handle, on_message, uint32_t window, uint32_t ack_every,
                  bint settle, uint32_t next_incoming_id, bint manual=False):
        self.channel = channel
        self.handle = handle
        self.on_message = on_message
        self.window = window
        self.refill = window // 2
        self.ack_every = ack_every
        self.settle = settle
        self.next_incoming_id = next_incoming_id
        self.partial = bytearray()
        self.manual = manual
        if manual and window:
            raise ValueError("a receiver whose caller settles also grants its credit: window must be 0")

    def write_flow(self, bytearray out not None, uint32_t credit, bint drain=False):
        """Append a flow frame granting ``credit`` (session windows restated) to ``out``."""
        cdef uint8_t* w = grow(out, 8 + 3 + 3 + 5 * 7 + 2)
        put_be32(w, 8 + 3 + 3 + 5 * 7 + 2)
        w[4] = 2; w[5] = 0
        put_be16(w + 6, self.channel)
        w[8] = 0x00; w[9] = 0x53; w[10] = 0x13
        w[11] = 0xc0; w[12] = 1 + 5 * 7 + 2; w[13] = 9
        put_uint(w + 14, self.next_incoming_id)
        put_uint(w + 19, 0x7fffffff)                 # incoming-window
        put_uint(w + 24, self.next_outgoing_id)
        put_uint(w + 29, 0x7fffffff)                 # outgoing-window
        put_uint(w + 34, self.handle)
        put_uint(w + 39, self.delivery_count)
        put_uint(w + 44, credit)
        w[49] = 0x40                                 # available
        w[50] = 0x41 if drain else 0x42
        self.credit = credit
        self.awaiting = True

    cdef int _write_disposition(self, bytearray out) except -1:
        cdef uint8_t* w = grow(out, 8 + 3 + 3 + 1 + 10 + 1 + 4)
        put_be32(w, 30)
        w[4] = 2; w[5] = 0
        put_be16(w + 6, self.channel)
        w[8] = 0x00; w[9] = 0x53; w[10] = 0x15
        w[11] = 0xc0; w[12] = 1 + 1 + 10 + 1 + 4; w[13] = 5
        w[14] = 0x41                                 # role: receiver
        put_uint(w + 15, self.first_pending)
        put_uint(w + 20, self.last_pending)
        w[25] = 0x41                                 # settled
        w[26] = 0x00; w[27] = 0x53; w[28] = 0x24; w[29] = 0x45    # accepted
        self.pending = 0
        self.dispositions += 1
        return 0

    def accept(self, bytearray out not None, uint32_t first, uint32_t last):
        """Manual settlement: append one disposition accepting and settling delivery-ids first..last."""
        self.first_pending = first
        self.last_pending = last
        self._write_disposition(out)

    def flush_dispositions(self, bytearray out not None):
        """Settle every delivery received so far (one ranged disposition); True if one was written."""
        if self.pending:
            self._write_disposition(out)
            return True
        return False

    cdef int _transfer(self, const uint8_t* p, Py_ssize_t i, Py_ssize_t list_end, Py_ssize_t count,
                       Py_ssize_t end, bytearray out, int64_t t) except -1:
        """One transfer frame: fields from p[i] (list items up to list_end), payload list_end..end.
        Returns 1 when it wrote to ``out``."""
        cdef int64_t delivery_id = -1
        cdef int settled = -1, more = 0, aborted = 0
        cdef Py_ssize_t n = 0
        cdef object body
        cdef int wrote = 0
        cdef int redelivered
        self.next_incoming_id += 1
        if self.stopped:
            return 0
        if count > 1:
            delivery_id = read_uint(p, &i, list_end)        # handle was read by the caller
            n = 2
        if count > 2:
            i = skip_value(p, i, list_end)                   # delivery-tag
            n = 3
        if count > 3:
            read_uint(p, &i, list_end)                       # message-format
            n = 4
        if count > 4:
            settled = read_bool(p, &i, list_end)
            n = 5
        if count > 5:
            more = read_bool(p, &i, list_end) == 1
            n = 6
        if count > 9:
            i = skip_value(p, i, list_end)                   # rcv-settle-mode
            i = skip_value(p, i, list_end)                   # state
            i = skip_value(p, i, list_end)                   # resume
            aborted = read_bool(p, &i, list_end) == 1
        if aborted:
            self.in_partial = False
            del self.partial[:]
            return 0
        if more or self.in_partial:
            if not self.in_partial:
                self.in_partial = True
                self.partial_id = <uint32_t>delivery_id
                self.partial_settled = settled == 1
            self.partial.extend((<const char*>p + list_end)[:end - list_end])
            if more:
                return 0
            self.in_partial = False
            delivery_id = self.partial_id
            settled = self.partial_settled
            body = data_body(<const uint8_t*>PyByteArray_AS_STRING(self.partial), PyByteArray_GET_SIZE(self.partial))
            redelivered = header_redelivered(<const uint8_t*>PyByteArray_AS_STRING(self.partial),
                                             PyByteArray_GET_SIZE(self.partial))
            del self.partial[:]
        else:
            body = data_body(p + list_end, end - list_end)
            redelivered = header_redelivered(p + list_end, end - list_end)
        self.received += 1
        self.delivery_count += 1
        self.credit -= 1
        self.on_message(body, redelivered == 1, t)
        if self.manual:
            if settled != 1 and delivery_id >= 0:
                self.on_delivery(delivery_id, t)
            return 0
        if self.settle and settled != 1 and delivery_id >= 0:
            if self.pending == 0:
                self.first_pending = <uint32_t>delivery_id
            self.last_pending = <uint32_t>delivery_id
            self.pending += 1
            if self.ack_every > 1 and self.pending >= self.ack_every:
                self._write_disposition(out)
                wrote = 1
        if self.window and (self.credit * 2 <= self.window and self.credit <= self.refill) and not self.stopped:
            # top up as soon as the threshold is reached, even in the middle of a read
            if self.pending and self.ack_every <= 1:
                self._write_disposition(out)
            self.write_flow(out, self.window)
            wrote = 1
        return wrote


# ---------------------------------------------------------------- frame reader

cdef class FrameReader:
    """Splits the inbound byte stream into frames; the links' frames are handled here.

    ``feed(data)`` returns the frames Python has to look at, as (channel, type, body)
    with ``body`` the frame body after the extended header, or (-1, -1, header) for an
    8-byte protocol header. ``out`` is the connection's output buffer (the caller
    swaps in a new one after each write); ``dirty`` says something was appended to it.
    """

    cdef bytearray buf
    cdef public bytearray out
    cdef public bint dirty
    cdef dict senders            # channel -> Sender
    cdef dict receivers          # channel -> Receiver
    cdef readonly int64_t frames

    def __cinit__(self):
        self.buf = bytearray()
        self.out = bytearray()
        self.senders = {}
        self.receivers = {}

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
            channel = (p[i + 6] << 8) | p[i + 7]
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

    def __cinit__(self):
        self.cap = 0
        self.count = 0
        for k in range(4):
            self.cols[k] = NULL

    def __dealloc__(self):
        for k in range(4):
            free(self.cols[k])

    def __call__(self, body, redelivered, int64_t t_ns):
        cdef Py_buffer view
        cdef const uint8_t* p
        cdef Py_ssize_t newcap
        cdef int k
        cdef int64_t* grown
        PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
        try:
            if view.len < STAMP:
                self.short_bodies += 1
                return
            if self.count == self.cap:
                newcap = self.cap * 2 if self.cap else 65536
                for k in range(4):
                    grown = <int64_t*>realloc(self.cols[k], newcap * sizeof(int64_t))
                    if grown == NULL:
                        raise MemoryError()
                    self.cols[k] = grown
                self.cap = newcap
            p = <const uint8_t*>view.buf
            self.cols[0][self.count] = <int64_t>stamp_seq(p)
            self.cols[1][self.count] = stamp_t_intended(p)
            self.cols[2][self.count] = stamp_t_sent(p)
            self.cols[3][self.count] = t_ns
            self.count += 1
        finally:
            PyBuffer_Release(&view)

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
