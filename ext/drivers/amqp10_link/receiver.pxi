# Part of rbench.drivers._amqp10_link (included by ext/drivers/amqp10_link.pyx; shares its namespace).
# Receiver: transfers in (multi-frame ones joined), ranged dispositions and credit top-ups out.

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

    cdef int _deliver(self, const uint8_t* m, Py_ssize_t n, int64_t t) except -1:
        """One whole message m[0:n] to ``on_message``; a LatencyTap takes its stamp straight from the frame
        (no bytes object, no call through Python's protocol)."""
        cdef Py_ssize_t start = 0, size = 0
        cdef int redelivered
        self.received += 1
        self.delivery_count += 1
        self.credit -= 1
        if type(self.on_message) is LatencyTap:
            if data_span(m, n, &start, &size):
                (<LatencyTap>self.on_message).take(m + start, size, t)
            else:
                (<LatencyTap>self.on_message).take(m, 0, t)
            return 0
        redelivered = header_redelivered(m, n)
        self.on_message(data_body(m, n), redelivered == 1, t)
        return 0

    cdef int _transfer(self, const uint8_t* p, Py_ssize_t i, Py_ssize_t list_end, Py_ssize_t count,
                       Py_ssize_t end, bytearray out, int64_t t) except -1:
        """One transfer frame: fields from p[i] (list items up to list_end), payload list_end..end.
        Returns 1 when it wrote to ``out``."""
        cdef int64_t delivery_id = -1
        cdef int settled = -1, more = 0, aborted = 0
        cdef Py_ssize_t n = 0
        cdef int wrote = 0
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
            self._deliver(<const uint8_t*>PyByteArray_AS_STRING(self.partial), PyByteArray_GET_SIZE(self.partial), t)
            del self.partial[:]
        else:
            self._deliver(p + list_end, end - list_end, t)
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
