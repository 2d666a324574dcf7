# RecorderCore: the rows of one task attempt, its pending confirms (open-addressing map) and counters.

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
