"""The 24-byte body stamp, for the extensions: the C side of rbench/runtime/stamp.py.

Layout (little-endian): producer u32 | seq u32 | t_intended i64 | t_sent i64. The Python module is the
reference; the recorder exports ``STAMP_LAYOUT`` built from these constants and a unit test
(tests/unit/test_stamp.py) asserts it equals the one stamp.py derives from its struct format, so the
two cannot drift. Inline, like byteorder.pxd: each cimport compiles them into the caller.
"""
from libc.stdint cimport int64_t, uint32_t, uint64_t

from byteorder cimport get_le32, get_le64, put_le32, put_le64

cdef enum:
    STAMP_SIZE = 24
    STAMP_PRODUCER_AT = 0
    STAMP_SEQ_AT = 4
    STAMP_T_INTENDED_AT = 8
    STAMP_T_SENT_AT = 16


cdef inline void write_stamp(void* dst, uint32_t producer, uint32_t seq, int64_t t_intended,
                             int64_t t_sent) noexcept nogil:
    cdef unsigned char* p = <unsigned char*>dst
    put_le32(p + STAMP_PRODUCER_AT, producer)
    put_le32(p + STAMP_SEQ_AT, seq)
    put_le64(p + STAMP_T_INTENDED_AT, <uint64_t>t_intended)
    put_le64(p + STAMP_T_SENT_AT, <uint64_t>t_sent)

cdef inline uint32_t stamp_producer(const void* src) noexcept nogil:
    return get_le32(<const unsigned char*>src + STAMP_PRODUCER_AT)

cdef inline uint32_t stamp_seq(const void* src) noexcept nogil:
    return get_le32(<const unsigned char*>src + STAMP_SEQ_AT)

cdef inline int64_t stamp_t_intended(const void* src) noexcept nogil:
    return <int64_t>get_le64(<const unsigned char*>src + STAMP_T_INTENDED_AT)

cdef inline int64_t stamp_t_sent(const void* src) noexcept nogil:
    return <int64_t>get_le64(<const unsigned char*>src + STAMP_T_SENT_AT)
