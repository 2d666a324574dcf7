"""A growable write buffer: one C buffer per encode, shared by every extension that writes.

The caller starts it on a stack (or embedded) array; it moves to the heap only when a value
outgrows that array, doubling each time. ``wbuf_claim`` is the one bounds check before a
write: it returns a pointer to ``n`` writable bytes and advances ``pos``. Always pair
``wbuf_init`` with ``wbuf_release`` (in a ``finally`` or ``__dealloc__``).
"""
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy


cdef struct WBuf:
    unsigned char* buf
    Py_ssize_t pos     # bytes written
    Py_ssize_t cap     # bytes available at buf
    int heap           # buf was malloc'ed (free it), else it is the caller's array


cdef inline void wbuf_init(WBuf* w, unsigned char* first, Py_ssize_t cap) noexcept nogil:
    w.buf = first
    w.pos = 0
    w.cap = cap
    w.heap = 0

cdef inline void wbuf_release(WBuf* w) noexcept nogil:
    if w.heap:
        free(w.buf)
        w.heap = 0
    w.buf = NULL
    w.pos = 0
    w.cap = 0

cdef inline int wbuf_grow(WBuf* w, Py_ssize_t n) except -1:
    cdef Py_ssize_t cap = w.cap * 2 if w.cap > 0 else 256
    cdef unsigned char* nb
    while cap < w.pos + n:
        cap *= 2
    if w.heap:
        nb = <unsigned char*>realloc(w.buf, cap)
    else:
        nb = <unsigned char*>malloc(cap)
        if nb != NULL and w.pos:
            memcpy(nb, w.buf, w.pos)
    if nb == NULL:
        raise MemoryError()
    w.buf = nb
    w.cap = cap
    w.heap = 1
    return 0

cdef inline unsigned char* wbuf_claim(WBuf* w, Py_ssize_t n) except NULL:
    cdef unsigned char* p
    if w.pos + n > w.cap:
        wbuf_grow(w, n)
    p = w.buf + w.pos
    w.pos += n
    return p

cdef inline int wbuf_put1(WBuf* w, unsigned char c) except -1:
    wbuf_claim(w, 1)[0] = c
    return 0

cdef inline int wbuf_write(WBuf* w, const void* data, Py_ssize_t n) except -1:
    memcpy(wbuf_claim(w, n), data, n)
    return 0

cdef inline bytes wbuf_bytes(WBuf* w):
    return PyBytes_FromStringAndSize(<char*>w.buf, w.pos)
