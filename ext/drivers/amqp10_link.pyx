# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""AMQP 1.0 link hot path: transfer, disposition and flow frames, in C.

Why a separate module from ext/codec/amqp10.pyx: that one is the general type system and
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
from posix.unistd cimport write
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_FromStringAndSize

# shared primitives (ext/include/): inline, so every call stays a C call in this module
from byteorder cimport get_be16, get_be32, get_be64, put_be16, put_be32
from clock cimport realtime_ns
from stamp cimport STAMP_SIZE as STAMP, stamp_seq, stamp_t_intended, stamp_t_sent, write_stamp
from rcursor cimport RCursor, rc_init
from amqp10_values cimport amqp10_skip_value

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


cdef class LatencyTap                 # reader.pxi; Receiver._deliver feeds it without a Python call


include "amqp10_link/decode.pxi"      # fields, header, data section (skip_value: ext/include/amqp10_values.pxd)
include "amqp10_link/sender.pxi"      # Sender
include "amqp10_link/receiver.pxi"    # Receiver
include "amqp10_link/reader.pxi"      # FrameReader, LatencyTap, empty_frame
