# cython: language_level=3
"""Recorder core: the per-message part of rbench/runtime/recorder.py, in C.

Why Cython: every published message costs a row, a pending-confirm entry and a
confirm lookup, and every delivery a stamp unpack and a row; in Python that was
about as much CPU as the whole native AMQP driver. Here a row is a handful of
stores into growable C columns, the pending confirms live in an open-addressing
hash map (key ``producer << 32 | seq`` → absolute row index, linear probing with
backward-shift deletion), and the 24-byte stamp (see rbench/runtime/stamp.py) is
packed and unpacked in place.

Nothing here knows Arrow or files: ``take_published``/``take_consumed`` hand the
leading rows out as ``Column`` objects (buffer protocol, zero-copy for numpy) and
keep the rest; the Python ``Recorder`` builds the Parquet parts from them.
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE, PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES
from cpython.bytes cimport PyBytes_CheckExact, PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from cpython.bytearray cimport PyByteArray_CheckExact, PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int8_t, int16_t, int32_t, int64_t

# shared primitives (ext/include/): inline, compiled into this module
from clock cimport realtime_ns
from stamp cimport (STAMP_SIZE, STAMP_PRODUCER_AT, STAMP_SEQ_AT, STAMP_T_INTENDED_AT, STAMP_T_SENT_AT, write_stamp,
                   stamp_producer, stamp_seq, stamp_t_intended, stamp_t_sent)

# outcomes: indices into rbench.samples.schema.CORE_OUTCOMES (PENDING is never written)
cdef enum:
    ACK = 0
    NACK = 1
    RETURNED = 2
    TIMEOUT = 3
    UNCONFIRMED = 4
    CONNECTION_LOST = 5
    PENDING = 6
# the enum above in the order of rbench.samples.schema.CORE_OUTCOMES, for tests/unit/test_outcome_codes.py
# (a cdef enum is invisible from Python): the Python side spells each code once, in schema.py
OUTCOME_CODES = (ACK, NACK, RETURNED, TIMEOUT, UNCONFIRMED, CONNECTION_LOST, PENDING)

# the stamp layout this module was compiled with (ext/include/stamp.pxd): a unit test holds it equal to
# rbench/runtime/stamp.py's, the one source
STAMP_LAYOUT = {"size": STAMP_SIZE, "producer": STAMP_PRODUCER_AT, "seq": STAMP_SEQ_AT,
                "t_intended": STAMP_T_INTENDED_AT, "t_sent": STAMP_T_SENT_AT}
PUBLISHED_COLUMNS = ("producer", "queue", "size", "seq", "t_intended", "t_sent", "t_confirmed", "outcome")
CONSUMED_COLUMNS = ("consumer", "queue", "producer", "size", "seq", "t_intended", "t_sent", "t_received", "redelivered")

# column slots
cdef enum:
    P_PRODUCER = 0
    P_QUEUE = 1
    P_SIZE = 2
    P_SEQ = 3
    P_INTENDED = 4
    P_SENT = 5
    P_CONFIRMED = 6
    P_OUTCOME = 7
    C_CONSUMER = 0
    C_QUEUE = 1
    C_PRODUCER = 2
    C_SIZE = 3
    C_SEQ = 4
    C_INTENDED = 5
    C_SENT = 6
    C_RECEIVED = 7
    C_REDELIVERED = 8
    MAX_COLS = 9
    MIN_CAP = 1024

cdef const char* _FMT_Q = b"q"
cdef const char* _FMT_I = b"i"
cdef const char* _FMT_H = b"h"
cdef const char* _FMT_B = b"b"


cdef class Column:
    """One detached column: owns its C buffer, exposes it through the buffer protocol."""

    cdef char* data
    cdef Py_ssize_t n
    cdef Py_ssize_t itemsize
    cdef const char* fmt
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]

    def __cinit__(self) -> None:
        self.data = NULL
        self.n = 0

    def __dealloc__(self) -> None:
        free(self.data)

    def __len__(self) -> int:
        return self.n

    @property
    def typecode(self) -> str:
        return self.fmt.decode()

    def __getbuffer__(self, Py_buffer* view, int flags):
        self.shape[0] = self.n
        self.strides[0] = self.itemsize
        view.buf = self.data
        view.obj = self
        view.len = self.n * self.itemsize
        view.readonly = 0
        view.itemsize = self.itemsize
        view.format = <char*>self.fmt if (flags & PyBUF_FORMAT) else NULL
        view.ndim = 1
        view.shape = self.shape if (flags & PyBUF_ND) else NULL
        view.strides = self.strides if (flags & PyBUF_STRIDES) == PyBUF_STRIDES else NULL
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer* view):
        pass


cdef Column _adopt(char* data, Py_ssize_t n, Py_ssize_t itemsize):
    cdef Column c = Column.__new__(Column)
    c.data = data
    c.n = n
    c.itemsize = itemsize
    c.fmt = _FMT_Q if itemsize == 8 else _FMT_I if itemsize == 4 else _FMT_H if itemsize == 2 else _FMT_B
    return c


cdef struct Cols:
    Py_ssize_t n
    Py_ssize_t cap
    int ncols
    char* ptr[MAX_COLS]
    Py_ssize_t size[MAX_COLS]


cdef int _cols_init(Cols* t, int ncols, const Py_ssize_t* sizes, Py_ssize_t cap) except -1:
    cdef int k
    t.n = 0
    t.cap = cap
    t.ncols = ncols
    for k in range(MAX_COLS):
        t.ptr[k] = NULL
    for k in range(ncols):
        t.size[k] = sizes[k]
        t.ptr[k] = <char*>malloc(cap * sizes[k])
        if t.ptr[k] == NULL:
            raise MemoryError()
    return 0


cdef void _cols_free(Cols* t) noexcept:
    cdef int k
    for k in range(t.ncols):
        free(t.ptr[k])
        t.ptr[k] = NULL
    t.n = 0
    t.cap = 0


cdef int _cols_grow(Cols* t) except -1:
    cdef Py_ssize_t cap = t.cap * 2 if t.cap else MIN_CAP
    cdef int k
    cdef char* p
    for k in range(t.ncols):
        p = <char*>realloc(t.ptr[k], cap * t.size[k])
        if p == NULL:
            raise MemoryError()
        t.ptr[k] = p
    t.cap = cap
    return 0


cdef tuple _cols_take(Cols* t, Py_ssize_t n):
    """Detach rows [0, n) as Columns; rows [n, len) move to fresh buffers."""
    cdef Py_ssize_t rest = t.n - n
    cdef Py_ssize_t cap = t.cap        # the high-water mark: a steady rate never regrows
    cdef int k
    cdef list out = []
    cdef char* fresh[MAX_COLS]
    while cap < rest:
        cap *= 2
    cdef int j
    for k in range(t.ncols):
        fresh[k] = <char*>malloc(cap * t.size[k])
        if fresh[k] == NULL:
            for j in range(k):
                free(fresh[j])
            raise MemoryError()
    for k in range(t.ncols):
        if rest:
            memcpy(fresh[k], t.ptr[k] + n * t.size[k], rest * t.size[k])
        out.append(_adopt(t.ptr[k], n, t.size[k]))
        t.ptr[k] = fresh[k]
    t.n = rest
    t.cap = cap
    return tuple(out)


def strings(Column indices, names) -> tuple:
    """(offsets, data) buffers of an Arrow StringArray holding names[i] for each i in
    ``indices`` (an int8/int16 Column); an index out of range raises IndexError."""
    cdef list encoded = [name.encode() for name in names]
    cdef Py_ssize_t k = len(encoded), n = indices.n, i, total = 0, ix, ln
    cdef Py_ssize_t* lengths = NULL
    cdef const char** ptrs = NULL
    cdef int32_t* offs
    cdef char* out
    cdef bytes offsets, data
    lengths = <Py_ssize_t*>malloc((k + 1) * sizeof(Py_ssize_t))
    ptrs = <const char**>malloc((k + 1) * sizeof(char*))
    try:
        if lengths == NULL or ptrs == NULL:
            raise MemoryError()
        for i in range(k):
            lengths[i] = PyBytes_GET_SIZE(encoded[i])
            ptrs[i] = PyBytes_AS_STRING(encoded[i])
        for i in range(n):
            ix = (<int16_t*>indices.data)[i] if indices.itemsize == 2 else (<int8_t*>indices.data)[i]
            if ix < 0 or ix >= k:
                raise IndexError(f"name index {ix} of {k}")
            total += lengths[ix]
        if total > 0x7fffffff:
            raise OverflowError("string column over 2 GiB")
        offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * 4)
        data = PyBytes_FromStringAndSize(NULL, total)
        offs = <int32_t*>PyBytes_AS_STRING(offsets)
        out = PyBytes_AS_STRING(data)
        total = 0
        offs[0] = 0
        for i in range(n):
            ix = (<int16_t*>indices.data)[i] if indices.itemsize == 2 else (<int8_t*>indices.data)[i]
            ln = lengths[ix]
            memcpy(out + total, ptrs[ix], ln)
            total += ln
            offs[i + 1] = <int32_t>total
    finally:
        free(lengths)
        free(ptrs)
    return offsets, data


cdef inline uint64_t _hash(uint64_t key) noexcept nogil:
    key ^= key >> 33
    key *= 0xff51afd7ed558ccdULL
    key ^= key >> 33
    return key


cdef class RecorderCore:
    """Rows, pending confirms and counters of one task attempt; the event loop owns it."""

    cdef Cols pub
    cdef Cols con
    cdef Py_ssize_t pub_base          # absolute index of published buffer row 0
    cdef Py_ssize_t progress_from     # consumed buffer row where the next latency slice starts
    # pending confirms: open addressing, vals[i] == -1 marks an empty slot
    cdef uint64_t* keys
    cdef int64_t* vals
    cdef Py_ssize_t mask
    cdef Py_ssize_t used
    # confirm − sent since the last take_latencies
    cdef int64_t* clat
    cdef Py_ssize_t clat_n
    cdef Py_ssize_t clat_cap
    cdef readonly int64_t n_published, n_confirmed, n_nacked, n_returned, n_consumed, n_timeout, n_connection_lost

    def __cinit__(self, Py_ssize_t pending_capacity=256) -> None:
        cdef Py_ssize_t psizes[8]
        cdef Py_ssize_t csizes[9]
        cdef Py_ssize_t cap = 16, i
        psizes[:] = [4, 2, 4, 8, 8, 8, 8, 1]
        csizes[:] = [4, 2, 4, 4, 8, 8, 8, 8, 1]
        self.keys = NULL
        self.vals = NULL
        self.clat = NULL
        _cols_init(&self.pub, 8, psizes, MIN_CAP)
        _cols_init(&self.con, 9, csizes, MIN_CAP)
        while cap < pending_capacity * 2:
            cap *= 2
        self._alloc_map(cap)
        self.clat_cap = MIN_CAP
        self.clat = <int64_t*>malloc(self.clat_cap * 8)
        if self.clat == NULL:
            raise MemoryError()

    def __dealloc__(self) -> None:
        _cols_free(&self.pub)
        _cols_free(&self.con)
        free(self.keys)
        free(self.vals)
        free(self.clat)

    # ---- pending map ---------------------------------------------------------------------
    cdef int _alloc_map(self, Py_ssize_t cap) except -1:
        cdef Py_ssize_t i
        self.keys = <uint64_t*>malloc(cap * 8)
        self.vals = <int64_t*>malloc(cap * 8)
        if self.keys == NULL or self.vals == NULL:
            raise MemoryError()
        for i in range(cap):
            self.vals[i] = -1
        self.mask = cap - 1
        self.used = 0
        return 0

    cdef int _map_grow(self) except -1:
        cdef uint64_t* okeys = self.keys
        cdef int64_t* ovals = self.vals
        cdef Py_ssize_t ocap = self.mask + 1, i
        self.keys = NULL
        self.vals = NULL
        try:
            self._alloc_map(ocap * 2)
        except MemoryError:
            free(self.keys)
            free(self.vals)
            self.keys, self.vals = okeys, ovals
            self.mask = ocap - 1
            raise
        for i in range(ocap):
            if ovals[i] != -1:
                self._map_put(okeys[i], ovals[i])
        free(okeys)
        free(ovals)
        return 0

    cdef inline int _map_put(self, uint64_t key, int64_t row) except -1:
        cdef Py_ssize_t i
        if (self.used + 1) * 2 > self.mask + 1:
            self._map_grow()
        i = _hash(key) & self.mask
        while self.vals[i] != -1:
            if self.keys[i] == key:
                self.vals[i] = row
                return 0
            i = (i + 1) & self.mask
        self.keys[i] = key
        self.vals[i] = row
        self.used += 1
        return 0

    cdef inline Py_ssize_t _map_find(self, uint64_t key) noexcept:
        cdef Py_ssize_t i = _hash(key) & self.mask
        while self.vals[i] != -1:
            if self.keys[i] == key:
                return i
            i = (i + 1) & self.mask
        return -1

    cdef void _map_delete(self, Py_ssize_t i) noexcept:
        """Backward-shift deletion: no tombstones, probe chains stay short."""
        cdef Py_ssize_t j = i, k
        cdef Py_ssize_t mask = self.mask
        while True:
            j = (j + 1) & mask
            if self.vals[j] == -1:
                break
            k = _hash(self.keys[j]) & mask
            # leave keys[j] where it is when its home k lies cyclically in (i, j]
            if (i <= j and i < k and k <= j) or (i > j and (i < k or k <= j)):
                continue
            self.keys[i] = self.keys[j]
            self.vals[i] = self.vals[j]
            i = j
        self.vals[i] = -1
        self.used -= 1

    @property
    def pending(self) -> int:
        return self.used

    @property
    def pending_capacity(self) -> int:
        return self.mask + 1

    @property
    def published_rows(self) -> int:
        return self.pub.n

    @property
    def consumed_rows(self) -> int:
        return self.con.n

    @property
    def published_base(self) -> int:
        return self.pub_base

    # ---- hot path ----------------------------------------------------------------------------
    cdef inline int _row(self, uint32_t producer, int16_t queue_idx, int64_t seq, int32_t size,
                         int64_t t_intended, int64_t t_sent, bint confirm) except -1:
        cdef Cols* t = &self.pub
        cdef Py_ssize_t i = t.n
        if i == t.cap:
            _cols_grow(t)
        (<int32_t*>t.ptr[P_PRODUCER])[i] = <int32_t>producer
        (<int16_t*>t.ptr[P_QUEUE])[i] = queue_idx
        (<int32_t*>t.ptr[P_SIZE])[i] = size
        (<int64_t*>t.ptr[P_SEQ])[i] = seq
        (<int64_t*>t.ptr[P_INTENDED])[i] = t_intended
        (<int64_t*>t.ptr[P_SENT])[i] = t_sent
        (<int64_t*>t.ptr[P_CONFIRMED])[i] = 0
        if confirm:
            (<int8_t*>t.ptr[P_OUTCOME])[i] = PENDING
            self._map_put((<uint64_t>producer << 32) | <uint64_t>seq, self.pub_base + i)
        else:
            (<int8_t*>t.ptr[P_OUTCOME])[i] = UNCONFIRMED
        t.n = i + 1
        self.n_published += 1
        return 0

    def published(self, uint32_t producer, int16_t queue_idx, int64_t seq, int32_t size,
                  int64_t t_intended, int64_t t_sent, bint confirm) -> None:
        self._row(producer, queue_idx, seq, size, t_intended, t_sent, confirm)

    def drop_last_published(self) -> None:
        """Forget the newest row (its publish failed after it was stamped and recorded)."""
        cdef Cols* t = &self.pub
        cdef Py_ssize_t i = t.n - 1
        cdef Py_ssize_t slot
        if i < 0:
            return
        if (<int8_t*>t.ptr[P_OUTCOME])[i] == PENDING:
            slot = self._map_find((<uint64_t><uint32_t>(<int32_t*>t.ptr[P_PRODUCER])[i] << 32)
                                  | <uint64_t>(<int64_t*>t.ptr[P_SEQ])[i])
            if slot >= 0 and self.vals[slot] == self.pub_base + i:
                self._map_delete(slot)
        t.n = i
        self.n_published -= 1

    cdef inline void _confirmed(self, uint64_t key, bint acked, int64_t t_ns) noexcept:
        cdef Py_ssize_t slot = self._map_find(key)
        cdef Py_ssize_t i
        cdef int64_t* p
        cdef Cols* t = &self.pub
        if slot < 0:            # late confirm after a timeout, or a duplicate
            return
        i = self.vals[slot] - self.pub_base
        self._map_delete(slot)
        (<int64_t*>t.ptr[P_CONFIRMED])[i] = t_ns
        if self.clat_n == self.clat_cap:
            p = <int64_t*>realloc(self.clat, self.clat_cap * 2 * 8)
            if p != NULL:
                self.clat = p
                self.clat_cap *= 2
        if self.clat_n < self.clat_cap:
            self.clat[self.clat_n] = t_ns - (<int64_t*>t.ptr[P_SENT])[i]
            self.clat_n += 1
        if (<int8_t*>t.ptr[P_OUTCOME])[i] != RETURNED:
            (<int8_t*>t.ptr[P_OUTCOME])[i] = ACK if acked else NACK
        if acked:
            self.n_confirmed += 1
        else:
            self.n_nacked += 1

    def confirmed(self, uint32_t producer, int64_t seq, bint acked, int64_t t_ns) -> None:
        self._confirmed((<uint64_t>producer << 32) | <uint64_t>seq, acked, t_ns)

    def returned(self, body, int64_t t_ns) -> bool:
        """Mark the returned message's row; False when the body carries no stamp."""
        cdef uint32_t producer
        cdef uint32_t seq
        cdef Py_buffer view
        cdef Py_ssize_t slot, i
        cdef Cols* t = &self.pub
        try:
            PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
        except (TypeError, BufferError):
            return False
        try:
            if view.len < STAMP_SIZE:
                return False
            producer = stamp_producer(view.buf)
            seq = stamp_seq(view.buf)
        finally:
            PyBuffer_Release(&view)
        self.n_returned += 1
        slot = self._map_find((<uint64_t>producer << 32) | seq)
        if slot >= 0:
            (<int8_t*>t.ptr[P_OUTCOME])[self.vals[slot] - self.pub_base] = RETURNED
            return True
        # confirms off: find it among buffered rows (rare path: unroutable messages)
        for i in range(t.n - 1, -1, -1):
            if (<int32_t*>t.ptr[P_PRODUCER])[i] == <int32_t>producer and (<int64_t*>t.ptr[P_SEQ])[i] == seq:
                (<int8_t*>t.ptr[P_OUTCOME])[i] = RETURNED
                break
        return True

    cdef inline bint _consumed(self, int32_t consumer, int16_t queue_idx, const uint8_t* p, Py_ssize_t size,
                               bint redelivered, int64_t t_received) except -1:
        cdef Cols* t = &self.con
        cdef Py_ssize_t i = t.n
        if size < STAMP_SIZE:
            return False
        if i == t.cap:
            _cols_grow(t)
        (<int32_t*>t.ptr[C_CONSUMER])[i] = consumer
        (<int16_t*>t.ptr[C_QUEUE])[i] = queue_idx
        (<int32_t*>t.ptr[C_PRODUCER])[i] = <int32_t>stamp_producer(p)
        (<int32_t*>t.ptr[C_SIZE])[i] = <int32_t>size
        (<int64_t*>t.ptr[C_SEQ])[i] = stamp_seq(p)
        (<int64_t*>t.ptr[C_INTENDED])[i] = stamp_t_intended(p)
        (<int64_t*>t.ptr[C_SENT])[i] = stamp_t_sent(p)
        (<int64_t*>t.ptr[C_RECEIVED])[i] = t_received
        (<int8_t*>t.ptr[C_REDELIVERED])[i] = 1 if redelivered else 0
        t.n = i + 1
        self.n_consumed += 1
        return True

    cdef bint _consume_obj(self, int32_t consumer, int16_t queue_idx, object body, bint redelivered,
                           int64_t t_received) except -1:
        cdef Py_buffer view
        if PyBytes_CheckExact(body):
            return self._consumed(consumer, queue_idx, <const uint8_t*>PyBytes_AS_STRING(body),
                                  PyBytes_GET_SIZE(body), redelivered, t_received)
        try:
            PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
        except (TypeError, BufferError):        # not a buffer: no stamp to read
            return False
        try:
            return self._consumed(consumer, queue_idx, <const uint8_t*>view.buf, view.len, redelivered, t_received)
        finally:
            PyBuffer_Release(&view)

    def consumed(self, int32_t consumer, int16_t queue_idx, body, bint redelivered, int64_t t_received):
        """Record one delivery; returns (producer, seq) or None for a body without a stamp."""
        cdef Cols* t = &self.con
        if not self._consume_obj(consumer, queue_idx, body, redelivered, t_received):
            return None
        return (<uint32_t>(<int32_t*>t.ptr[C_PRODUCER])[t.n - 1], (<int64_t*>t.ptr[C_SEQ])[t.n - 1])

    # ---- periodic ------------------------------------------------------------------------------
    def take_confirm_latencies(self) -> Column:
        cdef int64_t* fresh = <int64_t*>malloc(MIN_CAP * 8)
        cdef Column c
        if fresh == NULL:
            raise MemoryError()
        c = _adopt(<char*>self.clat, self.clat_n, 8)
        self.clat = fresh
        self.clat_n = 0
        self.clat_cap = MIN_CAP
        return c

    def take_e2e(self) -> Column:
        """received − intended of the deliveries since the last call."""
        cdef Cols* t = &self.con
        cdef Py_ssize_t start = self.progress_from, n = t.n, i
        cdef int64_t* out
        if start > n:
            start = n
        out = <int64_t*>malloc((n - start if n > start else 1) * 8)
        if out == NULL:
            raise MemoryError()
        for i in range(start, n):
            out[i - start] = (<int64_t*>t.ptr[C_RECEIVED])[i] - (<int64_t*>t.ptr[C_INTENDED])[i]
        self.progress_from = n
        return _adopt(<char*>out, n - start, 8)

    def expire(self, int64_t now_ns, int64_t timeout_ns) -> int:
        """Time out pending confirms sent more than timeout_ns before now_ns; returns how many."""
        return self._expire(now_ns, timeout_ns, False, TIMEOUT)

    def expire_all(self) -> int:
        """Time out every pending confirm (close)."""
        return self._expire(0, 0, True, TIMEOUT)

    def lose_pending(self) -> int:
        """Mark every pending confirm ``connection_lost`` (the connection died before it came); how many.
        A returned message keeps ``returned``; a confirm that arrives later is ignored, as after a timeout."""
        return self._expire(0, 0, True, CONNECTION_LOST)

    cdef Py_ssize_t _expire(self, int64_t now_ns, int64_t timeout_ns, bint everything, int8_t outcome) except -1:
        cdef Py_ssize_t cap = self.mask + 1, s, i, n = 0
        cdef uint64_t* hit
        cdef Cols* t = &self.pub
        if self.used == 0:
            return 0
        hit = <uint64_t*>malloc(self.used * 8)
        if hit == NULL:
            raise MemoryError()
        for s in range(cap):
            if self.vals[s] != -1:
                i = self.vals[s] - self.pub_base
                if everything or now_ns - (<int64_t*>t.ptr[P_SENT])[i] > timeout_ns:
                    hit[n] = self.keys[s]
                    n += 1
                    if (<int8_t*>t.ptr[P_OUTCOME])[i] != RETURNED:
                        (<int8_t*>t.ptr[P_OUTCOME])[i] = outcome
        for i in range(n):
            s = self._map_find(hit[i])
            if s >= 0:
                self._map_delete(s)
        free(hit)
        if outcome == CONNECTION_LOST:
            self.n_connection_lost += n
        else:
            self.n_timeout += n
        return n

    def flushable_published(self) -> int:
        """Leading published rows that are complete: up to the oldest still pending."""
        cdef Py_ssize_t n = self.pub.n, s, low
        if self.used:
            for s in range(self.mask + 1):
                if self.vals[s] != -1:
                    low = self.vals[s] - self.pub_base
                    if low < n:
                        n = low
        return n

    def take_published(self, Py_ssize_t n) -> tuple:
        """Detach published rows [0, n) as Columns (order: PUBLISHED_COLUMNS)."""
        if n < 0 or n > self.pub.n:
            raise ValueError(f"take_published: {n} of {self.pub.n} rows")
        cols = _cols_take(&self.pub, n)
        self.pub_base += n
        return cols

    def take_consumed(self) -> tuple:
        """Detach every consumed row as Columns (order: CONSUMED_COLUMNS)."""
        cdef Py_ssize_t n = self.con.n
        cols = _cols_take(&self.con, n)
        self.progress_from = self.progress_from - n if self.progress_from > n else 0
        return cols


cdef class Stamper:
    """One producer's publish path: stamp the reused body, record the row, in one call."""

    cdef RecorderCore core
    cdef object body            # the bytearray every message of this producer reuses
    cdef readonly uint32_t producer
    cdef int16_t queue_idx
    cdef int32_t size
    cdef bint confirm

    def __cinit__(self, RecorderCore core, bytearray body, uint32_t producer, int16_t queue_idx, bint confirm) -> None:
        if PyByteArray_GET_SIZE(body) < STAMP_SIZE:
            raise ValueError(f"body is shorter than the {STAMP_SIZE}-byte stamp")
        self.core = core
        self.body = body
        self.producer = producer
        self.queue_idx = queue_idx
        self.size = <int32_t>PyByteArray_GET_SIZE(body)
        self.confirm = confirm

    def stamp(self, int64_t seq, int64_t t_intended, int64_t not_after) -> int:
        """Take t_sent = time.time_ns(); if it is before ``not_after`` stamp the body with
        (producer, seq, t_intended, t_sent), record the row and return t_sent, else 0."""
        cdef int64_t t_sent = realtime_ns()
        if t_sent >= not_after:
            return 0
        self._stamp(seq, t_intended, t_sent)
        return t_sent

    def stamp_now(self, int64_t seq, int64_t not_after) -> int:
        """``stamp`` with t_intended = t_sent (unlimited rate: no schedule)."""
        cdef int64_t t_sent = realtime_ns()
        if t_sent >= not_after:
            return 0
        self._stamp(seq, t_sent, t_sent)
        return t_sent

    cdef int _stamp(self, int64_t seq, int64_t t_intended, int64_t t_sent) except -1:
        if seq < 0 or seq > 0xffffffff:
            raise OverflowError(f"seq {seq} does not fit the stamp's u32")
        if PyByteArray_GET_SIZE(self.body) < STAMP_SIZE:
            raise ValueError(f"body is shorter than the {STAMP_SIZE}-byte stamp")
        write_stamp(PyByteArray_AS_STRING(self.body), self.producer, <uint32_t>seq, t_intended, t_sent)
        self.core._row(self.producer, self.queue_idx, seq, self.size, t_intended, t_sent, self.confirm)
        return 0

    def unstamp(self) -> None:
        """Undo the last stamp's row (the publish that followed it raised)."""
        self.core.drop_last_published()


cdef class ConfirmSink:
    """PublishSink core of one producer: confirms go straight to the recorder core."""

    cdef RecorderCore _core
    cdef object _recorder
    cdef uint64_t _key_hi
    cdef readonly uint32_t producer

    def __init__(self, RecorderCore core, recorder, uint32_t producer) -> None:
        self._core = core
        self._recorder = recorder
        self.producer = producer
        self._key_hi = <uint64_t>producer << 32

    def on_confirm(self, int64_t seq, bint acked, int64_t t_ns) -> None:
        self._core._confirmed(self._key_hi | <uint64_t>seq, acked, t_ns)

    def on_return(self, body, int64_t t_ns) -> None:
        self._recorder.returned(body, t_ns)


cdef class ConsumerTap:
    """Per-consumer on_message target: records a delivery, stops at the message count."""

    cdef RecorderCore _core
    cdef readonly object recorder
    cdef readonly int32_t consumer_id
    cdef readonly int16_t queue_idx
    cdef readonly object limit
    cdef bint _limited
    cdef int64_t _limit
    cdef public int64_t count
    cdef readonly object done

    def __init__(self, RecorderCore core, recorder, int32_t consumer_id, int16_t queue_idx, limit, done) -> None:
        self._core = core
        self.recorder = recorder
        self.consumer_id = consumer_id
        self.queue_idx = queue_idx
        self.limit = limit
        self._limited = limit is not None
        self._limit = 0 if limit is None else limit
        self.count = 0
        self.done = done

    def __call__(self, body, bint redelivered, int64_t t_received) -> None:
        if self._limited and self.count >= self._limit:
            return
        self._core._consume_obj(self.consumer_id, self.queue_idx, body, redelivered, t_received)
        self.count += 1
        if self._limited and self.count >= self._limit:
            self.done.set()
