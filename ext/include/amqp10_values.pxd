"""AMQP 1.0 value framing (part 1 §1.6): constructor widths and ``skip_value``, shared by the codec
(ext/codec/amqp10.pyx) and the link's frame reader (ext/drivers/amqp10_link.pyx).

One definition of how far a value reaches, so the general decoder and the per-message reader agree on
every constructor and on the nesting limit. Inline in a .pxd: each cimport compiles them into the caller
(the link skips a delivery-tag per message), and reads go through ``rc_take``'s bounds check.
"""
from byteorder cimport get_be32
from rcursor cimport RCursor, rc_take

cdef enum:
    AMQP10_MAX_DEPTH = 64      # described / compound values nested deeper are refused (CodecError)


cdef inline int amqp10_code_width(int code) noexcept nogil:
    """Payload width of a fixed-width constructor, -1 for variable width, -2 if invalid."""
    if 0x40 <= code <= 0x45:
        return 0
    if 0x50 <= code <= 0x56:
        return 1
    if code == 0x60 or code == 0x61:
        return 2
    if 0x70 <= code <= 0x74:
        return 4
    if 0x80 <= code <= 0x84:
        return 8
    if code == 0x94 or code == 0x98:
        return 16
    if (code == 0xa0 or code == 0xa1 or code == 0xa3 or code == 0xb0 or code == 0xb1
            or code == 0xb3 or code == 0xc0 or code == 0xc1 or code == 0xd0 or code == 0xd1
            or code == 0xe0 or code == 0xf0):
        return -1
    return -2


cdef inline int amqp10_refuse(RCursor* r, Py_ssize_t off, str msg) except -1:
    # cold path: the import runs only when an input is malformed
    from rbench.errors import CodecError
    raise CodecError(msg, r.base + off)


cdef inline int amqp10_skip_described(RCursor* r, Py_ssize_t off, int depth) except -1:
    """The descriptor and the value after a 0x00 constructor at ``off``: the recursive (rare) case."""
    if depth >= AMQP10_MAX_DEPTH:
        amqp10_refuse(r, off, f"nesting deeper than {AMQP10_MAX_DEPTH} levels")
    amqp10_skip_value(r, depth + 1)
    return amqp10_skip_value(r, depth + 1)


cdef inline int amqp10_skip_value(RCursor* r, int depth) except -1:
    """Step over one encoded value (described or not) without building it; sizes bounds-checked.

    Not recursive itself (a described value goes through amqp10_skip_described), so the C compiler
    can inline it into the caller: the link skips a delivery-tag per message."""
    cdef Py_ssize_t off = r.pos
    cdef int code = rc_take(r, 1, "constructor")[0]
    cdef int width
    if code == 0x00:
        return amqp10_skip_described(r, off, depth)
    width = amqp10_code_width(code)
    if width >= 0:
        rc_take(r, width, "value")
    elif width == -1:
        if code == 0xb0 or code == 0xb1 or code == 0xb3 or code == 0xd0 or code == 0xd1 or code == 0xf0:
            rc_take(r, get_be32(rc_take(r, 4, "32-bit size")), "value")
        else:
            rc_take(r, rc_take(r, 1, "8-bit size")[0], "value")
    else:
        amqp10_refuse(r, off, f"invalid constructor 0x{code:02x}")
    return 0
