# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""AMQP 1.0 type system and message format (OASIS AMQP 1.0 parts 1 and 3), compiled.

Encoding writes into one C buffer per call (a stack buffer that moves to the heap only
for large values) and dispatches on the exact Python type before any isinstance check.
Decoding reads a raw pointer with an explicit bounds check before every read, never
allocates by a length it has not checked against the remaining bytes, limits nesting to
MAX_DEPTH, and returns `data` bodies as memoryview slices of the input (zero copy).
Every malformed input raises rbench.errors.CodecError(message, offset).

The public, documented face is rbench.codec.amqp10; see docs/codec.md for the mapping.

One extension module built from this file and the parts it includes (ext/codec/amqp10/*.pxi,
in dependency order), so calls between the parts are plain C calls within one module.
"""
cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE, \
    PyBytes_CheckExact
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.dict cimport PyDict_SetItem
from cpython.ref cimport Py_INCREF, PyObject
from cpython.long cimport PyLong_FromLongLong, PyLong_FromUnsignedLongLong, \
    PyLong_AsLongLongAndOverflow, PyLong_AsUnsignedLongLong
from cpython.float cimport PyFloat_FromDouble
from cpython.unicode cimport PyUnicode_DecodeUTF8, PyUnicode_AsUTF8AndSize
from cpython.memoryview cimport PyMemoryView_FromObject
from cpython.datetime cimport import_datetime, datetime_new, PyDateTime_Check, \
    datetime_year, datetime_month, datetime_day, datetime_hour, datetime_minute, \
    datetime_second, datetime_microsecond, datetime_tzinfo
from libc.stdint cimport INT64_MIN, uint8_t, uint16_t, uint32_t, uint64_t, int8_t, int16_t, int32_t, \
    int64_t
from libc.string cimport memcpy, memmove, memcmp

# shared primitives (ext/include/): inline, so every call stays a C call in this module
from byteorder cimport put_be16, put_be32, put_be64, get_be16, get_be32, get_be64
from wbuf cimport WBuf, wbuf_init, wbuf_release, wbuf_claim, wbuf_put1, wbuf_bytes
from rcursor cimport RCursor, rc_init, rc_take, rc_truncated
from amqp10_values cimport AMQP10_MAX_DEPTH, amqp10_code_width, amqp10_skip_value

import datetime as _dt
import uuid as _uuid

from rbench.errors import CodecError

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object)
    void* PyUnicode_DATA(PyObject*)
    Py_ssize_t PyUnicode_GET_LENGTH_RAW "PyUnicode_GET_LENGTH"(PyObject*)
    void Py_XDECREF_RAW "Py_XDECREF"(PyObject*)
    object PySequence_GetSlice(object, Py_ssize_t, Py_ssize_t)
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    Py_UCS4 PyUnicode_READ_CHAR(object, Py_ssize_t)

import_datetime()

DEF STACK_BUF = 512

MAX_DEPTH = AMQP10_MAX_DEPTH
BODY_DATA = "data"
BODY_SEQUENCE = "sequence"
BODY_VALUE = "value"

cdef object UTC = _dt.timezone.utc
cdef object PyUUID = _uuid.UUID
cdef object SAFE_UNKNOWN = _uuid.SafeUUID.unknown
cdef object _setattr = object.__setattr__
cdef object _object_new = object.__new__
# Decoded map keys and symbols repeat from message to message (field names, annotation
# keys, content types): a direct-mapped cache of short ASCII str/Symbol objects keyed by
# the raw bytes saves the decode, the allocation and (since str caches its hash) the
# hashing on dict insert. Bounded: CACHE_SLOTS entries of at most CACHE_MAXLEN bytes.
DEF CACHE_SLOTS = 1024
DEF CACHE_MAXLEN = 40
cdef PyObject* KEY_CACHE[CACHE_SLOTS]
cdef PyObject* SYM_CACHE[CACHE_SLOTS]


include "amqp10/types.pxi"            # type wrappers, Described, Array, Header, Properties, Message
include "amqp10/common.pxi"           # calendar
include "amqp10/encode_scalar.pxi"    # strings, binaries, integers -> bytes
include "amqp10/encode.pxi"           # values -> bytes
include "amqp10/encode_message.pxi"   # sections, encode_value/encode_message/encode_data
include "amqp10/decode.pxi"           # bytes -> values
include "amqp10/decode_message.pxi"   # sections, decode_value/decode_message/decode_data*
