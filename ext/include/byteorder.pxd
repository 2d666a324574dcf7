"""Byte order: unaligned big- and little-endian loads and stores, shared by every extension.

Written byte by byte on purpose: it is correct at any alignment and on any host, and gcc/clang
at -O2 and above fold each one into a single (byte-swapped) move, so there is nothing to gain
from memcpy + bswap intrinsics. Inline in a .pxd so that each cimport compiles them into the
caller: no call crosses a module boundary. Pointers are void* so char*, unsigned char* and
uint8_t* callers all pass without casts.
"""
from libc.stdint cimport uint16_t, uint32_t, uint64_t


# big-endian (network order: AMQP 0-9-1, AMQP 1.0, the stream protocol) -------------------

cdef inline void put_be16(void* dst, uint16_t v) noexcept nogil:
    cdef unsigned char* p = <unsigned char*>dst
    p[0] = <unsigned char>(v >> 8)
    p[1] = <unsigned char>v

cdef inline void put_be32(void* dst, uint32_t v) noexcept nogil:
    cdef unsigned char* p = <unsigned char*>dst
    p[0] = <unsigned char>(v >> 24)
    p[1] = <unsigned char>(v >> 16)
    p[2] = <unsigned char>(v >> 8)
    p[3] = <unsigned char>v

cdef inline void put_be64(void* dst, uint64_t v) noexcept nogil:
    cdef unsigned char* p = <unsigned char*>dst
    put_be32(p, <uint32_t>(v >> 32))
    put_be32(p + 4, <uint32_t>v)

cdef inline uint16_t get_be16(const void* src) noexcept nogil:
    cdef const unsigned char* p = <const unsigned char*>src
    return <uint16_t>((<uint16_t>p[0] << 8) | p[1])

cdef inline uint32_t get_be32(const void* src) noexcept nogil:
    cdef const unsigned char* p = <const unsigned char*>src
    return ((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8)
            | <uint32_t>p[3])

cdef inline uint64_t get_be64(const void* src) noexcept nogil:
    cdef const unsigned char* p = <const unsigned char*>src
    return (<uint64_t>get_be32(p) << 32) | get_be32(p + 4)


# little-endian (rbench's own 24-byte body stamp, see rbench/runtime/stamp.py) ------------

cdef inline void put_le32(void* dst, uint32_t v) noexcept nogil:
    cdef unsigned char* p = <unsigned char*>dst
    p[0] = <unsigned char>v
    p[1] = <unsigned char>(v >> 8)
    p[2] = <unsigned char>(v >> 16)
    p[3] = <unsigned char>(v >> 24)

cdef inline void put_le64(void* dst, uint64_t v) noexcept nogil:
    cdef unsigned char* p = <unsigned char*>dst
    put_le32(p, <uint32_t>v)
    put_le32(p + 4, <uint32_t>(v >> 32))

cdef inline uint32_t get_le32(const void* src) noexcept nogil:
    cdef const unsigned char* p = <const unsigned char*>src
    return (<uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16)
            | (<uint32_t>p[3] << 24))

cdef inline uint64_t get_le64(const void* src) noexcept nogil:
    cdef const unsigned char* p = <const unsigned char*>src
    return <uint64_t>get_le32(p) | (<uint64_t>get_le32(p + 4) << 32)
