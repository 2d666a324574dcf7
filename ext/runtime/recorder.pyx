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


include "recorder/columns.pxi"     # Column, the growable columns, strings()
include "recorder/core.pxi"        # RecorderCore
include "recorder/taps.pxi"        # Stamper, ConfirmSink, ConsumerTap
