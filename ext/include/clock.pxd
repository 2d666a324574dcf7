"""The clock: nanoseconds from clock_gettime, without a Python call, shared by every extension.

``realtime_ns`` is the wall clock (what ``time.time_ns()`` reads): stamps and samples carry it
because they are compared across processes and hosts. ``monotonic_ns`` is for intervals inside
one process. Inline in a .pxd so each cimport compiles them into the caller.
"""
from libc.stdint cimport int64_t
from libc.time cimport time_t

cdef extern from "<time.h>" nogil:
    ctypedef int clockid_t
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(clockid_t clk_id, timespec* tp)
    clockid_t CLOCK_REALTIME
    clockid_t CLOCK_MONOTONIC


cdef inline int64_t realtime_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec

cdef inline int64_t monotonic_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec
