# The per-message entry points the drivers call: Stamper (publish), ConfirmSink (confirms), ConsumerTap (deliveries).

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

    def record_in(self, int16_t queue_idx, body, bint redelivered, int64_t t_received) -> None:
        """``__call__`` for a delivery from another queue than the consumer's own (a super stream's partition):
        recorded under ``queue_idx``, counted against the same limit."""
        if self._limited and self.count >= self._limit:
            return
        self._core._consume_obj(self.consumer_id, queue_idx, body, redelivered, t_received)
        self.count += 1
        if self._limited and self.count >= self._limit:
            self.done.set()
