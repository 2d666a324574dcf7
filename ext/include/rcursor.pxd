"""A read cursor with a bounds check before every read, shared by every extension that decodes.

``rc_take`` is the only way to move forward: it checks ``n`` against what is left and raises
``rbench.errors.CodecError`` naming what was being read and the offset in the caller's whole
input (``base + pos``), so a decoder never reads past its input or trusts a claimed length.
"""
cdef struct RCursor:
    const unsigned char* buf
    Py_ssize_t pos      # next byte to read, relative to buf
    Py_ssize_t end      # bytes readable at buf
    Py_ssize_t base     # offset of buf[0] in the caller's input (for error offsets)
    Py_ssize_t budget   # codec-specific allowance (AMQP 1.0: zero-width array elements)


cdef inline void rc_init(RCursor* r, const unsigned char* buf, Py_ssize_t n,
                         Py_ssize_t base) noexcept nogil:
    r.buf = buf
    r.pos = 0
    r.end = n
    r.base = base
    r.budget = n + 1024

cdef inline int rc_truncated(RCursor* r, Py_ssize_t n, str what) except -1:
    # cold path: the import runs only when an input is malformed
    from rbench.errors import CodecError
    raise CodecError(f"truncated {what}: need {n} bytes, {r.end - r.pos} left", r.base + r.pos)

cdef inline const unsigned char* rc_take(RCursor* r, Py_ssize_t n, str what) except NULL:
    cdef const unsigned char* p
    if n < 0 or n > r.end - r.pos:
        rc_truncated(r, n, what)
    p = r.buf + r.pos
    r.pos += n
    return p
